"""Transposed convolutions (``nn.conv{1,2,3}d_transpose``) on the CPU.

The output position ``y`` (per spatial axis, before cropping ``p0``:
``z = y + p0``) takes input ``i`` through tap ``t`` when ``z = i*s + t*d``.

:func:`subpixel` (dilation 1): split ``z = q*s + phi``. The output of
phase ``phi`` takes only the taps ``t = phi + j*s``, from input ``q - j``:
a stride-1 convolution of the input with the sub-sampled, reversed window
``w[phi + (J-1-jj)*s]`` (``J = ceil(k/s)`` taps, zero past the window).
All ``prod(s)`` phases are one convolution with ``prod(s)`` times the
output channels (``(group, phase, channel)``, so groups stay groups), which
the convolution table schedules like any other (a 2x2 stride-2 one is a
1x1 convolution: one GEMM); the output interleaves the phases back,
``out[y] = P[phase(y + p0), (y + p0) // s - q0]``. The sub-sampled window
is a small compute over the weight, its zero taps included (the same sums
as the scatter's in another order: the values agree to rounding).

:func:`gather` takes every other one (a dilation whose taps do not split
by phase, a padding that crops more than a tap's reach): every output
element sums over all taps the input elements that land on it, with a
divisibility test per tap.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import CanonicalLayout, ConvTransposeWorkload, ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["subpixel", "subpixel_with", "gather"]

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def subpixel(w: ConvTransposeWorkload,
             schedule_conv: Callable[[ConvWorkload], Tensor]) -> Tensor | None:
    """The sub-pixel decomposition of ``w``: one stride-1 convolution over
    all the phases (scheduled by ``schedule_conv``), then the phases
    interleaved. None when a dilation is not 1, or a leading padding crops
    more than the window reaches back (``p0 // s > ceil(k/s) - 1``)."""
    rank, s = w.rank, w.strides
    if any(d != 1 for d in w.dilation):
        return None
    data, weight, dt = w.data, w.weight, w.dtype
    dl, kl, ol = w.data_layout, w.kernel_layout, w.out_layout
    n, _, *sp = dl.to_canonical(data.shape)
    c, og, *ks = kl.to_canonical(weight.shape)
    kc = [arith.const_int(k) for k in ks]
    if any(k is None for k in kc):
        return None
    p0, p1 = w.padding[:rank], w.padding[rank:]
    taps = [-(-k // sj) for k, sj in zip(kc, s)]                   # J per axis
    q0 = [p // sj for p, sj in zip(p0, s)]
    lead = [j - 1 - q for j, q in zip(taps, q0)]
    if any(v < 0 for v in lead):
        return None
    # the trailing padding that makes the phase convolution reach the last
    # output position: (k + output_padding - p1 - 1) // s, none if negative
    trail = [max(0, (k + op - p - 1) // sj)
             for k, op, p, sj in zip(kc, w.output_padding, p1, s)]
    phases = math.prod(s)
    groups = w.groups
    cg = arith.simplify(c // groups) if groups > 1 else c
    ogc = arith.const_int(og)
    if ogc is None:
        return None
    zero = te.const(0, weight.dtype)

    def phase_weight(oc, ci, *jj):
        # oc = (group * phases + phase) * og + o; the phase's taps reversed
        g, rest = oc // (phases * ogc), oc % (phases * ogc)
        ph, o = rest // ogc, rest % ogc
        tap, inside = [], []
        for a in reversed(range(rank)):
            phi = ph % s[a]
            ph = ph // s[a]
            t = phi + (taps[a] - 1 - jj[a]) * s[a]
            tap.insert(0, te.clamp_index(t, i64(kc[a])))
            inside.append(te.lt(t, kc[a]))
        ch = ci if groups == 1 else g * cg + ci
        value = weight[kl.index_from_canonical((ch, o, *tap))]
        return te.select(te.all_of(*inside), value, zero)
    sub_weight = te.compute((i64(groups * phases * ogc), cg, *[i64(j) for j in taps]),
                            phase_weight, name="subpixel_weight", inline=False)
    sub_sp = [arith.simplify(sp[a] + (lead[a] + trail[a] - taps[a] + 1)) for a in range(rank)]
    letters = _SPATIAL[rank]
    sub = schedule_conv(ConvWorkload(
        data, sub_weight, (n, i64(groups * phases * ogc), *sub_sp), dt, rank, (1,) * rank,
        (*lead, *trail), (1,) * rank, groups, dl, CanonicalLayout("OI" + letters),
        CanonicalLayout("NC" + letters)))

    def interleave(*idx):
        b, oc, *y = ol.index_to_canonical(idx)
        ph = i64(0)
        pos = []
        for a in range(rank):
            z = y[a] + p0[a]
            ph = ph * s[a] + z % s[a]
            pos.append(z // s[a] - q0[a])
        channel = oc if groups == 1 and phases == 1 else (
            ((oc // ogc) * phases + ph) * ogc + oc % ogc)
        return sub[(b, channel, *pos)]
    return te.compute(w.out_shape, interleave, name=f"T_conv{rank}d_transpose")


def subpixel_with(schedule_conv: Callable[[ConvWorkload], Tensor]
                  ) -> Callable[[ConvTransposeWorkload], Tensor | None]:
    """:func:`subpixel` with its phase convolution scheduled by ``schedule_conv``."""
    def take(w: ConvTransposeWorkload) -> Tensor | None:
        return subpixel(w, schedule_conv)
    return take


def gather(w: ConvTransposeWorkload) -> Tensor:
    """The gather form of ``w``: output position ``y`` takes tap ``t`` from
    input position ``(y + p0 - t*d) / s`` when that is an integer inside
    the input."""
    data, weight, rank, dt = w.data, w.weight, w.rank, w.dtype
    dl, kl, ol = w.data_layout, w.kernel_layout, w.out_layout
    pads, strides, dil = w.padding, w.strides, w.dilation
    _, c, *sp = dl.to_canonical(data.shape)
    _, og, *ks = kl.to_canonical(weight.shape)
    groups = w.groups
    cg = arith.simplify(c // groups) if groups > 1 else c
    rc = te.reduce_axis(cg, "rc")
    rk = [te.reduce_axis(k, f"r{j}") for j, k in enumerate(ks)]
    zero = te.const(0, dt)

    def body(*idx):
        b, o, *y = ol.index_to_canonical(idx)
        ch = rc.var if groups == 1 else (o // og) * cg + rc.var
        oc = o if groups == 1 else o % og
        conds = []
        pos = []
        for j in range(rank):
            num = (y[j] + pads[j]) - rk[j].var * dil[j]
            p = num if strides[j] == 1 else num // strides[j]
            cj = te.all_of(te.ge(num, 0), te.lt(p, sp[j]))
            if strides[j] != 1:
                cj = te.all_of(cj, te.eq(num % strides[j], 0))
            conds.append(cj)
            pos.append(te.clamp_index(p, sp[j]))
        x_idx = dl.index_from_canonical((b, ch, *pos))
        w_idx = kl.index_from_canonical((ch, oc, *[r.var for r in rk]))
        prod = te.cast(data[x_idx], dt) * te.cast(weight[w_idx], dt)
        return te.sum(te.select(te.all_of(*conds), prod, zero), axis=[rc, *rk])
    return te.compute(w.out_shape, body, name=f"T_conv{rank}d_transpose",
                      tag=f"conv{rank}d_transpose")
