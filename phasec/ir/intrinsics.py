"""The TIR intrinsics, ``T.exp(x)``, ``T.atan2(y, x)``, ``T.bitwise_and(a, b)``...:
one :class:`Intrinsic` declaration each, holding everything a layer needs to
know of it.

Every table of intrinsics derives from :data:`INTRINSIC_TABLE`: the names
TIR accepts and their arities (``tir.INTRINSICS`` and its subsets, which
the parser, printer, TE and verifier read), the numpy semantics of the exact
TIR interpreter, the Python semantics of scalar and shape expressions (the
Relax interpreter and the VM), and what the LLVM backend needs: how it
lowers the intrinsic (an LLVM intrinsic, a C math library call, or a
sequence of its own), the C function the JIT binds in the process, the
vectorizable float32 helper of :mod:`phasec.backend.llvm.mathlib`, and
whether a call is costly in the work estimate of parallel loops. The
LLVM-specific parts are names (strings); the backend keys its code by them.

A new math intrinsic that is an LLVM intrinsic or a C math function is one
:func:`_math` line below; one that needs a sequence of LLVM instructions of
its own also needs that sequence in ``phasec/backend/llvm/intrinsics.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["Intrinsic", "INTRINSIC_TABLE", "MATH", "BIT", "INDEX", "FACT", "LLVM_INTRINSIC",
           "C_MATH", "CUSTOM", "INTRINSICS", "MATH_INTRINSICS", "LIBM_INTRINSICS",
           "BOOL_INTRINSICS", "BIT_INTRINSICS", "INTRINSIC_DTYPES", "SCALAR_INTRINSICS",
           "STEPPING_INTRINSICS", "ALIASES", "process_symbols"]

# Kinds of intrinsics
#: elementwise float math (``exp``, ``atan2``...; ``isnan`` and friends test a float)
MATH = "math"
#: integer (and bool) bit operations, TVM's ``T.bitwise_and``... Shifts follow
#: numpy: an amount outside [0, bits) gives 0 (left) or the sign fill (right),
#: never C's undefined behaviour.
BIT = "bit"
#: ``checked_index(i, n)``: ``i`` for 0 <= i < n, ``i + n`` for -n <= i < 0; any
#: other ``i`` stops the kernel with an IndexOutOfRangeError (indices read from
#: data: take, gather, scatter...)
INDEX = "index"
#: ``assume(cond)``: TVM's ``T.assume``, a fact the kernel's author states (as
#: the statement ``Evaluate(assume(cond))``); it is never evaluated (the
#: condition may even read out of bounds, as in TVM's padding assumptions)
FACT = "fact"

# How the LLVM backend lowers an intrinsic on floats
#: a call of ``llvm.<llvm>.f16/f32/f64``
LLVM_INTRINSIC = "llvm"
#: a call of the C math library function ``c_name`` (``<c_name>f`` in float32,
#: float16 widened to float32)
C_MATH = "libm"
#: a sequence of its own in ``phasec/backend/llvm/intrinsics.py``
CUSTOM = "custom"


@dataclass(frozen=True)
class Intrinsic:
    """One TIR intrinsic, ``T.<name>(args)``."""

    name: str
    arity: int
    kind: str  # MATH, BIT, INDEX or FACT
    #: the dtype of the result when it is fixed ("bool", "int64"); "" when it is
    #: the operand's (or the call's own ``dtype``)
    result: str = ""
    #: the reference semantics on numpy scalars of one float dtype, result in
    #: that dtype (a bool for tests): the exact TIR interpreter's
    numpy: Callable[..., Any] | None = None
    #: the semantics on Python numbers: scalar and shape expressions evaluated
    #: by the Relax interpreter and the VM
    scalar: Callable[..., Any] | None = None
    #: BIT: the operation on Python ints of a ``bits``-wide dtype (the caller
    #: wraps the result to the dtype)
    on_bits: Callable[[int], Callable[..., int]] | None = None
    #: an integer operand is its own result (fabs: its absolute value); the LLVM
    #: backend refuses integer operands of the other math intrinsics
    exact_on_integers: bool = False
    #: how the LLVM backend computes it on floats (LLVM_INTRINSIC, C_MATH, CUSTOM)
    lowering: str = CUSTOM
    #: the LLVM intrinsic (``exp``: ``llvm.exp.f32``), for LLVM_INTRINSIC
    llvm: str | None = None
    #: the C math library function computing it in float64 (``<c_name>f`` in
    #: float32): called for C_MATH, and bound in the JIT process for every
    #: intrinsic, since LLVM may lower its own intrinsic to a call of it
    c_name: str | None = None
    #: the vectorizable float32 helper of ``phasec.backend.llvm.mathlib`` its
    #: float32 and float16 lowering calls when vector math is on (sigmoid's is
    #: exp's, around which its lowering is built)
    vector: str | None = None
    #: a transcendental (a polynomial of ~10-20 vector operations or a libm
    #: call): it counts for several element stores in the work estimate that
    #: decides whether a parallel loop is worth the threads
    costly: bool = False
    #: other names TVMScript spells it with (``T.nearbyint``)
    aliases: tuple[str, ...] = ()
    #: its result jumps where an operand crosses a boundary (floor, ceil,
    #: round, trunc at integers; fmod at multiples of its divisor): an ulp in
    #: the operand can move the result by a whole step
    steps: bool = False


def _math(name: str, numpy: Callable[..., Any], scalar: Callable[..., Any], *,
          lowering: str, llvm: str | None = None, c_name: str | None = None,
          vector: str | None = None, costly: bool = False, arity: int = 1, result: str = "",
          exact_on_integers: bool = False, aliases: tuple[str, ...] = (),
          steps: bool = False) -> Intrinsic:
    return Intrinsic(name, arity, MATH, result, numpy, scalar, None, exact_on_integers,
                     lowering, llvm, c_name, vector, costly, aliases, steps)


def _bit(name: str, arity: int, on_bits: Callable[[int], Callable[..., int]]) -> Intrinsic:
    return Intrinsic(name, arity, BIT, scalar=on_bits(64), on_bits=on_bits)


def _rsqrt(x: Any) -> Any:
    return type(x)(1) / np.sqrt(x)


def _sigmoid(x: Any) -> Any:
    one = type(x)(1)
    return one / (one + np.exp(-x))


def _erf(x: Any) -> Any:  # computed in float64, rounded to the operand's dtype
    return type(x)(math.erf(float(x)))


def _not(bits: int) -> Callable[[int], int]:
    return lambda a: ~a if bits > 1 else int(not a)


def _shift_left(bits: int) -> Callable[[int, int], int]:
    return lambda a, s: a << s if 0 <= s < bits else 0


def _dot4_u8s8(bits: int) -> Callable[[int, int], int]:
    """The four bytes of ``a`` (unsigned) times those of ``b`` (signed), summed."""
    def dot(a: int, b: int) -> int:
        total = 0
        for q in range(4):
            x = (a >> (8 * q)) & 0xFF
            y = (b >> (8 * q)) & 0xFF
            total += x * (y - 256 if y >= 128 else y)
        return total
    return dot


def _shift_right(bits: int) -> Callable[[int, int], int]:
    return lambda a, s: a >> s if 0 <= s < bits else (-1 if a < 0 else 0)


_L, _C = LLVM_INTRINSIC, C_MATH

_DECLARED = (
    _math("exp", np.exp, math.exp, lowering=_L, llvm="exp", c_name="exp", vector="phasec.expf",
          costly=True),
    _math("log", np.log, math.log, lowering=_L, llvm="log", c_name="log", vector="phasec.logf",
          costly=True),
    _math("sqrt", np.sqrt, math.sqrt, lowering=_L, llvm="sqrt", c_name="sqrt"),
    _math("rsqrt", _rsqrt, lambda x: 1.0 / math.sqrt(x), lowering=CUSTOM),
    _math("tanh", np.tanh, math.tanh, lowering=_L, llvm="tanh", c_name="tanh",
          vector="phasec.tanhf", costly=True),
    _math("sigmoid", _sigmoid, lambda x: 1.0 / (1.0 + math.exp(-x)), lowering=CUSTOM,
          vector="phasec.sigmoidf", costly=True),
    _math("erf", _erf, math.erf, lowering=CUSTOM, c_name="erf", vector="phasec.erff",
          costly=True),
    _math("fabs", np.abs, abs, lowering=_L, llvm="fabs", exact_on_integers=True),
    _math("floor", np.floor, math.floor, lowering=_L, llvm="floor", c_name="floor",
          exact_on_integers=True, steps=True),
    _math("ceil", np.ceil, math.ceil, lowering=_L, llvm="ceil", c_name="ceil",
          exact_on_integers=True, steps=True),
    # half to even, as TVM's T.nearbyint (what TVM legalizes R.round to)
    _math("round", np.rint, round, lowering=_L, llvm="roundeven", c_name="roundeven",
          exact_on_integers=True, aliases=("nearbyint",), steps=True),
    _math("trunc", np.trunc, math.trunc, lowering=_L, llvm="trunc", c_name="trunc",
          exact_on_integers=True, steps=True),
    _math("sin", np.sin, math.sin, lowering=_L, llvm="sin", c_name="sin", costly=True),
    _math("cos", np.cos, math.cos, lowering=_L, llvm="cos", c_name="cos", costly=True),
    _math("exp2", np.exp2, lambda x: 2.0 ** x, lowering=_L, llvm="exp2", c_name="exp2",
          costly=True),
    _math("log2", np.log2, math.log2, lowering=_L, llvm="log2", c_name="log2",
          vector="phasec.log2f", costly=True),
    _math("isnan", lambda x: bool(np.isnan(x)), math.isnan, lowering=CUSTOM, result="bool"),
    # C math library functions (float operands)
    _math("tan", np.tan, math.tan, lowering=_C, c_name="tan", costly=True),
    _math("asin", np.arcsin, math.asin, lowering=_C, c_name="asin", costly=True),
    _math("acos", np.arccos, math.acos, lowering=_C, c_name="acos", costly=True),
    _math("atan", np.arctan, math.atan, lowering=_C, c_name="atan", costly=True),
    _math("sinh", np.sinh, math.sinh, lowering=_C, c_name="sinh", costly=True),
    _math("cosh", np.cosh, math.cosh, lowering=_C, c_name="cosh", costly=True),
    _math("asinh", np.arcsinh, math.asinh, lowering=_C, c_name="asinh", costly=True),
    _math("acosh", np.arccosh, math.acosh, lowering=_C, c_name="acosh", costly=True),
    _math("atanh", np.arctanh, math.atanh, lowering=_C, c_name="atanh", costly=True),
    # the two IEEE class tests besides isnan
    _math("isinf", lambda x: bool(np.isinf(x)), math.isinf, lowering=CUSTOM, result="bool"),
    _math("isfinite", lambda x: bool(np.isfinite(x)), math.isfinite, lowering=CUSTOM,
          result="bool"),
    Intrinsic("checked_index", 2, INDEX, result="int64"),
    _math("atan2", np.arctan2, math.atan2, arity=2, lowering=_C, c_name="atan2", costly=True),
    # C's fmod: the remainder with the dividend's sign, exact, as TVM's T.fmod
    _math("fmod", np.fmod, math.fmod, arity=2, lowering=CUSTOM, c_name="fmod", costly=True,
          steps=True),
    _bit("bitwise_and", 2, lambda bits: lambda a, b: a & b),
    _bit("bitwise_or", 2, lambda bits: lambda a, b: a | b),
    _bit("bitwise_xor", 2, lambda bits: lambda a, b: a ^ b),
    _bit("bitwise_not", 1, _not),
    _bit("shift_left", 2, _shift_left),
    _bit("shift_right", 2, _shift_right),
    # the integer GEMM's 8-bit dot product: the low four bytes of ``a`` as
    # uint8 times those of ``b`` as int8, summed (one lane of x86's vpdpbusd;
    # see phasec/backend/llvm/intdot.py); meant for int32 operands
    _bit("dot4_u8s8", 2, _dot4_u8s8),
    Intrinsic("assume", 1, FACT, result="bool"),
)

#: Every intrinsic by name, in declaration order.
INTRINSIC_TABLE: Mapping[str, Intrinsic] = MappingProxyType({i.name: i for i in _DECLARED})

# The derived tables (re-exported by phasec.ir.tir).
#: every intrinsic: name -> arity
INTRINSICS: Mapping[str, int] = MappingProxyType({i.name: i.arity for i in _DECLARED})
#: the unary math intrinsics: name -> arity
MATH_INTRINSICS: Mapping[str, int] = MappingProxyType(
    {i.name: i.arity for i in _DECLARED if i.kind == MATH and i.arity == 1})
#: unary float math intrinsics lowered to the C library function of the same name
#: (``acosf`` for float32/float16, ``acos`` for float64)
LIBM_INTRINSICS = frozenset(i.name for i in _DECLARED if i.lowering == C_MATH and i.arity == 1)
#: intrinsics whose result is bool whatever the operand
BOOL_INTRINSICS = frozenset(i.name for i in _DECLARED if i.result == "bool")
#: the bit operations: name -> arity
BIT_INTRINSICS: Mapping[str, int] = MappingProxyType(
    {i.name: i.arity for i in _DECLARED if i.kind == BIT})
#: intrinsics whose result has a fixed dtype: name -> dtype
INTRINSIC_DTYPES: Mapping[str, str] = MappingProxyType(
    {i.name: i.result for i in _DECLARED if i.result})
#: the intrinsics scalar expressions may call: name -> function on Python numbers
SCALAR_INTRINSICS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {i.name: i.scalar for i in _DECLARED if i.scalar is not None})
#: the intrinsics (and their aliases) whose result steps with an operand (``Intrinsic.steps``)
STEPPING_INTRINSICS = frozenset(n for i in _DECLARED if i.steps for n in (i.name, *i.aliases))
#: other spellings of intrinsics: alias -> name
ALIASES: Mapping[str, str] = MappingProxyType(
    {alias: i.name for i in _DECLARED for alias in i.aliases})


def process_symbols() -> tuple[str, ...]:
    """The C math functions compiled intrinsics may call: each ``c_name`` in
    float32 (``expf``) and float64 (``exp``)."""
    return tuple(sym for i in _DECLARED if i.c_name for sym in (i.c_name + "f", i.c_name))
