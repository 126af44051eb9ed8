"""Attention (TVM 0.27's ``relax.nn``): ``nn.attention``, ``nn.attention_bias``.

Attention (TVM's BSNH layout): ``query`` (B, Sq, H, D), ``key`` (B, Skv, Hk,
D), ``value`` (B, Skv, Hv, Dv) with H a multiple of Hk and Hv (query head
``h`` reads key/value head ``h // (H / Hk)``, grouped-query attention);
``bias`` (B or 1, H or 1, Sq or 1, Skv) is added to the scores. The result is
(B, Sq, H, Dv)::

    scores[b, h, i, j] = sum_d q[b, i, h, d] * k[b, j, h', d] * scale (+ bias)
    out[b, i, h, :] = sum_j softmax_j(scores[b, h, i, :])[j] * v[b, j, h'', :]

``scale`` defaults to 1 / sqrt(D). ``causal_mask="TopLeft"`` keeps the keys
``j <= i``; ``"BottomRight"`` keeps ``j <= i + |Sq - Skv|`` (TVM 0.27's
legalization); masked keys take no part in the softmax. ``window_size``
(sliding-window attention) is refused, as TVM's legalization refuses it.
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.text import prim_expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, Select
from phasec.op._common import (
    OpPattern, as_float, as_int, attrs_of, define, err, one_of, opt, tensor_arg, tensor_sinfo,
)
from phasec.op.draw import declares_draw
from phasec.op._lowering import _const, _i64, _out, _tensor, legalizes

__all__: list[str] = []


# ---------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------

def _infer_attention(call, ctx):
    names = ("query", "key", "value") + (("bias",) if len(call.args) > 3 else ())
    ts = [tensor_arg(call, k, ctx, w) for k, w in enumerate(names)]
    q, k, v = ts[:3]
    a = attrs_of(call)
    if a["window_size"] is not None:
        raise err(call, "window_size (sliding-window attention) is not supported: TVM 0.27 "
                        "cannot legalize it either")
    for t, what in zip(ts, names):
        if t.ndim not in (-1, 4):
            raise err(call, f"the {what} must have 4 dimensions (batch, sequence, heads, head "
                            f"dim), but it has ndim {t.ndim}")
        if t.dtype not in ("void", q.dtype):
            raise err(call, f"the {what} has dtype {t.dtype} but the query has dtype {q.dtype}")
    if q.dtype != "void" and not q.dtype.startswith("float"):
        raise err(call, f"attention requires float tensors, but the query has dtype {q.dtype}")
    if any(t.shape is None for t in (q, k, v)):
        return TensorStructInfo(None, q.dtype, 4)
    b, sq, h, d = q.shape
    _, skv, hk, _ = k.shape

    def same(x, y, what):
        if arith.prove_not_equal(x, y):
            raise err(call, f"{what} differ: {prim_expr_to_str(x)} vs {prim_expr_to_str(y)}")

    def divides(x, y, what):
        xv, yv = arith.const_int(x), arith.const_int(y)
        if xv is not None and yv is not None and (yv == 0 or xv % yv):
            raise err(call, f"the query's {xv} heads are not a multiple of the {what}'s {yv}")

    same(b, k.shape[0], "the batch sizes of query and key")
    same(b, v.shape[0], "the batch sizes of query and value")
    divides(h, hk, "key")
    divides(h, v.shape[2], "value")
    same(skv, v.shape[1], "the sequence lengths of key and value")
    same(d, k.shape[3], "the head dims of query and key")
    if len(ts) > 3 and ts[3].shape is not None:
        bias = ts[3].shape
        for want, got, what in ((b, bias[0], "batch size"), (h, bias[1], "number of heads"),
                                (sq, bias[2], "query length")):
            if arith.const_int(got) != 1 and arith.prove_not_equal(want, got):
                raise err(call, f"the bias's {what} {prim_expr_to_str(got)} is neither the "
                                f"query's {prim_expr_to_str(want)} nor 1")
        same(skv, bias[3], "the key length and the bias's last dim")
    return tensor_sinfo((b, sq, h, v.shape[3]), q.dtype)


def _mask_offset(causal_mask, sq: int, skv: int) -> int | None:
    if causal_mask is None:
        return None
    return 0 if causal_mask == "TopLeft" else abs(sq - skv)


def _attention_ref(query, key, value, bias=None, scale=None, causal_mask=None,
                   window_size=None):
    q, k, v = (np.asarray(t) for t in (query, key, value))
    dt = q.dtype
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    h, hk, hv = q.shape[2], k.shape[2], v.shape[2]
    k64 = np.repeat(k64, h // hk, axis=2)
    v64 = np.repeat(v64, h // hv, axis=2)
    sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[3])
    scores = np.einsum("bihd,bjhd->bhij", q64, k64) * sc
    if bias is not None:
        scores = scores + np.asarray(bias, np.float64)
    sq, skv = q.shape[1], k.shape[1]
    offset = _mask_offset(causal_mask, sq, skv)
    if offset is not None:
        keep = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + offset
        scores = np.where(keep, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    p = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bjhd->bihd", p, v64).astype(dt)


_ATTN_ATTRS = {"scale": (None, opt(as_float)),
               "causal_mask": (None, opt(one_of("TopLeft", "BottomRight"))),
               "window_size": (None, opt(as_int))}

define("nn.attention", ("query", "key", "value"), _infer_attention, attrs=_ATTN_ATTRS,
       reference=_attention_ref, pattern=OpPattern.OPAQUE,
       doc="Scaled dot-product attention, BSNH layout, optional causal mask.")
define("nn.attention_bias", ("query", "key", "value", "bias"), _infer_attention,
       attrs=_ATTN_ATTRS, reference=_attention_ref, pattern=OpPattern.OPAQUE,
       doc="Scaled dot-product attention with an additive bias (B, H, Sq, Skv).")


@legalizes("nn.attention", "nn.attention_bias")
def _attention(call, inputs):
    q, k, v = (_tensor(inputs, i, call) for i in range(3))
    bias = _tensor(inputs, 3, call) if len(call.args) > 3 else None
    a = attrs_of(call)
    out = _out(call)
    if q.dtype == "float16":  # scores, exponentials and sums in float32, rounded once
        def wide(t):
            return te.compute(t.shape, lambda *i: te.cast(t[i], "float32"), name=t.name + "_f32")
        q, k, v = wide(q), wide(k), wide(v)
        bias = wide(bias) if bias is not None else None
    dt = q.dtype
    b, sq, h, d = q.shape
    skv, hk, hv = k.shape[1], k.shape[2], v.shape[2]
    gk = arith.simplify(BinaryOp("//", h, hk))
    gv = arith.simplify(BinaryOp("//", h, hv))
    if a["scale"] is not None:
        scale = _const(a["scale"], dt)
    else:
        scale = BinaryOp("/", _const(1, dt), te.call("sqrt", Cast(dt, d)))
    offset = None
    if a["causal_mask"] == "TopLeft":
        offset = _i64(0)
    elif a["causal_mask"] == "BottomRight":
        diff = BinaryOp("-", sq, skv)
        offset = arith.simplify(BinaryOp("max", diff, BinaryOp("-", _i64(0), diff)))
    rd = te.reduce_axis(d, "rd")

    def head(hh, g):
        return hh if arith.const_int(g) == 1 else BinaryOp("//", hh, g)

    def score(bb, hh, i, j):
        return te.sum(BinaryOp("*", q[bb, i, hh, rd.var], k[bb, j, head(hh, gk), rd.var]),
                      axis=[rd])
    qk = te.compute((b, h, sq, skv), score, name="T_attention_qk")

    def bias_at(bb, hh, i, j):
        idx = tuple(_i64(0) if arith.const_int(bias.shape[p]) == 1 and
                    arith.const_int(full) != 1 else x
                    for p, (x, full) in enumerate(((bb, b), (hh, h), (i, sq))))
        return bias[(*idx, j)]

    def keep(i, j):
        return BinaryOp("<=", j, BinaryOp("+", i, offset))

    def scaled(bb, hh, i, j):
        s = BinaryOp("*", qk[bb, hh, i, j], scale)
        if bias is not None:
            s = BinaryOp("+", s, bias_at(bb, hh, i, j))
        return s if offset is None else Select(keep(i, j), s, te.min_value(dt))
    p = te.compute((b, h, sq, skv), scaled, name="T_attention_scores")
    rj = te.reduce_axis(skv, "rj")
    mx = te.compute((b, h, sq), lambda bb, hh, i: te.max(p[bb, hh, i, rj.var], axis=[rj]),
                    name="T_attention_max")

    def expo(bb, hh, i, j):
        e = te.call("exp", BinaryOp("-", p[bb, hh, i, j], mx[bb, hh, i]))
        return e if offset is None else Select(keep(i, j), e, _const(0, dt))
    e = te.compute((b, h, sq, skv), expo, name="T_attention_exp")
    rs = te.reduce_axis(skv, "rs")
    z = te.compute((b, h, sq), lambda bb, hh, i: te.sum(e[bb, hh, i, rs.var], axis=[rs]),
                   name="T_attention_sum")
    rv = te.reduce_axis(skv, "rv")

    def weighted(bb, i, hh, dd):
        return te.sum(BinaryOp("*", e[bb, hh, i, rv.var], v[bb, rv.var, head(hh, gv), dd]),
                      axis=[rv])
    num = te.compute(out.shape, weighted, name="T_attention_pv")
    return te.compute(out.shape, lambda bb, i, hh, dd: te.cast(
        BinaryOp("/", num[bb, i, hh, dd], z[bb, hh, i]), out.dtype), name="T_attention")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_attention(bias: bool):
    def build(ctx):
        b, s, h, d = ctx.shape
        kv = ctx.integers(1, 3)
        # all heads (no grouped-query draws: TVM 0.27's attention differs from
        # phasec's there, which phasec fuzz --against tvm reports every time)
        heads = h
        key = ctx.const((b, kv, heads, d), -1.0, 1.0)
        value = ctx.const((b, kv, heads, ctx.integers(1, 3)), -1.0, 1.0)
        ctx.result_in(-1.0, 1.0)  # a convex combination of the values
        operands = [ctx.x, key, value]
        if bias:
            operands.append(ctx.const((ctx.choose([1, b]), ctx.choose([1, h]), s, kv), -1.0, 1.0))
        causal = ctx.choose([None, "TopLeft", "BottomRight"])
        return tuple(operands), {"causal_mask": causal}
    return build


declares_draw("nn.attention", ranks=(4,), build=_draw_attention(False))
declares_draw("nn.attention_bias", ranks=(4,), build=_draw_attention(True))
