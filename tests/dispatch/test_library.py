"""The dispatching header as a library: it chooses as the header, builds with CMake, bad paths are one line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.core.types import Problem, UserError
from autotune.dispatch.header import export_dispatch
from autotune.dispatch.library import export_library
from tests.dispatch.test_header import FAKE_CUBLAS, RES, _draw, _host_choices, host_choices, nvcc_warning_free
from tests.helpers import have_nvcc

ROOT = Path(__file__).resolve().parents[2]
SLUG = "nvidia-h100-80gb-hbm3"
SHAPES = [Problem(1000, 1000, 1000), Problem(4096, 4096, 4096)]


def _library_choices(lib: Path, tmp_path: Path, problems: list[Problem]) -> list[str]:
    """The library's choices: its dispatch.cu built by the host compiler, model only, at `problems`."""
    flags, dispatch = ("-DAUTOTUNE_MODEL_ONLY", f"-I{lib / 'include'}"), lib / "src" / "dispatch.cu"
    return host_choices(tmp_path, problems, '#include "autotune_sgemm.h"\n', *flags, sources=[dispatch])


@pytest.mark.slow  # a library or header built by g++ and compared: tens of seconds on two cores
@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_the_librarys_choice_is_the_headers(tmp_path):
    # The same records and budget: at a seeded draw of every layout, batching and beta, the
    # library's dispatch.cu (linked, not included) picks the header's kernel each time.
    header = tmp_path / "tuned.h"
    _, d = export_dispatch(RES, SLUG, header, shapes=SHAPES)
    _, d_lib = export_library(RES, SLUG, tmp_path / "lib", shapes=SHAPES)
    assert [c.name for c in d_lib.configs] == [c.name for c in d.configs]
    problems = _draw(19, 60)
    want = _host_choices(header, tmp_path, problems)
    got = _library_choices(tmp_path / "lib", tmp_path, problems)
    assert got == want
    assert len(set(got)) >= 3  # a draw that tells kernels apart


