"""A strided 2-D max pooling whose output rows are narrower than a vector
(SqueezeNet's 13x13, MobileNet-style 7x7 downsampling), over its input split
into stride phases.

Vectorized along a row of 7 or 13 outputs, every tap is a strided load of a
fraction of a vector. Instead each channel's input is copied into its
``sh x sw`` phases laid flat (``ph[a, b, u*V + v] = x[u*sh + a - top,
v*sw + b - left]``, the padding and anything past the input filled with
the max's identity; :class:`pool_window.PhaseGeometry`). Tap ``(r0, r1)``
of output ``p = y*V + x`` then reads ``ph[(r0*dh) % sh, (r1*dw) % sw, p +
(r0*dh)//sh * V + (r1*dw)//sw]``: contiguous in ``p``, so the max runs over
whole vectors of the flat plane; the ``V - OW`` columns past each row are
computed and dropped when the rows are written out.

The whole pooling is one hand-written nest (``te.extern``), per channel:
the phases and the flat rows are buffers of one channel (in L1), not
planes of every channel written to memory and read back by three nests.
The max over the taps is :func:`pool_window.nan_propagating_max`: the CPU's
max in a balanced tree plus unordered compares for the NaN, about two
instructions a tap where ``te.max``'s (LLVM's ``maximum``) costs six (max
pool 3x3/2 over 256x27x27: 63 -> 45 us; over 576x14x14 padded: 48 -> 36 us;
one thread, AVX-512). A zero maximum of a window holding both -0 and +0 may
be either zero.
"""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, Stmt, Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import PhaseGeometry, nan_propagating_max
from phasec.te.stmt import seq
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
    n, c, H, W = (arith.const_int(d) for d in w.data.shape)
    OH, OW = (arith.const_int(d) for d in w.out_shape[2:])
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    lanes = tuning.host_tuning().lanes(int(dt[5:]))
    geo = PhaseGeometry.of((H, W), (OH, OW), (KH, KW), w.strides, w.dilation,
                           (w.padding[0], w.padding[1]), lanes)
    V = geo.V
    # the taps' (phase, offset) in the reduction's order: r0, then r1
    taps = [((r0 * dh % sh) * sw + r1 * dw % sw, (r0 * dh // sh) * V + r1 * dw // sw)
            for r0 in range(KH) for r1 in range(KW)]

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        b, ch, p, y, x = (Var(v, "int64") for v in ("b", "ch", "p", "y", "x"))
        ph = Buffer("stride_phases", (i64(sh * sw), i64(geo.length)), dt)
        rows = Buffer(w.name + "_rows", (i64(geo.columns),), dt)
        # the CPU's max (one instruction) in a balanced tree, then NaN where
        # any tap is NaN (unordered compares of pairs, or-ed)
        pooled = nan_propagating_max([BufferLoad(ph, (i64(f), p + off)) for f, off in taps],
                                     dt, lambda v: BufferStore(rows, v, (p,)))
        body = seq([*geo.copy(bufs[0], b, ch, te.min_value(dt), lambda f, q: (ph, f, q)),
                    For(p, i64(0), i64(geo.columns), "vectorized", pooled),
                    For(y, i64(0), i64(OH), "serial", For(x, i64(0), i64(OW), "vectorized",
                        BufferStore(out, BufferLoad(rows, (y * V + x,)), (b, ch, y, x))))])
        work = n * c * (sh * sw * geo.length + geo.columns * len(taps))
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(ph, Allocate(rows, body))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)

