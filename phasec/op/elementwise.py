"""Elementwise operators: binary arithmetic and comparisons (numpy
broadcasting), unary math, activations, astype, where and clip; their
definitions, then their lowerings to TE.

Reference semantics (numpy, results in the operands' dtype):

* ``divide`` on integers truncates toward zero (C / TIR ``/``); on floats it is
  true division. ``floor_divide`` is ``floor(a / b)`` (numpy ``//``).
* ``round`` rounds half to even (numpy ``round``, LLVM ``nearbyint``).
* ``maximum``/``minimum`` propagate NaN (numpy).
* Comparisons return ``bool``; ``logical_and``/``logical_or``/``logical_not``
  return the operands' dtype (``bool`` for bool operands) holding 0/1.
* Float math (exp, log, sqrt, rsqrt, tanh, sigmoid, erf, gelu, gelu_tanh,
  silu, softmax...) require a float dtype.
* Arithmetic (add, subtract, multiply, divide, floor_divide, maximum,
  minimum, negative, relu, matmul, conv2d, max_pool2d) does not take bool
  tensors (:data:`~phasec.op._common.NO_BOOL_OPS`): use the logical
  operators, or ``R.astype`` first. The reductions do, with a bool result
  as TVM's inference: sum and max are "any", prod and min are "all".
* ``clip(x, min, max)``: numpy.clip, result in x's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from phasec.ir import tir
from phasec import te
from phasec.ir.expr import Call
from phasec.ir.text import expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.te import Tensor
from phasec.ir.tir import BinaryOp, Cast, PrimExpr, Select
from phasec.op._common import (
    REQUIRED, OpPattern, as_float, attrs_of, binary_dtype, broadcast, define, err, tensor_arg,
)
from phasec.op._lowering import (
    LEGALIZE, Inputs, LegalizeFn, _attrs, _bcast, _const, _float, _name, _out, _safe_div,
    _tensor, legalizes, scalar_operands,
)
from phasec.op._draw import (
    ANY_DTYPE, BOOL, FLOAT, FLOATS, INT, NUMBERS, Elementwise, Hooks, broadcast_ok, corners,
    declares_draw, hull, monotone,
)
from phasec.op.manipulate import _dtype_required, _same_dtype

__all__ = ["BINARY_ARITH", "COMPARISONS", "UNARY"]


def _np_result(result, dtype) -> np.ndarray:
    return np.asarray(result).astype(dtype, copy=False)


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
            return _np_result(fn(a, b), np.result_type(a, b))
    return ref


def _compare_ref(fn):
    def ref(a, b):
        return _np_result(fn(_as_operand(a, b), _as_operand(b, a)), np.bool_)
    return ref


def _truncdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.true_divide(a, b)
    safe_b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe_b)
    # floor -> trunc: add one where the exact quotient was negative and inexact
    adjust = (np.remainder(a, safe_b) != 0) & ((a < 0) != (safe_b < 0))
    return np.where(b == 0, 0, q + adjust)


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.floor(np.true_divide(a, b))
    safe_b = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe_b))


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
    from phasec.op.infer import arg_sinfo
    from phasec.ir.struct_info import PrimStructInfo

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
# Unary
# ---------------------------------------------------------------------------

def _float_unary(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.dtype != "void" and not x.dtype.startswith("float"):
        raise err(call, f"{call.op.name.removeprefix('relax.')} requires the input tensor to have "
                        f"a float dtype, but {_arg(call)} has dtype {x.dtype}")
    return _same(x)


def _any_unary(call, ctx):
    return _same(tensor_arg(call, 0, ctx))


def _arg(call) -> str:
    from phasec.ir.text import expr_to_str
    return expr_to_str(call.args[0])


def _same(x: TensorStructInfo) -> TensorStructInfo:
    # the operand's struct info, on its virtual device (as TVM 0.27's InferTypeUnary)
    return x if x.span is None else TensorStructInfo(x.shape, x.dtype, x.ndim, vdevice=x.vdevice)


def _unary_ref(fn, *, via_float64: bool = False):
    def ref(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            if via_float64:
                return _np_result(fn(x.astype(np.float64)), x.dtype)
            return _np_result(fn(x), x.dtype)
    return ref


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_vec(x) if x.size else x.astype(np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


#: name -> (numpy implementation, needs float dtype, compute in float64)
UNARY = {
    "negative": (np.negative, False, False),
    "abs": (np.abs, False, False),
    "exp": (np.exp, True, False),
    "log": (np.log, True, False),
    "sqrt": (np.sqrt, True, False),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), True, True),
    "tanh": (np.tanh, True, False),
    "sigmoid": (_sigmoid, True, True),
    "erf": (_erf, True, True),
    "floor": (np.floor, False, False),
    "ceil": (np.ceil, False, False),
    "round": (np.round, False, False),
    "logical_not": (np.logical_not, False, False),
    "nn.relu": (_relu, False, False),
    "nn.gelu": (_gelu, True, True),
    "nn.gelu_tanh": (_gelu_tanh, True, True),
    "nn.silu": (lambda x: x * _sigmoid(x), True, True),
}

for _opname, (_fn, _needs_float, _f64) in UNARY.items():
    define(_opname, ("x",), _float_unary if _needs_float else _any_unary,
           reference=_unary_ref(_fn, via_float64=_f64), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_opname.removeprefix('nn.')}.")


def _stop_fusion_ref(x):
    return np.array(x, copy=True)


define("stop_fusion", ("x",), lambda call, ctx: _arg_sinfo_any(call, ctx),
       reference=_stop_fusion_ref, pattern=OpPattern.OPAQUE,
       doc="Identity; a fusion barrier for FuseOps.")

#: TVM 0.27 has no stop_fusion operator: in its syntax ``R.stop_fusion(x)`` is
#: spelt as a pure packed call of this name, ``R.call_pure_packed(
#: "phasec.stop_fusion", x, ty_args=<x's struct info>)`` (TVM parses it and its
#: FuseOps does not fuse across it: an opaque call), which phasec's parser reads
#: back as ``R.stop_fusion(x)``; ``phasec.tvm`` registers the name with TVM as
#: the identity, so TVM's VM runs it.
STOP_FUSION_PACKED = "phasec.stop_fusion"


def _arg_sinfo_any(call, ctx):
    from phasec.op.infer import arg_sinfo
    if len(call.args) != 1:
        raise err(call, f"R.stop_fusion expects 1 operand, got {len(call.args)}")
    return arg_sinfo(call.args[0], ctx)


# ---------------------------------------------------------------------------
# astype / where / clip
# ---------------------------------------------------------------------------

def _infer_astype(call, ctx):
    return _same_dtype(tensor_arg(call, 0, ctx), attrs_of(call)["dtype"])


define("astype", ("x",), _infer_astype, attrs={"dtype": (REQUIRED, _dtype_required)},
       reference=lambda x, dtype: np.asarray(x).astype(dtype),
       pattern=OpPattern.ELEMWISE, doc="Convert to ``dtype`` (numpy astype).")

# TVM 0.27's marker for a parameter stored in one dtype and used in another
# (ToMixedPrecision writes it). TVM infers astype's struct info but registers
# no legalization; phasec lowers it as the astype it means, elementwise so
# that the conversion fuses into its consumer.
define("wrap_param", ("data",), _infer_astype, attrs={"dtype": ("float32", _dtype_required)},
       reference=lambda data, dtype: np.asarray(data).astype(dtype),
       pattern=OpPattern.ELEMWISE, doc="A parameter converted to ``dtype`` (an astype).")
declares_draw("wrap_param", dtypes=("float32", "int32"), ranks=(0, 1, 2, 3, 4),
              build=lambda ctx: ((ctx.x,), {"dtype": "float32"}))


def _infer_where(call, ctx):
    from phasec.op._common import broadcast
    cond = tensor_arg(call, 0, ctx, "the condition")
    x = tensor_arg(call, 1, ctx)
    y = tensor_arg(call, 2, ctx)
    if cond.dtype not in ("void", "bool"):
        raise err(call, f"where needs a bool condition, but {expr_to_str(call.args[0])} "
                        f"has dtype {cond.dtype}")
    if "void" not in (x.dtype, y.dtype) and x.dtype != y.dtype:
        raise err(call, f"where needs both branches of one dtype, but "
                        f"{expr_to_str(call.args[1])} has dtype {x.dtype} and "
                        f"{expr_to_str(call.args[2])} has dtype {y.dtype}")
    dtype = x.dtype if x.dtype == y.dtype else "void"
    names = tuple(expr_to_str(a) for a in call.args[:3])
    xy = broadcast(call, x, y, dtype, names[1:])
    return broadcast(call, cond, xy, dtype, (names[0], f"broadcast({names[1]}, {names[2]})"))


def _where_ref(condition, x1, x2):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    return np.where(np.asarray(condition), x1, x2).astype(np.result_type(x1, x2))


define("where", ("condition", "x1", "x2"), _infer_where, reference=_where_ref,
       pattern=OpPattern.BROADCAST, doc="Select x1 where condition else x2 (broadcasting).")


def _infer_clip(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    if a["min"] > a["max"]:
        raise err(call, f"clip: min ({a['min']}) is greater than max ({a['max']})")
    return x if x.span is None else TensorStructInfo(x.shape, x.dtype, x.ndim)


def _clip_ref(x, min, max):  # noqa: A002 - TVM's attribute names
    x = np.asarray(x)
    return np.clip(x, min, max).astype(x.dtype)


define("clip", ("x",), _infer_clip, attrs={"min": (REQUIRED, as_float), "max": (REQUIRED, as_float)},
       reference=_clip_ref, pattern=OpPattern.ELEMWISE,
       doc="Clamp to [min, max] (numpy.clip), result in x's dtype.")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return BinaryOp("/", a, b)
    return _safe_div(a, b, "/")  # TIR integer "/" truncates toward zero


def _floor_divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return te.call("floor", BinaryOp("/", a, b))
    return _safe_div(a, b, "//")


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
        return te.cast(BinaryOp(op, _truthy(a), _truthy(b)), dtype)
    return fn


def _truthy(x: PrimExpr) -> PrimExpr:
    return x if tir.is_bool(x.dtype) else BinaryOp("!=", x, _const(0, x.dtype))


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
    from phasec.ir.expr import PrimValue
    from phasec.ir.struct_info import PrimStructInfo

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
    LEGALIZE["relax." + _n] = _make_binary(_n)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _te_negative(x: PrimExpr) -> PrimExpr:
    if _float(x.dtype):
        return BinaryOp("*", x, _const(-1.0, x.dtype))  # exact, keeps the sign of zero
    return BinaryOp("-", _const(0, x.dtype), x)


def _te_abs(x: PrimExpr) -> PrimExpr:
    if _float(x.dtype):
        return te.call("fabs", x)
    if x.dtype.startswith("uint") or tir.is_bool(x.dtype):
        return x
    return Select(BinaryOp("<", x, _const(0, x.dtype)), _te_negative(x), x)


def _float_only(name: str) -> Callable[[PrimExpr], PrimExpr]:
    return lambda x: te.call(name, x)


def _int_identity(name: str) -> Callable[[PrimExpr], PrimExpr]:
    return lambda x: te.call(name, x) if _float(x.dtype) else x


def _te_gelu(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    half = _const(0.5, dt)
    erf = te.call("erf", BinaryOp("*", x, _const(_SQRT1_2, dt)))
    return BinaryOp("*", BinaryOp("*", half, x), BinaryOp("+", _const(1.0, dt), erf))


def _te_gelu_tanh(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    cube = BinaryOp("*", BinaryOp("*", x, x), x)
    inner = BinaryOp("*", _const(_SQRT_2_PI, dt),
                     BinaryOp("+", x, BinaryOp("*", _const(0.044715, dt), cube)))
    return BinaryOp("*", BinaryOp("*", _const(0.5, dt), x),
                    BinaryOp("+", _const(1.0, dt), te.call("tanh", inner)))


_UNARY: dict[str, Callable[[PrimExpr], PrimExpr]] = {
    "negative": _te_negative,
    "abs": _te_abs,
    "exp": _float_only("exp"),
    "log": _float_only("log"),
    "sqrt": _float_only("sqrt"),
    "rsqrt": _float_only("rsqrt"),
    "tanh": _float_only("tanh"),
    "sigmoid": _float_only("sigmoid"),
    "erf": _float_only("erf"),
    "floor": _int_identity("floor"),
    "ceil": _int_identity("ceil"),
    "round": _int_identity("round"),
    "logical_not": lambda x: te.cast(BinaryOp("==", x, _const(0, x.dtype)), x.dtype),
    "nn.relu": lambda x: BinaryOp("max", x, _const(0, x.dtype)),
    "nn.gelu": _te_gelu,
    "nn.gelu_tanh": _te_gelu_tanh,
    "nn.silu": lambda x: BinaryOp("*", x, te.call("sigmoid", x)),
    "stop_fusion": lambda x: x,
}


def _make_unary(name: str) -> LegalizeFn:
    fn = _UNARY[name]

    def legalize(call: Call, inputs: Inputs) -> Tensor:
        x = _tensor(inputs, 0, call)
        out = _out(call)
        return te.compute(out.shape, lambda *i: te.cast(fn(x[i]), out.dtype), name=_name(call))
    return legalize


for _n in _UNARY:
    LEGALIZE["relax." + _n] = _make_unary(_n)


@legalizes("astype", "wrap_param")
def _astype(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    if tir.is_bool(out.dtype) and not tir.is_bool(x.dtype):
        return te.compute(out.shape, lambda *i: BinaryOp("!=", x[i], _const(0, x.dtype)),
                          name=_name(call))
    return te.compute(out.shape, lambda *i: te.cast(x[i], out.dtype), name=_name(call))


@legalizes("clip")
def _clip(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    a = _attrs(call)
    out = _out(call)
    dt = out.dtype
    if _float(dt):
        lo, hi = _const(a["min"], dt), _const(a["max"], dt)
        return te.compute(out.shape, lambda *i: BinaryOp("min", BinaryOp("max", x[i], lo), hi),
                          name=_name(call))
    # Integers: clamp in float64 against the float bounds, then truncate (numpy.clip + astype).
    lo, hi = _const(a["min"], "float64"), _const(a["max"], "float64")
    return te.compute(out.shape, lambda *i: te.cast(
        BinaryOp("min", BinaryOp("max", Cast("float64", x[i]), lo), hi), dt), name=_name(call))


@legalizes("where")
def _where(call: Call, inputs: Inputs) -> Tensor:
    c, a, b = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    shape = out.shape
    return te.compute(shape, lambda *i: Select(_truthy(_bcast(c, shape, i)), _bcast(a, shape, i),
                                               _bcast(b, shape, i)), name=_name(call))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (interval rules, phasec.op._draw)
# ---------------------------------------------------------------------------

def _sigmoid_scalar(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def _exp_iv(iv):
    return monotone(math.exp)(iv) if iv[1] <= 4.0 else None  # keep results small


def _abs_iv(iv):
    lo, hi = iv
    return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def _smooth_relu_iv(floor: float):
    # silu/gelu: bounded below by a small negative constant, above by relu
    return lambda iv: (floor if iv[0] < 0 else 0.0, max(iv[1], 0.0))


def _rounding_iv(iv):
    return math.floor(iv[0]), math.ceil(iv[1])


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


def _bool_iv(*ivs):
    return 0.0, 1.0


#: name -> (order, interval rule, operand dtypes, result "bool" or None); the
#: order is the operator's place among the simplest (R.add first).
_UNARY_DRAWS = {
    "negative": (3, lambda iv: (-iv[1], -iv[0]), NUMBERS, None),
    "exp": (4, _exp_iv, FLOATS, None),
    "nn.relu": (5, lambda iv: (max(iv[0], 0.0), max(iv[1], 0.0)), FLOATS, None),
    "tanh": (6, monotone(math.tanh), FLOATS, None),
    "abs": (12, _abs_iv, NUMBERS, None),
    "sigmoid": (13, monotone(_sigmoid_scalar), FLOATS, None),
    "log": (14, lambda iv: monotone(math.log)(iv) if iv[0] >= 0.05 else None, FLOATS, None),
    "sqrt": (15, lambda iv: monotone(math.sqrt)(iv) if iv[0] >= 0.0 else None, FLOATS, None),
    "rsqrt": (16, lambda iv: ((1 / math.sqrt(iv[1]), 1 / math.sqrt(iv[0])) if iv[0] >= 0.05
                              else None), FLOATS, None),
    "erf": (17, monotone(math.erf), FLOATS, None),
    "nn.silu": (18, _smooth_relu_iv(-0.28), FLOATS, None),
    "nn.gelu": (19, _smooth_relu_iv(-0.17), FLOATS, None),
    "nn.gelu_tanh": (20, _smooth_relu_iv(-0.17), FLOATS, None),
    "floor": (21, _rounding_iv, FLOATS, None),
    "ceil": (22, _rounding_iv, FLOATS, None),
    "round": (23, _rounding_iv, FLOATS, None),
    "stop_fusion": (24, lambda iv: iv, ANY_DTYPE, None),
    "logical_not": (36, _bool_iv, ("bool",), "bool"),
}
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
    **{name: (28 + k, _bool_iv, NUMBERS, "bool", None) for k, name in enumerate(
        ("less", "greater", "less_equal", "greater_equal", "equal", "not_equal"))},
    "logical_and": (34, _bool_iv, ("bool",), "bool", None),
    "logical_or": (35, _bool_iv, ("bool",), "bool", None),
}
for _opname, (_order, _iv, _dtypes, _result) in _UNARY_DRAWS.items():
    declares_draw(_opname, Elementwise(_iv, 1, _dtypes, _result, order=_order))
for _opname, (_order, _iv, _dtypes, _result, _crange) in _BINARY_DRAWS.items():
    declares_draw(_opname, Elementwise(_iv, 2, _dtypes, _result, _crange, order=_order))


# clip, where, astype (phasec.op._draw.Hooks)

_CLIP_BOUNDS = ((-1.0, 1.0), (0.0, 1.0), (-0.5, 2.0), (0.0, 6.0))


def _clip_build(g, x):
    from phasec.op.calls import call_op

    lo, hi = g.pick(list(_CLIP_BOUNDS))
    iv = (min(max(x.lo, lo), hi), min(max(x.hi, lo), hi))
    return g.emit(call_op("relax.clip", x.expr, min=lo, max=hi), FLOAT, iv)


def _where_build(g, c):
    """``where(cond, x1, x2)``: the first operand is the condition; the
    branches are float values in scope that broadcast with it, or constants."""
    from phasec.op.calls import call_op

    xs = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape))
    opts: list = xs + (["const"] if g.cfg.constants else [])
    if not xs:
        opts = ["const"]
    x1 = g.pick(opts)
    if x1 == "const":
        x1 = g.constant(g.const_shape(c), (-2.0, 2.0), "float32")
    ys = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape)
                   and broadcast_ok(x1.shape, v.shape))
    x2 = g.pick(ys + ["const"])
    if x2 == "const":
        x2 = g.constant((), (-2.0, 2.0), "float32")
    iv = hull((x1.lo, x1.hi), (x2.lo, x2.hi))
    return g.emit(call_op("relax.where", c.expr, x1.expr, x2.expr), FLOAT, iv)


def _astype_build(g, x):
    from phasec.op.calls import call_op

    if x.kind == FLOAT:
        # float -> int truncates; values are well inside int32
        target = g.pick(["int32", "float32"])
    else:
        target = "float32"
    kind = INT if target.startswith("int") else FLOAT
    iv = (math.trunc(x.lo), math.trunc(x.hi)) if kind == INT else (x.lo, x.hi)
    if x.kind == BOOL:
        iv = (0.0, 1.0)
    return g.emit(call_op("relax.astype", x.expr, dtype=target), kind, iv)


declares_draw("clip", Hooks(_clip_build, (FLOAT,), order=25))
declares_draw("where", Hooks(_where_build, (BOOL,), accepts=lambda g, x: x.kind == BOOL,
                             order=37))
declares_draw("astype", Hooks(_astype_build, (FLOAT, INT, BOOL),
                              accepts=lambda g, x: x.kind in (FLOAT, INT, BOOL), order=38))
