"""ONNX reductions: Reduce*, ArgMax/ArgMin.

Axes come from the ``axes`` attribute before opset 13 (ReduceSum) or 18
(the others) and from the second input after; ``noop_with_empty_axes``
makes an empty axis list the identity. The composite reductions decompose:
ReduceL2 is ``sqrt(sum(x*x))``, ReduceLogSumExp ``log(sum(exp(x - m))) + m``
with ``m`` the maximum (stable), ArgMax the smallest index holding the
maximum (a ``min`` over an index grid).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_math import scalar
from phasec.frontend.onnx.ops_tensor import norm_axis

__all__: list[str] = []

_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _keepdims(ctx: NodeContext) -> bool:
    """ONNX allows 0 and 1; ONNX Runtime keeps the dimensions for 1 only
    (any other value drops them), and so does phasec."""
    return ctx.attr("keepdims", 1) == 1


def _axes(ctx: NodeContext, x: Value) -> list[int] | None:
    """The reduced axes (normalized), or None for the identity."""
    n = ctx.ndim(x)
    if ctx.opset >= _AXES_INPUT_SINCE.get(ctx.op_type, 18):
        if ctx.has(1) and ctx.ndim(ctx.input(1)) != 1:
            raise FrontendError(f"the axes must be a 1-D tensor, not of rank "
                                f"{ctx.ndim(ctx.input(1))}")
        axes = ctx.const_ints(1, "axes") if ctx.has(1) else []
    else:
        axes = list(ctx.attr("axes", []))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0) == 1:  # (ONNX Runtime: only 1 is true)
            return None
        return list(range(n))
    return sorted({norm_axis(ctx, a, n) for a in axes})


def _check_nonempty(ctx: NodeContext, x: Value, axes: list[int]) -> None:
    dims = ctx.shape(x)
    if any(isinstance(dims[a], int) and dims[a] == 0 for a in axes):
        raise _Empty()


class _Empty(Exception):
    """A reduction over an axis of size 0: the result is the identity element."""


#: the value of a reduction over nothing (ONNX: the identity of the operation)
_EMPTY_VALUE = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceLogSumExp": -np.inf,
                "ReduceLogSum": -np.inf, "ReduceSum": 0, "ReduceSumSquare": 0, "ReduceL1": 0,
                "ReduceL2": 0, "ReduceProd": 1}


def _empty_result(ctx: NodeContext, x: Value, axes: list[int], keep: bool) -> Value:
    dims = ctx.shape(x)
    out = tuple(1 if i in axes else d for i, d in enumerate(dims) if keep or i not in axes)
    value = _EMPTY_VALUE.get(ctx.op_type)
    dt = ctx.dtype(x)
    if value is None:
        raise Unsupported(f"{ctx.op_type} over an empty axis")
    if not dt.startswith("float") and np.isinf(value):
        info = np.iinfo(dt)
        value = info.min if value < 0 else info.max
    return ctx.emit("full", out, np.asarray(value, dt))


_SIMPLE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod"}


@converter("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dt = ctx.dtype(x)
    if dt == "bool":
        if ctx.op_type not in ("ReduceMax", "ReduceMin"):
            raise Unsupported(f"{ctx.op_type} of bool tensors")
        # any / all: the maximum / minimum of the values as 0 and 1
        y = _reduce_as(ctx, ctx.emit("astype", x, dtype="uint8"))
        return ctx.emit("not_equal", y, np.asarray(0, np.uint8))
    return _reduce_as(ctx, x)


def _reduce_as(ctx: NodeContext, x: Value) -> Value:
    try:
        return _reduce_nonempty(ctx, x)
    except _Empty:
        axes = _axes(ctx, x) or []
        return _empty_result(ctx, x, axes, _keepdims(ctx))


def _reduce_nonempty(ctx: NodeContext, x: Value) -> Value:
    dt = ctx.dtype(x)
    axes = _axes(ctx, x)
    keep = _keepdims(ctx)
    op = ctx.op_type
    if axes is None:
        if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
            return x
        axes = []
    if op in _SIMPLE:
        if op in ("ReduceMax", "ReduceMin", "ReduceMean"):
            _check_nonempty(ctx, x, axes)
        return ctx.emit(_SIMPLE[op], x, axis=axes, keepdims=keep) if axes else x
    if op in ("ReduceLogSum", "ReduceLogSumExp") and not dt.startswith("float"):
        raise Unsupported(f"{op} of {dt} tensors")
    if op == "ReduceL1":
        y = ctx.emit("abs", x)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        y = ctx.emit("multiply", x, x)
    elif op == "ReduceLogSumExp":
        _check_nonempty(ctx, x, axes)
        if not axes:
            return x
        m = ctx.emit("max", x, axis=axes, keepdims=True)
        # a row of -inf would give inf - inf = nan: shift by 0 there instead
        finite = ctx.emit("equal", m, m)
        m = ctx.emit("where", ctx.emit("logical_and", finite, ctx.emit(
            "less", ctx.emit("abs", m), scalar(ctx, np.inf, x))), m, scalar(ctx, 0, x))
        s = ctx.emit("sum", ctx.emit("exp", ctx.emit("subtract", x, m)), axis=axes, keepdims=True)
        y = ctx.emit("add", ctx.emit("log", s), m)
        return y if keep else ctx.emit("squeeze", y, axis=axes)
    else:
        y = x
    if axes:
        y = ctx.emit("sum", y, axis=axes, keepdims=keep)
    if op == "ReduceL2":
        y = ctx.emit("sqrt", y) if dt.startswith("float") else _int_sqrt(ctx, y)
    elif op == "ReduceLogSum":
        y = ctx.emit("log", y)
    return y


def _int_sqrt(ctx: NodeContext, y: Value) -> Value:
    dt = ctx.dtype(y)
    f = ctx.emit("sqrt", ctx.emit("astype", y, dtype="float64"))
    return ctx.emit("astype", f, dtype=dt)


@converter("ArgMax", "ArgMin")
def _arg_reduce(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(dims))
    keep = _keepdims(ctx)
    last = ctx.attr("select_last_index", 0) != 0  # any non-zero value, as ORT reads it
    d = dims[axis]
    if not isinstance(d, int):
        raise Unsupported(f"{ctx.op_type} along a symbolic dimension")
    if d == 0:
        raise Unsupported(f"{ctx.op_type} along an empty axis")
    if ctx.dtype(x) == "bool":
        raise Unsupported(f"{ctx.op_type} of bool tensors")
    best = ctx.emit("max" if ctx.op_type == "ArgMax" else "min", x, axis=[axis], keepdims=True)
    hit = ctx.emit("equal", x, best)
    if ctx.dtype(x).startswith("float"):  # NaN is the extreme value (numpy's, ORT's order)
        hit = ctx.emit("logical_or", hit, ctx.emit("isnan", x))
    shape: list[Any] = [1] * len(dims)
    shape[axis] = d
    iota = ctx.iota(d, shape)
    # the first (or last) index holding the extreme value
    miss = np.asarray(-1 if last else d, np.int64)
    idx = ctx.emit("where", hit, iota, miss)
    return ctx.emit("max" if last else "min", idx, axis=[axis], keepdims=keep)


@converter("TopK")
def _topk(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if ctx.opset < 10:
        k = int(ctx.attr("k"))
    else:
        k = ctx.const_scalar(1, "K")
        if not isinstance(k, int):
            raise Unsupported("a symbolic K")
    axis = norm_axis(ctx, ctx.attr("axis", -1), ctx.ndim(x))
    extent = ctx.shape(x)[axis]
    if k < 0 or (isinstance(extent, int) and k > extent):
        raise FrontendError(f"k={k} is out of range: axis {axis} has {extent} elements")
    if k == 0:  # (phasec's topk, as TVM's, reads k < 1 as "all")
        values = ctx.emit("strided_slice", x, axes=[axis], begin=[0], end=[0])
        return [values, ctx.emit("astype", values, dtype="int64")]
    values, indices = ctx.emit_multi("topk", x, k=int(k), axis=axis, ret_type="both",
                                     largest=ctx.attr("largest", 1) == 1, dtype="int64")
    return [values, indices]


@converter("NonZero", since=9)
def _nonzero(ctx: NodeContext) -> Value:
    if ctx.ndim(ctx.input(0)) == 0:  # a scalar reads as one element (as ONNX Runtime does)
        return ctx.emit("nonzero", ctx.emit("reshape", ctx.input(0), (1,)))
    return ctx.emit("nonzero", ctx.input(0))


@converter("Unique", since=11)
def _unique(ctx: NodeContext) -> list[Value | None]:
    x = ctx.input(0)
    outs = list(ctx.node.output) + [""] * (4 - len(ctx.node.output))
    axis = ctx.attr("axis")
    if axis is not None:
        axis = norm_axis(ctx, axis, ctx.ndim(x))
    want = [bool(o) for o in outs[1:4]]
    res = ctx.emit_multi("unique", x, sorted=ctx.attr("sorted", 1) == 1, return_index=want[0],
                         return_inverse=want[1], return_counts=want[2], axis=axis)
    it = iter(res[1:])
    return [res[0]] + [next(it) if w else None for w in want]
