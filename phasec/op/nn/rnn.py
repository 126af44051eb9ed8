"""Recurrent layers (ONNX's LSTM, GRU and RNN): ``nn.lstm``, ``nn.gru``, ``nn.rnn``.

TVM 0.27's Relax has no recurrent operator (its ONNX frontend refuses them),
so these are phasec's own, named as TVM names its ``relax.nn`` operators and
shaped as ONNX defines them (time-major, ONNX's ``layout=0``; the ONNX
frontend transposes ``layout=1`` around the call)::

    R.nn.lstm(data, weight, recurrence, bias, initial_h, initial_c, peephole[, seq_lens])
    R.nn.gru(data, weight, recurrence, bias, initial_h[, seq_lens])
    R.nn.rnn(data, weight, recurrence, bias, initial_h[, seq_lens])

with ``data`` (T, B, I), ``weight`` (D, G*H, I), ``recurrence`` (D, G*H, H),
``bias`` (D, 2*G*H) (the input biases then the recurrence biases), the
initial states (D, B, H), ``peephole`` (D, 3*H) and ``seq_lens`` (B,) of
integers; G is 4 (gates i, o, f, c), 3 (z, r, h) and 1, D is 2 for
``direction="bidirectional"`` (forward then reverse) and 1 otherwise. Every
operand but ``seq_lens`` is required: a caller without a bias, initial
state or peepholes passes zeros (the ONNX frontend does). The result is the
tuple ``(Y, Y_h)`` (``(Y, Y_h, Y_c)`` for the LSTM) with Y (T, D, B, H) and
the final states (D, B, H).

The equations are ONNX's: with ``f``, ``g``, ``h`` the activations of a
direction and ``clip`` (when set) bounding each activation's input to
``[-clip, clip]`` (every gate's input; the cell state itself is not
clipped, as ONNX Runtime does not)::

    LSTM  i = f(x Wi + h Ri + Pi*c + b)   f = f(x Wf + h Rf + Pf*c + b)  (1 - i with input_forget)
          c~ = g(x Wc + h Rc + b)   c' = f*c + i*c~   o = f(x Wo + h Ro + Po*c' + b)   h' = o*h(c')
    GRU   z = f(x Wz + h Rz + b)   r = f(x Wr + h Rr + b)
          h~ = g(x Wh + (r*h) Rh + Rbh + Wbh), or with linear_before_reset
          h~ = g(x Wh + r*(h Rh + Rbh) + Wbh);  h' = (1 - z)*h~ + z*h
    RNN   h' = f(x Wi + h Ri + b)

``activations`` names them (ONNX's names, any case; None: the ONNX
defaults Sigmoid/Tanh/Tanh, Sigmoid/Tanh, Tanh), one list for every
direction in turn; ``activation_alpha`` / ``activation_beta`` hold one value
per activation (None: each activation's default, which is ONNX Runtime's:
LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0, every other 0 — ONNX
Runtime's rule, also for ThresholdedRelu and Affine whose standalone
operators default to 1.0). The ONNX frontend maps ONNX's
"consumed in the order of the activations that take one" lists onto these.

``seq_lens`` gives each batch entry's length L (clamped to [0, T]): the
forward direction reads steps 0..L-1, the reverse direction L-1..0, Y is 0
at steps L..T-1, and Y_h (Y_c) is the state after the last step read — 0
when L is 0, as ONNX Runtime gives (not the initial state).

The lowering is one kernel per call: a hand-written TIR loop over time
(:mod:`._rnn_loop`; a symbolic T is a symbolic loop extent: one build runs
every length) holds the whole cell per step and batch entry — the input
projection and recurrence products, the activations, the state update and
the stores of Y — with the states in buffers the kernel allocates; the final states and Y
are read out of one packed (T + 1 or 2, D, B, H) buffer. The reference implementation (the
interpreter's and FoldConstant's) is the same equations in float64 numpy.
The DynamicQuantizeLSTM of ONNX Runtime is this LSTM with its weights
dequantized first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.text import prim_expr_to_str
from phasec.ir.tir import BinaryOp
from phasec.op._common import (
    OpPattern, as_bool, as_float, attrs_of, define, err, one_of, opt, tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _out, _tensor, legalizes
from phasec.op.nn._rnn_loop import TimeLoop
from phasec.op.draw import FLOATS, declares_draw

__all__ = ["ACTIVATIONS", "CELLS", "activation_params"]


# ---------------------------------------------------------------------------
# The activations: name -> (takes alpha, takes beta, default alpha, default beta)
# ---------------------------------------------------------------------------

ACTIVATIONS: dict[str, tuple[bool, bool, float, float]] = {
    "Relu": (False, False, 0.0, 0.0), "Tanh": (False, False, 0.0, 0.0),
    "Sigmoid": (False, False, 0.0, 0.0), "Affine": (True, True, 0.0, 0.0),
    "LeakyRelu": (True, False, 0.01, 0.0), "ThresholdedRelu": (True, False, 0.0, 0.0),
    "ScaledTanh": (True, True, 0.0, 0.0), "HardSigmoid": (True, True, 0.2, 0.5),
    "Elu": (True, False, 1.0, 0.0), "Softsign": (False, False, 0.0, 0.0),
    "Softplus": (False, False, 0.0, 0.0),
}
_CANONICAL = {n.lower(): n for n in ACTIVATIONS}

#: cell -> (gates G, activations per direction, their defaults)
CELLS: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "lstm": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
    "gru": (3, 2, ("Sigmoid", "Tanh")),
    "rnn": (1, 1, ("Tanh",)),
}


def _activation_names(v: Any) -> tuple[str, ...]:
    if isinstance(v, str) or not isinstance(v, (list, tuple)):
        raise TypeError(f"expected a list of activation names, got {v!r}")
    out = []
    for name in v:
        if not isinstance(name, str) or name.lower() not in _CANONICAL:
            raise ValueError(f"unknown activation {name!r}; expected one of "
                             f"{', '.join(ACTIVATIONS)}")
        out.append(_CANONICAL[name.lower()])
    return tuple(out)


def _floats(v: Any) -> tuple[float, ...]:
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"expected a list of numbers, got {v!r}")
    return tuple(as_float(x) for x in v)


def _directions(direction: str) -> int:
    return 2 if direction == "bidirectional" else 1


def activation_params(cell: str, attrs: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(name, alpha, beta) of every activation, direction after direction,
    with the defaults filled in (see the module docstring)."""
    _, per, default = CELLS[cell]
    d = _directions(attrs["direction"])
    names = attrs["activations"] if attrs["activations"] is not None else default * d
    alphas = attrs["activation_alpha"]
    betas = attrs["activation_beta"]
    out = []
    for k, name in enumerate(names):
        _, _, a0, b0 = ACTIVATIONS[name]
        out.append((name, a0 if alphas is None else alphas[k], b0 if betas is None else betas[k]))
    return out


