"""Checks the readers (TVMScript parser, JSON loader) apply where user data
enters: integer literals that fit their dtype, dimensions that are integers.

The IR constructors stay cheap and accept anything; a value that no phase
could use (a dimension of ``4.5``, an ``int8`` literal of 300, a tensor
dimension of -4) is rejected here, at the boundary, with a message the
reader attaches to its location.
"""

from __future__ import annotations

import numpy as np

from phasec.ir import tir

__all__ = ["int_range_problem", "dim_problem"]

_RANGES = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in tir.DTYPES if tir.is_int(d)}
_RANGES["bool"] = (0, 1)


def int_range_problem(value: int, dtype: str) -> str | None:
    """Why ``value`` cannot be an integer literal of ``dtype``, or None."""
    bounds = _RANGES.get(dtype)
    if bounds is None or bounds[0] <= value <= bounds[1]:
        return None
    return f"{value} does not fit in {dtype} (range {bounds[0]}..{bounds[1]})"



def dim_problem(expr: tir.PrimExpr, *, allow_negative: bool = False) -> str | None:
    """Why ``expr`` cannot be a shape dimension, or None.

    A dimension is an integer expression (integer literals, integer
    variables, integer arithmetic; comparisons only inside a select's
    condition): no float or bool value, no buffer read. A constant
    dimension is non-negative unless ``allow_negative`` (``R.shape`` values
    such as reshape's ``-1``).
    """
    if not isinstance(expr, tir.PrimExpr):
        return f"a dimension must be an integer expression, not {type(expr).__name__}"
    if not tir.is_int(expr.dtype):
        return f"a dimension must be an integer, not a {expr.dtype or 'untyped'} value"
    if isinstance(expr, tir.IntImm) and expr.value < 0 and not allow_negative:
        return f"a dimension cannot be negative ({expr.value})"
    problem = _constant_problem(expr, allow_negative)
    if problem is not None:
        return problem
    stack = [expr]
    while stack:  # iterative: dimension expressions may be long chains
        e = stack.pop()
        if isinstance(e, tir.BufferLoad):
            return "a dimension cannot read a buffer"
        if tir.is_float(e.dtype):
            return f"a dimension must be an integer expression, but it contains a {e.dtype} value"
        if isinstance(e, tir.IntImm):
            problem = int_range_problem(e.value, e.dtype)
            if problem is not None:
                return problem
        stack.extend(tir.expr_children(e))
    return None


_INT64_MIN, _INT64_MAX = _RANGES["int64"]
_FOLDABLE = frozenset({"+", "-", "*", "//", "%", "pow", "min", "max"})


class _Overflow(Exception):
    def __init__(self, value: str) -> None:
        self.value = value


def _fold(op: str, a: int, b: int) -> int | None:
    """``a op b`` exactly (None: not foldable here, e.g. division by zero);
    _Overflow when a power is too large to compute."""
    if op == "pow":
        if b < 0:
            return None
        if abs(a) > 1 and b > 64:  # |a| ** b is beyond 2 ** 64: never compute it
            raise _Overflow(f"{a} ** {b}")
        return a ** b
    if op in ("//", "%") and b == 0:
        return None
    return {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}[op] \
        if op not in ("//", "%") else (a // b if op == "//" else a % b)


def _constant_problem(expr: tir.PrimExpr, allow_negative: bool) -> str | None:
    """Integer arithmetic on literals in a dimension, computed exactly: a
    value outside int64 anywhere (``2 ** 64 + 4``, ``10 ** 10 ** 10``) or a
    negative constant dimension (``2 - 5``) is a problem, never a wrap."""
    values: dict[int, int | None] = {}
    todo: list[tuple[tir.PrimExpr, bool]] = [(expr, False)]
    try:
        while todo:
            e, ready = todo.pop()
            if id(e) in values:
                continue
            if type(e) is tir.IntImm:
                values[id(e)] = e.value
                continue
            if type(e) is not tir.BinaryOp or e.op not in _FOLDABLE:
                values[id(e)] = None
                continue
            if not ready:
                todo.append((e, True))
                todo.extend(((e.lhs, False), (e.rhs, False)))
                continue
            a, b = values[id(e.lhs)], values[id(e.rhs)]
            value = None if a is None or b is None else _fold(e.op, a, b)
            if value is not None and not _INT64_MIN <= value <= _INT64_MAX:
                raise _Overflow(str(value))
            values[id(e)] = value
    except _Overflow as exc:
        text = exc.value if len(exc.value) <= 40 else exc.value[:20] + "..." + exc.value[-12:]
        return f"{text} does not fit in int64 (range {_INT64_MIN}..{_INT64_MAX})"
    final = values.get(id(expr))
    if final is not None and final < 0 and not allow_negative:
        return f"a dimension cannot be negative ({final})"
    return None
