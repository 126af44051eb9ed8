"""A stride-1 depthwise NCHW conv2d whose output rows are one or two
vectors, not whole ones (3x3 and 5x5 over 14x14 and 28x28 at 16 lanes),
several output rows summed together from one padded plane.

The flat form (:mod:`conv_depthwise_strided`, one phase) summed each
vector of the padded plane's flat positions over its 25 taps: 25 loads, 25
FMAs a vector, nearly every load across two cache lines, and a quarter of
the lanes spent on the padding columns between rows (14 rows of 18 in
sixteen vectors). Here each output row is one vector, or two (``nv *
lanes`` columns, the ``OW`` first kept), and :func:`block_rows` output rows
are summed in one loop body: each plane row vector a tap column reads
(``plane[(y + d)*P + v*lanes + r1*dw + j]``) is loaded once and feeds every
output row of the block whose window holds it. Over 14x14 a 5x5 block of
5 rows loads 9 x 5 vectors for its 125 FMAs (25 a row before), and a row
computes 16 lanes for 14 kept (14 vectors a channel instead of 16); over
28x28, two rows of two vectors load 6 x 2 x 5 for 100 FMAs.

Per channel, the input is copied into a zero-padded plane (``P = nv*lanes
+ (KW - 1)*dw`` columns, the input's column ``c`` at ``c + left``), one
vector store a row's vector: each read flat from the channel's plane
(``x[(iy*W + v*lanes + j - a) // W, ... % W]``, the unsigned pair,
contiguous), the lanes outside the row's columns selected to zero; ``a``
(0, or the few columns the plane's last vectors are shifted left by, over
the left padding or the vector before) keeps every read inside the input,
and a row that no shift keeps inside is copied column by column.
The plane's zeros (the padding rows, the columns no row's store reaches)
are stored once for a block of channels, whose copies rewrite only the
same vectors; two planes, each channel copied into one before the channel
before it is summed from the other. The sums go to a plane of rows (in the
cache), then the epilogue (bias, activation) stores the ``OW`` kept columns
of each through ``store_through`` (a row of 14 in one masked store, of 28
in two vectors, the second overlapping the first). Each output is the same
sum of the same products, in the direct convolution's tap order, as the
padded convolution's.
"""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, For, LetStmt, PrimExpr, Select, Stmt,
    Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64, row_col
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["schedule", "takes", "block_rows", "MAX_ROWS", "MAX_VECTORS", "MIN_TAPS",
           "MIN_REGISTERS", "CHANNEL_BLOCK"]

#: the most output rows summed in one loop body (see block_rows)
MAX_ROWS = 5
#: the most vectors of an output row this form takes (28 columns at 16
#: lanes: 192x28x28 3x3 + ReLU6 66 -> 52 us, 240x28x28 5x5 + SiLU 232 ->
#: 195-202; four vectors lost, 144x56x56 3x3 158-164 -> 176 us, and seven,
#: 32x112x112 142-157 -> 182-193 us)
MAX_VECTORS = 2
#: the fewest taps of a window this form takes (3x3)
MIN_TAPS = 9
#: the fewest vector registers of a host this form is taken on (measured
#: on AVX-512 only)
MIN_REGISTERS = 32
#: channels at most that share one plane's zeros (stored once for them)
CHANNEL_BLOCK = 16


