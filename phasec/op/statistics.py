"""Statistics and scans: argmax, argmin, variance, std, cumsum, cumprod,
bucketize.

Semantics (TVM 0.27's operators; numpy's functions are the references):

* ``argmax(x, axis=None, keepdims=False)`` / ``argmin``: the int64 index of
  the first maximum (minimum) along ``axis`` (None: of the flattened
  tensor, as numpy). A NaN counts as the extreme value (numpy's rule): the
  index of the first NaN is returned.
* ``variance(x, axis=None, keepdims=False)``: the population variance
  ``mean((x - mean(x))**2)`` over the listed axes (ddof 0, as TVM's
  legalization); ``std`` is its square root. Float tensors only (TVM's
  integer variance divides with integer truncation twice, which no caller
  wants; convert with ``R.astype`` first).
* ``cumsum(data, axis=None, dtype="void", exclusive=False)`` / ``cumprod``:
  the running sum (product) along ``axis``; ``axis=None`` scans the
  flattened tensor (a 1-D result); ``dtype`` is the accumulation and result
  type ("void": the data's); ``exclusive`` starts from the identity, so
  element ``k`` combines elements ``0..k-1``. The kernel is a scan written
  in TIR (:func:`phasec.te.extern`): one pass over the data.
* ``bucketize(input, boundaries, out_int32=False, right=False)``: for sorted
  1-D boundaries, the number of boundaries below each element (at or below
  with ``right``): torch.bucketize. The kernel counts comparisons (a NaN
  element lands in bucket 0 where numpy's searchsorted puts it last).
"""

from __future__ import annotations

import math

import numpy as np

from phasec.ir import tir
from phasec import te
from phasec.ir.text import expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, IfThenElse, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_bool, as_dtype, as_int, attrs_of, define, err, int_tuple, norm_axis, opt, prod,
    tensor_arg,
)
from phasec.op._tirgen import i64, nest
from phasec.op._draw import NUMBERS, declares_draw
from phasec.op._lowering import (
    _const, _count, _out, _prod, _reduction, _tensor, _unravel, legalizes,
)
from phasec.op.linalg import _infer_reduce, _np_axis

__all__: list[str] = []


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
# variance / std
# ---------------------------------------------------------------------------

def _infer_stat(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.dtype != "void" and not tir.is_float(x.dtype):
        raise err(call, f"{expr_to_str(call.op)} needs a float tensor, but "
                        f"{expr_to_str(call.args[0])} has dtype {x.dtype}; convert it first with "
                        f"R.astype({expr_to_str(call.args[0])}, \"float32\")")
    return _infer_reduce(call, ctx)


def _stat_ref(sqrt: bool):
    def ref(x, axis=None, keepdims=False):
        x = np.asarray(x)
        ax = _np_axis(x, axis)
        x64 = x.astype(np.float64)
        mean = np.mean(x64, axis=ax, keepdims=True)
        var = np.mean((x64 - mean) ** 2, axis=ax, keepdims=keepdims)
        return np.asarray(np.sqrt(var) if sqrt else var).astype(x.dtype)
    return ref


_STAT_ATTRS = {"axis": (None, opt(int_tuple)), "keepdims": (False, as_bool)}
define("variance", ("x",), _infer_stat, attrs=_STAT_ATTRS, reference=_stat_ref(False),
       pattern=OpPattern.COMM_REDUCE,
       doc="Population variance mean((x - mean(x))**2) over ``axis`` (None: all).")
define("std", ("x",), _infer_stat, attrs=_STAT_ATTRS, reference=_stat_ref(True),
       pattern=OpPattern.COMM_REDUCE,
       doc="Population standard deviation over ``axis`` (None: all).")


def _stat_legalize(sqrt: bool):
    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        a = attrs_of(call)
        axes = list(range(x.ndim)) if a["axis"] is None else sorted(v % x.ndim for v in a["axis"])
        keep = a["keepdims"]
        dt = x.dtype
        n = _count(_prod([x.shape[d] for d in axes]), dt)
        kept = tuple(tir.IntImm(1) if d in axes else s for d, s in enumerate(x.shape))
        total = _reduction(x, axes, True, kept, te.sum, "T_var_sum")
        mean = te.compute(kept, lambda *i: BinaryOp("/", total[i], n), name="T_var_mean")

        def centered(i):
            return tuple(i64(0) if d in axes else v for d, v in enumerate(i))
        diff = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mean[centered(i)]),
                          name="T_var_diff")
        sq = _reduction(diff, axes, keep, out.shape, te.sum, "T_var_sqsum",
                        lambda v: BinaryOp("*", v, v))

        def body(*i):
            v = BinaryOp("/", sq[i], n)
            return te.call("sqrt", v) if sqrt else v
        return te.compute(out.shape, body, name="T_std" if sqrt else "T_variance")
    return legalize


legalizes("variance")(_stat_legalize(False))
legalizes("std")(_stat_legalize(True))


# ---------------------------------------------------------------------------
# cumsum / cumprod
# ---------------------------------------------------------------------------

