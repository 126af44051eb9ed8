"""Losses (TVM 0.27's ``relax.nn``): ``nn.cross_entropy_with_logits``,
``nn.nll_loss``.

``cross_entropy_with_logits(x, y)`` is ``-sum(x * y) / N`` with N the first
dimension when the operands have at least 2 dims, ``-sum(x * y)`` otherwise;
a 0-d result.

``nll_loss(predictions, targets[, weights], reduction, ignore_index)``:
predictions (N, C, d1..dk) or (C,), integer targets (N, d1..dk) or (); each
element loses ``-predictions[n, t, ...] * w`` with ``w = weights[t]`` (1
without weights), 0 where ``t == ignore_index``; ``reduction`` "none" keeps
the per-element losses, "sum" adds them, "mean" divides the sum by the sum
of the weights used. A target outside [0, C) that is not ignored reads
nothing and loses 0 in phasec (the kernels clamp the index; TVM leaves it
undefined).
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.text import expr_to_str, prim_expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, Select
from phasec.op._common import (
    OpPattern, as_int, attrs_of, binary_dtype, define, err, one_of, tensor_arg, tensor_sinfo,
)
from phasec.op.draw import declares_draw
from phasec.op._lowering import _clamp, _const, _i64, _out, _tensor, legalizes

__all__: list[str] = []


# ---------------------------------------------------------------------------
# cross_entropy_with_logits
# ---------------------------------------------------------------------------

def _infer_cross_entropy(call, ctx):
    x = tensor_arg(call, 0, ctx, "predictions")
    y = tensor_arg(call, 1, ctx, "labels")
    dtype = binary_dtype(call, x, y)
    if x.ndim != -1 and y.ndim != -1 and x.ndim != y.ndim:
        raise err(call, f"predictions and labels must have the same ndim, but they have "
                        f"{x.ndim} and {y.ndim}")
    if x.shape is not None and y.shape is not None:
        for ax, (p, q) in enumerate(zip(x.shape, y.shape)):
            if arith.prove_not_equal(p, q):
                raise err(call, f"predictions and labels differ on axis {ax}: "
                                f"{prim_expr_to_str(p)} vs {prim_expr_to_str(q)}")
    if dtype == "bool":
        raise err(call, "cross_entropy_with_logits does not compute on bool tensors")
    return TensorStructInfo((), dtype)


def _cross_entropy_ref(predictions, labels):
    x, y = np.asarray(predictions), np.asarray(labels)
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    total = -(x.astype(acc) * y.astype(acc)).sum()
    if x.ndim > 1:
        if acc is np.float64:
            total = total / x.shape[0]
        else:  # truncating integer division, as the kernels' integer ``/``
            total = np.sign(total) * (np.abs(total) // x.shape[0])
    return np.asarray(total).astype(x.dtype)


define("nn.cross_entropy_with_logits", ("predictions", "labels"), _infer_cross_entropy,
       reference=_cross_entropy_ref, pattern=OpPattern.OPAQUE,
       doc="-sum(predictions * labels) / batch size (no division for 1-D operands).")


@legalizes("nn.cross_entropy_with_logits")
def _cross_entropy(call, inputs):
    x, y = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    dt = _out(call).dtype
    axes = [te.reduce_axis(s, f"r{i}") for i, s in enumerate(x.shape)]
    idx = tuple(r.var for r in axes)
    s = te.compute((), lambda: te.sum(BinaryOp("*", x[idx], y[idx]), axis=axes),
                   name="T_cross_entropy_sum")
    if x.ndim > 1:
        n = x.shape[0]
        nv = arith.const_int(n)
        count = _const(nv, dt) if nv is not None else Cast(dt, n)
        if dt.startswith("float"):
            return te.compute((), lambda: BinaryOp("/", BinaryOp("*", s[()], _const(-1, dt)),
                                                   count), name="T_cross_entropy")
        # integers: truncating division of the negated sum, as TVM's int division
        return te.compute((), lambda: BinaryOp("/", BinaryOp("-", _const(0, dt), s[()]), count),
                          name="T_cross_entropy")
    return te.compute((), lambda: BinaryOp("-", _const(0, dt), s[()])
                      if not dt.startswith("float") else BinaryOp("*", s[()], _const(-1, dt)),
                      name="T_cross_entropy")


# ---------------------------------------------------------------------------
# nll_loss
# ---------------------------------------------------------------------------

def _infer_nll_loss(call, ctx):
    if len(call.args) not in (2, 3):
        raise err(call, f"nll_loss takes 2 or 3 operands (predictions, targets[, weights]), "
                        f"got {len(call.args)}")
    pred = tensor_arg(call, 0, ctx, "predictions")
    tgt = tensor_arg(call, 1, ctx, "targets")
    wgt = tensor_arg(call, 2, ctx, "weights") if len(call.args) == 3 else None
    dtype = binary_dtype(call, pred, wgt) if wgt is not None else pred.dtype
    if dtype != "void" and not dtype.startswith("float"):
        raise err(call, f"nll_loss requires float predictions, got {dtype}")
    if tgt.dtype != "void" and not tgt.dtype.startswith(("int", "uint")):
        raise err(call, f"nll_loss expects integer targets, but {expr_to_str(call.args[1])} has "
                        f"dtype {tgt.dtype}")
    if pred.ndim == 0:
        raise err(call, "nll_loss expects predictions with at least 1 dimension")
    k = None if pred.ndim == -1 else max(pred.ndim - 2, 0)
    if tgt.ndim != -1:
        k_tgt = max(tgt.ndim - 1, 0)
        if k is not None and k != k_tgt:
            raise err(call, f"the predictions have {k} extra dims after (N, C) but the targets "
                            f"have {k_tgt} after N")
        if pred.ndim == 1 and tgt.ndim != 0:
            raise err(call, "predictions of shape (C,) need a 0-d target")
        if pred.ndim >= 2 and tgt.ndim == 0:
            raise err(call, "predictions of shape (N, C, ...) need targets of shape (N, ...)")
    if wgt is not None and wgt.ndim not in (-1, 1):
        raise err(call, f"the weights must be 1-D (one per class), but they have ndim {wgt.ndim}")
    out_shape = None
    if pred.shape is not None:
        c = pred.shape[0] if pred.ndim == 1 else pred.shape[1]
        out_shape = () if pred.ndim == 1 else (pred.shape[0], *pred.shape[2:])
        if tgt.shape is not None and pred.ndim >= 2:
            for ax, (p, t) in enumerate(zip(out_shape, tgt.shape)):
                if arith.prove_not_equal(p, t):
                    raise err(call, f"the targets' dim {ax} is {prim_expr_to_str(t)} but the "
                                    f"predictions give {prim_expr_to_str(p)}")
        if wgt is not None and wgt.shape is not None and arith.prove_not_equal(c, wgt.shape[0]):
            raise err(call, f"the weights have {prim_expr_to_str(wgt.shape[0])} entries but there "
                            f"are {prim_expr_to_str(c)} classes")
    if attrs_of(call)["reduction"] != "none":
        return TensorStructInfo((), dtype)
    if out_shape is not None:
        return tensor_sinfo(out_shape, dtype)
    return TensorStructInfo(None, dtype, -1 if pred.ndim == -1 else max(pred.ndim - 1, 0))


def _nll_loss_ref(predictions, targets, weights=None, reduction="mean", ignore_index=-100):
    p = np.asarray(predictions)
    t = np.asarray(targets).astype(np.int64)
    dt = p.dtype
    p64 = p.astype(np.float64)
    if p.ndim == 1:
        p64, t = p64[None], t[None]
    c = p64.shape[1]
    w = np.ones(c) if weights is None else np.asarray(weights, np.float64)
    inside = (t >= 0) & (t < c) & (t != ignore_index)
    safe = np.where(inside, t, 0)
    picked = np.take_along_axis(p64, safe[:, None], axis=1)[:, 0]
    wt = np.where(inside, w[safe], 0.0)
    loss = -picked * wt
    if reduction == "none":
        out = loss[0] if p.ndim == 1 else loss
    elif reduction == "sum":
        out = loss.sum()
    else:
        with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: NaN
            out = loss.sum() / wt.sum()
    return np.asarray(out).astype(dt)


define("nn.nll_loss", ("predictions", "targets", "weights"), _infer_nll_loss,
       attrs={"reduction": ("mean", one_of("none", "sum", "mean")),
              "ignore_index": (-100, as_int)},
       reference=_nll_loss_ref, pattern=OpPattern.OPAQUE, variadic=True,
       doc="Negative log likelihood loss; optional class weights.")


@legalizes("nn.nll_loss")
def _nll_loss(call, inputs):
    p, t = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    w = _tensor(inputs, 2, call) if len(call.args) == 3 else None
    a = attrs_of(call)
    out = _out(call)
    dt = out.dtype
    one_d = p.ndim == 1
    c = p.shape[0] if one_d else p.shape[1]
    loss_shape = () if one_d else (p.shape[0], *p.shape[2:])

    def target(i):
        return te.cast(t[i], "int64")

    def weight_of(i):
        tv = target(i)
        ok = BinaryOp("and", BinaryOp("and", BinaryOp(">=", tv, _i64(0)), BinaryOp("<", tv, c)),
                      BinaryOp("!=", tv, _i64(a["ignore_index"])))
        wv = _const(1, dt) if w is None else w[(_clamp(tv, c),)]
        return Select(ok, wv, _const(0, dt))

    def loss(*i):
        cls = _clamp(target(i), c)
        pv = p[(cls,)] if one_d else p[(i[0], cls, *i[1:])]
        return BinaryOp("*", BinaryOp("*", pv, weight_of(i)), _const(-1, dt))
    per = te.compute(loss_shape, loss, name="T_nll_loss_each")
    if one_d:  # a single element: its loss, and for "mean" divided by its weight
        if a["reduction"] == "mean":
            return te.compute((), lambda: BinaryOp("/", per[()], weight_of(())), name="T_nll_loss")
        return te.compute((), lambda: per[()], name="T_nll_loss")
    if a["reduction"] == "none":
        return te.compute(out.shape, lambda *i: per[i], name="T_nll_loss")
    axes = [te.reduce_axis(s, f"r{j}") for j, s in enumerate(loss_shape)]
    idx = tuple(r.var for r in axes)
    total = te.compute((), lambda: te.sum(per[idx], axis=axes), name="T_nll_loss_sum")
    if a["reduction"] == "sum":
        return te.compute((), lambda: total[()], name="T_nll_loss")
    axes2 = [te.reduce_axis(s, f"q{j}") for j, s in enumerate(loss_shape)]
    idx2 = tuple(r.var for r in axes2)
    wsum = te.compute((), lambda: te.sum(weight_of(idx2), axis=axes2), name="T_nll_loss_wsum")
    return te.compute((), lambda: BinaryOp("/", total[()], wsum[()]), name="T_nll_loss")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_cross_entropy(ctx):
    labels = ctx.const(ctx.shape, 0.0, 1.0)
    bound = math.prod(ctx.shape) * ctx.mag
    ctx.result_in(-bound, bound)
    return (ctx.x, labels), {}


def _draw_nll_loss(ctx):
    n, c = ctx.shape[0], ctx.shape[1]
    targets = ctx.indices((n, *ctx.shape[2:]), c)
    weights = ctx.const((c,), 0.5, 1.5)
    bound = math.prod(ctx.shape) * ctx.mag * 1.5
    ctx.result_in(-bound, bound)
    return (ctx.x, targets, weights), {"reduction": ctx.choose(["mean", "sum", "none"])}


declares_draw("nn.cross_entropy_with_logits", build=_draw_cross_entropy)
declares_draw("nn.nll_loss", ranks=(2, 3), build=_draw_nll_loss)
