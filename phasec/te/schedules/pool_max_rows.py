"""A 2-D max pooling with a stride of 1 to 3 along its rows (SqueezeNet's
13x13 and MobileNet-style 7x7 downsampling, ResNet's 112x112 stem, VGG's
2x2, Inception's 3x3/1 pad 1): the max over the window's rows first, along
whole input rows, then over its columns.

Vectorized along an output row of 7 or 13, every tap is a strided load of
a fraction of a vector. The max is separable instead: per channel, output
row ``oy``'s window rows are reduced first, ``v[oy, j] = max over r0 of
x[oy*sh - top + r0*dh, j]`` for every input column ``j``: contiguous loads
along whole input rows, one vector loop per output row. Then ``out[oy, ox]
= max over r1 of v[oy, ox*sw + r1*dw]`` (``v``'s columns counted from the
left padding): the strided picking happens once per output row, not once
per tap of every input row (splitting the input into its stride phases
first, the last schedule here, spent most of its time de-interleaving).
Rows of the window in the top or bottom padding are left out of the first
max (the window is static); ``v``'s columns in the left and right padding
hold the max's identity. Input rows narrower than a vector, or short
enough for LLVM to unroll a loop over one whole, get the first max as one
loop over the rows laid end to end (:func:`_flat`); output rows of a
vector or more go in blocks of rows whose columns take one flat loop
(:mod:`.pool_max_blocks`, at a stride of 1 or 2), or one output row at a
time, both maxes through a buffer of one row (:func:`_row_by_row`, at a
stride of 3); ``v`` of every output row is left for the rest (narrow
input rows too few for a long loop). A stride of 1 keeping
the input's width (Inception's 3x3/1 pad 1) takes the laid-end-to-end
rows' columns flat too (:meth:`pool_window.RowsFirst.flat_margins`).

The whole pooling is one hand-written nest (``te.extern``) per channel; ``v``
is a buffer of one channel (in L1). Both maxes are
:func:`pool_window.nan_propagating_max`: the CPU's max in a balanced tree
plus unordered compares for the NaN, about two instructions a tap where
``te.max``'s (LLVM's ``maximum``) costs six. A zero maximum of a window
holding both -0 and +0 may be either zero. Measurements: bench/README.md,
"The long tail of issue 29: pools, small convolutions, GEMV".
"""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import Allocate, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import (
    RowsFirst, max_pool_row, nan_propagating_max, static_sizes,
)
from phasec.te.stmt import kept_loop, seq
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["takes", "schedule"]


def takes(w: PoolWorkload) -> bool:
    """A float 2-D max pooling in NCHW of static shape, a stride of at most
    3 along its rows (stride 1 too: rows first beat ``te.fast_max`` over the
    padded copy, 3x3/1 pad 1 480x14x14 101 -> 40 us, 64x56x56 149 -> 89 us,
    1024x7x7 64 -> 44 us, one thread, best of 15 interleaved rounds)."""
    if (w.kind != "max" or w.rank != 2 or not w.canonical
            or not w.data.dtype.startswith("float")
            or not 1 <= w.strides[1] <= 3):
        return False
    return all(arith.const_int(d) is not None for d in (*w.data.shape, *w.out_shape))


