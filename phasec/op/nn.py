"""Neural-network operators: softmax, log_softmax, layer_norm, rms_norm (the
convolutions are in :mod:`.nn_conv`, pooling in :mod:`.nn_pool`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.te import Tensor
from phasec.ir.tir import BinaryOp, FloatImm, PrimExpr
from phasec.op._common import (
    OpPattern, REQUIRED, as_bool, as_float, as_int, define,
    err, int_tuple, norm_axes, norm_axis, tensor_arg,
)
from phasec.op._lowering import (
    Inputs, _const, _count, _norm_axis, _prod, _reduction, _tensor,
    legalizes,
)
from phasec.op._draw import FLOAT, Hooks, const_dim, declares_draw, dim_max
from phasec.op.elementwise import _float_unary  # the float-dtype check

__all__: list[str] = []


def _attrs(call):
    from phasec.op._common import attrs_of
    return attrs_of(call)


# ---------------------------------------------------------------------------
# softmax / log_softmax
# ---------------------------------------------------------------------------

def _infer_softmax(call, ctx):
    x = _float_unary(call, ctx)
    if x.ndim != -1:
        if x.ndim == 0:
            raise err(call, "softmax needs a tensor with at least one dimension")
        norm_axis(call, _attrs(call)["axis"], x.ndim)
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


# ---------------------------------------------------------------------------
# layer_norm / rms_norm
# ---------------------------------------------------------------------------

def _check_norm_param(call, x: TensorStructInfo, axes: list[int], idx: int, what: str) -> None:
    p = tensor_arg(call, idx, None, what)
    names = (call.args[0], call.args[idx])
    if x.dtype != "void" and p.dtype != "void" and x.dtype != p.dtype:
        from phasec.ir.text import expr_to_str
        raise err(call, f"{what} {expr_to_str(names[1])} has dtype {p.dtype} but the input "
                        f"{expr_to_str(names[0])} has dtype {x.dtype}")
    if p.ndim != -1 and p.ndim != len(axes):
        raise err(call, f"{what} must have one dimension per normalized axis "
                        f"({len(axes)}), but it has ndim {p.ndim}")
    if p.shape is not None and x.shape is not None:
        for pd, a in zip(p.shape, axes):
            if arith.prove_not_equal(pd, x.shape[a]):
                from phasec.ir.text import prim_expr_to_str
                raise err(call, f"{what} dimension {prim_expr_to_str(pd)} does not match input "
                                f"dimension {prim_expr_to_str(x.shape[a])} on axis {a}")


def _infer_layer_norm(call, ctx):
    x = _float_unary(call, ctx)
    for i in (1, 2):
        tensor_arg(call, i, ctx)
    attrs = _attrs(call)
    if x.ndim != -1:
        axes = norm_axes(call, attrs["axes"], x.ndim, "axes")
        _check_norm_param(call, x, axes, 1, "gamma")
        _check_norm_param(call, x, axes, 2, "beta")
    return x


def _layer_norm_ref(x, gamma, beta, axes, epsilon=1e-5, center=True, scale=True):
    x = np.asarray(x)
    axes = tuple(a % x.ndim for a in axes)
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + np.asarray(epsilon, x.dtype))
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if scale:
        out = out * np.asarray(gamma).reshape(bshape)
    if center:
        out = out + np.asarray(beta).reshape(bshape)
    return out.astype(x.dtype)


define("nn.layer_norm", ("data", "gamma", "beta"), _infer_layer_norm,
       attrs={"axes": (REQUIRED, int_tuple), "epsilon": (1e-5, as_float),
              "center": (True, as_bool), "scale": (True, as_bool)},
       reference=_layer_norm_ref, pattern=OpPattern.OPAQUE,
       doc="(x - mean) / sqrt(var + epsilon) * gamma + beta over ``axes`` (population variance).")


def _infer_rms_norm(call, ctx):
    x = _float_unary(call, ctx)
    tensor_arg(call, 1, ctx)
    if x.ndim != -1:
        axes = norm_axes(call, _attrs(call)["axes"], x.ndim, "axes")
        _check_norm_param(call, x, axes, 1, "weight")
    return x


def _rms_norm_ref(x, weight, axes=(-1,), epsilon=1e-5):
    x = np.asarray(x)
    axes = tuple(a % x.ndim for a in axes)
    ms = np.mean(np.square(x), axis=axes, keepdims=True)
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    out = x / np.sqrt(ms + np.asarray(epsilon, x.dtype)) * np.asarray(weight).reshape(bshape)
    return out.astype(x.dtype)


define("nn.rms_norm", ("data", "weight"), _infer_rms_norm,
       attrs={"axes": ((-1,), int_tuple), "epsilon": (1e-5, as_float)},
       reference=_rms_norm_ref, pattern=OpPattern.OPAQUE,
       doc="x / sqrt(mean(x^2 over axes) + epsilon) * weight.")



# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

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
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    if ax != x.ndim - 1 or x.ndim < 2:
        _, shifted, s = _softmax_parts(x, ax, "T_softmax")
        return te.compute(x.shape, lambda *i: BinaryOp("/", te.call("exp", shifted[i]),
                                                       s[_drop(i, [ax])]), name="T_softmax")
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
    one = FloatImm(1.0, x.dtype)
    return te.compute(x.shape,
                      lambda *i: BinaryOp("*", e[i], BinaryOp("/", one, s[_drop(i, [ax])])),
                      name="T_softmax")


@legalizes("nn.log_softmax")
def _log_softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    _, shifted, s = _softmax_parts(x, ax, "T_log_softmax")
    return te.compute(x.shape, lambda *i: BinaryOp("-", shifted[i],
                                                   te.call("log", s[_drop(i, [ax])])),
                      name="T_log_softmax")


def _param_index(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(i[a] for a in axes)


def _mean_over(x: Tensor, axes: list[int], name: str,
               value: Callable[[PrimExpr], PrimExpr] = lambda v: v) -> Tensor:
    red_shape = _drop(x.shape, axes)
    s = _reduction(x, axes, False, red_shape, te.sum, name + "_sum", value)
    count = _count(_prod([x.shape[a] for a in axes]), x.dtype)
    return te.compute(red_shape, lambda *i: BinaryOp("/", s[i], count), name=name)


@legalizes("nn.layer_norm")
def _layer_norm(call: Call, inputs: Inputs) -> Tensor:
    x, gamma, beta = (_tensor(inputs, k, call) for k in range(3))
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    dt = x.dtype
    eps = _const(a["epsilon"], dt)
    mean = _mean_over(x, axes, "T_layer_norm_mean")
    diff = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mean[_drop(i, axes)]),
                      name="T_layer_norm_diff")
    var = _mean_over(diff, axes, "T_layer_norm_var", lambda v: BinaryOp("*", v, v))

    def body(*i: PrimExpr) -> PrimExpr:
        v = BinaryOp("/", diff[i], te.call("sqrt", BinaryOp("+", var[_drop(i, axes)], eps)))
        if a["scale"]:
            v = BinaryOp("*", v, gamma[_param_index(i, axes)])
        if a["center"]:
            v = BinaryOp("+", v, beta[_param_index(i, axes)])
        return v
    return te.compute(x.shape, body, name="T_layer_norm")


@legalizes("nn.rms_norm")
def _rms_norm(call: Call, inputs: Inputs) -> Tensor:
    x, weight = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    eps = _const(a["epsilon"], x.dtype)
    ms = _mean_over(x, axes, "T_rms_norm_ms", lambda v: BinaryOp("*", v, v))
    return te.compute(x.shape, lambda *i: BinaryOp(
        "*", BinaryOp("/", x[i], te.call("sqrt", BinaryOp("+", ms[_drop(i, axes)], eps))),
        weight[_param_index(i, axes)]), name="T_rms_norm")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (phasec.op._draw.Hooks)
# ---------------------------------------------------------------------------

def _softmax_draw(name: str, order: int) -> Hooks:
    def build(g, x):
        from phasec.op.calls import call_op

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


def _norm_draw(name: str, order: int) -> Hooks:
    """Over the last axis (which must be constant), with constant gamma/beta."""
    def build(g, x):
        from phasec.op.calls import call_op

        n = const_dim(x.shape[-1])
        gamma = g.constant((n,), (0.5, 1.5), "float32")
        bound = math.sqrt(n) * gamma.mag
        if name == "nn.layer_norm":
            beta = g.constant((n,), (-1.0, 1.0), "float32")
            call = call_op("relax." + name, x.expr, gamma.expr, beta.expr, axes=[-1])
            bound += beta.mag
        else:
            call = call_op("relax." + name, x.expr, gamma.expr, axes=[-1])
        return g.emit(call, FLOAT, (-bound, bound))

    return Hooks(build, (FLOAT,), 1, accepts=lambda g, x: (
        x.kind == FLOAT and x.rank >= 1 and const_dim(x.shape[-1]) is not None), order=order)


for _opname, _order in (("nn.softmax", 43), ("nn.log_softmax", 44)):
    declares_draw(_opname, _softmax_draw(_opname, _order))
for _opname, _order in (("nn.layer_norm", 45), ("nn.rms_norm", 46)):
    declares_draw(_opname, _norm_draw(_opname, _order))
