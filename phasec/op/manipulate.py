"""Shape manipulation and indexing (their definitions and their lowerings).

Operand conventions (the interpreter passes these values to ``reference``):
tensors are numpy arrays, shape operands (``R.shape([...])``) tuples of ints,
tuple operands (``concat``'s ``tensors``) sequences of arrays, prim values
numpy scalars of their dtype (see :mod:`.definitions`).

Semantics worth knowing:

* ``reshape(x, shape)``: the shape is an operand; one ``-1`` is allowed and is
  resolved in the result's struct info (legalizations should read the output
  shape from ``call.struct_info``).
* ``split(x, indices_or_sections, axis)``: an int splits into that many equal
  parts (the dimension must be divisible, as numpy.split); a tuple gives the
  split points (non-decreasing, clipped to the dimension).
* ``strided_slice``: numpy slicing ``x[begin:end:stride]`` on each listed
  axis (clipped to the dimension). For symbolic dimensions the indices are
  assumed in bounds (TVM's ``assume_inbound``); ``end >= 2**31 - 1`` means "to
  the end". A begin / end entry may be symbolic (``index + 1``, as TVM 0.27
  allows); its length follows TVM's clamped form (see :mod:`._symslice`).
* ``take(x, indices, axis)``: numpy.take; ``axis=None`` indexes the flattened
  tensor; indices must lie in [-dim, dim).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.expr import Call, PrimValue
from phasec.ir.text import expr_to_str, prim_expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.ir.struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo
from phasec.te import Tensor
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import (
    REQUIRED, OpPattern, as_bool, as_dtype, check_indices, as_int, attrs_of, define, err,
    int_tuple, norm_axes, norm_axis, one_of, opt, prod, shape_arg, shape_tuple, tensor_arg,
    tensor_sinfo,
)
from phasec.op._lowering import (
    I64, Inputs, LegalizeError, _attrs, _bcast, _clamp, _flat_index, _i64, _is_one, _name,
    _norm_axis, _out, _prod, _script, _static, _tensor, _unravel, legalizes,
)
from phasec.op._symslice import canonical_index, index_tuple, is_symbolic, slice_length, stride_tuple

__all__: list[str] = []

_END = (1 << 31) - 1  # end indices at or beyond this mean "to the end"


def _int_or_tuple(v):
    if isinstance(v, (list, tuple)):
        return int_tuple(v)
    return as_int(v)


def _dtype_required(v):
    d = as_dtype(v)
    if d == "void":
        raise ValueError("a concrete dtype is required")
    return d


def _same_dtype(x: TensorStructInfo, dtype: str) -> TensorStructInfo:
    return TensorStructInfo(x.shape, dtype, x.ndim)


# ---------------------------------------------------------------------------
# reshape / flatten / permute / expand / squeeze / broadcast_to
# ---------------------------------------------------------------------------

def _infer_reshape(call, ctx):
    x = tensor_arg(call, 0, ctx)
    target = shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    values = list(target.values)
    infer_at = [i for i, v in enumerate(values) if arith.const_int(v) == -1]
    if len(infer_at) > 1:
        raise err(call, "reshape allows at most one -1 in the new shape")
    for v in values:
        c = arith.const_int(v)
        if c is not None and c < -1:
            raise err(call, f"reshape: invalid dimension {c} in the new shape")
    if x.shape is None:
        if infer_at:
            return TensorStructInfo(None, x.dtype, len(values))
        return TensorStructInfo(tuple(values), x.dtype)
    total = prod(x.shape)
    if infer_at:
        known = prod([v for i, v in enumerate(values) if i != infer_at[0]])
        t, k = arith.const_int(total), arith.const_int(known)
        if t is not None and k is not None and (k == 0 or t % k):
            raise err(call, f"cannot reshape a tensor of {t} elements into "
                            f"{_shape(values)}: {t} is not divisible by {k}")
        values[infer_at[0]] = arith.simplify(tir.BinaryOp("//", total, known))
    elif arith.prove_not_equal(total, prod(values)):
        raise err(call, f"cannot reshape a tensor of {prim_expr_to_str(total)} elements into "
                        f"{_shape(values)} ({prim_expr_to_str(prod(values))} elements)")
    return TensorStructInfo(tuple(values), x.dtype)


def _shape(values) -> str:
    return "(" + ", ".join(prim_expr_to_str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _reshape_ref(x, shape):
    return np.reshape(np.asarray(x), shape_tuple(shape)).copy()


define("reshape", ("x", "shape"), _infer_reshape, reference=_reshape_ref,
       pattern=OpPattern.INJECTIVE, doc="Reshape to the shape operand (one -1 allowed).")


def _infer_flatten(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 1)
    return TensorStructInfo((prod(x.shape),), x.dtype)


define("flatten", ("x",), _infer_flatten, reference=lambda x: np.asarray(x).reshape(-1).copy(),
       pattern=OpPattern.INJECTIVE, doc="Flatten to one dimension.")


def _infer_permute_dims(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axes = attrs_of(call)["axes"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1 if axes is None else len(axes))
    if axes is None:
        order = list(range(x.ndim - 1, -1, -1))
    else:
        if len(axes) != x.ndim:
            raise err(call, f"permute_dims needs one axis per dimension ({x.ndim}), "
                            f"got axes={tuple(axes)}")
        order = norm_axes(call, axes, x.ndim, "axes")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    return TensorStructInfo(tuple(x.shape[i] for i in order), x.dtype)


def _permute_ref(x, axes=None):
    return np.ascontiguousarray(np.transpose(np.asarray(x), axes))


define("permute_dims", ("x",), _infer_permute_dims, attrs={"axes": (None, opt(int_tuple))},
       reference=_permute_ref, pattern=OpPattern.INJECTIVE,
       doc="Transpose; axes=None reverses the dimensions.")


def _infer_expand_dims(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axis = attrs_of(call)["axis"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    out_ndim = x.ndim + len(axis)
    new_axes = set(norm_axes(call, axis, out_ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    it = iter(x.shape)
    return TensorStructInfo(tuple(tir.IntImm(1) if i in new_axes else next(it)
                                  for i in range(out_ndim)), x.dtype)


def _expand_dims_ref(x, axis):
    return np.expand_dims(np.asarray(x), tuple(axis)).copy()


define("expand_dims", ("x",), _infer_expand_dims, attrs={"axis": (REQUIRED, int_tuple)},
       reference=_expand_dims_ref, pattern=OpPattern.INJECTIVE,
       doc="Insert size-1 dimensions at ``axis`` (positions in the result).")


def _infer_squeeze(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axis = attrs_of(call)["axis"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if axis is None:
        if x.shape is None:
            return TensorStructInfo(None, x.dtype, -1)
        consts = [arith.const_int(d) for d in x.shape]
        if any(c is None for c in consts):
            return TensorStructInfo(None, x.dtype, -1)  # which dims are 1 is unknown
        return TensorStructInfo(tuple(d for d, c in zip(x.shape, consts) if c != 1), x.dtype)
    axes = set(norm_axes(call, axis, x.ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim - len(axes))
    axes = _squeezed(x.shape, axes)
    return TensorStructInfo(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _squeezed(shape: Sequence[tir.PrimExpr], axes: set[int]) -> set[int]:
    """The listed axes squeeze removes. As in TVM 0.27 (and PyTorch), an axis
    whose size is a constant other than 1 is left as it is; a symbolic one is
    removed (it must be 1 at run time)."""
    return {a for a in axes if arith.const_int(shape[a]) in (None, 1)}


def _squeeze_ref(x, axis=None):
    x = np.asarray(x)
    if axis is None:
        return np.squeeze(x).copy()
    return np.squeeze(x, tuple(a % x.ndim for a in axis if x.shape[a % x.ndim] == 1)).copy()


define("squeeze", ("x",), _infer_squeeze, attrs={"axis": (None, opt(int_tuple))},
       reference=_squeeze_ref, pattern=OpPattern.INJECTIVE,
       doc="Remove size-1 dimensions (all of them, or those in ``axis``; a listed axis "
           "of another constant size stays, as in TVM 0.27).")


def _infer_broadcast_to(call, ctx):
    x = tensor_arg(call, 0, ctx)
    target = shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    if x.ndim != -1 and x.ndim > target.ndim:
        raise err(call, f"broadcast_to cannot reduce ndim {x.ndim} to {target.ndim}")
    if x.shape is not None:
        for i in range(1, x.ndim + 1):
            d, t = x.shape[-i], target.values[-i]
            if arith.const_int(d) == 1 or arith.prove_equal(d, t):
                continue
            if arith.const_int(d) is not None and arith.const_int(t) is not None:
                raise err(call, f"cannot broadcast shape {_shape(x.shape)} to "
                                f"{_shape(target.values)}: dimension {prim_expr_to_str(d)} vs "
                                f"{prim_expr_to_str(t)} on axis -{i}")
    return TensorStructInfo(target.values, x.dtype)


def _broadcast_to_ref(x, shape):
    return np.broadcast_to(np.asarray(x), shape_tuple(shape)).copy()


define("broadcast_to", ("x", "shape"), _infer_broadcast_to, reference=_broadcast_to_ref,
       pattern=OpPattern.BROADCAST, doc="Broadcast to the shape operand (numpy rules).")


# ---------------------------------------------------------------------------
# concat / split
# ---------------------------------------------------------------------------

def _infer_concat(call, ctx):
    tup = arg_sinfo(call.args[0], ctx) if call.args else None
    if not isinstance(tup, TupleStructInfo):
        raise err(call, "concat expects a tuple of tensors as its operand, but "
                        f"{expr_to_str(call.args[0]) if call.args else 'nothing'} has struct info "
                        f"{sinfo_to_str(tup)}")
    if not tup.fields:
        raise err(call, "concat needs at least one tensor")
    for i, f in enumerate(tup.fields):
        if not isinstance(f, TensorStructInfo):
            raise err(call, f"concat: field {i} of the tuple is {sinfo_to_str(f)}, not a tensor")
    dtypes = {f.dtype for f in tup.fields if f.dtype != "void"}
    if len(dtypes) > 1:
        raise err(call, f"concat needs tensors of one dtype, got {', '.join(sorted(dtypes))}")
    dtype = dtypes.pop() if dtypes and all(f.dtype != "void" for f in tup.fields) else "void"
    axis = attrs_of(call)["axis"]
    if axis is None:  # flatten everything, then concatenate
        if any(f.shape is None for f in tup.fields):
            return TensorStructInfo(None, dtype, 1)
        total = sum((prod(f.shape) for f in tup.fields[1:]), prod(tup.fields[0].shape))
        return tensor_sinfo((total,), dtype)
    ndims = {f.ndim for f in tup.fields if f.ndim != -1}
    if len(ndims) > 1:
        raise err(call, f"concat needs tensors of one ndim, got {sorted(ndims)}")
    if not ndims:
        return TensorStructInfo(None, dtype, -1)
    ndim = ndims.pop()
    if ndim == 0:
        raise err(call, "concat cannot join 0-d tensors")
    ax = norm_axis(call, axis, ndim)
    if any(f.shape is None for f in tup.fields):
        return TensorStructInfo(None, dtype, ndim)
    first = tup.fields[0].shape
    dims = list(first)
    for j, f in enumerate(tup.fields[1:], start=1):
        for i in range(ndim):
            if i != ax and arith.prove_not_equal(first[i], f.shape[i]):
                raise err(call, f"concat: tensor {j} has shape {_shape(f.shape)}, which differs "
                                f"from tensor 0's {_shape(first)} on axis {i} (only axis {ax} may differ)")
            if i != ax and not arith.prove_equal(first[i], f.shape[i]):
                return TensorStructInfo(None, dtype, ndim)
    dims[ax] = arith.simplify(sum((f.shape[ax] for f in tup.fields[1:]), first[ax]))
    return TensorStructInfo(tuple(dims), dtype)


def _concat_ref(tensors, axis=0):
    arrays = [np.asarray(t) for t in tensors]
    if axis is None:
        return np.concatenate([a.reshape(-1) for a in arrays])
    return np.concatenate(arrays, axis=axis)


define("concat", ("tensors",), _infer_concat, attrs={"axis": (0, opt(as_int))},
       reference=_concat_ref, pattern=OpPattern.INJECTIVE,
       doc="Concatenate a tuple of tensors along ``axis`` (None: flatten first).")


def split_bounds(dim: tir.PrimExpr, spec) -> list[tuple[tir.PrimExpr, tir.PrimExpr]]:
    """(begin, length) of each output of ``split`` along a dimension of size
    ``dim``, as TVM 0.27's InferTypeSplit: ``n`` sections are ``ceildiv(dim,
    n)`` long but the last, which takes the rest; indices are clamped to
    ``[0, dim]`` and a section between decreasing indices is empty. (With a
    symbolic ``dim``, constant indices are taken to be inside it.)"""
    i64 = tir.IntImm
    c = arith.const_int(dim)
    if isinstance(spec, int):
        if c is not None:
            part = -(-c // spec)
            return [(i64(k * part), i64(part if k < spec - 1 else c - part * (spec - 1)))
                    for k in range(spec)]
        if arith.prove_equal(arith.simplify(tir.BinaryOp("%", dim, i64(spec))), i64(0)):
            part = arith.simplify(tir.BinaryOp("//", dim, i64(spec)))
        else:
            part = arith.simplify(tir.BinaryOp("//", tir.BinaryOp("+", dim, i64(spec - 1)),
                                               i64(spec)))
        out = [(arith.simplify(tir.BinaryOp("*", part, i64(k))), part) for k in range(spec - 1)]
        begin = arith.simplify(tir.BinaryOp("*", part, i64(spec - 1)))
        return out + [(begin, arith.simplify(tir.BinaryOp("-", dim, begin)))]
    bounds = [0, *spec]
    out = []
    for k, lo in enumerate(bounds):
        hi = bounds[k + 1] if k + 1 < len(bounds) else None
        if c is not None:
            lo_c = min(max(lo, 0), c)
            hi_c = c if hi is None else min(max(hi, 0), c)
            out.append((i64(lo_c), i64(max(hi_c - lo_c, 0))))
        else:
            lo_c = max(lo, 0)
            length = (arith.simplify(tir.BinaryOp("-", dim, i64(lo_c))) if hi is None
                      else i64(max(max(hi, 0) - lo_c, 0)))
            out.append((i64(lo_c), length))
    return out


def _single(spec) -> bool:
    """One section, or no split points: TVM 0.27 returns the input tensor itself."""
    return spec == 1 or spec == ()


def _infer_split(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    spec = a["indices_or_sections"]
    if isinstance(spec, int) and spec <= 0:
        raise err(call, f"split: the number of sections must be positive, got {spec}")
    if _single(spec):
        return x
    n_out = spec if isinstance(spec, int) else len(spec) + 1
    if x.ndim == -1:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, -1)] * n_out)
    if x.ndim == 0:
        raise err(call, "split cannot split a 0-d tensor")
    ax = norm_axis(call, a["axis"], x.ndim)
    if x.shape is None:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, x.ndim)] * n_out)
    fields = []
    for _, length in split_bounds(x.shape[ax], spec):
        v = arith.const_int(length)
        if v is not None and v < 0:
            raise err(call, f"split: {prim_expr_to_str(x.shape[ax])} cannot be split into "
                            f"{spec} sections of ceil({prim_expr_to_str(x.shape[ax])} / {spec}): "
                            f"the last would have {v} elements")
        dims = list(x.shape)
        dims[ax] = length
        fields.append(TensorStructInfo(tuple(dims), x.dtype))
    return TupleStructInfo(fields)


def _split_ref(x, indices_or_sections, axis=0):
    x = np.asarray(x)
    spec = indices_or_sections
    if _single(spec):
        return x.copy()
    ax = axis % x.ndim
    parts = []
    for begin, length in split_bounds(tir.IntImm(x.shape[ax]), spec):
        b, n = int(begin.value), int(length.value)
        parts.append(np.take(x, np.arange(b, b + n), axis=ax))
    return tuple(parts)


define("split", ("x",), _infer_split,
       attrs={"indices_or_sections": (REQUIRED, _int_or_tuple), "axis": (0, as_int)},
       reference=_split_ref, pattern=OpPattern.INJECTIVE,
       doc="Split into n sections (ceildiv(dim, n) long, the last the rest) or at indices "
           "(clamped into the dimension); a tuple, or the tensor itself for one section.")


# ---------------------------------------------------------------------------
# strided_slice / take
# ---------------------------------------------------------------------------

def _slice_len(call, dim: tir.PrimExpr, b: int, e: int, s: int) -> tir.PrimExpr:
    c = arith.const_int(dim)
    if c is not None:
        return tir.IntImm(len(range(*slice(b, e, s).indices(c))))
    i64 = tir.IntImm
    # Symbolic dimension: resolve negative / "to the end" indices against it
    # and assume the (resolved) indices are in bounds.
    if s > 0:
        lo = i64(b) if b >= 0 else dim + i64(b)
        hi = dim if e >= _END else (i64(e) if e >= 0 else dim + i64(e))
        n = tir.BinaryOp("//", (hi - lo) + i64(s - 1), i64(s))
    else:
        hi = (dim - i64(1)) if b >= _END else (i64(b) if b >= 0 else dim + i64(b))
        lo = i64(-1) if e <= -_END else (i64(e) if e >= 0 else dim + i64(e))
        n = tir.BinaryOp("//", (hi - lo) + i64(-s - 1), i64(-s))
    return arith.simplify(n)


def _infer_strided_slice(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    axes, begin, end, strides = a["axes"], a["begin"], a["end"], a["strides"]
    if strides is None:
        strides = (1,) * len(axes)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise err(call, f"strided_slice needs axes, begin, end (and strides) of equal length, got "
                        f"{len(axes)}, {len(begin)}, {len(end)}, {len(strides)}")
    if any(s == 0 for s in strides):
        raise err(call, "strided_slice: strides must be non-zero")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    axes_n = norm_axes(call, axes, x.ndim, "axes")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    for ax, b, e, s in zip(axes_n, begin, end, strides):
        if is_symbolic(b) or is_symbolic(e) or is_symbolic(s):
            # TVM 0.27: symbolic begin / end / stride entries (see _symslice)
            dims[ax] = slice_length(b, e, s, x.shape[ax], a["assume_inbound"])
        else:
            dims[ax] = _slice_len(call, x.shape[ax], b, e, s)
    return TensorStructInfo(tuple(dims), x.dtype)


def _strided_slice_ref(x, axes, begin, end, strides=None, assume_inbound=True):
    x = np.asarray(x)
    strides = strides or (1,) * len(axes)
    index = [slice(None)] * x.ndim
    for ax, b, e, s in zip(axes, begin, end, strides):
        index[ax % x.ndim] = slice(b, e, s)
    return x[tuple(index)].copy()


define("strided_slice", ("x",), _infer_strided_slice,
       # begin / end entries may be symbolic (TVM 0.27's PrimExpr tuples); strides are ints
       attrs={"axes": (REQUIRED, int_tuple), "begin": (REQUIRED, index_tuple),
              "end": (REQUIRED, index_tuple), "strides": (None, opt(stride_tuple)),
              # TVM 0.27: "the slice stays in bounds" lets TVM skip clamping; phasec
              # always clamps as numpy does, which is the same where the promise holds.
              # It decides the inferred length of a symbolic begin / end only. Off by
              # default, as TVM 0.27's strided_slice (which prints it when False).
              "assume_inbound": (False, as_bool)},
       reference=_strided_slice_ref, pattern=OpPattern.INJECTIVE,
       doc="numpy slicing x[begin:end:stride] on the listed axes.")


def _infer_take(call, ctx):
    x = tensor_arg(call, 0, ctx)
    # TVM 0.27: a scalar index (R.prim_value / an R.Prim variable) is a 0-d tensor of indices
    prim = arg_sinfo(call.args[1], ctx) if len(call.args) > 1 else None
    if isinstance(prim, PrimStructInfo):
        idx = TensorStructInfo((), prim.dtype)
    else:
        idx = tensor_arg(call, 1, ctx, "indices")
    if idx.dtype != "void" and not tir.is_int(idx.dtype):
        raise err(call, f"take needs integer indices, but {expr_to_str(call.args[1])} has "
                        f"dtype {idx.dtype}")
    axis = attrs_of(call)["axis"]
    if axis is None:
        return TensorStructInfo(idx.shape, x.dtype, idx.ndim)
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if x.ndim == 0:
        raise err(call, "take cannot index a 0-d tensor along an axis")
    ax = norm_axis(call, axis, x.ndim)
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype, -1 if idx.ndim == -1 else x.ndim - 1 + idx.ndim)
    return TensorStructInfo(tuple(x.shape[:ax]) + tuple(idx.shape) + tuple(x.shape[ax + 1:]),
                            x.dtype)


def _take_ref(x, indices, axis=None, mode="fast"):
    x = np.asarray(x)
    idx = np.asarray(indices).astype(np.int64)
    if mode != "fast":  # TVM's clip (clamp into range) and wrap (modulo the extent)
        return np.take(x, idx, axis=axis, mode=mode)
    extent = x.size if axis is None else x.shape[axis]
    check_indices(idx, extent, "take")
    return np.take(x, idx, axis=axis, mode="raise")


define("take", ("x", "indices"), _infer_take,
       attrs={"axis": (None, opt(as_int)), "mode": ("fast", one_of("fast", "clip", "wrap"))},
       reference=_take_ref, pattern=OpPattern.INJECTIVE,
       doc="numpy.take: gather along ``axis`` (None: the flattened tensor). ``mode``: "
           "fast (TVM's default, unchecked there; phasec bounds-checks it: negative "
           "indices from the end, anything else out of range is an error), clip, wrap.")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

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


@legalizes("reshape", "flatten")
def _reshape(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: x[_reshape_index(i, out.shape, x.shape)],
                      name=_name(call))


@legalizes("permute_dims")
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


@legalizes("expand_dims")
def _expand_dims(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    new = {_norm_axis(v, len(out.shape)) for v in _attrs(call)["axis"]}
    return te.compute(out.shape, lambda *i: x[tuple(v for d, v in enumerate(i) if d not in new)],
                      name=_name(call))


@legalizes("squeeze")
def _squeeze(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axis = _attrs(call)["axis"]
    if axis is None:
        dropped = {d for d in range(x.ndim) if _is_one(x.shape[d])}
    else:
        dropped = _squeezed(x.shape, {_norm_axis(v, x.ndim) for v in axis})

    def body(*i: PrimExpr) -> Any:
        it = iter(i)
        return x[tuple(_i64(0) if d in dropped else next(it) for d in range(x.ndim))]
    return te.compute(out.shape, body, name=_name(call))


@legalizes("broadcast_to")
def _broadcast_to(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: _bcast(x, out.shape, i), name=_name(call))


@legalizes("concat")
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


@legalizes("split")
def _split(call: Call, inputs: Inputs) -> Any:
    x = _tensor(inputs, 0, call)
    a = _attrs(call)
    spec = a["indices_or_sections"]
    if _single(spec):
        out = _out(call)
        return te.compute(out.shape, lambda *i: x[i], name="T_split")
    sinfo = call.struct_info
    if not isinstance(sinfo, TupleStructInfo):
        raise LegalizeError(f"{_script(call)}: expected a tuple result")
    ax = _norm_axis(a["axis"], x.ndim)
    outs: list[Tensor] = []
    for k, (begin, _) in enumerate(split_bounds(x.shape[ax], spec)):
        out = _out(call, k)

        def body(*i: PrimExpr, begin: PrimExpr = begin) -> Any:
            start = i[ax] if _static(begin) == 0 else BinaryOp("+", i[ax], begin)
            return x[tuple(start if d == ax else v for d, v in enumerate(i))]
        outs.append(te.compute(out.shape, body, name=f"T_split{k}"))
    return outs


def _slice_start(dim: PrimExpr, b: int, e: int, s: int) -> PrimExpr:
    c = _static(dim)
    if c is not None:
        return _i64(range(*slice(b, e, s).indices(c)).start if c else 0)
    if s > 0:
        return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))
    if b >= _END:
        return arith.simplify(BinaryOp("-", dim, _i64(1)))
    return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))


@legalizes("strided_slice")
def _strided_slice(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    strides = a["strides"] or (1,) * len(a["axes"])
    spec = {}
    for axis, b, e, s in zip(a["axes"], a["begin"], a["end"], strides):
        d = _norm_axis(axis, x.ndim)
        if is_symbolic(b) or is_symbolic(e) or is_symbolic(s):
            # numpy's start (negative from the end, clamped), whether or not
            # assume_inbound promised it in bounds: the same where it is
            spec[d] = (canonical_index(b, x.shape[d], 1 if is_symbolic(s) else s), s)
        else:
            spec[d] = (_slice_start(x.shape[d], b, e, s), s)

    def body(*i: PrimExpr) -> Any:
        ind = []
        for d, v in enumerate(i):
            if d in spec:
                start, s = spec[d]
                term = v if s == 1 else BinaryOp("*", v, s if isinstance(s, PrimExpr) else _i64(s))
                ind.append(term if _static(start) == 0 else BinaryOp("+", start, term))
            else:
                ind.append(v)
        return x[tuple(ind)]
    return te.compute(out.shape, body, name=_name(call))


class _ScalarIndex:
    """A scalar index (R.prim_value) read like a 0-d tensor: ``idx[()]``."""

    ndim = 0

    def __init__(self, value: PrimExpr) -> None:
        self.value = value

    def __getitem__(self, _: Any) -> PrimExpr:
        return self.value


def _take_indices(call: Call, inputs: Inputs) -> Any:
    if isinstance(inputs[1], Tensor):
        return inputs[1]
    value = inputs[1]
    if isinstance(value, PrimValue):
        return _ScalarIndex(value.value)
    sinfo = getattr(value, "struct_info", None)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return _ScalarIndex(sinfo.value)
    raise LegalizeError(f"{_script(call)}: a scalar index must be an R.prim_value or an R.Prim "
                        "with a known value to be lowered to a kernel")


@legalizes("take")
def _take(call: Call, inputs: Inputs) -> Tensor:
    x, idx = _tensor(inputs, 0, call), _take_indices(call, inputs)
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
