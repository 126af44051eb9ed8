"""ONNX shape manipulation, indexing and creation operators.

Operands that determine shapes (Reshape's shape, Slice's starts, Split's
sizes, Pad's pads...) must be known at import: constants, initializers, or
values computed from them (``Shape`` of a tensor is known even when some of
its dimensions are symbolic). Gathers that phasec has no operator for
(GatherElements, GatherND) and padding become ``take`` with an index
array computed at import.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.expr import PrimValue
from phasec.frontend.errors import FrontendError
from phasec.op.fold import within_budget
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const, settle
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_math import onnx_to_dtype, scalar

__all__ = ["norm_axis", "pad_axis", "prod_dims", "reshape"]

#: ConstantOfShape results up to this many elements are arrays at import
#: (they usually feed shape computations); larger ones are ``R.full`` calls.
#: Not a budget (that is phasec.op.fold's, far above): a fill kept as a fill
#: reads as one in the imported module, and FoldConstant folds it to a
#: one-element splat constant whatever its size; as an array it would be
#: written out element by element.
_SMALL_CONSTANT = 4096

#: More elements than any tensor can have (a byte count must fit in int64).
_MAX_ELEMENTS = 1 << 60


def norm_axis(ctx: NodeContext, axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise FrontendError(f"{what} {axis} is out of range for rank {ndim}")
    return axis % ndim


def prod_dims(dims: list[Any]) -> Any:
    out: Any = 1
    for d in dims:
        out = out * d
    return settle(np.asarray([out], dtype=object))[0] if isinstance(out, tir.PrimExpr) else out


def reshape(ctx: NodeContext, x: Value, dims: list[Any]) -> Value:
    if ctx.shape(x) == list(dims):
        return x
    return ctx.emit("reshape", x, tuple(dims))


def _ints_attr_or_input(ctx: NodeContext, attr: str, index: int, since: int) -> list[Any] | None:
    """An int list given as an attribute before opset ``since`` and as an input
    after (a 1-D or 0-d one, as ONNX Runtime takes it)."""
    if ctx.opset < since:
        v = ctx.attr(attr)
        return None if v is None else list(v)
    if ctx.has(index) and ctx.ndim(ctx.input(index)) > 1:
        raise FrontendError(f"{attr} must be 1-D, not {ctx.ndim(ctx.input(index))}-D")
    return ctx.const_ints(index, attr) if ctx.has(index) else None


# ---------------------------------------------------------------------------
# constants and shapes
# ---------------------------------------------------------------------------

@converter("Constant")
def _constant(ctx: NodeContext) -> Value:
    # the first value attribute, as ORT reads a Constant holding several
    for key in ctx.attrs:
        if key.startswith(("value", "sparse_value")):
            if key not in ("value", "value_float", "value_floats", "value_int", "value_ints"):
                raise Unsupported(f"a Constant of attribute {key} (string and sparse "
                                  "constants are not supported)")
            v = ctx.attrs[key]
            break
    else:
        keys = ", ".join(sorted(ctx.attrs)) or "none"
        raise Unsupported(f"a Constant with attribute(s) {keys} (string and sparse constants "
                          "are not supported)")
    if key == "value_float":
        return np.asarray(v, np.float32)
    if key == "value_floats":
        return np.asarray(v, np.float32).reshape(-1)
    if key == "value_int":
        return np.asarray(v, np.int64)
    if key == "value_ints":
        return np.asarray(v, np.int64).reshape(-1)
    arr = np.asarray(v)
    if arr.dtype == object or arr.dtype.kind in "USV" or str(arr.dtype) not in _DTYPES:
        raise Unsupported(f"a Constant of element type {arr.dtype}")
    return arr


_DTYPES = {"float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8",
           "uint16", "uint32", "uint64", "bool"}


@converter("Shape")
def _shape(ctx: NodeContext) -> Value:
    dims = ctx.shape(ctx.input(0))
    n = len(dims)
    start, end = ctx.attr("start", 0), ctx.attr("end", n)
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    out = np.empty(max(end - start, 0), dtype=object)
    out[:] = dims[start:end]
    return settle(out)


@converter("Size")
def _size(ctx: NodeContext) -> Value:
    n = prod_dims(ctx.shape(ctx.input(0)))
    if isinstance(n, tir.PrimExpr):
        out = np.empty((), dtype=object)
        out[()] = n
        return out
    return np.asarray(n, np.int64)


@converter("ConstantOfShape")
def _constant_of_shape(ctx: NodeContext) -> Value:
    if ctx.ndim(ctx.input(0)) == 0:  # (ORT reads a 2-D one flattened)
        raise FrontendError("the shape must be a 1-D tensor, not a scalar")
    dims = ctx.const_ints(0, "shape")
    value = ctx.attr("value")
    if value is not None and np.size(value) != 1:  # (as ORT: one element, not the first)
        raise FrontendError(f"the value attribute must be a one-element tensor, not one of "
                            f"shape {tuple(np.shape(value))}")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[0]
    fill = np.asarray(fill)
    if str(fill.dtype) not in _DTYPES:
        raise Unsupported(f"a fill value of element type {fill.dtype}")
    if all(isinstance(d, int) for d in dims):
        if any(d < 0 for d in dims):
            raise FrontendError(f"negative dimension in shape {dims}")
        if math.prod(dims) > _MAX_ELEMENTS:
            raise FrontendError(f"shape {dims} has more elements than a tensor can hold")
        if int(np.prod(dims, dtype=np.int64)) <= _SMALL_CONSTANT:
            return np.full(dims, fill, dtype=fill.dtype)
    return ctx.emit("full", tuple(dims), fill, fold=False)


@converter("Range")
def _range(ctx: NodeContext) -> Value:
    start = ctx.const_scalar(0, "start")
    limit = ctx.const_scalar(1, "limit")
    delta = ctx.const_scalar(2, "delta")
    dtype = ctx.dtype(ctx.input(0))
    if any(isinstance(v, tir.PrimExpr) for v in (start, limit, delta)):
        if isinstance(delta, tir.PrimExpr):  # the length would be unknown, not symbolic
            raise Unsupported("Range with a symbolic delta")
        if delta == 0:
            raise Unsupported("Range with delta 0")
        # bounds from symbolic dimensions: computed at run time, its length symbolic
        bounds = [PrimValue(v) if isinstance(v, tir.PrimExpr) else v for v in (start, limit)]
        return ctx.emit("arange", *bounds, delta, dtype=dtype)
    if delta == 0:
        raise FrontendError("Range with delta 0 (the number of elements is infinite)")
    if not all(math.isfinite(v) for v in (start, limit, delta)):
        raise FrontendError(f"Range({start}, {limit}, {delta}): start, limit and delta must "
                            "be finite")
    count = math.ceil((limit - start) / delta)
    if count > _MAX_ELEMENTS:
        raise FrontendError(f"Range({start}, {limit}, {delta}) has {count} elements, more "
                            "than a tensor can hold")
    n = max(int(count), 0)
    if not within_budget(n):  # too big to compute at import: computed where it is used
        return ctx.emit("arange", start, limit, delta, dtype=dtype)
    return (np.asarray(start, dtype) + np.arange(n, dtype=dtype) * np.asarray(delta, dtype)).astype(dtype)


@converter("EyeLike")
def _eye_like(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.static_shape(x)
    if len(dims) != 2:
        raise Unsupported(f"EyeLike of rank {len(dims)}")
    dtype = onnx_to_dtype(ctx.attr("dtype"), "dtype") if "dtype" in ctx.attrs else ctx.dtype(x)
    if not within_budget(dims[0] * dims[1]):
        return ctx.emit("eye_like", x, int(ctx.attr("k", 0)), dtype=dtype)
    return np.eye(dims[0], dims[1], k=int(ctx.attr("k", 0)), dtype=dtype)


# ---------------------------------------------------------------------------
# reshaping
# ---------------------------------------------------------------------------

@converter("Reshape")
def _reshape(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.opset >= 5 and ctx.ndim(ctx.input(1)) != 1:  # (ONNX Runtime checks it too)
        raise FrontendError(f"the shape operand must be 1-D, not {ctx.ndim(ctx.input(1))}-D")
    target = list(ctx.attr("shape")) if ctx.opset < 5 else ctx.const_ints(1, "shape")
    dims = ctx.shape(x)
    allowzero = ctx.attr("allowzero", 0)
    out = []
    for i, d in enumerate(target):
        if isinstance(d, int) and d == 0 and not allowzero:
            if i >= len(dims):
                raise Unsupported(f"shape {target}: a 0 at position {i} copies a dimension "
                                  f"the rank-{len(dims)} input does not have")
            d = dims[i]
        out.append(d)
    return reshape(ctx, x, out)


@converter("Flatten")
def _flatten(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    axis = ctx.attr("axis", 1)
    axis = axis + len(dims) if axis < 0 else axis
    if not 0 <= axis <= len(dims):
        raise Unsupported(f"axis {ctx.attr('axis')} out of range for rank {len(dims)}")
    return reshape(ctx, x, [prod_dims(dims[:axis]), prod_dims(dims[axis:])])


@converter("Transpose")
def _transpose(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    n = ctx.ndim(x)
    perm = ctx.attr("perm")
    perm = list(range(n - 1, -1, -1)) if perm is None else list(perm)
    if perm == list(range(n)):
        return x
    return ctx.emit("permute_dims", x, axes=perm)


@converter("Squeeze")
def _squeeze(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axes = _ints_attr_or_input(ctx, "axes", 1, 13)
    n = ctx.ndim(x)
    if axes is None:
        dims = ctx.shape(x)
        if any(not isinstance(d, int) for d in dims):
            raise Unsupported("Squeeze without axes on a tensor with symbolic dimensions")
        axes = [i for i, d in enumerate(dims) if d == 1]
    axes = [norm_axis(ctx, a, n) for a in axes]
    if not axes:
        return x
    # ONNX refuses an axis of known size other than 1 (R.squeeze, as TVM's,
    # would keep it: a silently different shape)
    wrong = [a for a in axes if isinstance(ctx.shape(x)[a], int) and ctx.shape(x)[a] != 1]
    if wrong:
        raise FrontendError(f"Squeeze: axis {wrong[0]} of the input of shape {ctx.shape(x)} "
                            f"has size {ctx.shape(x)[wrong[0]]}, not 1")
    return ctx.emit("squeeze", x, axis=sorted(set(axes)))


@converter("Unsqueeze")
def _unsqueeze(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    axes = _ints_attr_or_input(ctx, "axes", 1, 13)
    if axes is None:
        raise Unsupported("Unsqueeze without axes")
    out_rank = ctx.ndim(x) + len(axes)
    axes = sorted(norm_axis(ctx, a, out_rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise Unsupported(f"repeated axes {axes}")
    return ctx.emit("expand_dims", x, axis=axes)


@converter("Expand")
def _expand(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    target = ctx.const_ints(1, "shape")
    dims = ctx.shape(x)
    # bidirectional broadcast: the result has the broadcast of both shapes
    n = max(len(dims), len(target))
    a = [1] * (n - len(dims)) + dims
    b = [1] * (n - len(target)) + target
    out = []
    for i, (p, q) in enumerate(zip(a, b)):
        if isinstance(q, int) and q == 1:
            out.append(p)
        elif isinstance(p, int) and p == 1:
            out.append(q)
        elif isinstance(p, int) and isinstance(q, int) and p != q:
            raise Unsupported(f"cannot expand shape {dims} to {target} (axis {i}: {p} vs {q})")
        else:
            out.append(p)
    if out == dims:
        return x
    return ctx.emit("broadcast_to", x, tuple(out))


@converter("Tile")
def _tile(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    reps = ctx.const_ints(1, "repeats")
    dims = ctx.shape(x)
    if len(reps) != len(dims):
        raise Unsupported(f"repeats {reps} do not match rank {len(dims)}")
    if all(isinstance(r, int) and r == 1 for r in reps):
        return x
    # (d0, d1, ...) -> (1, d0, 1, d1, ...) -> (r0, d0, r1, d1, ...) -> (r0*d0, r1*d1, ...)
    y = ctx.emit("expand_dims", x, axis=[2 * i for i in range(len(dims))])
    big = []
    for r, d in zip(reps, dims):
        big += [r, d]
    y = ctx.emit("broadcast_to", y, tuple(big))
    return ctx.emit("reshape", y, tuple(r * d for r, d in zip(reps, dims)))


def _blocksize(ctx: NodeContext) -> int:
    b = ctx.attr("blocksize")
    if not isinstance(b, int) or b < 1:
        raise FrontendError(f"attribute blocksize={b!r}: must be a positive integer")
    return b


@converter("DepthToSpace")
def _depth_to_space(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    n, c, h, w = _dims4(ctx, x)
    b = _blocksize(ctx)
    if isinstance(c, int) and c % (b * b):
        raise FrontendError(f"DepthToSpace: the depth {c} is not a multiple of blocksize * "
                            f"blocksize = {b * b}")
    mode = ctx.attr("mode", "DCR")
    if mode == "DCR":
        y = ctx.emit("reshape", x, (n, b, b, c // (b * b), h, w))
        y = ctx.emit("permute_dims", y, axes=[0, 3, 4, 1, 5, 2])
    elif mode == "CRD":
        y = ctx.emit("reshape", x, (n, c // (b * b), b, b, h, w))
        y = ctx.emit("permute_dims", y, axes=[0, 1, 4, 2, 5, 3])
    else:
        raise Unsupported(f"attribute mode={mode!r}")
    return ctx.emit("reshape", y, (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth")
def _space_to_depth(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    n, c, h, w = _dims4(ctx, x)
    b = _blocksize(ctx)
    for what, d in (("height", h), ("width", w)):
        if isinstance(d, int) and d % b:
            raise FrontendError(f"SpaceToDepth: the {what} {d} is not a multiple of the "
                                f"blocksize {b}")
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"attribute mode={mode!r}")
    y = ctx.emit("reshape", x, (n, c, h // b, b, w // b, b))
    # DCR: output channel (i * b + j) * C + c; CRD: c * b * b + i * b + j
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    y = ctx.emit("permute_dims", y, axes=perm)
    return ctx.emit("reshape", y, (n, c * b * b, h // b, w // b))


def _dims4(ctx: NodeContext, x: Value) -> list[Any]:
    dims = ctx.shape(x)
    if len(dims) != 4:
        raise Unsupported(f"{ctx.op_type} of a rank-{len(dims)} tensor (expects NCHW)")
    return dims


# ---------------------------------------------------------------------------
# concat / split / slice
# ---------------------------------------------------------------------------

@converter("Concat")
def _concat(ctx: NodeContext) -> Value:
    vals = [ctx.input(i) for i in range(len(ctx.inputs)) if ctx.has(i)]
    axis = ctx.attr("axis", 1 if ctx.opset < 4 else None)
    if axis is None:
        raise Unsupported("Concat without an axis")
    n = ctx.ndim(vals[0])
    axis = norm_axis(ctx, axis, n)
    if len(vals) == 1:
        return vals[0]
    # empty known operands add nothing (exporters concatenate [] onto shape values)
    kept = [v for v in vals if not (is_const(v) and v.size == 0)]
    if len(kept) == 1:
        return kept[0]
    return ctx.emit("concat", kept or vals, axis=axis)


@converter("Split", since=2)  # opset 1 took the sizes as an input or attribute
def _split(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    n_out = len(ctx.node.output)
    dims = ctx.shape(x)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(dims))
    sizes = _ints_attr_or_input(ctx, "split", 1, 13)
    dim = dims[axis]
    if sizes is None:
        num = ctx.attr("num_outputs", n_out)
        if isinstance(dim, int) and dim % num:
            chunk = -(-dim // num)  # opset 18: the last chunk is smaller
            sizes = [chunk] * (num - 1) + [dim - chunk * (num - 1)]
        else:
            if num == 1:
                return [x]
            return ctx.emit_multi("split", x, indices_or_sections=num, axis=axis)
    if any(isinstance(s, int) and s < 0 for s in sizes):
        raise FrontendError(f"split sizes {sizes}: sizes must not be negative")
    if all(isinstance(s, int) for s in sizes) and isinstance(dim, int) and sum(sizes) != dim:
        raise FrontendError(f"split sizes {sizes} add up to {sum(sizes)}, but axis {axis} has "
                            f"{dim} elements")
    if len(sizes) != n_out:
        raise FrontendError(f"{len(sizes)} split sizes for {n_out} outputs")
    if len(sizes) == 1:
        return [x]
    if any(not isinstance(s, int) for s in sizes):
        raise Unsupported("Split with symbolic sizes")
    points, acc = [], 0
    for s in sizes[:-1]:
        acc += s
        points.append(acc)
    return ctx.emit_multi("split", x, indices_or_sections=points, axis=axis)


# ---------------------------------------------------------------------------
# gathers
# ---------------------------------------------------------------------------

@converter("Gather")
def _gather(ctx: NodeContext) -> Value:
    x, idx = ctx.input(0), ctx.input(1)
    axis = norm_axis(ctx, ctx.attr("axis", 0), ctx.ndim(x))
    if is_const(idx) and idx.dtype != object and ctx.dtype(idx) not in ("int64", "int32"):
        idx = idx.astype(np.int64)
    _known_indices_in_range(ctx, idx, ctx.shape(x)[axis], axis)
    return ctx.emit("take", x, idx, axis=axis)


def _known_indices_in_range(ctx: NodeContext, idx: Value, extent: Any, axis: int) -> None:
    """Known indices are checked at import (as ORT checks them even where the
    gather makes no element, or its result is not used)."""
    if is_const(idx) and idx.dtype != object and isinstance(extent, int):
        bad = idx[(idx < -extent) | (idx >= extent)]
        if bad.size:
            raise FrontendError(f"index {int(bad.reshape(-1)[0])} is out of range for axis "
                                f"{axis} of extent {extent}")


def _normalized_index(ctx: NodeContext, idx: Value, extent: int) -> Value:
    """Negative indices counted from the end: idx + extent where idx < 0."""
    if is_const(idx):
        return np.where(idx < 0, idx + extent, idx).astype(np.int64)
    if ctx.dtype(idx) != "int64":
        idx = ctx.emit("astype", idx, dtype="int64")
    neg = ctx.emit("less", idx, np.asarray(0, np.int64))
    return ctx.emit("where", neg, ctx.emit("add", idx, np.asarray(extent, np.int64)), idx)


@converter("GatherElements")
def _gather_elements(ctx: NodeContext) -> Value:
    x, idx = ctx.input(0), ctx.input(1)
    axis = norm_axis(ctx, ctx.attr("axis", 0), ctx.ndim(x))
    _known_indices_in_range(ctx, idx, ctx.shape(x)[axis], axis)
    return ctx.emit("gather_elements", x, _int64(ctx, idx), axis=axis)


@converter("GatherND")
def _gather_nd(ctx: NodeContext) -> Value:
    x, idx = ctx.input(0), ctx.input(1)
    return ctx.emit("gather_nd", x, _int64(ctx, idx), batch_dims=int(ctx.attr("batch_dims", 0)))


def _int64(ctx: NodeContext, idx: Value) -> Value:
    if ctx.dtype(idx) == "int64":
        return idx
    return ctx.emit("astype", idx, dtype="int64")


_SCATTER_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _scatter_reduction(ctx: NodeContext) -> str:
    r = ctx.attr("reduction", "none")
    if r not in _SCATTER_REDUCTIONS:
        raise Unsupported(f"attribute reduction={r!r}")
    return _SCATTER_REDUCTIONS[r]


@converter("ScatterElements", "Scatter")
def _scatter_elements(ctx: NodeContext) -> Value:
    x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
    axis = norm_axis(ctx, ctx.attr("axis", 0), ctx.ndim(x))
    return ctx.emit("scatter_elements", x, _int64(ctx, idx), upd, axis=axis,
                    reduction=_scatter_reduction(ctx))


@converter("ScatterND")
def _scatter_nd(ctx: NodeContext) -> Value:
    x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
    return ctx.emit("scatter_nd", x, _int64(ctx, idx), upd, reduction=_scatter_reduction(ctx))


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------

@converter("Pad")
def _pad(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    n = len(dims)
    if n == 0:  # (nothing to pad; ONNX Runtime refuses it too)
        raise FrontendError("Pad of a 0-d tensor")
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        pads = list(ctx.attr("pads", ctx.attr("paddings", [])))
        value: Any = np.asarray(ctx.attr("value", 0.0), ctx.dtype(x))
        axes = list(range(n))
    else:
        pads = ctx.const_ints(1, "pads")
        if ctx.has(2) and ctx.const(2, "constant_value").size != 1:
            raise FrontendError("constant_value must be one element")
        value = (np.asarray(ctx.const(2, "constant_value")).reshape(())
                 if ctx.has(2) else np.asarray(0, ctx.dtype(x)))
        axes = ctx.const_ints(3, "axes") if ctx.has(3) else list(range(n))
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"attribute mode={mode!r}")
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"pads {pads} do not match {len(axes)} axes")
    value = np.asarray(value).astype(ctx.dtype(x))
    y = x
    for j, a in enumerate(axes):
        ax = norm_axis(ctx, a, n)
        before, after = pads[j], pads[j + len(axes)]
        if before == 0 and after == 0:
            continue
        y = pad_axis(ctx, y, ax, before, after, mode, value)
    return y


def pad_axis(ctx: NodeContext, y: Value, ax: int, before: int, after: int, mode: str,
             value: Value) -> Value:
    """``y`` padded along axis ``ax`` (ONNX Pad's ``mode``; ``value`` for
    "constant": a 0-d value of ``y``'s dtype, known or not)."""
    dims = ctx.shape(y)
    d = dims[ax]
    if before < 0 or after < 0:  # negative pads crop
        if not isinstance(d, int):
            raise Unsupported("negative pads on a symbolic dimension")
        lo, hi = max(-before, 0), d - max(-after, 0)
        y = ctx.emit("strided_slice", y, axes=[ax], begin=[lo], end=[hi])
        before, after = max(before, 0), max(after, 0)
        d = hi - lo
        dims = ctx.shape(y)
        if before == 0 and after == 0:
            return y
    if mode == "constant":
        parts = []
        for count in (before, after):
            if count:
                shape = list(dims)
                shape[ax] = count
                parts.append(ctx.emit("full", tuple(shape), value))
            else:
                parts.append(None)
        pieces = [p for p in (parts[0], y, parts[1]) if p is not None]
        return ctx.emit("concat", pieces, axis=ax)
    if not isinstance(d, int):
        raise Unsupported(f"mode={mode!r} padding of a symbolic dimension")
    if d == 0:
        raise Unsupported(f"mode={mode!r} padding of an empty axis")
    pos = np.arange(-before, d + after)
    if mode == "edge":
        idx = np.clip(pos, 0, d - 1)
    elif mode == "wrap":
        idx = np.mod(pos, d)
    else:  # reflect: mirror without repeating the edge
        if d == 1:
            idx = np.zeros_like(pos)
        else:
            period = 2 * (d - 1)
            m = np.mod(pos, period)
            idx = np.where(m < d, m, period - m)
    return ctx.emit("take", y, idx.astype(np.int64), axis=ax)


# ---------------------------------------------------------------------------
# masks and encodings
# ---------------------------------------------------------------------------

@converter("Trilu")
def _trilu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    if len(dims) < 2:
        raise Unsupported(f"Trilu of a rank-{len(dims)} tensor")
    k = int(ctx.const_scalar(1, "k")) if ctx.has(1) else 0
    rows, cols = dims[-2], dims[-1]
    # no mask at import (symbolic, or too large): the operator itself
    if not isinstance(rows, int) or not isinstance(cols, int) or not within_budget(rows * cols):
        return ctx.emit("triu" if ctx.attr("upper", 1) else "tril", x, k)
    mask = np.triu(np.ones((rows, cols), bool), k) if ctx.attr("upper", 1) else \
        np.tril(np.ones((rows, cols), bool), k)
    return ctx.emit("where", mask, x, scalar(ctx, 0, x))


@converter("OneHot")
def _one_hot(ctx: NodeContext) -> Value:
    idx = ctx.input(0)
    depth = ctx.const_scalar(1, "depth")
    if isinstance(depth, tir.PrimExpr):
        raise Unsupported("a symbolic depth")
    if not math.isfinite(depth) or int(depth) < 1:
        raise FrontendError(f"depth {depth}: must be a positive number")  # (ORT too)
    depth = int(depth)
    values = ctx.const(2, "values").reshape(-1)
    if values.size != 2:
        raise FrontendError(f"values must hold 2 elements (off, on), not {values.size}")
    off, on = values[0], values[1]
    n = ctx.ndim(idx)
    axis = ctx.attr("axis", -1)
    axis = axis + n + 1 if axis < 0 else axis
    if ctx.dtype(idx).startswith("float"):
        idx = ctx.emit("astype", idx, dtype="int64")
    elif ctx.dtype(idx) != "int64":
        idx = ctx.emit("astype", idx, dtype="int64")
    idx = _normalized_index(ctx, idx, depth)
    idx = ctx.emit("expand_dims", idx, axis=[axis])
    shape = [1] * (n + 1)
    shape[axis] = depth
    hot = ctx.emit("equal", idx, ctx.iota(depth, shape))
    return ctx.emit("where", hot, np.asarray(on), np.asarray(off))


@converter("CumSum", "CumProd")
def _cumulative(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    n = ctx.ndim(x)
    axis = norm_axis(ctx, int(ctx.const_scalar(1, "axis")), n)
    if ctx.dtype(x) == "bool":
        raise Unsupported(f"{ctx.op_type} of bool")
    op = "cumsum" if ctx.op_type == "CumSum" else "cumprod"
    for flag in ("reverse", "exclusive"):
        if ctx.attr(flag, 0) not in (0, 1):
            raise FrontendError(f"attribute {flag}={ctx.attr(flag)!r}: must be 0 or 1 (as ORT)")
    reverse = bool(ctx.attr("reverse", 0))
    # reverse: a scan of the flipped tensor, flipped back
    y = ctx.emit("flip", x, axis=axis) if reverse else x
    y = ctx.emit(op, y, axis=axis, exclusive=bool(ctx.attr("exclusive", 0)))
    return ctx.emit("flip", y, axis=axis) if reverse else y


@converter("CenterCropPad", since=18)
def _center_crop_pad(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    target = ctx.const_ints(1, "shape")
    dims = ctx.shape(x)
    axes = ctx.attr("axes")
    axes = list(range(len(dims))) if axes is None else [norm_axis(ctx, a, len(dims)) for a in axes]
    if len(target) != len(axes):
        raise Unsupported(f"shape {target} for axes {axes}")
    y = x
    for ax, t in zip(axes, target):
        d = dims[ax]
        if not isinstance(d, int) or not isinstance(t, int):
            raise Unsupported("CenterCropPad of symbolic dimensions")
        if t < d:  # crop: the extra element of an odd difference comes off the end
            start = (d - t) // 2
            y = ctx.emit("strided_slice", y, axes=[ax], begin=[start], end=[start + t])
        elif t > d:  # pad with zeros: the extra element of an odd difference goes at the end
            y = pad_axis(ctx, y, ax, (t - d) // 2, t - d - (t - d) // 2, "constant",
                          np.zeros((), ctx.dtype(x)))
    return y


def _window(ctx: NodeContext, coeffs: tuple[float, ...]) -> Value:
    """sum_k (-1)^k a_k cos(2 pi k n / N), n = 0..size-1, computed at import."""
    size = ctx.const_scalar(0, "size")
    if isinstance(size, tir.PrimExpr):
        raise Unsupported("a window of symbolic size")
    if not isinstance(size, int) or size < 1:
        raise FrontendError(f"window size {size}: must be a positive integer")
    dtype = onnx_to_dtype(ctx.attr("output_datatype", 1), "output type")
    periodic = bool(ctx.attr("periodic", 1))
    denom = size if periodic else size - 1
    if not within_budget(size):  # the same sum, computed at run time
        positions = ctx.emit("arange", 0, size, 1, dtype="float64")
        total: Value | None = None
        for k, a in enumerate(coeffs):
            angle = ctx.emit("divide", ctx.emit("multiply", positions, np.asarray(2 * np.pi * k)),
                             np.asarray(float(denom)))
            term = ctx.emit("multiply", ctx.emit("cos", angle), np.asarray((-1) ** k * a))
            total = term if total is None else ctx.emit("add", total, term)
        return ctx.emit("astype", total, dtype=dtype)
    n = np.arange(size, dtype=np.float64)
    w = np.zeros(size)
    for k, a in enumerate(coeffs):
        w += (-1) ** k * a * (np.cos(2 * np.pi * k * n / denom) if denom else 1.0)
    return w.astype(dtype)


@converter("HannWindow", since=17)
def _hann(ctx: NodeContext) -> Value:
    return _window(ctx, (0.5, 0.5))


@converter("HammingWindow", since=17)
def _hamming(ctx: NodeContext) -> Value:
    return _window(ctx, (25 / 46, 21 / 46))


@converter("BlackmanWindow", since=17)
def _blackman(ctx: NodeContext) -> Value:
    return _window(ctx, (0.42, 0.5, 0.08))


@converter("Compress", since=9)
def _compress(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    cond = np.asarray(ctx.const(1, "condition")).reshape(-1).astype(bool)
    axis = ctx.attr("axis")
    if axis is None:  # the flattened input
        x = ctx.emit("reshape", x, (-1,))
        axis = 0
    axis = norm_axis(ctx, axis, ctx.ndim(x))
    d = ctx.shape(x)[axis]
    if isinstance(d, int) and len(cond) > d:
        raise Unsupported(f"a condition of {len(cond)} entries for an axis of {d}")
    # the selected positions are known: a take with them (a shorter condition selects
    # among the first positions only)
    return ctx.emit("take", x, np.flatnonzero(cond).astype(np.int64), axis=axis)


@converter("ReverseSequence", since=10)
def _reverse_sequence(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    lens = [int(v) for v in np.asarray(ctx.const(1, "sequence_lens")).reshape(-1)]
    dims = ctx.static_shape(x, "ReverseSequence's input")
    batch_axis = norm_axis(ctx, ctx.attr("batch_axis", 1), len(dims))
    time_axis = norm_axis(ctx, ctx.attr("time_axis", 0), len(dims))
    steps = dims[time_axis]
    if len(lens) != dims[batch_axis] or any(not 0 <= n <= steps for n in lens):
        raise Unsupported(f"sequence_lens {lens} for {dims[batch_axis]} sequences of {steps}")
    # index along time: the first lens[b] steps reversed, the rest in place
    t = np.arange(steps)
    table = np.stack([np.where(t < n, n - 1 - t, t) for n in lens])  # (batch, time)
    if batch_axis > time_axis:
        table = table.T
    shape = [1] * len(dims)
    shape[batch_axis], shape[time_axis] = dims[batch_axis], steps
    idx = np.broadcast_to(table.reshape(shape), dims).astype(np.int64)
    return ctx.emit("gather_elements", x, np.ascontiguousarray(idx), axis=time_axis)
