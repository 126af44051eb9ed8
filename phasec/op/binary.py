"""Binary elementwise operators (TVM 0.27's ``relax.op.binary``), with numpy
broadcasting: add, subtract, multiply, divide, floor_divide, power, maximum,
minimum, the comparisons, logical_and/or/xor, atan2, log_add_exp,
floor_mod, mod, the bitwise and shift operators; their definitions,
lowerings to TE and draw declarations.

Reference semantics (numpy, results in the operands' dtype):

* ``divide`` on integers truncates toward zero (C / TIR ``/``); on floats it is
  true division. ``floor_divide`` is ``floor(a / b)`` (numpy ``//``).
* ``maximum``/``minimum`` propagate NaN (numpy).
* Comparisons return ``bool``; ``logical_and``/``logical_or``/``logical_xor``
  return the operands' dtype (``bool`` for bool operands) holding 0/1.
* Arithmetic (add, subtract, multiply, divide, floor_divide, maximum,
  minimum) does not take bool tensors
  (:data:`~phasec.op._common.NO_BOOL_OPS`): use the logical operators, or
  ``R.astype`` first.
* ``atan2`` (``arctan2(x1, x2)``) and ``log_add_exp`` (``log(exp(x1) +
  exp(x2))`` without overflow): float tensors only, as TVM.
* ``floor_mod(x1, x2)``: the remainder with the divisor's sign (numpy
  ``mod``, Python ``%``); ``mod(x1, x2)``: the remainder with the dividend's
  sign (C ``fmod``, numpy ``fmod``, TVM's truncmod). Float division by 0
  gives NaN.
* **Integer division by zero** (``divide``, ``floor_divide``, ``mod``,
  ``floor_mod`` with a divisor holding 0) is a run-time error, a
  :class:`~phasec.errors.DivisionByZeroError`, wherever the program runs:
  these references (so the reference interpreter), the TIR interpreter,
  compiled kernels (the division checks its divisor unless it is a non-zero
  constant or proven non-zero, :mod:`phasec.arith.inbounds`), as ONNX
  Runtime fails such a run. Constant folding leaves such a call to run time.
  ``INT_MIN / -1`` is no error: it wraps to ``INT_MIN`` (remainder 0).
* ``bitwise_and/or/xor`` (integers and bool); ``left_shift`` / ``right_shift``
  (integers; right shifts are arithmetic for signed types; an amount outside
  ``[0, bits)`` gives 0 to the left and the sign fill to the right, as numpy,
  never C's undefined behaviour).
* Every binary operator takes an ``R.Prim`` scalar for either operand (not
  both), broadcast over the other (TVM 0.27's InferTypeBroadcast).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from phasec import te
from phasec.errors import DivisionByZeroError
from phasec.ir import tir
from phasec.ir.expr import Call, PrimValue
from phasec.ir.struct_info import PrimStructInfo, TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, PrimExpr, Select
from phasec.op._common import OpPattern, binary_dtype, broadcast, define, err, tensor_arg
from phasec.op._elementwise import bool_interval, kind_check, np_result, truthy
from phasec.op._lowering import (
    Inputs, LegalizeFn, _bcast, _const, _float, _name, _out, _tensor, legalizes,
    scalar_operands,
)
from phasec.op.draw import FLOATS, NUMBERS, Elementwise, corners, declares_draw
from phasec.ir.text import expr_to_str
from phasec.op.infer import arg_sinfo
from phasec.te import Tensor

__all__ = ["BINARY_ARITH", "COMPARISONS", "MATH_BINARY"]


def _as_operand(v, other):
    """A binary operand as an array; an R.Prim scalar given as a plain Python
    number takes the other operand's dtype (inference has checked that both
    dtypes agree)."""
    if isinstance(v, (int, float, bool)) and not isinstance(v, np.generic):
        return np.asarray(v, dtype=np.asarray(other).dtype)
    return np.asarray(v)


def _binary_ref(fn):
    def ref(a, b):
        a, b = _as_operand(a, b), _as_operand(b, a)
        with np.errstate(all="ignore"):
            return np_result(fn(a, b), np.result_type(a, b))
    return ref


def _compare_ref(fn):
    def ref(a, b):
        return np_result(fn(_as_operand(a, b), _as_operand(b, a)), np.bool_)
    return ref


def _nonzero_divisor(a: np.ndarray, b: np.ndarray, name: str) -> None:
    """Integer operands with a divisor holding 0 (where ``a`` broadcasts over
    it: an empty result divides nothing): the run-time error of ``R.name``."""
    if b.dtype.kind in "iu" and a.dtype.kind in "iu" and np.broadcast(a, b).size \
            and not np.all(b):
        raise DivisionByZeroError(f"R.{name}")


def _truncdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.true_divide(a, b)
    _nonzero_divisor(a, b, "divide")
    q = np.floor_divide(a, b)
    # floor -> trunc: add one where the exact quotient was negative and inexact
    adjust = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + adjust


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.floor(np.true_divide(a, b))
    _nonzero_divisor(a, b, "floor_divide")
    return np.floor_divide(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        # Integer powers with negative exponents are 0 (except bases 1, -1).
        neg = b < 0
        res = np.power(a, np.where(neg, 0, b))
        inv = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        return np.where(neg, inv, res)
    return np.power(a, b)


#: name -> numpy implementation of binary arithmetic ops
BINARY_ARITH = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": _truncdiv,
    "floor_divide": _floordiv,
    "power": _power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}

COMPARISONS = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


def _binary_operands(call, ctx):
    """The operands' struct info; an R.Prim scalar beside a tensor broadcasts as
    a 0-d tensor. (TVM 0.27's InferTypeBroadcast reads it as shape (1,): the
    same result except beside a 0-d tensor, where TVM's is (1,) and phasec's
    (); two scalars are not a tensor computation: an error here, where TVM
    gives an R.Prim.)"""
    out = []
    prims = 0
    for i in range(2):
        s = arg_sinfo(call.args[i], ctx) if len(call.args) > i else None
        if isinstance(s, PrimStructInfo):
            prims += 1
            out.append(TensorStructInfo((), s.dtype))
        else:
            out.append(tensor_arg(call, i, ctx))
    if prims == 2:
        raise err(call, f"{expr_to_str(call.op)} of two scalars (R.Prim): phasec computes it on "
                        "tensors only; make one operand a tensor (R.const) or compute the scalar "
                        "in the shape (a symbolic expression)")
    return out


def _infer_binary(call, ctx):
    a, b = _binary_operands(call, ctx)
    return broadcast(call, a, b, binary_dtype(call, a, b))


def _infer_compare(call, ctx):
    a, b = _binary_operands(call, ctx)
    binary_dtype(call, a, b)
    return broadcast(call, a, b, "bool")


for _opname, _fn in BINARY_ARITH.items():
    define(_opname, ("x1", "x2"), _infer_binary, reference=_binary_ref(_fn),
           pattern=OpPattern.BROADCAST, doc=f"Elementwise {_opname} with numpy broadcasting.")

for _opname, _fn in COMPARISONS.items():
    define(_opname, ("x1", "x2"), _infer_compare, reference=_compare_ref(_fn),
           pattern=OpPattern.BROADCAST, doc=f"Elementwise {_opname} (bool result), broadcasting.")


# ---------------------------------------------------------------------------
# TVM 0.27's further binary operators (atan2 ... logical_xor)
# ---------------------------------------------------------------------------

def _binary_infer(kind: str):
    def infer(call, ctx):
        a, b = _binary_operands(call, ctx)  # an R.Prim operand broadcasts as a scalar
        kind_check(call, a, kind, 0)
        kind_check(call, b, kind, 1)
        return broadcast(call, a, b, binary_dtype(call, a, b))
    return infer


def _ref_binary(fn):
    def ref(x1, x2):
        a, b = _as_operand(x1, x2), _as_operand(x2, x1)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(np.result_type(a, b))
    return ref


def _int_checked(fn, name: str):
    """numpy with phasec's integer rule: a zero divisor is an error."""
    def wrapped(a, b):
        _nonzero_divisor(a, b, name)
        return fn(a, b)
    return wrapped