@pytest.mark.slow  # a library export and its build: 12 s on two cores (CI's slow step)
def test_the_kernels_are_split_over_files_and_the_public_header_holds_none(tmp_path):
    out, d = export_library(RES, SLUG, tmp_path / "lib", shapes=SHAPES, per_file=8)
    n = len(d.configs)
    files = sorted((out / "src").glob("kernels_*.cu"))
    assert len(files) == -(-n // 8) > 1
    run = re.compile(r"^cudaError_t autotune_sgemm_run_(\d+)\(", re.M)
    defined = [int(i) for f in files for i in run.findall(f.read_text())]
    assert sorted(defined) == list(range(n))  # each kernel once, in one file
    public = (out / "include" / "autotune_sgemm.h").read_text()
    assert "__global__" not in public and "autotune_sgemm_run_" not in public
    for name in ("autotune_sgemm(char transa", "_sgemm_strided_batched(", "autotune_choose(", "namespace autotune_tt"):
        assert name in public
    cmake = (out / "CMakeLists.txt").read_text()
    assert "CUDA_ARCHITECTURES 90 " in cmake and all(f"src/{f.name}" in cmake for f in files)
    assert "option(AUTOTUNE_WITH_CUBLAS" in cmake and "CUDA::cublas" in cmake  # off unless asked
    dispatch = (out / "src" / "dispatch.cu").read_text()
    assert "__global__" not in dispatch and dispatch.count("#ifdef AUTOTUNE_WITH_CUBLAS") == 3


def _files(out: Path) -> dict:
    return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_bad_library_paths_are_one_line_and_leave_nothing(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    for bad, why in (("file", "is a file"), ("missing/lib", "does not exist"), ("other", "not an exported library")):
        with pytest.raises(UserError, match=why):
            export_library(RES, SLUG, tmp_path / bad, shapes=SHAPES[:1])
    assert (tmp_path / "other" / "keep.txt").read_text() == "mine"
    # An earlier library is replaced whole; a write that fails half-way leaves it as it was.
    out, _ = export_library(RES, "nvidia-h200", tmp_path / "lib", shapes=SHAPES[:1], kernels=4)
    before = _files(out)
    written = []
    real = Path.write_text

    def failing(self, *a, **k):
        written.append(self)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", failing)
    with pytest.raises(UserError, match="cannot write .No space left"):
        export_library(RES, SLUG, out, shapes=SHAPES[:1])
    monkeypatch.undo()
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "lib", "other"]  # no temporary folder left
    argv = ["export", "--gpu", SLUG, "--size", "1000", "--library", str(tmp_path / "x")]  # a one-shape header
    r = subprocess.run([sys.executable, "-m", "autotune", *argv], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--library" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


def _cmake(*args: str, cwd: Path) -> None:
    r = subprocess.run(["cmake", *args], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.slow  # nvcc builds 8 kernels over 3 files and a consumer twice: most of a minute on two cores
@pytest.mark.skipif(not have_nvcc() or shutil.which("cmake") is None, reason="no nvcc or cmake")
def test_a_small_library_builds_warning_free_and_links_by_find_package_and_add_subdirectory(tmp_path):
    lib, d = export_library(RES, "nvidia-h200", tmp_path / "lib", shapes=SHAPES[:1], kernels=4, per_file=3)
    assert len(list((lib / "src").glob("kernels_*.cu"))) > 1
    warn = "-DCMAKE_CUDA_FLAGS=-Xcompiler=-Wall,-Wextra -Werror=all-warnings"
    _cmake("-S", str(lib), "-B", "build", warn, cwd=tmp_path)
    _cmake("--build", "build", "-j2", cwd=tmp_path)
    _cmake("--install", "build", "--prefix", "inst", cwd=tmp_path)
    # Its dispatcher with the first call's timing against cuBLAS (compiled only: a stand-in cuBLAS header).
    flags = ["-arch=sm_90", "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings", "-DAUTOTUNE_WITH_CUBLAS"]
    includes = [f"-I{lib / 'include'}", f"-I{lib / 'src'}", f"-I{FAKE_CUBLAS}"]
    nvcc_warning_free(*flags, *includes, "-c", str(lib / "src" / "dispatch.cu"), cwd=tmp_path)
    # A plain C++ program (no CUDA language of its own) that calls the entry points and the choice.
    main = (
        '#include "autotune_sgemm.h"\n'
        "int main() {\n"
        "    const int k = autotune_choose(0, 1, 33, 1, 4000, 1, 0);\n"
        "    const cudaError_t e = autotune_sgemm('N', 'T', 1, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1);\n"
        "    const int cublas = autotune_runs_cublas(0, 1, 33, 1, 4000, 1, 0);  // built without it: 0\n"
        "    return e == cudaErrorInvalidValue && k >= 0 && autotune_kernel_config(k)[0] && !cublas ? 0 : 1;\n"
        "}\n"
    )
    for how, find in (
        ("installed", "find_package(autotune_sgemm CONFIG REQUIRED)"),
        ("sub", f'add_subdirectory("{lib}" lib)'),
    ):
        app = tmp_path / how
        app.mkdir()
        (app / "main.cpp").write_text(main)
        (app / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.18)\nproject(app LANGUAGES CXX)\n"
            f"{find}\nadd_executable(app main.cpp)\n"
            "target_link_libraries(app PRIVATE autotune_sgemm::autotune_sgemm)\n"
        )
        flags = ["-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror"]
        # The installed copy is found; the subdirectory's library is built again, warning-free too.
        flags += [f"-DCMAKE_PREFIX_PATH={tmp_path / 'inst'}"] if how == "installed" else [warn]
        _cmake("-S", str(app), "-B", str(app / "build"), *flags, cwd=tmp_path)
        _cmake("--build", str(app / "build"), "-j2", cwd=tmp_path)
        assert (app / "build" / "app").is_file()


def test_one_kernel_that_needs_sm_90a_makes_the_whole_build_target_it():
    # One nvcc target builds every kernel of a header or library: whichever kernel comes first,
    # a wgmma kernel (sm_90a) among plain ones makes the header's build line and CMake's both say it.
    from autotune.dispatch.header import Dispatch, build_target, header_context
    from autotune.dispatch.library import cuda_architecture
    from autotune.kernels.space import Space

    plain, special = Space.load("warptile").seeds[0], Space.load("wgmma_tf32").seeds[0]
    for configs, target in (([plain], "sm_90"), ([plain, special], "sm_90a"), ([special, plain], "sm_90a")):
        d = Dispatch(configs=configs)
        assert build_target(d, "sm_90") == target
        assert cuda_architecture(d, "sm_90") == target.removeprefix("sm_")
        flags = header_context(d, "NVIDIA H100", "sm_90", "autotune")["ARCH_FLAGS"]
        assert ("sm_90a" in flags) == target.endswith("a"), flags
    assert build_target(Dispatch(), "sm_90") == "sm_90"


@pytest.mark.slow  # two library exports: 25 s on two cores (CI's slow step)
def test_a_second_export_keeps_what_the_user_made_in_the_folder(tmp_path, monkeypatch):
    # The build line the library's own files show (cmake -S . -B build) makes a build folder in
    # it: exporting again replaces export's files (the old kernel files too) and keeps the rest.
    out, _ = export_library(RES, SLUG, tmp_path / "lib", shapes=SHAPES, per_file=1)
    (out / "build" / "CMakeFiles").mkdir(parents=True)
    (out / "build" / "CMakeCache.txt").write_text("cache")
    (out / "notes.md").write_text("mine")
    many = sorted(p.name for p in (out / "src").iterdir())
    export_library(RES, SLUG, out, shapes=SHAPES[:1], kernels=1)
    assert (out / "build" / "CMakeCache.txt").read_text() == "cache" and (out / "build" / "CMakeFiles").is_dir()
    assert (out / "notes.md").read_text() == "mine"
    few = sorted(p.name for p in (out / "src").iterdir())
    assert len(few) < len(many)  # no kernel file of the earlier export left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib"]
    # A rename that fails puts the earlier library back, the user's entries in it.
    before = _files(out)
    real = Path.rename

    def failing(self, target):
        if Path(target) == out and ".tmp" in self.name:
            raise OSError(13, "Permission denied")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(UserError, match="cannot write .Permission denied"):
        export_library(RES, SLUG, out, shapes=SHAPES)
    monkeypatch.undo()
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib"]
