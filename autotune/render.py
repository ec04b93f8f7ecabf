"""Config -> CUDA source, through one strict Jinja environment."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from .space import TEMPLATE_DIR, Family
from .types import Config

DEFAULT_KERNEL = "autotune_sgemm"


@lru_cache(maxsize=None)
def environment(template_dir: Path = TEMPLATE_DIR) -> jinja2.Environment:
    # StrictUndefined: a misspelled parameter fails here instead of rendering as "".
    # The built-in folder comes second, so templates from elsewhere can include _common.cuh.j2.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(template_dir), str(TEMPLATE_DIR)]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(family: Family, config: Config, kernel_name: str = DEFAULT_KERNEL) -> str:
    """CUDA source of `config`; its kernels are `kernel_name` (and `kernel_name`_scale_c)."""
    if config.family != family.name:
        raise ValueError(f"config of {config.family} rendered with family {family.name}")
    params = family.validate_params(config.as_dict(), config.name)
    env = family.derive(params)
    tmpl = environment(family.path.parent).get_template(family.path.name)
    return tmpl.render(**env, KERNEL_NAME=kernel_name)
