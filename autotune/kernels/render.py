"""A resolved config -> CUDA source, through one strict Jinja environment."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import jinja2

from ..core.types import UserError
from .launch import HELPER_ITEMS
from .space import TEMPLATE_DIR, Resolved

DEFAULT_KERNEL = "autotune_sgemm"


@cache
def environment(template_dir: Path = TEMPLATE_DIR) -> jinja2.Environment:
    # StrictUndefined: a misspelled parameter fails here instead of rendering as "".
    # The built-in folder comes second, so templates from elsewhere can include _common.cuh.j2.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(template_dir), str(TEMPLATE_DIR)]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # The helper copies' elements a thread a pass: launch.py sizes their grids by it.
    env.globals["HELPER_ITEMS"] = HELPER_ITEMS
    return env


def template(template_dir: Path, name: str) -> jinja2.Template:
    """A template of the environment; a Jinja syntax error is one UserError naming file and line."""
    try:
        return environment(template_dir).get_template(name)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"{exc.filename or name}:{exc.lineno}: template syntax error: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"template {exc.name!r} not found (in {template_dir} or {TEMPLATE_DIR})") from None


def render(resolved: Resolved, kernel_name: str = DEFAULT_KERNEL) -> str:
    """CUDA source of a resolved config; its kernels are `kernel_name` and `kernel_name`_<suffix>
    (the suffixes its launch plan names). Templates also see `LAUNCH_C`: each launch value as C
    over M, N, K and SLOTS, with the config folded in (so a rule written once in the declaration
    can be used in device code)."""
    fam = resolved.family
    tmpl = template(fam.path.parent, fam.path.name)
    try:
        return tmpl.render(**resolved.env, KERNEL_NAME=kernel_name, LAUNCH_C=dict(resolved.plan.c_values()))
    except jinja2.TemplateSyntaxError as exc:  # in an included template, found while rendering
        raise UserError(f"{exc.filename or exc.name}:{exc.lineno}: template syntax error: {exc.message}") from None
    except jinja2.UndefinedError as exc:  # a name the template reads that nothing declares
        raise UserError(
            f"{_template_line(exc) or fam.path}: {exc.message} (not a parameter, derived value or launch value)"
        ) from None


def _template_line(exc: BaseException) -> str | None:
    """'path:line' of the innermost template frame of `exc` (Jinja maps its frames to template lines)."""
    where, tb = None, exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.endswith(".j2"):
            where = f"{name}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def source_digest(resolved: Resolved) -> str:
    """A short hash of the config's CUDA source: a record keeps it, so that `check --static` can
    tell a compiler that allocates registers differently (the same source) from a template that
    changed since the record was measured."""
    return hashlib.sha256(render(resolved).encode()).hexdigest()[:16]
