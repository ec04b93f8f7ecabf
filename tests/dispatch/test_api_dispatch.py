"""autotune.matmul's dispatch without a GPU: the results tables, the choice per shape, the launch
geometry per shape, and the arrays it refuses."""

import functools
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import RESULTS, fake_kernels, families, restamp

from autotune.core.types import Problem
from autotune.dispatch import api
from autotune.dispatch import table as dispatch_table
from autotune.kernels.family import Family
from autotune.kernels.launch import GeometryCache
from autotune.kernels.space import Space
from autotune.records import results, store

SLUG = "nvidia-h200"
LONG_AGO_NS = 1_600_000_000 * 10**9  # 2020: a folder last changed then is past any racy window
T4096, T4097, P64 = Problem(4096, 4096, 4096), Problem(4097, 4097, 4097), Problem(64, 64, 64)


@pytest.fixture(autouse=True)
def _no_tables_from_other_tests(monkeypatch):
    monkeypatch.setattr(dispatch_table, "_TABLES", {})


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The names of the results files read, in order."""
    seen = []
    real = results.load_record

    def spy(path):
        seen.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(results, "load_record", spy)
    return seen


@pytest.fixture
def loads(monkeypatch) -> list[tuple]:
    """Kernels asked for, as (device, config name, source): nothing is compiled, no GPU asked."""
    return fake_kernels(monkeypatch, SLUG)


def _results(tmp_path: Path, name: str = "results") -> Path:
    """A results folder holding the stored H200 fixtures (4096^3 and 4097^3), written long ago."""
    root = tmp_path / name
    shutil.copytree(RESULTS / SLUG, root / SLUG)
    _age(root)
    return root


def _age(root: Path) -> None:
    os.utime(root / SLUG, ns=(LONG_AGO_NS, LONG_AGO_NS))


def _stored() -> dict:
    return json.loads((RESULTS / SLUG / "4096x4096x4096.json").read_text())


def _put(root: Path, shape: Problem, gflops: float | None = None) -> None:
    """A record of `shape` (the 4096^3 one's entries), written as searches write: by a rename."""
    data = _stored()
    data["problem"] = shape.as_dict()
    for entry in data["families"].values():
        entry["gflops"] = gflops or entry["gflops"]
    restamp(data, keep="gflops")
    (root / SLUG).mkdir(parents=True, exist_ok=True)
    store.atomic_write_text(root / SLUG / f"{shape.name}.json", json.dumps(data))


def _clock_and_stats(monkeypatch) -> tuple[list[float], list]:
    """A monotonic clock the test moves (RECHECK_S 0.1), and the folders stat'ed, in order."""
    clock, stats, real = [1000.0], [], dispatch_table._folder_state
    monkeypatch.setattr(dispatch_table.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(dispatch_table, "RECHECK_S", 0.1)
    monkeypatch.setattr(dispatch_table, "_folder_state", lambda f: stats.append(f) or real(f))
    return clock, stats


def _nearest(root, shape: Problem, family=None) -> Problem | None:
    found = dispatch_table.nearest_entry(shape, SLUG, root, family)
    return found and found[0]


def test_a_table_is_read_once_while_its_folder_is_unchanged(tmp_path, reads):
    root = _results(tmp_path)
    first = dispatch_table.nearest_entry(Problem(4000, 4100, 4096), SLUG, root)
    assert first[0] == T4096 and first[1]["config"]["family"] == "warptile"
    assert sorted(reads) == ["4096x4096x4096.json", "4097x4097x4097.json"]
    for _ in range(3):
        assert dispatch_table.nearest_entry(Problem(4000, 4100, 4096), SLUG, root) == first
    assert _nearest(root, Problem(5000, 5000, 5000)) == T4097
    assert len(reads) == 2


def test_a_record_added_or_replaced_is_seen_at_the_next_call(tmp_path, reads):
    root = _results(tmp_path)
    assert _nearest(root, P64) == T4096
    _put(root, P64)
    assert _nearest(root, P64) == P64  # added
    _age(root)
    assert _nearest(root, P64) == P64
    before = len(reads)
    assert _nearest(root, P64) == P64 and len(reads) == before  # trusted again
    _put(root, P64, gflops=1.0)
    assert dispatch_table.nearest_entry(P64, SLUG, root)[1]["gflops"] == 1.0  # replaced
    assert dispatch_table.nearest_entry(P64, SLUG, root, "vectorized")[1]["gflops"] == 1.0


def test_a_change_within_one_tick_of_the_folders_clock_is_not_missed(tmp_path, reads):
    """A filesystem with coarse timestamps gives two renames close together the same mtime: a
    table read within the racy window of its folder's mtime is not trusted on that mtime alone."""
    root = _results(tmp_path)
    now = time.time_ns()
    os.utime(root / SLUG, ns=(now, now))
    assert _nearest(root, P64) == T4096
    _put(root, P64)
    os.utime(root / SLUG, ns=(now, now))  # the same tick: the mtime did not move
    assert _nearest(root, P64) == P64


def test_results_folders_are_kept_apart(tmp_path, reads, monkeypatch):
    a, b = _results(tmp_path, "a"), tmp_path / "b"
    _put(b, P64)
    _age(b)
    assert _nearest(a, P64) == T4096
    assert _nearest(b, P64) == P64
    read = len(reads)
    assert _nearest(a, P64) == T4096 and _nearest(b, P64) == P64
    assert len(reads) == read  # neither pushed the other out
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(b))  # the default folder follows the variable
    assert _nearest(None, P64) == P64
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(a))
    assert _nearest(None, P64) == T4096
    assert _nearest(tmp_path / "none", P64) is None


