import re
import subprocess

import pytest
from helpers import GPU, have_nvcc, one_clear_line, run_cli
from helpers import record_entry as _entry

from autotune.core.types import Problem, UserError
from autotune.kernels.family import Family
from autotune.kernels.space import Space
from autotune.records.export import _arch_flags, export, header_for_entry
from autotune.records.store import update_record

HARNESS = """#include "tuned.h"
int main() {
    float *a = 0, *b = 0, *c = 0;
    cudaMalloc(&a, 4); cudaMalloc(&b, 4); cudaMalloc(&c, 4);
    return (int)autotune_sgemm(1, 1, 1, 1.0f, a, b, 0.0f, c);
}
"""

WARPTILE = dict(BM=128, BN=256, BK=8, WARPS_M=2, WARPS_N=4, LANES_N=8, TM=8, TN=4, STAGES=4, PAD_A=4, PAD_B=0,
                GROUP_M=8, SPLITK=4, MINB=1, PREFETCH=0, MMA_ORDER=0)  # fmt: skip
SCHEDULES = ["stream_k", "split_launch", "split_persistent", "split_fused"]
# colstage: over 48 KB of dynamic shared memory, and split along K (C scaled by beta first).
COLSTAGE = dict(NR=16, KL=2, RPW=2, WARPS=8, KSTAGE=128, STAGES=4, KSPLIT=2, ROT=1)
CASES = (
    [("vectorized", dict(BM=128, BN=128, BK=16, TM=8, TN=8)), ("warptile", WARPTILE)]
    + [("warptile", {**WARPTILE, "SPLITK": 1, "SCHEDULE": s}) for s in SCHEDULES]
    + [("colstage", COLSTAGE)]
)


