"""Statistics (TVM 0.27's ``relax.op.statistical``): the reductions sum, mean,
max, min, prod; variance, std; the scans cumsum, cumprod; median.

Semantics (numpy's functions are the references):

* ``sum``/``mean``/``max``/``min``/``prod(x, axis=None, keepdims=False)``:
  ``axis=None`` reduces all axes, else a tuple of axes. ``mean`` of
  integers truncates the sum divided by the count. Bool tensors reduce to a
  bool result, as TVM's inference: sum and max are "any", prod and min are
  "all".
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
* ``median(x, axis=None, keepdims=False)``: the lower median (torch's);
  over every axis (``axis=None``, or several axes that are all of them) a
  tensor, along one axis (even the only axis of a 1-D tensor) the pair
  (values, int64 indices), as TVM 0.27 (several axes but not all: an
  error). It lowers to a packed function (:mod:`phasec.op._packed`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec import arith, te
from phasec.ir import tir
from phasec.ir.expr import Call, ExternFunc, PrimValue
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.tir import BinaryOp, IfThenElse
from phasec.op._common import (
    OpPattern, as_bool, as_int, attrs_of, define, err, int_tuple, norm_axes, norm_axis, opt, prod,
    tensor_arg,
)
from phasec.op._lowering import (
    I64, Inputs, LegalizeFn, _attrs, _const, _count, _float, _i64, _name, _norm_axis, _out, _prod,
    _reduction, _tensor, _unravel, legalizes, legalizes_to_relax,
)
from phasec.op._packed import bool_value, packed
from phasec.op._tirgen import i64, nest
from phasec.op.datatype import dtype_or_void
from phasec.op.draw import FLOAT, NUMBERS, Hooks, declares_draw, dim_max, iv_ok, numel_max
from phasec.ir.text import expr_to_str
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__: list[str] = []


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def _infer_reduce(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    axis, keepdims = a["axis"], a["keepdims"]
    if x.ndim == -1:
        if axis is None and not keepdims:
            return TensorStructInfo((), x.dtype)
        return TensorStructInfo(None, x.dtype, -1)
    axes = set(range(x.ndim)) if axis is None else set(norm_axes(call, axis, x.ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim if keepdims else x.ndim - len(axes))
    dims = []
    for i, d in enumerate(x.shape):
        if i in axes:
            if keepdims:
                dims.append(tir.IntImm(1))
        else:
            dims.append(d)
    return TensorStructInfo(tuple(dims), x.dtype)


def _np_axis(x: np.ndarray, axis):
    return None if axis is None else tuple(a % x.ndim for a in axis) if x.ndim else ()


def _reduce_ref(fn):
    def ref(x, axis=None, keepdims=False):
        x = np.asarray(x)
        return np.asarray(fn(x, axis=_np_axis(x, axis), keepdims=keepdims)).astype(x.dtype)
    return ref


def _mean_ref(x, axis=None, keepdims=False):
    x = np.asarray(x)
    ax = _np_axis(x, axis)
    if x.dtype.kind == "f":
        return np.asarray(np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype)).astype(x.dtype)
    total = np.sum(x.astype(np.int64), axis=ax, keepdims=keepdims)
    count = x.size // max(total.size, 1) if x.size else 1
    q = np.abs(total) // count * np.sign(total)  # truncate toward zero
    return np.asarray(q).astype(x.dtype)


_REDUCE_ATTRS = {"axis": (None, opt(int_tuple)), "keepdims": (False, as_bool)}

for _opname, _ref in (("sum", _reduce_ref(np.sum)), ("mean", _mean_ref),
                    ("max", _reduce_ref(np.max)), ("min", _reduce_ref(np.min)),
                    ("prod", _reduce_ref(np.prod))):
    define(_opname, ("x",), _infer_reduce, attrs=_REDUCE_ATTRS, reference=_ref,
           pattern=OpPattern.COMM_REDUCE,
           doc=f"Reduce by {_opname} over ``axis`` (None: all axes), optionally keeping dims.")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _reduce_axes(call: Call, ndim: int) -> list[int]:
    axis = _attrs(call)["axis"]
    if axis is None:
        return list(range(ndim))
    return sorted(_norm_axis(a, ndim) for a in axis)


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
    legalizes(_n)(_make_reduce(_n))


@legalizes("mean")
def _mean(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axes = _reduce_axes(call, x.ndim)
    keep = _attrs(call)["keepdims"]
    count = _prod([x.shape[a] for a in axes])
    dt = out.dtype
    if dt == "float16":  # sum and divide in float32, round once (as numpy's mean)
        s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum",
                       lambda v: te.cast(v, "float32"))
        return te.compute(out.shape, lambda *i: te.cast(
            BinaryOp("/", s[i], _count(count, "float32")), dt), name=_name(call))
    if _float(dt):
        s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum")
        return te.compute(out.shape, lambda *i: BinaryOp("/", s[i], _count(count, dt)),
                          name=_name(call))
    # Integers: sum in int64, divide truncating toward zero (the reference's
    # rule); over an empty axis the sum is 0 and so is the mean: divide by at
    # least 1 (never by 0, which would be the kernel's error)
    s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum",
                   lambda v: te.cast(v, "int64"))
    nonempty = arith.simplify(BinaryOp("max", count, _i64(1)))
    return te.compute(out.shape, lambda *i: te.cast(BinaryOp("/", s[i], nonempty), dt),
                      name=_name(call))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (phasec.op.draw.Hooks)
# ---------------------------------------------------------------------------

def _reduce_iv(name, x, count):
    lo, hi = x.lo, x.hi
    if name == "sum":
        return min(lo, count * lo), max(hi, count * hi)
    if name == "prod":
        if count > 8:
            return None
        bound = max(x.mag, 1.0) ** count
        return (0.0 if lo >= 0 else -bound), bound
    return lo, hi  # mean, max, min


def _reduce_draw(name: str, order: int) -> Hooks:
    def accepts(g, x) -> bool:
        if x.kind != FLOAT or x.rank < 1:
            return False
        worst = numel_max(x.shape, g.cfg.max_dim)
        return iv_ok(_reduce_iv(name, x, min(worst, 8) if name == "prod" else worst))

    def build(g, x):

        options: list[Any] = [None] + [(i,) for i in range(x.rank)]
        if x.rank >= 2:
            options.append((0, x.rank - 1))
        axes = g.pick(options)
        dims = range(x.rank) if axes is None else axes
        count = 1
        for i in dims:
            count *= dim_max(x.shape[i], g.cfg.max_dim)
        iv = _reduce_iv(name, x, count)
        if not iv_ok(iv):  # fall back to one axis, always within bounds
            axes = (x.rank - 1,)
            iv = _reduce_iv(name, x, dim_max(x.shape[-1], g.cfg.max_dim))
        keepdims = g.boolean()
        return g.emit(call_op("relax." + name, x.expr, axis=axes, keepdims=keepdims), FLOAT, iv)

    return Hooks(build, (FLOAT,), 1, accepts, order=order)


for _opname, _order in (("sum", 11), ("mean", 39), ("max", 40), ("min", 41), ("prod", 42)):
    declares_draw(_opname, _reduce_draw(_opname, _order))


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


def _opt_bool(v):
    """``exclusive=None`` is False, as TVM 0.27's constructor makes it."""
    return False if v is None else as_bool(v)


