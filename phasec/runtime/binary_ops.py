"""The semantics of TIR's binary operators (``BinaryOp.op``): one
:class:`BinaryOpSemantics` per operator symbol.

``scalar`` computes on Python numbers; it is what the constant folder
(:mod:`phasec.arith`), scalar and shape expressions in the Relax interpreter
and the VM, the LLVM runtime's shape checks and the static bounds check
fold with. Integers are exact (no wrapping, except ``pow``'s, which wraps
like the kernels' integer power); a zero divisor raises ZeroDivisionError,
and each user decides what that means (an error, no folding, 0). ``array``
computes on numpy values of one float dtype (numpy's rules, NaN propagating
through ``min``/``max``): the exact TIR interpreter's float operands.

Integer division follows TIR: ``/`` truncates toward zero (TVM's ``Div``),
``//`` and ``%`` floor (``floordiv``/``floormod``); on floats ``/`` is true
division.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["BinaryOpSemantics", "BINARY_OPS", "SCALAR_BINARY", "truncdiv", "divide", "int_pow",
           "power", "ARITH", "COMPARE", "LOGIC"]

#: kinds of operators
ARITH, COMPARE, LOGIC = "arith", "compare", "logic"


@dataclass(frozen=True)
class BinaryOpSemantics:
    """One TIR binary operator."""

    symbol: str
    kind: str  # ARITH, COMPARE or LOGIC
    #: on Python numbers (exact integers; ZeroDivisionError for a zero divisor)
    scalar: Callable[[Any, Any], Any]
    #: on numpy values of one float dtype (None: and/or, which evaluate lazily)
    array: Callable[[Any, Any], Any] | None


def truncdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero (TIR's integer ``/``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def divide(a: Any, b: Any) -> Any:
    """TIR's ``/``: true division on floats, :func:`truncdiv` on integers."""
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return truncdiv(a, b)


def int_pow(a: int, b: int) -> int:
    """``a ** b`` as the kernels compute it: wrapped to int64 (a modular power,
    so ``n ** 100000000`` takes microseconds, not hours), and 0 for negative
    exponents except for the bases 1 and -1."""
    if b < 0:
        return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
    r = pow(a, b, 1 << 64)
    return r - (1 << 64) if r >= 1 << 63 else r


def power(a: Any, b: Any) -> Any:
    """TIR's ``pow``: ``a ** b`` on floats, :func:`int_pow` on integers."""
    if isinstance(a, float) or isinstance(b, float):
        return a ** b
    return int_pow(int(a), int(b))


def _and(a: Any, b: Any) -> bool:
    return bool(a) and bool(b)


def _or(a: Any, b: Any) -> bool:
    return bool(a) or bool(b)


_DECLARED = (
    BinaryOpSemantics("+", ARITH, operator.add, operator.add),
    BinaryOpSemantics("-", ARITH, operator.sub, operator.sub),
    BinaryOpSemantics("*", ARITH, operator.mul, operator.mul),
    BinaryOpSemantics("//", ARITH, operator.floordiv, np.floor_divide),
    BinaryOpSemantics("%", ARITH, operator.mod, np.remainder),
    BinaryOpSemantics("/", ARITH, divide, operator.truediv),
    BinaryOpSemantics("min", ARITH, min, np.minimum),
    BinaryOpSemantics("max", ARITH, max, np.maximum),
    BinaryOpSemantics("==", COMPARE, operator.eq, operator.eq),
    BinaryOpSemantics("!=", COMPARE, operator.ne, operator.ne),
    BinaryOpSemantics("<", COMPARE, operator.lt, operator.lt),
    BinaryOpSemantics("<=", COMPARE, operator.le, operator.le),
    BinaryOpSemantics(">", COMPARE, operator.gt, operator.gt),
    BinaryOpSemantics(">=", COMPARE, operator.ge, operator.ge),
    BinaryOpSemantics("and", LOGIC, _and, None),
    BinaryOpSemantics("or", LOGIC, _or, None),
    BinaryOpSemantics("pow", ARITH, power, np.power),
)

#: Every TIR binary operator by symbol.
BINARY_OPS: Mapping[str, BinaryOpSemantics] = MappingProxyType({s.symbol: s for s in _DECLARED})
#: symbol -> the operator on Python numbers
SCALAR_BINARY: Mapping[str, Callable[[Any, Any], Any]] = MappingProxyType(
    {s.symbol: s.scalar for s in _DECLARED})
