"""Foundation (expr): safe, bounded arithmetic for derived spec values and constraints, e.g.
``ceil(8*ln(task.kappa))`` or ``model.d_state <= model.d_model``.

Only numbers, names bound by the caller (dotted config keys such as ``task.kappa``), arithmetic,
comparison and boolean operators and a fixed set of math functions are allowed; anything else
(attribute access on objects, subscripts, lambdas, comprehensions, calls to other names, string
constants) is rejected before evaluation.

Every expression is bounded, so a hostile or mistyped spec fails fast instead of hanging:
at most :data:`MAX_CHARS` characters, :data:`MAX_NODES` syntax nodes and :data:`MAX_DEPTH` levels
of nesting (checked before evaluation); every intermediate number has ``|x| <= MAX_MAGNITUDE``
(``a ** b`` is refused *before* it is computed when its result would exceed that, and exponents
are at most :data:`MAX_EXPONENT`); arithmetic takes numbers only (no string or list repetition);
functions take at most :data:`MAX_ARGS` arguments.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from numbers import Real
from typing import Any

MAX_CHARS = 500  # a derived value or constraint is one short formula
MAX_NODES = 200  # syntax nodes after parsing
MAX_DEPTH = 32  # nesting levels of the syntax tree
MAX_MAGNITUDE = 10**12  # |x| of every intermediate number
MAX_EXPONENT = 64  # |b| in a ** b
MAX_ARGS = 16  # arguments of one function call


def _round(*args: Any) -> Any:
    """``round`` with at most :data:`MAX_EXPONENT` digits either way: an int rounded to
    ``-ndigits`` digits computes 10 ** ndigits (``round(5, -10**7)`` took 12 s, ``-10**12``
    never ended); past 64 digits every bounded number rounds to 0 or to itself anyway. Its
    arguments counted as round's (a wrong count was told as '_round() takes from 1 to 2
    positional arguments', a name no expression has)."""
    if not 1 <= len(args) <= 2:
        raise TypeError(f"round() takes 1 or 2 arguments ({len(args)} given)")
    ndigits = args[1] if len(args) == 2 else None
    if ndigits is not None and abs(ndigits) > MAX_EXPONENT:
        raise ValueError(f"round() takes at most {MAX_EXPONENT} digits, got {ndigits}")
    return round(*args)


