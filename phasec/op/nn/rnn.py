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

The lowering is one kernel per call: the input projection ``x W^T + b`` for
every step is a TE reduction, then a hand-written TIR loop over time (a
symbolic T is a symbolic loop extent: one build runs every length) holds the
whole cell per step and batch entry — the recurrence products, the
activations, the state update and the stores of Y — with the states in
buffers the kernel allocates; the final states and Y are read out of one
packed (T + 1 or 2, D, B, H) buffer. The reference implementation (the
interpreter's and FoldConstant's) is the same equations in float64 numpy.
The DynamicQuantizeLSTM of ONNX Runtime is this LSTM with its weights
dequantized first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.text import prim_expr_to_str
from phasec.ir.tir import Allocate, BinaryOp, Buffer, BufferStore, IfThenElse, LetStmt, PrimExpr, Var
from phasec.op._common import (
    OpPattern, as_bool, as_float, attrs_of, define, err, one_of, opt, tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _const, _out, _tensor, legalizes
from phasec.op._tirgen import i64, nest, seq
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
            for ax, (e, g) in enumerate(zip(want[w], got)):
                e = arith.simplify(tir.as_prim_expr(e))
                if arith.prove_not_equal(e, g):
                    raise err(call, f"the {w} must have shape ({', '.join(prim_expr_to_str(arith.simplify(tir.as_prim_expr(v))) for v in want[w])}) "
                                    f"(direction {a['direction']!r}, hidden size "
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

def _tir_activation(name: str, alpha: float, beta: float, x: PrimExpr) -> PrimExpr:
    dt = x.dtype

    def c(v: float) -> PrimExpr:
        return _const(v, dt)
    zero, one = c(0.0), c(1.0)
    if name == "Relu":
        return BinaryOp("max", x, zero)
    if name == "Tanh":
        return te.call("tanh", x)
    if name == "Sigmoid":
        return te.call("sigmoid", x)
    if name == "Affine":
        return c(alpha) * x + c(beta)
    if name == "LeakyRelu":
        return tir.Select(BinaryOp(">=", x, zero), x, c(alpha) * x)
    if name == "ThresholdedRelu":
        return tir.Select(BinaryOp(">", x, c(alpha)), x, zero)
    if name == "ScaledTanh":
        return c(alpha) * te.call("tanh", c(beta) * x)
    if name == "HardSigmoid":
        return BinaryOp("min", BinaryOp("max", c(alpha) * x + c(beta), zero), one)
    if name == "Elu":
        neg = c(alpha) * (te.call("exp", BinaryOp("min", x, zero)) - one)
        return tir.Select(BinaryOp(">=", x, zero), x, neg)
    if name == "Softsign":
        return x / (one + te.call("fabs", x))
    # Softplus, without overflow: max(x, 0) + log(1 + exp(-|x|))
    return BinaryOp("max", x, zero) + te.call("log", one + te.call("exp", zero - te.call(
        "fabs", x)))


class _Kernel:
    """The statements of one call's time loop (see the module docstring)."""

    def __init__(self, cell: str, attrs: dict[str, Any], ins: list[Buffer], out: Buffer,
                 has_lens: bool) -> None:
        self.cell = cell
        self.a = attrs
        self.acts = activation_params(cell, attrs)
        self.per = CELLS[cell][1]
        #: which direction's activations the statements being built use
        self.acts_of = 0
        self.xw, self.r, self.bias, self.h0 = ins[:4]
        self.c0 = ins[4] if cell == "lstm" else None
        self.p = ins[5] if cell == "lstm" else None
        self.lens = ins[-1] if has_lens else None
        self.out = out
        self.dt = out.dtype
        _, self.t_len, self.batch, gh = self.xw.shape
        self.hid = self.r.shape[2]
        self.gh = gh
        self.h = Buffer("rnn_h", (self.batch, self.hid), self.dt)
        self.c = Buffer("rnn_c", (self.batch, self.hid), self.dt)
        self.acc = Buffer("rnn_gates", (gh,), self.dt)
        self.rh = Buffer("rnn_rh", (self.hid,), self.dt)

    def act(self, k: int, x: PrimExpr, clipped: bool = True) -> PrimExpr:
        """Activation ``k`` of the direction being built (``self.acts_of``)."""
        clip = self.a["clip"]
        if clip is not None and clipped:
            x = BinaryOp("min", BinaryOp("max", x, _const(-clip, self.dt)), _const(clip, self.dt))
        return _tir_activation(*self.acts[self.acts_of * self.per + k], x)

    def off(self, g: int, j: PrimExpr) -> PrimExpr:
        """Row ``g * H + j`` of the gates."""
        return arith.simplify(tir.as_prim_expr(g) * self.hid + j) if g else j

    def recur(self, d: PrimExpr, b: PrimExpr, t: PrimExpr, rows: tuple[int, int],
              init: Callable[[PrimExpr], PrimExpr], src: Callable[[PrimExpr], PrimExpr]
              ) -> tir.Stmt:
        """acc[g] = init(g) + sum_k src(k) * R[d, g, k] for the gate rows ``rows``."""
        lo, hi = (arith.simplify(tir.as_prim_expr(v) * self.hid) for v in rows)

        def row(idx):
            g = arith.simplify(idx[0] + lo)
            first = BufferStore(self.acc, init(g), (g,))
            add = nest((self.hid,), lambda kk: BufferStore(
                self.acc, self.acc[g] + src(kk[0]) * self.r[d, g, kk[0]], (g,)), "k")
            return seq(first, add)
        return nest((arith.simplify(hi - lo),), row, "g")

    def step(self, d: PrimExpr, b: PrimExpr, t: PrimExpr) -> tir.Stmt:
        """One time step ``t`` of batch entry ``b`` in direction ``d``; stores Y[t]."""
        dd, hid = d, self.hid

        def xw(g):
            return self.xw[dd, t, b, g]

        def hprev(k):
            return self.h[b, k]
        store_y = nest((hid,), lambda jj: BufferStore(self.out, self.h[b, jj[0]],
                                                      (t, dd, b, jj[0])), "j")
        if self.cell == "rnn":
            upd = nest((hid,), lambda jj: BufferStore(self.h, self.act(0, self.acc[jj[0]]),
                                                      (b, jj[0])), "j")
            return seq(self.recur(d, b, t, (0, 1), xw, hprev), upd, store_y)
        if self.cell == "lstm":
            return seq(self.recur(d, b, t, (0, 4), xw, hprev), self._lstm_update(d, b), store_y)
        return seq(*self._gru(d, b, t, xw, hprev), store_y)

    def _lstm_update(self, d: PrimExpr, b: PrimExpr) -> tir.Stmt:
        dd, dt, hid = d, self.dt, self.hid

        def body(jj):
            j = jj[0]
            cp = self.c[b, j]
            pi, po, pf = (self.p[dd, self.off(k, j)] for k in range(3))
            iv, fv, cv = Var("lstm_i", dt), Var("lstm_f", dt), Var("lstm_c", dt)
            i_e = self.act(0, self.acc[j] + pi * cp)
            f_e = (_const(1.0, dt) - iv if self.a["input_forget"]
                   else self.act(0, self.acc[self.off(2, j)] + pf * cp))
            c_e = fv * cp + iv * self.act(1, self.acc[self.off(3, j)])
            o_e = self.act(0, self.acc[self.off(1, j)] + po * cv)
            stores = seq(BufferStore(self.c, cv, (b, j)),
                         BufferStore(self.h, o_e * self.act(2, cv, clipped=False), (b, j)))
            return LetStmt(iv, i_e, LetStmt(fv, f_e, LetStmt(cv, c_e, stores)))
        return nest((hid,), body, "j")

    def _gru(self, d: PrimExpr, b: PrimExpr, t: PrimExpr, xw, hprev) -> list[tir.Stmt]:
        dd, dt, hid, gh = d, self.dt, self.hid, self.gh

        def rb(g):
            return self.bias[dd, arith.simplify(gh + g)]
        stmts = [self.recur(d, b, t, (0, 2), xw, hprev)]
        # z and r activated in place
        stmts.append(nest((arith.simplify(2 * hid),), lambda gg: BufferStore(
            self.acc, self.act(0, self.acc[gg[0]]), (gg[0],)), "g"))
        if self.a["linear_before_reset"]:
            # acc_h = h Rh + Rbh; h~ = g(xw_h + r * acc_h)
            stmts.append(self.recur(d, b, t, (2, 3), rb, hprev))

            def pre(j):
                return xw(self.off(2, j)) + self.acc[self.off(1, j)] * self.acc[self.off(2, j)]
        else:
            # (r * h) first: the product reads every r
            stmts.append(nest((hid,), lambda kk: BufferStore(
                self.rh, self.acc[self.off(1, kk[0])] * self.h[b, kk[0]], (kk[0],)), "k"))
            stmts.append(self.recur(d, b, t, (2, 3), xw, lambda k: self.rh[k]))

            def pre(j):
                return self.acc[self.off(2, j)]

        def upd(jj):
            j = jj[0]
            z = self.acc[j]
            new = (_const(1.0, dt) - z) * self.act(1, pre(j)) + z * self.h[b, j]
            return BufferStore(self.h, new, (b, j))
        stmts.append(nest((hid,), upd, "j"))
        return stmts

    def length(self, b: PrimExpr) -> PrimExpr:
        if self.lens is None:
            return self.t_len
        v = self.lens[b]
        v = v if v.dtype == "int64" else tir.Cast("int64", v)
        return BinaryOp("min", BinaryOp("max", v, i64(0)), self.t_len)

    def direction(self, dd: PrimExpr, reverse: PrimExpr | bool) -> tir.Stmt:
        """The whole sequence in direction ``dd`` (a constant, or the loop
        variable over both directions: ``reverse`` is then an expression)."""
        hid = self.hid

        def init(idx):
            b, j = idx
            stores = [BufferStore(self.h, self.h0[dd, b, j], (b, j))]
            if self.c0 is not None:
                stores.append(BufferStore(self.c, self.c0[dd, b, j], (b, j)))
            return seq(*stores)

        def per_step(ss):
            s = ss[0]

            def per_batch(bb):
                b = bb[0]
                length = Var("rnn_len", "int64")
                back = BinaryOp("-", BinaryOp("-", length, i64(1)), s)
                t = (tir.Select(reverse, back, s) if isinstance(reverse, PrimExpr)
                     else back if reverse else s)
                pad = nest((hid,), lambda jj: BufferStore(self.out, _const(0.0, self.dt),
                                                          (s, dd, b, jj[0])), "j")
                body = IfThenElse(BinaryOp("<", s, length), self.step(dd, b, t), pad)
                return LetStmt(length, self.length(b), body)
            return nest((self.batch,), per_batch, "b")

        def final(idx):
            b, j = idx
            ran = BinaryOp(">", self.length(b), i64(0))  # no step: zeros, not the initial state

            def state(buf):
                return tir.Select(ran, buf[b, j], _const(0.0, self.dt))
            stores = [BufferStore(self.out, state(self.h), (self.t_len, dd, b, j))]
            if self.c0 is not None:
                stores.append(BufferStore(self.out, state(self.c),
                                          (arith.simplify(self.t_len + 1), dd, b, j)))
            return seq(*stores)
        return seq(nest((self.batch, hid), init, "i"), nest((self.t_len,), per_step, "s"),
                   nest((self.batch, hid), final, "o"))

    def build(self) -> tir.Stmt:
        per = self.per
        if self.a["direction"] != "bidirectional":
            self.acts_of = 0
            body: tir.Stmt = self.direction(i64(0), self.a["direction"] == "reverse")
        elif self.acts[:per] == self.acts[per:]:
            # one loop over both directions (half the code to compile)
            self.acts_of = 0
            body = nest((i64(2),), lambda dd: self.direction(
                dd[0], BinaryOp("==", dd[0], i64(1))), "d")
        else:  # activations differ by direction: one copy of the loop each
            parts = []
            for d in range(2):
                self.acts_of = d
                parts.append(self.direction(i64(d), d == 1))
            body = seq(*parts)
        for buf in (self.rh, self.acc, self.c, self.h):
            if buf is self.c and self.c0 is None or buf is self.rh and self.cell != "gru":
                continue
            body = Allocate(buf, body)
        return body


def _legalize(cell: str):
    gates = CELLS[cell][0]

    def legalize(call, inputs):
        n = len(_OPERANDS[cell])
        x, w, r, bias = (_tensor(inputs, k, call) for k in range(4))
        states = [_tensor(inputs, k, call) for k in range(4, n)]
        lens = [_tensor(inputs, n, call)] if len(call.args) > n else []
        a = attrs_of(call)
        y_info = _out(call, 0)
        dt = y_info.dtype
        t_len, ndir, batch, hid = y_info.shape
        gh, inp = w.shape[1], w.shape[2]
        # GRU with linear_before_reset keeps Rbh apart (it is scaled by r)
        rec_bias_rows = (arith.simplify(2 * hid) if cell == "gru" and a["linear_before_reset"]
                         else gh)
        ri = te.reduce_axis(inp, "ri")

        def proj(d, t, b, g):
            return te.sum(x[t, b, ri.var] * w[d, g, ri.var], axis=[ri])
        xw0 = te.compute((ndir, t_len, batch, gh), proj, name=f"T_{cell}_input")

        def with_bias(d, t, b, g):
            v = xw0[d, t, b, g] + bias[d, g]
            rb = bias[d, arith.simplify(gh + g)]
            if rec_bias_rows is gh:
                return v + rb
            return tir.Select(BinaryOp("<", g, rec_bias_rows), v + rb, v)
        xw = te.compute((ndir, t_len, batch, gh), with_bias, name=f"T_{cell}_input_bias")
        extra = 2 if cell == "lstm" else 1
        packed_shape = (arith.simplify(t_len + extra), ndir, batch, hid)

        def build(ins, o):
            return _Kernel(cell, a, list(ins), o, bool(lens)).build()
        packed = te.extern(packed_shape, dt, [xw, r, bias, *states, *lens], build,
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
