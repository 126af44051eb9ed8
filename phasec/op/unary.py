"""Unary elementwise operators (TVM 0.27's ``relax.op.unary``): negative, abs,
exp, log, sqrt, rsqrt, tanh, sigmoid, erf, the trigonometric and hyperbolic
functions, sign, square, the roundings (floor, ceil, round, trunc),
logical_not, bitwise_not, the IEEE class tests (isfinite, isinf, isnan) and
clip; their definitions, lowerings to TE and draw declarations. Also
``stop_fusion``, phasec's own fusion barrier (TVM has no such operator; see
:data:`STOP_FUSION_PACKED`).

The activations TVM keeps in ``relax.nn`` (relu, gelu, silu...) are in
:mod:`phasec.op.nn.activation`; they use this module's inference, reference
and kernel helpers (:func:`float_unary`, :func:`unary_reference`,
:func:`unary_kernel`).

Reference semantics (numpy, results in the operand's dtype):

* ``round`` rounds half to even (numpy ``round``, LLVM ``nearbyint``).
* ``logical_not`` returns the operand's dtype (``bool`` for bool operands)
  holding 0/1.
* Float math (exp, log, sqrt, rsqrt, tanh, sigmoid, erf, ``acos acosh asin
  asinh atan atanh cos cosh sin sinh tan``) requires a float dtype, as TVM.
* ``negative`` does not take bool tensors
  (:data:`~phasec.op._common.NO_BOOL_OPS`): use ``logical_not``, or
  ``R.astype`` first.
* ``sign`` (-1, 0, 1; NaN stays NaN as numpy's, where TVM 0.27 gives 0),
  ``square``, ``trunc`` (identity on integers): any numeric dtype, not bool.
* ``isfinite``, ``isinf``, ``isnan``: a bool result; always finite / never
  inf or NaN for integers.
* ``bitwise_not``: integers and bool.
* ``clip(x, min, max)``: numpy.clip, result in x's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, PrimExpr, Select
from phasec.op._common import REQUIRED, OpPattern, as_float, attrs_of, define, err, tensor_arg
from phasec.op._elementwise import bool_interval, kind_check, np_result, on_device
from phasec.op._lowering import (
    Inputs, LegalizeFn, _attrs, _const, _float, _name, _out, _tensor, legalizes,
)
from phasec.op.draw import (
    ANY_DTYPE, FLOAT, FLOATS, NUMBERS, Elementwise, Hooks, declares_draw, monotone,
)
from phasec.ir.text import expr_to_str
from phasec.op.infer import arg_sinfo
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["UNARY", "MATH_UNARY", "STOP_FUSION_PACKED", "float_unary", "any_unary",
           "unary_reference", "unary_kernel", "np_erf", "np_sigmoid"]


def float_unary(call, ctx) -> TensorStructInfo:
    """Inference of a unary operator on float tensors: the operand's struct info."""
    x = tensor_arg(call, 0, ctx)
    if x.dtype != "void" and not x.dtype.startswith("float"):
        raise err(call, f"{call.op.name.removeprefix('relax.')} requires the input tensor to have "
                        f"a float dtype, but {_arg(call)} has dtype {x.dtype}")
    return _same(x)


def any_unary(call, ctx) -> TensorStructInfo:
    """Inference of a unary operator on any tensor: the operand's struct info."""
    return _same(tensor_arg(call, 0, ctx))


def _arg(call) -> str:
    return expr_to_str(call.args[0])


def _same(x: TensorStructInfo) -> TensorStructInfo:
    # the operand's struct info, on its virtual device (as TVM 0.27's InferTypeUnary)
    return x if x.span is None else TensorStructInfo(x.shape, x.dtype, x.ndim, vdevice=x.vdevice)


