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

Beside it: ``TensorScatter`` (opset 24, the KV-cache update) and
``LinearAttention`` (opset 27, the recurrent state update, unrolled over a
sequence known at import).
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
    # (as ORT: a NaN scale is the default one, and neither the scale nor the
    # head size may be 0 or less; math.sqrt raised ValueError, 1/sqrt(0)
    # ZeroDivisionError from inside the converter)
    scale = ctx.attr("scale")
    if scale is not None and not math.isnan(scale) and scale <= 0:
        raise FrontendError(f"scale {scale}: must be greater than 0")
    if isinstance(d, int) and d == 0:
        raise FrontendError("the head size is 0: it must be greater than 0")
    scale = 1.0 / math.sqrt(d) if scale is None or math.isnan(scale) else float(scale)
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


# ---------------------------------------------------------------------------
# LinearAttention (opset 27): the recurrent state update, unrolled
# ---------------------------------------------------------------------------

#: the longest sequence LinearAttention is unrolled over
LINEAR_ATTENTION_MAX_STEPS = 256


def _heads(ctx: NodeContext, x: Value, heads: int, what: str) -> tuple[Value, int]:
    """(B, T, H*D) -> (B, H, T, D) in float32, and D."""
    b, t, hd = ctx.static_shape(x, what)
    if hd % heads:
        raise FrontendError(f"LinearAttention: {what}'s last dimension {hd} is not a multiple "
                            f"of its {heads} heads")
    x = x if ctx.dtype(x) == "float32" else ctx.emit("astype", x, dtype="float32")
    x = ctx.emit("reshape", x, (b, t, heads, hd // heads))
    return ctx.emit("permute_dims", x, axes=[0, 2, 1, 3]), hd // heads


@converter("LinearAttention", since=27)
def _linear_attention(ctx: NodeContext) -> list[Value]:
    """The state recurrence of the ONNX definition, step by step over the
    sequence (unrolled: the sequence length must be known at import, at most
    ``LINEAR_ATTENTION_MAX_STEPS``), in float32: ``gated`` rules decay the
    state by ``exp(decay_t)``, ``delta`` rules write ``beta_t * (v_t -
    state^T k_t)`` instead of ``v_t``, the state gains ``k_t v_t^T``, and the
    output is ``scale * q_t^T state`` (query heads grouped over the key/value
    heads). ``chunk_size`` is a tuning hint with no effect on the result."""
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    past, decay, beta = ctx.optional(3), ctx.optional(4), ctx.optional(5)
    rule = ctx.attr("update_rule", "gated_delta")
    hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise FrontendError(f"LinearAttention update_rule {rule!r}")
    if not isinstance(hq, int) or not isinstance(hkv, int) or hq <= 0 or hkv <= 0 or hq % hkv:
        raise FrontendError(f"LinearAttention needs q_num_heads ({hq}) a positive multiple of "
                            f"kv_num_heads ({hkv})")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise FrontendError(f"LinearAttention update_rule {rule!r} takes "
                            f"{'a' if gating else 'no'} decay and {'a' if delta else 'no'} beta")
    if any(ctx.ndim(x) != 3 for x in (q, k, v)):
        raise FrontendError("LinearAttention's query, key and value are (B, T, H*D)")
    b, steps = ctx.static_shape(q, "the query")[:2]
    if steps > LINEAR_ATTENTION_MAX_STEPS:
        raise Unsupported(f"LinearAttention over {steps} steps (unrolled up to "
                          f"{LINEAR_ATTENTION_MAX_STEPS})")
    q4, dk = _heads(ctx, q, hq, "query")
    k4, _ = _heads(ctx, k, hkv, "key")
    v4, dv = _heads(ctx, v, hkv, "value")
    group = hq // hkv
    if gating:
        last = ctx.static_shape(decay, "decay")[-1]
        if last not in (hkv, hkv * dk):
            raise FrontendError(f"LinearAttention: decay's last dimension {last} is neither "
                                f"kv_num_heads ({hkv}) nor kv_num_heads * d_k ({hkv * dk})")
        decay4, _ = _heads(ctx, decay, hkv, "decay")  # (B, H, T, 1 or d_k)
    if delta:
        last = ctx.static_shape(beta, "beta")[-1]
        if last not in (hkv, 1):
            raise FrontendError(f"LinearAttention: beta's last dimension {last} is neither "
                                f"kv_num_heads ({hkv}) nor 1")
        beta4, _ = _heads(ctx, beta, last, "beta")  # (B, H or 1, T, 1)
    if past is not None:
        if ctx.static_shape(past, "past_state") != [b, hkv, dk, dv]:
            raise FrontendError(f"LinearAttention: past_state of shape {ctx.shape(past)}, "
                                f"expected {[b, hkv, dk, dv]}")
        state = past if ctx.dtype(past) == "float32" else \
            ctx.emit("astype", past, dtype="float32")
    else:
        state = np.zeros((b, hkv, dk, dv), np.float32)
    scale = float(ctx.attr("scale", 0.0) or 0.0) or 1.0 / math.sqrt(dk)

    def at(x: Value, i: int) -> Value:
        return ctx.emit("take", x, np.asarray(i, np.int64), axis=2)
    outs = []
    for i in range(steps):
        k_t, v_t = at(k4, i), at(v4, i)                     # (B, Hkv, d)
        if gating:
            state = ctx.emit("multiply", state,
                             ctx.emit("expand_dims", ctx.emit("exp", at(decay4, i)), axis=[-1]))
        if delta:
            got = ctx.emit("matmul", ctx.emit("expand_dims", k_t, axis=[-2]), state)
            got = ctx.emit("squeeze", got, axis=[-2])       # state^T k_t: (B, Hkv, d_v)
            v_t = ctx.emit("multiply", at(beta4, i), ctx.emit("subtract", v_t, got))
        state = ctx.emit("add", state, ctx.emit("multiply", ctx.emit("expand_dims", k_t, axis=[-1]),
                                                ctx.emit("expand_dims", v_t, axis=[-2])))
        q_t = ctx.emit("reshape", at(q4, i), (b, hkv, group, dk))
        out = ctx.emit("multiply", ctx.emit("matmul", q_t, state), np.asarray(scale, np.float32))
        outs.append(ctx.emit("reshape", out, (b, 1, hq * dv)))
    y = outs[0] if len(outs) == 1 else ctx.emit("concat", outs, axis=1)
    out_dtype = ctx.dtype(q)
    state_dtype = ctx.dtype(past) if past is not None else out_dtype
    y = y if out_dtype == "float32" else ctx.emit("astype", y, dtype=out_dtype)
    if isinstance(state, np.ndarray):  # (no steps)
        return [y, state.astype(state_dtype)]
    return [y, state if state_dtype == "float32" else ctx.emit("astype", state, dtype=state_dtype)]
