"""A resolved config -> CUDA source, through one strict, sandboxed Jinja environment.

A template is code the user chose to run (the checkout's, or a folder named by
AUTOTUNE_TEMPLATES), but it is rendered in Jinja's sandbox: it reads its parameters, derived and
launch values, and calls its own macros; it cannot reach Python. Whatever a template does wrong
while parsed or rendered is one UserError naming the template and its line.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..core.types import UserError
from .family import TEMPLATE_DIR, Resolved, template_error
from .launch import HELPER_ITEMS

DEFAULT_KERNEL = "autotune_sgemm"


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's sandbox, with a short way through for `loop.last` and an imported file's macros.

    The sandbox allows no attribute that starts with '_' and no method that changes a list, dict or
    set. The two shortcuts are Jinja's own objects, whose public attributes the sandbox allows anyway,
    and no methods: its checks on them made a render several percent slower. Every other attribute
    goes through them.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) in _JINJA_OBJECTS and not attribute.startswith("_"):
            value = getattr(obj, attribute, None)
            if type(value) in _PLAIN_VALUES:
                return value
        return super().getattr(obj, attribute)


_JINJA_OBJECTS = (jinja2.runtime.LoopContext, jinja2.environment.TemplateModule)
_PLAIN_VALUES = (jinja2.runtime.Macro, bool, int)


@cache
def environment(template_dir: Path = TEMPLATE_DIR) -> jinja2.Environment:
    # StrictUndefined: a misspelled parameter fails here instead of rendering as "".
    # The built-in folder comes second, so templates from elsewhere can include _common.cuh.j2.
    env = _Sandbox(
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
    """Return a template of the environment; one that cannot be parsed is a UserError naming it."""
    try:
        return environment(template_dir).get_template(name)
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"template {exc.name!r} not found (in {template_dir} or {TEMPLATE_DIR})") from None
    except Exception as exc:  # noqa: BLE001 - the template's text, not autotune, is at fault
        raise template_error(exc, template_dir / name) from None


def render_template(tmpl: jinja2.Template, **context: Any) -> str:
    """Render `tmpl` with `context`; whatever its code raises is one UserError (template_error)."""
    try:
        return tmpl.render(**context)
    except Exception as exc:  # noqa: BLE001 - the template's code, not autotune, is at fault
        raise template_error(exc, tmpl.filename or tmpl.name or "template") from None


def render(resolved: Resolved, kernel_name: str = DEFAULT_KERNEL) -> str:
    """Return the CUDA source of a resolved config.

    Its kernels are `kernel_name` and `kernel_name`_<suffix> (the suffixes its launch plan names).
    Templates also see `LAUNCH_C`: each launch value as C over M, N, K and SLOTS, with the config
    folded in, so a rule written once in the declaration can be used in device code.
    """
    fam = resolved.family
    tmpl = template(fam.path.parent, fam.path.name)
    return render_template(tmpl, **resolved.env, KERNEL_NAME=kernel_name, LAUNCH_C=dict(resolved.plan.c_values()))


def source_digest(resolved: Resolved) -> str:
    """Return a short hash of the config's CUDA source, which a record keeps.

    With it `check --static` tells a compiler that allocates registers differently (the same
    source) from a template that changed since the record was measured.
    """
    return hashlib.sha256(render(resolved).encode()).hexdigest()[:16]