FUNCTIONS = {
    "ceil": math.ceil,
    "floor": math.floor,
    "round": _round,
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
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


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


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Name,
            ast.Attribute, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _no_keywords(call: ast.Call, expr: str) -> None:
    """ExprError where ``call`` (of an allowed function) names an argument: `round(x,
    ndigits=2)` was refused as 'function round is not allowed', a function that is."""
    if call.keywords:
        kw = call.keywords[0]
        given = f"{kw.arg}=" if kw.arg is not None else "**"
        raise ExprError(f"{call.func.id}() takes its arguments in order, not by name ({given}...) "
                        f"in {expr!r}")


def check(expr: str) -> set[str]:
    """Validate ``expr`` without evaluating it (the syntax ``evaluate`` accepts: numbers, dotted
    names, arithmetic, comparisons, boolean operators, calls of the allowed functions); returns
    the dotted names it refers to. Raises ExprError."""
    tree = _parse(expr)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if not _is_number(node.value):
                raise ExprError(f"only number constants are allowed in {expr!r}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ExprError(f"call {ast.unparse(node.func)!r} is not allowed in {expr!r}")
            _no_keywords(node, expr)
        elif isinstance(node, ast.Attribute) and _dotted(node) is None:
            raise ExprError(f"unsupported attribute access in {expr!r}")
        elif not isinstance(node, _ALLOWED):
            raise ExprError(f"unsupported syntax {type(node).__name__} in {expr!r}")
    return names(expr)


def size(expr: str) -> int:
    """The syntax nodes of ``expr``, what one evaluation walks (at most :data:`MAX_NODES`);
    ExprError for one that does not parse."""
    return _size(_parse(expr))


@functools.lru_cache(maxsize=4096)
def _size(tree: ast.Expression) -> int:
    """``size`` of one parsed text, counted once (a spec's cases may repeat an expression in
    every profile's sweep, through YAML aliases)."""
    return sum(1 for _ in ast.walk(tree))


def interval(expr: str, ranges: Callable[[str], tuple[float, float] | None]
             ) -> tuple[float, float]:
    """[lo, hi] holding every value ``expr`` can take where each name lies in ``ranges(name)``
    (None: any value), by interval arithmetic over its syntax: sound (no value lies outside;
    the bounds may be wider, ``a - a`` gives [-1, 1] for accuracies), within
    ±:data:`MAX_MAGNITUDE` (past it an expression has no value). Numbers, names, signs, + - *
    /, %, min, max, abs, comparisons and boolean operators (0 or 1), powers (``_power_interval``)
    and the other functions of one argument are followed; anything else (``//``, ``log(x,
    base)``, ``round(x, n)``) may take any value. A claim on ``(test.acc)`` or ``1 * test.acc``
    was given the range of any expression, ±1e12: ``>= 0`` on it, or a spread tolerance of 5,
    could not fail and passed `validate` (on ``test.acc ** 2``, ``sqrt(test.acc)`` or
    ``exp(test.acc)`` it still could)."""
    top = float(MAX_MAGNITUDE)
    anything = (-top, top)

    def clip(lo: float, hi: float) -> tuple[float, float]:
        return min(max(lo, -top), top), max(min(hi, top), -top)

    def iv(node: ast.AST) -> tuple[float, float]:
        if isinstance(node, ast.Expression):
            return iv(node.body)
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return clip(float(node.value), float(node.value))
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            got = ranges(name) if name is not None else None
            return anything if got is None else clip(float(got[0]), float(got[1]))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            lo, hi = iv(node.operand)
            # (0.0 - x: -0.0 is 0, not printed '-0')
            return (lo, hi) if isinstance(node.op, ast.UAdd) else (0.0 - hi, 0.0 - lo)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult,
                                                                ast.Div)):
            (a, b), (c, d) = iv(node.left), iv(node.right)
            if isinstance(node.op, ast.Add):
                return clip(a + c, b + d)
            if isinstance(node.op, ast.Sub):
                return clip(a - d, b - c)
            if isinstance(node.op, ast.Div):
                if c <= 0 <= d:  # a divisor that may be 0 (or near it): any value
                    return anything
                # divided as evaluated, not times 1 / divisor: 1 / 1e-310 is inf and 0 * inf
                # NaN (a paper value on 'test.acc / 1e-310' was refused as outside [nan, nan])
                ends = [a / c, a / d, b / c, b / d]
            else:
                ends = [a * c, a * d, b * c, b * d]
            return clip(min(ends), max(ends))
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (
                isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            return 0.0, 1.0  # False or True (``evaluate``: a bool, whatever its operands)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return clip(*_power_interval(iv(node.left), iv(node.right)))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            c, d = iv(node.right)  # a % b lies between 0 and b (on b itself by rounding:
            # -1e-20 % 1 is 1.0), whatever a
            return (0.0, d) if c > 0 else (c, 0.0) if d < 0 else anything
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and len(node.args) == 1 and node.func.id in _MONOTONE and not node.keywords):
            return clip(*_monotone_interval(node.func.id, iv(node.args[0])))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args
                and node.func.id in ("min", "max", "abs") and not node.keywords):
            args = [iv(a) for a in node.args]
            if node.func.id == "min":
                return min(a[0] for a in args), min(a[1] for a in args)
            if node.func.id == "max":
                return max(a[0] for a in args), max(a[1] for a in args)
            if len(args) == 1:
                lo, hi = args[0]
                return (lo, hi) if lo >= 0 else (-hi, -lo) if hi <= 0 else (0.0, max(-lo, hi))
        return anything

    try:
        return iv(_parse(expr))
    except ExprError:
        return anything


# functions of one argument that never decrease, with the least argument each takes (below it,
# no value: ``math.sqrt(-1)`` raises); ``round`` of one argument too. A log takes positive
# arguments only: its least value is that of the least positive float, 2 ** -1074 (computed,
# not taken of it: where the CPU flushes subnormals, as torch may set it, it reads as 0)
_MONOTONE = {"ceil": -math.inf, "floor": -math.inf, "round": -math.inf, "int": -math.inf,
             "float": -math.inf, "sqrt": 0.0, "ln": 0.0, "log": 0.0, "log2": 0.0, "log10": 0.0,
             "exp": -math.inf}
_LEAST_LOG = {"ln": -1074 * math.log(2), "log": -1074 * math.log(2), "log2": -1074.0,
              "log10": -1074 * math.log10(2)}


