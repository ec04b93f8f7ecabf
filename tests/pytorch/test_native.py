"""The C++ road's Python side (pytorch/native.py) and that native.cpp compiles (slow), on the CPU."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from autotune.core.types import UserError  # noqa: E402
from autotune.gpu.launcher import NATIVE_KINDS, native_arg  # noqa: E402
from autotune.pytorch import impl, native, route  # noqa: E402


@pytest.mark.parametrize(("value", "on"), [(None, True), ("", True), ("0", False), ("1", True), ("yes\n", None)])
def test_the_road_is_on_unless_turned_off(monkeypatch, value, on):
    monkeypatch.delenv(native.ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(native.ENV, value)
    if on is None:  # another value: one line
        with pytest.raises(UserError, match=r"^AUTOTUNE_NATIVE must be 1 .* or 0 .*, not 'yes\\n'$"):
            native.wanted()
    else:
        assert native.wanted() is on


def test_turned_off_it_builds_nothing(monkeypatch):
    monkeypatch.setenv(native.ENV, "0")
    monkeypatch.setattr(native, "_status", "not started")
    monkeypatch.setattr(native, "_build", lambda: pytest.fail("built"))
    assert native.wait(0) == "not started"


def test_a_failed_build_says_why_and_leaves_the_python_road(monkeypatch):
    monkeypatch.setattr(native, "_status", "building")
    monkeypatch.setattr(native, "_load", lambda: (_ for _ in ()).throw(OSError("x\ng++: not found")))
    with pytest.warns(RuntimeWarning, match=r"was not built: OSError: g\+\+: not found; .*AUTOTUNE_NATIVE=0 skips"):
        native._build()
    assert native.product is None and native.wait(0).startswith("not built")


def test_a_build_binds_the_driver_hands_over_the_operator_and_has_layers_timed_again(monkeypatch):
    bound, served, serving = [], [], []
    ext = SimpleNamespace(
        set_driver=lambda *fns: bound.extend(fns),
        product=object(),
        clear=lambda: None,
        serve_operator=lambda *kernels: served.extend(kernels),
        set_serving=serving.append,
    )
    driver = SimpleNamespace(cuLaunchKernel=11, cuStreamIsCapturing=12)
    fake = SimpleNamespace(CDLL=lambda name: driver, cast=lambda f, kind: SimpleNamespace(value=f), c_void_p=None)
    monkeypatch.setattr(native, "ctypes", fake)
    monkeypatch.setattr(native, "_load", lambda: ext)
    for name in ("_ext", "_status", "product"):
        monkeypatch.setattr(native, name, getattr(native, name))
    monkeypatch.setattr(native, "_built", native.threading.Event())
    monkeypatch.setattr(native.api, "on_shortcut_hit", None)
    monkeypatch.setattr(native.atexit, "register", lambda fn: None)
    monkeypatch.setitem(route._TORCH_FASTER, ("a layer",), True)
    monkeypatch.setattr(native, "_serving", False)  # a recording under way when the build ends
    native._build()
    assert bound == [11, 12] and native.status() == "ready" and native.product is ext.product
    # op.py's kernels, handed over at import
    assert served[0] is impl.cuda_product and callable(served[1]) and serving == [False]
    assert served[2] == ["highest", "high", "medium"]
    native.serving(True)
    assert serving == [False, True]
    assert native.api.on_shortcut_hit is native.arm and not route._TORCH_FASTER


def test_each_argument_gets_its_kind_and_value():
    ints = {"M": 7, "lda_k": 12}
    assert native_arg("M", None, ints) == [NATIVE_KINDS["i32"], 7]
    assert native_arg("lda_k", None, ints) == [NATIVE_KINDS["i32"], 12]
    assert native_arg("stride_a", 0, ints) == [NATIVE_KINDS["i64"], 0]
    assert native_arg("alpha", None, ints) == [NATIVE_KINDS["alpha"], 0]
    assert native_arg("beta", None, ints) == [NATIVE_KINDS["f32"], 0]  # 0.0f: a plan is beta 0
    for name, value in (("A", "A"), ("B_IN", "B"), ("C", "C")):
        assert native_arg(name, value, ints) == [NATIVE_KINDS[value], 0]
    assert native_arg("B", 0x7F0000001000, ints) == [NATIVE_KINDS["ptr"], 0x7F0000001000]  # packed
    for name in ("TMAP_A", "nonsense", "WS"):  # a tensor map; no such argument; a pointer unset
        with pytest.raises(ValueError, match=name):
            native_arg(name, None, ints)


class _Ext:
    def __init__(self):
        self.armed, self.by_torch, self.cleared = [], [], 0

    def arm(self, *args):
        self.armed.append(args)

    def arm_torch(self, *args):
        self.by_torch.append(args)

    def clear(self):
        self.cleared += 1


class _Kernel:
    def __init__(self, steps=([1, 2, 3, 1, 256, 0, 4, 0],), ws=None):
        self.steps, self.ws, self.calls = None if steps is None else list(steps), ws, 0

    def recipe(self, M, N, K, pitches, stream):
        self.calls += 1
        return None if self.steps is None else (self.steps, self.ws)

    def launch(self):
        """What a shortcut holds: the kernel's bound launch."""


def _cut(kernel, **changes):
    fields = dict(launch=kernel.launch, spans=None, bound=None, batch=1, shape=(4, 5), M=4, N=5, K=6)
    fields.update(pitches=(6, 5, 5), stream=lambda device: SimpleNamespace(ptr=99), **changes)
    return SimpleNamespace(**fields)


@pytest.fixture
def ext(monkeypatch):
    fake = _Ext()
    monkeypatch.setattr(native, "_ext", fake)
    monkeypatch.setattr(native, "_recipes", {})
    monkeypatch.setattr(native, "_capturing", lambda: False)
    return fake


