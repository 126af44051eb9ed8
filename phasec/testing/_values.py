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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from phasec.ir.expr import Expr
from phasec.ir.struct_info import TensorStructInfo

# The generator's value model is shared with the operators' draw declarations
# (phasec.op): this is the one place phasec.testing imports it from.
from phasec.op.draw import (
    BOOL, FLOAT, FUNC, INT, KINDS, OPAQUE, TUPLE, VALUE_CAP, Draw, Elementwise, Hooks,
    broadcast_ok, const_dim, dim_max, dims_equal, draw_of, hull, iv_ok, numel_max, shapes_equal,
    within,
)

__all__ = ["Val", "FLOAT", "INT", "BOOL", "TUPLE", "FUNC", "OPAQUE", "KINDS", "VALUE_CAP",
           "INPUT_RANGE", "INT_INPUT_RANGE", "const_dim", "dim_max", "dims_equal", "shapes_equal",
           "broadcast_ok", "numel_max", "hull", "within", "iv_ok", "Draw", "Elementwise", "Hooks",
           "draw_of"]

#: Float inputs are drawn uniformly from this range (see ``inputs_for``).
INPUT_RANGE = (-2.0, 2.0)
#: Integer inputs (including recursion counters) are drawn from this range.
INT_INPUT_RANGE = (-3, 3)


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


def tensor_sinfo(shape: Sequence[Any], dtype: str) -> TensorStructInfo:
    return TensorStructInfo(tuple(shape), dtype)