# ---------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------

_OPERANDS = {
    "lstm": ("data", "weight", "recurrence", "bias", "initial_h", "initial_c", "peephole"),
    "gru": ("data", "weight", "recurrence", "bias", "initial_h"),
    "rnn": ("data", "weight", "recurrence", "bias", "initial_h"),
}


def _infer(cell: str):
    gates, per, _ = CELLS[cell]
    names = _OPERANDS[cell]

    def infer(call, ctx):
        n = len(names)
        if len(call.args) not in (n, n + 1):
            raise err(call, f"nn.{cell} takes {n} operands ({', '.join(names)}) and an "
                            f"optional seq_lens, got {len(call.args)}")
        ts = {w: tensor_arg(call, k, ctx, w) for k, w in enumerate(names)}
        a = attrs_of(call)
        d = _directions(a["direction"])
        acts = a["activations"]
        if acts is not None and len(acts) != per * d:
            raise err(call, f"nn.{cell} with direction {a['direction']!r} needs {per * d} "
                            f"activations ({per} per direction), got {len(acts)}")
        for attr in ("activation_alpha", "activation_beta"):
            if a[attr] is not None and len(a[attr]) != per * d:
                raise err(call, f"{attr} needs one value per activation ({per * d}), got "
                                f"{len(a[attr])}")
        if a["clip"] is not None and not a["clip"] > 0:
            raise err(call, f"clip must be positive, got {a['clip']}")
        x = ts["data"]
        dt = x.dtype
        if dt != "void" and not dt.startswith("float"):
            raise err(call, f"nn.{cell} computes on float tensors, but the data is {dt}")
        ranks = {w: 3 for w in names} | {"bias": 2, "peephole": 2}
        for w, t in ts.items():
            if t.ndim not in (-1, ranks[w]):
                raise err(call, f"the {w} must have {ranks[w]} dimensions, but it has {t.ndim}")
            if t.dtype not in ("void", dt):
                raise err(call, f"the {w} has dtype {t.dtype} but the data has dtype {dt}")
        if len(call.args) > n:
            sl = tensor_arg(call, n, ctx, "seq_lens")
            if sl.dtype != "void" and not sl.dtype.startswith("int"):
                raise err(call, f"seq_lens must hold integers, but it has dtype {sl.dtype}")
            if sl.ndim not in (-1, 1):
                raise err(call, f"seq_lens must be 1-D (one length per batch entry), but it "
                                f"has ndim {sl.ndim}")
        r = ts["recurrence"]
        if x.shape is None or r.shape is None:
            fields = [TensorStructInfo(None, dt, 4)] + [TensorStructInfo(None, dt, 3)] * (
                2 if cell == "lstm" else 1)
            return TupleStructInfo(fields)
        t_len, batch, inp = x.shape
        hidden = r.shape[2]
        gh = arith.simplify(tir.IntImm(gates, "int64") * hidden)
        want = {"weight": (d, gh, inp), "recurrence": (d, gh, hidden), "bias": (d, 2 * gh),
                "initial_h": (d, batch, hidden), "initial_c": (d, batch, hidden),
                "peephole": (d, 3 * hidden)}
        for w in names[1:]:
            got = ts[w].shape
            if got is None:
                continue
            expect = [arith.simplify(tir.as_prim_expr(e)) for e in want[w]]
            for ax, (e, g) in enumerate(zip(expect, got)):
                if arith.prove_not_equal(e, g):
                    shape = ", ".join(prim_expr_to_str(v) for v in expect)
                    raise err(call, f"the {w} must have shape ({shape}) (direction "
                                    f"{a['direction']!r}, hidden size "
                                    f"{prim_expr_to_str(hidden)}), but its dim {ax} is "
                                    f"{prim_expr_to_str(g)}")
        if len(call.args) > n:
            sl = tensor_arg(call, n, ctx, "seq_lens")
            if sl.shape is not None and arith.prove_not_equal(sl.shape[0], batch):
                raise err(call, f"seq_lens has {prim_expr_to_str(sl.shape[0])} entries but the "
                                f"batch size is {prim_expr_to_str(batch)}")
        state = tensor_sinfo((d, batch, hidden), dt)
        y = tensor_sinfo((t_len, d, batch, hidden), dt)
        return TupleStructInfo([y, state] + ([state] if cell == "lstm" else []))
    return infer


