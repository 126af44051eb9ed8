"""A depthwise NCHW conv2d with a block of channels in the vector lanes.

The other depthwise schedules (:mod:`conv_flat_rows`,
:mod:`conv_depthwise_strided`) put an image's columns in the lanes: over a
7x7 image a 5x5 window's flat padded rows are 11 columns a row, 77 (96
with the row tiles' rounding) a plane, six vectors for 49 outputs. Here
one vector holds the same pixel of ``L`` channels (one host vector: 16
float32 on AVX-512), so every multiply-add is a whole vector whatever the
image's width or the stride. Per block of ``L`` channels, one hand-written
nest whose buffers stay in the cache:

1. the block's input to pixel-major (``tin[y][x][l]``, padded with zeros)
   in two steps LLVM vectorizes with shuffles: each group of four channels
   interleaved over the whole plane (a group of four stores, as
   :mod:`transpose` does), then the groups' 4-element pieces side by side
   (16-byte copies); a gather of 16 channels per pixel (LLVM's form of
   a group of 16, or of a stride-16 loop) cost twice as much, both ways;
2. the block's weights likewise (``wl[r0][r1][l]``, small; in the same
   two steps: a loop over the lanes, a gather of 16 channels a tap, cost
   4-8% of the kernel inside EfficientNet-B0 and MobileNetV3-Small,
   1152x7x7 5x5 + SiLU 331 -> 305 us for three layers);
3. each output pixel is ``KH*KW`` whole-vector multiply-adds in the
   direct convolution's tap order (the sums of the other schedules),
   ``UNROLL`` pixels of a row side by side;
4. back to NCHW: the pieces apart, then each group de-interleaved.

The epilogue (bias, activation) reads the output in place. The two layout
changes are the price, which only a window of many taps over a narrow
image repays: taken for windows of at least 25 taps whose output rows are
at most half a vector (EfficientNet's and MobileNetV3's 5x5 over 7x7
outputs, stride 1 or 2). Measured one layer at a time against the row
schedules (bench/bench_depthwise.py, bench/README.md): 5x5 over 7x7
outputs 1152 ch 149 -> 107 us, 576 ch 61 -> 40 us, 672x14x14 stride 2
99 -> 88 us; 3x3 over 7x7 a tie (960 ch 39.5 against 39.6 us: 27.6
against 36 vector products a channel, the transposes eat the rest); rows
of 14 lost at either window (384x14x14 3x3 41 -> 53 us, 240x14x14 5x5
50 -> 53 us). A channel count that is not a multiple of ``L``: the last
block reads its last channel again in the lanes past the end and writes
only its own channels.
"""

from __future__ import annotations

from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, IfThenElse, PrimExpr, Stmt, Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["schedule", "takes", "MIN_TAPS", "UNROLL"]

#: the fewest taps of a window the schedule takes (5x5; 3x3 was slower)
MIN_TAPS = 25
#: output pixels of a row computed side by side (1 and 2 measured the same;
#: 4 spilled a 5x5 window's weights, 1152 ch 7x7 75 -> 83-88 us)
UNROLL = 2


def takes(w: ConvWorkload) -> bool:
    """Whether the schedule takes ``w``: a depthwise NCHW float conv2d of
    static shape with at least a vector of channels, a window of at least
    :data:`MIN_TAPS` taps and output rows of at most half a vector, its
    padding inside the window's reach (see the module docstring)."""
    dims = _dims(w)
    if dims is None:
        return False
    n, c, H, W, KH, KW, OH, OW = dims
    lanes = w.lanes
    (sh, sw), (dh, dw) = w.strides, w.dilation
    top, left = w.padding[0], w.padding[1]
    reach_y, reach_x = (KH - 1) * dh + 1, (KW - 1) * dw + 1
    return (c >= lanes and lanes % 4 == 0 and KH * KW >= MIN_TAPS and 2 * OW <= lanes
            and top < reach_y and left < reach_x
            and (OH - 1) * sh + reach_y > top and (OW - 1) * sw + reach_x > left)


