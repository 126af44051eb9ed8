"""Sorting, and results whose shape depends on data: sort, argsort, topk,
median, unique, nonzero, dynamic_strided_slice.

Like TVM 0.27 on the CPU (which calls packed sorts and ``relax.run.unique``
/ ``relax.run.nonzero``), these lower to packed functions registered in
:mod:`phasec.runtime.packed` (numpy's stable sorts), through
``R.call_pure_packed(name, data, <attributes as prim values and strings>)``;
the references call the same functions, so the interpreter, FoldConstant
and the VM agree by construction.

* ``sort(x, axis=-1, descending=False)``; ``argsort(..., dtype="int32")``:
  stable — equal elements keep their order, descending too; NaN sorts last
  ascending, first descending.
* ``topk(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32")``:
  the k largest (smallest) along the axis in order, ``(values, indices)``,
  or one of them (ret_type "values" / "indices"); k < 1, or beyond a known
  axis length, takes the whole axis (TVM's rule).
* ``median(x, axis=None, keepdims=False)``: the lower median (torch's);
  over every axis (``axis=None``, or several axes that are all of them) a
  tensor, along one axis (even the only axis of a 1-D tensor) the pair
  (values, int64 indices), as TVM 0.27 (several axes but not all: an error).
* ``unique(x, sorted=True, return_index=False, return_inverse=False,
  return_counts=False, axis=None)``: numpy.unique (first-occurrence order
  when not sorted); a tuple when a return_ flag is set. Data-dependent:
  known rank, unknown length (TVM's struct info).
* ``nonzero(x)``: the int64 (ndim, count) coordinates of the non-zero
  elements, numpy.nonzero stacked; (2-D, unknown count).
* ``dynamic_strided_slice(x, begin, end, strides)``: numpy slicing with the
  bounds read from three 1-D integer tensors, one entry per axis (numpy's
  clamping of out-of-range bounds: never a read outside x; a zero stride is
  an error when it runs); known rank, unknown shape.
"""

from __future__ import annotations

import math

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import ExternFunc, PrimValue, StringImm
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op._common import (
    OpPattern, as_bool, as_dtype, as_int, attrs_of, define, err, int_tuple, norm_axes, norm_axis,
    one_of, opt, tensor_arg,
)
from phasec.op._draw import ANY_DTYPE, NUMBERS, declares_draw
from phasec.op._lowering import legalizes_to_relax

__all__: list[str] = []


def _int_dtype(v):
    d = as_dtype(v)
    if not tir.is_int(d):
        raise ValueError(f"an integer dtype is required, got {d!r}")
    return d


def _packed(name: str):
    from phasec.runtime.packed import get_packed_func

    return get_packed_func(name)


def _lower(name: str, attrs_to_args):
    """LegalizeOps: ``R.call_pure_packed(name, data, *attribute values)``."""
    def lower(call):
        from phasec.op.calls import call_op

        extra = [PrimValue(v) if isinstance(v, (bool, int)) else StringImm(v)
                 for v in attrs_to_args(attrs_of(call))]
        return call_op("call_pure_packed", ExternFunc(name), call.args[0], *extra,
                       sinfo_args=[call.struct_info], span=call.span)
    return lower


def _pv_bool(v: bool) -> PrimValue:
    return PrimValue(tir.IntImm(int(v), "bool"))


# ---------------------------------------------------------------------------
# sort / argsort / topk
# ---------------------------------------------------------------------------

