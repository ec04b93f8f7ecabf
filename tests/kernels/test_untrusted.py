"""Untrusted inputs, tried as an attacker would, at the mechanism each goes through: YAML with
aliases that recurse (the one YAML loader), spaces too large to enumerate (the enumeration),
templates that raise, nest too deeply or reach for Python (the sandboxed Jinja environment and
the declaration's parser), a damaged compile-cache entry (the cache reader) and a repro line
nested too deeply. Each is one UserError naming what is wrong, or for the cache a miss.

Where the code before these checks hung or ate memory, the check runs in a child process under
a memory cap, with a timeout as a hang guard."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autotune.core.types import UserError
from autotune.kernels import enumeration
from autotune.kernels.family import Family
from autotune.kernels.limits import load_profile
from autotune.kernels.render import render
from autotune.kernels.space import Space

ROOT = Path(__file__).resolve().parents[2]
TILED = (ROOT / "templates" / "tiled.cu.j2").read_text()
HANG_GUARD_S = 60
MEMORY_CAP = 2 << 30  # the child's address space: what grew for ever fails fast instead


def _child(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python (this checkout's autotune) under MEMORY_CAP and the hang guard."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    argv, env = [sys.executable, "-c", textwrap.dedent(code)], {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S, preexec_fn=cap, env=env)


def _family(folder: Path, name: str, old: str, new: str) -> Family:
    """A family `name` in `folder`: tiled's template with `old` replaced by `new`."""
    assert old in TILED
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.cu.j2").write_text(TILED.replace(old, new, 1))
    return Family.load(name, folder)


# ---- YAML aliases --------------------------------------------------------------------------


