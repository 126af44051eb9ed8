"""ONNX Attention (opset 23+), decomposed into phasec operators.

``softmax(Q K^T * scale + bias) V`` with everything the operator carries:
3-D inputs split into heads (``q_num_heads``/``kv_num_heads``), grouped
key/value heads (repeated to the query heads), a past key/value cache
(``present_*`` outputs), an attention mask (boolean: keep where true; float:
added; a mask shorter than the key length is padded with "masked"), causal
masking aligned to the bottom right (a query at index ``i`` sees keys
``j <= i + offset``, the offset being the cache length, or per batch
``nonpad_kv_seqlen - q_len``), padding by ``nonpad_kv_seqlen``, sliding
windows, softcap, the softmax precision (float16 rounds at each step as the
definition does, its sums accumulating in float32), and the ``qk_matmul_output``
output in each of its modes. Rows with every key masked give zeros, as the
ONNX definition says. The masks are computed at import when their inputs
are known (causal and window masks always are: they depend on shapes only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_math import onnx_to_dtype, scalar
from phasec.frontend.onnx.ops_nn import back_to_dtype, in_float32
from phasec.frontend.onnx.ops_tensor import norm_axis

__all__: list[str] = []


def _split_heads(ctx: NodeContext, x: Value, heads: Any, what: str) -> Value:
    """(B, S, H*D) -> (B, H, S, D)."""
    if heads is None:
        raise Unsupported(f"3-D {what} without the number of heads")
    b, s, hidden = ctx.shape(x)
    if not isinstance(hidden, int) or hidden % heads:
        raise Unsupported(f"{what} hidden size {hidden} not divisible by {heads} heads")
    y = ctx.emit("reshape", x, (b, s, heads, hidden // heads))
    return ctx.emit("permute_dims", y, axes=[0, 2, 1, 3])


def _neg_inf_where_not(ctx: NodeContext, keep: Value, dtype: str) -> Value:
    """0 where ``keep``, -inf elsewhere, as ``dtype`` (a known mask folds)."""
    return ctx.emit("where", keep, np.asarray(0, dtype), np.asarray(-np.inf, dtype))


def _add(ctx: NodeContext, a: Value | None, b: Value) -> Value:
    return b if a is None else ctx.emit("add", a, b)


def _positions(s: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(s, dtype=np.int64).reshape(s, 1), np.arange(length, dtype=np.int64).reshape(1, length)


def _offset_mask(ctx: NodeContext, s: int, length: int, offset: Value | int,
                 allowed: Any, dtype: str) -> Value:
    """A (S, L) or (B, 1, S, L) bias: 0 where ``allowed(diff)`` with
    ``diff = i + offset - j``, else -inf."""
    i, j = _positions(s, length)
    if isinstance(offset, int):
        return np.where(allowed(i + offset - j), np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    diff = ctx.emit("subtract", ctx.emit("add", ctx.emit("reshape", offset, (-1, 1, 1, 1)), i), j)
    return _neg_inf_where_not(ctx, allowed(diff, ctx), dtype)


@converter("Attention", since=23)
def _attention(ctx: NodeContext) -> list[Value | None]:
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    dtype = ctx.dtype(q)
    if not dtype.startswith("float"):
        raise Unsupported(f"dtype {dtype}")
    mask, past_k, past_v = ctx.optional(3), ctx.optional(4), ctx.optional(5)
    nonpad = ctx.optional(6)
    if (past_k is None) != (past_v is None):
        raise Unsupported("past_key without past_value (or the reverse)")
    rank = ctx.ndim(q)
    if rank == 3:
        q = _split_heads(ctx, q, ctx.attr("q_num_heads"), "Q")
        k = _split_heads(ctx, k, ctx.attr("kv_num_heads"), "K")
        v = _split_heads(ctx, v, ctx.attr("kv_num_heads"), "V")
    elif rank != 4:
        raise Unsupported(f"Q of rank {rank}")
    if past_k is not None:
        k = ctx.emit("concat", [past_k, k], axis=2)
        v = ctx.emit("concat", [past_v, v], axis=2)
    present_k, present_v = k, v
    bq, hq, s, d = ctx.shape(q)
    _, hkv, length, _ = ctx.shape(k)
    if not all(isinstance(n, int) for n in (s, length, hq, hkv)):
        raise Unsupported("Attention with symbolic sequence lengths or head counts")
    past_len = ctx.shape(past_k)[2] if past_k is not None else 0

    # -- the additive bias: mask, causal, window, padding --------------------------
    bias: Value | None = None
    if mask is not None:
        mdims = ctx.shape(mask)
        pad = length - mdims[-1]
        if pad > 0:  # a short mask: the missing keys are masked
            fill = np.asarray(False if ctx.dtype(mask) == "bool" else -np.inf, ctx.dtype(mask))
            mask = ctx.emit("concat", [mask, ctx.emit("full", (*mdims[:-1], pad), fill)],
                            axis=ctx.ndim(mask) - 1)
        if ctx.dtype(mask) == "bool":
            mask = _neg_inf_where_not(ctx, mask, dtype)
        elif ctx.dtype(mask) != dtype:
            mask = ctx.emit("astype", mask, dtype=dtype)
        bias = mask
    per_batch: Value | None = None
    if nonpad is not None:
        if past_k is not None:
            raise Unsupported("nonpad_kv_seqlen together with a past cache")
        nonpad = ctx.emit("astype", nonpad, dtype="int64") if ctx.dtype(nonpad) != "int64" \
            else nonpad
        per_batch = ctx.emit("subtract", nonpad, np.asarray(s, np.int64))
    offset: Value | int = per_batch if per_batch is not None else past_len
    if ctx.attr("is_causal", 0):
        causal = _offset_mask(ctx, s, length, offset,
                              lambda diff, c=None: diff >= 0 if c is None else
                              c.emit("greater_equal", diff, np.asarray(0, np.int64)), dtype)
        bias = _add(ctx, bias, causal)
    left, right = int(ctx.attr("left_window_size", -1)), int(ctx.attr("right_window_size", -1))
    if left >= 0 or right >= 0:
        def within(diff: Any, c: Any = None) -> Any:
            if c is None:
                ok = np.ones(diff.shape, bool)
                if left >= 0:
                    ok &= diff <= left
                if right >= 0:
                    ok &= -diff <= right
                return ok
            ok = None
            if left >= 0:
                ok = c.emit("less_equal", diff, np.asarray(left, np.int64))
            if right >= 0:
                r = c.emit("greater_equal", diff, np.asarray(-right, np.int64))
                ok = r if ok is None else c.emit("logical_and", ok, r)
            return ok
        bias = _add(ctx, bias, _offset_mask(ctx, s, length, offset, within, dtype))
    if nonpad is not None:
        j = np.arange(length, dtype=np.int64)
        keep = ctx.emit("less", j, ctx.emit("reshape", nonpad, (-1, 1)))
        pad_bias = ctx.emit("reshape", _neg_inf_where_not(ctx, keep, dtype), (-1, 1, 1, length))
        bias = _add(ctx, bias, pad_bias)

    # -- grouped heads, scores ------------------------------------------------------
    if hq != hkv:
        if hq % hkv:
            raise Unsupported(f"{hq} query heads for {hkv} key/value heads")
        g = hq // hkv

        def repeat(x: Value) -> Value:
            b_, h_, l_, d_ = ctx.shape(x)
            y = ctx.emit("broadcast_to", ctx.emit("expand_dims", x, axis=[2]), (b_, h_, g, l_, d_))
            return ctx.emit("reshape", y, (b_, h_ * g, l_, d_))
        k, v = repeat(k), repeat(v)
    scale = ctx.attr("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    root = scalar(ctx, math.sqrt(scale), dtype)  # Q and K each scaled by sqrt(scale)
    (qs, kt), _ = in_float32(ctx, [ctx.emit("multiply", q, root),
                                    ctx.emit("permute_dims", ctx.emit("multiply", k, root),
                                             axes=[0, 1, 3, 2])])
    qk = back_to_dtype(ctx, ctx.emit("matmul", qs, kt), dtype)
    softcap = float(ctx.attr("softcap", 0.0))
    if softcap > 0:
        cap = scalar(ctx, softcap, dtype)
        qk = ctx.emit("multiply", ctx.emit("tanh", ctx.emit("divide", qk, cap)), cap)
    scores = qk if bias is None else ctx.emit("add", qk, bias)
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    qk_out = scores if mode == 2 else qk

    # -- softmax (rows with every key masked give zeros) ----------------------------
    precision = ctx.attr("softmax_precision")
    sm_dtype = dtype if precision is None else onnx_to_dtype(precision, "softmax precision")
    if not sm_dtype.startswith("float"):
        raise Unsupported(f"softmax_precision {sm_dtype}")
    # float16 without softmax_precision: step by step in float16 as the
    # definition says (the sum accumulates in float32, see op/_lowering.py)
    x = scores if ctx.dtype(scores) == sm_dtype else ctx.emit("astype", scores, dtype=sm_dtype)
    if bias is None:
        probs = ctx.emit("nn.softmax", x, axis=-1)
    else:
        neg_inf = np.asarray(-np.inf, sm_dtype)
        m = ctx.emit("max", x, axis=[-1], keepdims=True)
        m = ctx.emit("where", ctx.emit("equal", m, neg_inf), np.asarray(0, sm_dtype), m)
        t = ctx.emit("exp", ctx.emit("subtract", x, m))
        total = ctx.emit("sum", t, axis=[-1], keepdims=True)
        total = ctx.emit("where", ctx.emit("equal", total, np.asarray(0, sm_dtype)),
                         np.asarray(1, sm_dtype), total)
        probs = ctx.emit("divide", t, total)
        masked = ctx.emit("equal", ctx.emit("max", bias, axis=[-1], keepdims=True),
                          np.asarray(-np.inf, dtype))
        probs = ctx.emit("where", masked, np.asarray(0, sm_dtype), probs)
    probs = probs if sm_dtype == dtype else ctx.emit("astype", probs, dtype=dtype)
    if mode == 3:
        qk_out = probs
    (pf, vf), _ = in_float32(ctx, [probs, v])
    y = back_to_dtype(ctx, ctx.emit("matmul", pf, vf), dtype)
    if rank == 3:
        b_, h_, s_, dv = ctx.shape(y)
        y = ctx.emit("reshape", ctx.emit("permute_dims", y, axes=[0, 2, 1, 3]), (b_, s_, h_ * dv))
    return [y, present_k, present_v, qk_out]



@converter("RotaryEmbedding", since=23)
def _rotary_embedding(ctx: NodeContext) -> Value:
    x, cos, sin = ctx.input(0), ctx.input(1), ctx.input(2)
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    dims = ctx.shape(x)
    rank = len(dims)
    if rank == 4:  # (B, H, S, D) -> (B, S, H, D)
        x = ctx.emit("permute_dims", x, axes=[0, 2, 1, 3])
    elif rank == 3:
        heads = int(ctx.attr("num_heads", 0))
        if not heads or not isinstance(dims[2], int) or dims[2] % heads:
            raise Unsupported(f"3-D input of hidden size {dims[2]} with num_heads={heads}")
        x = ctx.emit("reshape", x, (dims[0], dims[1], heads, dims[2] // heads))
    else:
        raise Unsupported(f"input of rank {rank}")
    b, s, h, d = ctx.shape(x)
    if not isinstance(d, int):
        raise Unsupported("a symbolic head size")
    rd = int(ctx.attr("rotary_embedding_dim", 0)) or d
    half = rd // 2
    if ctx.has(3):  # caches indexed by position: (B, S, rd/2)
        pos = ctx.input(3)
        pos = pos if ctx.dtype(pos) == "int64" else ctx.emit("astype", pos, dtype="int64")
        cos = ctx.emit("take", cos, pos, axis=0)
        sin = ctx.emit("take", sin, pos, axis=0)
    cos = ctx.emit("expand_dims", cos, axis=[2])
    sin = ctx.emit("expand_dims", sin, axis=[2])
    rot = x if rd == d else ctx.emit("strided_slice", x, axes=[3], begin=[0], end=[rd])
    if ctx.attr("interleaved", 0):
        x1 = ctx.emit("strided_slice", rot, axes=[3], begin=[0], end=[rd], strides=[2])
        x2 = ctx.emit("strided_slice", rot, axes=[3], begin=[1], end=[rd], strides=[2])
    else:
        x1 = ctx.emit("strided_slice", rot, axes=[3], begin=[0], end=[half])
        x2 = ctx.emit("strided_slice", rot, axes=[3], begin=[half], end=[rd])
    real = ctx.emit("subtract", ctx.emit("multiply", cos, x1), ctx.emit("multiply", sin, x2))
    imag = ctx.emit("add", ctx.emit("multiply", sin, x1), ctx.emit("multiply", cos, x2))
    if ctx.attr("interleaved", 0):  # (r0, i0, r1, i1, ...)
        pair = ctx.emit("concat", [ctx.emit("expand_dims", real, axis=[4]),
                                   ctx.emit("expand_dims", imag, axis=[4])], axis=4)
        rot = ctx.emit("reshape", pair, (b, s, h, rd))
    else:
        rot = ctx.emit("concat", [real, imag], axis=3)
    if rd < d:
        rot = ctx.emit("concat", [rot, ctx.emit("strided_slice", x, axes=[3], begin=[rd],
                                                end=[d])], axis=3)
    if rank == 3:
        return ctx.emit("reshape", rot, tuple(dims))
    return ctx.emit("permute_dims", rot, axes=[0, 2, 1, 3])


# ---------------------------------------------------------------------------
# TensorScatter (opset 24): the KV-cache update beside Attention
# ---------------------------------------------------------------------------

@converter("TensorScatter", since=24)
def _tensor_scatter(ctx: NodeContext) -> Value:
    """``past`` with each batch element's ``update`` written along ``axis``
    from its ``write_indices`` entry (0 when absent) on, wrapping around the
    cache in ``circular`` mode. Computed as a gather of ``update`` at
    ``position - write_index`` where that lies in ``[0, seq)``, ``past``
    elsewhere; in ``linear`` mode a write past the cache's end (which ONNX
    forbids) is dropped."""
    past, update = ctx.input(0), ctx.input(1)
    nd = ctx.ndim(past)
    if nd < 2 or ctx.ndim(update) != nd:
        raise FrontendError(f"TensorScatter needs a past cache of rank >= 2 and an update of "
                            f"its rank, got ranks {nd} and {ctx.ndim(update)}")
    axis = norm_axis(ctx, int(ctx.attr("axis", -2)), nd)
    mode = ctx.attr("mode", "linear")
    if axis == 0 or mode not in ("linear", "circular"):
        raise FrontendError(f"TensorScatter with axis {axis} and mode {mode!r} (the axis is "
                            "not the batch axis 0; mode is 'linear' or 'circular')")
    length, seq = ctx.shape(past)[axis], ctx.shape(update)[axis]
    if not isinstance(length, int) or not isinstance(seq, int):
        raise Unsupported("TensorScatter along a symbolic axis")
    at = [length if k == axis else 1 for k in range(nd)]
    start = ctx.optional(2)
    if start is None:
        start = np.zeros((), np.int64)
    else:
        start = ctx.emit("reshape", ctx.emit("astype", start, dtype="int64"),
                         (ctx.shape(start)[0], *[1] * (nd - 1)))
    offset = ctx.emit("subtract", ctx.iota(length, at), start)
    if mode == "circular":
        offset = ctx.emit("floor_mod", offset, np.asarray(length, np.int64))
    inside = ctx.emit("logical_and", ctx.emit("greater_equal", offset, np.zeros((), np.int64)),
                      ctx.emit("less", offset, np.asarray(seq, np.int64)))
    index = ctx.emit("minimum", ctx.emit("maximum", offset, np.zeros((), np.int64)),
                     np.asarray(max(seq - 1, 0), np.int64))
    full = tuple(length if k == axis else d for k, d in enumerate(ctx.shape(past)))
    gathered = ctx.emit("gather_elements", update, ctx.emit("broadcast_to", index, full),
                        axis=axis)
    return ctx.emit("where", inside, gathered, past)