def _outward(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened by a few units in the last place each way, never across 0: a libm
    function (``exp``, ``log``, ``pow``) is within an ulp of its value, not always correctly
    rounded, so its value inside an interval may lie an ulp past its values at the ends (but
    never on the other side of 0 from its true value, a float too)."""
    a, b = lo, hi
    for _ in range(4):
        a, b = math.nextafter(a, -math.inf), math.nextafter(b, math.inf)
    return (max(a, 0.0) if lo >= 0 else a), (min(b, 0.0) if hi <= 0 else b)


def _exact_power(x: float, n: int) -> tuple[float, float]:
    """The floats just below and above x ** n (n an integer; x nonzero where n < 0), from the
    exact rational value: ``test.acc ** 2`` lies in [0, 1] exactly, not an ulp past it."""
    q = Fraction(x) ** n
    try:
        f = float(q)
    except OverflowError:  # (copysign of q itself converted it again: a traceback on
        f = math.inf if q > 0 else -math.inf  # `(test.loss + 1) ** 64`)
    if math.isinf(f):  # past every float (and every bound): no value
        return f, f
    below = f if Fraction(f) <= q else math.nextafter(f, -math.inf)
    above = f if Fraction(f) >= q else math.nextafter(f, math.inf)
    return below, above


def _monotone_interval(name: str, arg: tuple[float, float]) -> tuple[float, float]:
    """The values of the non-decreasing function ``name`` of an argument in ``arg`` (past
    ±MAX_MAGNITUDE: clipped by the caller; an argument below the function's domain: no value)."""
    top = float(MAX_MAGNITUDE)
    least = _MONOTONE[name]
    lo, hi = max(arg[0], least), arg[1]
    if hi < least or (hi <= least and name in _LEAST_LOG):  # no argument has a value: any
        # (the expression is never defined)
        return -top, top

    def at(x: float) -> float:
        if name in _LEAST_LOG and x <= 0:  # (no value at 0: the least is a positive float's)
            return _LEAST_LOG[name]
        try:
            return float(FUNCTIONS[name](x))
        except OverflowError:  # exp(710): no value, past every bound
            return math.inf
    ends = at(lo), at(hi)
    # rounding to an integer, float() and sqrt are exact or correctly rounded (monotone): no
    # ulp to allow; nor at exp(0) = 1 or log(1) = 0, exact in libm too
    if name in ("ceil", "floor", "round", "int", "float", "sqrt"):
        return ends
    out = _outward(*ends)
    return (ends[0] if lo in (0.0, 1.0) and ends[0] in (0.0, 1.0) else out[0],
            ends[1] if hi in (0.0, 1.0) and ends[1] in (0.0, 1.0) else out[1])


def _power_interval(base: tuple[float, float], exp: tuple[float, float]) -> tuple[float, float]:
    """The values of ``a ** b`` (``_power``) for a in ``base`` and b in ``exp``; ±MAX_MAGNITUDE
    where not followed. A constant integer exponent takes any base (x ** 2 of [-1, 3] is [0,
    9]); otherwise a base that is never negative (0 with a positive exponent only): a ** b =
    exp(b · ln a), bilinear in (b, ln a), has its least and largest values at the corners."""
    top = float(MAX_MAGNITUDE)
    anything = (-top, top)
    lo, hi = base
    c, d = max(exp[0], -MAX_EXPONENT), min(exp[1], MAX_EXPONENT)  # past them: no value

    def pw(x: float, y: float) -> float:
        try:
            return float(x) ** float(y)
        except OverflowError:  # past every bound (no value): its sign as the power's
            return math.copysign(math.inf, x) if y % 2 == 1 else math.inf
        except ZeroDivisionError:
            return math.inf

    if c > d:
        return anything
    if c == d and c == int(c):  # x ** n, n an integer: monotone on either side of 0
        n = int(c)
        if n == 0:
            return 1.0, 1.0
        if lo <= 0 <= hi and n < 0:  # near 0: past every bound, of either sign where n is odd
            return (0.0, top) if n % 2 == 0 else anything
        ends = [*_exact_power(lo, n), *_exact_power(hi, n)]
        least = 0.0 if lo <= 0 <= hi and n % 2 == 0 else min(ends)
        return least, max(ends)
    if lo < 0 or (lo == 0 and c <= 0):  # a negative base to a fraction, 0 to a negative
        return anything  # power: no value; near 0 to a negative power: any
    ends = [pw(a, b) for a in (lo, hi) for b in (c, d)]
    return _outward(min(ends), max(ends))


def normal_form(expr: str) -> str:
    """The expression as parsed, so that texts differing only in spacing and redundant
    parentheses (``test.acc``, ``( test.acc )``) have one form; ``test.acc + 0`` keeps its own.
    A text that does not parse is its own form (the check that uses it reports it)."""
    try:
        return ast.dump(_parse(expr))
    except ExprError:
        return str(expr)


def _parse(expr: str) -> ast.Expression:
    """Parse ``expr`` and check its size and nesting (iteratively: no recursion on its depth)."""
    if not isinstance(expr, str):
        raise ExprError(f"an expression must be a string, got {type(expr).__name__}")
    return _parsed(expr)


@functools.lru_cache(maxsize=4096)
def _parsed(expr: str) -> ast.Expression:
    """``_parse`` of one text, once (a constraint is evaluated at every sweep point: the parse
    was most of its cost). The tree is only read, never changed."""
    if len(expr) > MAX_CHARS:
        raise ExprError(f"expression is {len(expr)} characters long (at most {MAX_CHARS})")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as err:
        raise ExprError(f"cannot parse expression {expr!r}: {err.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression {expr!r} is nested too deeply") from None
    n_nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        n_nodes += 1
        if n_nodes > MAX_NODES:
            raise ExprError(f"expression {expr!r} has more than {MAX_NODES} syntax nodes")
        if depth > MAX_DEPTH:
            raise ExprError(f"expression {expr!r} is nested more than {MAX_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def _is_number(x: Any) -> bool:
    return isinstance(x, Real)  # int, float, bool (and numpy reals)


def _bounded(x: Any, expr: str) -> Any:
    """``x`` when it is a number within ``MAX_MAGNITUDE`` (or a non-number: names may be strings)."""
    if _is_number(x):
        if isinstance(x, float) and math.isnan(x):
            raise ExprError(f"{expr!r} evaluates to NaN")
        if not abs(x) <= MAX_MAGNITUDE:
            raise ExprError(f"{expr!r}: a value exceeds {MAX_MAGNITUDE:.0e} in magnitude")
    return x


def _power(a: Any, b: Any, expr: str) -> Any:
    """``a ** b``, refused before computing when the result could exceed the bounds."""
    if abs(b) > MAX_EXPONENT:
        raise ExprError(f"{expr!r}: exponent {b} exceeds {MAX_EXPONENT}")
    if abs(a) > 1 and b > 0 and b * math.log10(abs(a)) > math.log10(MAX_MAGNITUDE):
        raise ExprError(f"{expr!r}: {a} ** {b} exceeds {MAX_MAGNITUDE:.0e}")
    if a == 0 and b < 0:
        raise ExprError(f"cannot evaluate {expr!r}: 0 to a negative power")
    if a < 0 and b != int(b):  # Python's answer is a complex number (truthy, never equal)
        raise ExprError(f"cannot evaluate {expr!r}: a negative number to a fractional power")
    return a**b


def evaluate(expr: str, env: dict[str, Any]) -> Any:
    """Evaluate ``expr`` with dotted names looked up in ``env`` (bounded: see the module doc)."""

    def num(x: Any, what: str) -> Any:
        if not _is_number(x):
            raise ExprError(f"{what} needs numbers, got {type(x).__name__} {x!r} in {expr!r} "
                            "(no string or list arithmetic)")
        return x

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return _bounded(node.value, expr)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            op = type(node.op).__name__
            a, b = num(ev(node.left), op), num(ev(node.right), op)
            if isinstance(node.op, ast.Pow):
                return _bounded(_power(a, b, expr), expr)
            return _bounded(_BIN[type(node.op)](a, b), expr)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            v = ev(node.operand)
            return _UNARY[type(node.op)](v if isinstance(node.op, ast.Not) else num(v, "sign"))
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
            return _bounded(env[name], expr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id not in FUNCTIONS:
                raise ExprError(f"function {node.func.id!r} is not allowed in {expr!r}")
            _no_keywords(node, expr)
            if len(node.args) > MAX_ARGS:
                raise ExprError(f"{node.func.id}() takes at most {MAX_ARGS} arguments in {expr!r}")
            args = [num(ev(a), node.func.id) for a in node.args]
            return _bounded(FUNCTIONS[node.func.id](*args), expr)
        raise ExprError(f"unsupported syntax {type(node).__name__} in {expr!r}")

    tree = _parse(expr)
    try:
        return ev(tree)
    except ExprError:
        raise
    except (ArithmeticError, TypeError, ValueError) as err:
        raise ExprError(f"cannot evaluate {expr!r}: {err}") from None