def test_a_folder_is_looked_at_once_a_window_and_a_change_is_read_after_it(tmp_path, reads, monkeypatch):
    # matmul looks up its table on every call: within RECHECK_S no stat is made and the table
    # read stays; the first call after the window sees a record written meanwhile.
    root = _results(tmp_path)
    clock, stats = _clock_and_stats(monkeypatch)
    first = dispatch_table.table_for(root, SLUG)
    looked = len(stats)
    for _ in range(5):
        assert dispatch_table.table_for(root, SLUG) is first
    assert len(stats) == looked  # no stat within the window
    _put(root, P64)
    _age(root)
    os.utime(root / SLUG, ns=(LONG_AGO_NS + 10**10, LONG_AGO_NS + 10**10))  # changed, and trusted
    clock[0] += 0.05
    assert dispatch_table.table_for(root, SLUG) is first and len(stats) == looked
    clock[0] += 0.06
    after = dispatch_table.table_for(root, SLUG)
    assert after is not first and P64 in {p for p, _ in after.records}
    assert len(stats) > looked


def test_the_default_tables_are_one_lookup_a_window_and_the_environment_is_read_at_each_call(tmp_path, monkeypatch):
    # matmul's default road (./results beside the shipped folder) is kept as one answer while both
    # tables are fresh; AUTOTUNE_RESULTS, set or unset, counts at the very next call, and tables
    # dropped or read again are never answered from what was kept.
    clock, stats = _clock_and_stats(monkeypatch)
    monkeypatch.setattr(dispatch_table, "_SHIPPED", str(_results(tmp_path, "shipped")))
    monkeypatch.setattr(dispatch_table, "_DEFAULT", {})
    monkeypatch.delenv("AUTOTUNE_RESULTS", raising=False)
    work = tmp_path / "work"
    _results(work)
    monkeypatch.chdir(work)
    first = dispatch_table.table_for(None, SLUG)
    looked = len(stats)
    assert all(dispatch_table.table_for(None, SLUG) is first for _ in range(5)) and len(stats) == looked
    other = _results(tmp_path, "other")
    _put(other, P64)
    monkeypatch.setenv("AUTOTUNE_RESULTS", str(other))
    theirs = dispatch_table.table_for(None, SLUG)
    assert theirs.folder == str(other / SLUG) and P64 in {p for p, _ in theirs.records}
    monkeypatch.setenv("AUTOTUNE_RESULTS", "")  # set but empty: the default road, as unset
    assert dispatch_table.table_for(None, SLUG) is first
    monkeypatch.delenv("AUTOTUNE_RESULTS")
    assert dispatch_table.table_for(None, SLUG) is first
    monkeypatch.setattr(dispatch_table, "_TABLES", {})  # dropped: read again within the window
    again = dispatch_table.table_for(None, SLUG)
    assert again is not first and len(again.records) == len(first.records) and len(stats) > looked
    looked = len(stats)
    clock[0] += 0.11  # past the window: the folders are looked at again, the tables kept
    assert dispatch_table.table_for(None, SLUG) is again and len(stats) > looked


