"""A family's declaration and a space file are checked against their schema: each mistake is one
error naming the file and the line."""

import pytest

from autotune.core.types import Problem, UserError
from autotune.kernels.expr import Expr
from autotune.kernels.family import Family, known_families
from autotune.kernels.space import Space

GOOD = """{#- autotune
description: a test family
params:
  X: {domain: [1, 8], doc: "x"}
  MODE: {choices: [plain, fancy], default: plain}
derived:
  THREADS: 32 * X
  SMEM_BYTES: 0
constraints:
  - {expr: "X % 2 == 0 or MODE == 'plain'", why: "fancy needs an even X"}
launch:
  grid: ["cdiv(N, 32)", "cdiv(M, 32)", "1"]
-#}
{% include "_common.cuh.j2" %}
extern "C" __global__ void {{ KERNEL_NAME }}(int M, int N, int K, float alpha, const float* A,
    const float* B, float beta, float* C) {}
"""


def _family(tmp_path, text, name="fam"):
    (tmp_path / f"{name}.cu.j2").write_text(text)
    return Family.load(name, tmp_path)


def test_a_good_declaration_with_named_choices(tmp_path, h100):
    fam = _family(tmp_path, GOOD)
    assert fam.params["MODE"].choices == ("plain", "fancy") and fam.defaults == {"MODE": "plain"}
    assert fam.resolve({"X": 3}).config.as_dict() == {"X": 3, "MODE": "plain"}
    assert fam.violations(fam.resolve({"X": 3, "MODE": "fancy"}).config, h100) == [
        "fancy needs an even X (X % 2 == 0 or MODE == 'plain'; MODE=fancy, X=3)"
    ]
    sp = Space.from_dict(fam, {"space": {"X": [2, 1], "MODE": ["fancy", "plain"]}}, "s.yaml")
    assert sp.values == {"X": [1, 2], "MODE": ["plain", "fancy"]}  # integers ascending, choices as declared
    assert len(sp.enumerate(h100).valid) == 3


@pytest.mark.parametrize(
    "change, fragment",
    [
        (("constraints:", "constraint:"), ":9: unknown key 'constraint' in the declaration"),
        (("  X: {domain", "  X: {domian"), ":4: unknown key 'domian' in parameter X"),
        (("[1, 8]", "[1, 8.5]"), ":4: domain of X must be [lo, hi], two integers"),
        (("[1, 8]", "[8, 1]"), "lo <= hi"),
        (("default: plain", "default: shiny"), ":5: MODE must be one of plain, fancy, got 'shiny'"),
        (("choices: [plain, fancy]", "choices: [plain, plain]"), ":5: choices of MODE must be distinct"),
        (
            ("  SMEM_BYTES: 0\n", "  SMEM_BYTES: 0\n  THREADS: 64\n"),
            ":9: malformed YAML: duplicate key 'THREADS' (first at line 7)",
        ),
        (("  SMEM_BYTES: 0\n", "  SMEM_BYTES: 1.5\n"), ":8: derived SMEM_BYTES must be an integer expression"),
        (("  SMEM_BYTES: 0\n", "  SMEM_BYTES: Y * 2\n"), ":8: derived SMEM_BYTES reads unknown ['Y']"),
        (("  SMEM_BYTES: 0\n", "  SMEM_BYTES: \"'a' + 1\"\n"), "only integer constants"),
        (
            ('grid: ["cdiv(N, 32)", "cdiv(M, 32)", "1"]', 'grid: ["cdiv(N, 32)", "1"]'),
            ":12: launch.grid must list three",
        ),
        (("  grid:", "  gird:"), "unknown key 'gird' in launch"),
        (('why: "fancy needs an even X"', 'why: "x", because: 1'), "unknown key 'because' in a constraint"),
        (("  THREADS: 32 * X\n", ""), "derived values must define THREADS"),
        (('{% include "_common.cuh.j2" %}', "{% if X %}"), ":15: template syntax error"),
        (('"1"]\n', '"1"]\n  pack_b: "N % 4"\n'), ":13: launch.pack_b needs launch.workspace"),
        (('"1"]\n', '"1"]\n  prepare: "M * K"\n'), ":13: launch.prepare needs launch.workspace"),
        (("description: a test family\n", "description: a test family\narch: sm_90\n"), ":3: arch must name an"),
        # The kernels see C's packed pitch as N: B must be padded to it too.
        (('"1"]\n', '"1"]\n  workspace: "16 * M * N"\n  pack_c: "N % 4"\n'), ":14: launch.pack_c needs launch.pack_b"),
    ],
)
def test_declaration_mistakes_name_the_file_and_line(tmp_path, change, fragment):
    old, new = change
    assert old in GOOD
    with pytest.raises(UserError) as exc:
        _family(tmp_path, GOOD.replace(old, new, 1))
    assert str(tmp_path / "fam.cu.j2") in str(exc.value) and fragment in str(exc.value), str(exc.value)


