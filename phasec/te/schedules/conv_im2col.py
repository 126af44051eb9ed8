"""A strided NCHW conv2d whose output rows are narrower than a vector
(ResNet's 14x14 -> 7x7 downsampling), or on targets that ask for it
(``TargetTuning.im2col_row_vectors``) narrower than a few vectors and not
whole ones (28 wide), over its input gathered into columns (im2col).

The input is gathered once, ``cols[b, c, ry, rx, p]`` for output position
``p = y*OW + x``, then one GEMM runs over all the output positions, whose
columns are whole vectors. The plain schedule would make a GEMM per output
row, OW columns wide, and pack each of its panels through gathers. The
epilogue is a nest of its own that reads the rows back (as in
:mod:`phasec.te.schedules.conv_flat_rows`). Measurements: bench/README.md,
"Schedule notes moved from docstrings".
"""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import Buffer, BufferStore, For, PrimExpr, SeqStmt, Stmt, Var
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.target import tuning
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution of ``w`` (an NCHW float conv2d) over its gathered
    columns, or None when it is not strided, ungrouped, with static sizes
    and output rows narrower than a vector, or than the target's
    ``im2col_row_vectors`` vectors and not whole ones (but at least a
    vector of output positions)."""
    data, weight = w.data, w.weight
    _, _, *sp = w.data_layout.to_canonical(data.shape)
    _, _, *ks = w.kernel_layout.to_canonical(weight.shape)
    if w.groups != 1 or tuple(w.strides) == (1, 1):
        return None
    shape = [arith.const_int(d) for d in (*sp, *ks, w.out_shape[2], w.out_shape[3])]
    if any(v is None for v in shape):
        return None
    H, W, KH, KW, OH, OW = shape
    # rows of a few vectors that are not whole ones: their tiles would leave
    # lanes idle (28 = 16 + 8 + 4), where the flat positions fill them
    wide = OW % w.lanes != 0 and OW < tuning.host_tuning().im2col_row_vectors * w.lanes
    if not (OW < w.lanes or wide) or OH * OW < w.lanes:
        return None
    cols = _gather(w, H, W, KH, KW, OH, OW)
    n, c = data.shape[0], data.shape[1]
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    flat = te.compute((n, w.out_shape[1], i64(OH * OW)), lambda b, oc, p: te.sum(
        cols[b, rc.var, ry.var, rx.var, p] * weight[oc, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name="T_conv2d_cols", tag="conv2d")
    return te.compute(w.out_shape, lambda b, oc, y, x: flat[b, oc, y * OW + x],
                      name="T_conv2d")


def _gather(w: ConvWorkload, H: int, W: int, KH: int, KW: int, OH: int, OW: int) -> Tensor:
    """``cols[b, c, ry, rx, y*OW + x]``: the input at tap ``(ry, rx)`` of output
    position ``(y, x)``, zero in the padding, written by hand: per tap, the
    output rows whose input row lies in the image copy its columns (a
    strided load) between the zeros of the left and right padding, known
    per tap at build time; the other rows are zeroed. (As one compute, every
    element took a division and a remainder by OW and two clamped, selected
    indices: a quarter of ResNet-50's 3x3/2 128-channel convolution.)"""
    data, dt = w.data, w.dtype
    top, left = w.padding[0], w.padding[1]
    (sy, sx), (dy, dx) = w.strides, w.dilation
    n, c = data.shape[0], data.shape[1]
    zero = te.const(0, dt)

    def inside(offset: int, stride: int, size: int, count: int) -> tuple[int, int]:
        # the outputs o in [lo, hi) whose input o*stride + offset is in [0, size)
        lo = min(count, max(0, -(offset // stride) if offset < 0 else 0))
        hi = max(lo, min(count, (size - 1 - offset) // stride + 1))
        return lo, hi

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        src = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        taps: list[Stmt] = []
        for r in range(KH):
            y_lo, y_hi = inside(r * dy - top, sy, H, OH)
            for s in range(KW):
                x_lo, x_hi = inside(s * dx - left, sx, W, OW)

                def fill(lo: int, hi: int, row: PrimExpr, r=r, s=s) -> list[Stmt]:
                    if hi <= lo:
                        return []
                    x = Var("x", "int64")
                    return [For(x, i64(0), i64(hi - lo), "vectorized", BufferStore(
                        out, zero, (b, ch, i64(r), i64(s), row * OW + (x + lo))))]

                y = Var("y", "int64")
                iy = y * sy + (r * dy - top)
                x = Var("x", "int64")
                copy = For(x, i64(0), i64(x_hi - x_lo), "vectorized", BufferStore(
                    out, src[(b, ch, iy, (x + x_lo) * sx + (s * dx - left))],
                    (b, ch, i64(r), i64(s), y * OW + (x + x_lo))))
                row = SeqStmt(tuple(fill(0, x_lo, y) + [copy] + fill(x_hi, OW, y)))
                if x_hi > x_lo and y_hi > y_lo:
                    taps.append(For(y, i64(y_lo), i64(y_hi - y_lo), "serial", row))
                if y_lo:
                    taps.append(_zero_rows(out, zero, b, ch, r, s, 0, y_lo, OW))
                if y_hi < OH:
                    taps.append(_zero_rows(out, zero, b, ch, r, s, y_hi, OH, OW))
                if x_hi <= x_lo and y_hi > y_lo:
                    taps.append(_zero_rows(out, zero, b, ch, r, s, y_lo, y_hi, OW))
        cc = arith.const_int(c)
        work = (cc or 2) * KH * KW * OH * OW
        par = (cc is None or cc > 1) and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), out.shape[0], "serial", For(
            ch, i64(0), out.shape[1], "parallel" if par else "serial", SeqStmt(tuple(taps))
            if len(taps) > 1 else taps[0]))
    return te.extern((n, c, i64(KH), i64(KW), i64(OH * OW)), dt, [data], build, name="im2col")


def _zero_rows(out: Buffer, zero: PrimExpr, b: Var, ch: Var, r: int, s: int, lo: int,
               hi: int, ow: int) -> Stmt:
    """Zeros over output rows ``[lo, hi)`` of tap ``(r, s)`` (contiguous)."""
    p = Var("p", "int64")
    return For(p, i64(0), i64((hi - lo) * ow), "vectorized", BufferStore(
        out, zero, (b, ch, i64(r), i64(s), p + lo * ow)))
