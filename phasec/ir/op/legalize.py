"""Legalization: every compute operator as a tensor expression, and the
drivers that turn one operator call, or one fused group, into a PrimFunc.

:data:`LEGALIZE` maps an operator name (``"relax.add"``) to a function
``legalize(call, inputs) -> te.Tensor | list[te.Tensor]``; ``inputs[i]``
corresponds to ``call.args[i]``: a :class:`~phasec.ir.te.Tensor` for a tensor
operand, a list of Tensors for a tuple operand (``concat``), or the Relax
expression itself for anything else (shapes, prim values). Attributes are
read with defaults filled in; result shapes and dtypes come from
``call.struct_info``.

Drivers:

* :func:`lower_call` / :func:`legalize_call` — one operator call.
* :func:`lower_fused` / :func:`legalize_fused` — a ``Primitive`` function
  produced by FuseOps: one PrimFunc in which injective operators are inlined
  into their consumers and a reduction anchor (matmul, conv2d, sum...) is
  computed together with its elementwise epilogue (see :mod:`phasec.ir.te`
  for the difference between inlining and fusion).

**PrimFunc calling convention** (what ``call_tir`` passes): the input buffers
(one per tensor operand, in operand order, tuple operands flattened; 0-d
constants are folded into the kernel instead), then the output buffers
(several for a tuple result, e.g. ``split``), then one int64 scalar
parameter per symbolic dimension that no input buffer binds as a bare
dimension (e.g. the ``n`` of ``R.zeros(R.shape([n, 4]))``), passed through
``call_tir``'s ``tir_vars``. :class:`LoweredCall` lists exactly these: the
Relax operands for the input buffers and the Relax-level values for the
scalar parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import PhasecError
from .. import arith, te, tir
from ..expr import (
    Call, Constant, Expr, Function, MatchCast, Op, PrimValue, SeqExpr, Tuple, TupleGetItem, Var,
    VarBinding,
)
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..te import Tensor
from ..tir import BinaryOp, Cast, IntImm, PrimExpr, PrimFunc, Select

__all__ = ["LEGALIZE", "LEGALIZE_RELAX", "legalizes", "legalizes_to_relax", "LegalizeError", "LoweredCall", "lower_call", "legalize_call",
           "lower_fused", "legalize_fused", "has_legalization"]


class LegalizeError(PhasecError):
    """An operator call cannot be lowered to TIR (unknown shape, unsupported op...)."""


Inputs = Sequence[Any]
LegalizeFn = Callable[[Call, Inputs], "Tensor | list[Tensor]"]

#: op name -> TE definition
LEGALIZE: dict[str, LegalizeFn] = {}


def _register(*names: str) -> Callable[[LegalizeFn], LegalizeFn]:
    def wrap(fn: LegalizeFn) -> LegalizeFn:
        for n in names:
            LEGALIZE["relax." + n] = fn
        return fn
    return wrap


def legalizes(*names: str) -> Callable[[LegalizeFn], LegalizeFn]:
    """Register the decorated TE definition as the legalization of ``relax.<name>`` for each name.

    Family modules use it to keep an operator's legalization beside its
    definition: ``@legalizes("flip")`` above ``def _flip(call, inputs)``.
    """
    return _register(*names)


#: op name -> ``fn(call) -> Expr``: operators that lower to a Relax expression
#: instead of a kernel (a VM builtin or a packed call: shape_of, print...).
#: ``call`` carries its struct info; the result must be valid in the lowering
#: phase (call_pure_packed, an ExternFunc call...).
LEGALIZE_RELAX: dict[str, Callable[[Call], Expr]] = {}


def legalizes_to_relax(*names: str) -> Callable[[Callable[[Call], Expr]], Callable[[Call], Expr]]:
    """Register the decorated ``fn(call) -> Expr`` as the Relax-level lowering
    of ``relax.<name>`` for each name (LegalizeOps uses it instead of a kernel)."""
    def wrap(fn: Callable[[Call], Expr]) -> Callable[[Call], Expr]:
        for n in names:
            LEGALIZE_RELAX["relax." + n] = fn
        return fn
    return wrap


def has_legalization(op_name: str) -> bool:
    """True when ``op_name`` (``relax.add`` or ``R.add``) has a TE definition
    or a Relax-level lowering."""
    if op_name.startswith("R."):
        op_name = "relax." + op_name[2:]
    return op_name in LEGALIZE or op_name in LEGALIZE_RELAX


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

I64 = "int64"


def _i64(v: int) -> IntImm:
    return IntImm(int(v), I64)


def _op_name(call: Call) -> str:
    return call.op.name if isinstance(call.op, Op) else "<call>"


def _script(call: Call) -> str:
    return "R." + _op_name(call).removeprefix("relax.")


def _attrs(call: Call) -> dict[str, Any]:
    from ._common import attrs_of
    return attrs_of(call)


def _out(call: Call, index: int | None = None) -> TensorStructInfo:
    sinfo = call.struct_info
    if sinfo is None:
        from ..infer import infer_struct_info
        sinfo = infer_struct_info(call)
    if index is not None:
        if not isinstance(sinfo, TupleStructInfo):
            raise LegalizeError(f"{_script(call)}: expected a tuple result")
        sinfo = sinfo.fields[index]
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype == "void":
        raise LegalizeError(
            f"cannot legalize {_script(call)}: its result needs a known shape and dtype "
            "(symbolic dimensions are fine), but struct info inference could not determine "
            "them; add a match_cast to give the operands known shapes")
    return sinfo


def _name(call: Call) -> str:
    return "T_" + _op_name(call).removeprefix("relax.").removeprefix("nn.")


def _static(e: PrimExpr) -> int | None:
    return arith.const_int(e)


def _is_one(e: PrimExpr) -> bool:
    return _static(e) == 1


def _bcast(t: Tensor, out_shape: Sequence[PrimExpr], idx: Sequence[PrimExpr]) -> Any:
    """Load ``t`` at the output index ``idx`` with numpy broadcasting."""
    off = len(out_shape) - t.ndim
    ind = []
    for d in range(t.ndim):
        if _is_one(t.shape[d]) and not _is_one(out_shape[off + d]):
            ind.append(_i64(0))
        else:
            ind.append(idx[off + d])
    return t[tuple(ind)]


def _const(value: Any, dtype: str) -> PrimExpr:
    return te.const(value, dtype)


def _float(dtype: str) -> bool:
    return tir.is_float(dtype)


def _clamp(i: PrimExpr, hi: PrimExpr) -> PrimExpr:
    """``i`` clamped to ``[0, hi - 1]`` (so a load stays in bounds when a Select
    evaluates both branches)."""
    upper = arith.simplify(BinaryOp("-", hi, _i64(1)))
    return BinaryOp("max", BinaryOp("min", i, upper), _i64(0))


def _norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def _prod(dims: Sequence[PrimExpr]) -> PrimExpr:
    acc: PrimExpr = _i64(1)
    for d in dims:
        acc = BinaryOp("*", acc, d)
    return arith.simplify(acc)


def _count(count: PrimExpr, dtype: str) -> PrimExpr:
    """An element count as a value of ``dtype`` (an immediate when static)."""
    c = _static(count)
    return _const(c, dtype) if c is not None else Cast(dtype, count)


def _tensor(inputs: Inputs, i: int, call: Call) -> Tensor:
    t = inputs[i]
    if not isinstance(t, Tensor):
        raise LegalizeError(f"{_script(call)}: operand {i} must be a tensor")
    return t


# --------------------------------------------------------------------------
# Elementwise binary ops and comparisons
# --------------------------------------------------------------------------

def _safe_div(a: PrimExpr, b: PrimExpr, op: str) -> PrimExpr:
    """Integer division that yields 0 for a zero divisor (as the reference)
    without ever dividing by zero (both Select branches may be evaluated)."""
    zero = _const(0, a.dtype)
    safe_b = Select(BinaryOp("==", b, zero), _const(1, b.dtype), b)
    return Select(BinaryOp("==", b, zero), zero, BinaryOp(op, a, safe_b))


def _divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return BinaryOp("/", a, b)
    return _safe_div(a, b, "/")  # TIR integer "/" truncates toward zero


def _floor_divide(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
    if _float(dtype):
        return te.call("floor", BinaryOp("/", a, b))
    return _safe_div(a, b, "//")


def _power(a: PrimExpr, b: PrimExpr, dtype: str) -> PrimExpr:
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
    "power": _power,
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
        a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
        out = _out(call)
        shape = out.shape
        return te.compute(shape, lambda *i: fn(_bcast(a, shape, i), _bcast(b, shape, i),
                                               out.dtype), name=_name(call))
    return legalize


for _n in _BINARY:
    LEGALIZE["relax." + _n] = _make_binary(_n)


# --------------------------------------------------------------------------
# Unary
# --------------------------------------------------------------------------

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _negative(x: PrimExpr) -> PrimExpr:
    if _float(x.dtype):
        return BinaryOp("*", x, _const(-1.0, x.dtype))  # exact, keeps the sign of zero
    return BinaryOp("-", _const(0, x.dtype), x)


def _abs(x: PrimExpr) -> PrimExpr:
    if _float(x.dtype):
        return te.call("fabs", x)
    if x.dtype.startswith("uint") or tir.is_bool(x.dtype):
        return x
    return Select(BinaryOp("<", x, _const(0, x.dtype)), _negative(x), x)


def _float_only(name: str) -> Callable[[PrimExpr], PrimExpr]:
    return lambda x: te.call(name, x)


def _int_identity(name: str) -> Callable[[PrimExpr], PrimExpr]:
    return lambda x: te.call(name, x) if _float(x.dtype) else x


def _gelu(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    half = _const(0.5, dt)
    erf = te.call("erf", BinaryOp("*", x, _const(_SQRT1_2, dt)))
    return BinaryOp("*", BinaryOp("*", half, x), BinaryOp("+", _const(1.0, dt), erf))


def _gelu_tanh(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    cube = BinaryOp("*", BinaryOp("*", x, x), x)
    inner = BinaryOp("*", _const(_SQRT_2_PI, dt),
                     BinaryOp("+", x, BinaryOp("*", _const(0.044715, dt), cube)))
    return BinaryOp("*", BinaryOp("*", _const(0.5, dt), x),
                    BinaryOp("+", _const(1.0, dt), te.call("tanh", inner)))


_UNARY: dict[str, Callable[[PrimExpr], PrimExpr]] = {
    "negative": _negative,
    "abs": _abs,
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
    "nn.gelu": _gelu,
    "nn.gelu_tanh": _gelu_tanh,
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


@_register("astype")
def _astype(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    if tir.is_bool(out.dtype) and not tir.is_bool(x.dtype):
        return te.compute(out.shape, lambda *i: BinaryOp("!=", x[i], _const(0, x.dtype)),
                          name=_name(call))
    return te.compute(out.shape, lambda *i: te.cast(x[i], out.dtype), name=_name(call))


@_register("clip")
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


@_register("where")
def _where(call: Call, inputs: Inputs) -> Tensor:
    c, a, b = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    shape = out.shape
    return te.compute(shape, lambda *i: Select(_truthy(_bcast(c, shape, i)), _bcast(a, shape, i),
                                               _bcast(b, shape, i)), name=_name(call))


# --------------------------------------------------------------------------
# Creation
# --------------------------------------------------------------------------

def _fill(value: Any) -> LegalizeFn:
    def legalize(call: Call, inputs: Inputs) -> Tensor:
        out = _out(call)
        return te.compute(out.shape, lambda *i: _const(value, out.dtype), name=_name(call))
    return legalize


for _n, _v in (("zeros", 0), ("ones", 1), ("zeros_like", 0), ("ones_like", 1)):
    LEGALIZE["relax." + _n] = _fill(_v)


@_register("full")
def _full(call: Call, inputs: Inputs) -> Tensor:
    out = _out(call)
    fill = inputs[1]
    if isinstance(fill, Tensor):
        if fill.ndim != 0:
            raise LegalizeError(f"{_script(call)}: the fill value must be a 0-d tensor")
        return te.compute(out.shape, lambda *i: te.cast(fill[()], out.dtype), name=_name(call))
    if isinstance(fill, PrimValue):
        value = fill.value
        return te.compute(out.shape, lambda *i: te.cast(value, out.dtype), name=_name(call))
    raise LegalizeError(f"{_script(call)}: unsupported fill value")


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

def _reduce_axes(call: Call, ndim: int) -> list[int]:
    axis = _attrs(call)["axis"]
    if axis is None:
        return list(range(ndim))
    return sorted(_norm_axis(a, ndim) for a in axis)


def _reduction(x: Tensor, axes: Sequence[int], keepdims: bool, out_shape: Sequence[PrimExpr],
               combiner: Callable[..., Any], name: str,
               value: Callable[[PrimExpr], PrimExpr] = lambda v: v) -> Tensor:
    """``combiner(value(x[...]))`` over ``axes`` of ``x`` with output ``out_shape``."""
    axes = list(axes)
    if not axes:
        return te.compute(out_shape, lambda *i: value(x[i]), name=name)
    rks = [te.reduce_axis(x.shape[a], f"k{a}") for a in axes]

    def body(*i: PrimExpr) -> Any:
        ind: list[Any] = []
        pos = 0
        rk = iter(rks)
        for d in range(x.ndim):
            if d in axes:
                ind.append(next(rk).var)
                if keepdims:
                    pos += 1
            else:
                ind.append(i[pos])
                pos += 1
        return combiner(value(x[tuple(ind)]), axis=rks)
    return te.compute(out_shape, body, name=name)


def _make_reduce(kind: str) -> LegalizeFn:
    combiner = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[kind]

    def legalize(call: Call, inputs: Inputs) -> Tensor:
        x = _tensor(inputs, 0, call)
        out = _out(call)
        axes = _reduce_axes(call, x.ndim)
        keep = _attrs(call)["keepdims"]
        if tir.is_bool(x.dtype):
            # bool: sum/max = any, prod/min = all; accumulate 0/1 in int64 (bool
            # arithmetic would wrap: true + true is false in one bit)
            r = _reduction(x, axes, keep, out.shape, combiner, _name(call) + "_i64",
                           lambda v: te.cast(v, I64))
            return te.compute(out.shape, lambda *i: BinaryOp("!=", r[i], _i64(0)),
                              name=_name(call))
        return _reduction(x, axes, keep, out.shape, combiner, _name(call))
    return legalize


for _n in ("sum", "max", "min", "prod"):
    LEGALIZE["relax." + _n] = _make_reduce(_n)


@_register("mean")
def _mean(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axes = _reduce_axes(call, x.ndim)
    keep = _attrs(call)["keepdims"]
    count = _prod([x.shape[a] for a in axes])
    dt = out.dtype
    if _float(dt):
        s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum")
        return te.compute(out.shape, lambda *i: BinaryOp("/", s[i], _count(count, dt)),
                          name=_name(call))
    # Integers: sum in int64, divide truncating toward zero (the reference's rule).
    s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum",
                   lambda v: te.cast(v, "int64"))
    return te.compute(out.shape, lambda *i: te.cast(_safe_div(s[i], count, "/"), dt),
                      name=_name(call))


# --------------------------------------------------------------------------
# softmax, log_softmax, layer_norm, rms_norm
# --------------------------------------------------------------------------

def _drop(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(v for d, v in enumerate(i) if d not in axes)


def _softmax_parts(x: Tensor, ax: int, prefix: str) -> tuple[Tensor, Tensor, Tensor]:
    red_shape = _drop(x.shape, [ax])
    mx = _reduction(x, [ax], False, red_shape, te.max, prefix + "_maxelem")
    shifted = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mx[_drop(i, [ax])]),
                         name=prefix + "_shifted")
    s = _reduction(shifted, [ax], False, red_shape, te.sum, prefix + "_expsum",
                   lambda v: te.call("exp", v))
    return mx, shifted, s


@_register("nn.softmax")
def _softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    if ax != x.ndim - 1 or x.ndim < 2:
        _, shifted, s = _softmax_parts(x, ax, "T_softmax")
        return te.compute(x.shape, lambda *i: BinaryOp("/", te.call("exp", shifted[i]),
                                                       s[_drop(i, [ax])]), name="T_softmax")
    # Softmax over rows: exp(x - max) is computed once per element, into a
    # row buffer that both the sum and the division read (te.ROW_LOCAL),
    # instead of once in each.
    red_shape = _drop(x.shape, [ax])
    mx = _reduction(x, [ax], False, red_shape, te.max, "T_softmax_maxelem")
    e = te.compute(x.shape, lambda *i: te.call("exp", BinaryOp("-", x[i], mx[_drop(i, [ax])])),
                   name="T_softmax_exp", attrs={te.ROW_LOCAL: True})
    s = _reduction(e, [ax], False, red_shape, te.sum, "T_softmax_expsum")
    return te.compute(x.shape, lambda *i: BinaryOp("/", e[i], s[_drop(i, [ax])]),
                      name="T_softmax")


@_register("nn.log_softmax")
def _log_softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    _, shifted, s = _softmax_parts(x, ax, "T_log_softmax")
    return te.compute(x.shape, lambda *i: BinaryOp("-", shifted[i],
                                                   te.call("log", s[_drop(i, [ax])])),
                      name="T_log_softmax")


def _param_index(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(i[a] for a in axes)


def _mean_over(x: Tensor, axes: list[int], name: str,
               value: Callable[[PrimExpr], PrimExpr] = lambda v: v) -> Tensor:
    red_shape = _drop(x.shape, axes)
    s = _reduction(x, axes, False, red_shape, te.sum, name + "_sum", value)
    count = _count(_prod([x.shape[a] for a in axes]), x.dtype)
    return te.compute(red_shape, lambda *i: BinaryOp("/", s[i], count), name=name)


@_register("nn.layer_norm")
def _layer_norm(call: Call, inputs: Inputs) -> Tensor:
    x, gamma, beta = (_tensor(inputs, k, call) for k in range(3))
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    dt = x.dtype
    eps = _const(a["epsilon"], dt)
    mean = _mean_over(x, axes, "T_layer_norm_mean")
    diff = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mean[_drop(i, axes)]),
                      name="T_layer_norm_diff")
    var = _mean_over(diff, axes, "T_layer_norm_var", lambda v: BinaryOp("*", v, v))

    def body(*i: PrimExpr) -> PrimExpr:
        v = BinaryOp("/", diff[i], te.call("sqrt", BinaryOp("+", var[_drop(i, axes)], eps)))
        if a["scale"]:
            v = BinaryOp("*", v, gamma[_param_index(i, axes)])
        if a["center"]:
            v = BinaryOp("+", v, beta[_param_index(i, axes)])
        return v
    return te.compute(x.shape, body, name="T_layer_norm")


@_register("nn.rms_norm")
def _rms_norm(call: Call, inputs: Inputs) -> Tensor:
    x, weight = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    eps = _const(a["epsilon"], x.dtype)
    ms = _mean_over(x, axes, "T_rms_norm_ms", lambda v: BinaryOp("*", v, v))
    return te.compute(x.shape, lambda *i: BinaryOp(
        "*", BinaryOp("/", x[i], te.call("sqrt", BinaryOp("+", ms[_drop(i, axes)], eps))),
        weight[_param_index(i, axes)]), name="T_rms_norm")


# --------------------------------------------------------------------------
# matmul, conv2d, pooling
# --------------------------------------------------------------------------

@_register("matmul")
def _matmul(call: Call, inputs: Inputs) -> Tensor:
    a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    dt = out.dtype
    k = te.reduce_axis(a.shape[-1], "k")
    a_mat, b_mat = a.ndim > 1, b.ndim > 1
    out_nd = len(out.shape)
    n_batch = out_nd - int(a_mat) - int(b_mat)
    batch_shape = out.shape[:n_batch]

    def batch_index(t: Tensor, i: Sequence[PrimExpr]) -> list[PrimExpr]:
        tb = t.shape[:-2]
        off = n_batch - len(tb)
        return [(_i64(0) if _is_one(tb[d]) and not _is_one(batch_shape[off + d])
                 else i[off + d]) for d in range(len(tb))]

    def body(*i: PrimExpr) -> Any:
        batch = i[:n_batch]
        ai = (batch_index(a, batch) + [i[n_batch], k.var]) if a_mat else [k.var]
        bi = (batch_index(b, batch) + [k.var, i[-1]]) if b_mat else [k.var]
        return te.sum(BinaryOp("*", te.cast(a[tuple(ai)], dt), te.cast(b[tuple(bi)], dt)),
                      axis=[k])
    return te.compute(out.shape, body, name="T_matmul", tag="matmul")


def _pool_window(call: Call, x: Tensor):
    a = _attrs(call)
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    pt, pl, pb, pr = a["padding"]
    ry = te.reduce_axis(kh, "ry")
    rx = te.reduce_axis(kw, "rx")
    h, w = x.shape[2], x.shape[3]

    def coords(y: PrimExpr, xx: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        row = BinaryOp("+", BinaryOp("-", BinaryOp("*", y, _i64(sh)), _i64(pt)),
                       BinaryOp("*", ry.var, _i64(dh)))
        col = BinaryOp("+", BinaryOp("-", BinaryOp("*", xx, _i64(sw)), _i64(pl)),
                       BinaryOp("*", rx.var, _i64(dw)))
        return row, col

    def inside(row: PrimExpr, col: PrimExpr, lo_h: int, hi_h: PrimExpr, lo_w: int,
               hi_w: PrimExpr) -> PrimExpr:
        return BinaryOp("and",
                        BinaryOp("and", BinaryOp(">=", row, _i64(lo_h)), BinaryOp("<", row, hi_h)),
                        BinaryOp("and", BinaryOp(">=", col, _i64(lo_w)), BinaryOp("<", col, hi_w)))
    return a, ry, rx, h, w, coords, inside, (pt, pl, pb, pr)


@_register("nn.max_pool2d")
def _max_pool2d(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a, ry, rx, h, w, coords, inside, _ = _pool_window(call, x)
    low = te.min_value(x.dtype)

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row, col = coords(y, xx)
        v = Select(inside(row, col, 0, h, 0, w), x[n, c, _clamp(row, h), _clamp(col, w)], low)
        return te.max(v, axis=[ry, rx])
    return te.compute(out.shape, body, name="T_max_pool2d")


@_register("nn.avg_pool2d")
def _avg_pool2d(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a, ry, rx, h, w, coords, inside, (pt, pl, pb, pr) = _pool_window(call, x)
    dt = x.dtype
    acc = dt if _float(dt) else "int64"

    def total(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row, col = coords(y, xx)
        v = Select(inside(row, col, 0, h, 0, w),
                   te.cast(x[n, c, _clamp(row, h), _clamp(col, w)], acc), _const(0, acc))
        return te.sum(v, axis=[ry, rx])
    s = te.compute(out.shape, total, name="T_avg_pool2d_sum")
    ry2 = te.reduce_axis(ry.extent, "ry")
    rx2 = te.reduce_axis(rx.extent, "rx")

    def count(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row = BinaryOp("+", BinaryOp("-", BinaryOp("*", y, _i64(a["strides"][0])), _i64(pt)),
                       BinaryOp("*", ry2.var, _i64(a["dilation"][0])))
        col = BinaryOp("+", BinaryOp("-", BinaryOp("*", xx, _i64(a["strides"][1])), _i64(pl)),
                       BinaryOp("*", rx2.var, _i64(a["dilation"][1])))
        if a["count_include_pad"]:
            cond = inside(row, col, -pt, arith.simplify(h + _i64(pb)), -pl,
                          arith.simplify(w + _i64(pr)))
        else:
            cond = inside(row, col, 0, h, 0, w)
        return te.sum(Select(cond, _i64(1), _i64(0)), axis=[ry2, rx2])
    cnt = te.compute(out.shape, count, name="T_avg_pool2d_count")

    def body(*i: PrimExpr) -> PrimExpr:
        c = BinaryOp("max", cnt[i], _i64(1))
        if _float(dt):
            return BinaryOp("/", s[i], Cast(dt, c))
        return te.cast(BinaryOp("//", s[i], c), dt)
    return te.compute(out.shape, body, name="T_avg_pool2d")


# --------------------------------------------------------------------------
# Shape manipulation and indexing
# --------------------------------------------------------------------------

def _strides(shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    acc: PrimExpr = _i64(1)
    for d in reversed(shape):
        out.append(acc)
        acc = arith.simplify(BinaryOp("*", acc, d))
    return list(reversed(out))


def _flat_index(i: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    flat: PrimExpr = _i64(0)
    for v, s in zip(i, _strides(shape)):
        term = v if _static(s) == 1 else BinaryOp("*", v, s)
        flat = term if _static(flat) == 0 else BinaryOp("+", flat, term)
    return flat


def _unravel(flat: PrimExpr, shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    out = []
    strides = _strides(shape)
    for d, (s, st) in enumerate(zip(shape, strides)):
        v = flat if _static(st) == 1 else BinaryOp("//", flat, st)
        if d > 0:
            v = BinaryOp("%", v, s)
        out.append(v)
    return out


def _reshape_index(i: Sequence[PrimExpr], out_shape: Sequence[PrimExpr],
                   in_shape: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """Index of the input element for output index ``i`` of a row-major reshape.

    A common prefix of equal dimensions is indexed directly; the rest goes
    through the flat index.
    """
    p = 0
    while (p < len(out_shape) and p < len(in_shape)
           and arith.prove_equal(out_shape[p], in_shape[p])):
        p += 1
    if p == len(out_shape) == len(in_shape):
        return tuple(i)
    flat = _flat_index(i[p:], out_shape[p:])
    return tuple(i[:p]) + tuple(_unravel(flat, in_shape[p:]))


@_register("reshape", "flatten")
def _reshape(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: x[_reshape_index(i, out.shape, x.shape)],
                      name=_name(call))


@_register("permute_dims")
def _permute_dims(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axes = _attrs(call)["axes"]
    order = list(range(x.ndim - 1, -1, -1)) if axes is None else [
        _norm_axis(v, x.ndim) for v in axes]

    def body(*i: PrimExpr) -> Any:
        ind: list[PrimExpr] = [_i64(0)] * x.ndim
        for j, src in enumerate(order):
            ind[src] = i[j]
        return x[tuple(ind)]
    return te.compute(out.shape, body, name=_name(call))


@_register("expand_dims")
def _expand_dims(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    new = {_norm_axis(v, len(out.shape)) for v in _attrs(call)["axis"]}
    return te.compute(out.shape, lambda *i: x[tuple(v for d, v in enumerate(i) if d not in new)],
                      name=_name(call))


@_register("squeeze")
def _squeeze(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axis = _attrs(call)["axis"]
    if axis is None:
        dropped = {d for d in range(x.ndim) if _is_one(x.shape[d])}
    else:
        dropped = {_norm_axis(v, x.ndim) for v in axis}

    def body(*i: PrimExpr) -> Any:
        it = iter(i)
        return x[tuple(_i64(0) if d in dropped else next(it) for d in range(x.ndim))]
    return te.compute(out.shape, body, name=_name(call))


@_register("broadcast_to")
def _broadcast_to(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: _bcast(x, out.shape, i), name=_name(call))


@_register("concat")
def _concat(call: Call, inputs: Inputs) -> Tensor:
    tensors = inputs[0]
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if not isinstance(tensors, list) or not tensors:
        raise LegalizeError(f"{_script(call)}: expects a tuple of tensors")
    out = _out(call)
    axis = _attrs(call)["axis"]
    if axis is None:
        flat = []
        for k, t in enumerate(tensors):
            size = _prod(t.shape)
            flat.append(te.compute((size,), lambda i, t=t: t[tuple(_unravel(i, t.shape))],
                                   name=f"T_concat_flat{k}"))
        tensors, ax = flat, 0
    else:
        ax = _norm_axis(axis, len(out.shape))
    parts = [t for t in tensors if _static(t.shape[ax]) != 0]
    if not parts:
        parts = tensors[:1]

    def body(*i: PrimExpr) -> PrimExpr:
        offsets: list[PrimExpr] = []
        off: PrimExpr = _i64(0)
        for t in parts:
            offsets.append(off)
            off = arith.simplify(BinaryOp("+", off, t.shape[ax]))

        def load(k: int) -> PrimExpr:
            t = parts[k]
            local = i[ax] if _static(offsets[k]) == 0 else BinaryOp("-", i[ax], offsets[k])
            if len(parts) > 1:
                local = _clamp(local, t.shape[ax])
            return t[tuple(local if d == ax else v for d, v in enumerate(i))]
        value = load(len(parts) - 1)
        for k in range(len(parts) - 2, -1, -1):
            value = Select(BinaryOp("<", i[ax], offsets[k + 1]), load(k), value)
        return value
    return te.compute(out.shape, body, name=_name(call))


@_register("split")
def _split(call: Call, inputs: Inputs) -> list[Tensor]:
    x = _tensor(inputs, 0, call)
    sinfo = call.struct_info
    if not isinstance(sinfo, TupleStructInfo):
        raise LegalizeError(f"{_script(call)}: expected a tuple result")
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    outs: list[Tensor] = []
    begin: PrimExpr = _i64(0)
    for k in range(len(sinfo.fields)):
        out = _out(call, k)

        def body(*i: PrimExpr, begin: PrimExpr = begin) -> Any:
            start = i[ax] if _static(begin) == 0 else BinaryOp("+", i[ax], begin)
            return x[tuple(start if d == ax else v for d, v in enumerate(i))]
        outs.append(te.compute(out.shape, body, name=f"T_split{k}"))
        begin = arith.simplify(BinaryOp("+", begin, out.shape[ax]))
    return outs


_END = (1 << 31) - 1


def _slice_start(dim: PrimExpr, b: int, e: int, s: int) -> PrimExpr:
    c = _static(dim)
    if c is not None:
        return _i64(range(*slice(b, e, s).indices(c)).start if c else 0)
    if s > 0:
        return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))
    if b >= _END:
        return arith.simplify(BinaryOp("-", dim, _i64(1)))
    return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))


@_register("strided_slice")
def _strided_slice(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    strides = a["strides"] or (1,) * len(a["axes"])
    spec = {}
    for axis, b, e, s in zip(a["axes"], a["begin"], a["end"], strides):
        d = _norm_axis(axis, x.ndim)
        spec[d] = (_slice_start(x.shape[d], b, e, s), s)

    def body(*i: PrimExpr) -> Any:
        ind = []
        for d, v in enumerate(i):
            if d in spec:
                start, s = spec[d]
                term = v if s == 1 else BinaryOp("*", v, _i64(s))
                ind.append(term if _static(start) == 0 else BinaryOp("+", start, term))
            else:
                ind.append(v)
        return x[tuple(ind)]
    return te.compute(out.shape, body, name=_name(call))


@_register("take")
def _take(call: Call, inputs: Inputs) -> Tensor:
    x, idx = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    axis = _attrs(call)["axis"]
    mode = _attrs(call).get("mode", "fast")

    def wrap(v: PrimExpr, dim: PrimExpr) -> PrimExpr:
        v = te.cast(v, I64)
        if mode == "clip":
            return _clamp(v, te.cast(dim, I64))
        if mode == "wrap":
            return BinaryOp("%", v, te.cast(dim, I64))  # floor modulo: always in [0, dim)
        # numpy's negative indices; anything out of range stops the kernel with an
        # IndexOutOfRangeError, as the reference does (never a clamp or a wild read)
        return tir.Call("checked_index", (v, dim), "int64")

    if axis is None:
        size = _prod(x.shape)
        return te.compute(out.shape, lambda *i: x[tuple(_unravel(wrap(idx[i], size), x.shape))],
                          name=_name(call))
    ax = _norm_axis(axis, x.ndim)
    k = idx.ndim

    def body(*i: PrimExpr) -> Any:
        pick = wrap(idx[tuple(i[ax:ax + k])], x.shape[ax])
        return x[tuple(i[:ax]) + (pick,) + tuple(i[ax + k:])]
    return te.compute(out.shape, body, name=_name(call))


# --------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class LoweredCall:
    """A PrimFunc plus what a ``call_tir`` to it passes.

    ``args``: one Relax expression per input buffer parameter, in order
    (operands of the call, or for a fused function its parameters and the
    non-scalar constants of its body; a field of a tuple-typed operand is a
    ``TupleGetItem``). ``tir_vars``: the Relax-level values (symbolic
    variables of the caller, or of the fused function) of the scalar
    parameters, in order; empty when there are none. ``out_sinfo``: the
    struct info of the result (a TupleStructInfo for several outputs).
    """

    prim_func: PrimFunc
    args: tuple[Expr, ...]
    tir_vars: tuple[PrimExpr, ...]
    out_sinfo: StructInfo


class _Inputs:
    """Placeholders for Relax operands (deduplicated by identity)."""

    def __init__(self) -> None:
        self.tensors: list[Tensor] = []
        self.args: list[Expr] = []
        self._by_id: dict[int, Tensor] = {}
        self._names: set[str] = set()

    def _fresh(self, hint: str) -> str:
        name, k = hint, 1
        while name in self._names:
            name, k = f"{hint}_{k}", k + 1
        self._names.add(name)
        return name

    def tensor(self, expr: Expr, hint: str) -> Tensor:
        if isinstance(expr, Constant) and expr.data.ndim == 0:
            value = expr.data.item()
            dtype = str(expr.data.dtype)
            return te.compute((), lambda: _const(value, dtype), name="T_const")
        t = self._by_id.get(id(expr))
        if t is not None:
            return t
        sinfo = expr.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype == "void":
            raise LegalizeError(
                f"cannot legalize: operand {hint} needs a tensor type with known shape and dtype "
                "(symbolic dimensions are fine)")
        t = te.placeholder(sinfo.shape, sinfo.dtype, self._fresh(hint))
        self._by_id[id(expr)] = t
        self.tensors.append(t)
        self.args.append(expr)
        return t


def _arg_hint(expr: Expr, default: str) -> str:
    if isinstance(expr, Var):
        return expr.name_hint
    if isinstance(expr, Constant):
        return "const"
    return default


def _operand(inputs: _Inputs, expr: Expr, pos: int) -> Any:
    if isinstance(expr, Tuple):
        return [_operand(inputs, f, pos) for f in expr.fields]
    sinfo = expr.struct_info
    if isinstance(sinfo, TensorStructInfo) or isinstance(expr, Constant):
        return inputs.tensor(expr, _arg_hint(expr, f"arg{pos}"))
    if isinstance(sinfo, TupleStructInfo):
        out = []
        for k, f in enumerate(sinfo.fields):
            item = TupleGetItem(expr, k)
            if not isinstance(f, TensorStructInfo):
                raise LegalizeError("cannot legalize: nested non-tensor tuple operand")
            out.append(inputs.tensor(item, f"{_arg_hint(expr, f'arg{pos}')}_{k}"))
        return out
    return expr


def _legalize_fn(call: Call) -> LegalizeFn:
    if not isinstance(call.op, Op):
        raise LegalizeError("cannot legalize a call whose callee is not an operator")
    fn = LEGALIZE.get(call.op.name)
    if fn is None:
        raise LegalizeError(f"operator {_script(call)} has no legalization to TIR")
    return fn


def _as_list(result: Tensor | list[Tensor]) -> list[Tensor]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _finish_outputs(outputs: list[Tensor]) -> list[Tensor]:
    """Every output a distinct compute (copies for inputs or repeated outputs)."""
    seen: set[int] = set()
    fixed = []
    for k, t in enumerate(outputs):
        if t.is_placeholder or id(t) in seen:
            src = t
            t = te.compute(src.shape, lambda *i, src=src: src[i], name=f"T_output{k}")
        seen.add(id(t))
        fixed.append(t)
    return fixed


def _build(inputs: _Inputs, outputs: list[Tensor], out_sinfo: StructInfo,
           schedule_hints: Any) -> LoweredCall:
    lowered = te.lower(inputs.tensors + _finish_outputs(outputs), schedule_hints)
    return LoweredCall(lowered.prim_func, tuple(inputs.args), lowered.scalar_params, out_sinfo)


def lower_call(call: Call, schedule_hints: Any = True) -> LoweredCall:
    """Lower one operator call to a PrimFunc and its ``call_tir`` operands."""
    fn = _legalize_fn(call)
    inputs = _Inputs()
    operands = [_operand(inputs, a, k) for k, a in enumerate(call.args)]
    outputs = _as_list(fn(call, operands))
    sinfo = call.struct_info
    if sinfo is None:
        from ..infer import infer_struct_info
        sinfo = infer_struct_info(call)
    return _build(inputs, outputs, sinfo, schedule_hints)


def legalize_call(call: Call, schedule_hints: Any = True) -> PrimFunc:
    """The PrimFunc computing one operator call (see the module docstring for
    its parameters)."""
    return lower_call(call, schedule_hints).prim_func


def lower_fused(func: Function, schedule_hints: Any = True) -> LoweredCall:
    """Lower a fused (``Primitive``) function to ONE PrimFunc.

    The body must be bindings of operator calls, tuples, tuple indexing and
    variable aliases over the parameters (and constants). ``args`` of the
    result are the parameters (tuple parameters as TupleGetItems) followed
    by the non-scalar constants used in the body.
    """
    if not isinstance(func, Function):
        raise LegalizeError(f"lower_fused expects a Relax Function, got {type(func).__name__}")
    inputs = _Inputs()
    env: dict[Var, Any] = {}
    for k, p in enumerate(func.params):
        env[p] = _operand(inputs, p, k)
    body = func.body
    if not isinstance(body, SeqExpr):
        raise LegalizeError("lower_fused: the function body must be a SeqExpr")

    def value_of(expr: Expr, where: str) -> Any:
        if isinstance(expr, Var):
            if expr not in env:
                raise LegalizeError(f"lower_fused: {expr.name_hint} is used before it is defined")
            return env[expr]
        if isinstance(expr, Constant):
            return inputs.tensor(expr, "const")
        if isinstance(expr, Tuple):
            return [value_of(f, where) for f in expr.fields]
        return expr  # shapes, prim values... (operands the TE definitions read directly)

    for block in body.blocks:
        for b in block.bindings:
            where = f"binding {b.var.name_hint}"
            value = b.value
            if isinstance(b, MatchCast) or (isinstance(b, VarBinding) and isinstance(value, Var)):
                env[b.var] = value_of(value, where)
            elif isinstance(value, Call):
                fn = _legalize_fn(value)
                operands = [value_of(a, where) for a in value.args]
                result = fn(value, operands)
                env[b.var] = list(result) if isinstance(result, (list, tuple)) else result
            elif isinstance(value, (Tuple, Constant)):
                env[b.var] = value_of(value, where)
            elif isinstance(value, TupleGetItem):
                tup = value_of(value.tuple_value, where)
                if not isinstance(tup, list):
                    raise LegalizeError(f"lower_fused: {where} indexes a non-tuple")
                env[b.var] = tup[value.index]
            else:
                raise LegalizeError(f"lower_fused: {where} is a {type(value).__name__}, which "
                                    "cannot be part of a fused kernel")
    result = value_of(body.body, "the result")
    outputs = result if isinstance(result, list) else [result]
    flat: list[Tensor] = []
    stack = list(reversed(outputs))
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, Tensor):
            flat.append(item)
        else:
            raise LegalizeError("lower_fused: the function must return tensors")
    sinfo = func.ret_struct_info or body.struct_info
    return _build(inputs, flat, sinfo, schedule_hints)


def legalize_fused(func: Function, schedule_hints: Any = True) -> PrimFunc:
    """One PrimFunc for a fused (``Primitive``) function; see :func:`lower_fused`."""
    return lower_fused(func, schedule_hints).prim_func
