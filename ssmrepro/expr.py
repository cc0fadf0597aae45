"""Safe arithmetic for derived spec values and constraints, e.g. ``ceil(8*ln(task.kappa))`` or
``model.d_state <= model.d_model``.

Only numbers, names bound by the caller (dotted config keys such as ``task.kappa``), arithmetic,
comparison and boolean operators and a fixed set of math functions are allowed; anything else
(attribute access on objects, subscripts, lambdas, comprehensions, calls to other names) is
rejected before evaluation.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

FUNCTIONS = {
    "ceil": math.ceil,
    "floor": math.floor,
    "round": round,
    "int": int,
    "float": float,
    "abs": abs,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "ln": math.log,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "exp": math.exp,
}
_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_}
_CMP = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


class ExprError(ValueError):
    pass


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def names(expr: str) -> set[str]:
    """Dotted names an expression refers to (for dependency ordering)."""
    tree = _parse(expr)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name and name not in FUNCTIONS:
                out.add(name)
    return {n for n in out if not any(m != n and m.startswith(n + ".") for m in out)}


def _parse(expr: str) -> ast.Expression:
    try:
        return ast.parse(expr, mode="eval")
    except SyntaxError as err:
        raise ExprError(f"cannot parse expression {expr!r}: {err.msg}") from None


def evaluate(expr: str, env: dict[str, Any]) -> Any:
    """Evaluate ``expr`` with dotted names looked up in ``env``."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
            left = ev(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = ev(comp)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name is None:
                raise ExprError(f"unsupported attribute access in {expr!r}")
            if name not in env:
                raise ExprError(f"unknown name {name!r} in {expr!r}")
            return env[name]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in FUNCTIONS or node.keywords:
                raise ExprError(f"function {node.func.id!r} is not allowed in {expr!r}")
            return FUNCTIONS[node.func.id](*[ev(a) for a in node.args])
        raise ExprError(f"unsupported syntax {type(node).__name__} in {expr!r}")

    try:
        return ev(_parse(expr))
    except (ArithmeticError, TypeError, ValueError) as err:
        if isinstance(err, ExprError):
            raise
        raise ExprError(f"cannot evaluate {expr!r}: {err}") from None
