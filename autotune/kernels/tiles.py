"""What the models read of a family, as its YAML declares it (`model:` in `configs/<name>.yaml`).

Each value is an expression (kernels/expr.py) over the family's parameters and derived values;
the schema is the comment above `_TOP`, and search/cost.py says what it does with each cost input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import yamlio
from ..core.types import UserError
from .decl import Declaration
from .expr import Expr

# The schema of the `model:` section:
#
#     model:
#       tile: [BM, BN]                  # rows and columns of C one block computes
#       cost:                           # optional: the static cost model's inputs (search/cost.py)
#         k_step: BK                    # depth of K a stage of the block's loop covers
#         thread_tile: [ACC_M, ACC_N]   # optional: a thread's accumulator rows and columns
#         copies: A_LOADS + B_LOADS4    # optional: global-to-shared copies a thread issues a stage
#         registers: 8 * B_LOADS4       # optional: registers a thread holds past accumulators and fragments
#         min_blocks: MINB              # optional: the launch bounds' blocks per SM (default 1)
#         split_k: SPLITK               # optional: blocks sharing one tile's K (default 1)
#         split_tail: SCHEDULE != "data_parallel"   # optional: true where the last wave's tiles are shared out
#         variant: SCHEDULE             # optional: what else sets apart configs of one tile (a name may stand)
#
# `tile` is required: the dispatch model (dispatch/model.py) reads it for every family, and a
# family whose YAML lacks it is refused when it is loaded, not given a tile of one. A family
# without `cost` gets no static estimate (its search's start-up stays random): one whose threads
# do not each own their outputs over all of K, or whose products are not FFMAs.
_TOP = ("tile", "cost")
_PAIRS = ("tile", "thread_tile")  # [rows, columns]
_COST = ("k_step", "thread_tile", "copies", "registers", "min_blocks", "split_k", "split_tail", "variant")
_NAMED = ("variant",)  # may be a named choice; the others are numbers
Value = int | tuple[int, int] | str


@dataclass(frozen=True)
class Model:
    """A family's `model:` section, parsed and checked against its declaration."""

    tile: tuple[Expr, Expr]
    cost: tuple[tuple[str, Expr | tuple[Expr, Expr]], ...] | None  # declared keys in _COST order
    where: str  # file:line of the section

    def tile_of(self, env: Mapping[str, Any]) -> tuple[int, int]:
        """Return (rows, columns) of C one block of the config `env` computes."""
        rows, cols = (self._number(e, env, "tile") for e in self.tile)
        return rows, cols

    def cost_of(self, env: Mapping[str, Any]) -> dict[str, Value] | None:
        """Return the declared cost inputs at `env` (only those declared); None without `cost`."""
        if self.cost is None:
            return None
        out: dict[str, Value] = {}
        for key, ex in self.cost:
            if isinstance(ex, tuple):
                out[key] = (self._number(ex[0], env, key), self._number(ex[1], env, key))
            elif key in _NAMED:
                out[key] = self._value(ex, env, key)
            else:
                out[key] = self._number(ex, env, key)
        return out

    def texts(self) -> tuple:
        """Return the section as its expressions' text: equal texts, the same declaration."""

        def text(ex):
            return tuple(e.text for e in ex) if isinstance(ex, tuple) else ex.text

        cost = None if self.cost is None else tuple((k, text(e)) for k, e in self.cost)
        return text(self.tile), cost

    def check(self, env: Mapping[str, Any]) -> None:
        """Check that each value evaluates at `env` (a config of the family) to what it means."""
        self.tile_of(env)
        self.cost_of(env)

    def _value(self, ex: Expr, env: Mapping[str, Any], key: str) -> Any:
        try:
            return ex(env)
        except (TypeError, ValueError, ZeroDivisionError, NameError) as exc:
            raise UserError(f"{self.where}: model {key} {ex.text!r} cannot be evaluated ({exc})") from None

    def _number(self, ex: Expr, env: Mapping[str, Any], key: str) -> int:
        value = self._value(ex, env, key)
        if not isinstance(value, int):  # a bool (a comparison) is 0 or 1
            raise UserError(f"{self.where}: model {key} {ex.text!r} is {yamlio.shown(value)}, not a number")
        return int(value)


def parse(data: Mapping, where: str, decl: Declaration) -> Model:
    """Parse the `model:` section of `data`, the YAML `where`, against the family's declaration.

    Its names are checked against the family's parameters and derived values.

    Raises:
        UserError: Anything amiss, in one line naming the file and line.
    """
    raw, at = data["model"], yamlio.where(where, data, "model")
    if not isinstance(raw, dict):
        raise UserError(f"{at}: the model section must be a mapping (keys: {', '.join(_TOP)})")
    yamlio.check_keys(raw, _TOP, where, "the model section")
    if "tile" not in raw:
        raise UserError(f"{at}: the model section needs 'tile': [rows, columns] of C a block computes")
    names = set(decl.params) | set(decl.derived) | {"DYNAMIC_SMEM"}
    choices = {p.name for p in decl.params.values() if p.choices}
    tile = _pair(raw, "tile", where, names, choices)
    cost = None
    if raw.get("cost") is not None:
        section = raw["cost"]
        yamlio.check_keys(section, _COST, where, "the model's cost section")
        if "k_step" not in section:
            raise UserError(f"{yamlio.where(where, section)}: the model's cost section needs 'k_step'")
        read = {key: _pair if key in _PAIRS else _one for key in _COST}
        cost = tuple((key, read[key](section, key, where, names, choices)) for key in _COST if key in section)
    return Model(tile, cost, at)


def _pair(data: Mapping, key: str, where: str, names: set[str], choices: set[str]) -> tuple[Expr, Expr]:
    raw = data[key]
    if not isinstance(raw, list) or len(raw) != 2:
        raise UserError(f"{yamlio.where(where, data, key)}: {key} must be [rows, columns], got {yamlio.shown(raw)}")
    return tuple(_expr(v, yamlio.where(where, data, key), key, names, choices) for v in raw)  # type: ignore[return-value]


def _one(data: Mapping, key: str, where: str, names: set[str], choices: set[str]) -> Expr:
    return _expr(data[key], yamlio.where(where, data, key), key, names, choices if key not in _NAMED else set())


def _expr(text: Any, at: str, key: str, names: set[str], choices: set[str]) -> Expr:
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise UserError(f"{at}: model {key} must be an expression, got {yamlio.shown(text)}")
    ex = Expr.parse(text, f"{at}: model {key}")
    unknown = sorted(ex.names - names)
    if unknown:
        raise UserError(f"{at}: model {key} reads {unknown[0]!r}, not a parameter or derived value of the family")
    if ex.text.strip() in choices:  # a named choice where a number belongs
        raise UserError(f"{at}: model {key} is {ex.text.strip()}, a named choice, not a number")
    return ex
