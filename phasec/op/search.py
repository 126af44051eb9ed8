"""Search (TVM 0.27's ``relax.op.search``): where, argmax, argmin, bucketize.

* ``where(condition, x1, x2)``: x1 where the condition holds else x2, the
  three broadcasting together.
* ``argmax(x, axis=None, keepdims=False)`` / ``argmin``: the int64 index of
  the first maximum (minimum) along ``axis`` (None: of the flattened
  tensor, as numpy). A NaN counts as the extreme value (numpy's rule): the
  index of the first NaN is returned.
* ``bucketize(input, boundaries, out_int32=False, right=False)``: for sorted
  1-D boundaries, the number of boundaries below each element (at or below
  with ``right``): torch.bucketize. The kernel counts comparisons (a NaN
  element lands in bucket 0 where numpy's searchsorted puts it last).
"""

from __future__ import annotations

import numpy as np

from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_bool, as_int, attrs_of, broadcast, define, err, norm_axis, opt, tensor_arg,
)
from phasec.op._elementwise import truthy
from phasec.op._lowering import Inputs, _bcast, _name, _out, _prod, _reduction, _tensor, legalizes
from phasec.op._tirgen import i64
from phasec.op.draw import BOOL, FLOAT, NUMBERS, Hooks, broadcast_ok, declares_draw, hull
from phasec.ir.text import expr_to_str
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__: list[str] = []


# ---------------------------------------------------------------------------
# where
# ---------------------------------------------------------------------------

def _infer_where(call, ctx):
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


@legalizes("where")
def _where(call: Call, inputs: Inputs) -> Tensor:
    c, a, b = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    shape = out.shape
    return te.compute(shape, lambda *i: Select(truthy(_bcast(c, shape, i)), _bcast(a, shape, i),
                                               _bcast(b, shape, i)), name=_name(call))


# How the fuzzing generator draws where (phasec.op.draw.Hooks)

def _where_build(g, c):
    """``where(cond, x1, x2)``: the first operand is the condition; the
    branches are float values in scope that broadcast with it, or constants."""

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


declares_draw("where", Hooks(_where_build, (BOOL,), accepts=lambda g, x: x.kind == BOOL,
                             order=37))


# ---------------------------------------------------------------------------
# argmax / argmin
# ---------------------------------------------------------------------------

