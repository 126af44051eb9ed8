"""Sets (TVM 0.27's ``relax.op.set``): unique, nonzero, whose result shapes
depend on the data. They lower to packed functions, as the sorts
(:mod:`phasec.op._packed`).

* ``unique(x, sorted=True, return_index=False, return_inverse=False,
  return_counts=False, axis=None)``: numpy.unique (first-occurrence order
  when not sorted); a tuple when a return_ flag is set. Data-dependent:
  known rank, unknown length (TVM's struct info).
* ``nonzero(x)``: the int64 (ndim, count) coordinates of the non-zero
  elements, numpy.nonzero stacked; (2-D, unknown count).
"""

from __future__ import annotations

import math

from phasec.ir import tir
from phasec.ir.expr import ExternFunc, PrimValue
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op._common import (
    OpPattern, as_bool, as_int, attrs_of, define, norm_axis, opt, tensor_arg,
)
from phasec.op._lowering import legalizes_to_relax
from phasec.op._packed import bool_value, lower_to_packed, packed
from phasec.op.draw import ANY_DTYPE, NUMBERS, declares_draw
from phasec.op.calls import call_op

__all__: list[str] = []


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
    return packed("relax.run.unique")(x, sorted, return_index, return_inverse, return_counts,
                                       axis is not None, 0 if axis is None else axis)


define("unique", ("x",), _infer_unique,
       attrs={"sorted": (True, as_bool), "return_index": (False, as_bool),
              "return_inverse": (False, as_bool), "return_counts": (False, as_bool),
              "axis": (None, opt(as_int))},
       reference=_unique_ref, pattern=OpPattern.OPAQUE,
       doc="numpy.unique (a tuple with the requested index/inverse/counts).")


@legalizes_to_relax("unique")
def _unique(call):

    a = attrs_of(call)
    extra = [bool_value(a[k]) for k in ("sorted", "return_index", "return_inverse",
                                      "return_counts")]
    extra += [bool_value(a["axis"] is not None), PrimValue(tir.IntImm(a["axis"] or 0))]
    return call_op("call_pure_packed", ExternFunc("relax.run.unique"), call.args[0], *extra,
                   sinfo_args=[call.struct_info], span=call.span)


def _infer_nonzero(call, ctx):
    tensor_arg(call, 0, ctx)
    return TensorStructInfo(None, "int64", 2)


define("nonzero", ("x",), _infer_nonzero,
       reference=lambda x: packed("relax.run.nonzero")(x), pattern=OpPattern.OPAQUE,
       doc="int64 (ndim, count) coordinates of the non-zero elements.")
legalizes_to_relax("nonzero")(lower_to_packed("relax.run.nonzero", lambda a: []))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_unique(ctx):
    ctx.include(0, math.prod(ctx.shape))  # indices, inverse and counts
    rank = len(ctx.shape)
    # an axis most of the time (unique rows, columns...), else the flattened tensor
    axis = ctx.choose([*range(-rank, rank), None])
    return (ctx.x,), {"sorted": ctx.choose([True, False]),
                      "return_index": ctx.choose([False, True]),
                      "return_inverse": ctx.choose([False, True]),
                      "return_counts": ctx.choose([False, True]), "axis": axis}


# data-dependent shapes: the results have a known rank and unknown extents,
# so later operators do not use them (the generator tracks static shapes)
declares_draw("unique", dtypes=NUMBERS, ranks=(1, 2, 3), build=_draw_unique)
declares_draw("nonzero", dtypes=ANY_DTYPE, build=lambda ctx: ((ctx.x,), {}), out="index")