def schedule(w: PoolWorkload) -> Tensor | None:
    """The max pooling ``w``, rows then columns, or None when it is not taken."""
    if not takes(w):
        return None
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    # v's columns: the left padding, the input, then up to the last window's
    # reach, rounded up to whole vectors (rows aligned alike: one set of
    # shuffles for all of them; 256x27x27: 33 -> 31 us, 576x14x14 pad 1: 41 -> 30 us)
    lanes = tuning.host_tuning().lanes(int(dt[5:]))
    pitch = -(-max(left + W, (OW - 1) * sw + (KW - 1) * dw + 1) // lanes) * lanes
    lowest = te.min_value(dt)

    inside = RowsFirst.of(w)  # output rows whose window rows all lie inside the input
    first, stop = inside.first, inside.stop

    if OW >= lanes:  # (strides 1 and 2: pool_max_blocks, a row of the table before this)
        return _row_by_row(w, first, stop, pitch)
    # Input rows narrower than a vector; or a loop over an input row that
    # LLVM would unroll whole (its unrolled body under ~300 instructions,
    # about 3 per window row and 3 more per column), whose loop over the
    # output rows it would then vectorize through gathers and scatters
    # (64x28x28 2x2/2: 40.8 us, 8.5 laid end to end). Laid end to end
    # only with enough rows for a long loop (a short one, unrolled, left
    # the loop over the channels to the vectorizer: 96x8x8 pad 1 4.5 -> 9.2 us).
    # With its columns flat too (RowsFirst.flat_margins) a shorter loop pays:
    # 1024x7x7 pad 1 (35 elements) 83 -> 40 us, 256x11x11 18 -> 11, but not
    # over whole vectors, which LLVM unrolled into the channel loop's
    # gathers (1024x8x8: 25 -> 64 us), nor under two (256x5x5: 5 -> 7 us).
    loop = ((stop - 1 - first) * sh + 1) * W
    if ((W < lanes or W * (3 * KH + 3) <= 300)
            and (loop >= 8 * lanes or (inside.flat_margins(w) is not None
                                       and loop >= 2 * lanes and loop % lanes))):
        return _flat(w, first, stop)

    # Rows of sw*OW columns, when the input fits: output (q, ox)'s taps are
    # v[sw*(q*OW + ox) + r1*dw], so every row's columns take one flat loop
    # over the outputs (whole vectors, not rows of OW), after which the
    # columns whose windows reach past the row (into the next) are
    # recomputed over the taps in it
    flat = sw * OW >= left + W
    pitch = sw * OW if flat else pitch
    reach = [ox for ox in range(OW) if ox * sw + (KW - 1) * dw >= pitch] if flat else []
    tail = max(0, (KW - 1) * dw - sw + 1) if flat else 0  # read past the last row

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        v = Buffer(w.name + "_rows", (i64(OH * pitch + tail),), dt)

        def rows_max(oy: PrimExpr, rows: list[PrimExpr]) -> Stmt:
            j = Var("j", "int64")
            at = oy * pitch + left + j
            if not rows:  # a window wholly in the padding (ceil_mode's last may be)
                return For(j, i64(0), i64(W), "vectorized", BufferStore(v, lowest, (at,)))
            return For(j, i64(0), i64(W), "vectorized", nan_propagating_max(
                [BufferLoad(x, (b, ch, y, j)) for y in rows], dt,
                lambda value: BufferStore(v, value, (at,))))
        y = Var("oy", "int64")
        stmts: list[Stmt] = [rows_max(i64(oy), [
            i64(r) for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H])
            for oy in range(first)]
        if stop > first:
            stmts.append(For(y, i64(first), i64(stop - first), "serial", rows_max(
                y, [y * sh + (r0 * dh - top) for r0 in range(KH)])))
        stmts += [rows_max(i64(oy), [
            i64(r) for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H])
            for oy in range(stop, OH)]
        # the padding columns some tap reads (the flat loop's taps past a row
        # read the next row's first columns): the others are never read, and
        # their stores, unrolled, were most of LICM's time and the kernel's
        # (256x27x27 3x3/2, none read: 74 -> 47 ms of LLVM; 480x28x28 pad 1,
        # one of four read: 138 -> 66 ms)
        read = {(ox * sw + r1 * dw) % pitch for ox in range(OW) for r1 in range(KW)}
        pads = [col for col in (*range(left), *range(left + W, pitch)) if col in read]
        if pads:
            p = Var("p", "int64")
            stmts.append(For(p, i64(0), i64(OH), "serial", seq(
                [BufferStore(v, lowest, (p * pitch + col,)) for col in pads])))
        # one loop over the rows, one shape of row: one set of shuffles (the
        # rows unrolled, or the columns, made LLVM keep dozens of them live)
        q, ox = Var("q", "int64"), Var("ox", "int64")
        if flat:
            g = Var("g", "int64")
            stmts += [BufferStore(v, lowest, (i64(OH * pitch + k),)) for k in range(tail)]
            stmts.append(For(g, i64(0), i64(OH * OW), "vectorized", nan_propagating_max(
                [BufferLoad(v, (g * sw + r1 * dw,)) for r1 in range(KW)], dt,
                lambda value: BufferStore(out, value, (b, ch, g // i64(OW), g % i64(OW))))))
            if reach:
                stmts.append(For(q, i64(0), i64(OH), "serial", seq([nan_propagating_max(
                    [BufferLoad(v, (q * pitch + col * sw + r1 * dw,)) for r1 in range(KW)
                     if col * sw + r1 * dw < pitch], dt,
                    lambda value, col=col: BufferStore(out, value, (b, ch, q, i64(col))))
                    for col in reach])))
        else:
            # kept a loop: LLVM unrolled it and vectorized every row again
            # (256x27x27 3x3/2, 13 rows: 204 -> 72 ms of LLVM, ~1% of the
            # pool's 31 us; keeping the rows' maxima loop too cost more LLVM)
            stmts.append(kept_loop(For(q, i64(0), i64(OH), "serial", For(
                ox, i64(0), i64(OW), "vectorized", nan_propagating_max(
                    [BufferLoad(v, (q * pitch + ox * sw + r1 * dw,)) for r1 in range(KW)], dt,
                    lambda value: BufferStore(out, value, (b, ch, q, ox)))))))
        work = n * c * (OH * (W * KH + pitch) + OH * OW * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial", Allocate(v, seq(stmts))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)


def _flat(w: PoolWorkload, first: int, stop: int) -> Tensor:
    """The max pooling ``w`` of input rows narrower than a vector: the max
    over the window rows of output rows ``first..stop`` (wholly inside the
    input) as one loop over the channel's rows laid end to end, ``u[f] = max
    over r0 of x_flat[f + (y0 + r0*dh)*W]`` (whole vectors, where a loop
    per row was a quarter-vector loop and a scalar tail: 576x14x14 pad 1
    29.5 -> 26.5 us), every row from the first window's top to the last's, the
    rows between the windows' tops computed too; the other output rows one
    loop each. Then the columns' max per output row from those rows, the
    outputs whose windows reach into the left or right padding one by one
    over the taps inside; or, by :meth:`RowsFirst.flat_margins`, all inner
    rows' columns in one flat loop (576x14x14 pad 1 86 -> 44 us), the edge
    columns recomputed after it."""
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    lowest = te.min_value(dt)
    inside = RowsFirst.of(w)
    y0, span, border, lo, hi = inside.y0, inside.span, inside.border, inside.lo, inside.hi
    # the inner rows' columns in one flat loop (RowsFirst.flat_margins)
    margins = inside.flat_margins(w)
    margin_lo, margin_hi = margins or (0, 0)

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        u = Buffer(w.name + "_rows", (i64(margin_lo + span * W + margin_hi),), dt)
        vb = Buffer(w.name + "_edge_rows", (i64(max(1, len(border)) * W),), dt)

        def flat(g: PrimExpr) -> PrimExpr:
            return BufferLoad(x, (b, ch, g // i64(W), g % i64(W)))
        f = Var("f", "int64")
        stmts: list[Stmt] = [For(f, i64(0), i64(span * W), "vectorized", nan_propagating_max(
            [flat(f + i64((y0 + r0 * dh) * W)) for r0 in range(KH)], dt,
            lambda value: BufferStore(u, value, (f + i64(margin_lo) if margin_lo else f,))))]
        stmts += [BufferStore(u, lowest, (i64(k),)) for k in (
            *range(margin_lo), *range(margin_lo + span * W, margin_lo + span * W + margin_hi))]
        for k, oy in enumerate(border):
            rows = [r for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H]
            j = Var("j", "int64")
            stmts.append(For(j, i64(0), i64(W), "vectorized", nan_propagating_max(
                [BufferLoad(x, (b, ch, i64(r), j)) for r in rows], dt,
                lambda value, j=j, k=k: BufferStore(vb, value, (i64(k * W) + j,))))
                if rows else For(j, i64(0), i64(W), "vectorized",
                                 BufferStore(vb, lowest, (i64(k * W) + j,))))

        def columns(src: Buffer, base: PrimExpr, oy: PrimExpr,
                    inner: bool = True) -> list[Stmt]:
            ox = Var("ox", "int64")
            row: list[Stmt] = []
            if inner and hi > lo:
                row.append(For(ox, i64(0), i64(hi - lo), "vectorized", nan_propagating_max(
                    [BufferLoad(src, (base + (ox + lo) * sw + (r1 * dw - left),))
                     for r1 in range(KW)], dt,
                    lambda value: BufferStore(out, value, (b, ch, oy, ox + lo)))))
            for col in (*range(lo), *range(hi, OW)):
                taps = [t for t in (col * sw - left + r1 * dw for r1 in range(KW)) if 0 <= t < W]

                def store(value: PrimExpr, col: int = col) -> Stmt:
                    return BufferStore(out, value, (b, ch, oy, i64(col)))
                row.append(nan_propagating_max([BufferLoad(src, (base + t,)) for t in taps],
                                               dt, store) if taps else store(lowest))
            return row
        q = Var("q", "int64")
        if margins:
            g = Var("g", "int64")
            o = g + i64(first * W)
            stmts.append(For(g, i64(0), i64((stop - first) * W), "vectorized", nan_propagating_max(
                [BufferLoad(u, (g + i64(r1 * dw),)) for r1 in range(KW)], dt,
                lambda value: BufferStore(out, value, (b, ch, o // i64(W), o % i64(W))))))
            stmts.append(For(q, i64(0), i64(stop - first), "serial", seq(
                columns(u, q * i64(W) + i64(margin_lo), q + first, False))))
        else:
            stmts.append(For(q, i64(0), i64(stop - first), "serial",
                             seq(columns(u, q * (sh * W), q + first))))
        for k, oy in enumerate(border):
            stmts += columns(vb, i64(k * W), i64(oy))
        work = n * c * (span * W * KH + OH * OW * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(u, Allocate(vb, seq(stmts)))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)


def _row_by_row(w: PoolWorkload, first: int, stop: int, pitch: int) -> Tensor:
    """The max pooling ``w`` of output rows of a vector or more at a stride
    of 3 (:mod:`.pool_max_blocks` takes strides 1 and 2), one output row at
    a time: its rows' max into a buffer of one row, then at
    once its columns' max from it (a buffer of every output row, as for the
    narrow rows, left L1 on 112-wide inputs: 64x112x112 2x2/2 89 -> 55 us,
    3x3/2 pad 1 141 -> 108 us; output rows narrower than a vector keep the
    buffer of every output row: 256x27x27 3x3/2 30 us against 42, 320x28x28
    3x3/2 end padding 1 49 against 63). Output rows ``first..stop`` have
    every window row inside the input; ``pitch`` is the row buffer's length."""
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, _), (dh, _), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    lowest = te.min_value(dt)

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        # one row: written by the rows' max, read at once by the columns' max
        # (a buffer of every output row left L1 on 112-wide inputs)
        v = Buffer(w.name + "_rows", (i64(pitch),), dt)

        def one_row(oy: PrimExpr, rows: list[PrimExpr]) -> list[Stmt]:
            return max_pool_row(w, rows, v, lambda y, j: BufferLoad(x, (b, ch, y, j)),
                                lambda ox, value: BufferStore(out, value, (b, ch, oy, ox)))

        def edge(oy: int) -> list[Stmt]:
            return one_row(i64(oy), [i64(r) for r in (oy * sh - top + r0 * dh
                                                      for r0 in range(KH)) if 0 <= r < H])
        # the padding columns, once: the rows' max never writes them
        stmts: list[Stmt] = [BufferStore(v, lowest, (i64(col),))
                             for col in (*range(left), *range(left + W, pitch))]
        for oy in range(first):
            stmts += edge(oy)
        if stop > first:
            # one loop over the rows, one shape of row: one set of shuffles
            # (the rows unrolled made LLVM keep dozens of them live)
            y = Var("oy", "int64")
            stmts.append(For(y, i64(first), i64(stop - first), "serial", seq(one_row(
                y, [y * sh + (r0 * dh - top) for r0 in range(KH)]))))
        for oy in range(stop, OH):
            stmts += edge(oy)
        work = n * c * (OH * (W * KH + pitch) + OH * OW * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial", Allocate(v, seq(stmts))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)
