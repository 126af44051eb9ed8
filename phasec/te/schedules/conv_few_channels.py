"""A strided NCHW conv2d of few input channels (an image's 1-4: a CNN's
stem) over its input split into stride phases laid end to end.

The GEMM schedule takes a convolution one output row at a time (rows: the
output channels; columns: the row's positions). Strided, every column of B
is a gather (``data[.., s*x + rx]``), packed per output row: for a stem's
short reduction (``C*KH*KW``: 27 for 3x3 over RGB) the gathered packing
costs about as much as the products. Here the padded input is split once
into its ``s*s`` stride phases, ``phase[b, c, a*s + e, i*Wq + j] =
pad[b, c, s*i + a, s*j + e]`` (``Wq = ceil(Wp / s)``, ``Wp`` the padded
width; a copy whose reads are strided, written contiguously, by hand), so
that tap ``(ry, rx)`` of output position ``(y, x)`` reads phase
``(ry*dy % s, rx*dx % s)`` at ``p + (ry*dy // s)*Wq + rx*dx // s`` with
``p = y*Wq + x``: contiguous in ``p``. One GEMM then runs over all
``OH*Wq`` columns of the image (whole vectors; the ``Wq - OW`` columns past
each output row are computed and dropped), its B read in place. The
epilogue (bias, activation) is a nest of its own that reads the rows back,
as in :mod:`phasec.te.schedules.conv_flat_rows`. Stride 1 keeps the GEMM
schedule's rows, whose B is contiguous already and whose epilogue runs in
the tile (small_cnn's 3x3 3 -> 16 over 33x33 measured the same either
way). Each element is the same sum over ``(c, ry, rx)`` as the direct
convolution's.
"""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import Buffer, BufferStore, For, SeqStmt, Stmt, Var
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["MAX_CHANNELS", "schedule"]

#: input channels up to which a convolution takes this schedule
MAX_CHANNELS = 4


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution ``w`` (an NCHW float conv2d) over its stride phases,
    or None unless it is ungrouped with at most :data:`MAX_CHANNELS` input
    channels, static spatial sizes and channel counts, the same stride (2
    or more) along both axes, output rows of at least a vector (narrower ones are
    :mod:`~phasec.te.schedules.conv_im2col`'s and
    :mod:`~phasec.te.schedules.conv_flat_rows`') and at most an eighth of
    its columns dropped."""
    data, weight = w.data, w.weight
    _, _, *sp = w.data_layout.to_canonical(data.shape)
    dims = [arith.const_int(d) for d in (*sp, *weight.shape, w.out_shape[2], w.out_shape[3])]
    if any(d is None for d in dims) or w.groups != 1:
        return None
    H, W, O, C, KH, KW, OH, OW = dims
    sy, sx = w.strides
    if C > MAX_CHANNELS or sy != sx or sx < 2 or OH < 1 or OW < w.lanes:
        return None
    s = sx
    top, left, _, right = w.padding
    dy, dx = w.dilation
    Wq = -(-(W + left + right) // s)
    if 8 * (Wq - OW) > Wq:
        return None  # more dropped columns than whole vectors win
    columns = OH * Wq
    # the last output row's dropped columns read up to here
    length = columns + (dy * (KH - 1) // s) * Wq + dx * (KW - 1) // s
    length = -(-length // Wq) * Wq  # whole phase rows
    phases = _stride_phases(data, H, W, top, left, s, Wq, length)
    rc = te.reduce_axis(i64(C), "rc")
    ry, rx = te.reduce_axis(i64(KH), "r0"), te.reduce_axis(i64(KW), "r1")

    def body(b, o, p):
        ey, ex = ry.var * dy, rx.var * dx
        if s == 1:
            phase, tap = i64(0), ey * Wq + ex
        else:
            phase, tap = ey % s * s + ex % s, ey // s * Wq + ex // s
        return te.sum(phases[b, rc.var, phase, p + tap] * weight[o, rc.var, ry.var, rx.var],
                      axis=[rc, ry, rx])
    n = data.shape[0]
    rows = te.compute((n, i64(O), i64(columns)), body, name="T_conv2d_phase_rows",
                      tag="conv2d")
    return te.compute(w.out_shape, lambda b, o, y, x: rows[b, o, y * Wq + x], name="T_conv2d")


def _stride_phases(data: Tensor, H: int, W: int, top: int, left: int, s: int, Wq: int,
                   length: int) -> Tensor:
    """``phase[b, c, a*s + e, i*Wq + j] = data[b, c, s*i + a - top, s*j + e -
    left]`` (zero outside the input), ``length`` long per phase, written by
    hand: each phase zeroed, then the input rows it holds copied in, both
    with contiguous stores and ranges known at build time (as one compute,
    every element would be a gather through ``q // Wq``)."""
    dt = data.dtype
    n, c = data.shape[0], data.shape[1]

    def first(offset: int) -> int:
        """The first ``i`` with ``s*i + offset >= 0``."""
        return max(0, -(offset // s))

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        src = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        per_channel: list[Stmt] = []
        for a in range(s):
            for e in range(s):
                ph = a * s + e
                q, i, j = (Var(v, "int64") for v in ("q", "i", "j"))
                per_channel.append(For(q, i64(0), i64(length), "vectorized", BufferStore(
                    out, te.const(0, dt), (b, ch, i64(ph), q))))
                # rows i with 0 <= s*i + a - top < H, columns likewise (and
                # within the phase's length: the rows below are never read)
                i0, j0 = first(a - top), first(e - left)
                i1 = min(-(-(H + top - a) // s), length // Wq)
                j1 = min(-(-(W + left - e) // s), Wq)
                if i1 <= i0 or j1 <= j0:
                    continue
                store = BufferStore(out, src[(b, ch, i * s + (a - top), j * s + (e - left))],
                                    (b, ch, i64(ph), i * Wq + j))
                per_channel.append(For(i, i64(i0), i64(i1 - i0), "serial",
                                       For(j, i64(j0), i64(j1 - j0), "vectorized", store)))
        return For(b, i64(0), out.shape[0], "serial",
                   For(ch, i64(0), out.shape[1], "serial", SeqStmt(tuple(per_channel))))
    return te.extern((n, c, i64(s * s), i64(length)), dt, [data], build, name="stride_phases")
