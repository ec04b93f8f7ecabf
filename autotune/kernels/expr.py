"""A tiny integer expression language for template declarations.

Constraints, derived values and launch geometry are written as Python-like expressions in a
template's front-matter ("BM % TM == 0", "cdiv(N, BN) * cdiv(M, BM)"). `Expr.parse` checks them
against an allow-list before compiling; the same trees translate to C for the exported launcher.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.types import UserError
from ..core.yamlio import shown


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _is_pow2(a: int) -> bool:
    return a > 0 and (a & (a - 1)) == 0


FUNCTIONS = {"cdiv": _cdiv, "min": min, "max": max, "is_pow2": _is_pow2}
_GLOBALS = {"__builtins__": {}, **FUNCTIONS}  # what an expression sees besides its names (never written)

_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.USub,
    ast.Not,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)


# How deep an expression's tree may go: the declarations that ship reach 12. The walks over a
# tree (translation to C) recurse, and Python's own parser fails deeper than a few thousand.
MAX_DEPTH = 100


def _depth(tree: ast.AST) -> int:
    """The depth of `tree` (its root 1), walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


@dataclass(frozen=True)
class Expr:
    """A validated, compiled expression and the names it reads.

    Parsed with `ast` and checked against an allow-list of node types (no attributes, subscripts,
    lambdas, arbitrary calls, or strings other than a named choice compared with == or !=, as in
    `SCHEDULE == "stream_k"`), then compiled, so evaluating one is safe and fast (the static filter
    runs them millions of times).
    """

    text: str
    names: frozenset[str]
    _tree: ast.Expression = field(repr=False, compare=False)
    _code: object = field(repr=False, compare=False)

    @classmethod
    def parse(cls, text: str | int, where: str = "expression") -> Expr:
        text = str(text)
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            raise UserError(f"{where}: cannot parse {shown(text)}: {exc.msg}") from None
        except RecursionError:  # Python's parser gives up on `- - - ... A` a few thousand deep
            raise UserError(f"{where}: {shown(text)} is nested too deeply") from None
        if _depth(tree) > MAX_DEPTH:
            raise UserError(f"{where}: {shown(text)} is nested more than {MAX_DEPTH} deep")
        names = set()
        # A named choice (SCHEDULE == "stream_k") is the one place a text constant may stand.
        compared = {
            id(side)
            for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)
            for side in (node.left, *node.comparators)
        }
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise UserError(f"{where}: {type(node).__name__} is not allowed in {shown(text)}")
            if isinstance(node, ast.Constant) and not (
                (isinstance(node.value, int) and not isinstance(node.value, bool))
                or (isinstance(node.value, str) and id(node) in compared)
            ):
                raise UserError(
                    f"{where}: only integer constants (and names compared with == or !=) are allowed in {shown(text)}"
                )
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                    raise UserError(f"{where}: only {sorted(FUNCTIONS)} may be called in {shown(text)}")
            elif isinstance(node, ast.Name) and node.id not in FUNCTIONS:
                names.add(node.id)
        code = compile(tree, f"<{where}>", "eval")
        return cls(text, frozenset(names), tree, code)

    def __call__(self, env: Mapping[str, int | str]) -> int:
        return eval(self._code, _GLOBALS, env)  # noqa: S307 - AST allow-listed above

    def to_c(self, env: Mapping[str, int]) -> str:
        """Return C source for this expression; names in `env` become literals, others stay."""
        return _to_c(self._tree.body, env)


_C_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}
_C_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _known(node: ast.AST, env: Mapping[str, int]) -> bool:
    return all(n.id in env or n.id in FUNCTIONS for n in ast.walk(node) if isinstance(n, ast.Name))


def _value(node: ast.AST, env: Mapping[str, int]) -> int:
    code = compile(ast.Expression(node), "<fold>", "eval")  # an allow-listed subtree
    value = eval(code, {"__builtins__": {}, **FUNCTIONS}, dict(env))  # noqa: S307 - AST allow-listed
    if isinstance(value, str):
        raise UserError(f"cannot translate {ast.unparse(node)} = {value!r} to C outside a comparison")
    return int(value)


def _to_c(node: ast.AST, env: Mapping[str, int]) -> str:
    # Integer division in C truncates; launch expressions only divide non-negative values.
    # What the config fixes folds to a literal (and a branch it decides, to that branch).
    if not isinstance(node, ast.Constant) and _known(node, env):
        return str(_value(node, env))
    if isinstance(node, ast.IfExp) and _known(node.test, env):
        return _to_c(node.body if _value(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):  # only compared with a parameter, which folds above
            raise UserError(f"cannot translate the name {node.value!r} to C outside a comparison the config decides")
        return str(node.value)
    if isinstance(node, ast.Name):
        if node.id not in env:
            return node.id
        if isinstance(env[node.id], str):
            raise UserError(f"cannot translate {node.id}={env[node.id]!r} to C outside a comparison")
        return str(env[node.id])
    if isinstance(node, ast.BinOp):
        return f"({_to_c(node.left, env)} {_C_BINOPS[type(node.op)]} {_to_c(node.right, env)})"
    if isinstance(node, ast.UnaryOp):
        op = "-" if isinstance(node.op, ast.USub) else "!"
        return f"({op}{_to_c(node.operand, env)})"
    if isinstance(node, ast.BoolOp):
        # An operand the config decides can decide the whole: `0 and N % 4` is 0 at every shape.
        is_and = isinstance(node.op, ast.And)
        if any(_known(v, env) and bool(_value(v, env)) != is_and for v in node.values):
            return "0" if is_and else "1"
        op = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + op.join(_to_c(v, env) for v in node.values) + ")"
    if isinstance(node, ast.Compare):
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            parts.append(f"({_to_c(left, env)} {_C_CMPOPS[type(op)]} {_to_c(right, env)})")
            left = right
        return "(" + " && ".join(parts) + ")"
    if isinstance(node, ast.IfExp):
        test = _to_c(node.test, env)
        if test in ("0", "1"):  # decided by an operand the config fixes (the BoolOp above)
            return _to_c(node.body if test == "1" else node.orelse, env)
        return f"({test} ? {_to_c(node.body, env)} : {_to_c(node.orelse, env)})"
    if isinstance(node, ast.Call):
        args = [_to_c(a, env) for a in node.args]
        name = node.func.id
        if name == "cdiv":
            return f"(({args[0]} + {args[1]} - 1) / {args[1]})"
        if name in ("min", "max") and len(args) == 2:
            op = "<" if name == "min" else ">"
            return f"(({args[0]}) {op} ({args[1]}) ? ({args[0]}) : ({args[1]}))"
        raise UserError(f"{name}() with {len(args)} arguments has no C translation")
    raise UserError(f"cannot translate {ast.dump(node)} to C")
