"""A strided 2-D max pooling whose output rows are narrower than a vector
(SqueezeNet's 13x13, MobileNet-style 7x7 downsampling), over its input split
into stride phases.

Vectorized along a row of 7 or 13 outputs, every tap is a strided load of a
fraction of a vector. Instead the input is copied once, per channel, into
its ``sh x sw`` phases laid flat (``ph[a, b, u*V + v] = x[u*sh + a - top,
v*sw + b - left]``, the padding and anything past the input filled with
the max's identity), written by hand (:func:`pool_window.stride_phases`).
Tap ``(r0, r1)`` of output ``p = y*V + x`` then reads ``ph[(r0*dh) % sh, (r1*dw) % sw, p +
(r0*dh)//sh * V + (r1*dw)//sw]``: contiguous in ``p``, so the max runs over
whole vectors of the flat plane (``te.max``: a NaN propagates, as in
:mod:`pool_max`); the ``V - OW`` columns past each row are computed and
dropped when the rows are written back.
"""

from __future__ import annotations

from phasec import arith
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import stride_phases
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["takes", "schedule"]


def takes(w: PoolWorkload) -> bool:
    """A float 2-D max pooling in NCHW of static shape, strided along both
    axes (at most 3), with output rows narrower than a vector."""
    if (w.kind != "max" or w.rank != 2 or not w.canonical
            or not w.data.dtype.startswith("float")
            or not all(1 < s <= 3 for s in w.strides)):
        return False
    dims = [arith.const_int(d) for d in (*w.data.shape, *w.out_shape)]
    if any(d is None for d in dims):
        return False
    return dims[-1] < tuning.host_tuning().lanes(int(w.data.dtype[5:]))


def schedule(w: PoolWorkload) -> Tensor | None:
    """The max pooling ``w`` over its phases, or None when it is not taken."""
    if not takes(w):
        return None
    dt = w.data.dtype
    n, c = (arith.const_int(d) for d in w.data.shape[:2])
    OH, OW = (arith.const_int(d) for d in w.out_shape[2:])
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    phases, V, columns = stride_phases(w.data, (OH, OW), (KH, KW), w.strides, w.dilation,
                                       (top, left), te.min_value(dt),
                                       tuning.host_tuning().lanes(int(dt[5:])))
    r0, r1 = te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")

    def flat_body(bi, ci, p):
        y_tap, x_tap = r0.var * dh, r1.var * dw
        phase = (y_tap % sh) * sw + x_tap % sw
        return te.max(phases[bi, ci, phase, p + (y_tap // sh) * V + x_tap // sw],
                      axis=[r0, r1])
    flat = te.compute((i64(n), i64(c), i64(columns)), flat_body, name=w.name + "_rows")
    return te.compute(w.out_shape, lambda bi, ci, y, x: flat[bi, ci, y * V + x],
                      name=w.name)
