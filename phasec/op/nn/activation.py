"""Activations (TVM 0.27's ``relax.nn`` activations): relu, gelu, gelu_tanh,
silu, leakyrelu, prelu, selu, softplus, and softmax / log_softmax.

Semantics (TVM 0.27's legalization; float tensors only, as its inference,
except relu, which takes any numeric dtype but bool):

* ``relu(x)``: ``max(x, 0)``. ``gelu(x)``: ``0.5 * x * (1 + erf(x /
  sqrt(2)))``; ``gelu_tanh(x)``: its tanh approximation ``0.5 * x * (1 +
  tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``. ``silu(x)``: ``x *
  sigmoid(x)``. Elementwise, as :mod:`phasec.op.unary`'s operators, whose
  inference, reference and kernel helpers they use.
* ``leakyrelu(x, alpha)``: ``x if x > 0 else alpha * x``.
* ``prelu(x, alpha, axis)``: ``x if x > 0 else alpha[c] * x`` with ``c`` the
  index along ``axis``; ``alpha`` is 1-D with ``x.shape[axis]`` or 1 entries.
* ``selu(x)``: ``scale * (max(0, x) + min(0, a * (exp(x) - 1)))`` with TVM's
  constants ``a = 1.6732632423543772``, ``scale = 1.0507009873554805``.
* ``softplus(x, beta, threshold)``: ``x if beta * x > threshold else
  log(1 + exp(beta * x)) / beta``.
* ``softmax(x, axis=-1)`` / ``log_softmax``: along ``axis``, numerically
  stable (the row's maximum subtracted first).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.expr import Call
from phasec.ir import tir
from phasec.ir.tir import BinaryOp, FloatImm, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_float, as_int, attrs_of, define, err, norm_axis, tensor_arg,
)
from phasec.op._lowering import (
    Inputs, _const, _name, _norm_axis, _out, _reduction, _tensor, legalizes,
)
from phasec.op._tirgen import i64, seq
from phasec.op.draw import FLOAT, FLOATS, Elementwise, Hooks, declares_draw, dim_max
from phasec.op.unary import (
    any_unary, float_unary, np_erf, np_sigmoid, unary_kernel, unary_reference,
)
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["UNARY_ACTIVATIONS", "SELU_ALPHA", "SELU_SCALE"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _infer_float(call, ctx):
    """A float tensor in, its struct info out."""
    return float_unary(call, ctx)


def _infer_numeric(call, ctx):
    """A tensor in, its struct info out."""
    return any_unary(call, ctx)


# ---------------------------------------------------------------------------
# relu, gelu, gelu_tanh, silu: elementwise, as the unary operators
# ---------------------------------------------------------------------------

def _gelu(x):
    return 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


#: name -> (numpy implementation, needs float dtype, compute in float64), as
#: :data:`phasec.op.unary.UNARY`
UNARY_ACTIVATIONS = {
    "nn.relu": (_relu, False, False),
    "nn.gelu": (_gelu, True, True),
    "nn.gelu_tanh": (_gelu_tanh, True, True),
    "nn.silu": (lambda x: x * np_sigmoid(x), True, True),
}

for _opname, (_fn, _needs_float, _f64) in UNARY_ACTIVATIONS.items():
    define(_opname, ("x",), _infer_float if _needs_float else _infer_numeric,
           reference=unary_reference(_fn, via_float64=_f64), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_opname.removeprefix('nn.')}.")


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_PI = math.sqrt(2.0 / math.pi)


def _te_gelu(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    half = _const(0.5, dt)
    erf = te.call("erf", BinaryOp("*", x, _const(_SQRT1_2, dt)))
    return BinaryOp("*", BinaryOp("*", half, x), BinaryOp("+", _const(1.0, dt), erf))


def _te_gelu_tanh(x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    cube = BinaryOp("*", BinaryOp("*", x, x), x)
    inner = BinaryOp("*", _const(_SQRT_2_PI, dt),
                     BinaryOp("+", x, BinaryOp("*", _const(0.044715, dt), cube)))
    return BinaryOp("*", BinaryOp("*", _const(0.5, dt), x),
                    BinaryOp("+", _const(1.0, dt), te.call("tanh", inner)))


for _n, _fn in (("nn.relu", lambda x: BinaryOp("max", x, _const(0, x.dtype))),
                ("nn.gelu", _te_gelu), ("nn.gelu_tanh", _te_gelu_tanh),
                ("nn.silu", lambda x: BinaryOp("*", x, te.call("sigmoid", x)))):
    legalizes(_n)(unary_kernel(_fn))


def _smooth_relu_iv(floor: float):
    # silu/gelu: bounded below by a small negative constant, above by relu
    return lambda iv: (floor if iv[0] < 0 else 0.0, max(iv[1], 0.0))


# the order is the operator's place among the simplest (phasec.op.draw)
declares_draw("nn.relu", Elementwise(lambda iv: (max(iv[0], 0.0), max(iv[1], 0.0)), 1, FLOATS,
                                     None, order=5))
declares_draw("nn.silu", Elementwise(_smooth_relu_iv(-0.28), 1, FLOATS, None, order=18))
declares_draw("nn.gelu", Elementwise(_smooth_relu_iv(-0.17), 1, FLOATS, None, order=19))
declares_draw("nn.gelu_tanh", Elementwise(_smooth_relu_iv(-0.17), 1, FLOATS, None, order=20))


# ---------------------------------------------------------------------------
# leakyrelu
# ---------------------------------------------------------------------------

def _leakyrelu_ref(x, alpha=0.01):
    x = np.asarray(x)
    return np.where(x > 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)


define("nn.leakyrelu", ("data",), _infer_float, attrs={"alpha": (0.01, as_float)},
       reference=_leakyrelu_ref, pattern=OpPattern.ELEMWISE,
       doc="x if x > 0 else alpha * x.")


@legalizes("nn.leakyrelu")
def _leakyrelu(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    alpha = _const(attrs_of(call)["alpha"], x.dtype)
    zero = _const(0, x.dtype)
    return te.compute(out.shape, lambda *i: Select(BinaryOp(">", x[i], zero), x[i],
                                                   BinaryOp("*", x[i], alpha)),
                      name=_name(call))


# ---------------------------------------------------------------------------
# prelu
# ---------------------------------------------------------------------------

def _infer_prelu(call, ctx):
    x = float_unary(call, ctx)
    alpha = tensor_arg(call, 1, ctx, "alpha")
    if x.ndim == -1:
        return x
    axis = norm_axis(call, attrs_of(call)["axis"], x.ndim)
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
    axis = attrs_of(call)["axis"] % x.ndim
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


define("nn.selu", ("data",), _infer_float, reference=_selu_ref, pattern=OpPattern.ELEMWISE,
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
    x = float_unary(call, ctx)
    if attrs_of(call)["beta"] == 0:
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
    a = attrs_of(call)
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


def _draw_prelu(ctx):
    axis = ctx.choose(range(len(ctx.shape)))
    return (ctx.x, ctx.const((ctx.shape[axis],), 0.0, 1.0)), {"axis": axis}


declares_draw("nn.prelu", build=_draw_prelu)


# ---------------------------------------------------------------------------
# softmax / log_softmax
# ---------------------------------------------------------------------------

def _infer_softmax(call, ctx):
    x = float_unary(call, ctx)
    if x.ndim != -1:
        if x.ndim == 0:
            raise err(call, "softmax needs a tensor with at least one dimension")
        norm_axis(call, attrs_of(call)["axis"], x.ndim)
    return x


def _softmax_ref(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _log_softmax_ref(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(x.dtype)


for _opname, _ref in (("nn.softmax", _softmax_ref), ("nn.log_softmax", _log_softmax_ref)):
    define(_opname, ("data",), _infer_softmax, attrs={"axis": (-1, as_int)}, reference=_ref,
           pattern=OpPattern.OPAQUE,
           doc=f"{_opname.removeprefix('nn.')} along ``axis`` (numerically stable).")


def _drop(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(v for d, v in enumerate(i) if d not in axes)


def _softmax_parts(x: Tensor, ax: int, prefix: str) -> tuple[Tensor, Tensor, Tensor]:
    red_shape = _drop(x.shape, [ax])
    # te.fast_max: a NaN in x makes every result NaN whichever maximum wins
    mx = _reduction(x, [ax], False, red_shape, te.fast_max, prefix + "_maxelem")
    shifted = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mx[_drop(i, [ax])]),
                         name=prefix + "_shifted")
    s = _reduction(shifted, [ax], False, red_shape, te.sum, prefix + "_expsum",
                   lambda v: te.call("exp", v))
    return mx, shifted, s


@legalizes("nn.softmax")
def _softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(attrs_of(call)["axis"], x.ndim)
    if ax != x.ndim - 1 or x.ndim < 2:
        _, shifted, s = _softmax_parts(x, ax, "T_softmax")
        return te.compute(x.shape, lambda *i: BinaryOp("/", te.call("exp", shifted[i]),
                                                       s[_drop(i, [ax])]), name="T_softmax")
    if x.dtype in ("float32", "float64") and arith.const_int(x.shape[-1]) is None:
        return _softmax_symbolic_rows(x)
    # Softmax over rows: exp(x - max) is computed once per element, into a
    # row buffer that both the sum and the division read (te.ROW_LOCAL),
    # instead of once in each.
    red_shape = _drop(x.shape, [ax])
    # The row's maximum with the CPU's max instruction into partial lanes
    # (te.fast_max): a NaN in the row still makes the whole row NaN, through
    # exp(NaN - max) in the sum, whichever maximum the lanes pick.
    mx = _reduction(x, [ax], False, red_shape, te.fast_max, "T_softmax_maxelem")
    e = te.compute(x.shape, lambda *i: te.call("exp", BinaryOp("-", x[i], mx[_drop(i, [ax])])),
                   name="T_softmax_exp", attrs={te.ROW_LOCAL: True})
    s = _reduction(e, [ax], False, red_shape, te.sum, "T_softmax_expsum")
    # Times the row's reciprocal (LLVM hoists 1 / sum out of the row loop)
    # instead of a division per element, as ONNX Runtime's softmax does:
    # within an ulp of the quotient; vector divisions are several times
    # slower than products (4 x 128 x 128: 29 -> 27 us on one core).
    if x.dtype == "float16":  # a float16 reciprocal would round twice: divide
        return te.compute(x.shape, lambda *i: BinaryOp("/", e[i], s[_drop(i, [ax])]),
                          name="T_softmax")
    one = FloatImm(1.0, x.dtype)
    return te.compute(x.shape,
                      lambda *i: BinaryOp("*", e[i], BinaryOp("/", one, s[_drop(i, [ax])])),
                      name="T_softmax")


#: partial lanes of a symbolic softmax row's maximum and sum (one AVX-512 vector)
_ROW_LANES = 16


def _softmax_symbolic_rows(x: Tensor) -> Tensor:
    """Softmax over a last axis of symbolic length, one row at a time: the
    row's maximum, ``exp(x - max)`` written to the output row, its sum, then
    the row scaled by the sum's reciprocal. Computed as above, where the row
    buffer holding ``exp(x - max)`` needs a static length (a symbolic one
    would evaluate exp twice per element, in the sum and in the quotient);
    the output row serves as that buffer here. The maximum and the sum run
    in ``_ROW_LANES`` partial lanes (independent chains, vectorized), folded
    as a tree, then the row's last ``n % _ROW_LANES`` elements one by one;
    ``exp(x - max)`` is computed in the sum's loop."""
    dt = x.dtype
    lanes = _ROW_LANES

    def build(ins: list[tir.Buffer], out: tir.Buffer) -> tir.Stmt:
        (xb,) = ins
        n = out.shape[-1]
        acc = tir.Buffer("T_softmax_acc", (i64(2),), dt)  # the row's max and sum
        part = tir.Buffer("T_softmax_part", (i64(lanes),), dt)
        top, total = acc[i64(0)], acc[i64(1)]

        def larger(a: PrimExpr, b: PrimExpr) -> PrimExpr:
            # (a NaN makes the whole row NaN whichever maximum wins: exp(NaN - max))
            return Select(BinaryOp(">", a, b), a, b)

        def row(lead: tuple[tir.Var, ...]) -> tir.Stmt:
            def loop(kind: str, extent: PrimExpr, body: Any) -> tir.Stmt:
                j = tir.Var("j", "int64")
                return tir.For(j, i64(0), extent, kind, body(j))

            def at(j: PrimExpr) -> tuple[PrimExpr, ...]:
                return tuple(lead) + (j,)

            def reduce(slot: int, init: PrimExpr, src: tir.Buffer,
                       combine: Callable[[PrimExpr, PrimExpr], PrimExpr],
                       produce: Callable[[PrimExpr], tir.Stmt] | None = None) -> list[tir.Stmt]:
                # (produce(j) writes src's element j first: exp in the sum's loop)
                def step(j: PrimExpr, store: tir.Stmt) -> tir.Stmt:
                    return store if produce is None else seq(produce(j), store)
                stmts = [loop("vectorized", i64(lanes),
                              lambda l: tir.BufferStore(part, init, (l,))),
                         loop("serial", n // lanes, lambda jo: loop(
                             "vectorized", i64(lanes), lambda l: step(
                                 jo * lanes + l, tir.BufferStore(
                                     part, combine(part[l], src[at(jo * lanes + l)]), (l,)))))]
                width = lanes // 2
                while width >= 1:  # the tree fold
                    stmts.append(loop("vectorized" if width >= 4 else "unroll", i64(width),
                                      lambda l, w=width: tir.BufferStore(
                                          part, combine(part[l], part[l + w]), (l,))))
                    width //= 2
                stmts.append(tir.BufferStore(acc, part[i64(0)], (i64(slot),)))
                stmts.append(loop("serial", n % lanes, lambda r: step(
                    n // lanes * lanes + r, tir.BufferStore(
                        acc, combine(acc[i64(slot)], src[at(n // lanes * lanes + r)]),
                        (i64(slot),)))))
                return stmts

            return tir.Allocate(acc, tir.Allocate(part, seq(
                *reduce(0, te.min_value(dt), xb, larger),
                *reduce(1, FloatImm(0.0, dt), out, lambda a, b: BinaryOp("+", a, b),
                        lambda j: tir.BufferStore(
                            out, te.call("exp", BinaryOp("-", xb[at(j)], top)), at(j))),
                loop("vectorized", n, lambda j: tir.BufferStore(
                    out, BinaryOp("*", out[lead + (j,)], BinaryOp("/", FloatImm(1.0, dt), total)),
                    lead + (j,))))))
        lead = [tir.Var(f"i{d}", "int64") for d in range(len(out.shape) - 1)]
        stmt = row(tuple(lead))
        for d in reversed(range(len(lead))):
            stmt = tir.For(lead[d], i64(0), out.shape[d], "parallel" if d == 0 else "serial", stmt)
        return stmt
    return te.extern(x.shape, dt, [x], build, name="T_softmax")


@legalizes("nn.log_softmax")
def _log_softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(attrs_of(call)["axis"], x.ndim)
    _, shifted, s = _softmax_parts(x, ax, "T_log_softmax")
    return te.compute(x.shape, lambda *i: BinaryOp("-", shifted[i],
                                                   te.call("log", s[_drop(i, [ax])])),
                      name="T_log_softmax")


def _softmax_draw(name: str, order: int) -> Hooks:
    def build(g, x):

        axis = g.pick(list(range(-1, -x.rank - 1, -1)))
        if name == "nn.softmax":
            iv = (0.0, 1.0)
        else:
            n = dim_max(x.shape[axis], g.cfg.max_dim)
            iv = (-(x.hi - x.lo) - math.log(n) - 1.0, 0.0)
        return g.emit(call_op("relax." + name, x.expr, axis=axis), FLOAT, iv)

    return Hooks(build, (FLOAT,), 1,
                 accepts=lambda g, x: x.kind == FLOAT and x.rank >= 1 and x.hi - x.lo < 64,
                 order=order)


for _opname, _order in (("nn.softmax", 43), ("nn.log_softmax", 44)):
    declares_draw(_opname, _softmax_draw(_opname, _order))
