"""Independent references of the neural-network and image operators: plain
numpy loops written from the operators' definitions, never from phasec's own
references, so a test can check both against them."""

from __future__ import annotations

import math

import numpy as np


def channel_stats(x, axis):
    """Mean and population variance per index of ``axis`` by explicit loops."""
    moved = np.moveaxis(x.astype(np.float64), axis, 0)
    means, vars_ = [], []
    for c in range(moved.shape[0]):
        vals = [float(v) for v in moved[c].ravel()]
        mu = sum(vals) / len(vals)
        means.append(mu)
        vars_.append(sum((v - mu) ** 2 for v in vals) / len(vals))
    return np.array(means), np.array(vars_)


def pool_loops(x, kind, k, s, pad, dil, ceil_mode, include_pad):
    """Pooling of an NC + spatial array by explicit loops over every window."""
    r = len(k)
    in_sizes = x.shape[2:]
    outs = []
    for j in range(r):
        num = in_sizes[j] + pad[j] + pad[r + j] - dil[j] * (k[j] - 1) - 1
        o = (num + (s[j] - 1 if ceil_mode else 0)) // s[j] + 1
        if ceil_mode and (o - 1) * s[j] >= in_sizes[j] + pad[j]:
            o -= 1
        outs.append(o)
    out = np.zeros(x.shape[:2] + tuple(outs))
    for b in range(x.shape[0]):
        for c in range(x.shape[1]):
            for o in np.ndindex(*outs):
                vals, count = [], 0
                for t in np.ndindex(*k):
                    p = [o[j] * s[j] - pad[j] + t[j] * dil[j] for j in range(r)]
                    inside = all(0 <= p[j] < in_sizes[j] for j in range(r))
                    padded = all(-pad[j] <= p[j] < in_sizes[j] + pad[r + j] for j in range(r))
                    if inside:
                        vals.append(float(x[(b, c, *p)]))
                    count += inside or (include_pad and padded)
                if kind == "max":
                    out[(b, c, *o)] = max(vals) if vals else -np.inf
                else:
                    out[(b, c, *o)] = sum(vals) / max(count, 1)
    return out


def adaptive_loops(x, sizes):
    """Adaptive average pooling to ``sizes`` by loops: output cell o averages
    the input cells floor(o * in / out) .. ceil((o + 1) * in / out) - 1."""
    r = len(sizes)
    in_sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(sizes))
    for o in np.ndindex(*sizes):
        lo = [math.floor(o[j] * in_sizes[j] / sizes[j]) for j in range(r)]
        hi = [math.ceil((o[j] + 1) * in_sizes[j] / sizes[j]) for j in range(r)]
        for b in range(x.shape[0]):
            for c in range(x.shape[1]):
                vals = [float(x[(b, c, *p)]) for p in
                        np.ndindex(*[hi[j] - lo[j] for j in range(r)])
                        for p in [tuple(lo[j] + p[j] for j in range(r))]]
                out[(b, c, *o)] = sum(vals) / len(vals)
    return out


def conv_loops(x, w, s, pad, dil, groups):
    """Convolution of NC + spatial data with an OI + spatial kernel, by loops."""
    r = w.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pad[j], pad[r + j]) for j in range(r)])
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(xp.shape[2 + j] - dil[j] * (ks[j] - 1) - 1) // s[j] + 1 for j in range(r)]
    out = np.zeros((x.shape[0], o, *outs))
    og = o // groups
    for b in range(x.shape[0]):
        for oc in range(o):
            g = oc // og
            for pos in np.ndindex(*outs):
                acc = 0.0
                for ic in range(cg):
                    for t in np.ndindex(*ks):
                        p = tuple(pos[j] * s[j] + t[j] * dil[j] for j in range(r))
                        acc += xp[(b, g * cg + ic, *p)] * float(w[(oc, ic, *t)])
                out[(b, oc, *pos)] = acc
    return out


def pack_channels(x, f, axis=1):
    """NCHW -> NCHW{f}c by hand: the channel axis split into (C/f, f), the block last."""
    shape = list(x.shape)
    split = shape[:axis] + [shape[axis] // f, f] + shape[axis + 1:]
    return np.moveaxis(x.reshape(split), axis + 1, -1)


def conv_transpose_loops(x, w, s, pad, out_pad, dil, groups):
    """Transposed convolution (NC + spatial data, IO + spatial kernel) as the
    gradient of a convolution: output y gathers every (input i, tap t) with
    i * s + t * d == y + p0, by loops over output positions."""
    r = w.ndim - 2
    c, og = w.shape[:2]
    ks = w.shape[2:]
    cg = c // groups
    in_sp = x.shape[2:]
    outs = [(in_sp[j] - 1) * s[j] - pad[j] - pad[r + j] + dil[j] * (ks[j] - 1) + out_pad[j] + 1
            for j in range(r)]
    out = np.zeros((x.shape[0], og * groups, *outs))
    for b in range(x.shape[0]):
        for o in range(og * groups):
            g = o // og
            for y in np.ndindex(*outs):
                acc = 0.0
                for ic in range(g * cg, (g + 1) * cg):
                    for t in np.ndindex(*ks):
                        num = [y[j] + pad[j] - t[j] * dil[j] for j in range(r)]
                        if all(v >= 0 and v % s[j] == 0 and v // s[j] < in_sp[j]
                               for j, v in enumerate(num)):
                            i = tuple(v // s[j] for j, v in enumerate(num))
                            acc += float(x[(b, ic, *i)]) * float(w[(ic, o % og, *t)])
                out[(b, o, *y)] = acc
    return out


def attention_loops(q, k, v, bias, scale, offset):
    """Attention of BSHD queries, keys and values by loops: grouped heads,
    an optional bias broadcast over (batch, head, query), and a causal mask
    keeping keys j <= i + offset (``offset=None``: no mask)."""
    b, sq, h, d = q.shape
    skv, hk, hv = k.shape[1], k.shape[2], v.shape[2]
    out = np.zeros((b, sq, h, v.shape[3]))
    for bb in range(b):
        for hh in range(h):
            for i in range(sq):
                keys = [j for j in range(skv) if offset is None or j <= i + offset]
                s = []
                for j in keys:
                    dot = sum(float(q[bb, i, hh, x]) * float(k[bb, j, hh // (h // hk), x])
                              for x in range(d))
                    val = dot * scale
                    if bias is not None:
                        bi = tuple(0 if bias.shape[p] == 1 else idx
                                   for p, idx in enumerate((bb, hh, i)))
                        val += float(bias[(*bi, j)])
                    s.append(val)
                top = max(s)
                e = [math.exp(x - top) for x in s]
                z = sum(e)
                for j, ej in zip(keys, e):
                    out[bb, i, hh] += ej / z * v[bb, j, hh // (h // hv)].astype(np.float64)
    return out


def bilinear_half_pixel(x, oh, ow):
    """Bilinear resize of NCHW to (oh, ow), half-pixel centres, edges clamped."""
    h, w = x.shape[2:]
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            cy = (i + 0.5) * h / oh - 0.5
            cx = (j + 0.5) * w / ow - 0.5
            y0, x0 = math.floor(cy), math.floor(cx)
            fy, fx = cy - y0, cx - x0
            clamp = lambda v, hi: min(max(v, 0), hi - 1)  # noqa: E731
            acc = 0.0
            for dy, wy in ((0, 1 - fy), (1, fy)):
                for dx, wx in ((0, 1 - fx), (1, fx)):
                    acc = acc + wy * wx * x[:, :, clamp(y0 + dy, h), clamp(x0 + dx, w)]
            out[:, :, i, j] = acc
    return out
