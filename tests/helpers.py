import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A few stored results (copies of real ones), so that no test reads the repository's results/.
RESULTS = Path(__file__).resolve().parent / "data" / "results"


# The GPU tests' shapes: tails in every dimension, primes, non-multiples of 4 and of every tile,
# skinny and deep-K.
AWKWARD_SHAPES = [
    (1, 1, 1),
    (7, 13, 5),
    (31, 17, 3),
    (127, 129, 131),
    (1000, 1000, 1000),
    (1, 4096, 64),
    (4096, 1, 64),
    (3, 5, 8191),
    (64, 64, 8192),
    (1023, 1021, 257),
    (257, 1025, 33),
    (96, 100, 4),
    (2500, 4100, 100),  # stream-K: more tiles than two waves, split tiles first, then whole ones
]


# A sweep's whole list of cases (every seed, every layout) is `-m slow`'s (CI's second step); the
# default run checks a representative part of it: `@EVERY` gives the test `every`, and
# `some(cases, every)` is then all of them or the first `n`.
EVERY = pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["some", "every"])


def some(cases, every: bool, n: int = 1) -> list:
    return list(cases) if every else list(cases)[:n]


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None


def families() -> list[str]:
    """Every family with a default space in configs/: a new family gets every test that loops
    over these without anyone listing it."""
    return sorted(p.stem for p in (ROOT / "configs").glob("*.yaml"))


def tier_of(family: str) -> str:
    """A precision tier the family serves: its first PRECISION choice, or "highest" (FP32) for a
    family without one."""
    from autotune.kernels.family import Family

    param = Family.load(family).params.get("PRECISION")
    return param.choices[0] if param is not None else "highest"


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


def refusals_main(calls: str) -> str:
    """A main() for a one-layout header: `calls` (C expressions, one a line, each ending in a
    comma) on fake device pointers -- A, B, C, column-major A 64 x 32 (lda) and B 32 x 48 (ldb) in
    the header's transposes ta, tb; `flip` the other ta -- exiting 0 when every one returned
    cudaErrorInvalidValue. Each is refused before any CUDA call, so no GPU is needed."""
    return (
        """#include <cstdio>
#include "tuned.h"
int main() {
    float* p = reinterpret_cast<float*>(0x100000);
    const char ta = AUTOTUNE_TRANS_B ? 'T' : 'N', tb = AUTOTUNE_TRANS_A ? 'T' : 'N';
    const int lda = ta == 'N' ? 64 : 32, ldb = tb == 'N' ? 32 : 48;
    float *A = p, *B = p + 4096, *C = p + 8192;  // one matrix each: 2048, 1536, 3072 floats
    const char flip = ta == 'N' ? 'T' : 'N';
    (void)flip;
    const cudaError_t e[] = {
"""
        + calls
        + """    };
    int refused = 0;
    for (cudaError_t x : e) refused += x == cudaErrorInvalidValue;
    printf("%d of %d refused\\n", refused, (int)(sizeof(e) / sizeof(e[0])));
    return refused == (int)(sizeof(e) / sizeof(e[0])) ? 0 : 1;
}
"""
    )


def fake_kernels(monkeypatch, slug: str) -> list[tuple]:
    """autotune.dispatch.api with no GPU: the device is `slug` (sm_90), no table read before, and each
    kernel asked for is recorded as (device, config name, source) and returned as that tuple."""
    from autotune.dispatch import api
    from autotune.dispatch import table as dispatch_table

    asked = []

    def kernel(cfg, dev, arch, source):
        asked.append((dev, cfg.name, source))
        return asked[-1]

    monkeypatch.setattr(dispatch_table, "_TABLES", {})
    monkeypatch.setattr(api, "_device_props", lambda dev: (slug, "sm_90"))
    monkeypatch.setattr(api, "_kernel", kernel)
    return asked


