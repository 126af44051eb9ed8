"""Max pooling by the CPU's own max (``te.fast_max``) plus a count of the
window's NaNs, which puts back the NaN ``te.fast_max`` may drop: the result
is ``te.max``'s.

``te.fast_max`` is one vector instruction where the NaN-propagating max
costs six, and it lets the reduction keep a row of partial accumulators.
With the count, the reductions get a scalar accumulator per output element
instead of a row of them, which strided rows narrower than a vector do not
repay. 2-D float poolings in NCHW of static shape with a row stride of
1 to 3 take :mod:`pool_max_rows` before this one (the RULES table). Measurements: bench/README.md, "Schedule notes moved
from docstrings".
"""

from __future__ import annotations

from phasec import arith
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import PoolWindow, padded_for_max
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["takes", "schedule"]


def takes(w: PoolWorkload) -> bool:
    """Whether the max pooling ``w`` takes this schedule: float, and a
    stride of 1 along the rows, or output rows of at least one vector
    (static)."""
    dtype, out_shape = w.data.dtype, w.out_shape
    if not dtype.startswith("float") or not out_shape:
        return False
    if w.strides[-1] == 1:
        return True
    width = arith.const_int(out_shape[-1])
    return width is not None and width >= tuning.host_tuning().lanes(int(dtype[5:]))


def schedule(w: PoolWorkload) -> Tensor:
    """The max pooling ``w`` by ``te.fast_max`` and a count of NaNs."""
    taps = [te.reduce_axis(k, f"r{j}") for j, k in enumerate(w.pool_size)]
    window = PoolWindow(w, padded_for_max(w))

    def total(*o):
        n, c, *oi = w.out_layout.index_to_canonical(o)
        v = window.tap(n, c, window.positions(oi, [t.var for t in taps]))
        return te.fast_max(v, axis=taps)
    red = te.compute(w.out_shape, total, name=w.name + "_fast")
    taps_nan = [te.reduce_axis(k, f"q{j}") for j, k in enumerate(w.pool_size)]

    def nans(*o):
        n, c, *oi = w.out_layout.index_to_canonical(o)
        v = window.tap(n, c, window.positions(oi, [t.var for t in taps_nan]))
        return te.sum(te.select(te.ne(v, v), i64(1), i64(0)), axis=taps_nan)
    cnt = te.compute(w.out_shape, nans, name=w.name + "_nans")
    nan = te.const(float("nan"), w.data.dtype)
    return te.compute(w.out_shape, lambda *i: te.select(te.gt(cnt[i], 0), nan, red[i]),
                      name=w.name)