def _log_add_exp_ref(a, b):
    return np.logaddexp(a, b)


def _shift_ref(left: bool):
    def ref(a, b):
        a, b = np.broadcast_arrays(a, b)
        bits = a.dtype.itemsize * 8
        inr = (b >= 0) & (b < bits)
        safe = np.where(inr, b, 0).astype(a.dtype)
        shifted = np.left_shift(a, safe) if left else np.right_shift(a, safe)
        fill = np.zeros_like(a) if left else np.where(a < 0, -1, 0).astype(a.dtype)
        return np.where(inr, shifted, fill)
    return ref


def _logical_xor_ref(a, b):
    return np.logical_xor(a, b)


#: name -> (dtype kind, numpy implementation)
MATH_BINARY = {
    "atan2": ("float", np.arctan2),
    "log_add_exp": ("float", _log_add_exp_ref),
    "floor_mod": ("numeric", _int_checked(np.mod, "floor_mod")),
    "mod": ("numeric", _int_checked(np.fmod, "mod")),
    "bitwise_and": ("intbool", np.bitwise_and),
    "bitwise_or": ("intbool", np.bitwise_or),
    "bitwise_xor": ("intbool", np.bitwise_xor),
    "left_shift": ("int", _shift_ref(True)),
    "right_shift": ("int", _shift_ref(False)),
    "logical_xor": ("intbool", _logical_xor_ref),
}