def test_a_served_call_arms_its_plan_from_one_recipe(ext):
    a, b, kernel = torch.zeros(4, 6), torch.zeros(5, 6), _Kernel()
    for _ in range(2):
        native.arm(_cut(kernel), a, b, False, True, "high")
    assert kernel.calls == 1  # the recipe, and its workspace, made once
    assert len(ext.armed) == 2
    args = ext.armed[0]
    assert args[:7] == (a, b, False, True, native.TIERS["high"], 4, 5)
    assert args[7] == kernel.steps and args[8] == (kernel, None) and args[9] == native.TTL_NS


def test_a_call_cublas_served_arms_a_plan_of_torchs_mm(ext):
    a, b, kernel = torch.zeros(6, 4), torch.zeros(5, 6), _Kernel()
    native.arm(_cut(kernel, bound=object()), a, b, True, True, "medium")
    assert ext.armed == [] and kernel.calls == 0  # no recipe: torch's mm has no steps
    assert ext.by_torch == [(a, b, True, True, native.TIERS["medium"], 4, 5, kernel, native.TTL_NS)]


@pytest.mark.parametrize(
    "change",
    [dict(spans=((0, 4), (0, 4), (0, 4))), dict(batch=3), dict(shape=(2, 4, 5))],
    ids=["out", "batch", "3-d"],
)
@pytest.mark.parametrize("cublas", [False, True])
def test_what_the_cpp_road_cannot_serve_is_not_armed(ext, change, cublas):
    kernel = _Kernel()
    cut = _cut(kernel, bound=object() if cublas else None, **change)
    native.arm(cut, torch.zeros(4, 6), torch.zeros(6, 5), False, False, "highest")
    assert ext.armed == ext.by_torch == [] and kernel.calls == 0


def test_nothing_is_armed_in_a_capture_an_unknown_tier_or_a_plan_without_recipe(ext, monkeypatch):
    a, b = torch.zeros(4, 6), torch.zeros(6, 5)
    native.arm(_cut(_Kernel()), a, b, False, False, "fast")
    kernel = _Kernel(steps=None)  # tensor maps: the Python road's alone
    native.arm(_cut(kernel), a, b, False, False, "highest")
    native.arm(_cut(kernel), a, b, False, False, "highest")
    assert kernel.calls == 1  # "no plan" is remembered too
    monkeypatch.setattr(native, "_capturing", lambda: True)
    native.arm(_cut(_Kernel()), a, b, False, False, "highest")
    assert ext.armed == []


def test_a_plan_that_cannot_be_made_leaves_the_python_road_serving(ext, monkeypatch):
    a, b = torch.zeros(4, 6), torch.zeros(6, 5)

    class NoMemory(_Kernel):
        def recipe(self, *args):
            self.calls += 1
            raise MemoryError("no workspace")

    kernel = NoMemory()
    for _ in range(2):
        native.arm(_cut(kernel), a, b, False, False, "highest")  # no exception: the call was served
    assert kernel.calls == 1 and ext.armed == []
    monkeypatch.setattr(ext, "arm", lambda *args: (_ for _ in ()).throw(RuntimeError("malformed")))
    native.arm(_cut(_Kernel(), M=8), a, b, False, False, "highest")
    assert [v for k, v in native._recipes.items() if k[1] == 8] == [None]


def test_past_its_bounds_every_plan_and_workspace_goes(ext, monkeypatch):
    monkeypatch.setattr(native, "MAX_RECIPES", 2)
    monkeypatch.setattr(native, "_workspace_bytes", 0)
    a, b = torch.zeros(4, 6), torch.zeros(6, 5)
    for M in (4, 8, 12):
        native.arm(_cut(_Kernel(), M=M), a, b, False, False, "highest")
    assert ext.cleared == 1 and len(native._recipes) == 1
    monkeypatch.setattr(native, "MAX_WORKSPACE_BYTES", 100)
    native.arm(_cut(_Kernel(ws=SimpleNamespace(nbytes=101)), M=16), a, b, False, False, "highest")
    assert ext.cleared == 2


def test_the_product_takes_an_armed_plans_answer_first(monkeypatch):
    got = torch.full((2, 3), 7.0)
    seen = []

    def served(a, b, ta, tb, tier, alpha):
        seen.append((ta, tb, tier, alpha))
        return got

    monkeypatch.setattr(native, "product", served)
    a, b = torch.zeros(2, 4), torch.zeros(3, 4)
    assert impl.cuda_product(a, b, False, True, 2, "medium") is got
    assert seen == [(False, True, native.TIERS["medium"], 2)]
    monkeypatch.setattr(impl, "LISTENERS", [lambda *shape: None])  # a recording sees every product
    monkeypatch.setattr(impl, "check_kinds", lambda *tensors: None)
    monkeypatch.setattr(impl, "_autotune_matmul", lambda *args, **kwargs: "the Python road")
    assert impl.cuda_product(a, b, False, True, 2, "medium") == "the Python road"
    assert len(seen) == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_the_cpp_source_compiles(tmp_path):
    from torch.utils.cpp_extension import include_paths

    cuda = native._cuda_includes()
    if not cuda:
        pytest.skip("no CUDA headers")
    # A CPU build of torch lacks the one header its CUDA build generates: an empty one does here.
    (tmp_path / "c10" / "cuda" / "impl").mkdir(parents=True)
    (tmp_path / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("")
    cmd = ["g++", "-std=c++20", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=autotune_native", f"-I{tmp_path}"]
    cmd += [f"-I{p}" for p in [*include_paths(), *cuda, sysconfig.get_paths()["include"]]]
    r = subprocess.run([*cmd, str(native.SOURCE)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