def unary_reference(fn, *, via_float64: bool = False):
    """The numpy reference of a unary operator computing ``fn`` (in float64
    with ``via_float64``), its result in the operand's dtype."""
    def ref(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            if via_float64:
                return np_result(fn(x.astype(np.float64)), x.dtype)
            return np_result(fn(x), x.dtype)
    return ref


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def np_erf(x: np.ndarray) -> np.ndarray:
    """numpy's missing erf (math.erf on each element), in float64."""
    return _erf_vec(x) if x.size else x.astype(np.float64)


def np_sigmoid(x):
    """The logistic function on a numpy array."""
    return 1.0 / (1.0 + np.exp(-x))


#: name -> (numpy implementation, needs float dtype, compute in float64)
UNARY = {
    "negative": (np.negative, False, False),
    "abs": (np.abs, False, False),
    "exp": (np.exp, True, False),
    "log": (np.log, True, False),
    "sqrt": (np.sqrt, True, False),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), True, True),
    "tanh": (np.tanh, True, False),
    "sigmoid": (np_sigmoid, True, True),
    "erf": (np_erf, True, True),
    "floor": (np.floor, False, False),
    "ceil": (np.ceil, False, False),
    "round": (np.round, False, False),
    "logical_not": (np.logical_not, False, False),
}

for _opname, (_fn, _needs_float, _f64) in UNARY.items():
    define(_opname, ("x",), float_unary if _needs_float else any_unary,
           reference=unary_reference(_fn, via_float64=_f64), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_opname}.")


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
    if len(call.args) != 1:
        raise err(call, f"R.stop_fusion expects 1 operand, got {len(call.args)}")
    return arg_sinfo(call.args[0], ctx)


# ---------------------------------------------------------------------------
# clip
# ---------------------------------------------------------------------------

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
# TVM 0.27's other unary operators: trigonometry, sign, square, trunc, class tests, bitwise_not
# ---------------------------------------------------------------------------

def _unary_infer(kind: str, out_dtype: str | None = None):
    def infer(call, ctx):
        x = tensor_arg(call, 0, ctx)
        kind_check(call, x, kind)
        return on_device(x, out_dtype)
    return infer


def _ref_unary(fn, out=None):
    def ref(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x)).astype(out or x.dtype)
    return ref


def _sign_ref(x):
    return np.sign(x)


def _trunc_ref(x):
    return np.trunc(x) if x.dtype.kind == "f" else x


#: name -> (dtype kind, numpy implementation, bool result)
MATH_UNARY = {
    "acos": ("float", np.arccos, False), "acosh": ("float", np.arccosh, False),
    "asin": ("float", np.arcsin, False), "asinh": ("float", np.arcsinh, False),
    "atan": ("float", np.arctan, False), "atanh": ("float", np.arctanh, False),
    "cos": ("float", np.cos, False), "cosh": ("float", np.cosh, False),
    "sin": ("float", np.sin, False), "sinh": ("float", np.sinh, False),
    "tan": ("float", np.tan, False),
    "sign": ("numeric", _sign_ref, False), "square": ("numeric", np.square, False),
    "trunc": ("numeric", _trunc_ref, False),
    "isfinite": ("any", np.isfinite, True), "isinf": ("any", np.isinf, True),
    "isnan": ("any", np.isnan, True),
    "bitwise_not": ("intbool", np.invert, False),
}

def _infer_class_test(call, ctx):
    return on_device(tensor_arg(call, 0, ctx), "bool")


for _n, (_kind, _fn, _bool) in MATH_UNARY.items():
    define(_n, ("x",), _infer_class_test if _kind == "any" else _unary_infer(_kind),
           reference=_ref_unary(_fn, "bool" if _bool else None), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_n} (numpy).")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

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
    "stop_fusion": lambda x: x,
}


def unary_kernel(fn: Callable[[PrimExpr], PrimExpr]) -> LegalizeFn:
    """The TE definition of a unary elementwise operator: ``fn`` on each element,
    converted to the result's dtype."""
    def legalize(call: Call, inputs: Inputs) -> Tensor:
        x = _tensor(inputs, 0, call)
        out = _out(call)
        return te.compute(out.shape, lambda *i: te.cast(fn(x[i]), out.dtype), name=_name(call))
    return legalize


