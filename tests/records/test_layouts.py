"""Operand layouts (nn, nt, tn, tt) and leading dimensions, without a GPU: the problem's name,
the spaces built for a layout, which families read which layout, kernels that compile for each,
headers that compile without warnings and refuse bad arguments, and how arrays are read."""

import subprocess

import pytest
from helpers import GPU, ROOT, build_and_run_header_main, families, have_nvcc, refusals_main, tier_of
from helpers import record_entry as _entry

from autotune.cli.inputs import meant_for
from autotune.core.types import Config, Measurement, Problem, Status, UserError
from autotune.dispatch import table as dispatch_table
from autotune.gpu.compile import compile_source
from autotune.kernels.family import Family
from autotune.kernels.render import render
from autotune.kernels.space import Space
from autotune.records.export import export, header_for_entry
from autotune.records.store import update_record

LAYOUTS = ["nn", "nt", "tn", "tt"]


def test_a_problem_names_its_layout_unless_nn():
    assert Problem(64, 32, 16).name == "64x32x16"
    assert Problem(64, 32, 16, "nt").name == "64x32x16_nt"
    assert Problem.parse("64x32x16_tn") == Problem(64, 32, 16, "tn")
    assert Problem.parse("64x32x16", "tt").trans == (1, 1)
    assert Problem.parse("64x32x16_nt", "tt").layout == "nt"  # the name wins
    with pytest.raises(UserError, match="layout must be one of nn, nt, tn, tt"):
        Problem(1, 1, 1, "NT")
    with pytest.raises(UserError, match="expected N or MxNxK"):
        Problem.parse("64x32_nt")
    m = Measurement(Config.make("tiled", {"TILE": 16}), Problem(5, 6, 7, "tn"), Status.OK)
    assert Measurement.from_dict(m.to_dict()).problem == Problem(5, 6, 7, "tn")


def test_which_families_read_which_layout():
    """fewrows streams B along N, fewcols, colstream and colstage A along K: each reads the other operand
    either way."""
    for fam in families():
        gaps = {lay: Family.load(fam).gaps(Problem(8, 8, 8, lay, precision=tier_of(fam))) for lay in LAYOUTS}
        along_k = {"nn", "nt"}  # A streamed along K: stored M x K only
        want = {"fewrows": {"nn", "tn"}, "fewcols": along_k, "colstream": along_k, "colstage": along_k}.get(
            fam, set(LAYOUTS)
        )
        assert {lay for lay, g in gaps.items() if not g} == want, (fam, gaps)
    assert "fewrows does not read B as N x K" in Family.load("fewrows").gaps(Problem(1, 64, 64, "nt"))[0]


def test_a_space_is_built_for_the_problems_layout():
    sp = Space.load("warptile")
    assert sp.for_problem(Problem(64, 64, 64)) is sp
    nt = sp.for_problem(Problem(64, 64, 64, "nt"))
    assert nt.values["TRANS_A"] == [0] and nt.values["TRANS_B"] == [1]
    assert all(c["TRANS_B"] == 1 and c["TRANS_A"] == 0 for c in nt.seeds) and nt.fallback["TRANS_B"] == 1
    assert len(nt.seeds) == len(sp.seeds)
    with pytest.raises(UserError, match="fewrows does not read B"):
        Space.load("fewrows").for_problem(Problem(1, 64, 64, "nt"))


def test_a_search_over_all_families_leaves_out_those_that_cannot_read_the_layout():
    spaces = [Space.load(f) for f in ("fewrows", "fewcols", "warptile")]
    names = [sp.family.name for sp in meant_for(spaces, Problem(1, 4096, 4096, "nt"), named=False)]
    assert names == ["warptile"]  # fewrows cannot read B^T; fewcols is not for M = 1
    names = [sp.family.name for sp in meant_for(spaces, Problem(4096, 1, 4096, "nt"), named=False)]
    assert names == ["fewcols", "warptile"]
    with pytest.raises(UserError, match="fewrows does not read B"):
        meant_for(spaces[:1], Problem(1, 4096, 4096, "nt"), named=True)
    # Named for a shapes file of mixed layouts: each shape gets those of them that read it, all of them
    # (suited or not) where they all do.
    named = [sp.family.name for sp in meant_for(spaces, Problem(1, 4096, 4096, "nt"), named=True)]
    assert named == ["fewcols", "warptile"]
    assert [sp.family.name for sp in meant_for(spaces, Problem(1, 4096, 4096), named=True)] == [
        "fewrows",
        "fewcols",
        "warptile",
    ]


