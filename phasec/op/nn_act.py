"""Parametric activations: leakyrelu, prelu, selu, softplus.

Semantics (TVM 0.27's legalization, float tensors only, as its inference):

* ``leakyrelu(x, alpha)``: ``x if x > 0 else alpha * x``.
* ``prelu(x, alpha, axis)``: ``x if x > 0 else alpha[c] * x`` with ``c`` the
  index along ``axis``; ``alpha`` is 1-D with ``x.shape[axis]`` or 1 entries.
* ``selu(x)``: ``scale * (max(0, x) + min(0, a * (exp(x) - 1)))`` with TVM's
  constants ``a = 1.6732632423543772``, ``scale = 1.0507009873554805``.
* ``softplus(x, beta, threshold)``: ``x if beta * x > threshold else
  log(1 + exp(beta * x)) / beta``.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec.ir.tir import BinaryOp, Select
from phasec import te
from phasec.op._common import OpPattern, as_float, as_int, define, err, norm_axis, tensor_arg
from phasec.op.elementwise import _float_unary
from phasec.op.draw import declares_draw
from phasec.op._lowering import _const, _name, _out, _tensor, legalizes

__all__ = ["SELU_ALPHA", "SELU_SCALE"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _attrs(call):
    from phasec.op._common import attrs_of
    return attrs_of(call)


# ---------------------------------------------------------------------------
# leakyrelu
# ---------------------------------------------------------------------------

def _leakyrelu_ref(x, alpha=0.01):
    x = np.asarray(x)
    return np.where(x > 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)


define("nn.leakyrelu", ("data",), _float_unary, attrs={"alpha": (0.01, as_float)},
       reference=_leakyrelu_ref, pattern=OpPattern.ELEMWISE,
       doc="x if x > 0 else alpha * x.")


@legalizes("nn.leakyrelu")
def _leakyrelu(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    alpha = _const(_attrs(call)["alpha"], x.dtype)
    zero = _const(0, x.dtype)
    return te.compute(out.shape, lambda *i: Select(BinaryOp(">", x[i], zero), x[i],
                                                   BinaryOp("*", x[i], alpha)),
                      name=_name(call))


# ---------------------------------------------------------------------------
# prelu
# ---------------------------------------------------------------------------

def _infer_prelu(call, ctx):
    x = _float_unary(call, ctx)
    alpha = tensor_arg(call, 1, ctx, "alpha")
    if x.ndim == -1:
        return x
    axis = norm_axis(call, _attrs(call)["axis"], x.ndim)
    if alpha.dtype != "void" and x.dtype != "void" and alpha.dtype != x.dtype:
        raise err(call, f"prelu's alpha has dtype {alpha.dtype} but the data has dtype {x.dtype}")
    if alpha.ndim not in (-1, 1):
        raise err(call, f"prelu's alpha must be 1-D (one slope per channel), but it has "
                        f"ndim {alpha.ndim}")
    if alpha.shape is not None and x.shape is not None:
        a, c = alpha.shape[0], x.shape[axis]
        if arith.const_int(a) != 1 and arith.prove_not_equal(a, c):
            raise err(call, f"prelu's alpha has {arith.const_int(a)} entries but the data has "
                            f"{arith.const_int(c) if arith.const_int(c) is not None else c} "
                            f"channels on axis {axis}")
    return x


def _prelu_ref(x, alpha, axis=1):
    x, alpha = np.asarray(x), np.asarray(alpha)
    axis = axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = alpha.shape[0]
    slope = alpha.reshape(shape)
    return np.where(x > 0, x, x * slope).astype(x.dtype)


define("nn.prelu", ("data", "alpha"), _infer_prelu, attrs={"axis": (1, as_int)},
       reference=_prelu_ref, pattern=OpPattern.BROADCAST,
       doc="x if x > 0 else alpha[c] * x, c the index along ``axis``.")


@legalizes("nn.prelu")
def _prelu(call, inputs):
    x, alpha = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    axis = _attrs(call)["axis"] % x.ndim
    zero = _const(0, x.dtype)
    one_slope = arith.const_int(alpha.shape[0]) == 1

    def body(*i):
        slope = alpha[(_const(0, "int64") if one_slope else i[axis],)]
        return Select(BinaryOp(">", x[i], zero), x[i], BinaryOp("*", x[i], slope))
    return te.compute(out.shape, body, name=_name(call))


# ---------------------------------------------------------------------------
# selu, softplus
# ---------------------------------------------------------------------------

def _selu_ref(x):
    x = np.asarray(x)
    x64 = x.astype(np.float64)
    y = SELU_SCALE * (np.maximum(x64, 0) + np.minimum(0, SELU_ALPHA * (np.exp(x64) - 1)))
    return y.astype(x.dtype)


define("nn.selu", ("data",), _float_unary, reference=_selu_ref, pattern=OpPattern.ELEMWISE,
       doc="scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) (TVM's SELU constants).")


@legalizes("nn.selu")
def _selu(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    dt = x.dtype

    def body(*i):
        v = x[i]
        pos = BinaryOp("max", v, _const(0, dt))
        neg = BinaryOp("min", _const(0, dt), BinaryOp(
            "*", _const(SELU_ALPHA, dt), BinaryOp("-", te.call("exp", v), _const(1, dt))))
        return BinaryOp("*", _const(SELU_SCALE, dt), BinaryOp("+", pos, neg))
    return te.compute(out.shape, body, name=_name(call))


def _softplus_ref(x, beta=1.0, threshold=20.0):
    x = np.asarray(x)
    x64 = x.astype(np.float64)
    bx = beta * x64
    with np.errstate(over="ignore"):
        soft = np.log1p(np.exp(np.minimum(bx, threshold))) / beta
    return np.where(bx > threshold, x64, soft).astype(x.dtype)


def _infer_softplus(call, ctx):
    x = _float_unary(call, ctx)
    if _attrs(call)["beta"] == 0:
        raise err(call, "softplus needs a non-zero beta (the result divides by it)")
    return x


define("nn.softplus", ("data",), _infer_softplus,
       attrs={"beta": (1.0, as_float), "threshold": (20.0, as_float)},
       reference=_softplus_ref, pattern=OpPattern.ELEMWISE,
       doc="x if beta * x > threshold else log(1 + exp(beta * x)) / beta.")


@legalizes("nn.softplus")
def _softplus(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    dt = x.dtype
    beta, thr = _const(a["beta"], dt), _const(a["threshold"], dt)

    def body(*i):
        bx = BinaryOp("*", beta, x[i])
        # exp of the clamped argument: the untaken branch never overflows
        soft = BinaryOp("/", te.call("log", BinaryOp("+", _const(1, dt),
                                                     te.call("exp", BinaryOp("min", bx, thr)))),
                        beta)
        return Select(BinaryOp(">", bx, thr), x[i], soft)
    return te.compute(out.shape, body, name=_name(call))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_prelu(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    return (ctx.x, ctx.const((ctx.shape[axis],), 0.0, 1.0)), {"axis": axis}


declares_draw("nn.prelu", build=_draw_prelu)
