"""A 2-D max pooling at a stride of 1 or 2 over rows of a vector or more
(ResNet-50's and DenseNet's 3x3/2 over 64x112x112, Inception v2's over
112x112 and 56x56, SqueezeNet's over 111x111 and 55x55, Inception v1's
3x3/1 over 27x27): the window's rows first for a block of output rows,
then every column of the block in one flat loop of whole vectors.

One output row at a time (:func:`.pool_max_rows._row_by_row`), a row of 56
outputs at stride 2 was six 8-lane vectors and eight scalars of a dozen
instructions each (LLVM's interleaved loads with a gap need a scalar
remainder), half the columns' time. Here the rows' maxima of ``B`` output
rows lie in one buffer ``v`` at a pitch of ``P = sw*OW``: input column
``c`` of block row ``i`` at ``v[M + i*P + c]``, so that tap ``r1`` of the
block's output ``g = i*OW + ox`` is ``v[M - left + g*sw + r1*dw]`` for
every ``g``. At stride 2, ``v`` is split once into its two stride phases
(``ph[s][k] = v[M + 2k + s]``: two whole loads and two shuffles per 16
outputs, no gap), after which each tap is a contiguous run of one phase;
at stride 1 the taps read ``v`` itself. All loops go in chunks of one whole
vector, the last overlapping the one before it (the same values written
twice): no scalar remainder. ``M`` and each phase's start are whole
vectors, and a row that starts inside a vector of ``v`` (``P`` not a
multiple of a vector) stores its first vector, then whole vectors of
``v``, so that the phases' loads are the rows' stores (a load across two
stores waits for both to reach the cache: 3x3/2 pad 1 over 16x112x112 27
-> 23 us; 32x55x55 16 -> 14 us). An output whose taps land in a neighbour's slot of ``v`` (``c
>= P``, or ``c < 0`` where the previous row's columns lie) is computed
from its row's maxima in ``v`` as soon as the row is there, before the
next row overwrites them (the loop's tree over what its taps would have
read: the same result, zeros' signs included), kept, and stored over the
flat loop's value after it. (Recomputed from the input after the flat
loop, the columns' maxima over the window rows first, these outputs were
15% of SqueezeNet's 128x55x55 pool, and the SLP vectorizer's work on them
a tenth of its LLVM time.) Slots' columns past the input
(``W <= c < P``) and everything before the first row hold the max's
identity, written once a channel. Output rows whose window rows all lie
inside the input go in blocks (one loop); the others, at the top and at
the bottom with the inner rows left over, as blocks of their own with
their window rows clipped. Both maxes are
:func:`.pool_window.nan_propagating_max`, as in :mod:`.pool_max_rows`.
Measurements: bench/README.md, "Strided max pools over wide rows".
"""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir.tir import Allocate, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules import pool_max_rows
from phasec.te.schedules.pool_window import RowsFirst, nan_propagating_max, static_sizes
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["block_rows", "take", "schedule"]