@pytest.mark.parametrize("family", families())
def test_each_family_compiles_for_each_layout_it_reads(family):
    """The fallback config built for each layout: NVRTC compiles it for sm_90 without spills, and
    the kernel takes the row pitches after each operand."""
    fam = Family.load(family)
    fallback = Space.load(family).fallback
    for lay in LAYOUTS:
        problem = Problem(8, 8, 8, lay)
        if fam.gaps(problem):
            continue
        resolved = fam.resolve({**fallback.as_dict(), **fam.pinned_values(problem)})
        assert resolved.plan.layout == problem.trans
        src = render(resolved)
        assert "const float* __restrict__ A, int lda," in src and "float* __restrict__ C, int ldc" in src
        res = compile_source(src, fam.compile_arch("sm_90"), "autotune_sgemm").resources
        # nn builds must not spill (the stored results' kernels); another layout may spill a few
        # bytes (fewcols' fallback reading B^T: 8), which the search's filter rejects in its space.
        assert res.spill_bytes <= (0 if lay == "nn" else 16), (family, lay, res)


def test_dispatch_prefers_records_of_the_same_layout(tmp_path, monkeypatch, h100):
    """A shape is served from the nearest record of its layout; without one, from the nearest of
    any layout, the config rebuilt for this one, skipping families that cannot read it."""
    wt = Space.load("warptile").fallback.as_dict()
    row = Problem(1, 4096, 4096)
    update_record(tmp_path, GPU, row, {"fewrows": _entry("fewrows", _fewrows(), 9e9, h100, row)})
    update_record(tmp_path, GPU, row, {"warptile": _entry("warptile", wt, 1.0, h100, row)})
    tn = Problem(2048, 2048, 2048, "tn")
    update_record(tmp_path, GPU, tn, {"warptile": _entry("warptile", wt, 2.0, h100, tn)})
    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    table = dispatch_table._table(str(tmp_path), GPU["slug"])
    shape, entry = table.nearest(Problem(1, 4096, 4096, "nt"), None)
    assert shape == Problem(1, 4096, 4096) and entry["config"]["family"] == "warptile"  # fewrows reads no B^T
    shape, _ = table.nearest(Problem(1, 4096, 4096, "tn"), None)
    assert shape == Problem(2048, 2048, 2048, "tn")  # same layout first, however far
    shape, entry = table.nearest(Problem(1, 4096, 4096), None)
    assert entry["config"]["family"] == "fewrows"
    cfg = dispatch_table.built_for(Config.make("warptile", wt), "tt")
    assert (cfg["TRANS_A"], cfg["TRANS_B"]) == (1, 1)


def _fewrows():
    return Space.load("fewrows").fallback.as_dict()


class _View:
    """An array's shape and byte strides, all _stored reads when it copies nothing."""

    def __init__(self, shape, strides):
        self.shape, self.strides = shape, strides


@pytest.mark.parametrize(
    "shape, strides, layout, ld",
    [
        ((5, 7), (28, 4), "n", 7),  # C-contiguous
        ((5, 7), (40, 4), "n", 10),  # rows of a wider array
        ((5, 7), (4, 20), "t", 5),  # Fortran order / a transpose: read as the transpose
        ((5, 7), (4, 32), "t", 8),  # a transpose of a row slice
        ((1, 7), (999, 4), "n", 7),  # one row: its stride does not matter
        ((5, 1), (4, 999), "t", 5),  # one column, stored down
    ],
)
def test_operands_with_a_contiguous_axis_are_read_in_place(shape, strides, layout, ld):
    from autotune.dispatch.arrays import _stored

    view = _View(shape, strides)
    x, got_layout, got_ld = _stored(view)
    assert x is view and (got_layout, got_ld) == (layout, ld)