def _dims(w: ConvWorkload) -> tuple[int, ...] | None:
    if (w.dtype not in ("float32", "float64") or w.data.dtype != w.dtype
            or w.weight.dtype != w.dtype):
        return None
    return w.depthwise_dims()


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` with channels in the lanes, or None
    unless :func:`takes` holds."""
    if not takes(w):
        return None
    n, c, H, W, KH, KW, OH, OW = _dims(w)
    (sh, sw), (dh, dw), dt = w.strides, w.dilation, w.dtype
    top, left = w.padding[0], w.padding[1]
    L = w.lanes
    blocks = -(-c // L)
    # the padded input the outputs read: rows and columns from the top-left pad
    Hp, Wp = (OH - 1) * sh + (KH - 1) * dh + 1, (OW - 1) * sw + (KW - 1) * dw + 1
    rows_in, cols_in = min(H, Hp - top), min(W, Wp - left)
    zero = te.const(0, dt)

    G = L // 4  # groups of four channels in a vector

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x, weight = bufs
        b, cb, g = Var("b", "int64"), Var("cb", "int64"), Var("g", "int64")
        y, xx, lane, m, p = (Var(v, "int64") for v in ("y", "x", "l", "m", "p"))
        tin = Buffer("dw_lanes_in", (i64(Hp * Wp * L),), dt)
        T = KH * KW
        quad = Buffer("dw_lanes_quads", (i64(G * max(H * W, OH * OW, T) * 4),), dt)
        wl = Buffer("dw_lanes_w", (i64(KH * KW * L),), dt)
        tout = Buffer("dw_lanes_out", (i64(OH * OW * L),), dt)

        def clamp(ch: PrimExpr) -> PrimExpr:
            return te.minimum(ch, i64(c - 1)) if c % L else ch

        def zero_rows(y0: int, y1: int) -> list[Stmt]:
            if y1 <= y0:
                return []
            return [For(p, i64(y0 * Wp * L), i64((y1 - y0) * Wp * L), "vectorized",
                        BufferStore(tin, zero, (p,)))]

        def zero_cols(x0: int, x1: int) -> list[Stmt]:
            if x1 <= x0:
                return []
            return [For(p, i64(0), i64((x1 - x0) * L), "vectorized",
                        BufferStore(tin, zero, (((y + top) * Wp + x0) * L + p,)))]
        # 1. the input to pixel-major: each group of four channels
        # interleaved over the whole plane (LLVM's shuffles for a group of
        # four stores), then per padded row the groups' pieces side by side
        q = Var("q", "int64")
        interleave = For(g, i64(0), i64(G), "serial", For(
            q, i64(0), i64(H * W), "vectorized", seq([
                BufferStore(quad, x[(b, clamp(cb * L + g * 4 + k), q // W, q % W)],
                            ((g * H * W + q) * 4 + k,)) for k in range(4)])))
        pieces = For(xx, i64(0), i64(cols_in), "serial", For(g, i64(0), i64(G), "serial", For(
            m, i64(0), i64(4), "vectorized",
            BufferStore(tin, BufferLoad(quad, ((g * H * W + y * W + xx) * 4 + m,)),
                        (((y + top) * Wp + xx + left) * L + g * 4 + m,)))))
        row = seq([*zero_cols(0, left), pieces, *zero_cols(left + cols_in, Wp)])
        stmts: list[Stmt] = [interleave, *zero_rows(0, top),
                             For(y, i64(0), i64(rows_in), "serial", row),
                             *zero_rows(top + rows_in, Hp)]
        # 2. the weights, the same two steps over the window's taps (a loop
        # over the lanes, each tap's 16 channels, was a gather a tap)
        t = Var("t", "int64")
        stmts.append(For(g, i64(0), i64(G), "serial", For(t, i64(0), i64(T), "vectorized", seq([
            BufferStore(quad, weight[(clamp(cb * L + g * 4 + k), i64(0), t // KW, t % KW)],
                        ((g * T + t) * 4 + k,)) for k in range(4)]))))
        stmts.append(For(t, i64(0), i64(T), "serial", For(g, i64(0), i64(G), "serial", For(
            m, i64(0), i64(4), "vectorized",
            BufferStore(wl, BufferLoad(quad, ((g * T + t) * 4 + m,)), (t * L + g * 4 + m,))))))
        # 3. the sums
        oy, ox = Var("oy", "int64"), Var("ox", "int64")

        def pixels(first: PrimExpr, count: int) -> Stmt:
            """Outputs ``first .. first + count - 1`` of row ``oy``: one
            accumulator each, their sums side by side (independent chains
            of multiply-adds in flight together)."""
            stores = []
            for u in range(count):
                acc: PrimExpr | None = None
                for k0 in range(KH):      # the direct convolution's tap order
                    for k1 in range(KW):
                        at = ((oy * sh + k0 * dh) * Wp + (first + u) * sw + k1 * dw) * L + lane
                        term = (BufferLoad(tin, (at,))
                                * BufferLoad(wl, (i64((k0 * KW + k1) * L) + lane,)))
                        acc = term if acc is None else acc + term
                stores.append(BufferStore(tout, acc, ((oy * OW + first + u) * L + lane,)))
            return For(lane, i64(0), i64(L), "vectorized", seq(stores))
        U = UNROLL
        row_stmts = []
        if OW // U:
            row_stmts.append(For(ox, i64(0), i64(OW // U), "serial", pixels(ox * U, U)))
        if OW % U:
            row_stmts.append(pixels(i64(OW - OW % U), OW % U))
        stmts.append(For(oy, i64(0), i64(OH), "serial", seq(row_stmts)))
        # 4. back to NCHW: the groups' pieces apart, then each group's four
        # channels de-interleaved
        P = OH * OW
        stmts.append(For(p, i64(0), i64(P), "serial", For(g, i64(0), i64(G), "serial", For(
            m, i64(0), i64(4), "vectorized",
            BufferStore(quad, BufferLoad(tout, (p * L + g * 4 + m,)), ((g * P + p) * 4 + m,))))))
        whole = i64(G) if c % L == 0 else te.minimum(i64(G), (i64(c) - cb * L) // 4)
        stmts.append(For(g, i64(0), whole, "serial", For(p, i64(0), i64(P), "vectorized", seq([
            BufferStore(out, BufferLoad(quad, ((g * P + p) * 4 + k,)), (b, cb * L + g * 4 + k, p))
            for k in range(4)]))))
        if c % 4:  # the last block's last channels, one at a time
            g_last, first = (c % L) // 4, c - c % 4
            stmts.append(IfThenElse(te.eq(cb, i64(blocks - 1)), For(
                m, i64(0), i64(c % 4), "serial", For(p, i64(0), i64(P), "vectorized", BufferStore(
                    out, BufferLoad(quad, ((i64(g_last) * P + p) * 4 + m,)),
                    (b, i64(first) + m, p))))))
        work = n * c * (Hp * Wp + OH * OW * KH * KW)
        par = blocks > 1 and work >= tuning.host_tuning().parallel_min_work
        body = Allocate(tin, Allocate(quad, Allocate(wl, Allocate(tout, seq(stmts)))))
        return For(b, i64(0), i64(n), "serial",
                   For(cb, i64(0), i64(blocks), "parallel" if par else "serial", body))
    flat = te.extern((i64(n), i64(c), i64(OH * OW)), dt, [w.data, w.weight], build,
                     name="T_conv2d_lanes")
    return te.compute(w.out_shape, lambda bb, cc, yy, xq: flat[bb, cc, yy * OW + xq],
                      name="T_conv2d")