for _n, (_kind, _fn) in MATH_BINARY.items():
    define(_n, ("x1", "x2"), _binary_infer(_kind),
           reference=_ref_binary(_fn), pattern=OpPattern.BROADCAST,
           doc=f"Elementwise {_n} with numpy broadcasting.")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    # TIR integer "/" truncates toward zero; a zero divisor is the kernel's error
    return BinaryOp("/", a, b)


def _floor_divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return te.call("floor", BinaryOp("/", a, b))
    return BinaryOp("//", a, b)


def _te_power(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return BinaryOp("pow", a, b)
    # Integer power through float64 (exact below 2**53); negative exponents
    # give 1 for base 1, +-1 for base -1 and 0 otherwise (the reference's rule).
    f = BinaryOp("pow", Cast("float64", a), Cast("float64", BinaryOp("max", b, _const(0, dtype))))
    pos = Cast(dtype, f)
    one, zero = _const(1, dtype), _const(0, dtype)
    if dtype.startswith("uint"):
        return pos
    minus_one = _const(-1, dtype)
    odd = BinaryOp("!=", BinaryOp("%", b, _const(2, dtype)), zero)
    inv = Select(BinaryOp("==", a, one), one,
                 Select(BinaryOp("==", a, minus_one), Select(odd, minus_one, one), zero))
    return Select(BinaryOp("<", b, zero), inv, pos)


def _logical(op: str) -> Callable[[PrimExpr, PrimExpr, str], PrimExpr]:
    def fn(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
        return te.cast(BinaryOp(op, truthy(a), truthy(b)), dtype)
    return fn


_BINARY: dict[str, Callable[[PrimExpr, PrimExpr, str], PrimExpr]] = {
    "add": lambda a, b, dt: BinaryOp("+", a, b),
    "subtract": lambda a, b, dt: BinaryOp("-", a, b),
    "multiply": lambda a, b, dt: BinaryOp("*", a, b),
    "divide": _divide,
    "floor_divide": _floor_divide,
    "power": _te_power,
    "maximum": lambda a, b, dt: BinaryOp("max", a, b),
    "minimum": lambda a, b, dt: BinaryOp("min", a, b),
    "logical_and": _logical("and"),
    "logical_or": _logical("or"),
    "equal": lambda a, b, dt: BinaryOp("==", a, b),
    "not_equal": lambda a, b, dt: BinaryOp("!=", a, b),
    "less": lambda a, b, dt: BinaryOp("<", a, b),
    "less_equal": lambda a, b, dt: BinaryOp("<=", a, b),
    "greater": lambda a, b, dt: BinaryOp(">", a, b),
    "greater_equal": lambda a, b, dt: BinaryOp(">=", a, b),
}


def _make_binary(name: str) -> LegalizeFn:
    fn = _BINARY[name]

    def legalize(call: Call, inputs: Inputs) -> Tensor:
        a, b = _binary_input(call, inputs, 0), _binary_input(call, inputs, 1)
        out = _out(call)
        shape = out.shape

        def load(t, i):
            return t if isinstance(t, PrimExpr) else _bcast(t, shape, i)
        return te.compute(shape, lambda *i: fn(load(a, i), load(b, i), out.dtype),
                          name=_name(call))
    return scalar_operands(legalize)


def _binary_input(call: Call, inputs: Inputs, k: int):
    """A tensor operand, or the value of an R.Prim one (an R.prim_value, or an R.Prim
    variable whose value is known): a scalar broadcast over the result."""
    v = inputs[k]
    if isinstance(v, (Tensor, PrimExpr)):  # PrimExpr: a scalar parameter (scalar_operands)
        return v
    if isinstance(v, PrimValue):
        return v.value
    sinfo = getattr(v, "struct_info", None)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return sinfo.value
    return _tensor(inputs, k, call)  # the driver's error: a kernel operand must be a tensor


for _n in _BINARY:
    legalizes(_n)(_make_binary(_n))


def _binary_tir(name: str, a: PrimExpr, b: PrimExpr, dt: str) -> PrimExpr:
    if name == "atan2":
        return tir.Call("atan2", (a, b), dt)
    if name == "log_add_exp":
        hi, lo = BinaryOp("max", a, b), BinaryOp("min", a, b)
        # log(e^hi + e^lo) = hi + log(1 + e^(lo - hi)); equal infinities: hi itself
        soft = BinaryOp("+", hi, te.call("log", BinaryOp(
            "+", _const(1.0, dt), te.call("exp", BinaryOp("-", lo, hi)))))
        return Select(te.call("isinf", hi), hi, soft)
    if name in ("floor_mod", "mod"):
        if tir.is_float(dt):
            # C's fmod is exact; the floor remainder moves a non-zero remainder
            # whose sign differs from the divisor's by one divisor (numpy's rule);
            # T.fmod, not %: TVM's TIR has no float %
            r = tir.Call("fmod", (a, b), dt)
            if name == "mod":
                return r
            zero = _const(0, dt)
            differ = BinaryOp("!=", BinaryOp("<", r, zero), BinaryOp("<", b, zero))
            adjust = BinaryOp("and", BinaryOp("!=", r, zero), differ)
            return Select(adjust, BinaryOp("+", r, b), r)
        zero = _const(0, dt)
        # TIR %: the floor remainder (TVM's floormod); a zero divisor is the kernel's error
        r = BinaryOp("%", a, b)
        if name == "mod":  # truncated: the dividend's sign
            differ = BinaryOp("!=", BinaryOp("<", r, zero), BinaryOp("<", a, zero))
            adjust = BinaryOp("and", BinaryOp("!=", r, zero), differ)
            # (the division outside the Select: no lazy branch in the loop)
            r = BinaryOp("-", r, Select(adjust, b, zero))
        return r
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return tir.Call(name, (a, b), dt)
    if name in ("left_shift", "right_shift"):
        return tir.Call("shift_left" if name == "left_shift" else "shift_right", (a, b), dt)
    # logical_xor: 0/1 in the operands' dtype, as logical_and
    return te.cast(BinaryOp("!=", truthy(a), truthy(b)), dt)


def _binary_legalize(name: str):
    def legalize(call, inputs):
        a, b = _binary_input(call, inputs, 0), _binary_input(call, inputs, 1)
        out = _out(call)
        shape = out.shape

        def load(t, i):
            return t if isinstance(t, PrimExpr) else _bcast(t, shape, i)
        return te.compute(shape, lambda *i: _binary_tir(
            name, load(a, i), load(b, i), out.dtype), name=_name(call))
    return scalar_operands(legalize)


for _n in MATH_BINARY:
    legalizes(_n)(_binary_legalize(_n))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (interval rules, phasec.op.draw)
# ---------------------------------------------------------------------------

def _away_from_zero(b) -> bool:
    return b[0] >= 0.25 or b[1] <= -0.25


_quotient = corners(lambda x, y: x / y)


def _div_iv(a, b):
    return _quotient(a, b) if _away_from_zero(b) else None


def _floordiv_iv(a, b):
    q = _div_iv(a, b)
    return None if q is None else (math.floor(q[0]), math.floor(q[1]))


def _pow_iv(a, b):
    if a[0] < 0.1 or a[1] > 8.0 or b[0] < -2.0 or b[1] > 2.0:
        return None
    return corners(lambda x, y: x ** y)(a, b)


_DIVISOR = (0.5, 2.0)
#: name -> (order, interval rule, operand dtypes, result, constant second operand range)
_BINARY_DRAWS = {
    "add": (0, lambda a, b: (a[0] + b[0], a[1] + b[1]), NUMBERS, None, None),
    "multiply": (1, corners(lambda x, y: x * y), NUMBERS, None, None),
    "subtract": (2, lambda a, b: (a[0] - b[1], a[1] - b[0]), NUMBERS, None, None),
    "maximum": (7, lambda a, b: (max(a[0], b[0]), max(a[1], b[1])), NUMBERS, None, None),
    "minimum": (8, lambda a, b: (min(a[0], b[0]), min(a[1], b[1])), NUMBERS, None, None),
    "divide": (9, _div_iv, FLOATS, None, lambda a: _DIVISOR),
    "power": (26, _pow_iv, FLOATS, None, lambda a: (-2.0, 2.0)),
    "floor_divide": (27, _floordiv_iv, FLOATS, None, lambda a: _DIVISOR),
    **{name: (28 + k, bool_interval, NUMBERS, "bool", None) for k, name in enumerate(
        ("less", "greater", "less_equal", "greater_equal", "equal", "not_equal"))},
    "logical_and": (34, bool_interval, ("bool",), "bool", None),
    "logical_or": (35, bool_interval, ("bool",), "bool", None),
}
for _opname, (_order, _iv, _dtypes, _result, _crange) in _BINARY_DRAWS.items():
    declares_draw(_opname, Elementwise(_iv, 2, _dtypes, _result, _crange, order=_order))
