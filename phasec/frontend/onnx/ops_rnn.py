"""ONNX LSTM, GRU and RNN, to ``R.nn.lstm`` / ``R.nn.gru`` / ``R.nn.rnn``
(:mod:`phasec.op.nn.rnn`: a compiled loop over time around the fused cell).

Everything the operators carry maps onto the phasec operator: every
direction, ``sequence_lens``, initial states, peepholes, ``clip``,
``input_forget``, ``linear_before_reset``, the activations with their
``activation_alpha`` / ``activation_beta`` (ONNX lists them in the order of
the activations that take one; each activation gets its own here, ONNX
Runtime's defaults where the list runs out), ``layout=1`` (batch-major: the
data, Y and the states are transposed around the call) and every optional
output. Absent optional inputs become zeros (a bias, an initial state,
peepholes); ``sequence_lens`` known at import to be the full length is
dropped. A symbolic sequence length or batch size stays symbolic: the loop
runs over the length given at run time. float16 (and bfloat16) compute in
float32, as ONNX Runtime does. Lengths in ``sequence_lens`` beyond the
sequence are clamped to it (ONNX Runtime refuses them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
from phasec.frontend.onnx._registry import converter
from phasec.op.nn.rnn import ACTIVATIONS, CELLS

__all__ = ["convert_recurrent"]

_CELL = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}
_DIRECTIONS = ("forward", "reverse", "bidirectional")
_CANONICAL = {n.lower(): n for n in ACTIVATIONS}


def _activations(ctx: NodeContext, cell: str, ndir: int) -> dict[str, Any]:
    """The op's activation attributes: names, and one alpha and beta per
    activation (ONNX consumes its lists in order, by the activations that
    take an alpha or a beta)."""
    _, per, default = CELLS[cell]
    names = ctx.attr("activations")
    if names is None:
        names = list(default) * ndir
    names = [str(n) for n in names]
    if len(names) != per * ndir:
        raise FrontendError(f"{ctx.op_type} needs {per * ndir} activations ({per} per "
                            f"direction), got {len(names)}: {names}")
    unknown = [n for n in names if n.lower() not in _CANONICAL]
    if unknown:
        raise Unsupported(f"activation {unknown[0]!r} (ONNX defines {', '.join(ACTIVATIONS)})")
    canon = [_CANONICAL[n.lower()] for n in names]
    alphas = list(ctx.attr("activation_alpha", []) or [])
    betas = list(ctx.attr("activation_beta", []) or [])
    out_a, out_b = [], []
    for name in canon:
        takes_a, takes_b, a0, b0 = ACTIVATIONS[name]
        out_a.append(float(alphas.pop(0)) if takes_a and alphas else a0)
        out_b.append(float(betas.pop(0)) if takes_b and betas else b0)
    return {"activations": tuple(canon), "activation_alpha": tuple(out_a),
            "activation_beta": tuple(out_b)}


def _full_length(lens: Value, t_len: Any) -> bool:
    """Is ``sequence_lens`` known at import to be the whole sequence everywhere?"""
    return (is_const(lens) and lens.dtype != object and isinstance(t_len, int)
            and bool(np.all(np.asarray(lens) == t_len)))


def convert_recurrent(ctx: NodeContext, cell: str, x: Value, w: Value, r: Value,
                      bias: Value | None, lens: Value | None, h0: Value | None,
                      c0: Value | None = None, peephole: Value | None = None) -> list[Value]:
    """``R.nn.<cell>`` for ONNX-shaped operands (``layout`` 0 or 1 as the
    node's attribute says), absent ones as zeros; returns Y, Y_h (and Y_c).
    Shared by LSTM/GRU/RNN and by converters of variants whose weights are
    computed first (a dequantized LSTM)."""
    gates = CELLS[cell][0]
    direction = ctx.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise FrontendError(f"{ctx.op_type}: direction must be one of {', '.join(_DIRECTIONS)}, "
                            f"got {direction!r}")
    ndir = 2 if direction == "bidirectional" else 1
    layout = int(ctx.attr("layout", 0))
    if layout not in (0, 1):
        raise FrontendError(f"{ctx.op_type}: layout must be 0 or 1, got {layout}")
    dtype = ctx.dtype(x)
    if not dtype.startswith(("float", "bfloat")):
        raise Unsupported(f"dtype {dtype} (phasec computes {ctx.op_type} on floats)")
    if ctx.ndim(x) != 3 or ctx.ndim(w) != 3 or ctx.ndim(r) != 3:
        raise FrontendError(f"{ctx.op_type}: X, W and R must be 3-D, got shapes "
                            f"{ctx.shape(x)}, {ctx.shape(w)}, {ctx.shape(r)}")
    if layout == 1:
        x = ctx.emit("permute_dims", x, axes=[1, 0, 2])
        h0 = None if h0 is None else ctx.emit("permute_dims", h0, axes=[1, 0, 2])
        c0 = None if c0 is None else ctx.emit("permute_dims", c0, axes=[1, 0, 2])
    t_len, batch, _ = ctx.shape(x)
    hidden = ctx.shape(r)[2]
    size = ctx.attr("hidden_size")
    if size is not None and isinstance(hidden, int) and int(size) != hidden:
        raise FrontendError(f"{ctx.op_type}: hidden_size={size} but R has shape "
                            f"{ctx.shape(r)} (hidden size {hidden})")
    compute = "float32" if dtype in ("float16", "bfloat16") else dtype

    def operand(v: Value | None, shape: tuple[Any, ...]) -> Value:
        if v is None:
            if all(isinstance(s, int) for s in shape):
                return np.zeros(shape, compute)
            return ctx.emit("zeros", shape, dtype=compute)
        return v if ctx.dtype(v) == compute else ctx.emit("astype", v, dtype=compute)

    operands = [operand(x, ()), operand(w, ()), operand(r, ()),
                operand(bias, (ndir, 2 * gates * hidden)), operand(h0, (ndir, batch, hidden))]
    if cell == "lstm":
        operands += [operand(c0, (ndir, batch, hidden)), operand(peephole, (ndir, 3 * hidden))]
    if lens is not None and not _full_length(lens, t_len):
        operands.append(lens)
    attrs: dict[str, Any] = {"direction": direction, **_activations(ctx, cell, ndir)}
    clip = ctx.attr("clip")
    if clip is not None:
        attrs["clip"] = float(clip)
    if cell == "lstm":
        attrs["input_forget"] = bool(ctx.attr("input_forget", 0))
    if cell == "gru":
        attrs["linear_before_reset"] = bool(ctx.attr("linear_before_reset", 0))
    outs = ctx.emit_multi(f"nn.{cell}", *operands, **attrs)
    if layout == 1:
        outs = [ctx.emit("permute_dims", outs[0], axes=[2, 0, 1, 3])] + [
            ctx.emit("permute_dims", s, axes=[1, 0, 2]) for s in outs[1:]]
    if compute != dtype:
        outs = [ctx.emit("astype", o, dtype=dtype) for o in outs]
    return outs


@converter("LSTM", "GRU", "RNN")
def _recurrent(ctx: NodeContext) -> list[Value]:
    cell = _CELL[ctx.op_type]
    lstm = cell == "lstm"
    return convert_recurrent(
        ctx, cell, ctx.input(0), ctx.input(1), ctx.input(2), ctx.optional(3), ctx.optional(4),
        ctx.optional(5), ctx.optional(6) if lstm else None, ctx.optional(7) if lstm else None)
