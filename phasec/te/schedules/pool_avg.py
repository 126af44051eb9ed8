"""Average pooling: the sum over the window's taps inside the input,
divided by the number of taps inside the input (``count_include_pad``
False) or inside the padded extent (True), at least 1; integer averages
round down."""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import Cast
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import PoolWindow
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: PoolWorkload) -> Tensor:
    """The average pooling ``w``."""
    taps = [te.reduce_axis(k, f"r{j}") for j, k in enumerate(w.pool_size)]
    window = PoolWindow(w, None)
    rank, pads, in_sp, dt = w.rank, w.padding, window.in_sp, w.data.dtype

    def total(*o):
        n, c, *oi = w.out_layout.index_to_canonical(o)
        return te.sum(window.tap(n, c, window.positions(oi, [t.var for t in taps])), axis=taps)
    red = te.compute(w.out_shape, total, name=w.name + "_sum")
    taps2 = [te.reduce_axis(k, f"q{j}") for j, k in enumerate(w.pool_size)]

    def count(*o):
        _, _, *oi = w.out_layout.index_to_canonical(o)
        pos = window.positions(oi, [t.var for t in taps2])
        if w.count_include_pad:
            lo = [-pads[j] for j in range(rank)]
            hi = [arith.simplify(in_sp[j] + pads[rank + j]) for j in range(rank)]
        else:
            lo, hi = [0] * rank, in_sp
        return te.sum(te.select(window.within(pos, lo, hi), i64(1), i64(0)), axis=taps2)
    cnt = te.compute(w.out_shape, count, name=w.name + "_count")

    def body(*i):
        c = te.maximum(cnt[i], 1)
        if dt.startswith("float"):
            return red[i] / Cast(dt, c)
        return te.cast(red[i] // c, dt)
    return te.compute(w.out_shape, body, name=w.name)
