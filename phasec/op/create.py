"""Tensor creation (TVM 0.27's ``relax.op.create``): zeros, ones, full,
zeros_like, ones_like, full_like, arange, tril, triu, eye, eye_like,
hamming_window; and the helpers of the operators with scalar (prim value)
operands (:func:`prim_operand`, :func:`prim_array`, :func:`prim_expr`).

Scalar operands are prim values (``R.prim_value(3)``; TVMScript also takes a
bare number for ``start``/``end``/``step``/``k``), as in TVM 0.27.

* ``arange(start, end, step, dtype)``: numpy.arange. The length is
  ``ceil((end - start) / step)`` (0 when negative); a symbolic integer
  ``end`` or ``start`` gives a symbolic length.
* ``full_like(x, fill_value, dtype="void")``: x's shape filled with a 0-d
  tensor's value, in ``dtype`` (void: x's dtype).
* ``tril(x, k)`` / ``triu(x, k)``: keep the elements on and below (above)
  the k-th diagonal of the last two axes, zero elsewhere (numpy.tril/triu).
* ``eye(n, m, k, dtype)`` / ``eye_like(x, k, dtype)``: ones on the k-th
  diagonal of an n x m matrix (numpy.eye).
* ``hamming_window(window_size, periodic, alpha, beta, dtype)``:
  ``alpha - beta * cos(2 pi n / D)`` with D = N (periodic) or N - 1, computed
  in float64 (torch.hamming_window; a window of 1 is [1]).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call, PrimValue, ShapeExpr
from phasec.ir.struct_info import PrimStructInfo, TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_dtype, attrs_of, define, err, shape_arg, shape_tuple, tensor_arg,
)
from phasec.op._lowering import (
    Inputs, LegalizeError, LegalizeFn, _const, _name, _out, _script, _tensor, legalizes,
)
from phasec.op.datatype import dtype_or_void, dtype_required, with_dtype
from phasec.op.draw import ANY_DTYPE, BOOL, FLOAT, INT, NUMBERS, Hooks, data_like, declares_draw
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["prim_operand", "prim_array", "prim_expr"]


def prim_operand(call, i: int, ctx, what: str) -> PrimStructInfo:
    """Operand ``i`` (``what``), which must be a scalar (R.prim_value)."""
    if len(call.args) <= i:
        raise err(call, f"{expr_to_str(call.op)} expects the operand {what!r}")
    s = arg_sinfo(call.args[i], ctx)
    if not isinstance(s, PrimStructInfo):
        raise err(call, f"{expr_to_str(call.op)} expects a scalar (R.prim_value) for {what}, but "
                        f"{expr_to_str(call.args[i])} has struct info {sinfo_to_str(s)}")
    return s


def prim_array(v) -> np.ndarray:
    """A prim-value operand as a 0-d array of its dtype: it should arrive as a
    numpy scalar of that dtype; plain Python scalars (what the interpreter
    passes) are read with the Relax defaults (int64, float32, bool)."""
    if isinstance(v, bool):
        return np.asarray(v, np.bool_)
    if isinstance(v, int):
        return np.asarray(v, np.int64)
    if isinstance(v, float):
        return np.asarray(v, np.float32)
    return np.asarray(v)


def _scalar(v) -> float | int | bool:
    """A runtime prim value (numpy scalar or Python number) as a Python number."""
    return np.asarray(v).item()


def prim_expr(value, call, what: str) -> PrimExpr:
    """The TIR value of a prim-value operand of a call being legalized."""
    if isinstance(value, PrimValue):
        return value.value
    raise LegalizeError(f"{_script(call)}: {what} must be an R.prim_value (its value is needed "
                        "to generate the kernel)")


# ---------------------------------------------------------------------------
# arange
# ---------------------------------------------------------------------------

def _infer_arange(call, ctx):
    dtype = attrs_of(call)["dtype"]
    vals = [prim_operand(call, i, ctx, w) for i, w in enumerate(("start", "end", "step"))]
    start, end, step = (v.value for v in vals)
    if any(v is None for v in (start, end, step)):
        return TensorStructInfo(None, dtype, 1)
    consts = [arith.const_int(v) if isinstance(v, tir.IntImm) else
              (v.value if isinstance(v, tir.FloatImm) else None) for v in (start, end, step)]
    if consts[2] == 0:
        raise err(call, "arange: step must not be zero")
    if all(c is not None for c in consts):
        n = max(0, math.ceil((consts[1] - consts[0]) / consts[2]))
        return TensorStructInfo((tir.IntImm(n),), dtype)
    if all(tir.is_int(v.dtype) for v in (start, end, step)) and consts[2] is not None:
        s = int(consts[2])
        span = BinaryOp("-", _i64(end), _i64(start))
        num = BinaryOp("//", BinaryOp("+", span, tir.IntImm(s - 1 if s > 0 else s + 1)),
                       tir.IntImm(s))
        return TensorStructInfo((arith.simplify(num),), dtype)
    return TensorStructInfo(None, dtype, 1)


def _i64(e: PrimExpr) -> PrimExpr:
    return e if e.dtype == "int64" else tir.Cast("int64", e)


def _arange_ref(start, end, step, dtype="int64"):
    return np.arange(_scalar(start), _scalar(end), _scalar(step)).astype(dtype)


define("arange", ("start", "end", "step"), _infer_arange,
       attrs={"dtype": ("int64", dtype_required)}, reference=_arange_ref,
       pattern=OpPattern.INJECTIVE, doc="numpy.arange(start, end, step) in ``dtype``.")


@legalizes("arange")
def _arange(call, inputs):
    out = _out(call)
    start = prim_expr(inputs[0], call, "start")
    step = prim_expr(inputs[2], call, "step")
    dt = out.dtype
    # numpy computes start + i * step in the arguments' type, then converts
    work = "float64" if (tir.is_float(start.dtype) or tir.is_float(step.dtype)) else "int64"
    return te.compute(out.shape, lambda i: te.cast(BinaryOp(
        "+", te.cast(start, work), BinaryOp("*", te.cast(i, work), te.cast(step, work))), dt),
        name="T_arange")


# ---------------------------------------------------------------------------
# full_like
# ---------------------------------------------------------------------------

def _infer_full_like(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if len(call.args) < 2:
        raise err(call, "full_like expects a tensor and a fill value")
    fill = arg_sinfo(call.args[1], ctx)
    # TVM 0.27 takes a 0-d tensor only (R.full takes a prim value too)
    if not isinstance(fill, TensorStructInfo) or fill.ndim not in (0, -1):
        raise err(call, f"full_like needs a 0-d tensor fill value (e.g. R.const(1.0)), but "
                        f"{expr_to_str(call.args[1])} has struct info {sinfo_to_str(fill)}")
    dtype = attrs_of(call)["dtype"]
    return TensorStructInfo(x.shape, x.dtype if dtype == "void" else dtype, x.ndim)


def _full_like_ref(x, fill_value, dtype="void"):
    x = np.asarray(x)
    return np.full(x.shape, np.asarray(fill_value), dtype=x.dtype if dtype == "void" else dtype)


define("full_like", ("x", "fill_value"), _infer_full_like, attrs={"dtype": ("void", dtype_or_void)},
       reference=_full_like_ref, pattern=OpPattern.ELEMWISE,
       doc="x's shape filled with a scalar, in dtype (void: x's).")


@legalizes("full_like")
def _full_like(call, inputs):
    out = _out(call)
    fill = _tensor(inputs, 1, call)
    if fill.ndim != 0:
        raise LegalizeError(f"{_script(call)}: the fill value must be a 0-d tensor")
    return te.compute(out.shape, lambda *i: _cast_fill(fill[()], out.dtype), name="T_full_like")


def _cast_fill(v: PrimExpr, dtype: str) -> PrimExpr:
    if tir.is_bool(dtype) and not tir.is_bool(v.dtype):
        return BinaryOp("!=", v, te.const(0, v.dtype))
    return te.cast(v, dtype)


# ---------------------------------------------------------------------------
# tril / triu
# ---------------------------------------------------------------------------

def _infer_tri(call, ctx):
    x = tensor_arg(call, 0, ctx)
    k = prim_operand(call, 1, ctx, "k")
    if k.dtype != "void" and not tir.is_int(k.dtype):
        raise err(call, f"{expr_to_str(call.op)}: the diagonal offset k must be an integer, "
                        f"got dtype {k.dtype}")
    if x.ndim != -1 and x.ndim < 2:
        raise err(call, f"{expr_to_str(call.op)} needs a tensor of at least 2 dimensions, but "
                        f"{expr_to_str(call.args[0])} has ndim {x.ndim}")
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


define("tril", ("x", "k"), _infer_tri, reference=lambda x, k: np.tril(np.asarray(x), int(k)),
       pattern=OpPattern.INJECTIVE, doc="numpy.tril: zero above the k-th diagonal of the last two axes.")
define("triu", ("x", "k"), _infer_tri, reference=lambda x, k: np.triu(np.asarray(x), int(k)),
       pattern=OpPattern.INJECTIVE, doc="numpy.triu: zero below the k-th diagonal of the last two axes.")


def _tri_legalize(lower: bool):
    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        k = _i64(prim_expr(inputs[1], call, "k"))

        def body(*i):
            d = BinaryOp("-", i[-1], i[-2])  # column - row
            keep = BinaryOp("<=", d, k) if lower else BinaryOp(">=", d, k)
            return Select(keep, x[i], te.const(0, x.dtype))
        return te.compute(out.shape, body, name="T_tril" if lower else "T_triu")
    return legalize


legalizes("tril")(_tri_legalize(True))
legalizes("triu")(_tri_legalize(False))


# ---------------------------------------------------------------------------
# eye / eye_like
# ---------------------------------------------------------------------------

def _infer_eye(call, ctx):
    n = prim_operand(call, 0, ctx, "n")
    m = prim_operand(call, 1, ctx, "m")
    prim_operand(call, 2, ctx, "k")
    dtype = attrs_of(call)["dtype"]
    for what, v in (("n", n), ("m", m)):
        if v.value is not None and not tir.is_int(v.value.dtype):
            raise err(call, f"eye: {what} must be an integer, got dtype {v.value.dtype}")
        c = arith.const_int(v.value) if v.value is not None else None
        if c is not None and c < 0:
            raise err(call, f"eye: {what} must be non-negative, got {c}")
    if n.value is None or m.value is None:
        return TensorStructInfo(None, dtype, 2)
    return TensorStructInfo((_i64(n.value), _i64(m.value)), dtype)


define("eye", ("n", "m", "k"), _infer_eye, attrs={"dtype": ("float32", dtype_required)},
       reference=lambda n, m, k, dtype="float32": np.eye(int(n), int(m), int(k), dtype=dtype),
       pattern=OpPattern.INJECTIVE, doc="numpy.eye(n, m, k): ones on the k-th diagonal.")


def _infer_eye_like(call, ctx):
    x = tensor_arg(call, 0, ctx)
    prim_operand(call, 1, ctx, "k")
    if x.ndim not in (-1, 2):
        raise err(call, f"eye_like needs a 2-D tensor, but {expr_to_str(call.args[0])} has "
                        f"ndim {x.ndim}")
    dtype = attrs_of(call)["dtype"]
    return TensorStructInfo(x.shape, x.dtype if dtype == "void" else dtype, 2)


def _eye_like_ref(x, k, dtype="void"):
    x = np.asarray(x)
    return np.eye(x.shape[0], x.shape[1], int(k), dtype=x.dtype if dtype == "void" else dtype)


define("eye_like", ("x", "k"), _infer_eye_like, attrs={"dtype": ("void", dtype_or_void)},
       reference=_eye_like_ref, pattern=OpPattern.INJECTIVE,
       doc="numpy.eye shaped like the 2-D tensor x.")


def _eye_legalize(k_index: int):
    def legalize(call, inputs):
        out = _out(call)
        k = _i64(prim_expr(inputs[k_index], call, "k"))
        return te.compute(out.shape, lambda i, j: te.cast(
            BinaryOp("==", BinaryOp("-", j, i), k), out.dtype), name="T_eye")
    return legalize


legalizes("eye")(_eye_legalize(2))
legalizes("eye_like")(_eye_legalize(1))


# ---------------------------------------------------------------------------
# hamming_window
# ---------------------------------------------------------------------------

def _infer_hamming(call, ctx):
    n = prim_operand(call, 0, ctx, "window_size")
    for k, what in ((1, "periodic"), (2, "alpha"), (3, "beta")):
        prim_operand(call, k, ctx, what)
    dtype = attrs_of(call)["dtype"]
    if not tir.is_float(dtype):
        raise err(call, f"hamming_window needs a float dtype, got {dtype}")
    if n.value is None:
        return TensorStructInfo(None, dtype, 1)
    if not tir.is_int(n.value.dtype):
        raise err(call, f"hamming_window: window_size must be an integer, got {n.value.dtype}")
    c = arith.const_int(n.value)
    if c is not None and c < 1:
        raise err(call, f"hamming_window: window_size must be positive, got {c}")
    return TensorStructInfo((_i64(n.value),), dtype)


def _hamming_ref(window_size, periodic, alpha, beta, dtype="float32"):
    n = int(window_size)
    if n == 1:
        return np.ones(1, dtype)
    denom = n if bool(_scalar(periodic)) else n - 1
    k = np.arange(n, dtype=np.float64)
    return (float(alpha) - float(beta) * np.cos(2 * np.pi * k / denom)).astype(dtype)


define("hamming_window", ("window_size", "periodic", "alpha", "beta"), _infer_hamming,
       attrs={"dtype": ("float32", dtype_required)}, reference=_hamming_ref,
       pattern=OpPattern.INJECTIVE,
       doc="alpha - beta * cos(2 pi n / (N if periodic else N - 1)) (torch.hamming_window).")


@legalizes("hamming_window")
def _hamming_window(call, inputs):
    out = _out(call)
    n = _i64(prim_expr(inputs[0], call, "window_size"))
    periodic = prim_expr(inputs[1], call, "periodic")
    alpha, beta = (te.cast(prim_expr(inputs[k], call, w), "float64")
                   for k, w in ((2, "alpha"), (3, "beta")))
    truthy = periodic if tir.is_bool(periodic.dtype) else BinaryOp("!=", periodic,
                                                                   te.const(0, periodic.dtype))
    denom = te.cast(Select(truthy, n, BinaryOp("max", BinaryOp("-", n, tir.IntImm(1)),
                                               tir.IntImm(1))), "float64")
    two_pi = te.const(2 * np.pi, "float64")

    def body(i):
        c = te.call("cos", BinaryOp("/", BinaryOp("*", two_pi, te.cast(i, "float64")), denom))
        w = BinaryOp("-", alpha, BinaryOp("*", beta, c))
        return te.cast(Select(BinaryOp("==", n, tir.IntImm(1)), te.const(1.0, "float64"), w),
                       out.dtype)
    return te.compute(out.shape, body, name="T_hamming_window")


# ---------------------------------------------------------------------------
# zeros, ones, full, zeros_like, ones_like
# ---------------------------------------------------------------------------

def _infer_fill(call, ctx):
    target = shape_arg(call, 0, ctx)
    dtype = attrs_of(call)["dtype"]
    if target.values is None:
        return TensorStructInfo(None, dtype, target.ndim)
    return TensorStructInfo(target.values, dtype)


define("zeros", ("shape",), _infer_fill, attrs={"dtype": ("float32", dtype_required)},
       reference=lambda shape, dtype="float32": np.zeros(shape_tuple(shape), dtype),
       pattern=OpPattern.ELEMWISE, doc="A tensor of zeros of the shape operand.")
define("ones", ("shape",), _infer_fill, attrs={"dtype": ("float32", dtype_required)},
       reference=lambda shape, dtype="float32": np.ones(shape_tuple(shape), dtype),
       pattern=OpPattern.ELEMWISE, doc="A tensor of ones of the shape operand.")


def _infer_full(call, ctx):
    target = shape_arg(call, 0, ctx)
    if len(call.args) < 2:
        raise err(call, "full expects a shape and a fill value")
    fill = arg_sinfo(call.args[1], ctx)
    if isinstance(fill, TensorStructInfo):
        if fill.ndim not in (0, -1):
            raise err(call, f"full needs a scalar fill value, but {expr_to_str(call.args[1])} "
                            f"has struct info {sinfo_to_str(fill)}")
        fill_dtype = fill.dtype
    elif isinstance(fill, PrimStructInfo):
        fill_dtype = fill.dtype
    else:
        raise err(call, f"full needs a scalar fill value (a 0-d tensor or R.prim_value), but "
                        f"{expr_to_str(call.args[1])} has struct info {sinfo_to_str(fill)}")
    dtype = attrs_of(call)["dtype"]
    if dtype == "void":
        dtype = fill_dtype
    if target.values is None:
        return TensorStructInfo(None, dtype, target.ndim)
    return TensorStructInfo(target.values, dtype)


def _full_ref(shape, fill_value, dtype="void"):
    fill = prim_array(fill_value)
    return np.full(shape_tuple(shape), fill, dtype=fill.dtype if dtype == "void" else dtype)


define("full", ("shape", "fill_value"), _infer_full, attrs={"dtype": ("void", as_dtype)},
       reference=_full_ref, pattern=OpPattern.ELEMWISE,
       doc="A tensor of the shape operand filled with a scalar (dtype void: the fill's).")


def _infer_like(call, ctx):
    x = tensor_arg(call, 0, ctx)
    dtype = attrs_of(call)["dtype"]
    return with_dtype(x, x.dtype if dtype == "void" else dtype)


def _like_ref(fill):
    def ref(x, dtype="void"):
        x = np.asarray(x)
        return np.full(x.shape, fill, dtype=x.dtype if dtype == "void" else dtype)
    return ref


define("zeros_like", ("x",), _infer_like, attrs={"dtype": ("void", as_dtype)},
       reference=_like_ref(0), pattern=OpPattern.ELEMWISE, doc="Zeros shaped like x.")
define("ones_like", ("x",), _infer_like, attrs={"dtype": ("void", as_dtype)},
       reference=_like_ref(1), pattern=OpPattern.ELEMWISE, doc="Ones shaped like x.")


# ---------------------------------------------------------------------------
# Legalization: zeros, ones, full, zeros_like, ones_like
# ---------------------------------------------------------------------------

def _fill(value: Any) -> LegalizeFn:
    def legalize(call: Call, inputs: Inputs) -> Tensor:
        out = _out(call)
        return te.compute(out.shape, lambda *i: _const(value, out.dtype), name=_name(call))
    return legalize


for _n, _v in (("zeros", 0), ("ones", 1), ("zeros_like", 0), ("ones_like", 1)):
    legalizes(_n)(_fill(_v))


@legalizes("full")
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


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_arange(ctx):
    start, step = ctx.integers(-3, 3), ctx.choose([1, 2, -1])
    end = start + step * ctx.integers(0, 4)
    dtype = ctx.choose(["int64", "int32", "float32"])
    ctx.result_in(min(start, end), max(start, end))
    return (start, end, step), {"dtype": dtype}


def _draw_full_like(ctx):
    fill = data_like(ctx, ())
    return (ctx.x, fill), {"dtype": ctx.choose(["void", "float32", "int32"])}


def _draw_tri(ctx):
    ctx.include(0, 0)
    return (ctx.x, ctx.integers(-1, 1)), {}


def _draw_eye(ctx):
    ctx.result_in(0, 1)
    return (ctx.integers(1, 4), ctx.integers(1, 4), ctx.integers(-1, 1)), {
        "dtype": ctx.choose(["float32", "int32", "bool"])}


def _draw_eye_like(ctx):
    ctx.result_in(0, 1)
    return (ctx.x, ctx.integers(-1, 1)), {"dtype": ctx.choose(["void", "float32"])}


def _draw_hamming(ctx):
    ctx.result_in(-0.1, 1.1)
    return (ctx.integers(1, 5), PrimValue(ctx.choose([True, False])), 0.54, 0.46), {}


# the operators without a tensor operand take a tensor in scope and ignore it
declares_draw("arange", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False,
              build=_draw_arange)
declares_draw("eye", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False, build=_draw_eye)
declares_draw("hamming_window", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False,
              build=_draw_hamming)
declares_draw("full_like", dtypes=NUMBERS, build=_draw_full_like)
declares_draw("tril", dtypes=ANY_DTYPE, ranks=(2, 3, 4), static=False, build=_draw_tri)
declares_draw("triu", dtypes=ANY_DTYPE, ranks=(2, 3, 4), static=False, build=_draw_tri)
declares_draw("eye_like", dtypes=NUMBERS, ranks=(2,), build=_draw_eye_like)


# zeros_like / ones_like / zeros / ones / full (phasec.op.draw.Hooks)

def _like_draw(name: str, value: float, order: int) -> Hooks:
    def build(g, x):

        return g.emit(call_op("relax." + name, x.expr), x.kind, (value, value))
    return Hooks(build, (FLOAT, INT), order=order)


def _fill_draw(name: str, order: int) -> Hooks:
    """Of the shape of a value in scope (symbolic dimensions included)."""
    def build(g, x):

        shape = ShapeExpr(x.shape)
        if name == "full":
            fill = g.constant((), (-2.0, 2.0), "float32")
            return g.emit(call_op("relax.full", shape, fill.expr), FLOAT, (fill.lo, fill.hi))
        value = 1.0 if name == "ones" else 0.0
        return g.emit(call_op("relax." + name, shape, dtype="float32"), FLOAT, (value, value))
    return Hooks(build, (FLOAT, INT, BOOL), order=order)


declares_draw("zeros_like", _like_draw("zeros_like", 0.0, 57))
declares_draw("ones_like", _like_draw("ones_like", 1.0, 58))
for _opname, _order in (("zeros", 59), ("ones", 60), ("full", 61)):
    declares_draw(_opname, _fill_draw(_opname, _order))
