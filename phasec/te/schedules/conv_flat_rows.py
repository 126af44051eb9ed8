"""A narrow stride-1 NCHW conv2d computed over the padded rows laid end to
end.

An output row narrower than a vector (ResNet's 14x14 and 7x7 stages) fills
a fraction of each FMA of the GEMM schedule's register tiles (output
channels x positions of a row). Over the padded input flattened per channel
(``pad_flat[c, y*Wp + x]``, with ``Wp`` the padded width), output position
``(y, x)`` is column ``p = y*Wp + x`` and tap ``(ry, rx)`` reads
``pad_flat[c, p + ry*dy*Wp + rx*dx]``: contiguous in ``p``, so the GEMM runs
over ``OH*Wp`` columns of whole vectors. The ``Wp - OW`` columns past each
output row are computed and dropped (the same sums in the same order for
the others: the values are those of the plain schedule). The epilogue
(bias, relu, a residual) is a nest of its own that reads the rows back, as
it cannot run in the register tiles of dropped columns.

Depthwise rows of up to four vectors that are not whole vectors (28 or 56
wide) as well, where the row's own tiles would be fractions of vectors.

Grouped convolutions too: channel ``(oc // og) * cg + rc``, which the GEMM
schedule tiles within a group (``GemmPlan.row_group``). Depthwise ones
(``og`` = 1, no GEMM) get the plain nest's vectors over whole flat rows
instead of 7 or 14 columns. A 1x1 convolution without padding drops
nothing: its rows end to end are the input as laid out, taken for rows of
one to two vectors that are not whole ones (``whole`` below) where
:mod:`.conv_pointwise_flat` (one GEMM over the input in place, the epilogue
in its tiles) has not: a depthwise one.
Measurements: bench/README.md, "Schedule notes moved from docstrings".
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import ConvWorkload
from phasec.ir.tir import Buffer, BufferStore, For, SeqStmt, Stmt, Var
from phasec.target import tuning
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution of ``w`` (an NCHW float conv2d) over its flat padded
    rows, or None when it is not narrow and stride-1 with static sizes."""
    data, weight = w.data, w.weight
    _, _, *sp = w.data_layout.to_canonical(data.shape)
    _, _, *ks = w.kernel_layout.to_canonical(weight.shape)
    groups = w.groups
    if tuple(w.strides) != (1, 1):
        return None
    shape = [arith.const_int(d) for d in (*sp, *ks, w.out_shape[2], w.out_shape[3],
                                          w.out_shape[1], weight.shape[1])]
    if any(v is None for v in shape):
        return None
    H, W, KH, KW, OH, OW, O, CG = shape
    og = O // groups
    top, left, bottom, right = w.padding
    dy, dx = w.dilation
    Wp = W + left + right
    lanes = w.lanes
    # Taken for rows of under two vectors that are no whole vectors; wider
    # ones keep their rows (the copy cost more than the wider tiles bought).
    # (Before conv_pointwise_flat, ResNet-50's and Inception's 28x28 1x1
    # convolutions came here, one thread: 128 -> 512 + residual 58 -> 96
    # GFLOP/s, 512 -> 128 79 -> 102, 256 -> 64 85 -> 98)
    whole = (KH == KW == 1 and not any(w.padding)
             and OW % lanes != 0 and OW < 2 * lanes)
    depthwise = groups > 1 and og == 1 and CG == 1
    # a depthwise row of a few vectors that are not whole ones (28 or 56
    # wide) too: its plain nest took 8-lane tiles of the row (144 channels
    # of 56x56, 3x3 + relu6: 248 -> 220 us; 240 of 28x28, 5x5 + SiLU: 426 ->
    # 279 us on one core)
    narrow = OW < lanes or (depthwise and OW % lanes != 0 and OW < 4 * lanes)
    if not whole and (not (2 <= OW and narrow) or 2 * OW < Wp or OH < 2):
        return None  # wide enough rows, or more dropped columns than kept
    n = data.shape[0]
    columns = OH * Wp
    if depthwise:
        # whole tiles of columns for the row tiles of the plain nest
        # (row_tile): a few more dropped columns, not one 252-wide tile
        columns = -(-columns // 32) * 32
    # every column of the last row is computed, the dropped ones too
    length = columns + dy * (KH - 1) * Wp + dx * (KW - 1)
    padded = _flat_padded(data, H, W, top, left, Wp, length)
    rc = te.reduce_axis(i64(CG), "rc")
    ry, rx = te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")

    def wide_body(b, oc, p):
        tap = ry.var * (dy * Wp) + rx.var * dx
        # a grouped convolution reads its group's input channels (the GEMM
        # schedule sees ``oc // og``: GemmPlan.row_group)
        ch = rc.var if groups == 1 else (oc // og) * CG + rc.var
        return te.sum(padded[b, ch, p + tap] * weight[oc, rc.var, ry.var, rx.var],
                      axis=[rc, ry, rx])
    wide = te.compute((n, w.out_shape[1], i64(columns)), wide_body, name="T_conv2d_rows",
                      tag="conv2d")
    return te.compute(w.out_shape, lambda b, oc, y, x: wide[b, oc, y * Wp + x],
                      name="T_conv2d")


def _flat_padded(data: Tensor, H: int, W: int, top: int, left: int, Wp: int,
                 length: int) -> Tensor:
    """``data``'s channels as flat padded rows (``[b, c, (y + top)*Wp + x +
    left]``, zero elsewhere, ``length`` long), written by hand: the row
    zeroed, then each input row copied in, both with contiguous stores (as
    one compute, every element would be a gather through ``q // Wp``)."""
    dt = data.dtype
    n, c = data.shape[0], data.shape[1]

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        src = bufs[0]
        b, ch, q, y, x = (Var(v, "int64") for v in ("b", "ch", "q", "y", "x"))
        fill = For(q, i64(0), i64(length), "vectorized",
                   BufferStore(out, te.const(0, dt), (b, ch, q)))
        copy = For(y, i64(0), i64(H), "serial", For(x, i64(0), i64(W), "vectorized", BufferStore(
            out, src[(b, ch, y, x)], (b, ch, (y + top) * Wp + (x + left)))))
        per_channel = SeqStmt((fill, copy))
        cc = arith.const_int(c)
        work = (cc or 2) * length
        par = (cc is None or cc > 1) and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), out.shape[0], "serial",
                   For(ch, i64(0), out.shape[1], "parallel" if par else "serial", per_channel))
    return te.extern((n, c, i64(length)), dt, [data], build, name="pad_flat")