_SCAN_ATTRS = {"axis": (None, opt(as_int)), "dtype": ("void", dtype_or_void),
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
# median
# ---------------------------------------------------------------------------

def _median_axes(call, x: TensorStructInfo) -> tuple[bool, int]:
    """(over every axis, the one axis otherwise)."""
    axis = attrs_of(call)["axis"]
    if axis is None or len(axis) == 0:
        return True, 0
    if x.ndim == -1:
        if len(axis) != 1:
            raise err(call, "median over several axes needs a tensor of known rank")
        return False, axis[0]
    axes = norm_axes(call, axis, x.ndim)
    if len(axes) == 1:
        # one axis is the pair (values, indices) even when it is the only
        # axis of a 1-D tensor: TVM 0.27's rule (its type inference counts the
        # axes given, not the axes left)
        return False, axes[0]
    if len(axes) == x.ndim:
        return True, 0
    if len(axes) != 1:
        raise err(call, f"median reduces one axis or all of them (TVM 0.27), got axis="
                        f"{tuple(axis)} for a tensor of ndim {x.ndim}")
    return False, axes[0]


def _infer_median(call, ctx):
    x = tensor_arg(call, 0, ctx)
    keep = attrs_of(call)["keepdims"]
    whole, ax = _median_axes(call, x)
    if whole:
        if x.ndim == -1:
            return TensorStructInfo(() if not keep else None, x.dtype, 0 if not keep else -1)
        return TensorStructInfo((tir.IntImm(1),) * x.ndim if keep else (), x.dtype)
    if x.shape is None:
        ndim = -1 if x.ndim == -1 else (x.ndim if keep else x.ndim - 1)
        vals = TensorStructInfo(None, x.dtype, ndim)
    else:
        dims = [tir.IntImm(1) if d == ax else s for d, s in enumerate(x.shape) if keep or d != ax]
        vals = TensorStructInfo(tuple(dims), x.dtype)
    return TupleStructInfo([vals, TensorStructInfo(vals.shape, "int64", vals.ndim)])


def _median_ref(x, axis=None, keepdims=False):
    x = np.asarray(x)
    # one axis is a (values, indices) pair, even a 1-D tensor's only axis
    whole = axis is None or len(axis) == 0 or (len(axis) == x.ndim and len(axis) != 1)
    return packed("phasec.median")(x, 0 if whole else axis[0], whole, keepdims)


define("median", ("x",), _infer_median,
       attrs={"axis": (None, opt(int_tuple)), "keepdims": (False, as_bool)},
       reference=_median_ref, pattern=OpPattern.OPAQUE,
       doc="The lower median over all axes, or (values, indices) along one axis.")


@legalizes_to_relax("median")
def _median(call):

    x = call.args[0].struct_info
    whole, ax = _median_axes(call, x)
    extra = [PrimValue(tir.IntImm(ax)), bool_value(whole), bool_value(attrs_of(call)["keepdims"])]
    return call_op("call_pure_packed", ExternFunc("phasec.median"), call.args[0], *extra,
                   sinfo_args=[call.struct_info], span=call.span)


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

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


def _draw_median(ctx):
    axis = ctx.choose([None, *range(len(ctx.shape))])
    if axis is not None:
        ctx.include(0, max(ctx.shape))  # (values, indices) along one axis
    return (ctx.x,), {"axis": axis, "keepdims": ctx.choose([False, True])}


declares_draw("variance", build=_draw_moment, out=lambda ctx: (0.0, ctx.mag ** 2))
declares_draw("std", build=_draw_moment, out=lambda ctx: (0.0, ctx.mag))
declares_draw("cumsum", dtypes=NUMBERS, build=_draw_scan("sum"))
declares_draw("cumprod", dtypes=NUMBERS, build=_draw_scan("prod"))
declares_draw("median", dtypes=NUMBERS, build=_draw_median)