def test_a_misspelled_constraints_key_no_longer_drops_every_constraint(tmp_path):
    """`constraint:` for `constraints:` used to be ignored: every point became valid."""
    with pytest.raises(UserError, match="unknown key 'constraint'"):
        _family(tmp_path, GOOD.replace("constraints:", "constraint:"))


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ("space: {X: [1, 2]}\nspace: {X: [3]}\n", ":2: malformed YAML: duplicate key 'space' (first at line 1)"),
        ("space: {X: [1, 2], X: [3]}\n", "duplicate key 'X'"),
        ("space: {X: [1, 2], MODE: [plain, shiny]}\n", ":1: MODE must be one of plain, fancy, got 'shiny'"),
        ("space: {X: [2.5]}\n", ":1: X must be an integer, got 2.5"),
        ("space: {X: [1]}\nseeds:\n  - {X: 1, MODE: fancy}\n  - {X: 9}\n", ":4 seed #2: X=9 is outside its domain"),
        ("space: {X: [1]}\nseedz: []\n", ":2: unknown key 'seedz'"),
        ("space: {X: [1]}\nfallback: {X: 0}\n", "fallback: X=0 is outside its domain"),
    ],
)
def test_space_file_mistakes_name_the_file_and_line(tmp_path, doc, fragment):
    fam = _family(tmp_path, GOOD)
    path = tmp_path / "space.yaml"
    path.write_text(doc)
    with pytest.raises(UserError) as exc:
        Space.load(fam, path)
    assert str(path) in str(exc.value) and fragment in str(exc.value), str(exc.value)


def test_a_space_file_that_is_not_utf8_is_one_error(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_bytes(b"space: {TILE: [8]}\n# \xff\xfe latin-1 here\n")
    with pytest.raises(UserError, match=r"not UTF-8 text \(byte 0xff at offset 21\)"):
        Space.load("tiled", path)


def test_an_extra_template_folder_that_does_not_exist_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOTUNE_TEMPLATES", str(tmp_path / "nonexistent"))
    with pytest.raises(UserError, match="AUTOTUNE_TEMPLATES: .*nonexistent is not a folder"):
        known_families()
    monkeypatch.setenv("AUTOTUNE_TEMPLATES", str(tmp_path))
    assert "warptile" in known_families()


def test_names_compare_only_with_equality():
    assert Expr.parse("MODE == 'fancy' or X > 2")({"MODE": "fancy", "X": 1}) is True
    for bad in ("MODE < 'fancy'", "'a'", "X + 'a' == 1"):
        with pytest.raises(UserError, match="only integer constants"):
            Expr.parse(bad)
    # A comparison the config decides folds away in C; a name cannot reach C otherwise.
    assert Expr.parse("4 if MODE == 'fancy' else N").to_c({"MODE": "plain"}) == "N"
    with pytest.raises(UserError):
        Expr.parse("MODE").to_c({"MODE": "plain"})


def test_suits_name_the_shapes_a_family_is_meant_for(tmp_path):
    text = GOOD.replace("launch:", 'suits:\n  - {expr: "M <= 16 or N <= 16", why: "a few rows or columns"}\nlaunch:')
    fam = _family(tmp_path, text)
    assert fam.unsuited(Problem(1, 4096, 4096)) == [] and fam.unsuited(Problem(4096, 8, 64)) == []
    assert fam.unsuited(Problem(17, 17, 1)) == ["a few rows or columns"]
    assert _family(tmp_path, GOOD, "plain").unsuited(Problem(4096, 4096, 4096)) == []  # no suits: every shape
    with pytest.raises(UserError, match=r":12: suit reads unknown \['X'\]"):  # the shape only, not the config
        _family(tmp_path, text.replace("M <= 16 or", "X <= 16 or"))
    with pytest.raises(UserError, match="unknown key 'because' in an entry of suits"):
        _family(tmp_path, text.replace('why: "a few rows or columns"', "because: 1"))


def test_a_search_over_all_families_leaves_out_those_not_meant_for_the_shape(capsys, h100):
    from autotune.cli.search import suited

    spaces = [Space.load(f) for f in ("tiled", "fewrows", "fewcols")]
    names = lambda sps: [sp.family.name for sp in sps]  # noqa: E731
    assert names(suited(spaces, Problem(1, 4096, 4096), named=False, limits=h100)) == ["tiled", "fewrows"]
    assert names(suited(spaces, Problem(4096, 4096, 4096), named=False, limits=h100)) == ["tiled"]
    assert "fewcols: not for 4096x4096x4096 (a few columns of C" in capsys.readouterr().out
    named = suited(spaces, Problem(4096, 4096, 4096), named=True, limits=h100)
    assert names(named) == ["tiled", "fewrows", "fewcols"]


def test_a_search_on_another_gpu_leaves_out_a_family_built_for_sm_90a(capsys, h100):
    """A tier search on an A100 runs the families it can (it used to stop: wgmma_tf32 had no
    valid point there); naming the family there is a one-line error."""
    from autotune.cli.search import suited
    from autotune.kernels.limits import load_profile

    a100 = load_profile("a100")
    spaces = [Space.load(f) for f in ("mma_tf32", "wgmma_tf32", "warptile")]
    high = Problem(4096, 4096, 4096, precision="high")
    kept = [sp.family.name for sp in suited(spaces, high, named=False, limits=a100)]
    assert kept == ["mma_tf32", "warptile"]
    assert "wgmma_tf32: not for 4096x4096x4096_high (wgmma_tf32 needs an sm_90 device" in capsys.readouterr().out
    assert len(suited(spaces, high, named=False, limits=h100)) == 3
    with pytest.raises(UserError, match="wgmma_tf32 needs an sm_90 device .* this one is sm_80"):
        suited(spaces[1:2], high, named=True, limits=a100)
