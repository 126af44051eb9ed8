"""Gathers and scatters (TVM 0.27's ``relax.op.manipulate``): gather_elements,
gather_nd, scatter_elements, scatter_nd, index_put, index_tensor (indices read
from data), slice_scatter and one_hot.

Every index read from data is checked, in the reference
(:func:`~phasec.op._common.check_indices`) and in the kernels
(``T.checked_index``): ``-dim <= i < dim``, negative indices counting from
the end (as numpy, ONNX and torch allow); anything else is an
IndexOutOfRangeError naming the operator, the value and the range — never a
clamp, never a read or write outside the tensor.

* ``gather_elements(data, indices, axis=0)``: ``out[p] = data[p with
  p[axis] replaced by indices[p]]`` (ONNX GatherElements); indices has
  data's rank, the result its shape.
* ``gather_nd(data, indices, batch_dims=0)``: the last axis of int64 ``indices``
  (length k) indexes the k axes of ``data`` after the ``batch_dims``
  leading (shared) ones; result shape ``indices.shape[:-1] +
  data.shape[batch_dims + k:]`` (ONNX GatherND).
* ``scatter_elements(data, indices, updates, axis=0, reduction="update")``:
  a copy of data where, for each position p of indices (row-major order),
  ``out[p with p[axis] = indices[p]] = combine(old, updates[p])``;
  reductions as TVM 0.27: update (last write wins), add, mul, max, min,
  mean (``(old + update) / 2`` applied in order, TVM's definition).
* ``scatter_nd(data, indices, updates, reduction="update")``: the last axis
  of ``indices`` (length k) addresses the first k axes of data; ``updates``
  has shape ``indices.shape[:-1] + data.shape[k:]``; reductions update,
  add, mul, max, min, applied in row-major order of the index positions.
* ``index_put(data, (i0, ..., ik-1), values, accumulate=False)``: one index
  tensor per dimension of data (TVM 0.27's rule); they broadcast together
  to a shape B, ``values`` broadcasts to B; each position writes (or with
  ``accumulate`` adds) its value, in row-major order (torch's index_put_).
  (The kernel and reference also handle fewer index tensors, trailing axes
  taken whole, should the rule be relaxed.)
* ``index_tensor(data, (i0, ..., ik-1))``: numpy's ``data[i0, ..., ik-1]``
  with k <= rank index tensors broadcast together: shape ``B +
  data.shape[k:]``.
* ``slice_scatter(input, src, start, end, step, axis=0)``: a copy of input
  whose ``start:end:step`` slice of ``axis`` (Python slice rules, positive
  step) is src (torch.slice_scatter); start/end/step are prim values.
* ``one_hot(indices, on_value, off_value, depth, axis=-1)``: a new axis of
  ``depth`` at ``axis`` (-1: last); ``on_value`` where the position equals
  the index, ``off_value`` elsewhere. An index outside ``[0, depth)`` gives
  a row of ``off_value`` (TVM's rule; it reads no memory with it).

The scatters are kernels written in TIR (:func:`phasec.te.extern`): a
copy of the data, then one pass over the index positions. Scalar operands
(slice_scatter's bounds, one_hot's values) are prim values
(``R.prim_value(3)``), as in TVM 0.27.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import PrimValue
from phasec.ir.struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo
from phasec.ir.tir import BinaryOp, BufferStore, PrimExpr, Select
from phasec.op._common import (
    REQUIRED, OpPattern, as_bool, as_int, attrs_of, broadcast_dims, check_indices, define, err,
    norm_axis, one_of, tensor_arg,
)
from phasec.op._lowering import LegalizeError, _out, _script, _tensor, legalizes
from phasec.op._tirgen import checked, copy_buffer, i64, nest, seq
from phasec.op.draw import ANY_DTYPE, NUMBERS, data_like, declares_draw
from phasec.op.create import prim_array, prim_expr, prim_operand
from phasec.ir.text import expr_to_str, prim_expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo

__all__ = ["int_indices"]


def int_indices(call, idx: TensorStructInfo, k: int = 1) -> None:
    """Raise unless operand ``k`` (``idx``) has an integer dtype."""
    if idx.dtype != "void" and not tir.is_int(idx.dtype):
        raise err(call, f"{expr_to_str(call.op)} needs integer indices, but "
                        f"{expr_to_str(call.args[k])} has dtype {idx.dtype}")


def _same_dtype(call, data: TensorStructInfo, upd: TensorStructInfo, k: int) -> None:
    if "void" not in (data.dtype, upd.dtype) and data.dtype != upd.dtype:
        raise err(call, f"{expr_to_str(call.op)}: {expr_to_str(call.args[k])} has dtype "
                        f"{upd.dtype} but the data has dtype {data.dtype}")


def _dims_differ(a, b) -> bool:
    return len(a) != len(b) or any(arith.prove_not_equal(x, y) for x, y in zip(a, b))


# ---------------------------------------------------------------------------
# gather_elements
# ---------------------------------------------------------------------------

def _infer_gather_elements(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    idx = tensor_arg(call, 1, ctx, "indices")
    int_indices(call, idx)
    if data.ndim != -1 and idx.ndim != -1 and data.ndim != idx.ndim:
        raise err(call, f"gather_elements needs indices of the data's rank ({data.ndim}), got "
                        f"rank {idx.ndim}")
    ndim = data.ndim if data.ndim != -1 else idx.ndim
    if ndim != -1:
        norm_axis(call, attrs_of(call)["axis"], ndim)
    return TensorStructInfo(idx.shape, data.dtype, ndim)


def _gather_elements_ref(data, indices, axis=0):
    data, idx = np.asarray(data), np.asarray(indices).astype(np.int64)
    check_indices(idx, data.shape[axis], "gather_elements")
    # indices may be shorter than the data on the other axes (ONNX
    # GatherElements); numpy's take_along_axis wants them to broadcast
    ax = axis % data.ndim
    data = data[tuple(slice(None) if d == ax else slice(0, s) for d, s in enumerate(idx.shape))]
    return np.take_along_axis(data, idx, axis=ax)


define("gather_elements", ("data", "indices"), _infer_gather_elements,
       attrs={"axis": (0, as_int)}, reference=_gather_elements_ref, pattern=OpPattern.INJECTIVE,
       doc="ONNX GatherElements: data with the axis index taken from indices.")


@legalizes("gather_elements")
def _gather_elements(call, inputs):
    data, idx = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    ax = attrs_of(call)["axis"] % data.ndim
    return te.compute(out.shape, lambda *i: data[tuple(
        checked(idx[i], data.shape[ax]) if d == ax else v for d, v in enumerate(i))],
        name="T_gather_elements")


# ---------------------------------------------------------------------------
# gather_nd
# ---------------------------------------------------------------------------

def _infer_gather_nd(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    idx = tensor_arg(call, 1, ctx, "indices")
    if idx.dtype not in ("void", "int64"):  # TVM 0.27's rule (ONNX GatherND: int64)
        raise err(call, f"gather_nd needs int64 indices, but {expr_to_str(call.args[1])} has "
                        f"dtype {idx.dtype}")
    bd = attrs_of(call)["batch_dims"]
    if bd < 0:
        raise err(call, f"gather_nd: batch_dims must be non-negative, got {bd}")
    if idx.ndim == 0:
        raise err(call, "gather_nd needs indices of rank at least 1")
    if data.shape is None or idx.shape is None:
        return TensorStructInfo(None, data.dtype, -1)
    k = arith.const_int(idx.shape[-1])
    if k is None:
        return TensorStructInfo(None, data.dtype, -1)
    if bd >= idx.ndim:
        raise err(call, f"gather_nd: batch_dims {bd} must be less than the indices' rank "
                        f"{idx.ndim}")
    if bd + k > data.ndim:
        raise err(call, f"gather_nd: {k} indexed axes after {bd} batch axes exceed the data's "
                        f"rank {data.ndim}")
    if _dims_differ(idx.shape[:bd], data.shape[:bd]):
        raise err(call, "gather_nd: the batch dimensions of data and indices differ")
    return TensorStructInfo(tuple(idx.shape[:-1]) + tuple(data.shape[bd + k:]), data.dtype)


def _gather_nd_ref(data, indices, batch_dims=0):
    data, idx = np.asarray(data), np.asarray(indices).astype(np.int64)
    bd, k = batch_dims, idx.shape[-1]
    for j in range(k):
        check_indices(idx[..., j], data.shape[bd + j], "gather_nd")
    batch = idx.shape[:bd]
    out = np.empty(idx.shape[:-1] + data.shape[bd + k:], data.dtype)
    for b in np.ndindex(*batch):
        sub, ind = data[b], idx[b]
        out[b] = sub[tuple(np.moveaxis(ind, -1, 0))]
    return out


define("gather_nd", ("data", "indices"), _infer_gather_nd, attrs={"batch_dims": (0, as_int)},
       reference=_gather_nd_ref, pattern=OpPattern.INJECTIVE,
       doc="ONNX GatherND: the indices' last axis addresses axes of data after batch_dims.")


@legalizes("gather_nd")
def _gather_nd(call, inputs):
    data, idx = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    bd = attrs_of(call)["batch_dims"]
    k = arith.const_int(idx.shape[-1])
    if k is None:
        raise LegalizeError(f"{_script(call)}: the indices' last dimension must be known")
    lead = idx.ndim - 1

    def body(*i):
        pos = tuple(i[:lead])
        ind = list(i[:bd])
        for j in range(k):
            ind.append(checked(idx[pos + (i64(j),)], data.shape[bd + j]))
        ind.extend(i[lead:])
        return data[tuple(ind)]
    return te.compute(out.shape, body, name="T_gather_nd")


# ---------------------------------------------------------------------------
# scatter_elements / scatter_nd: reductions
# ---------------------------------------------------------------------------

_NP_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _combine_tir(reduction: str, old: PrimExpr, new: PrimExpr) -> PrimExpr:
    if reduction == "update":
        return new
    if reduction == "add":
        return BinaryOp("+", old, new)
    if reduction == "mul":
        return BinaryOp("*", old, new)
    if reduction in ("max", "min"):
        return BinaryOp(reduction, old, new)
    two = te.const(2, old.dtype)  # mean, TVM's pairwise definition
    return BinaryOp("/" if tir.is_float(old.dtype) else "//", BinaryOp("+", old, new), two)


def _scatter_ref(out: np.ndarray, targets: Sequence[np.ndarray], values: np.ndarray,
                 reduction: str) -> np.ndarray:
    """Apply ``values`` at the (already checked, normalized) index arrays in
    row-major order of the positions."""
    flat = np.ravel_multi_index(tuple(targets), out.shape) if out.size else np.zeros(0, np.int64)
    flat, values = flat.reshape(-1), values.reshape(-1)
    view = out.reshape(-1)
    if reduction == "update":
        # the last write to each position wins: keep each position's last occurrence
        _, last = np.unique(flat[::-1], return_index=True)
        keep = flat.size - 1 - last
        view[flat[keep]] = values[keep]
    elif reduction == "mean":
        for p, v in zip(flat, values):
            view[p] = (view[p] + v) / 2 if out.dtype.kind == "f" else (view[p] + v) // 2
    else:
        _NP_AT[reduction].at(view, flat, values)
    return out


_ELEM_REDUCTIONS = ("update", "add", "mul", "mean", "max", "min")
_ND_REDUCTIONS = ("update", "add", "mul", "max", "min")


# ---------------------------------------------------------------------------
# scatter_elements
# ---------------------------------------------------------------------------

def _infer_scatter_elements(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    idx = tensor_arg(call, 1, ctx, "indices")
    upd = tensor_arg(call, 2, ctx, "updates")
    int_indices(call, idx)
    _same_dtype(call, data, upd, 2)
    if data.ndim != -1 and idx.ndim != -1 and data.ndim != idx.ndim:
        raise err(call, f"scatter_elements needs indices of the data's rank ({data.ndim}), got "
                        f"rank {idx.ndim}")
    if idx.shape is not None and upd.shape is not None and _dims_differ(idx.shape, upd.shape):
        raise err(call, f"scatter_elements needs updates shaped like the indices, but "
                        f"{expr_to_str(call.args[2])} has struct info {sinfo_to_str(upd)} and "
                        f"{expr_to_str(call.args[1])} {sinfo_to_str(idx)}")
    if data.ndim != -1:
        norm_axis(call, attrs_of(call)["axis"], data.ndim)
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _scatter_elements_ref(data, indices, updates, axis=0, reduction="update"):
    data, idx = np.asarray(data), np.asarray(indices).astype(np.int64)
    ax = axis % data.ndim
    check_indices(idx, data.shape[ax], "scatter_elements")
    pos = list(np.indices(idx.shape, sparse=False)) if idx.ndim else []
    pos[ax] = np.where(idx < 0, idx + data.shape[ax], idx)
    return _scatter_ref(data.copy(), pos, np.asarray(updates), reduction)


define("scatter_elements", ("data", "indices", "updates"), _infer_scatter_elements,
       attrs={"axis": (0, as_int), "reduction": ("update", one_of(*_ELEM_REDUCTIONS))},
       reference=_scatter_elements_ref, pattern=OpPattern.OPAQUE,
       doc="ONNX ScatterElements: write updates at data positions with the axis index from indices.")


def _scatter_kernel(name: str, reduction: str, dtype: str, out_shape, ins: list[te.Tensor],
                    positions: Callable[[list[tir.Buffer]], tuple[Sequence[PrimExpr], Callable]]
                    ) -> te.Tensor:
    """copy data, then for each index position: out[target] = combine(out[target], value)."""
    def build(bufs, o):
        extents, at = positions(bufs)

        def store(p):
            target, value = at(bufs, p)
            return BufferStore(o, _combine_tir(reduction, o[target], value), target)
        return seq(copy_buffer(bufs[0], o), nest(extents, store, "p"))
    return te.extern(out_shape, dtype, ins, build, name=name)


@legalizes("scatter_elements")
def _scatter_elements(call, inputs):
    data, idx, upd = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    a = attrs_of(call)
    ax = a["axis"] % data.ndim

    def positions(bufs):
        def at(bufs, p):
            d, ib, ub = bufs
            target = tuple(checked(ib[p], d.shape[ax]) if k == ax else v for k, v in enumerate(p))
            return target, ub[p]
        return bufs[1].shape, at
    return _scatter_kernel("T_scatter_elements", a["reduction"], out.dtype, out.shape,
                           [data, idx, upd], positions)


# ---------------------------------------------------------------------------
# scatter_nd
# ---------------------------------------------------------------------------

def _infer_scatter_nd(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    idx = tensor_arg(call, 1, ctx, "indices")
    upd = tensor_arg(call, 2, ctx, "updates")
    int_indices(call, idx)
    _same_dtype(call, data, upd, 2)
    if idx.ndim == 0:
        raise err(call, "scatter_nd needs indices of rank at least 1")
    if data.shape is not None and idx.shape is not None and upd.shape is not None:
        k = arith.const_int(idx.shape[-1])
        if k is not None:
            if k > data.ndim:
                raise err(call, f"scatter_nd: the indices address {k} axes but the data has "
                                f"rank {data.ndim}")
            want = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
            if _dims_differ(want, upd.shape):
                raise err(call, f"scatter_nd needs updates of shape indices.shape[:-1] + "
                                f"data.shape[{k}:], but {expr_to_str(call.args[2])} has struct "
                                f"info {sinfo_to_str(upd)}")
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _scatter_nd_ref(data, indices, updates, reduction="update"):
    data, idx = np.asarray(data), np.asarray(indices).astype(np.int64)
    k = idx.shape[-1]
    lead = idx.shape[:-1]
    rest = data.shape[k:]
    targets = []
    for j in range(k):
        check_indices(idx[..., j], data.shape[j], "scatter_nd")
        col = np.where(idx[..., j] < 0, idx[..., j] + data.shape[j], idx[..., j])
        targets.append(np.broadcast_to(col.reshape(lead + (1,) * len(rest)), lead + rest))
    grid = np.indices(rest) if rest else []
    for g in grid:
        targets.append(np.broadcast_to(g, lead + rest))
    return _scatter_ref(data.copy(), targets, np.asarray(updates), reduction)


define("scatter_nd", ("data", "indices", "updates"), _infer_scatter_nd,
       attrs={"reduction": ("update", one_of(*_ND_REDUCTIONS))}, reference=_scatter_nd_ref,
       pattern=OpPattern.OPAQUE,
       doc="ONNX ScatterND: the indices' last axis addresses the leading axes of data.")


@legalizes("scatter_nd")
def _scatter_nd(call, inputs):
    data, idx, upd = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    k = arith.const_int(idx.shape[-1])
    if k is None:
        raise LegalizeError(f"{_script(call)}: the indices' last dimension must be known")
    lead = idx.ndim - 1

    def positions(bufs):
        d, ib, ub = bufs

        def at(bufs, p):
            pos = tuple(p[:lead])
            target = tuple(checked(ib[pos + (i64(j),)], d.shape[j]) for j in range(k))
            return target + tuple(p[lead:]), ub[p]
        return tuple(ub.shape), at
    return _scatter_kernel("T_scatter_nd", attrs_of(call)["reduction"], out.dtype, out.shape,
                           [data, idx, upd], positions)


# ---------------------------------------------------------------------------
# index_put
# ---------------------------------------------------------------------------

def _index_put_parts(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    tup = arg_sinfo(call.args[1], ctx) if len(call.args) > 1 else None
    if isinstance(tup, TensorStructInfo):
        fields = [tup]
    elif isinstance(tup, TupleStructInfo) and all(isinstance(f, TensorStructInfo)
                                                  for f in tup.fields):
        fields = list(tup.fields)
    else:
        raise err(call, "index_put expects a tuple of index tensors as its second operand, but "
                        f"{expr_to_str(call.args[1]) if len(call.args) > 1 else 'nothing'} has "
                        f"struct info {sinfo_to_str(tup)}")
    values = tensor_arg(call, 2, ctx, "values")
    return data, fields, values


def _infer_index_put(call, ctx):
    data, fields, values = _index_put_parts(call, ctx)
    if not fields:
        raise err(call, "index_put needs at least one index tensor")
    for f in fields:
        if f.dtype != "void" and not tir.is_int(f.dtype):
            raise err(call, f"index_put needs integer index tensors, got dtype {f.dtype}")
    _same_dtype(call, data, values, 2)
    if data.ndim != -1 and len(fields) != data.ndim:  # TVM 0.27: one per dimension
        raise err(call, f"index_put needs one index tensor per dimension of the data "
                        f"({data.ndim}), got {len(fields)}")
    if data.shape is not None and values.shape is not None and \
            all(f.shape is not None for f in fields):
        names = ("the index tensors", "the index tensors")
        b: tuple = tuple(fields[0].shape)
        for f in fields[1:]:
            b = broadcast_dims(call, b, f.shape, names) or b
        target = b + tuple(data.shape[len(fields):])
        broadcast_dims(call, target, values.shape, ("the indexed positions", "the values"))
        if len(values.shape) > len(target):
            raise err(call, f"index_put: values of rank {len(values.shape)} do not broadcast to "
                            f"the {len(target)}-d indexed positions")
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _index_put_ref(data, indices, values, accumulate=False):
    data = np.asarray(data)
    idx = [np.asarray(i).astype(np.int64) for i in indices]
    k = len(idx)
    idx = np.broadcast_arrays(*idx)
    b = idx[0].shape
    rest = data.shape[k:]
    shape = b + rest
    targets = []
    for j, ind in enumerate(idx):
        check_indices(ind, data.shape[j], "index_put")
        ind = np.where(ind < 0, ind + data.shape[j], ind)
        targets.append(np.broadcast_to(ind.reshape(b + (1,) * len(rest)), shape))
    for g in (np.indices(rest) if rest else []):
        targets.append(np.broadcast_to(g, shape))
    vals = np.broadcast_to(np.asarray(values, data.dtype), shape)
    return _scatter_ref(data.copy(), targets, vals, "add" if accumulate else "update")


define("index_put", ("data", "indices", "values"), _infer_index_put,
       attrs={"accumulate": (False, as_bool)}, reference=_index_put_ref, pattern=OpPattern.OPAQUE,
       doc="torch index_put_: write (or add) values at the positions the index tensors give.")


@legalizes("index_put")
def _index_put(call, inputs):
    data = _tensor(inputs, 0, call)
    idx = inputs[1] if isinstance(inputs[1], list) else [inputs[1]]
    values = _tensor(inputs, 2, call)
    out = _out(call)
    k = len(idx)

    def positions(bufs):
        # shapes from the buffers: their symbolic dimensions are the kernel's
        d, vb = bufs[0], bufs[-1]
        ibs = bufs[1:-1]
        bshape: tuple = tuple(ibs[0].shape)
        for t in ibs[1:]:
            bshape = broadcast_dims(call, bshape, t.shape, ("indices", "indices")) or bshape
        shape = bshape + tuple(d.shape[k:])

        def load_b(buf, p, full):  # numpy broadcasting of a buffer against ``full``
            off = len(full) - len(buf.shape)
            ind = tuple(i64(0) if arith.const_int(s) == 1 and arith.const_int(full[off + q]) != 1
                        else p[off + q] for q, s in enumerate(buf.shape))
            return buf[ind]

        def at(bufs, p):
            pb = p[:len(bshape)]
            target = tuple(checked(load_b(ib, pb, bshape), d.shape[j]) for j, ib in enumerate(ibs))
            return target + tuple(p[len(bshape):]), load_b(vb, p, shape)
        return shape, at
    return _scatter_kernel("T_index_put", "add" if attrs_of(call)["accumulate"] else "update",
                           out.dtype, out.shape, [data, *idx, values], positions)


# ---------------------------------------------------------------------------
# index_tensor
# ---------------------------------------------------------------------------

def _infer_index_tensor(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    tup = arg_sinfo(call.args[1], ctx) if len(call.args) > 1 else None
    if isinstance(tup, TensorStructInfo):
        fields = [tup]
    elif isinstance(tup, TupleStructInfo) and tup.fields and all(
            isinstance(f, TensorStructInfo) for f in tup.fields):
        fields = list(tup.fields)
    else:
        raise err(call, "index_tensor expects a non-empty tuple of index tensors, but "
                        f"{expr_to_str(call.args[1]) if len(call.args) > 1 else 'nothing'} has "
                        f"struct info {sinfo_to_str(tup)}")
    for f in fields:
        if f.dtype != "void" and not tir.is_int(f.dtype):
            raise err(call, f"index_tensor needs integer index tensors, got dtype {f.dtype}")
    if data.ndim != -1 and len(fields) > data.ndim:
        raise err(call, f"index_tensor: {len(fields)} index tensors for data of rank {data.ndim}")
    if data.shape is None or any(f.shape is None for f in fields):
        return TensorStructInfo(None, data.dtype, -1)
    b: tuple = tuple(fields[0].shape)
    for f in fields[1:]:
        b = broadcast_dims(call, b, f.shape, ("the index tensors", "the index tensors"))
        if b is None:
            return TensorStructInfo(None, data.dtype, -1)
    return TensorStructInfo(b + tuple(data.shape[len(fields):]), data.dtype)


def _index_tensor_ref(data, indices):
    data = np.asarray(data)
    idx = [np.asarray(i).astype(np.int64) for i in indices]
    for j, i in enumerate(idx):
        check_indices(i, data.shape[j], "index_tensor")
    return data[tuple(np.broadcast_arrays(*idx))].copy()


define("index_tensor", ("data", "indices"), _infer_index_tensor, reference=_index_tensor_ref,
       pattern=OpPattern.INJECTIVE,
       doc="numpy advanced indexing data[i0, i1, ...] by broadcast index tensors.")


@legalizes("index_tensor")
def _index_tensor(call, inputs):
    data = _tensor(inputs, 0, call)
    idx = inputs[1] if isinstance(inputs[1], list) else [inputs[1]]
    out = _out(call)
    k = len(idx)
    nb = len(out.shape) - (data.ndim - k)

    def body(*i):
        pos = i[:nb]
        ind = []
        for j, t in enumerate(idx):
            off = nb - t.ndim
            load = t[tuple(i64(0) if arith.const_int(s) == 1 and arith.const_int(out.shape[off + q]) != 1
                           else pos[off + q] for q, s in enumerate(t.shape))]
            ind.append(checked(load, data.shape[j]))
        return data[tuple(ind) + tuple(i[nb:])]
    return te.compute(out.shape, body, name="T_index_tensor")


# ---------------------------------------------------------------------------
# slice_scatter
# ---------------------------------------------------------------------------

def _infer_slice_scatter(call, ctx):
    x = tensor_arg(call, 0, ctx, "input_tensor")
    src = tensor_arg(call, 1, ctx, "src")
    for k, what in ((2, "start"), (3, "end"), (4, "step")):
        s = arg_sinfo(call.args[k], ctx) if len(call.args) > k else None
        if not isinstance(s, PrimStructInfo) or not tir.is_int(s.dtype):
            raise err(call, f"slice_scatter expects an integer R.prim_value for {what}, got "
                            f"{sinfo_to_str(s)}")
    if "void" not in (x.dtype, src.dtype) and x.dtype != src.dtype:
        raise err(call, f"slice_scatter: src has dtype {src.dtype} but the data has {x.dtype}")
    if x.ndim != -1 and src.ndim != -1 and x.ndim != src.ndim:
        raise err(call, f"slice_scatter needs src of the data's rank ({x.ndim}), got {src.ndim}")
    if x.ndim == -1:
        return TensorStructInfo(x.shape, x.dtype, x.ndim)
    ax = norm_axis(call, attrs_of(call)["axis"], x.ndim)
    vals = [arith.const_int(call.args[k].struct_info.value)
            if getattr(call.args[k].struct_info, "value", None) is not None else None
            for k in (2, 3, 4)]
    if vals[2] is not None and vals[2] <= 0:
        raise err(call, f"slice_scatter: step must be positive, got {vals[2]}")
    if x.shape is not None and src.shape is not None:
        for d in range(x.ndim):
            if d != ax and arith.prove_not_equal(x.shape[d], src.shape[d]):
                raise err(call, f"slice_scatter: src's axis {d} has size "
                                f"{prim_expr_to_str(src.shape[d])}, the data's "
                                f"{prim_expr_to_str(x.shape[d])}")
        n = arith.const_int(x.shape[ax])
        m = arith.const_int(src.shape[ax])
        if None not in vals and n is not None and m is not None:
            want = len(range(*slice(*vals).indices(n)))
            if want != m:
                raise err(call, f"slice_scatter: the slice {vals[0]}:{vals[1]}:{vals[2]} of axis "
                                f"{ax} has {want} elements but src has {m}")
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _slice_scatter_ref(input_tensor, src, start, end, step, axis=0):
    x = np.asarray(input_tensor).copy()
    index = [slice(None)] * x.ndim
    index[axis % x.ndim] = slice(int(start), int(end), int(step))
    x[tuple(index)] = np.asarray(src)
    return x


define("slice_scatter", ("input_tensor", "src", "start", "end", "step"), _infer_slice_scatter,
       attrs={"axis": (0, as_int)}, reference=_slice_scatter_ref, pattern=OpPattern.INJECTIVE,
       doc="torch.slice_scatter: data with data[start:end:step] on axis replaced by src.")


@legalizes("slice_scatter")
def _slice_scatter(call, inputs):
    x, src = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    ax = attrs_of(call)["axis"] % x.ndim
    vals = []
    for k in (2, 3, 4):
        v = inputs[k]
        if not isinstance(v, PrimValue):
            raise LegalizeError(f"{_script(call)}: start, end and step must be R.prim_value")
        vals.append(v.value)
    consts = [arith.const_int(v) for v in vals]
    n = arith.const_int(x.shape[ax])
    if None not in consts and n is not None:  # Python slice semantics on a known axis
        begin, _, step = slice(*consts).indices(n)
        start, step_e = i64(begin), i64(step)
    else:  # symbolic: the indices are taken as given (non-negative, in range)
        start, step_e = (e if e.dtype == "int64" else tir.Cast("int64", e)
                         for e in (vals[0], vals[2]))
    count = src.shape[ax]
    last = arith.simplify(BinaryOp("-", count, i64(1)))

    def body(*i):
        off = BinaryOp("-", i[ax], start)
        k = BinaryOp("//", off, step_e)
        hit = BinaryOp("and", BinaryOp("and", BinaryOp(">=", off, i64(0)),
                                       BinaryOp("==", BinaryOp("%", off, step_e), i64(0))),
                       BinaryOp("<", k, count))
        safe = BinaryOp("max", BinaryOp("min", k, last), i64(0))  # both branches are evaluated
        return Select(hit, src[tuple(safe if d == ax else v for d, v in enumerate(i))], x[i])
    return te.compute(out.shape, body, name="T_slice_scatter")


# ---------------------------------------------------------------------------
# one_hot
# ---------------------------------------------------------------------------

def _infer_one_hot(call, ctx):
    idx = tensor_arg(call, 0, ctx, "indices")
    on = prim_operand(call, 1, ctx, "on_value")
    off = prim_operand(call, 2, ctx, "off_value")
    if idx.dtype != "void" and not tir.is_int(idx.dtype):
        raise err(call, f"one_hot needs integer indices, but {expr_to_str(call.args[0])} has "
                        f"dtype {idx.dtype}")
    if on.dtype != off.dtype:
        raise err(call, f"one_hot: on_value ({on.dtype}) and off_value ({off.dtype}) must have "
                        "the same dtype")
    a = attrs_of(call)
    depth, axis = a["depth"], a["axis"]
    if depth <= 0:
        raise err(call, f"one_hot: depth must be positive, got {depth}")
    if idx.ndim == -1:
        return TensorStructInfo(None, on.dtype, -1)
    ndim = idx.ndim + 1
    if not -1 <= axis <= idx.ndim:
        raise err(call, f"one_hot: axis {axis} is out of range for indices of ndim {idx.ndim} "
                        f"(expected -1 <= axis <= {idx.ndim})")
    ax = idx.ndim if axis == -1 else axis
    if idx.shape is None:
        return TensorStructInfo(None, on.dtype, ndim)
    dims = list(idx.shape)
    dims.insert(ax, tir.IntImm(depth))
    return TensorStructInfo(tuple(dims), on.dtype)


def _one_hot_ref(indices, on_value, off_value, depth, axis=-1):
    idx = np.asarray(indices).astype(np.int64)
    on, off = prim_array(on_value), prim_array(off_value)
    ax = idx.ndim if axis == -1 else axis
    pos = np.arange(depth).reshape((depth,) + (1,) * (idx.ndim - ax))
    hit = np.expand_dims(idx, ax) == pos
    return np.where(hit, on, off).astype(on.dtype)


define("one_hot", ("indices", "on_value", "off_value"), _infer_one_hot,
       attrs={"depth": (REQUIRED, as_int), "axis": (-1, as_int)}, reference=_one_hot_ref,
       pattern=OpPattern.INJECTIVE,
       doc="A new axis of depth at axis: on_value where the position equals the index.")


@legalizes("one_hot")
def _one_hot(call, inputs):
    idx = _tensor(inputs, 0, call)
    out = _out(call)
    on = prim_expr(inputs[1], call, "on_value")
    off = prim_expr(inputs[2], call, "off_value")
    axis = attrs_of(call)["axis"]
    ax = idx.ndim if axis == -1 else axis

    def body(*i):
        pos = i[ax]
        rest = tuple(i[:ax]) + tuple(i[ax + 1:])
        return Select(BinaryOp("==", te.cast(idx[rest], "int64"), pos), te.cast(on, out.dtype),
                      te.cast(off, out.dtype))
    return te.compute(out.shape, body, name="T_one_hot")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing): index
# tensors are constants in [0, dim) for the data they index. Not negative
# ones, which phasec reads from the end (as numpy, ONNX and torch) but TVM
# 0.27 does not: phasec fuzz --against tvm reported each such program as
# TVM's results differing (gather_nd); the unit tests cover them.
# ---------------------------------------------------------------------------

def _draw_gather_elements(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    shape = tuple(ctx.integers(1, d) for d in ctx.shape)
    dim = ctx.shape[axis]
    return (ctx.x, ctx.indices(shape, dim)), {"axis": axis}


def _nd_indices(ctx, count: int):
    """(count, k) positions into the first k axes of the data, and k."""
    k = ctx.integers(1, len(ctx.shape))
    cols = [ctx.indices((count, 1), d) for d in ctx.shape[:k]]
    return np.concatenate(cols, axis=1), k


def _draw_gather_nd(ctx):
    idx, _ = _nd_indices(ctx, ctx.integers(1, 3))
    return (ctx.x, idx), {}


def _draw_scatter_elements(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    shape = tuple(ctx.integers(1, d) for d in ctx.shape)
    dim = ctx.shape[axis]
    reduction = ctx.choose(["update", "max", "min", "mean"])
    return ((ctx.x, ctx.indices(shape, dim), data_like(ctx, shape)),
            {"axis": axis, "reduction": reduction})


def _draw_scatter_nd(ctx):
    count = ctx.integers(1, 3)
    idx, k = _nd_indices(ctx, count)
    reduction = ctx.choose(["update", "max", "min"])
    return (ctx.x, idx, data_like(ctx, (count, *ctx.shape[k:]))), {"reduction": reduction}


def _per_axis_indices(ctx, axes: int, count: int) -> list:
    return [ctx.indices((count,), d) for d in ctx.shape[:axes]]


def _draw_index_put(ctx):
    count = ctx.integers(1, 3)
    accumulate = ctx.choose([False, True]) if ctx.dtype != "bool" else False
    values = data_like(ctx, ctx.choose([(count,), ()]))
    if accumulate:  # a position written count times at most
        ctx.include(ctx.lo - count * 3.0, ctx.hi + count * 3.0)
    return ((ctx.x, _per_axis_indices(ctx, len(ctx.shape), count), values),
            {"accumulate": accumulate})


def _draw_index_tensor(ctx):
    count = ctx.integers(1, 3)
    return (ctx.x, _per_axis_indices(ctx, ctx.integers(1, len(ctx.shape)), count)), {}


def _draw_slice_scatter(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    dim = ctx.shape[axis]
    start = ctx.integers(0, dim - 1)
    end = ctx.integers(start + 1, dim)
    step = ctx.choose([1, 2])
    src_shape = list(ctx.shape)
    src_shape[axis] = len(range(start, end, step))
    return (ctx.x, data_like(ctx, src_shape), start, end, step), {"axis": axis}


def _draw_one_hot(ctx):
    on, off = ctx.choose([(1.0, 0.0), (2.0, -1.0)])
    ctx.result_in(off, on)
    depth = ctx.integers(1, 4)
    axis = ctx.choose([-1, *range(len(ctx.shape) + 1)])
    return (ctx.x, PrimValue(on), PrimValue(off)), {"depth": depth, "axis": axis}


declares_draw("gather_elements", dtypes=ANY_DTYPE, build=_draw_gather_elements)
declares_draw("gather_nd", dtypes=ANY_DTYPE, build=_draw_gather_nd)
declares_draw("scatter_elements", dtypes=NUMBERS, build=_draw_scatter_elements)
declares_draw("scatter_nd", dtypes=NUMBERS, build=_draw_scatter_nd)
declares_draw("index_put", dtypes=ANY_DTYPE, build=_draw_index_put)
declares_draw("index_tensor", dtypes=ANY_DTYPE, build=_draw_index_tensor)
declares_draw("slice_scatter", dtypes=ANY_DTYPE, build=_draw_slice_scatter)
declares_draw("one_hot", dtypes=("int32",), ranks=(0, 1, 2, 3), static=False,
              build=_draw_one_hot)
