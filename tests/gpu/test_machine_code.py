"""Records name the kernel they measured by its machine code (gpu.machine_code), so a template
refactor that compiles to the same code keeps every record, and `check --static` names exactly
the records a change invalidates."""

import json
import shutil

import pytest
from helpers import RESULTS

from autotune.gpu.compile import compile_source, nvrtc_version
from autotune.gpu.machine_code import NotACubin, code_digest
from autotune.kernels.family import TEMPLATE_DIR, TEMPLATES_ENV, Family
from autotune.kernels.limits import profile_for_arch
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.kernels.space import Space
from autotune.records.check import check_static
from autotune.records.results import entry_config

SLUG = "nvidia-h200"
SHAPE = "4096x4096x4096.json"


def _compile(resolved, extra=""):
    return compile_source(render(resolved) + extra, "sm_90", DEFAULT_KERNEL, use_cache=False)


# tiled: a small kernel NVRTC builds the same way every time (quick to build again). The largest
# warptile kernels are not (check.py's _FRESH_TRIES): test_a_build_that_differs_once_... covers that.
FAMILY = "tiled"


def _entry():
    return json.loads((RESULTS / SLUG / SHAPE).read_text())["families"][FAMILY]


def test_the_digest_is_of_the_code_not_of_the_module_around_it():
    resolved = Family.load(FAMILY).resolve(entry_config(_entry()))
    plain = _compile(resolved)
    # compile.py's nonce kernel (added where NVRTC's cache hides ptxas's report) and any other
    # text that emits no code leave the digest as it is; the bytes of the cubin do change.
    nonce = _compile(resolved, '\nextern "C" __global__ void autotune_nonce_1_2() {}\n')
    comment = _compile(
        resolved, "\n// a comment, and a device function nobody calls\nstatic __device__ int f() { return 1; }\n"
    )
    assert nonce.cubin != plain.cubin
    assert code_digest(plain.cubin) == code_digest(nonce.cubin) == code_digest(comment.cubin)
    assert len(code_digest(plain.cubin)) == 16
    # Another kernel's code, or another kernel beside it, is another digest.
    tiled = Space.load("tiled")
    other = tiled.family.resolve(tiled.enumerate(profile_for_arch("sm_90")).valid[0])
    assert code_digest(_compile(other).cubin) != code_digest(plain.cubin)
    beside = _compile(resolved, '\nextern "C" __global__ void g(float* x) { x[0] = 1.0f; }\n')
    assert code_digest(beside.cubin) != code_digest(plain.cubin)


@pytest.mark.parametrize("data", [b"", b"\x7fELF\x01" + b"\0" * 80, b"\x7fELF\x02" + b"\xff" * 80, b"not an elf"])
def test_what_is_not_a_cubin_is_refused_with_a_reason(data):
    with pytest.raises(NotACubin):
        code_digest(data)


@pytest.fixture
def record(tmp_path):
    """One stored record whose warptile entry names the code today's template compiles to."""
    (tmp_path / SLUG).mkdir()
    path = tmp_path / SLUG / SHAPE
    data = json.loads((RESULTS / SLUG / SHAPE).read_text())
    data["families"] = {FAMILY: data["families"][FAMILY]}
    data["best"] = FAMILY
    entry = data["families"][FAMILY]
    entry["code"] = code_digest(_compile(Family.load(FAMILY).resolve(entry_config(entry))).cubin)
    entry.setdefault("versions", {})["nvrtc"] = nvrtc_version()
    path.write_text(json.dumps(data))
    return tmp_path, path


def _row(root):
    (row,) = check_static(root, SLUG)
    return row


def _set(path, **fields):
    """The stored record's entry, its `fields` changed (none: as it is)."""
    data = json.loads(path.read_text())
    data["families"][FAMILY] |= fields
    path.write_text(json.dumps(data))
    return data["families"][FAMILY]


def _templates_with(tmp_path, edit):
    """A copy of the templates folder with the family's template edited, searched first."""
    folder = tmp_path / "templates"
    shutil.copytree(TEMPLATE_DIR, folder)
    main = folder / f"{FAMILY}.cu.j2"
    main.write_text(edit(main.read_text()))
    return folder


def test_a_reworded_template_that_compiles_to_the_same_code_keeps_its_records(record, tmp_path, monkeypatch):
    root, _ = record
    assert _row(root).status == "pass" and "the machine code measured" in _row(root).detail
    # A comment and blank lines: another source (its hash changes), the same instructions.
    folder = _templates_with(tmp_path, lambda text: text + "\n{# a note #}\n// why this kernel exists\n\n")
    monkeypatch.setenv(TEMPLATES_ENV, str(folder))
    row = _row(root)
    assert row.status == "pass", row.detail


