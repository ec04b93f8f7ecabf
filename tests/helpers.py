import shutil
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