def _builds_for_sm90(tmp_path):
    """The harness built with nvcc for sm_90 against the tuned.h exported into tmp_path."""
    (tmp_path / "main.cu").write_text(HARNESS)
    r = subprocess.run(
        ["nvcc", "-arch=sm_90", "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("family, params", CASES + [("warptile", {**WARPTILE, "A_ROWS": 1, "PACKA": 1})])
def test_exported_header_compiles_and_links_with_nvcc(tmp_path, h100, family, params):
    P = Problem(1000, 1000, 1000)
    update_record(tmp_path, GPU, P, {family: _entry(family, params, 30000.0, h100, P)})
    out, entry = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")
    text = out.read_text()
    for k, v in params.items():
        assert f"#define AUTOTUNE_{k} {v}\n" in text
    if family in ("warptile", "colstage"):  # > 48 KB shared memory: the opt-in
        assert "cudaFuncAttributeMaxDynamicSharedMemorySize" in text
    split_k = params.get("SPLITK", params.get("KSPLIT", 1))
    assert ("_scale_c<<<" in text) == (split_k > 1)  # split-K: C is scaled first
    if family == "warptile":  # B to a 16-byte pitch when N % 4 != 0 (in the workspace)
        assert "_pack_b<<<" in text and "cudaMallocAsync" in text
        # A to a 16-byte pitch where it is copied along unaligned rows (PACKA), read as A_used
        assert ("_pack_a<<<" in text) == bool(params.get("PACKA")) and "lda_used, B_used" in text
    if params.get("SCHEDULE", "data_parallel") != "data_parallel":  # a grid of at most the resident blocks
        assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in text
        assert "cudaMallocAsync" in text and "cudaMemsetAsync" in text and "cudaFreeAsync" in text
    # A split launch: the tail's tiles of C scaled, then the main kernel, then the tail.
    assert ("_scale_tiles<<<" in text and "_tail<<<" in text) == (params.get("SCHEDULE") == "split_launch")
    # The split schedules' tails add into C: through a copy at a 16-byte pitch where C's rows are not
    # (copied in only when beta != 0, back at the end).
    split = params.get("SCHEDULE", "").startswith("split_")
    assert ("_pack_c<<<" in text and "_unpack_c<<<" in text and "&& beta != 0.0f)" in text) == split
    _builds_for_sm90(tmp_path)


# fewcols with A's rows staged through shared memory: all of its shared memory dynamic, over 48 KB.
FEWCOLS_STAGED = dict(NR=16, RPW=2, WARPS=2, WK=4, KCHUNK=512, UNROLL=1, LANE_ROWS=1, A_STAGES=3, STREAM=1)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_a_fewcols_header_with_staged_a_opts_in_to_its_shared_memory(tmp_path, h100):
    """The header of a fewcols config whose shared memory is dynamic (A_STAGES) asks for the
    amount the runner does, opts in above 48 KB and builds."""
    P = Problem(4096, 16, 4096)
    update_record(tmp_path, GPU, P, {"fewcols": _entry("fewcols", FEWCOLS_STAGED, 14000.0, h100, P)})
    out, _ = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")
    text = out.read_text()
    smem = Family.load("fewcols").resolve(FEWCOLS_STAGED).plan.dynamic_smem
    assert smem > 48 * 1024 and f"autotune_dynamic_smem_bytes = {smem} " in text
    assert "cudaFuncAttributeMaxDynamicSharedMemorySize" in text
    _builds_for_sm90(tmp_path)


# The launch plan the header computes, printed by a host program: no GPU is needed for that part.
PLAN_HARNESS = r"""#include <cstdio>
#include "tuned.h"
int main() {
    const long long shapes[][4] = { %(shapes)s };
    for (const auto& s : shapes) {
        const autotune_sgemm_plan_t p = autotune_sgemm_plan(s[0], s[1], s[2], s[3]);
        printf("%%lld %%lld %%lld %%lld %%lld %%lld %%lld %%lld %%lld %%lld %%lld %%lld", p.ws_bytes, p.ws_zeroed,
               p.pack_a, p.pack_a_at, p.pitch_a, p.pack_b, p.pack_b_at, p.pitch_b, p.pack_c, p.pack_c_at, p.pitch_c,
               p.tail_first);
        for (const auto& st : p.step)
            if (st[0]) printf(" | %%lld %%lld %%lld", st[1], st[2], st[3]); else printf(" | -");
        printf("\n");
    }
    return 0;
}
"""
PLAN_SHAPES = [(4096, 4096, 4096, 132), (1000, 1000, 1000, 132), (300, 4097, 70, 132), (5, 7, 20, 132),
               (4097, 1, 8191, 264), (3000, 3000, 3000, 132), (128 * 12, 256 * 11, 64, 132), (1, 1, 1, 7)]  # fmt: skip
# What PLAN_HARNESS prints of a plan, in its order.
PLAN_FIELDS = "ws_bytes ws_zeroed pack_a pack_a_at pitch_a pack_b pack_b_at pitch_b pack_c pack_c_at pitch_c tail_first"


WGMMA = dict(BM=128, BN=128, STAGES=3, GROUP_M=8, PRECISION="high", ACC="fp32")


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_a_tier_header_says_its_tier_and_target_and_builds_only_for_it(tmp_path, h100):
    """A tensor-core tier's record exports with its tier in the header's text, the nvcc flags of
    its architecture-specific target (sm_90a: the -gencode form), its operand preparation before
    the SGEMM kernel; it builds with those flags, and for plain sm_90 it stops with a message
    that names the target."""
    P = Problem(1000, 1000, 1000, precision="high")
    update_record(tmp_path, GPU, P, {"wgmma_tf32": _entry("wgmma_tf32", WGMMA, 60000.0, h100, P)})
    out, _ = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")
    text = out.read_text()
    assert "Best tuned FP32-accurate tensor-core (precision high: 3xTF32" in text
    assert "build with nvcc -gencode=arch=compute_90a,code=sm_90a" in text
    assert text.index("_prepare<<<") < text.index("autotune_tuned_sgemm_kernel<<<")
    (tmp_path / "main.cu").write_text(HARNESS)
    good = ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")]
    r = subprocess.run(good, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    bad = subprocess.run([*good[:1], "-arch=sm_90", *good[2:]], capture_output=True, text=True)
    assert bad.returncode != 0 and "compile for sm_90a" in bad.stderr


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_a_header_of_a_kernel_reading_both_operands_in_place_encodes_their_tensor_maps(tmp_path, h100, layout):
    """A medium record of wgmma_tf32 with DIRECT=1 exports a launcher that encodes tensor maps of
    A and B as stored (through the driver's entry point; zeros where a pointer or pitch rules them
    out) and passes them to the kernel, with no preparation and no workspace; it builds for sm_90a
    with host warnings on and no spills."""
    P = Problem(1000, 1000, 1000, layout, precision="medium")
    params = dict(BM=256, BN=128, STAGES=4, GROUP_M=8, PRECISION="medium", ACC="tc", DIRECT=1)
    params |= {"TRANS_B": 1, "BM": 128, "BN": 256} if layout == "nt" else {}
    update_record(tmp_path, GPU, P, {"wgmma_tf32": _entry("wgmma_tf32", params, 300000.0, h100, P)})
    out, _ = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")
    text = out.read_text()
    assert "cuTensorMapEncodeTiled" in text and "_prepare<<<" not in text
    assert f"autotune_tensor_map(&tmap_a, A_used, k, m, lda_used, 32, {params['BM']});" in text
    dims_b = "k, n, ldb_used, 32, 256" if layout == "nt" else "n, k, ldb_used, 32, 32"
    assert f"autotune_tensor_map(&tmap_b, B_used, {dims_b});" in text
    assert ", tmap_a, tmap_b);" in text
    (tmp_path / "main.cu").write_text(HARNESS)
    cmd = ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall,-Wextra", "-Xptxas", "-warn-spills"]
    r = subprocess.run([*cmd, "-o", str(tmp_path / "main"), str(tmp_path / "main.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.replace("#177-D", ""), r.stderr


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize(
    "family, params",
    # Then B stored N x K transposed into the workspace first (PACKB 2), A to a 16-byte pitch as
    # stored (PACKA: K x M with TRANS_A, M x K with A_ROWS), and fewcols with all of its shared
    # memory dynamic (A_STAGES), at every shape.
    CASES
    + [("tiled", {"TILE": 16}), ("wgmma_tf32", WGMMA), ("warptile", {**WARPTILE, "TRANS_B": 1, "PACKB": 2})]
    + [("warptile", {**WARPTILE, "TRANS_A": 1, "PACKA": 1}), ("warptile", {**WARPTILE, "A_ROWS": 1, "PACKA": 1})]
    + [("fewcols", FEWCOLS_STAGED)],
)
def test_header_and_runner_compute_the_same_launches(tmp_path, family, params):
    """The header's launcher and the Python runner are rendered from one launch plan: at every
    shape both compute the same workspace, packing, and the same steps with the same grids."""
    resolved = Family.load(family).resolve(params)
    rec = {"problem": {"M": 64, "N": 64, "K": 64}, "gpu": {"name": "test", "arch": "sm_90"}}
    entry = {"config": {"family": family, "params": params}, "gflops": 1.0, "ratio": 1.0}
    (tmp_path / "tuned.h").write_text(header_for_entry(rec, entry, "tuned.h"))
    shapes = ", ".join("{" + ", ".join(map(str, s)) + "}" for s in PLAN_SHAPES)
    (tmp_path / "plan.cu").write_text(PLAN_HARNESS % {"shapes": shapes})
    flags = _arch_flags(resolved.family.compile_arch("sm_90"))
    b = subprocess.run(
        ["nvcc", flags, "-o", str(tmp_path / "plan"), str(tmp_path / "plan.cu")], capture_output=True, text=True
    )
    assert b.returncode == 0, b.stderr
    lines = subprocess.run([str(tmp_path / "plan")], capture_output=True, text=True, check=True).stdout.splitlines()
    plan = resolved.plan
    for (M, N, K, slots), line in zip(PLAN_SHAPES, lines, strict=True):
        g = plan.geometry(M, N, K, slots)
        running = {step.kernel: grid for step, grid in g.launches}
        want = [g.values.get(k, 0) for k in PLAN_FIELDS.split()]
        steps = [" ".join(map(str, running[s.kernel])) if s.kernel in running else "-" for s in plan.steps]
        assert line == " ".join(map(str, want)) + "".join(f" | {s}" for s in steps), (M, N, K, slots)


def test_export_of_an_untuned_shape_lists_the_tuned_ones(tmp_path, h100):
    update_record(tmp_path, GPU, Problem(1000, 1000, 1000), {"tiled": _entry("tiled", {"TILE": 32}, 1.0, h100)})
    with pytest.raises(UserError, match="tuned shapes: 1000x1000x1000"):
        export(tmp_path, GPU["slug"], Problem(64, 64, 64), tmp_path / "x.h")


# --prefix: headers that live in one program.
WARPTILE_DP = {**WARPTILE, "SPLITK": 1}  # over 48 KB of dynamic shared memory: the opt-in


def _store(folder, h100, family, params, problem):
    update_record(folder, GPU, problem, {family: _entry(family, params, 1000.0, h100, problem)})


def _prefixed(default: str, prefix: str) -> str:
    """The default header's text with its names as --prefix names them (the kernel sources' guards,
    which take the kernel's name, keep their AUTOTUNE_)."""
    text = re.sub(r"AUTOTUNE_(?!COMMON_|SPLIT_SUM_)", prefix.upper() + "_", default)
    return text.replace("autotune_", prefix + "_")


def test_a_prefix_renames_every_name_the_header_defines_and_changes_nothing_else(tmp_path, h100):
    """With --prefix big, the header is the default one with autotune_ / AUTOTUNE_ names as big_ /
    BIG_, its section in namespace big_nn with the entry points brought out by `using`, and the
    kernel source's own AT_ macros undefined after it: every macro left defined carries the prefix."""
    P = Problem(1000, 1000, 1000)
    _store(tmp_path, h100, "warptile", WARPTILE_DP, P)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    default = export(tmp_path, GPU["slug"], P, tmp_path / "a" / "tuned.h")[0].read_text()
    text = export(tmp_path, GPU["slug"], P, tmp_path / "b" / "tuned.h", prefix="big")[0].read_text()
    assert "#ifndef AUTOTUNE_TUNED_SGEMM_H" in default and "namespace" not in default
    # The namespace's opening, and after its end the undefined macros and the using-declarations
    inner = re.sub(r"// ---- big_nn: .*\nnamespace big_nn \{\n", "", text)
    after = r"(?:// (?:The kernel source's|define its|This build's).*|#undef AT_\w+|using big_nn::.*)"
    inner = re.sub(r"\}  // namespace big_nn\n(?:" + after + r"?\n)*", "", inner)
    assert inner.split() == _prefixed(default, "big").split()
    assert "#ifndef BIG_TUNED_SGEMM_H" in text and "#define BIG_BM 128\n" in text
    assert "using big_nn::big_sgemm_row_major;" in text
    assert all("big_" in name for name in re.findall(r"\b(?:autotune|AUTOTUNE)_\w+", text))
    undefined = re.findall(r"^#undef (\w+)", text[text.index("}  // namespace big_nn") :], re.MULTILINE)
    defined = set(re.findall(r"^#define (\w+)", text, re.MULTILINE)) - set(undefined)
    assert defined and all(n.startswith("BIG_") or "big_" in n for n in defined), sorted(defined)


def test_the_shared_memory_opt_in_is_kept_per_device_and_atomic(tmp_path, h100):
    """The launcher opts in to over 48 KB of shared memory once per device (the attribute is the
    device's), keyed by cudaGetDevice and kept in an atomic, not one process-wide bool."""
    P = Problem(1000, 1000, 1000)
    _store(tmp_path, h100, "warptile", WARPTILE_DP, P)
    text = export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h")[0].read_text()
    launch = text[text.index("autotune_sgemm_launch(") :]
    assert "static bool" not in text
    assert "static std::atomic<unsigned long long> smem_attr_set" in launch
    order = [launch.index(s) for s in ("cudaGetDevice(&dev)", "smem_attr_set.load", "cudaFuncSetAttribute")]
    assert order == sorted(order)
    assert "smem_attr_set.fetch_or(bit" in launch


@pytest.mark.parametrize("prefix", ["Big", "9lives", "a__b", "a_", "_a", "at", "at_x", "", "a-b", "x" * 33])
def test_a_prefix_that_cannot_name_c_symbols_is_refused(tmp_path, h100, prefix):
    P = Problem(1000, 1000, 1000)
    _store(tmp_path, h100, "tiled", {"TILE": 16}, P)
    with pytest.raises(UserError, match="--prefix"):
        export(tmp_path, GPU["slug"], P, tmp_path / "tuned.h", prefix=prefix)
    assert not (tmp_path / "tuned.h").exists()


def test_the_command_line_refuses_a_bad_prefix_in_one_line(tmp_path, h100):
    _store(tmp_path, h100, "tiled", {"TILE": 16}, Problem(64, 64, 64))
    out = str(tmp_path / "x.h")
    r = run_cli("export", "--size", "64", "--results", str(tmp_path), "--prefix", "My-GEMM", "-o", out)
    assert "--prefix 'My-GEMM'" in one_clear_line(r)
    assert not (tmp_path / "x.h").exists()


TWO_PREFIXES_MAIN = """#include "big.h"
#include "small.h"
#include "tuned.h"
#include "big.h"  // a second time: its guard keeps it out
cudaError_t other_file(float* A, float* B, float* C);
int main() {
    float *A = nullptr, *B = nullptr, *C = nullptr;  // refused before any CUDA call: no GPU needed
    int bad = 0;
    bad += big_sgemm('N', 'N', 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4) != cudaErrorInvalidValue;
    bad += big_sgemm_row_major(4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4) != cudaErrorInvalidValue;
    bad += small_sgemm('T', 'N', 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4) != cudaErrorInvalidValue;
    bad += small_nt::small_sgemm_row_major(4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4) != cudaErrorInvalidValue;
    bad += autotune_sgemm(4, 4, 4, 1.0f, A, B, 0.0f, C) != cudaErrorInvalidValue;
    bad += other_file(A, B, C) != cudaErrorInvalidValue;
    bad += BIG_BM != 128 || AUTOTUNE_TILE != 16 || SMALL_HAS_NT != 1;
    return bad;
}
"""
OTHER_FILE = """#include "big.h"
#include "tuned.h"
cudaError_t other_file(float* A, float* B, float* C)
{
    return big_sgemm_row_major(4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4);
}
"""


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_headers_of_different_prefixes_and_one_header_in_two_files_build_into_one_program(tmp_path, h100):
    """Three headers in one translation unit (prefix big: warptile, its shared-memory opt-in;
    small: two layouts; the default prefix), and big.h and the default one in a second .cu file:
    compiled with every host warning on (-Xcompiler -Wall,-Wextra) and none, linked, and run
    (each call is refused before it reaches the GPU)."""
    P = Problem(1000, 1000, 1000)
    _store(tmp_path / "r", h100, "warptile", WARPTILE_DP, P)
    _store(tmp_path / "r", h100, "tiled", {"TILE": 16}, Problem(64, 64, 64))
    for lay in ("nn", "nt"):
        problem = Problem(96, 80, 64, lay)
        params = Family.load("vectorized").built_for(Space.load("vectorized").fallback, problem).as_dict()
        _store(tmp_path / "r", h100, "vectorized", params, problem)
    slug = GPU["slug"]
    export(tmp_path / "r", slug, P, tmp_path / "big.h", prefix="big")
    export(tmp_path / "r", slug, Problem(96, 80, 64), tmp_path / "small.h", layouts=["nn", "nt"], prefix="small")
    export(tmp_path / "r", slug, Problem(64, 64, 64), tmp_path / "tuned.h")
    (tmp_path / "main.cu").write_text(TWO_PREFIXES_MAIN)
    (tmp_path / "other.cu").write_text(OTHER_FILE)
    flags = ["-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"]
    exe = tmp_path / "main"
    b = subprocess.run(
        ["nvcc", "-arch=sm_90", *flags, "-o", str(exe), str(tmp_path / "main.cu"), str(tmp_path / "other.cu")],
        capture_output=True,
        text=True,
    )
    assert b.returncode == 0 and "warning" not in b.stderr.lower(), b.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