for _n, _fn in _UNARY.items():
    legalizes(_n)(unary_kernel(_fn))


def _unary_tir(name: str, x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    if name in ("isfinite", "isinf", "isnan"):
        if not tir.is_float(dt):
            return te.const(name == "isfinite", "bool")
        return te.call(name, x)
    if name == "sign":
        zero = _const(0, dt)
        pos = Select(BinaryOp(">", x, zero), _const(1, dt), zero)
        neg = Select(BinaryOp("<", x, zero), _const(-1, dt), pos)
        return neg if not tir.is_float(dt) else Select(te.call("isnan", x), x, neg)
    if name == "square":
        return BinaryOp("*", x, x)
    if name == "trunc":
        return te.call("trunc", x) if tir.is_float(dt) else x
    if name == "bitwise_not":
        return tir.Call("bitwise_not", (x,), dt)
    return te.call(name, x)  # the float math intrinsics (sin, cos: LLVM's; the rest: libm)


def _unary_legalize(name: str):
    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        return te.compute(out.shape, lambda *i: _unary_tir(name, x[i]), name=_name(call))
    return legalize


for _n in MATH_UNARY:
    legalizes(_n)(_unary_legalize(_n))


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


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (interval rules, phasec.op.draw)
# ---------------------------------------------------------------------------

def _sigmoid_scalar(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def _exp_iv(iv):
    return monotone(math.exp)(iv) if iv[1] <= 4.0 else None  # keep results small


def _abs_iv(iv):
    lo, hi = iv
    return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def _rounding_iv(iv):
    return math.floor(iv[0]), math.ceil(iv[1])


#: name -> (order, interval rule, operand dtypes, result "bool" or None); the
#: order is the operator's place among the simplest (R.add first).
_UNARY_DRAWS = {
    "negative": (3, lambda iv: (-iv[1], -iv[0]), NUMBERS, None),
    "exp": (4, _exp_iv, FLOATS, None),
    "tanh": (6, monotone(math.tanh), FLOATS, None),
    "abs": (12, _abs_iv, NUMBERS, None),
    "sigmoid": (13, monotone(_sigmoid_scalar), FLOATS, None),
    "log": (14, lambda iv: monotone(math.log)(iv) if iv[0] >= 0.05 else None, FLOATS, None),
    "sqrt": (15, lambda iv: monotone(math.sqrt)(iv) if iv[0] >= 0.0 else None, FLOATS, None),
    "rsqrt": (16, lambda iv: ((1 / math.sqrt(iv[1]), 1 / math.sqrt(iv[0])) if iv[0] >= 0.05
                              else None), FLOATS, None),
    "erf": (17, monotone(math.erf), FLOATS, None),
    "floor": (21, _rounding_iv, FLOATS, None),
    "ceil": (22, _rounding_iv, FLOATS, None),
    "round": (23, _rounding_iv, FLOATS, None),
    "stop_fusion": (24, lambda iv: iv, ANY_DTYPE, None),
    "logical_not": (36, bool_interval, ("bool",), "bool"),
}
for _opname, (_order, _iv, _dtypes, _result) in _UNARY_DRAWS.items():
    declares_draw(_opname, Elementwise(_iv, 1, _dtypes, _result, order=_order))


# clip (phasec.op.draw.Hooks)

_CLIP_BOUNDS = ((-1.0, 1.0), (0.0, 1.0), (-0.5, 2.0), (0.0, 6.0))


def _clip_build(g, x):

    lo, hi = g.pick(list(_CLIP_BOUNDS))
    iv = (min(max(x.lo, lo), hi), min(max(x.hi, lo), hi))
    return g.emit(call_op("relax.clip", x.expr, min=lo, max=hi), FLOAT, iv)


declares_draw("clip", Hooks(_clip_build, (FLOAT,), order=25))