def test_a_template_change_that_moves_the_code_names_each_record_it_touches(record, tmp_path, monkeypatch):
    root, path = record
    # The template now emits more code (a kernel beside the GEMM): the GEMM's registers are as
    # recorded, but the module is not the one measured.
    extra = '\nextern "C" __global__ void autotune_probe(float* x) { x[0] = 1.0f; }\n'
    folder = _templates_with(tmp_path, lambda text: text + extra)
    monkeypatch.setenv(TEMPLATES_ENV, str(folder))
    row = _row(root)
    assert row.status in ("stale", "fail") and "the machine code differs from the one measured" in row.detail
    # Recorded with another NVRTC: the compiler may be what moved the code, a warning.
    _set(path, versions=_set(path)["versions"] | {"nvrtc": "0.1"})
    row = _row(root)
    assert row.status == "warn" and "NVRTC" in row.detail


def test_another_code_with_the_same_resources_is_stale_and_with_other_resources_fails(record):
    root, path = record
    _set(path, code="0" * 16)
    row = _row(root)
    assert row.status == "stale" and "re-time it on the GPU" in row.detail
    _set(path, registers=12)
    row = _row(root)
    assert row.status == "fail" and "registers 12 ->" in row.detail and "tune this shape again" in row.detail


def test_the_command_line_counts_stale_records_and_exits_zero(record, capsys):
    from autotune.cli import main

    root, path = record
    _set(path, code="0" * 16)
    assert main(["check", "--static", "--results", str(root), "--gpu", SLUG]) == 0
    out = capsys.readouterr().out
    assert "STALE" in out and "1 checked, 0 failed, 1 stale" in out


def test_a_build_that_differs_once_is_confirmed_by_another(record, monkeypatch):
    """One build of several NVRTC may emit for a source (check._FRESH_TRIES) is not a verdict:
    check --static builds again, and a record of any one of them passes."""
    import autotune.gpu.compile as compile_module

    root, _ = record
    real = compile_module.compile_source
    calls = []

    def first_fresh_build_differs(source, arch, kernel, options=(), use_cache=True):
        out = real(source, arch, kernel, options, use_cache)
        calls.append(use_cache)
        if len(calls) == 1:  # prepare's build: as if NVRTC had laid the code out otherwise
            extra = '\nextern "C" __global__ void autotune_other_build(float* x) { x[0] = 2.0f; }\n'
            return real(source + extra, arch, kernel, options, False)
        return out

    monkeypatch.setattr(compile_module, "compile_source", first_fresh_build_differs)
    # The builds ahead of the check (all configs at once, into the cache) would be the first call
    # here; this test is of the check's own builds, so they go.
    monkeypatch.setattr("autotune.records.check._compile_ahead", lambda configs, jobs: None)
    row = _row(root)
    assert row.status == "pass" and calls[1:] == [False], (row.detail, calls)


def test_a_stale_record_is_judged_by_its_nearest_build_not_its_last(record, monkeypatch):
    """A stale record's builds all differ in code, so check --static builds it _FRESH_TRIES times;
    one of them with other registers (NVRTC's variation) does not turn stale into fail."""
    import dataclasses

    import autotune.gpu.compile as compile_module
    from autotune.records.check import _FRESH_TRIES

    root, path = record
    entry = _set(path, code="0" * 16)
    real, fresh = compile_module.compile_source, []

    def last_fresh_build_has_more_registers(source, arch, kernel, options=(), use_cache=True):
        out = real(source, arch, kernel, options, use_cache)
        if not use_cache:
            fresh.append(out)
            if len(fresh) == _FRESH_TRIES:
                regs = out.resources.registers + 4
                out = dataclasses.replace(out, resources=dataclasses.replace(out.resources, registers=regs))
        return out

    monkeypatch.setattr(compile_module, "compile_source", last_fresh_build_has_more_registers)
    row = _row(root)
    assert len(fresh) == _FRESH_TRIES and row.status == "stale", row.detail
    # Every build with other registers: a kernel the record did not measure.
    _set(path, registers=entry["registers"] + 1)
    fresh.clear()
    row = _row(root)
    assert row.status == "fail" and "tune this shape again" in row.detail, row.detail


def test_a_record_without_code_is_built_again_until_its_resources_match(record, monkeypatch):
    """An older record (no `code`) is judged by its registers: two builds with 3 more (NVRTC's
    variation, seen in CI at 4097^3) are not a verdict while a further fresh build matches."""
    import dataclasses

    import autotune.gpu.compile as compile_module

    root, path = record
    data = json.loads(path.read_text())
    del data["families"][FAMILY]["code"]
    path.write_text(json.dumps(data))
    real, calls = compile_module.compile_source, []

    def first_two_builds_have_more_registers(source, arch, kernel, options=(), use_cache=True):
        out = real(source, arch, kernel, options, use_cache)
        calls.append(use_cache)
        if len(calls) <= 2:  # prepare's build and the first fresh one
            regs = out.resources.registers + 3
            out = dataclasses.replace(out, resources=dataclasses.replace(out.resources, registers=regs))
        return out

    monkeypatch.setattr(compile_module, "compile_source", first_two_builds_have_more_registers)
    monkeypatch.setattr("autotune.records.check._compile_ahead", lambda configs, jobs: None)
    row = _row(root)
    assert row.status == "pass" and calls[1:] == [False, False], (row.detail, calls)