def _infer_arg(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    axis, keep = a["axis"], a["keepdims"]
    if x.ndim == -1:
        if axis is None and not keep:
            return TensorStructInfo((), "int64")
        return TensorStructInfo(None, "int64", -1)
    if axis is None:
        if not keep:
            return TensorStructInfo((), "int64")
        return TensorStructInfo((tir.IntImm(1),) * x.ndim, "int64")
    ax = norm_axis(call, axis, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, "int64", x.ndim if keep else x.ndim - 1)
    dims = [tir.IntImm(1) if i == ax else d for i, d in enumerate(x.shape) if keep or i != ax]
    return TensorStructInfo(tuple(dims), "int64")


def _arg_ref(fn):
    def ref(x, axis=None, keepdims=False):
        x = np.asarray(x)
        if x.size == 0:
            raise ValueError(f"{fn.__name__} of an empty tensor")
        if axis is None:
            r = np.asarray(fn(x.reshape(-1)))
            return r.reshape((1,) * x.ndim if keepdims else ()).astype(np.int64)
        return np.asarray(fn(x, axis=axis, keepdims=keepdims)).astype(np.int64)
    return ref


for _n, _f in (("argmax", np.argmax), ("argmin", np.argmin)):
    define(_n, ("x",), _infer_arg, attrs={"axis": (None, opt(as_int)), "keepdims": (False, as_bool)},
           reference=_arg_ref(_f), pattern=OpPattern.COMM_REDUCE,
           doc=f"numpy.{_n}: int64 index of the first extreme along ``axis`` (None: flattened).")


def _arg_legalize(kind: str):
    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        a = attrs_of(call)
        axes = list(range(x.ndim)) if a["axis"] is None else [a["axis"] % x.ndim]
        keep = a["keepdims"]
        extent = _prod([x.shape[d] for d in axes])
        strides = []
        for k in range(len(axes)):
            strides.append(_prod([x.shape[d] for d in axes[k + 1:]]))
        combiner = te.max if kind == "argmax" else te.min
        best = _reduction(x, axes, keep, out.shape, combiner, f"T_{kind}_best")

        def first(pred, name):
            # the smallest flat position along ``axes`` where pred holds (else extent)
            rks = [te.reduce_axis(x.shape[d], f"k{d}") for d in axes]

            def body(*i):
                ind, pos, it = [], 0, iter(rks)
                for d in range(x.ndim):
                    if d in axes:
                        ind.append(next(it).var)
                        pos += 1 if keep else 0
                    else:
                        ind.append(i[pos])
                        pos += 1
                flat: PrimExpr = i64(0)
                for r, s in zip(rks, strides):
                    flat = BinaryOp("+", flat, BinaryOp("*", r.var, s))
                v = x[tuple(ind)]
                return te.min(Select(pred(v, i), flat, extent), axis=rks)
            return te.compute(out.shape, body, name=name)

        hit = first(lambda v, i: BinaryOp("==", v, best[i]), f"T_{kind}_first")
        if not tir.is_float(x.dtype):
            return te.compute(out.shape, lambda *i: hit[i], name=f"T_{kind}")
        nan = first(lambda v, i: te.call("isnan", v), f"T_{kind}_nan")
        return te.compute(out.shape, lambda *i: Select(BinaryOp("<", nan[i], extent), nan[i],
                                                       hit[i]), name=f"T_{kind}")
    return legalize


legalizes("argmax")(_arg_legalize("argmax"))
legalizes("argmin")(_arg_legalize("argmin"))


# ---------------------------------------------------------------------------
# bucketize
# ---------------------------------------------------------------------------

def _infer_bucketize(call, ctx):
    x = tensor_arg(call, 0, ctx, "input_tensor")
    b = tensor_arg(call, 1, ctx, "boundaries")
    if b.ndim not in (-1, 1):
        raise err(call, f"bucketize needs 1-D boundaries, but {expr_to_str(call.args[1])} has "
                        f"ndim {b.ndim}")
    if "void" not in (x.dtype, b.dtype) and x.dtype != b.dtype:
        raise err(call, f"bucketize: the boundaries have dtype {b.dtype} but the input "
                        f"{x.dtype}")
    if "bool" in (x.dtype, b.dtype):
        raise err(call, "bucketize needs numeric tensors, not bool")
    out = "int32" if attrs_of(call)["out_int32"] else "int64"
    return TensorStructInfo(x.shape, out, x.ndim)


def _bucketize_ref(input_tensor, boundaries, out_int32=False, right=False):
    x, b = np.asarray(input_tensor), np.asarray(boundaries)
    # counting comparisons (as the kernel): boundaries < x (<= x when right);
    # for sorted boundaries this is torch.bucketize / numpy.searchsorted
    cmp = (b <= x[..., None]) if right else (b < x[..., None])
    return cmp.sum(-1).astype("int32" if out_int32 else "int64")


define("bucketize", ("input_tensor", "boundaries"), _infer_bucketize,
       attrs={"out_int32": (False, as_bool), "right": (False, as_bool)},
       reference=_bucketize_ref, pattern=OpPattern.OPAQUE,
       doc="torch.bucketize: the bucket of each element among sorted boundaries.")


@legalizes("bucketize")
def _bucketize(call, inputs):
    x, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    right = attrs_of(call)["right"]
    k = te.reduce_axis(b.shape[0], "k")
    return te.compute(out.shape, lambda *i: te.sum(te.cast(
        BinaryOp("<=" if right else "<", b[(k.var,)], x[i]), out.dtype), axis=[k]),
        name="T_bucketize")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws argmax, argmin and bucketize (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_arg(ctx):
    axis = ctx.choose([None, *range(len(ctx.shape))])
    return (ctx.x,), {"axis": axis, "keepdims": ctx.choose([False, True])}


def _draw_bucketize(ctx):
    count = ctx.integers(1, 4)
    bounds = np.sort(ctx.const((count,), ctx.lo, ctx.hi, ctx.dtype))
    ctx.result_in(0, count)
    return (ctx.x, bounds), {"out_int32": ctx.choose([False, True]),
                             "right": ctx.choose([False, True])}


declares_draw("argmax", dtypes=NUMBERS, build=_draw_arg, out="index")
declares_draw("argmin", dtypes=NUMBERS, build=_draw_arg, out="index")
declares_draw("bucketize", dtypes=NUMBERS, build=_draw_bucketize)