def test_a_recursive_alias_is_one_line_naming_the_file_and_line_and_shared_aliases_still_load():
    r = _child(
        """
        from autotune.core import yamlio
        from autotune.core.types import UserError
        for text in ("space: {TILE: &x [16, *x]}", "a: 1\\nb: &m {c: *m}", "m: &m {a: 1, <<: *m}",
                     "- &a [[[*a]]]", "x: &x\\n  y: [1, {z: *x}]"):
            try:
                yamlio.parse(text, "f.yaml")
                print("loaded", repr(text))
            except UserError as exc:
                print(exc)
        print(yamlio.parse("a: &a [1, 2]\\nb: [*a, *a]\\nc: {d: *a}", "f.yaml"))
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines[:5]] == ["f.yaml:1", "f.yaml:2", "f.yaml:1", "f.yaml:1", "f.yaml:1"]
    assert all("a recursive alias" in ln for ln in lines[:5]), lines
    assert lines[5] == "{'a': [1, 2], 'b': [[1, 2], [1, 2]], 'c': {'d': [1, 2]}}"


# ---- spaces too large ----------------------------------------------------------------------


def test_a_space_is_counted_before_it_is_built(tmp_path):
    """10^16 points (a template's space, or a --config that widens one) are refused at once,
    naming the file, the count and the bound; the enumeration never starts."""
    params = "".join(f"  P{i}: {{domain: [1, 100], doc: x}}\n" for i in range(8))
    (tmp_path / "huge.cu.j2").write_text(TILED.replace("params:\n", "params:\n" + params, 1))
    values = "".join(f"  P{i}: [{', '.join(map(str, range(1, 101)))}]\n" for i in range(8))
    (tmp_path / "huge.yaml").write_text(f"family: huge\nmodel: {{tile: [TILE, TILE]}}\nspace:\n  TILE: [16]\n{values}")
    r = _child(
        """
        from autotune.core.types import UserError
        from autotune.kernels.counts import count_valid
        from autotune.kernels.limits import load_profile
        from autotune.kernels.space import Space
        try:
            count_valid(Space.load("huge"), load_profile("h100"))
        except UserError as exc:
            print(exc)
        """,
        env={"AUTOTUNE_TEMPLATES": str(tmp_path), "AUTOTUNE_CACHE": str(tmp_path / "cache")},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == (
        f"{tmp_path / 'huge.yaml'}: family huge's space has 10,000,000,000,000,000 points (the product of its "
        "value lists' lengths), more than the 250,000,000 one search may walk; narrow its value lists"
    )


def test_a_space_with_more_valid_points_than_can_be_held_is_refused_before_they_are_made(monkeypatch):
    monkeypatch.setattr(enumeration, "MAX_VALID", 1000)
    sp = Space.load("coarse2d")  # 1,593 valid points of 3,125 on an H100
    with pytest.raises(UserError) as exc:
        sp.enumerate(load_profile("h100"))
    assert str(exc.value) == (
        f"{sp.source}: more than 1,000 of the 3,125 points of family coarse2d's space pass the static filter, "
        "more than a search holds; narrow its value lists"
    )


def test_a_space_whose_rules_would_be_evaluated_too_often_is_refused_before_they_are(monkeypatch):
    """Every value of coarse1d's domains: 6.4 million distinct combinations for its rules to be
    evaluated on, once 17 s of Python; here the same refusal, at a bound fewrows' space passes."""
    monkeypatch.setattr(enumeration, "MAX_EVALS", 5000)
    limits = load_profile("h100")
    assert Space.load("fewrows").enumerate(limits).valid  # 3,765 evaluations
    fam = Family.load("coarse1d")
    wide = {"BM": list(range(1, 257)), "BN": list(range(1, 257)), "BK": list(range(1, 65)), "TM": list(range(1, 17))}
    sp = Space.from_dict(fam, {"space": wide}, "wide.yaml")
    with pytest.raises(UserError) as exc:
        sp.enumerate(limits)
    assert str(exc.value) == (
        "wide.yaml: the static filter would evaluate family coarse1d's rules more than 5,000 times over the "
        "67,108,864 points of its space; narrow its value lists"
    )


def test_the_bounds_are_well_above_every_shipped_space(monkeypatch):
    """MAX_POINTS at least 8x the largest space that ships, MAX_VALID at least 2x the most valid
    points one has (warptile's 1,372,608 on an H100, counted by `autotune list --count`), and
    MAX_EVALS at least 20x what the space with the most evaluations (fewcols') needs."""
    sizes = {p.stem: Space.load(p.stem).size for p in (ROOT / "configs").glob("*.yaml")}
    assert max(sizes.values()) * 8 <= enumeration.MAX_POINTS, sizes
    assert 1_372_608 * 2 <= enumeration.MAX_VALID
    monkeypatch.setattr(enumeration, "MAX_EVALS", enumeration.MAX_EVALS // 20)
    assert Space.load("fewcols").enumerate(load_profile("h100")).valid


# ---- templates: the declaration's parse ----------------------------------------------------


def test_a_declaration_without_its_end_is_found_missing_in_one_pass(tmp_path):
    """A few thousand blank lines and no `#}`: the declaration's pattern once backtracked over
    them for minutes."""
    (tmp_path / "blank.cu.j2").write_text("{#- autotune\n" + " \n" * 5000)
    r = _child(
        f"""
        from autotune.core.types import UserError
        from autotune.kernels.family import Family
        try:
            Family.load("blank", {str(tmp_path)!r})
        except UserError as exc:
            print(exc)
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f"{tmp_path / 'blank.cu.j2'}: no '{{#- autotune' declaration block at the top"


@pytest.mark.parametrize(
    "old, new, said",
    [
        ("__syncthreads();", "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "nested or recursing too deeply"),
        ("__syncthreads();", "{{ " + "9" * 5000 + " }}", "the template raised ValueError: Exceeds the limit"),
        ("THREADS: TILE * TILE", "THREADS: " + "-" * 3000 + "TILE * TILE", "is nested too deeply"),
        ("THREADS: TILE * TILE", "THREADS: " + "+".join(["TILE"] * 3000), "is nested too deeply"),
        ("THREADS: TILE * TILE", "THREADS: " + "-" * 200 + "TILE * TILE", "is nested more than 100 deep"),
    ],
    ids=["jinja-nesting", "jinja-long-integer", "unary-chain", "long-sum", "deep-expression"],
)
def test_a_template_too_deep_or_too_long_to_parse_is_one_line(tmp_path, old, new, said):
    with pytest.raises(UserError) as exc:
        _family(tmp_path, "deep", old, new)
    assert str(tmp_path / "deep.cu.j2") in str(exc.value) and said in str(exc.value)


# ---- templates: rendering ------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, said",
    [
        ("{{ 1 // 0 }}", "the template raised ZeroDivisionError: integer division or modulo by zero"),
        ("{{ TILE + 'x' }}", "the template raised TypeError: unsupported operand type(s) for +"),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nested or recursing too deeply"),
    ],
    ids=["division-by-zero", "a-type-error", "recursive-macro"],
)
def test_a_template_that_raises_while_rendering_is_one_line_naming_its_line(tmp_path, code, said):
    fam = _family(tmp_path, "raises", "__syncthreads();", code + "__syncthreads();")
    line = TILED.replace("__syncthreads();", "\0", 1).split("\0")[0].count("\n") + 1
    with pytest.raises(UserError) as exc:
        render(fam.resolve({"TILE": 16}))
    assert str(exc.value).startswith(f"{fam.path}:{line}: ") and said in str(exc.value), str(exc.value)


@pytest.mark.parametrize(
    "code",
    [
        "cycler.__init__.__globals__.os.popen('touch {marker}').read()",
        "''.__class__.__mro__[1].__subclasses__()",
        "lipsum.__globals__['os'].system('touch {marker}')",
        "joiner.__init__.__globals__.__builtins__.open('{marker}', 'w')",
        "self.__init__.__globals__.__builtins__.__import__('os').system('touch {marker}')",
        "namespace.__init__.__globals__",
        "range.__globals__['sys'].modules",
        "(TILE).__class__.__base__.__subclasses__()",
    ],
)
def test_a_template_cannot_reach_python(tmp_path, code):
    """Jinja without its sandbox ran these (a shell command from a template of another folder);
    in the sandbox each is one line, and nothing ran."""
    marker = tmp_path / "ran"
    fam = _family(tmp_path, "escape", "__syncthreads();", "{{ " + code.format(marker=marker) + " }}__syncthreads();")
    with pytest.raises(UserError) as exc:
        render(fam.resolve({"TILE": 16}))
    assert str(exc.value).startswith(f"{fam.path}:") and "outside the template sandbox" in str(exc.value), exc.value
    assert not marker.exists()


def test_the_sandbox_leaves_what_templates_do_alone(tmp_path):
    """Loops, macros of an imported file, the launch values' C, filters, string formatting."""
    fam = _family(
        tmp_path,
        "plain",
        "__syncthreads();",
        "{% for i in range(2) %}{{ loop.index }}{{ ',' if not loop.last }}{% endfor %} "
        "{{ LAUNCH_C | length > 0 }} {{ '%d-%s' % (TILE, KERNEL_NAME) }} {{ '{}'.format(THREADS) }} "
        "{{ [3, 1, 2] | sort | join('') }} {{ {'a': 1}.items() | list }}__syncthreads();",
    )
    src = render(fam.resolve({"TILE": 16}))
    assert "1,2 True 16-autotune_sgemm 256 123 [('a', 1)]__syncthreads();" in src


# ---- the compile cache ---------------------------------------------------------------------


def _damaged(meta: dict) -> list[tuple[str, bytes | None, bytes | None]]:
    good = json.dumps(meta).encode()

    def res(**change):
        return json.dumps({**meta, "resources": {**meta["resources"], **change}}).encode()

    return [
        ("registers null", res(registers=None), None),
        ("registers a string", res(registers="32"), None),
        ("registers true", res(registers=True), None),
        ("negative spills", res(spill_bytes=-1), None),
        ("a float", res(stack_bytes=1.5), None),
        ("a field missing", json.dumps({**meta, "resources": {"registers": 32}}).encode(), None),
        ("a field more", res(extra=1), None),
        ("log not text", json.dumps({**meta, "log": 7}).encode(), None),
        ("a list", b"[1, 2]", None),
        ("nested deep", b"[" * 10**5 + b"]" * 10**5, None),
        ("not JSON", b"{", None),
        ("cubin not ELF", good, b"garbage"),
        ("cubin empty", good, b""),
    ]


@pytest.fixture(scope="module")
def cache_entry(tmp_path_factory):
    """A real entry of the compile cache (tiled, TILE 16): its folder, source, JSON and cubin."""
    from autotune.gpu.compile import compile_source
    from autotune.kernels.render import DEFAULT_KERNEL

    folder = tmp_path_factory.mktemp("cache")
    src = render(Family.load("tiled").resolve({"TILE": 16}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOTUNE_CACHE", str(folder))
        compile_source(src, "sm_90", DEFAULT_KERNEL)
    (meta_path,) = (folder / "nvrtc").glob("*.json")
    return folder, src, json.loads(meta_path.read_text()), meta_path.with_suffix(".cubin").read_bytes()


def test_every_kind_of_damage_to_a_compile_cache_entry_is_a_miss(cache_entry):
    from autotune.gpu.compile import _cached

    _folder, _src, meta, cubin = cache_entry
    assert _cached(json.dumps(meta).encode(), cubin) is not None  # the entry as written is a hit
    for what, raw, bad_cubin in _damaged(meta):
        assert _cached(raw, cubin if bad_cubin is None else bad_cubin) is None, what


def test_a_damaged_compile_cache_entry_is_compiled_and_written_again(cache_entry, monkeypatch):
    """An entry whose registers are null was taken as it was, and the filter's sums over
    registers raised TypeError."""
    from autotune.gpu.compile import compile_source
    from autotune.kernels.render import DEFAULT_KERNEL

    folder, src, meta, cubin = cache_entry
    monkeypatch.setenv("AUTOTUNE_CACHE", str(folder))
    (meta_path,) = (folder / "nvrtc").glob("*.json")
    meta_path.write_text(json.dumps({**meta, "resources": {**meta["resources"], "registers": None}}))
    again = compile_source(src, "sm_90", DEFAULT_KERNEL)
    assert not again.cached and again.resources.registers == meta["resources"]["registers"]
    assert json.loads(meta_path.read_text())["resources"] == meta["resources"]
    assert compile_source(src, "sm_90", DEFAULT_KERNEL).cached  # the entry written again is a hit


# ---- fuzz --repro --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '[{"M": ' + "[" * 5000 + "]" * 5000 + "}]"])
def test_a_repro_nested_too_deeply_is_one_line(text):
    from autotune.dispatch.fuzz import parse_repro

    with pytest.raises(UserError, match=r"^--repro: JSON nested too deeply"):
        parse_repro(text)
