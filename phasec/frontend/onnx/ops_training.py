"""The optimizers of ONNX's ``ai.onnx.preview.training`` domain: ``Adagrad``,
``Adam`` and ``Momentum`` (standard and Nesterov), one or several tensors at
once. Each is a closed-form elementwise update of the tensors ``X`` given
their gradients ``G`` and accumulators, with a learning rate ``R`` and a
step count ``T`` (scalars, read at run time), decomposed into phasec
operators in the tensors' dtype as the ONNX definitions state them (the
step-dependent choices, Adam's bias correction and Momentum's first-step
coefficient, are ``where`` on ``T > 0``). ``Gradient`` needs automatic
differentiation, which phasec does not have: it stays unsupported.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter

__all__: list[str] = []

_DOMAIN = "ai.onnx.preview.training"


def _groups(ctx: NodeContext, per: int) -> list[list[Value]]:
    """The inputs after R and T split into ``per`` equal groups (X..., G..., ...)."""
    n, rest = divmod(len(ctx.inputs) - 2, per)
    if n < 1 or rest:
        raise FrontendError(f"{ctx.op_type} takes R, T and {per} groups of equally many "
                            f"tensors, got {len(ctx.inputs)} inputs")
    return [[ctx.input(2 + g * n + k) for k in range(n)] for g in range(per)]


def _scalars(ctx: NodeContext, dtype: str) -> tuple[Value, Value]:
    """R in ``dtype`` and T (int64) as 0-d tensors."""
    r, t = ctx.input(0), ctx.input(1)
    for v, what in ((r, "the learning rate R"), (t, "the step count T")):
        if ctx.ndim(v) != 0 and ctx.shape(v) != [1]:
            raise FrontendError(f"{ctx.op_type}: {what} must be a scalar, got shape "
                                f"{ctx.shape(v)}")
    if ctx.dtype(t) != "int64":
        raise FrontendError(f"{ctx.op_type}: the step count T must be int64, got {ctx.dtype(t)}")
    r = r if ctx.ndim(r) == 0 else ctx.emit("reshape", r, ())
    t = t if ctx.ndim(t) == 0 else ctx.emit("reshape", t, ())
    r = r if ctx.dtype(r) == dtype else ctx.emit("astype", r, dtype=dtype)
    return r, t


def _update(ctx: NodeContext, per: int, step: Callable[..., tuple[Value, ...]]) -> list[Value]:
    """Apply ``step(c, r, t, x, g, *accumulators)`` to each tensor; the
    results grouped as ONNX lists them (all new X, then each accumulator's)."""
    groups = _groups(ctx, per)
    dtype = ctx.dtype(groups[0][0])
    if dtype not in ("float32", "float64"):
        raise Unsupported(f"{ctx.op_type} on {dtype} tensors")
    r, t = _scalars(ctx, dtype)

    def c(v: float) -> np.ndarray:
        return np.asarray(v, dtype)
    outs = [step(c, r, t, *vals) for vals in zip(*groups)]
    return [o[k] for k in range(len(outs[0])) for o in outs]


def _regularized(ctx: NodeContext, c: Callable, x: Value, g: Value) -> Value:
    """``norm_coefficient * x + g``."""
    return ctx.emit("add", ctx.emit("multiply", c(ctx.attr("norm_coefficient", 0.0)), x), g)


@converter("Adagrad", domain=_DOMAIN)
def _adagrad(ctx: NodeContext) -> list[Value]:
    decay, eps = float(ctx.attr("decay_factor", 0.0)), float(ctx.attr("epsilon", 1e-6))

    def step(c, r, t, x, g, h):
        tf = ctx.emit("astype", t, dtype=ctx.dtype(x))
        rate = ctx.emit("divide", r, ctx.emit("add", c(1.0), ctx.emit("multiply", tf, c(decay))))
        gr = _regularized(ctx, c, x, g)
        h_new = ctx.emit("add", h, ctx.emit("multiply", gr, gr))
        root = ctx.emit("add", ctx.emit("sqrt", h_new), c(eps))
        x_new = ctx.emit("subtract", x, ctx.emit("divide", ctx.emit("multiply", rate, gr), root))
        return x_new, h_new
    return _update(ctx, 3, step)


@converter("Adam", domain=_DOMAIN)
def _adam(ctx: NodeContext) -> list[Value]:
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    eps, post = float(ctx.attr("epsilon", 1e-6)), float(ctx.attr("norm_coefficient_post", 0.0))

    def step(c, r, t, x, g, v, h):
        gr = _regularized(ctx, c, x, g)
        v_new = ctx.emit("add", ctx.emit("multiply", c(alpha), v),
                         ctx.emit("multiply", c(1.0 - alpha), gr))
        h_new = ctx.emit("add", ctx.emit("multiply", c(beta), h),
                         ctx.emit("multiply", c(1.0 - beta), ctx.emit("multiply", gr, gr)))
        root = ctx.emit("add", ctx.emit("sqrt", h_new), c(eps))
        # bias correction from the first step on (T > 0)
        tf = ctx.emit("astype", t, dtype=ctx.dtype(x))
        corrected = ctx.emit("divide", ctx.emit("multiply", r, ctx.emit(
            "sqrt", ctx.emit("subtract", c(1.0), ctx.emit("power", c(beta), tf)))),
            ctx.emit("subtract", c(1.0), ctx.emit("power", c(alpha), tf)))
        rate = ctx.emit("where", ctx.emit("greater", t, np.zeros((), np.int64)), corrected, r)
        x_new = ctx.emit("subtract", x, ctx.emit("multiply", rate,
                                                 ctx.emit("divide", v_new, root)))
        return ctx.emit("multiply", c(1.0 - post), x_new), v_new, h_new
    return _update(ctx, 4, step)


@converter("Momentum", domain=_DOMAIN)
def _momentum(ctx: NodeContext) -> list[Value]:
    missing = [a for a in ("alpha", "beta", "mode", "norm_coefficient") if ctx.attr(a) is None]
    if missing:
        raise FrontendError(f"Momentum needs the attribute(s) {', '.join(missing)}")
    alpha, beta, mode = float(ctx.attr("alpha")), float(ctx.attr("beta")), ctx.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise FrontendError(f"Momentum mode {mode!r} (expects 'standard' or 'nesterov')")

    def step(c, r, t, x, g, v):
        gr = _regularized(ctx, c, x, g)
        # the gradient's coefficient is 1 on the first step (T == 0)
        b = ctx.emit("where", ctx.emit("greater", t, np.zeros((), np.int64)), c(beta), c(1.0))
        v_new = ctx.emit("add", ctx.emit("multiply", c(alpha), v), ctx.emit("multiply", b, gr))
        move = v_new if mode == "standard" else \
            ctx.emit("add", gr, ctx.emit("multiply", c(alpha), v_new))
        return ctx.emit("subtract", x, ctx.emit("multiply", r, move)), v_new
    return _update(ctx, 3, step)