def block_rows(taps: int, registers: int, vectors: int = 1) -> int:
    """The output rows summed in one loop body under a window of ``taps``
    taps with ``registers`` vector registers, output rows of ``vectors``
    vectors: as many rows of accumulators as the registers hold beside the
    window's weights and two loaded vectors (5 for a 5x5 at 32 registers,
    2 over rows of two vectors), at most :data:`MAX_ROWS`. Over 14x14 5x5,
    at 16 lanes on Zen 4 (one thread, us, 240x14x14 + hardswish / 480x14x14
    + SiLU / 672x14x14 + ReLU, one plane): 2 rows 39 / 102 / 102, 3 rows 50
    / 124, 4 rows 48 / 120 / 126, 5 rows 37 / 105 / 93, 6 rows 42 / 108 /
    108-113, 7 rows 40 / 111 / 113 (the weights spilled), 14 rows 50 / 141;
    3x3 (384x14x14 + ReLU6 / 480x14x14 + SiLU / 576x14x14 + ReLU6, two
    planes): 5 rows 25.5-25.9 / 64-65 / 38, 7 rows 26.3 / 64-65 / 39-40, 8
    rows 27-27.5 / 64 / 40, 14 rows 29-30 / 73 / 43-44."""
    return min(MAX_ROWS, (registers - taps - 2) // vectors)


def takes(OW: int, taps: int, lanes: int, registers: int) -> bool:
    """Whether the blocked rows take a stride-1 depthwise convolution whose
    output rows are ``OW`` wide (more than half a vector, not whole vectors,
    at most :data:`MAX_VECTORS` of them with no more than a quarter of their
    lanes wasted: 14 or 28 at 16 lanes) and whose window has ``taps`` taps
    (9 or more, and few enough that two rows' accumulators fit in the
    ``registers`` beside its weights), on a host of at least
    :data:`MIN_REGISTERS` vector registers (AVX-512: the 3x3 and 5x5
    measured there; 16-register hosts were not)."""
    nv = -(-OW // lanes)
    return lanes < 2 * OW and OW % lanes != 0 and nv <= MAX_VECTORS \
        and (nv == 1 or nv * lanes * 4 <= OW * 5) and taps >= MIN_TAPS \
        and registers >= MIN_REGISTERS and block_rows(taps, registers, nv) >= 2


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float32 conv2d, stride 1) as
    blocked rows over a padded plane (see the module docstring); None
    unless it is depthwise with static sizes and :func:`takes` it (and
    its left padding is no wider than the window's reach)."""
    dims = w.depthwise_dims()
    if dims is None or tuple(w.strides) != (1, 1) or w.data.dtype != "float32":
        return None
    n, c, H, W, KH, KW, OH, OW = dims
    lanes, registers = tuning.host_tuning().lanes(32), tuning.host_tuning().vector_registers
    dw, left = w.dilation[1], w.padding[1]
    if not takes(OW, KH * KW, lanes, registers) or OH < 1 or left > (KW - 1) * dw:
        return None
    return _blocked(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)


def _row_shift(iy: int, v: int, H: int, W: int, lanes: int, left: int, P: int
               ) -> int | None:
    """The columns ``a`` vector ``v`` of input row ``iy`` is shifted left by
    so that its flat read ``[iy*W + v*lanes - a, ... + lanes)`` stays inside
    the input plane and its store inside the plane's row of ``P`` columns
    (it then starts ``a`` columns left of its place: in the left padding, or
    over the vector before, with the same values); None when no shift does."""
    start = iy * W + v * lanes
    a = max(0, start + lanes - H * W, left + v * lanes + lanes - P)
    return a if a <= left + v * lanes and a <= start else None


def _blocked(w: ConvWorkload, n: int, c: int, hw: tuple[int, int], out_hw: tuple[int, int],
             window: tuple[int, int], lanes: int) -> Tensor:
    (dh, dw), dt = w.dilation, w.data.dtype
    H, W = hw
    OH, OW = out_hw
    KH, KW = window
    top, left = w.padding[0], w.padding[1]
    nv = -(-OW // lanes)                           # vectors a row
    rows = block_rows(KH * KW, tuning.host_tuning().vector_registers, nv)
    RL = nv * lanes                                # a row's pitch in the sums
    P = RL + (KW - 1) * dw                         # a plane row's columns
    PH = OH + (KH - 1) * dh                        # the plane's rows
    cols = min(W, P - left)                        # input columns any output reads
    rows_in = max(0, min(H, PH - top))             # input rows any output reads
    size = -(-PH * P // lanes) * lanes             # whole vectors (the zeros' loop)
    nc = -(-cols // lanes)                         # vectors a row's copy
    shifts = [[_row_shift(iy, v, H, W, lanes, left, P) for v in range(nc)]
              for iy in range(rows_in)]
    plain = 0                                      # rows read unshifted, from the first
    while plain < rows_in and all(a == 0 for a in shifts[plain]):
        plain += 1

    def keeps(v: int, a: int) -> list[bool]:
        # the lanes of vector v shifted a holding one of the row's columns
        return [0 <= v * lanes - a + lane < cols for lane in range(lanes)]
    # the vectors holding lanes outside the row: a mask slot each
    masks = {va: slot for slot, va in enumerate(sorted(
        {(v, a) for row in shifts for v, a in enumerate(row)
         if a is not None and not all(keeps(v, a))}))}
    zero = te.const(0, dt)
    B = max(d for d in range(1, min(c, CHANNEL_BLOCK) + 1) if c % d == 0)
    planes = 2 if B > 1 else 1                     # a channel copied ahead (see build)

    def build(bufs: list[Buffer], out: Buffer,
              store: Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt] | None = None) -> Stmt:
        x, weight = bufs
        b, blk, k = Var("b", "int64"), Var("blk", "int64"), Var("k", "int64")
        ch = blk * B + k
        plane = Buffer("padded_plane", (i64(planes * size),), dt)
        sums = Buffer("row_sums", (i64(OH * RL),), dt)
        mask = Buffer("lane_mask", (i64(max(1, len(masks)) * lanes),), dt)

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)

        def copy_row(iy: PrimExpr, v: int, a: int, ch: PrimExpr, base: PrimExpr) -> Stmt:
            # vector v of input row iy into plane row iy + top, shifted a
            # columns left, the lanes outside the row's columns zero (a
            # select on the lanes' mask, a float compare: a vector select)
            j = Var("j", "int64")
            off = v * lanes - a                    # its first column in the row
            borrow = -(-max(0, -off) // W)
            row, col = row_col(j + i64(borrow * W + off), W)
            value: PrimExpr = BufferLoad(x, (b, ch, iy - borrow + row, col))
            where = (base + (iy + top) * P + (left + off) + j,)
            if (v, a) in masks:
                t = Var("t", dt)
                m = BufferLoad(mask, (i64(masks[(v, a)] * lanes) + j,))
                body: Stmt = LetStmt(t, value, BufferStore(
                    plane, Select(BinaryOp("!=", m, zero), t, zero), where))
            else:
                body = BufferStore(plane, value, where)
            return For(j, i64(0), i64(lanes), "vectorized", body)

        def copy_columns(iy: int, ch: PrimExpr, base: PrimExpr) -> Stmt:
            # a row no shifted vector reads inside the input: column by column
            q = Var("q", "int64")
            return For(q, i64(0), i64(cols), "serial", BufferStore(
                plane, BufferLoad(x, (b, ch, i64(iy), q)),
                (base + i64((iy + top) * P + left) + q,)))

        def block(y0: PrimExpr, count: int, ch: PrimExpr, base: PrimExpr) -> Stmt:
            # output rows y0 .. y0 + count - 1, each plane row vector loaded once
            j = Var("j", "int64")
            lets: list[tuple[Var, PrimExpr]] = []
            vals: dict[tuple[int, int, int], Var] = {}
            for d in sorted({t + r0 * dh for t in range(count) for r0 in range(KH)}):
                for v in range(nv):
                    for r1 in range(KW):
                        vals[(d, v, r1)] = Var(f"v{d}_{v}_{r1}", dt)
                        lets.append((vals[(d, v, r1)], BufferLoad(
                            plane, (base + (y0 + d) * P + (v * lanes + r1 * dw) + j,))))
            stores: list[Stmt] = []
            for t in range(count):
                for v in range(nv):
                    acc: PrimExpr | None = None
                    for r0 in range(KH):         # the direct convolution's tap order
                        for r1 in range(KW):
                            term = vals[(t + r0 * dh, v, r1)] \
                                * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1)))
                            acc = term if acc is None else acc + term
                    assert acc is not None
                    stores.append(BufferStore(sums, acc, ((y0 + t) * RL + v * lanes + j,)))
            body: Stmt = seq(stores)
            for tv, value in reversed(lets):
                body = LetStmt(tv, value, body)
            return For(j, i64(0), i64(lanes), "vectorized", body)

        def copy(ch: PrimExpr, base: PrimExpr) -> list[Stmt]:
            iy = Var("iy", "int64")
            out = [For(iy, i64(0), i64(plain), "serial", seq([
                copy_row(iy, v, 0, ch, base) for v in range(nc)]))] if plain else []
            for r in range(plain, rows_in):
                if None in shifts[r]:
                    out.append(copy_columns(r, ch, base))
                else:
                    out += [copy_row(i64(r), v, a, ch, base) for v, a in enumerate(shifts[r])]
            return out

        def sum_rows(ch: PrimExpr, base: PrimExpr) -> list[Stmt]:
            yb, y, j = Var("yb", "int64"), Var("y", "int64"), Var("j", "int64")
            full = OH // rows
            out = [For(yb, i64(0), i64(full), "serial", block(yb * rows, rows, ch, base))] \
                if full else []
            if OH % rows:
                out.append(block(i64(full * rows), OH % rows, ch, base))
            # the epilogue over the channel's rows of sums: a row of part of
            # a vector in one loop (one masked store), else whole vectors,
            # the last overlapping the one before (the same values)
            starts = [0] if OW < lanes else \
                sorted({*range(0, OW - lanes + 1, lanes), OW - lanes})
            out.append(For(y, i64(0), i64(OH), "serial", seq([For(
                j, i64(0), i64(min(OW, lanes)), "vectorized",
                put(BufferLoad(sums, (y * RL + x0 + j,)), (b, ch, y, x0 + j)))
                for x0 in starts])))
            return out

        z, zj = Var("z", "int64"), Var("zj", "int64")
        if planes == 2:
            # channel k + 1 copied into the other plane before channel k's
            # sums: read right after its copy, a plane row's loads each
            # spanned a store still in flight, which the store buffer cannot
            # forward (480x14x14 5x5 + SiLU 106 -> 96 us, 672x14x14 + ReLU
            # 94 -> 92 us alone)
            slot = (k % 2) * size
            channels = [*copy(blk * B, i64(0)), For(k, i64(0), i64(B - 1), "serial", seq([
                *copy(ch + 1, ((k + 1) % 2) * size), *sum_rows(ch, slot)])),
                *sum_rows(blk * B + (B - 1), i64(((B - 1) % 2) * size))]
        else:
            channels = [For(k, i64(0), i64(B), "serial", seq([*copy(ch, i64(0)),
                                                              *sum_rows(ch, i64(0))]))]
        zeros = For(z, i64(0), i64(planes * size // lanes), "serial", For(
            zj, i64(0), i64(lanes), "vectorized", BufferStore(plane, zero, (z * lanes + zj,))))
        fills = [BufferStore(mask, te.const(1 if keep else 0, dt),
                             (i64(slot * lanes + lane),))
                 for va, slot in masks.items() for lane, keep in enumerate(keeps(*va))]
        work = n * c * OH * RL * KH * KW
        par = c > B and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            blk, i64(0), i64(c // B), "parallel" if par else "serial",
            Allocate(plane, Allocate(sums, Allocate(mask, seq([
                *fills, zeros, *channels]))))))
    return te.extern((i64(n), i64(c), i64(OH), i64(OW)), dt, [w.data, w.weight], build,
                     name="T_conv2d", store_through=build)
