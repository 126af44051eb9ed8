"""Max pooling: the max over the window's taps (``te.max``, which
propagates a NaN), reading the padded copy of the input when there is one
(:func:`phasec.te.schedules.pool_window.padded_for_max`)."""

from __future__ import annotations

from phasec.te import operation as te
from phasec.te.schedules.pool_window import PoolWindow, padded_for_max
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: PoolWorkload) -> Tensor:
    """The max pooling ``w``."""
    taps = [te.reduce_axis(k, f"r{j}") for j, k in enumerate(w.pool_size)]
    window = PoolWindow(w, padded_for_max(w))

    def total(*o):
        n, c, *oi = w.out_layout.index_to_canonical(o)
        return te.max(window.tap(n, c, window.positions(oi, [t.var for t in taps])), axis=taps)
    return te.compute(w.out_shape, total, name=w.name)
