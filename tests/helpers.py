import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A few stored results (copies of real ones), so that no test reads the repository's results/.
RESULTS = Path(__file__).resolve().parent / "data" / "results"


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def families() -> list[str]:
    """Every family with a default space in configs/: a new family gets every test that loops
    over these without anyone listing it."""
    return sorted(p.stem for p in (ROOT / "configs").glob("*.yaml"))


def build_and_run_header_main(folder: Path, header: str, main: str) -> None:
    """tuned.h and main.cu in `folder`, built by nvcc with every warning an error (-Wall -Wextra
    on the host, -warn-spills in ptxas) and run; asserts both succeed."""
    (folder / "tuned.h").write_text(header)
    (folder / "main.cu").write_text(main)
    flags = ["-Xcompiler", "-Wall,-Wextra", "-Xptxas", "-warn-spills", "-Werror", "all-warnings"]
    exe = folder / "main"
    b = subprocess.run(
        ["nvcc", "-arch=sm_90", *flags, "-o", str(exe), str(folder / "main.cu")], capture_output=True, text=True
    )
    assert b.returncode == 0 and "warning" not in b.stderr.lower(), b.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def run_example_program(folder: Path) -> str:
    """examples/sgemm_check.cu built against folder/tuned_sgemm.h and cuBLAS, run: its output
    (asserting it built, exited 0 and printed "all ok")."""
    exe = folder / "sgemm_check"
    source = ROOT / "examples" / "sgemm_check.cu"
    build = subprocess.run(
        ["nvcc", "-arch=sm_90", "-O2", f"-I{folder}", str(source), "-lcublas", "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all ok" in run.stdout
    return run.stdout