# ---------------------------------------------------------------------------
# The reference: the equations in float64 numpy
# ---------------------------------------------------------------------------

def _np_activation(name: str, alpha: float, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    with_ab: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "Relu": lambda x: np.maximum(x, 0.0),
        "Tanh": np.tanh,
        "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
        "Affine": lambda x: alpha * x + beta,
        "LeakyRelu": lambda x: np.where(x >= 0, x, alpha * x),
        "ThresholdedRelu": lambda x: np.where(x > alpha, x, 0.0),
        "ScaledTanh": lambda x: alpha * np.tanh(beta * x),
        "HardSigmoid": lambda x: np.clip(alpha * x + beta, 0.0, 1.0),
        "Elu": lambda x: np.where(x >= 0, x, alpha * (np.exp(np.minimum(x, 0.0)) - 1.0)),
        "Softsign": lambda x: x / (1.0 + np.abs(x)),
        "Softplus": lambda x: np.logaddexp(0.0, x),
    }
    return with_ab[name]


def _reference(cell: str):
    gates, per, _ = CELLS[cell]

    def ref(*args, direction="forward", activations=None, activation_alpha=None,
            activation_beta=None, clip=None, input_forget=False, linear_before_reset=False):
        n = len(_OPERANDS[cell])
        dtype = np.asarray(args[0]).dtype
        x, w, r, b, h0 = (np.asarray(v, np.float64) for v in args[:5])
        c0 = np.asarray(args[5], np.float64) if cell == "lstm" else None
        p = np.asarray(args[6], np.float64) if cell == "lstm" else None
        t_len, batch, _ = x.shape
        hid = r.shape[2]
        lens = (np.clip(np.asarray(args[n]).astype(np.int64), 0, t_len) if len(args) > n
                else np.full(batch, t_len, np.int64))
        attrs = {"direction": direction, "activations": activations,
                 "activation_alpha": activation_alpha, "activation_beta": activation_beta}
        acts = [_np_activation(*a) for a in activation_params(cell, attrs)]

        def cl(v):
            return v if clip is None else np.clip(v, -clip, clip)
        ndir = w.shape[0]
        y = np.zeros((t_len, ndir, batch, hid))
        hs = h0.copy()
        cs = c0.copy() if c0 is not None else None
        for d in range(ndir):
            f, g, h = (acts[d * per + k] if k < per else None for k in range(3))
            wb, rb = b[d, :gates * hid], b[d, gates * hid:]
            for bi in range(batch):
                hv = h0[d, bi].copy()
                cv = c0[d, bi].copy() if c0 is not None else None
                steps = range(lens[bi])
                reverse = direction == "reverse" or d == 1
                for t in (reversed(steps) if reverse else steps):
                    xw = w[d] @ x[t, bi] + wb
                    if cell == "lstm":
                        pre = xw + r[d] @ hv + rb
                        pi, po, pf = p[d, :hid], p[d, hid:2 * hid], p[d, 2 * hid:]
                        i = f(cl(pre[:hid] + pi * cv))
                        fg = 1.0 - i if input_forget else f(cl(pre[2 * hid:3 * hid] + pf * cv))
                        cv = fg * cv + i * g(cl(pre[3 * hid:]))
                        o = f(cl(pre[hid:2 * hid] + po * cv))
                        hv = o * h(cv)
                    elif cell == "gru":
                        rec = r[d] @ hv
                        z = f(cl(xw[:hid] + rec[:hid] + rb[:hid]))
                        rr = f(cl(xw[hid:2 * hid] + rec[hid:2 * hid] + rb[hid:2 * hid]))
                        rh = r[d, 2 * hid:]
                        if linear_before_reset:
                            pre = xw[2 * hid:] + rr * (rh @ hv + rb[2 * hid:])
                        else:
                            pre = xw[2 * hid:] + rh @ (rr * hv) + rb[2 * hid:]
                        hv = (1.0 - z) * g(cl(pre)) + z * hv
                    else:
                        hv = f(cl(xw + r[d] @ hv + rb))
                    y[t, d, bi] = hv
                ran = lens[bi] > 0  # no step: zeros, not the initial state
                hs[d, bi] = hv if ran else 0.0
                if cs is not None:
                    cs[d, bi] = cv if ran else 0.0
        outs = [y, hs] + ([cs] if cs is not None else [])
        return tuple(o.astype(dtype) for o in outs)
    return ref


