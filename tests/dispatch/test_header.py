"""The dispatching header: its choice in C is autotune.matmul's, it builds and links, bad input is one line."""

from __future__ import annotations

import random
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from autotune.core.types import LAYOUTS, Problem, UserError
from autotune.dispatch.api import fallback_config
from autotune.dispatch.header import GRID, TIER, chosen, export_dispatch, narrowed, pool_candidates
from autotune.dispatch.model import fastest
from autotune.dispatch.table import built_for, table_for
from autotune.kernels.family import cached_family
from autotune.kernels.limits import profile_for_arch
from tests.helpers import have_nvcc

ROOT = Path(__file__).resolve().parents[2]
RES, FAKE_CUBLAS = ROOT / "results", ROOT / "tests" / "data" / "fake_cublas"
SLUG = "nvidia-h100-80gb-hbm3"
# Records of every regime, layout and batching (the tuned shapes _draw starts with among them).
PICKED = [
    Problem.parse(t)
    for t in "1000x1000x1000 4096x4096x16 128x128x128_b512 4096x8x4096 1x4096x4096 64x64x65536 256x256x256 "
    "4096x4096x4096_nt 4096x4096x4096_tn 4096x4096x4096_tt 512x512x512_b64 512x512x512_nt_b64 200x3000x1000 "
    "32x32x32".split()
]


def _draw(seed: int, count: int) -> list[Problem]:
    """Shapes nobody tuned, of every regime, layout and batching (a few tuned ones among them)."""
    rng = random.Random(seed)
    dims = lambda lo, hi: int(round(2 ** rng.uniform(lo, hi)))  # noqa: E731
    out = [Problem(1000, 1000, 1000), Problem(4096, 4096, 16), Problem(128, 128, 128, batch=512)]
    for _ in range(count):
        m, n, k = dims(0, 13), dims(0, 13), dims(0, 14)
        batch = rng.choice([1, 1, 1, 3, 64])
        out.append(Problem(m, n, k, rng.choice(LAYOUTS), batch, rng.choice([0.0, 0.0, 1.0]), TIER))
    return out


