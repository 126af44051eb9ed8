"""The generator's model of values: what a generated variable holds.

Every value the generator can use as an operand is a :class:`Val`: the
expression (a Var or a Constant), its kind (float, int or bool tensor,
tuple, callable) and, for numeric tensors, an interval that contains every
element at run time for inputs drawn by :func:`phasec.testing.inputs_for`.
Operators are only applied where the interval says the result stays finite
and far from singularities (no log of values near 0, no division by values
near 0, no exp of large values, magnitudes below :data:`VALUE_CAP`), so a
result mismatch is a real difference, not floating-point noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..ir import tir
from ..ir.expr import Expr
from ..ir.struct_info import TensorStructInfo

__all__ = ["Val", "FLOAT", "INT", "BOOL", "TUPLE", "FUNC", "OPAQUE", "VALUE_CAP", "INPUT_RANGE",
           "INT_INPUT_RANGE", "const_dim", "dim_max", "dims_equal", "shapes_equal",
           "broadcast_ok", "numel_max", "hull", "within", "iv_ok"]

FLOAT, INT, BOOL, TUPLE, FUNC = "f", "i", "b", "t", "fn"
#: a tensor whose shape is not known statically: never used as an operand
OPAQUE = "o"

#: Float inputs are drawn uniformly from this range (see ``inputs_for``).
INPUT_RANGE = (-2.0, 2.0)
#: Integer inputs (including recursion counters) are drawn from this range.
INT_INPUT_RANGE = (-3, 3)
#: No generated value may exceed this magnitude: float32 results then agree
#: with any correct evaluation order to well within the comparison tolerance.
VALUE_CAP = 256.0


@dataclass(eq=False)
class Val:
    """A value in scope for the generator."""

    expr: Expr
    kind: str
    lo: float = 0.0
    hi: float = 0.0
    fields: tuple["Val", ...] = ()
    local: bool = False  # a DataflowVar of the open dataflow block
    fn: Any = None       # for FUNC values: the callee description

    @property
    def sinfo(self) -> Any:
        return self.expr.struct_info

    @property
    def shape(self) -> tuple:
        return self.sinfo.shape

    @property
    def rank(self) -> int:
        return len(self.sinfo.shape)

    @property
    def dtype(self) -> str:
        return self.sinfo.dtype

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def is_tensor(self) -> bool:
        return self.kind in (FLOAT, INT, BOOL)


def const_dim(d: Any) -> int | None:
    """The value of a constant dimension, or None for a symbolic one."""
    return d.value if type(d) is tir.IntImm else None


def dim_max(d: Any, max_dim: int) -> int:
    """An upper bound of a dimension (symbolic variables are at most ``max_dim``)."""
    t = type(d)
    if t is tir.IntImm:
        return d.value
    if t is tir.Var:
        return max_dim
    if t is tir.BinaryOp and d.op in ("+", "*"):
        a, b = dim_max(d.lhs, max_dim), dim_max(d.rhs, max_dim)
        return a + b if d.op == "+" else a * b
    return max_dim * max_dim


def dims_equal(a: Any, b: Any) -> bool:
    """Provably equal dimensions: the same constant, the same symbolic
    variable (by identity: ``n`` of one function is not ``n`` of another),
    or the same expression over them."""
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is tir.IntImm:
        return a.value == b.value
    if ta is tir.BinaryOp:
        return a.op == b.op and dims_equal(a.lhs, b.lhs) and dims_equal(a.rhs, b.rhs)
    return False


def shapes_equal(s1: Sequence[Any], s2: Sequence[Any]) -> bool:
    return len(s1) == len(s2) and all(dims_equal(a, b) for a, b in zip(s1, s2))


def broadcast_ok(s1: Sequence[Any], s2: Sequence[Any]) -> bool:
    """numpy broadcasting, where symbolic dims only match themselves or 1."""
    for a, b in zip(reversed(s1), reversed(s2)):
        if not (dims_equal(a, b) or const_dim(a) == 1 or const_dim(b) == 1):
            return False
    return True


def numel_max(shape: Sequence[Any], max_dim: int) -> int:
    return math.prod(dim_max(d, max_dim) for d in shape)


def hull(*ivs: tuple[float, float]) -> tuple[float, float]:
    return min(i[0] for i in ivs), max(i[1] for i in ivs)


def within(inner: tuple[float, float], outer: tuple[float, float]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def iv_ok(iv: tuple[float, float] | None) -> bool:
    """An interval of finite values no larger than :data:`VALUE_CAP`."""
    return (iv is not None and all(math.isfinite(v) for v in iv)
            and -VALUE_CAP <= iv[0] <= iv[1] <= VALUE_CAP)


def tensor_sinfo(shape: Sequence[Any], dtype: str) -> TensorStructInfo:
    return TensorStructInfo(tuple(shape), dtype)
