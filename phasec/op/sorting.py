"""Sorting (TVM 0.27's ``relax.op.sorting``): sort, argsort, topk.

Like TVM 0.27 on the CPU (which calls packed sorts), these lower to packed
functions registered in :mod:`phasec.runtime.packed` (numpy's stable sorts),
through
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
"""

from __future__ import annotations

from phasec import arith
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op._common import (
    OpPattern, as_bool, as_dtype, as_int, attrs_of, define, norm_axis, one_of, tensor_arg,
)
from phasec.op._lowering import legalizes_to_relax
from phasec.op._packed import lower_to_packed, packed
from phasec.op.draw import NUMBERS, declares_draw

__all__: list[str] = []


def _int_dtype(v):
    d = as_dtype(v)
    if not tir.is_int(d):
        raise ValueError(f"an integer dtype is required, got {d!r}")
    return d


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
       reference=lambda x, axis=-1, descending=False: packed("phasec.sort")(x, axis, descending),
       pattern=OpPattern.OPAQUE, doc="Stable sort along axis.")
define("argsort", ("data",), _infer_argsort,
       attrs={**_SORT_ATTRS, "dtype": ("int32", _int_dtype)},
       reference=lambda data, axis=-1, descending=False, dtype="int32":
       packed("phasec.argsort")(data, axis, descending, dtype),
       pattern=OpPattern.OPAQUE, doc="Indices of a stable sort along axis.")


def _sort_args(a):
    return [a["axis"], a["descending"]]


legalizes_to_relax("sort")(lower_to_packed("phasec.sort", _sort_args))
legalizes_to_relax("argsort")(lower_to_packed("phasec.argsort", lambda a: [*_sort_args(a), a["dtype"]]))


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
       packed("phasec.topk")(data, k, axis, ret_type, largest, dtype),
       pattern=OpPattern.OPAQUE, doc="The k largest (smallest) elements along axis, in order.")
legalizes_to_relax("topk")(lower_to_packed("phasec.topk", lambda a: [
    a["k"], a["axis"], a["ret_type"], a["largest"], a["dtype"]]))


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


declares_draw("sort", dtypes=NUMBERS, build=_draw_sort)
declares_draw("argsort", dtypes=NUMBERS, build=_draw_argsort)
declares_draw("topk", dtypes=NUMBERS, build=_draw_topk)