def restamp(data: dict, keep: str = "time_ms") -> dict:
    """A record edited by a test (another problem, GFLOP/s, time or config) made to agree with
    itself again, as a search writes one (autotune.records.results refuses a record that does not): each
    entry of the record's problem, its GFLOP/s its time at that shape (`keep` names which of the
    two stays; the fastest and slowest times and their spread scaled with it), its ratio its
    GFLOP/s over cuBLAS's, cuBLAS's time its GFLOP/s, its config's name its parameters', its
    study named after the record's GPU, shape and family; `best` the fastest. Returns `data`."""
    from autotune.core.types import Config, Problem
    from autotune.records.validate import fastest

    problem = Problem(**data["problem"])
    for fam, entry in data["families"].items():
        entry["problem"] = problem.as_dict()
        if keep == "gflops":
            entry["time_ms"], was = problem.flops / (entry["gflops"] * 1e6), entry["time_ms"]
        else:
            entry["gflops"] = problem.flops / (entry["time_ms"] * 1e6)
            lo, hi = entry.get("time_min_ms"), entry.get("time_max_ms")
            was = entry["time_ms"] if None in (lo, hi) or lo <= entry["time_ms"] <= hi else (lo + hi) / 2
        for key in ("time_min_ms", "time_max_ms", "time_iqr_ms"):  # the spread kept around the time
            if entry.get(key) is not None:
                entry[key] *= entry["time_ms"] / was
        entry["ratio"] = entry["gflops"] / entry["cublas"]["gflops"]
        cublas = entry["cublas"]
        if cublas.get("time_ms"):
            cublas["time_ms"] = problem.flops / (cublas["gflops"] * 1e6)
            if cublas.get("path") in cublas.get("paths", {}):
                cublas["paths"][cublas["path"]] = cublas["time_ms"]
        cfg = entry["config"]
        cfg["name"] = Config.make(cfg["family"], cfg["params"]).name
        study = entry.get("search", {}).get("study")
        if isinstance(study, str) and study.count("/") == 3:
            entry["search"]["study"] = "/".join([data["gpu"]["slug"], problem.name, fam, study.split("/")[3]])
    data["best"] = fastest(data["families"])
    return data


def refile(folder: Path, to: Path, name: str, limits: dict) -> None:
    """Each record of `folder` copied into `to` as measured on the GPU called `name` with `limits`
    (the live device's, for GPU tests that borrow another GPU's fixtures): its gpu, each entry's
    limits and study renamed, so that the record check, which refuses a record of another GPU in a
    GPU's folder, takes it."""
    import json

    from autotune.kernels.limits import gpu_slug

    to.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        data["gpu"].update(name=name, slug=gpu_slug(name), arch=limits.get("arch", data["gpu"].get("arch")))
        for entry in data["families"].values():
            if entry.get("limits") is not None:
                entry["limits"] = dict(limits)
        (to / path.name).write_text(json.dumps(restamp(data), indent=1))


# The GPU a stored record of the tests names, and a verified entry as a search writes it.
GPU = {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "arch": "sm_90"}


def study_trials(results) -> list:
    """The trials of the one study in `results`' storage for GPU (a replayed search's)."""
    import optuna

    url = f"sqlite:///{results}/{GPU['slug']}/optuna.db"
    (name,) = optuna.get_all_study_names(url)
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


def record_entry(family, params, gflops, h100, problem=None):
    """A verified entry of `problem` (1000^3 when None) at `gflops`, as a search writes it."""
    from autotune.core.types import Config, Measurement, Problem, Status
    from autotune.records.store import make_entry

    problem = problem or Problem(1000, 1000, 1000)
    t = problem.flops / gflops / 1e6
    m = Measurement(
        Config.make(family, params),
        problem,
        Status.OK,
        time_ms=t,
        time_min_ms=0.9 * t,
        time_max_ms=1.2 * t,
        time_iqr_ms=0.1 * t,
        repeats=20,
        gflops=gflops,
        error=5e-7,
        registers=127,
        spill_bytes=0,
        smem_bytes=16384,
    )
    return make_entry(
        m,
        {"time_ms": problem.flops / 30000e6, "time_iqr_ms": 0.0, "gflops": 30000.0, "error": 5e-7},
        search={"sampler": "tpe"},
        versions={"cupy": "x"},
        command="autotune search --size 1000",
        limits=h100.to_dict(),
    )


def run_cli(*args, cwd=None, timeout=600, env=None):
    """`python -m autotune.cli ARGS` in `cwd` (the checkout by default), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=timeout,
        env=env,
    )


def one_clear_line(r):
    """The one `autotune: error:` line a refused command printed (exit 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    return lines[0]


def padded_on_device(x, transposed: bool, pad: int):
    """Return op(X) stored on the device (transposed: X^T's rows), rows `pad` floats longer (NaN)."""
    import cupy as cp
    import numpy as np

    s = np.ascontiguousarray(x.T if transposed else x)
    big = cp.full((s.shape[0], s.shape[1] + pad), np.nan, cp.float32)
    big[:, : s.shape[1]] = cp.asarray(s)
    view = big[:, : s.shape[1]]
    return view.T if transposed else view