def _infer_scan(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    dtype = a["dtype"] if a["dtype"] != "void" else x.dtype
    if dtype == "bool":
        raise err(call, f"{expr_to_str(call.op)} cannot accumulate in bool; give an integer or "
                        "float dtype= for the result")
    if a["axis"] is None:
        if x.shape is None:
            return TensorStructInfo(None, dtype, 1)
        return TensorStructInfo((prod(x.shape),), dtype)
    if x.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    norm_axis(call, a["axis"], x.ndim)
    return TensorStructInfo(x.shape, dtype, x.ndim)


def _scan_ref(fn, identity):
    def ref(data, axis=None, dtype="void", exclusive=False):
        x = np.asarray(data)
        dt = x.dtype if dtype == "void" else np.dtype(dtype)
        if axis is None:
            x, axis = x.reshape(-1), 0
        with np.errstate(over="ignore"):
            y = fn(x.astype(dt), axis=axis, dtype=dt)
        if exclusive:
            y = np.concatenate([np.full_like(np.take(y, [0], axis=axis), identity),
                                np.take(y, range(y.shape[axis] - 1), axis=axis)], axis=axis) \
                if y.shape[axis] else y
        return np.asarray(y).astype(dt)
    return ref


def _opt_dtype(v):
    return as_dtype("void" if v is None else v)


def _opt_bool(v):
    """``exclusive=None`` is False, as TVM 0.27's constructor makes it."""
    return False if v is None else as_bool(v)


_SCAN_ATTRS = {"axis": (None, opt(as_int)), "dtype": ("void", _opt_dtype),
               "exclusive": (False, _opt_bool)}
define("cumsum", ("data",), _infer_scan, attrs=_SCAN_ATTRS, reference=_scan_ref(np.cumsum, 0),
       pattern=OpPattern.OPAQUE,
       doc="Running sum along ``axis`` (None: flattened); ``exclusive`` starts from 0.")
define("cumprod", ("data",), _infer_scan, attrs=_SCAN_ATTRS, reference=_scan_ref(np.cumprod, 1),
       pattern=OpPattern.OPAQUE,
       doc="Running product along ``axis`` (None: flattened); ``exclusive`` starts from 1.")


def _scan_legalize(kind: str):
    op = "+" if kind == "cumsum" else "*"
    identity = 0 if kind == "cumsum" else 1

    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        a = attrs_of(call)
        dt = out.dtype
        if a["axis"] is None:
            size = _prod(x.shape)
            src = te.compute((size,), lambda i: x[tuple(_unravel(i, x.shape))], name="T_flat")
            ax = 0
        else:
            src, ax = x, a["axis"] % x.ndim
        excl = a["exclusive"]

        def build(ins, o):
            (xb,) = ins
            outer = [d for k, d in enumerate(o.shape) if k != ax]

            def scan(idx):
                def at(k):
                    return tuple(idx[:ax]) + (k,) + tuple(idx[ax:])

                def inner(kk):
                    k = kk[0]
                    val = te.cast(xb[at(BinaryOp("-", k, i64(1)) if excl else k)], dt)
                    first = _const(identity, dt) if excl else te.cast(xb[at(k)], dt)
                    return IfThenElse(BinaryOp("==", k, i64(0)), tir.BufferStore(o, first, at(k)),
                                      tir.BufferStore(o, BinaryOp(op, o[at(BinaryOp(
                                          "-", k, i64(1)))], val), at(k)))
                return nest((o.shape[ax],), inner, "k")
            return nest(outer, scan)
        return te.extern(out.shape, dt, [src], build, name=f"T_{kind}")
    return legalize


legalizes("cumsum")(_scan_legalize("cumsum"))
legalizes("cumprod")(_scan_legalize("cumprod"))


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
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_arg(ctx):
    axis = ctx.choose([None, *range(len(ctx.shape))])
    return (ctx.x,), {"axis": axis, "keepdims": ctx.choose([False, True])}


def _draw_moment(ctx):
    axis = ctx.choose([None, *((d,) for d in range(len(ctx.shape)))])
    return (ctx.x,), {"axis": axis, "keepdims": ctx.choose([False, True])}


def _draw_scan(kind: str):
    def build(ctx):
        axis = ctx.choose([None, *range(len(ctx.shape))])
        n = math.prod(ctx.shape) if axis is None else ctx.shape[axis]
        if kind == "sum":
            ctx.include(-n * ctx.mag, n * ctx.mag)
        elif n > 6:
            return None  # a product of more than 6 factors may leave the bounds
        else:
            bound = max(ctx.mag, 1.0) ** n
            ctx.include(-bound, bound)
        return (ctx.x,), {"axis": axis, "exclusive": ctx.choose([False, True])}
    return build


def _draw_bucketize(ctx):
    count = ctx.integers(1, 4)
    bounds = np.sort(ctx.const((count,), ctx.lo, ctx.hi, ctx.dtype))
    ctx.result_in(0, count)
    return (ctx.x, bounds), {"out_int32": ctx.choose([False, True]),
                             "right": ctx.choose([False, True])}


declares_draw("argmax", dtypes=NUMBERS, build=_draw_arg, out="index")
declares_draw("argmin", dtypes=NUMBERS, build=_draw_arg, out="index")
declares_draw("variance", build=_draw_moment, out=lambda ctx: (0.0, ctx.mag ** 2))
declares_draw("std", build=_draw_moment, out=lambda ctx: (0.0, ctx.mag))
declares_draw("cumsum", dtypes=NUMBERS, build=_draw_scan("sum"))
declares_draw("cumprod", dtypes=NUMBERS, build=_draw_scan("prod"))
declares_draw("bucketize", dtypes=NUMBERS, build=_draw_bucketize)
