"""Checks the readers (TVMScript parser, JSON loader) apply where user data
enters: integer literals that fit their dtype, dimensions that are integers.

The IR constructors stay cheap and accept anything; a value that no phase
could use (a dimension of ``4.5``, an ``int8`` literal of 300, a tensor
dimension of -4) is rejected here, at the boundary, with a message the
reader attaches to its location.
"""

from __future__ import annotations

import numpy as np

from ..ir import tir

__all__ = ["int_range_problem", "dim_problem"]

_RANGES = {d: (int(np.iinfo(d).min), int(np.iinfo(d).max)) for d in tir.DTYPES if tir.is_int(d)}
_RANGES["bool"] = (0, 1)


def int_range_problem(value: int, dtype: str) -> str | None:
    """Why ``value`` cannot be an integer literal of ``dtype``, or None."""
    bounds = _RANGES.get(dtype)
    if bounds is None or bounds[0] <= value <= bounds[1]:
        return None
    return f"{value} does not fit in {dtype} (range {bounds[0]}..{bounds[1]})"


def _children(e: tir.PrimExpr) -> tuple[tir.PrimExpr, ...]:
    if isinstance(e, tir.BinaryOp):
        return (e.lhs, e.rhs)
    if isinstance(e, (tir.Not, tir.Cast)):
        return (e.value,)
    if isinstance(e, tir.Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, tir.Call):
        return tuple(e.args)
    return ()


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
        stack.extend(_children(e))
    return None