HEADER_MAIN = refusals_main(
    """\
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, A, lda - 1, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, A, lda, B, ldb - 1, 0.0f, C, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, C, 63, 0),
        autotune_sgemm(ta, tb, 0, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, -1, 1.0f, A, lda, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm(ta == 'N' ? 'T' : 'N', tb, 64, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm('Q', tb, 64, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, A + 100, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, A, lda, B, ldb, 0.0f, B + 1000, 64, 0),
        autotune_sgemm(ta, tb, 64, 48, 32, 1.0f, nullptr, lda, B, ldb, 0.0f, C, 64, 0),
        autotune_sgemm_row_major(48, 64, 32, 1.0f, B, ldb, A, lda, 0.0f, C, 63, 0),
        autotune_sgemm(-5, 48, 32, 1.0f, A, B, 0.0f, C, 0),
"""
)


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("family", ["vectorized", "warptile"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_header_builds_without_warnings_and_refuses_bad_arguments(tmp_path, family, layout):
    """nvcc -Wall -Wextra (host) and -Xptxas -warn-spills, every warning an error; the three
    entry points; bad sizes, leading dimensions, transposes, pointers and overlaps refused."""
    fam = Family.load(family)
    params = {**Space.load(family).fallback.as_dict(), **fam.pinned_values(Problem(1, 1, 1, layout))}
    rec = {"problem": Problem(64, 48, 32, layout).as_dict(), "gpu": {"name": "test", "arch": "sm_90"}}
    entry = {"config": {"family": family, "params": params}, "gflops": 1.0, "ratio": 1.0}
    build_and_run_header_main(tmp_path, header_for_entry(rec, entry, "tuned.h"), HEADER_MAIN)


MULTI_MAIN = r"""#include <cstdio>
#include "tuned.h"
int main() {
    // Rejected before any CUDA call (so this runs without a GPU). The header holds nn, nt and tt:
    // cuBLAS's ('N', 'T') is the row-major tn layout, which it lacks.
    float* p = reinterpret_cast<float*>(0x100000);
    float *A = p, *B = p + 4096, *C = p + 8192;
    const cudaError_t e[] = {
        autotune_sgemm('N', 'T', 64, 48, 32, 1.0f, A, 64, B, 48, 0.0f, C, 64, 0),
        autotune_sgemm('Q', 'N', 64, 48, 32, 1.0f, A, 64, B, 32, 0.0f, C, 64, 0),
        autotune_sgemm('N', 'N', 0, 48, 32, 1.0f, A, 64, B, 32, 0.0f, C, 64, 0),
        autotune_sgemm('N', 'N', 64, 48, 32, 1.0f, A, 63, B, 32, 0.0f, C, 64, 0),
        autotune_sgemm('T', 'N', 64, 48, 32, 1.0f, A, 31, B, 32, 0.0f, C, 64, 0),
        autotune_sgemm('T', 'T', 64, 48, 32, 1.0f, A, 32, B, 48, 0.0f, A + 10, 64, 0),
        autotune_sgemm_strided_batched('N', 'N', 64, 48, 32, 1.0f, A, 64, 0, B, 32, 0, 0.0f, C, 64, 3072, 0, 0),
        autotune_nt::autotune_sgemm_row_major(48, 64, 32, 1.0f, B, 32, A, 32, 0.0f, C, 47, 0),
    };
    int refused = 0;
    for (cudaError_t x : e) refused += x == cudaErrorInvalidValue;
    printf("%d of %d refused (layouts %s)\n", refused, (int)(sizeof(e) / sizeof(e[0])), AUTOTUNE_LAYOUTS);
#if !defined(AUTOTUNE_HAS_NN) || !defined(AUTOTUNE_HAS_NT) || !defined(AUTOTUNE_HAS_TT) || defined(AUTOTUNE_HAS_TN)
    return 2;
#endif
    return refused == (int)(sizeof(e) / sizeof(e[0])) ? 0 : 1;
}
"""


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
def test_a_header_of_several_layouts_builds_and_dispatches_on_the_transposes(tmp_path, h100):
    """export --layouts: one kernel and its launchers per layout, each in its namespace (families
    mixed), built warning-free; cuBLAS's transposes go to their layout's kernel, a layout the
    header lacks is refused like bad arguments."""
    for fam, lay in [("warptile", "nn"), ("vectorized", "nt"), ("warptile", "tt")]:
        problem = Problem(64, 48, 32, lay)
        params = Family.load(fam).built_for(Space.load(fam).fallback, problem).as_dict()
        update_record(tmp_path, GPU, problem, {fam: _entry(fam, params, 1000.0, h100, problem)})
    slug, shape = GPU["slug"], Problem(64, 48, 32)
    export(tmp_path, slug, shape, tmp_path / "tuned.h", layouts=["nn", "nt", "tt"])
    header = (tmp_path / "tuned.h").read_text()
    assert "namespace autotune_nt {" in header and "autotune_tuned_sgemm_kernel_tt" in header
    build_and_run_header_main(tmp_path, header, MULTI_MAIN)
    with pytest.raises(UserError, match="64x48x32_tn"):
        export(tmp_path, slug, shape, tmp_path / "x.h", layouts=["nn", "tn"])
    assert not (tmp_path / "x.h").exists()


@pytest.mark.skipif(not have_nvcc(), reason="needs nvcc")
@pytest.mark.parametrize("layouts", [["tn"], ["nn", "nt", "tn", "tt"]], ids=["one layout", "four layouts"])
def test_the_example_program_compiles_with_either_kind_of_header(tmp_path, h100, layouts):
    """examples/sgemm_check.cu against a header of one layout and one of several, warning-free
    (compiled only: cuBLAS's declarations come from tests/data/fake_cublas; GPU tests run it)."""
    shape = Problem(100, 80, 60)
    for lay in layouts:
        problem = shape.with_layout(lay)
        params = Family.load("vectorized").built_for(Space.load("vectorized").fallback, problem)
        update_record(
            tmp_path, GPU, problem, {"vectorized": _entry("vectorized", params.as_dict(), 1e3, h100, problem)}
        )
    export(tmp_path, GPU["slug"], shape.with_layout(layouts[0]), tmp_path / "tuned_sgemm.h", layouts=layouts)
    fake = ROOT / "tests" / "data" / "fake_cublas"
    b = subprocess.run(
        ["nvcc", "-arch=sm_90", "-c", "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings", f"-I{tmp_path}",
         f"-I{fake}", str(ROOT / "examples" / "sgemm_check.cu"), "-o", str(tmp_path / "check.o")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert b.returncode == 0 and "warning" not in b.stderr.lower(), b.stderr