# ---------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------

def _attrs(cell: str) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    attrs: dict[str, tuple[Any, Callable[[Any], Any]]] = {
        "direction": ("forward", one_of("forward", "reverse", "bidirectional")),
        "activations": (None, opt(_activation_names)),
        "activation_alpha": (None, opt(_floats)),
        "activation_beta": (None, opt(_floats)),
        "clip": (None, opt(as_float)),
    }
    if cell == "lstm":
        attrs["input_forget"] = (False, as_bool)
    if cell == "gru":
        attrs["linear_before_reset"] = (False, as_bool)
    return attrs


_DOCS = {
    "lstm": "ONNX LSTM: one layer over a time-major sequence -> (Y, Y_h, Y_c); peepholes, "
            "clip, input_forget, seq_lens.",
    "gru": "ONNX GRU: one layer over a time-major sequence -> (Y, Y_h); linear_before_reset, "
           "clip, seq_lens.",
    "rnn": "ONNX RNN (Elman): one layer over a time-major sequence -> (Y, Y_h); clip, seq_lens.",
}

for _cell in CELLS:
    define(f"nn.{_cell}", (*_OPERANDS[_cell], "seq_lens"), _infer(_cell), attrs=_attrs(_cell),
           reference=_reference(_cell), pattern=OpPattern.OPAQUE, variadic=True,
           doc=_DOCS[_cell])