def block_rows(w: PoolWorkload, lanes: int) -> int:
    """How many output rows a block of ``w`` holds: two at least (one alone
    ran slower than row by row: 16x112x112 3x3/2 pad 1 37 against 30 us),
    about six vectors of outputs (16x112x112: 2 rows 23, 4 rows 26 us;
    32x56x56 3x3/2 end pad 1: 2 rows 22, 4 rows 16 us; 192x27x27 3x3/1
    pad 1: 2 rows 79, 4 rows 71 us against 113 one row at a time)."""
    return max(2, -(-6 * lanes // static_sizes(w)[5]))


def take(w: PoolWorkload) -> Tensor | None:
    """The max pooling ``w`` in blocks of rows, or None when it is not
    taken: one :func:`.pool_max_rows.takes` takes, at a stride of 1 or 2
    along its rows (at 3 the phases' three-way shuffles cost more than they
    saved: 16x100x100 3x3/3 13 -> 16 us), output rows of a vector or more."""
    if not pool_max_rows.takes(w) or w.strides[1] > 2:
        return None
    lanes = tuning.host_tuning().lanes(int(w.data.dtype[5:]))
    if static_sizes(w)[5] < lanes:
        return None
    return schedule(w, block_rows(w, lanes))


def _whole(count: int, lanes: int) -> int:
    return -(-count // lanes) * lanes


def schedule(w: PoolWorkload, rows: int) -> Tensor:
    """The max pooling ``w`` (one :func:`take` takes) in blocks of ``rows``
    output rows."""
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    lowest = te.min_value(dt)
    lanes = tuning.host_tuning().lanes(int(dt[5:]))
    inside = RowsFirst.of(w)
    P = sw * OW
    nb = (inside.stop - inside.first) // rows
    # consecutive output rows as blocks: the top border, the inner blocks
    # (one loop), the inner rows left over with the bottom border
    head = list(range(inside.first))
    rest = list(range(inside.first + nb * rows, OH))
    most = max(rows, len(head), len(rest))
    taps = [[ox * sw + r1 * dw - left for r1 in range(KW)] for ox in range(OW)]
    # taps landing in a neighbour's slot: the previous row's columns, or the next row's
    redo = [ox for ox in range(OW) if any((t < 0 and P + t < W) or t >= P for t in taps[ox])]
    # v's stride phases counted from its first input column (so that their
    # loads are the rows' stores, whole: a load across two stores waits for
    # both to reach the cache): tap r1 of output g reads phase s at g + k
    phase = [divmod(r1 * dw - left, sw) for r1 in range(KW)]  # (k, s) of each tap
    reach = max(k for k, _ in phase) + 1  # past the last output
    # the first input column and each phase's first element start whole
    # vectors (stores across two cache lines, and loads across them, cost
    # twice: 3x3/2 pad 1 over 16x112x112 27 -> 23 us)
    M = _whole(left, lanes)  # v's elements before the first row's first column
    lead = _whole(max(0, -min(k for k, _ in phase)), lanes)  # a phase's, before its first
    L = _whole(lead + most * OW + reach, lanes)  # a phase's length
    length = max(M + (most - 1) * P + W, sw * (most * OW + reach) + M)

    def window_rows(oy: PrimExpr | int) -> list[PrimExpr]:
        if isinstance(oy, int):
            return [i64(r) for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H]
        return [oy * sh + (r0 * dh - top) for r0 in range(KH)]

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        v = Buffer(w.name + "_rows", (i64(length),), dt)
        e = Buffer(w.name + "_edge", (i64(max(1, most * len(redo))),), dt)
        ph = Buffer(w.name + "_phases", (i64(sw * L),), dt)

        def rows_max(i: int, oy: PrimExpr | int) -> Stmt:
            found = window_rows(oy)

            def body(start: PrimExpr, g: Var, extent: int) -> Stmt:
                j = start + g
                at = i64(i * P + M) + j
                if not found:  # a window wholly in the padding (ceil_mode's last may be)
                    return For(g, i64(0), i64(extent), "vectorized",
                               BufferStore(v, lowest, (at,)))
                return For(g, i64(0), i64(extent), "vectorized", nan_propagating_max(
                    [BufferLoad(x, (b, ch, y, j)) for y in found], dt,
                    lambda value: BufferStore(v, value, (at,))))
            # a row starting inside a vector of v: its first vector, then
            # whole vectors of v (the phases' loads), the last overlapping
            shift = -(i * P + M) % lanes
            if not shift or W < shift + lanes:
                return seq(chunked(W, body))
            starts = [0, *range(shift, W - lanes + 1, lanes)]
            if starts[-1] + lanes < W:
                starts.append(W - lanes)
            return seq([body(i64(j), Var("g", "int64"), lanes) for j in starts])

        def chunked(total: int, body: Callable[[PrimExpr, Var, int], Stmt]) -> list[Stmt]:
            # whole vectors, the last overlapping the one before it (the
            # same values written twice): no scalar remainder. (A variable
            # for each loop: a loop variable is bound once in the IR.)
            if total <= lanes:
                return [body(i64(0), Var("g", "int64"), total)]
            t = Var("t", "int64")
            stmts: list[Stmt] = [For(t, i64(0), i64(total // lanes), "serial",
                                     body(t * lanes, Var("g", "int64"), lanes))]
            if total % lanes:
                stmts.append(body(i64(total - lanes), Var("g", "int64"), lanes))
            return stmts

        def split(count: int) -> list[Stmt]:
            # v's stride phases, each read contiguously by the columns' taps
            def body(start: PrimExpr, g: Var, extent: int) -> Stmt:
                at = start + g
                return For(g, i64(0), i64(extent), "vectorized", seq([
                    BufferStore(ph, BufferLoad(v, (at * sw + (s + M),)), (at + (s * L + lead),))
                    for s in range(sw)]))
            return chunked(count * OW + reach, body) if sw > 1 else []

        def columns(oy0: PrimExpr, count: int) -> list[Stmt]:
            def body(start: PrimExpr, g: Var, extent: int) -> Stmt:
                at = start + g
                o = oy0 * OW + at  # flat in the output: one contiguous store
                where = (b, ch, oy0, at) if count == 1 else (b, ch, o // i64(OW), o % i64(OW))
                return For(g, i64(0), i64(extent), "vectorized", nan_propagating_max(
                    [tap(at, r1) for r1 in range(KW)], dt,
                    lambda value: BufferStore(out, value, where)))
            return split(count) + chunked(count * OW, body)

        def tap(at: PrimExpr, r1: int) -> PrimExpr:
            if sw == 1:
                return BufferLoad(v, (at + (r1 * dw + M - left),))
            k, s = phase[r1]
            return BufferLoad(ph, (at + (s * L + lead + k),))

        def edges(i: int, oy: PrimExpr | int) -> list[Stmt]:
            # block row i's outputs whose taps reach a neighbour's slot, from
            # its rows' maxima in v before the next row overwrites them (the
            # flat loop's tree over what its taps would have read), kept in
            # e until the flat loop has stored its own values there
            found = window_rows(oy)
            return [nan_propagating_max(
                [BufferLoad(v, (i64(i * P + M + col),)) if found and 0 <= col < W else lowest
                 for col in taps[ox]], dt,
                lambda value, j=j: BufferStore(e, value, (i64(i * len(redo) + j),)))
                for j, ox in enumerate(redo)]

        def put_edges(i: PrimExpr, oy: PrimExpr) -> list[Stmt]:
            return [BufferStore(out, BufferLoad(e, (i * len(redo) + j,)), (b, ch, oy, i64(ox)))
                    for j, ox in enumerate(redo)]

        def block(oys: list[int]) -> list[Stmt]:
            if not oys:
                return []
            stmts = [s for i, oy in enumerate(oys) for s in (rows_max(i, oy), *edges(i, oy))]
            stmts += columns(i64(oys[0]), len(oys))
            return stmts + [s for i, oy in enumerate(oys) for s in put_edges(i64(i), i64(oy))]
        # the max's identity where no row writes: before the first row, the
        # columns of each slot past the input, past the last row (read only
        # by the flat loop for the outputs stored over after it)
        k = Var("k", "int64")
        stmts: list[Stmt] = [For(k, i64(0), i64(length), "vectorized",
                                 BufferStore(v, lowest, (k,)))]
        if sw > 1:  # the phases' elements before the first column: the left padding's
            stmts += [BufferStore(ph, lowest, (i64(p * L + q),))
                      for p in range(sw) for q in range(lead)]
        stmts += block(head)
        if nb:
            blk, i = Var("blk", "int64"), Var("i", "int64")
            oy0 = blk * rows + inside.first
            body = [s for k in range(rows) for s in (rows_max(k, oy0 + k), *edges(k, oy0 + k))]
            body += columns(oy0, rows)
            if redo:
                body.append(For(i, i64(0), i64(rows), "serial", seq(put_edges(i, oy0 + i))))
            stmts.append(For(blk, i64(0), i64(nb), "serial", seq(body)))
        stmts += block(rest)
        work = n * c * (OH * (W * KH + P) + OH * OW * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(v, Allocate(e, Allocate(ph, seq(stmts)) if sw > 1 else seq(stmts)))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)