def test_the_shipped_tables_are_read_beside_the_users_own(tmp_path, reads, monkeypatch):
    # The shipped folder (a wheel's, or the checkout's) serves each shape ./results has no record
    # of; a shape the user tuned is the user's; run where ./results is the shipped folder, it is
    # read once.
    shipped = _results(tmp_path, "shipped")
    monkeypatch.setattr(dispatch_table, "_SHIPPED", str(shipped))
    monkeypatch.delenv("AUTOTUNE_RESULTS", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert _nearest(None, P64) == T4096  # no ./results: the shipped table
    _put(work / "results", P64, gflops=100.0)
    _age(work / "results")
    assert _nearest(None, P64) == P64  # the user's own shape
    assert _nearest(None, Problem(4096, 4096, 4096)) == T4096  # still there beside it
    _put(work / "results", T4096, gflops=123.0)  # the user's record of a shipped shape wins
    later = LONG_AGO_NS + 10**10  # old enough to be trusted, and not the state already seen
    os.utime(work / "results" / SLUG, ns=(later, later))
    table = dispatch_table.table_for(None, SLUG)
    (fams,) = [f for shape, f in table.records if shape == T4096]
    assert {e["gflops"] for e in fams.values()} == {123.0}
    assert table is dispatch_table.table_for(None, SLUG)  # unchanged folders: the same table
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").symlink_to(shipped)  # ./results is the shipped folder itself
    here, there = dispatch_table.table_for(None, SLUG), dispatch_table.table_for(str(shipped), SLUG)
    assert here.state == there.state and len(here.records) == len(there.records) == 2  # not twice


def test_a_repeated_shape_is_a_lookup(tmp_path, reads, loads, monkeypatch):
    root = _results(tmp_path)
    asked = []
    real = dispatch_table._Table.choose
    monkeypatch.setattr(dispatch_table._Table, "choose", lambda self, *a: asked.append(a) or real(self, *a))
    kernel = api._choose(0, Problem(4000, 4100, 4096), None, root)
    assert kernel[2].startswith(f"tuned for 4096x4096x4096 on {SLUG}, predicted fastest here (")
    for _ in range(3):
        assert api._choose(0, Problem(4000, 4100, 4096), None, root) is kernel
    assert (len(asked), len(loads), len(reads)) == (1, 1, 2)
    # Each of device, shape, family and folder is part of the choice.
    api._choose(1, Problem(4000, 4100, 4096), None, root)
    api._choose(0, Problem(4000, 4100, 4095), None, root)
    assert api._choose(0, Problem(4000, 4100, 4096), "vectorized", root)[1].startswith("vectorized_")
    assert api._choose(0, Problem(4000, 4100, 4096), None, tmp_path / "empty")[2] == "fallback config"
    assert (len(asked), len(loads)) == (5, 5)


def test_one_config_chosen_for_two_shapes_is_compiled_once_and_labelled_per_choice(monkeypatch):
    """A config can be one shape's own record and another shape's prediction: one compile and
    verification, each choice saying where it came from."""
    built = []

    class FakeKernel:
        def __init__(self, cfg, arch, source):
            self.config, self.source, self.module = cfg, source, object()
            built.append(cfg.name)

        def verify(self):
            built.append("verified")

    monkeypatch.setattr(api, "Kernel", FakeKernel)
    monkeypatch.setattr(api, "_CACHE", {})
    cfg = Space.load("tiled").fallback
    predicted = api._kernel(cfg, 0, "sm_90", "tuned for 4096x4096x4096 on x, predicted fastest here (9 us)")
    measured = api._kernel(cfg, 0, "sm_90", "tuned for 4096x4096x4096 on x")
    again = api._kernel(cfg, 0, "sm_90", "tuned for 4096x4096x4096 on x, predicted fastest here (9 us)")
    assert built == [cfg.name, "verified"]
    assert measured.source == "tuned for 4096x4096x4096 on x" and predicted.source.endswith("(9 us)")
    assert measured.module is predicted.module is again.module and again.source == predicted.source


def test_a_choice_is_made_again_when_the_folder_changes(tmp_path, reads, loads):
    root = _results(tmp_path)
    assert api._choose(0, P64, None, root)[2].startswith(f"tuned for 4096x4096x4096 on {SLUG}, ")
    _put(root, P64)
    assert api._choose(0, P64, None, root)[2] == f"tuned for 64x64x64 on {SLUG}"


def test_a_batch_is_dispatched_to_a_kernel_built_for_batches(tmp_path, reads, loads):
    """A batch takes the nearest batched record; without one, the nearest single product's config
    built for a batch (a split-K or split schedule in its data-parallel form)."""
    root = _results(tmp_path)
    dev, name, source = api._choose(0, Problem(512, 512, 512, "nn", 64), None, root)
    assert "_BATCHED1_" in name and source.startswith(f"tuned for 4096x4096x4096 on {SLUG}, predicted")
    split = Space.load("warptile").fallback.as_dict() | {"SPLITK": 4, "BM": 64}
    data = _stored()
    data["problem"] = {"M": 64, "N": 64, "K": 8192}
    data["families"] = {"warptile": data["families"]["warptile"]}
    data["families"]["warptile"]["config"]["params"] = split
    data["families"]["warptile"]["time_ms"] = 0.02  # a time that fits the shape (the model reads it)
    store.atomic_write_text(root / SLUG / "64x64x8192.json", json.dumps(restamp(data)))
    _, name, source = api._choose(0, Problem(64, 64, 8192, "nn", 4), "warptile", root)
    assert "_BATCHED1_" in name and "_BM64_" in name and "_SPLITK1_" in name
    assert source.startswith(f"tuned for 64x64x8192 on {SLUG}, predicted")
    _put(root, Problem(256, 256, 256, "nn", 32))
    _age(root)
    batch = Problem(64, 64, 8192, "nn", 4)
    assert api._choose(0, batch, None, root)[2].startswith(f"tuned for 256x256x256_b32 on {SLUG}, ")
    assert api._choose(0, Problem(64, 64, 8192), None, root)[2] == f"tuned for 64x64x8192 on {SLUG}"  # measured


def _plans():
    for fam in families():
        space = Space.load(fam)
        for cfg in [space.fallback, *space.seeds]:
            if cfg is not None:
                yield pytest.param(Family.load(fam).resolve(cfg).plan, id=cfg.name[:60])


@pytest.mark.parametrize("plan", list(_plans()))
def test_the_geometry_cache_gives_what_the_plan_computes(plan):
    cache = GeometryCache(plan, 132)
    shapes = [(1, 1, 1), (64, 64, 64), (4097, 33, 129), (300, 4097, 70), (4096, 4096, 4096), (64, 64, 8192)]
    for shape in shapes:
        assert cache(*shape) == plan.geometry(*shape, 132)
    assert all(cache(*shape) is cache(*shape) for shape in shapes)


def test_the_geometry_cache_drops_its_oldest_shape_beyond_its_size():
    computed = []

    class Plan:
        def geometry(self, M, N, K, slots):
            computed.append((M, N, K))
            return object()

    cache = GeometryCache(Plan(), 132, maxsize=3)
    first = [cache(M, 1, 1) for M in (1, 2, 3)]
    assert cache(4, 1, 1) is cache(4, 1, 1) and len(cache) == 3
    assert cache(2, 1, 1) is first[1] and cache(3, 1, 1) is first[2]
    assert computed == [(1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1)]
    assert cache(1, 1, 1) is not first[0] and computed[-1] == (1, 1, 1)  # it was dropped


@pytest.mark.parametrize(
    "array, words",
    [
        ("numpy", "must be on the GPU .*cupy.ndarray.*got numpy.ndarray in host memory"),
        ("list", "must be a cupy.ndarray.*got list"),
    ],
)
def test_arrays_off_the_gpu_are_a_type_error(array, words):
    pytest.importorskip("cupy")
    import numpy as np

    import autotune

    a = np.ones((4, 5), np.float32) if array == "numpy" else [[1.0] * 5] * 4
    with pytest.raises(TypeError, match=words):
        autotune.matmul(a, a)


def test_a_launch_hands_the_driver_each_argument_in_its_c_type(monkeypatch):
    """A loaded kernel launches through cuLaunchKernel with argument slots filled in place: what the
    driver would read at the launch is each argument, in order, as the kernel's C type (int,
    float, pointer, long long), the shape's integers made once and the rest set per call."""
    import ctypes

    from autotune.gpu import launcher

    names = ("M", "N", "K", "alpha", "A", "lda", "B", "ldb_k", "beta", "C", "ldc", "WS", "stride_a", "stride_c")
    ints = {"M": 5, "N": 6, "K": 7, "lda": 9, "ldb_k": 8, "ldc": 6}
    step = launcher._Step(0xF00, (2, 3, 1), 128, 4096, names, ints)
    seen = []

    def launch(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        addrs = (ctypes.c_void_p * len(names)).from_address(params)
        got = [launcher._CTYPES[n].from_address(addrs[i]).value for i, n in enumerate(names)]
        seen.append(((fn, gx, gy, gz, bx, by, bz, smem, stream, extra), dict(zip(names, got, strict=True))))

    monkeypatch.setattr(launcher.driver, "launchKernel", launch)
    values = {"A": 1 << 40, "B": 2 << 40, "C": 3 << 40, "WS": 0, "alpha": 1.5, "beta": -0.25, "stride_a": 1 << 33}
    step.launch({**values, "stride_c": -4}, 77, 0)
    step.launch({**values, "alpha": 2.0, "stride_c": 8}, 78, 9)
    (head0, args0), (head1, args1) = seen
    assert head0 == (0xF00, 2, 3, 1, 128, 1, 1, 4096, 77, 0) and head1[3] == 9 and head1[8] == 78
    assert args0 == {**ints, **values, "stride_c": -4}
    assert args1["alpha"] == 2.0 and args1["stride_c"] == 8 and args1["M"] == 5


@pytest.mark.parametrize("tier_gflops, wins", [(30000.0, "warptile"), (90000.0, "wgmma_tf32")])
def test_a_tier_is_served_by_the_faster_of_its_record_and_the_fp32_one(tmp_path, reads, loads, tier_gflops, wins):
    """At a shape tuned at both precisions, matmul(precision="high") runs the faster kernel of the
    two records (an FP32 kernel meets high's contract): a tier search that tried only the
    tensor-core family must not make the tier slower than FP32 where that family loses."""
    root = _results(tmp_path)
    data = _stored()
    entry = dict(data["families"]["warptile"], gflops=tier_gflops)
    entry["config"] = {"family": "wgmma_tf32", "params": Space.load("wgmma_tf32").seeds[0].as_dict()}
    data["problem"] = Problem(4096, 4096, 4096, precision="high").as_dict()
    data["families"], data["best"] = {"wgmma_tf32": entry}, "wgmma_tf32"
    store.atomic_write_text(root / SLUG / "4096x4096x4096_high.json", json.dumps(restamp(data, keep="gflops")))
    _age(root)
    _, name, source = api._choose(0, Problem(4096, 4096, 4096, precision="high"), None, root)
    record = "4096x4096x4096" + ("_high" if wins != "warptile" else "")
    assert name.startswith(wins + "_") and source == f"tuned for {record} on {SLUG}"
    # Strict FP32 never runs the tier's kernel.
    assert api._choose(0, Problem(4096, 4096, 4096), None, root)[1].startswith("warptile_")


def test_a_config_that_would_not_fit_the_device_in_the_calls_form_is_not_chosen(tmp_path, monkeypatch):
    """A medium-tier wgmma record built for a `high` call keeps twice the tiles a stage (the big
    and small parts): 246,784 bytes of shared memory at BM 128, BN 64, 5 stages, past the 232,448
    a block of an H100 may have. It would not launch; the choice must not fall on it."""
    from autotune.core.types import Config
    from autotune.kernels.limits import load_profile
    from autotune.records.store import update_record

    slug = "nvidia-h100-80gb-hbm3"
    rec = json.loads((RESULTS / slug / "4096x4096x4096.json").read_text())
    params = {"ACC": "tc", "BM": 128, "BN": 64, "CLUSTER_M": 1, "DIRECT": 0, "GROUP_M": 1, "PRECISION": "medium"}
    cfg = Config.make("wgmma_tf32", {**params, "STAGES": 5})
    high = Family.load("wgmma_tf32").built_for(cfg, Problem(1, 1, 1, precision="high"))
    assert Family.load("wgmma_tf32").violations(high, load_profile("h100"))  # the premise
    entry = dict(rec["families"]["warptile"])
    entry["config"] = {"family": cfg.family, "params": cfg.as_dict(), "name": cfg.name}
    medium = Problem(4096, 4096, 4096, precision="medium")
    entry["problem"] = medium.as_dict()
    entry["search"] = {}  # warptile's study at 4096^3 found no wgmma_tf32 config at the medium tier
    update_record(tmp_path / "res", rec["gpu"], medium, {cfg.family: entry})
    asked = fake_kernels(monkeypatch, slug)
    api._choose(0, Problem(268, 777, 894, precision="high"), None, tmp_path / "res")
    assert asked[-1][2] == "fallback config", asked
    api._choose(0, Problem(268, 777, 894, precision="medium"), None, tmp_path / "res")
    assert asked[-1][1] == cfg.name  # its own tier's form fits


def test_a_chosen_kernel_that_fails_here_gives_way_to_the_fallback_with_a_warning(monkeypatch):
    from autotune.core.types import Config

    def kernel(cfg, dev, arch, source):
        if source != "fallback config":
            raise RuntimeError(f"{cfg.name}: relative error 0.5 on 67x45x33; not using it")
        return (cfg.name, source)

    monkeypatch.setattr(api, "_device_props", lambda dev: (SLUG, "sm_90"))
    monkeypatch.setattr(api, "_kernel", kernel)
    with pytest.warns(RuntimeWarning, match="cannot run here .*relative error 0.5.*using the fallback config"):
        got = api._choose(0, Problem(4096, 4096, 4096), None, RESULTS)
    fallback = dispatch_table.built_for(api.fallback_config("sm_90"))
    assert got == (fallback.name, "fallback config") and isinstance(fallback, Config)


def test_choosing_from_the_records_reads_no_space_file(monkeypatch):
    """A new shape's choice costs a lookup in what was read once, not a parse of configs/*.yaml
    (reading the fallback's space for every new shape took half a second a call)."""
    read = []
    real = Space.load

    def spy(name, *a, **kw):
        read.append(name)
        return real(name, *a, **kw)

    fake_kernels(monkeypatch, SLUG)
    monkeypatch.setattr(Space, "load", staticmethod(spy))
    for m, n, k in [(100, 200, 300), (1000, 999, 17), (5, 4096, 4096), (4096, 4096, 4096)]:
        api._choose(0, Problem(m, n, k), None, RESULTS)
    assert read == []


@pytest.mark.parametrize("binds", [True, False])
@pytest.mark.parametrize("entry", ["cached_product", "a loaded kernel"])
def test_a_call_failing_on_a_thread_without_a_cuda_context_runs_again_once_one_is_bound(monkeypatch, entry, binds):
    pytest.importorskip("cupy")
    from autotune.dispatch import kernel

    arrays, calls, bound = api.gpu_arrays(), [], []

    def first_fails(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("CUDA_ERROR_INVALID_CONTEXT: invalid device context")
        return None, None, lambda A, B, alpha: "C"  # cached_product's (table, key, shortcut)

    def bind():
        # The first failure binds a context where `binds`; a thread with one binds nothing more.
        bound.append(binds and not bound)
        return bound[-1]

    monkeypatch.setattr(arrays, "bind_context", bind)
    if entry == "cached_product":
        monkeypatch.setattr(api, "_shortcut_for", first_fails)
        monkeypatch.setattr(api, "_no_gpu", lambda exc: None)
        call = functools.partial(api.cached_product, "A", "B", 2.0, False, True, "highest")
    else:
        loaded = kernel.Kernel.__new__(kernel.Kernel)
        loaded.layout, loaded._launch = "nn", lambda *args: first_fails(*args)[2](*args)
        monkeypatch.setattr(arrays, "prepare", lambda *args: type("Ops", (), {"as_layout": lambda o, x: o})())
        call = functools.partial(loaded, "A", "B", alpha=2.0)
    if binds:
        assert call() == "C" and len(calls) == 2 and bound == [True]
    else:
        with pytest.raises(RuntimeError, match="INVALID_CONTEXT"):
            call()
        assert len(calls) == 1 and bound == [False]


@pytest.mark.parametrize("current", [0, 0x1234, None])  # None: no driver to ask
def test_bind_context_sets_the_current_device_only_where_no_context_is_current(monkeypatch, current):
    pytest.importorskip("cupy")
    arrays = api.gpu_arrays()
    state = {"ctx": current, "set": []}

    def ctx():
        if state["ctx"] is None:
            raise RuntimeError("CuPy failed to load libcuda.so.1")
        return state["ctx"]

    def set_device(dev):
        state["set"].append(dev)
        state["ctx"] = 0x5678  # cudaSetDevice binds the device's primary context

    monkeypatch.setattr(arrays, "driver", type("Driver", (), {"ctxGetCurrent": staticmethod(ctx)}))
    fake = {"getDevice": staticmethod(lambda: 3), "setDevice": staticmethod(set_device)}
    monkeypatch.setattr(arrays, "runtime", type("Runtime", (), fake))
    assert arrays.bind_context() is (current == 0)
    assert state["set"] == ([3] if current == 0 else [])
