"""ONNX's LSTM, GRU and RNN written out in numpy from the operator
definitions, as the tests' independent reference for ``R.nn.lstm`` /
``gru`` / ``rnn`` and their ONNX converter.

Written apart from phasec's own reference (which walks one batch entry at a
time): here the whole batch steps together, each entry's position in its
sequence read through an index array and its state frozen by a mask once
the entry's length is reached. Takes ONNX's operands as the ONNX node does
(absent optional inputs as None, ``layout`` 0 or 1, ``activation_alpha`` /
``activation_beta`` consumed in the order of the activations that take one).
"""

from __future__ import annotations

import numpy as np

#: activations taking an alpha / a beta, and the defaults ONNX Runtime uses
TAKES_ALPHA = {"affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu"}
TAKES_BETA = {"affine", "scaledtanh", "hardsigmoid"}
_DEFAULTS = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def activation(name: str, a: float, b: float):
    """One of ONNX's recurrent activations as a numpy function (float64)."""
    table = {
        "relu": lambda x: np.where(x > 0, x, 0.0),
        "tanh": np.tanh,
        "sigmoid": lambda x: np.exp(-np.logaddexp(0.0, -x)),
        "affine": lambda x: a * x + b,
        "leakyrelu": lambda x: np.where(x < 0, a * x, x),
        "thresholdedrelu": lambda x: np.where(x > a, x, 0.0),
        "scaledtanh": lambda x: a * np.tanh(b * x),
        "hardsigmoid": lambda x: np.minimum(1.0, np.maximum(0.0, a * x + b)),
        "elu": lambda x: np.where(x < 0, a * np.expm1(np.minimum(x, 0.0)), x),
        "softsign": lambda x: x / (1.0 + np.abs(x)),
        "softplus": lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0),
    }
    return table[name.lower()]


def _activations(names, alphas, betas):
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for n in names:
        key = n.lower()
        a0, b0 = _DEFAULTS.get(key, (0.0, 0.0))
        a = alphas.pop(0) if key in TAKES_ALPHA and alphas else a0
        b = betas.pop(0) if key in TAKES_BETA and betas else b0
        out.append(activation(key, a, b))
    return out


def recurrent(op, X, W, R, B=None, seq_lens=None, initial_h=None, initial_c=None, P=None, *,
              direction="forward", activations=None, activation_alpha=None,
              activation_beta=None, clip=None, input_forget=0, linear_before_reset=0, layout=0,
              dtype="float32"):
    """``op`` ("LSTM", "GRU" or "RNN") as ONNX defines it: [Y, Y_h] (+ Y_c), as ``dtype``."""
    f64 = np.float64
    X, W, R = (np.asarray(v, f64) for v in (X, W, R))
    if layout:
        X = X.transpose(1, 0, 2)
        initial_h = None if initial_h is None else np.asarray(initial_h).transpose(1, 0, 2)
        initial_c = None if initial_c is None else np.asarray(initial_c).transpose(1, 0, 2)
    T, N, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    G = _GATES[op]
    B = np.zeros((D, 2 * G * H)) if B is None else np.asarray(B, f64)
    h_init = np.zeros((D, N, H)) if initial_h is None else np.asarray(initial_h, f64)
    c_init = np.zeros((D, N, H)) if initial_c is None else np.asarray(initial_c, f64)
    P = np.zeros((D, 3 * H)) if P is None else np.asarray(P, f64)
    L = np.full(N, T) if seq_lens is None else np.asarray(seq_lens).astype(int)
    per = len(_DEFAULT_ACTS[op])
    acts = _activations(activations or _DEFAULT_ACTS[op] * D, activation_alpha, activation_beta)

    def cl(v):
        return v if clip is None else np.clip(v, -clip, clip)

    Y = np.zeros((T, D, N, H))
    Yh, Yc = np.zeros((D, N, H)), np.zeros((D, N, H))
    rows = np.arange(N)
    for d in range(D):
        f, g, h_act = (acts[d * per:(d + 1) * per] + [None, None])[:3]
        back = direction == "reverse" or d == 1
        Wd, Rd = W[d], R[d]
        Wb, Rb = np.split(B[d], 2)
        h, c = h_init[d].copy(), c_init[d].copy()
        for step in range(T):
            live = step < L
            t = np.where(live, L - 1 - step, 0) if back else np.full(N, step)
            x = X[t, rows]
            if op == "LSTM":
                zi, zo, zf, zc = np.split(x @ Wd.T + h @ Rd.T + Wb + Rb, 4, axis=1)
                pi, po, pf = np.split(P[d], 3)
                i = f(cl(zi + pi * c))
                fg = 1.0 - i if input_forget else f(cl(zf + pf * c))
                c_new = fg * c + i * g(cl(zc))
                o = f(cl(zo + po * c_new))
                h_new = o * h_act(c_new)
                c = np.where(live[:, None], c_new, c)
            elif op == "GRU":
                xz, xr, xh = np.split(x @ Wd.T + Wb, 3, axis=1)
                Rz, Rr, Rh = np.split(Rd, 3, axis=0)
                bz, br, bh = np.split(Rb, 3)
                z = f(cl(xz + h @ Rz.T + bz))
                r = f(cl(xr + h @ Rr.T + br))
                if linear_before_reset:
                    hh = g(cl(xh + r * (h @ Rh.T + bh)))
                else:
                    hh = g(cl(xh + (r * h) @ Rh.T + bh))
                h_new = (1.0 - z) * hh + z * h
            else:
                h_new = f(cl(x @ Wd.T + h @ Rd.T + Wb + Rb))
            h = np.where(live[:, None], h_new, h)
            Y[t[live], d, rows[live]] = h_new[live]
        ran = (L > 0)[:, None]
        Yh[d], Yc[d] = np.where(ran, h, 0.0), np.where(ran, c, 0.0)
    outs = [Y, Yh] + ([Yc] if op == "LSTM" else [])
    if layout:
        outs = [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]
    return [o.astype(dtype) for o in outs]
