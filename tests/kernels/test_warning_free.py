"""The stored configs' kernels build without warnings under nvcc -Xcompiler -Wall,-Wextra, as an
exported header builds them: those that warned (fewcols with B_RING: a variable set and never read,
#550-D, and a loop unreachable in a template's instantiation, #128-D; wgmma_tf32 with DIRECT and
GROUP_M 1: a variable never read, #177-D) in every layout, and, with the slow tests, every stored
config's."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from autotune.core.types import LAYOUTS, Config, UserError
from autotune.dispatch.table import built_for
from autotune.kernels.family import cached_family
from autotune.kernels.render import DEFAULT_KERNEL, render
from autotune.records.results import entry_config, gpu_dirs, iter_records
from tests.helpers import ROOT, have_nvcc

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
# nvcc's flags for a header's build (the README's), each warning an error; sm_90a for wgmma's.
_FLAGS = ["-std=c++17", "-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"]
_ARCH = {"sm_90": ["-arch=sm_90"], "sm_90a": ["-gencode=arch=compute_90a,code=sm_90a"]}


def _stored() -> list[Config]:
    """Every config stored in the checkout's results, each once."""
    out: dict[Config, None] = {}
    for slug in gpu_dirs(ROOT / "results"):
        for _path, record in iter_records(ROOT / "results", slug):
            for entry in record["families"].values():
                out.setdefault(entry_config(entry))
    return list(out)


def _warned(cfg: Config) -> bool:
    """Whether `cfg` is of a form whose kernel nvcc once warned of."""
    p = dict(cfg.params)
    if cfg.family == "fewcols":
        return bool(p.get("B_RING"))
    return cfg.family == "wgmma_tf32" and bool(p.get("DIRECT")) and p.get("GROUP_M") == 1


def _warned_forms() -> list[Config]:
    """The stored configs that warned, each in every layout and batching it can be built for."""
    forms: dict[Config, None] = {}
    for cfg in filter(_warned, _stored()):
        precision = dict(cfg.params).get("PRECISION", "highest")
        for layout, batch in itertools.product(LAYOUTS, (1, 2)):
            try:
                form = built_for(cfg, layout, batch, precision)
            except UserError:  # a form outside the family's domain (BATCHED where it has none)
                continue
            if form is not None:
                forms.setdefault(form)
    return list(forms)


def _build(configs: list[Config], folder: Path, compile_only: bool) -> list[str]:
    """Compile `configs`' kernels in one unit per architecture, each kernel in a namespace of its own
    and its macros undefined after it, in a header the .cu includes (as an exported header places
    them); return nvcc's output of each unit that failed or said "warning"."""
    units: dict[str, list[str]] = {}
    for i, cfg in enumerate(configs):
        resolved = cached_family(cfg.family).resolve(cfg)
        arch = resolved.family.compile_arch("sm_90")
        source = render(resolved, kernel_name=f"{DEFAULT_KERNEL}_{i}")
        undefs = [f"#undef {n}" for n in sorted(set(_DEFINE.findall(source)))]
        units.setdefault(arch, []).append("\n".join([f"namespace k{i} {{", source, "}", *undefs]))
    bad = []
    for arch, parts in units.items():
        (folder / f"{arch}.h").write_text("\n".join(parts) + "\n")
        (folder / f"{arch}.cu").write_text(f'#include "{arch}.h"\n')
        mode = ["-cuda", "-o", f"{arch}.ii"] if compile_only else ["-c", "-o", f"{arch}.o"]
        r = subprocess.run(
            ["nvcc", "-O2", *_ARCH[arch], *_FLAGS, *mode, f"{arch}.cu"], capture_output=True, text=True, cwd=folder
        )
        if r.returncode != 0 or "warning" in (r.stdout + r.stderr).lower():
            bad.append(f"{arch}: {r.stdout}{r.stderr}")
    return bad


def test_the_stored_configs_hold_forms_that_warned():
    # Else the tests below would pass compiling nothing.
    families = [c.family for c in _warned_forms()]
    assert families.count("fewcols") >= 6 and families.count("wgmma_tf32") >= 2, families


@pytest.mark.slow  # nvcc's front end over 18 kernels: about 25 s of CPU
@pytest.mark.skipif(not have_nvcc(), reason="no nvcc")
def test_the_forms_that_warned_pass_nvccs_front_end_without_warnings(tmp_path):
    # The front end (-cuda) is where these warnings come from: seconds, not a whole build.
    assert not _build(_warned_forms(), tmp_path, compile_only=True)


@pytest.mark.slow  # over 200 kernels through nvcc's front end: about 5 minutes of CPU
@pytest.mark.skipif(not have_nvcc(), reason="no nvcc")
def test_every_stored_kernel_passes_nvccs_front_end_without_warnings(tmp_path):
    # The front end only: the whole build (ptxas too) takes five times as long, and said nothing
    # more of any stored kernel when it was run.
    assert not _build(_stored() + _warned_forms(), tmp_path, compile_only=True)