# ---------------------------------------------------------------------------
# Lowering: the input projection in TE, the time loop in TIR
# ---------------------------------------------------------------------------

def _legalize(cell: str):
    def legalize(call, inputs):
        n = len(_OPERANDS[cell])
        x, w, r, bias = (_tensor(inputs, k, call) for k in range(4))
        states = [_tensor(inputs, k, call) for k in range(4, n)]
        lens = [_tensor(inputs, n, call)] if len(call.args) > n else []
        a = attrs_of(call)
        y_info = _out(call, 0)
        dt = y_info.dtype
        t_len, ndir, batch, hid = y_info.shape
        extra = 2 if cell == "lstm" else 1
        packed_shape = (arith.simplify(t_len + extra), ndir, batch, hid)

        def build(ins, o):
            acts = activation_params(cell, a)
            gates, per, _ = CELLS[cell]
            return TimeLoop(cell, gates, a, acts, per, list(ins), o, bool(lens)).build()
        packed = te.extern(packed_shape, dt, [x, w, r, bias, *states, *lens], build,
                           name=f"T_{cell}_loop")
        y = te.compute((t_len, ndir, batch, hid), lambda t, d, b, j: packed[t, d, b, j],
                       name=f"T_{cell}_y")
        finals = [te.compute((ndir, batch, hid),
                             lambda d, b, j, k=k: packed[arith.simplify(t_len + k), d, b, j],
                             name=f"T_{cell}_y_{'hc'[k]}") for k in range(extra)]
        return [y, *finals]
    return legalize


for _cell in CELLS:
    legalizes(f"nn.{_cell}")(_legalize(_cell))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

#: activations whose values lie in [0, 1] (gates) and in [-1, 1] (the rest),
#: so every state stays bounded whatever the input
_GATE_ACTS = ("Sigmoid", "HardSigmoid")
_BOUNDED_ACTS = ("Tanh", "Softsign", "Sigmoid", "HardSigmoid")


def _draw(cell: str):
    gates, per, _ = CELLS[cell]

    def build(ctx):
        t_len, batch, inp = ctx.shape
        direction = ctx.choose(["forward", "reverse", "bidirectional"])
        d = _directions(direction)
        hid = ctx.integers(1, 3)
        operands: list[Any] = [ctx.x, ctx.const((d, gates * hid, inp), -0.5, 0.5),
                               ctx.const((d, gates * hid, hid), -0.5, 0.5),
                               ctx.const((d, 2 * gates * hid), -0.5, 0.5),
                               ctx.const((d, batch, hid), -1.0, 1.0)]
        if cell == "lstm":
            operands += [ctx.const((d, batch, hid), -1.0, 1.0),
                         ctx.const((d, 3 * hid), -0.5, 0.5)]
        if ctx.choose([False, True]):
            operands.append(ctx.indices((batch,), t_len + 1))
        acts = []
        for _ in range(d):
            acts += [ctx.choose(_GATE_ACTS)] + [ctx.choose(_BOUNDED_ACTS) for _ in range(per - 1)]
        if cell == "rnn":
            acts = [ctx.choose(_BOUNDED_ACTS) for _ in range(d)]
        attrs: dict[str, Any] = {"direction": direction, "activations": tuple(acts),
                                 "clip": ctx.choose([None, 0.5, 3.0])}
        if cell == "lstm":
            attrs["input_forget"] = ctx.choose([False, True])
        if cell == "gru":
            attrs["linear_before_reset"] = ctx.choose([False, True])
        # h is bounded by 1 (or its initial value); the LSTM's cell state
        # grows by at most 1 a step
        bound = 1.0 + (t_len if cell == "lstm" else 0)
        ctx.result_in(-bound, bound)
        return tuple(operands), attrs
    return build


for _cell in CELLS:
    declares_draw(f"nn.{_cell}", ranks=(3,), dtypes=FLOATS, build=_draw(_cell))