def _infer_sort(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.ndim != -1:
        norm_axis(call, attrs_of(call)["axis"], x.ndim)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _infer_argsort(call, ctx):
    x = _infer_sort(call, ctx)
    return TensorStructInfo(x.shape, attrs_of(call)["dtype"], x.ndim)


_SORT_ATTRS = {"axis": (-1, as_int), "descending": (False, as_bool)}
define("sort", ("x",), _infer_sort, attrs=_SORT_ATTRS,
       reference=lambda x, axis=-1, descending=False: _packed("phasec.sort")(x, axis, descending),
       pattern=OpPattern.OPAQUE, doc="Stable sort along axis.")
define("argsort", ("data",), _infer_argsort,
       attrs={**_SORT_ATTRS, "dtype": ("int32", _int_dtype)},
       reference=lambda data, axis=-1, descending=False, dtype="int32":
       _packed("phasec.argsort")(data, axis, descending, dtype),
       pattern=OpPattern.OPAQUE, doc="Indices of a stable sort along axis.")


def _sort_args(a):
    return [a["axis"], a["descending"]]


legalizes_to_relax("sort")(_lower("phasec.sort", _sort_args))
legalizes_to_relax("argsort")(_lower("phasec.argsort", lambda a: [*_sort_args(a), a["dtype"]]))


def _infer_topk(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    k, ret = a["k"], a["ret_type"]
    if x.ndim == -1 or x.shape is None:
        vals = TensorStructInfo(None, x.dtype, x.ndim)
    else:
        ax = norm_axis(call, a["axis"], x.ndim)
        dims = list(x.shape)
        n = arith.const_int(dims[ax])
        if k >= 1 and not (n is not None and k > n):
            dims[ax] = tir.IntImm(k)
        vals = TensorStructInfo(tuple(dims), x.dtype)
    idx = TensorStructInfo(vals.shape, a["dtype"], vals.ndim)
    return {"both": TupleStructInfo([vals, idx]), "values": vals, "indices": idx}[ret]


define("topk", ("data",), _infer_topk,
       attrs={"k": (1, as_int), "axis": (-1, as_int),
              "ret_type": ("both", one_of("both", "values", "indices")),
              "largest": (True, as_bool), "dtype": ("int32", _int_dtype)},
       reference=lambda data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32":
       _packed("phasec.topk")(data, k, axis, ret_type, largest, dtype),
       pattern=OpPattern.OPAQUE, doc="The k largest (smallest) elements along axis, in order.")
legalizes_to_relax("topk")(_lower("phasec.topk", lambda a: [
    a["k"], a["axis"], a["ret_type"], a["largest"], a["dtype"]]))


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
    import numpy as np

    x = np.asarray(x)
    # one axis is a (values, indices) pair, even a 1-D tensor's only axis
    whole = axis is None or len(axis) == 0 or (len(axis) == x.ndim and len(axis) != 1)
    return _packed("phasec.median")(x, 0 if whole else axis[0], whole, keepdims)


define("median", ("x",), _infer_median,
       attrs={"axis": (None, opt(int_tuple)), "keepdims": (False, as_bool)},
       reference=_median_ref, pattern=OpPattern.OPAQUE,
       doc="The lower median over all axes, or (values, indices) along one axis.")


@legalizes_to_relax("median")
def _median(call):
    from phasec.op.calls import call_op

    x = call.args[0].struct_info
    whole, ax = _median_axes(call, x)
    extra = [PrimValue(tir.IntImm(ax)), _pv_bool(whole), _pv_bool(attrs_of(call)["keepdims"])]
    return call_op("call_pure_packed", ExternFunc("phasec.median"), call.args[0], *extra,
                   sinfo_args=[call.struct_info], span=call.span)


# ---------------------------------------------------------------------------
# unique / nonzero: data-dependent shapes
# ---------------------------------------------------------------------------

def _infer_unique(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    if a["axis"] is None:
        ndim = 1
    else:
        ndim = x.ndim
        if x.ndim != -1:
            norm_axis(call, a["axis"], x.ndim)
    fields = [TensorStructInfo(None, x.dtype, ndim)]
    for flag in ("return_index", "return_inverse", "return_counts"):
        if a[flag]:
            fields.append(TensorStructInfo(None, "int64", 1))
    return fields[0] if len(fields) == 1 else TupleStructInfo(fields)


def _unique_ref(x, sorted=True, return_index=False, return_inverse=False,  # noqa: A002
                return_counts=False, axis=None):
    return _packed("relax.run.unique")(x, sorted, return_index, return_inverse, return_counts,
                                       axis is not None, 0 if axis is None else axis)


define("unique", ("x",), _infer_unique,
       attrs={"sorted": (True, as_bool), "return_index": (False, as_bool),
              "return_inverse": (False, as_bool), "return_counts": (False, as_bool),
              "axis": (None, opt(as_int))},
       reference=_unique_ref, pattern=OpPattern.OPAQUE,
       doc="numpy.unique (a tuple with the requested index/inverse/counts).")


@legalizes_to_relax("unique")
def _unique(call):
    from phasec.op.calls import call_op

    a = attrs_of(call)
    extra = [_pv_bool(a[k]) for k in ("sorted", "return_index", "return_inverse",
                                      "return_counts")]
    extra += [_pv_bool(a["axis"] is not None), PrimValue(tir.IntImm(a["axis"] or 0))]
    return call_op("call_pure_packed", ExternFunc("relax.run.unique"), call.args[0], *extra,
                   sinfo_args=[call.struct_info], span=call.span)


def _infer_nonzero(call, ctx):
    tensor_arg(call, 0, ctx)
    return TensorStructInfo(None, "int64", 2)


define("nonzero", ("x",), _infer_nonzero,
       reference=lambda x: _packed("relax.run.nonzero")(x), pattern=OpPattern.OPAQUE,
       doc="int64 (ndim, count) coordinates of the non-zero elements.")
legalizes_to_relax("nonzero")(_lower("relax.run.nonzero", lambda a: []))


def _infer_dynamic_strided_slice(call, ctx):
    x = tensor_arg(call, 0, ctx)
    for k, what in ((1, "begin"), (2, "end"), (3, "strides")):
        t = tensor_arg(call, k, ctx, what)
        if t.dtype != "void" and not tir.is_int(t.dtype):
            raise err(call, f"dynamic_strided_slice needs integer {what}, got dtype {t.dtype}")
        if t.ndim not in (-1, 1):
            raise err(call, f"dynamic_strided_slice needs a 1-D {what}, got ndim {t.ndim}")
        n = arith.const_int(t.shape[0]) if t.shape is not None else None
        if n is not None and x.ndim != -1 and n != x.ndim:
            raise err(call, f"dynamic_strided_slice: {what} has {n} entries for a tensor of "
                            f"ndim {x.ndim}")
    return TensorStructInfo(None, x.dtype, x.ndim)


define("dynamic_strided_slice", ("x", "begin", "end", "strides"), _infer_dynamic_strided_slice,
       reference=lambda x, begin, end, strides: _packed("phasec.dynamic_strided_slice")(
           x, begin, end, strides),
       pattern=OpPattern.OPAQUE, doc="numpy slicing with bounds read from tensors.")


@legalizes_to_relax("dynamic_strided_slice")
def _dynamic_strided_slice(call):
    from phasec.op.calls import call_op

    return call_op("call_pure_packed", ExternFunc("phasec.dynamic_strided_slice"), *call.args,
                   sinfo_args=[call.struct_info], span=call.span)


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_sort(ctx):
    return (ctx.x,), {"axis": ctx.choose(range(-len(ctx.shape), len(ctx.shape))),
                      "descending": ctx.choose([False, True])}


def _draw_argsort(ctx):
    ctx.result_in(0, max(ctx.shape))
    return (ctx.x,), {"axis": ctx.choose(range(len(ctx.shape))),
                      "descending": ctx.choose([False, True]),
                      "dtype": ctx.choose(["int32", "int64"])}


def _draw_topk(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    ctx.include(0, max(ctx.shape))  # the indices
    return (ctx.x,), {"k": ctx.integers(0, ctx.shape[axis] + 1), "axis": axis,
                      "ret_type": ctx.choose(["both", "values", "indices"]),
                      "largest": ctx.choose([True, False]),
                      "dtype": ctx.choose(["int32", "int64"])}


def _draw_median(ctx):
    axis = ctx.choose([None, *range(len(ctx.shape))])
    if axis is not None:
        ctx.include(0, max(ctx.shape))  # (values, indices) along one axis
    return (ctx.x,), {"axis": axis, "keepdims": ctx.choose([False, True])}


def _draw_unique(ctx):
    ctx.include(0, math.prod(ctx.shape))  # indices, inverse and counts
    return (ctx.x,), {"sorted": ctx.choose([True, False]),
                      "return_index": ctx.choose([False, True]),
                      "return_inverse": ctx.choose([False, True]),
                      "return_counts": ctx.choose([False, True])}


def _draw_dynamic_strided_slice(ctx):
    begin, end, strides = [], [], []
    for d in ctx.shape:
        b = ctx.integers(-d, d - 1)
        begin.append(b)
        end.append(ctx.integers(-d - 1, d + 1))
        strides.append(ctx.choose([1, 2, -1]))
    rows = [np.array(v, "int64") for v in (begin, end, strides)]
    return (ctx.x, *rows), {}


declares_draw("sort", dtypes=NUMBERS, build=_draw_sort)
declares_draw("argsort", dtypes=NUMBERS, build=_draw_argsort)
declares_draw("topk", dtypes=NUMBERS, build=_draw_topk)
declares_draw("median", dtypes=NUMBERS, build=_draw_median)
# data-dependent shapes: the results have a known rank and unknown extents,
# so later operators do not use them (the generator tracks static shapes)
declares_draw("unique", dtypes=NUMBERS, ranks=(1, 2, 3), build=_draw_unique)
declares_draw("nonzero", dtypes=ANY_DTYPE, build=lambda ctx: ((ctx.x,), {}), out="index")
declares_draw("dynamic_strided_slice", dtypes=ANY_DTYPE, build=_draw_dynamic_strided_slice)