def nvcc_warning_free(*args: str, cwd: Path) -> None:
    r = subprocess.run(["nvcc", *args], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0 and "warning" not in r.stderr.lower(), r.stderr


def _python_choice(table, p: Problem) -> str:
    """The config autotune.matmul runs at `p` on an sm_90 GPU of these records (the profile's limits)."""
    found = table.choose(p, None, profile_for_arch("sm_90"))
    cfg = found[2] if found is not None else built_for(fallback_config("sm_90"), p.layout, p.batch, TIER)
    return cfg.name


def _host_choices(header: Path, tmp_path: Path, problems: list[Problem]) -> list[str]:
    """The header's own choices (its model-only part, built by the host compiler) at `problems`."""
    return host_choices(tmp_path, problems, f'#define AUTOTUNE_MODEL_ONLY\n#include "{header}"\n')


def host_choices(tmp_path: Path, problems: list[Problem], include: str, *flags: str, sources=()) -> list[str]:
    """The dispatcher's choices at `problems`, from a C main after `include`, built by g++ with
    `flags` and `sources` (warnings are errors)."""
    main = tmp_path / "choose.cpp"
    main.write_text(
        include + "#include <stdio.h>\n"
        "int main() {\n"
        "    long long m, n, k, b; int ta, tb, nz;\n"
        '    while (scanf("%d %d %lld %lld %lld %lld %d", &ta, &tb, &m, &n, &k, &b, &nz) == 7)\n'
        '        printf("%s\\n", autotune_kernel_config(autotune_choose(ta, tb, m, n, k, b, nz)));\n'
        "}\n"
    )
    exe = tmp_path / "choose"
    cmd = ["g++", "-O2", "-Wall", "-Wextra", "-Werror", *flags, "-x", "c++", *map(str, sources), str(main)]
    cmd += ["-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    lines = "".join(f"{p.trans[0]} {p.trans[1]} {p.M} {p.N} {p.K} {p.batch} {int(p.beta != 0)}\n" for p in problems)
    run = subprocess.run([str(exe)], input=lines, capture_output=True, text=True, check=True)
    return run.stdout.split()


def _held_choice(table, d, p: Problem) -> str:
    """The config the header runs at `p`: the tuned shape's own, else the model's pick among the
    candidates it holds for the layout and batching, else the fallback (matmul's rule, held set)."""
    limits = profile_for_arch("sm_90")
    found = table.choose(p, None, limits)
    if found is not None and found[3] is None:
        return found[2].name
    held = set(d.held[(p.layout, p.batch > 1)])
    pool = [(f, c) for f, c in pool_candidates(table, p.layout, p.batch > 1, limits) if c.what.name in held]
    cfg = chosen(pool, p, table.roof)
    return (cfg or built_for(fallback_config("sm_90"), p.layout, p.batch, TIER)).name


def _chosen_as_in_python(header: Path, d, table, problems: list[Problem], tmp_path: Path) -> list[str]:
    """Assert the header's C picks what the Python model picks at every problem; return its picks."""
    got = _host_choices(header, tmp_path, problems)
    want = [_held_choice(table, d, p) for p in problems]
    missed = [(p.name, w, g) for p, w, g in zip(problems, want, got, strict=True) if w != g]
    assert not missed, missed
    return got


@pytest.fixture(scope="module")
def h100_header(tmp_path_factory):
    """A header of 14 of the H100 folder's records, every layout and batching, held to 48 kernels
    (the whole folder's takes a minute and more: the slow test below), and their table."""
    header = tmp_path_factory.mktemp("h100") / "dispatch.h"
    _, d = export_dispatch(RES, SLUG, header, shapes=PICKED, kernels=48)
    return header, d, narrowed(table_for(RES, SLUG), PICKED, SLUG)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.slow  # g++ builds a header of 48 kernels: most of a minute on two cores (CI's slow step)
def test_the_headers_choice_is_its_model_to_the_last_bit(h100_header, tmp_path):
    # The tuned shapes' own kernels and the model's predictions among the held kernels at shapes
    # nobody tuned, all four layouts, batches, beta 0 and not: the C arithmetic picks what the
    # Python model picks.
    header, d, table = h100_header
    drawn = _draw(57, 60)
    # Asked again, in another order and past the 16 shapes a thread's memo keeps: the same picks.
    got = _chosen_as_in_python(header, d, table, drawn + drawn[::-1] + drawn[:5] * 3, tmp_path)
    assert got[: len(drawn)] == got[len(drawn) : 2 * len(drawn)][::-1]
    assert set(got) <= {c.name for c in d.configs}
    assert len(d.configs) <= 48 + len(LAYOUTS) * 2  # the budget, the fallbacks beyond it


@pytest.mark.slow  # shares the 48-kernel header above (CI's slow step)
def test_a_sized_header_comes_near_every_choice(h100_header):
    # At shapes nobody tuned the held kernels' predicted best is near the best of all that
    # matmul chooses among (the budget spent where it buys the most).
    _, d, table = h100_header
    limits = profile_for_arch("sm_90")
    ratios = []
    for p in _draw(58, 80):
        if table.choose(p, None, limits)[3] is None:
            continue  # a tuned shape: its own kernel
        pool = pool_candidates(table, p.layout, p.batch > 1, limits)
        fit = [c for f, c in pool if not cached_family(f).unsuited(p)]
        held = set(d.held[(p.layout, p.batch > 1)])
        all_best = fastest(fit, p, table.roof)[1]
        held_best = fastest([c for c in fit if c.what.name in held], p, table.roof)[1]
        ratios.append(held_best / all_best)
    assert len(ratios) > 60
    assert statistics.geometric_mean(ratios) < 1.10, sorted(ratios)[-5:]


@pytest.mark.slow  # the whole grid's model choices (about a minute on two cores)
@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_a_whole_header_chooses_as_matmul_on_its_grid(tmp_path):
    # --kernels all: every config the model chooses on its grid is held, so at the grid's shapes
    # (off them a held kernel may stand in for one never chosen on the grid) the choice is matmul's.
    header = tmp_path / "all.h"
    _, d = export_dispatch(RES, SLUG, header, kernels=None)
    table = table_for(RES, SLUG)
    rng = random.Random(5)
    problems = [
        Problem(rng.choice(GRID), rng.choice(GRID), rng.choice(GRID), rng.choice(LAYOUTS), b, 0.0, TIER)
        for b in (1, 1, 1, 8, 64)
        for _ in range(12)
    ]
    got = _host_choices(header, tmp_path, problems)
    want = [_python_choice(table, p) for p in problems]
    missed = [(p.name, w, g) for p, w, g in zip(problems, want, got, strict=True) if w != g]
    assert not missed, missed


@pytest.mark.slow  # exports and compiles a whole folder's header: 10 s on two cores (CI's slow step)
def test_a_header_holds_only_what_it_can_choose(tmp_path):
    # Two tuned shapes: their own kernels, and the model's winners for each layout and batching;
    # no kernel twice (one source each).
    _, d = export_dispatch(RES, SLUG, tmp_path / "two.h", shapes=[Problem(1000, 1000, 1000), Problem(4096, 4096, 4096)])
    names = [c.name for c in d.configs]
    assert len(names) == len(set(names))
    assert len(d.exact) == 4  # two shapes, beta 0 and not
    text = (tmp_path / "two.h").read_text()
    assert text.count("__global__ void autotune_sgemm_kernel_") >= len(names)


def test_bad_shapes_and_options_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no record of 999x999x999"):
        export_dispatch(RES, SLUG, tmp_path / "x.h", shapes=[Problem(999, 999, 999)])
    with pytest.raises(UserError, match="--prefix"):
        export_dispatch(RES, SLUG, tmp_path / "x.h", prefix="Bad")
    argv = ["python", "-m", "autotune", "export", "--gpu", SLUG, "--sizes", "1000", "-o", str(tmp_path / "x.h")]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--dispatch" in r.stderr, r.stderr
    assert not (tmp_path / "x.h").exists()


@pytest.mark.slow  # nvcc builds a dispatching header twice: most of a minute on two cores
@pytest.mark.skipif(not have_nvcc(), reason="no nvcc")
def test_a_small_header_builds_warning_free_and_links_from_two_files(tmp_path):
    header = tmp_path / "tuned.h"
    export_dispatch(RES, "nvidia-h200", header, prefix="disp", shapes=[Problem(1000, 1000, 1000)])
    (tmp_path / "a.cu").write_text(
        '#include "tuned.h"\n'
        "int use_a() { return disp_sgemm(1, 1, 1, 1.0f, 0, 0, 0.0f, 0) == cudaErrorInvalidValue; }\n"
    )
    (tmp_path / "b.cu").write_text(
        '#include "tuned.h"\nint use_a();\n'
        "int main() { return use_a() && disp_choose(0, 1, 33, 1, 4000, 1, 0) >= 0 ? 0 : 1; }\n"
    )
    flags = ["-arch=sm_90", "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings", "-rdc=false"]
    nvcc_warning_free(*flags, "-o", "prog", "a.cu", "b.cu", cwd=tmp_path)
    # With the first call's timing against cuBLAS (compiled only: cuBLAS's declarations are a stand-in).
    nvcc_warning_free(*flags, "-DDISP_WITH_CUBLAS", f"-I{FAKE_CUBLAS}", "-c", "-o", "a.o", "a.cu", cwd=tmp_path)
    text = header.read_text()
    assert text.count("#ifdef DISP_WITH_CUBLAS") == 2 and "disp_runs_cublas" in text


# Random row-major calls: P_arguments_ok (what a call that goes to cuBLAS is checked with) refuses
# exactly what the chosen kernel's launcher refuses. Without a GPU a call it accepts fails at the
# launch with another error; with one, only the refusals are compared (the buffer is host memory).
_ARGUMENTS_PROGRAM = r"""
#include <cstdio>
#include <random>
#include "tuned.h"
int main()
{
    std::mt19937 rng(7);
    static float buf[4096];
    int devices = 0, wrong = 0, accepted = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    (void)cudaGetLastError();
    for (int t = 0; t < 20000; ++t) {
        auto r = [&](int lo, int hi) { return lo + (int)(rng() % (unsigned)(hi - lo + 1)); };
        const int ta = r(0, 1), tb = r(0, 1), m = r(-1, 5), n = r(-1, 5), k = r(-1, 5), batch = r(-1, 3);
        const int lda = r(0, 8), ldb = r(0, 8), ldc = r(0, 8);
        const long long sa = r(-1, 60), sb = r(-1, 60), sc = r(-1, 60);
        const float* A = r(0, 20) ? buf + r(0, 200) : nullptr;
        const float* B = r(0, 20) ? buf + r(0, 200) : nullptr;
        float* C = r(0, 20) ? buf + r(0, 200) : nullptr;
        const bool ok = disp_arguments_ok(ta, tb, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
        accepted += ok;
        if (ok && devices > 0) continue;
        const int kernel = m > 0 && n > 0 && k > 0 && batch > 0 ? disp_choose(ta, tb, m, n, k, batch, 0) : -1;
        cudaError_t e = cudaErrorInvalidValue;
        if (kernel >= 0) e = disp_run(kernel, m, n, k, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc, batch, 0);
        wrong += ok == (e == cudaErrorInvalidValue);
    }
    std::printf("%d accepted, %d unlike the launchers\n", accepted, wrong);
    return wrong != 0 || accepted < 100;
}
"""


@pytest.mark.slow  # nvcc builds a header of two kernels: some 15 s
@pytest.mark.skipif(not have_nvcc(), reason="no nvcc")
def test_the_checks_of_a_call_to_cublas_refuse_what_the_kernels_refuse(tmp_path):
    export_dispatch(
        RES, "nvidia-h200", tmp_path / "tuned.h", prefix="disp", shapes=[Problem(1000, 1000, 1000)], kernels=2
    )
    (tmp_path / "args.cu").write_text(_ARGUMENTS_PROGRAM)
    b = subprocess.run(["nvcc", "-arch=sm_90", "-o", "args", "args.cu"], capture_output=True, text=True, cwd=tmp_path)
    assert b.returncode == 0, b.stderr
    r = subprocess.run([str(tmp_path / "args")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and ", 0 unlike the launchers" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow  # a library or header built by g++ and compared: tens of seconds on two cores
@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_the_stream_k_fixup_and_visits_are_priced_alike_in_c_and_python(tmp_path):
    # Only the H200's records hold stream-K configs, whose owner's fixup (model.fixup) decides at
    # deep K and small M x N, and their tiles visited (model.TILE_K) at short K and large M x N:
    # there and elsewhere the header picks as Python does.
    slug = "nvidia-h200"
    picked = [Problem.parse(t) for t in "1000x1000x1000 200x3000x1000 4096x16x4096 137x2112x3520 512x256x256".split()]
    header = tmp_path / "h200.h"
    _, d = export_dispatch(RES, slug, header, shapes=picked, kernels=24)
    table = narrowed(table_for(RES, slug), picked, slug)
    rng = random.Random(5)
    deep = [Problem(rng.randint(60, 400), rng.randint(60, 400), rng.randint(4000, 40000)) for _ in range(30)]
    short = [Problem(rng.randint(1000, 8000), rng.randint(1000, 8000), rng.randint(4, 64)) for _ in range(30)]
    _chosen_as_in_python(header, d, table, deep + short + _draw(59, 40), tmp_path)
    assert any("stream_k" in c.name for c in d.configs)
