"""The direct convolution, in any layout and over 1, 2 or 3 spatial
dimensions: the sum over input channels and taps of ``data * weight``.

Every layout goes through the same expression: its indices are permuted
into the canonical order (index generalization), so no transpose is
materialized. The padded input, in canonical (``NC`` + spatial) order, gets
a buffer of its own (TVM's ``pad_temp``) so that the inner loop reads it
without bounds tests; without padding the kernel reads the data in place, in
its own layout. A grouped convolution reads input channel ``(oc // og) * cg
+ rc``. The loop nest is then the lowering's: the GEMM schedule takes it
when it can (:mod:`phasec.te.schedules.gemm`)."""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.schedules.pool_window import padded_input
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor:
    """The direct convolution of ``w``."""
    data, weight, rank, dt = w.data, w.weight, w.rank, w.dtype
    dl, kl, ol = w.data_layout, w.kernel_layout, w.out_layout
    pads = w.padding
    n, c, *sp = dl.to_canonical(data.shape)
    o_ch, cg, *ks = kl.to_canonical(weight.shape)
    padded_shape = (n, c, *[arith.simplify(sp[j] + (pads[j] + pads[rank + j]))
                            for j in range(rank)])
    zero = te.const(0, data.dtype)

    def pad_body(*i):
        pos = [i[2 + j] - pads[j] for j in range(rank)]
        inside = te.all_of(*[te.in_range(p, 0, sp[j]) for j, p in enumerate(pos)])
        idx = dl.index_from_canonical((i[0], i[1], *[te.clamp_index(p, sp[j])
                                                     for j, p in enumerate(pos)]))
        return te.select(inside, data[idx], zero)
    # in the canonical layout, the hand-written copy (pool_window.padded_input:
    # contiguous stores, no per-element border test); else one compute
    padded = (padded_input(data, pads, rank, zero, [0] * rank)
              if dl.name == "NC" + "DHW"[3 - rank:] else None)
    if padded is None and any(pads):
        padded = te.compute(padded_shape, pad_body, name="pad_temp", inline=False)
    if padded is not None:

        def load(idx):
            return padded[idx]
    else:
        def load(idx):
            return data[dl.index_from_canonical(idx)]
    rc = te.reduce_axis(cg, "rc")
    rk = [te.reduce_axis(k, f"r{j}") for j, k in enumerate(ks)]
    og = arith.simplify(o_ch // w.groups) if w.groups > 1 else None

    def body(*idx):
        b, oc, *oi = ol.index_to_canonical(idx)
        ch = rc.var if og is None else (oc // og) * cg + rc.var
        pos = [oi[j] * w.strides[j] + rk[j].var * w.dilation[j] for j in range(rank)]
        w_idx = kl.index_from_canonical((oc, rc.var, *[r.var for r in rk]))
        return te.sum(te.cast(load((b, ch, *pos)), dt) * te.cast(weight[w_idx], dt),
                      axis=[rc, *rk])
    return te.compute(w.out_shape, body, name=f"T_conv{rank}d", tag=f"conv{rank}d")
