"""matmul and reductions (sum, mean, max, min, prod).

``matmul`` follows ``numpy.matmul``: 1-D operands are promoted (a leading or
trailing 1 that is removed from the result) and batch dimensions broadcast.
With ``out_dtype`` set the operands are converted to it before multiplying
(so int8 x int8 -> int32 accumulates in int32); otherwise both operands need
the same dtype.

Reductions take ``axis=None`` (all axes) or a tuple of axes, and
``keepdims``. ``mean`` of integers truncates the sum divided by the count.
"""

from __future__ import annotations

import numpy as np

from .. import arith, tir
from ..struct_info import TensorStructInfo
from ._common import (
    OpPattern, as_bool, as_dtype, attrs_of, binary_dtype, broadcast_dims, define, err,
    int_tuple, norm_axes, opt, tensor_arg,
)

__all__: list[str] = []


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------

def _infer_matmul(call, ctx):
    a = tensor_arg(call, 0, ctx)
    b = tensor_arg(call, 1, ctx)
    out_dtype = attrs_of(call)["out_dtype"]
    dtype = out_dtype if out_dtype != "void" else binary_dtype(call, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise err(call, "matmul does not accept 0-d (scalar) operands; use R.multiply")
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, out_ndim)
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if arith.prove_not_equal(ka, kb):
        from ..infer import prim_expr_to_str as s
        raise err(call, f"matmul reduction lengths differ: {s(ka)} (last axis of the first "
                        f"operand) vs {s(kb)} ({'first' if b.ndim == 1 else 'second-to-last'} "
                        "axis of the second operand)")
    batch = broadcast_dims(call, a.shape[:-2], b.shape[:-2], ("batch dims of x1", "batch dims of x2"))
    if batch is None:
        return TensorStructInfo(None, dtype, out_ndim)
    dims = list(batch)
    if a.ndim > 1:
        dims.append(a.shape[-2])
    if b.ndim > 1:
        dims.append(b.shape[-1])
    return TensorStructInfo(tuple(dims), dtype)


def _matmul_ref(x1, x2, out_dtype="void"):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    dtype = np.dtype(x1.dtype if out_dtype == "void" else out_dtype)
    # Float products are summed in float64 and rounded once: BLAS's float32
    # kernels sum the edge columns of a matrix in another order than the
    # others, so equal columns could give unequal results (a softmax over
    # large, equal logits then stops being uniform).
    acc = np.float64 if dtype.kind == "f" and dtype.itemsize < 8 else dtype
    return np.asarray(np.matmul(x1.astype(acc), x2.astype(acc))).astype(dtype)


define("matmul", ("x1", "x2"), _infer_matmul, attrs={"out_dtype": ("void", as_dtype)},
       reference=_matmul_ref, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="Matrix product with numpy.matmul semantics (1-D operands, batch broadcasting).")


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

for _name, _ref in (("sum", _reduce_ref(np.sum)), ("mean", _mean_ref),
                    ("max", _reduce_ref(np.max)), ("min", _reduce_ref(np.min)),
                    ("prod", _reduce_ref(np.prod))):
    define(_name, ("x",), _infer_reduce, attrs=_REDUCE_ATTRS, reference=_ref,
           pattern=OpPattern.COMM_REDUCE,
           doc=f"Reduce by {_name} over ``axis`` (None: all axes), optionally keeping dims.")

