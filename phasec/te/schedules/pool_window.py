"""The window of a pooling, shared by its schedules: where each tap reads,
whether it lies inside the input, and the padded copy of the input a max
pooling reads instead of testing the border.

Reading the border through a bounds test and clamped indices in the
pooling loop makes every load a gather, and so would a padded copy written
as one compute. The copy (:func:`padded_for_max`) is hand-written TIR: per
channel, the padded plane is filled, then the input's rows are copied into
its interior, both with contiguous vector stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from phasec import arith
from phasec.ir.tir import (
    BinaryOp, Buffer, BufferLoad, BufferStore, FloatImm, For, LetStmt, PrimExpr, Select,
    SeqStmt, Stmt, Var, seq,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.tensor import Tensor

__all__ = ["PoolWindow", "PhaseGeometry", "RowsFirst", "padded_for_max", "padded_input",
           "static_sizes",
           "stride_phases",
           "nan_propagating_max", "balanced_tree", "max_pool_row"]


class PoolWindow:
    """The taps of ``w``'s window: the input read at a tap, through the
    padded copy ``padded`` when there is one, else tested against the
    border (``fill`` outside)."""

    def __init__(self, w: PoolWorkload, padded: Tensor | None) -> None:
        self.w = w
        self.padded = padded
        self.in_sp = w.layout.to_canonical(w.data.shape)[2:]
        dt = w.data.dtype
        #: the dtype of the accumulation (sums of integers in int64)
        self.acc = dt if dt.startswith("float") else "int64"

    def positions(self, oi: Sequence[PrimExpr], rvars: Sequence[PrimExpr]) -> list[PrimExpr]:
        """The input position of tap ``rvars`` of output position ``oi`` (per spatial axis)."""
        w = self.w
        return [oi[j] * w.strides[j] - w.padding[j] + rvars[j] * w.dilation[j]
                for j in range(w.rank)]

    def within(self, pos: Sequence[PrimExpr], lo: Sequence[int | PrimExpr],
               hi: Sequence[PrimExpr]) -> PrimExpr:
        """``lo[j] <= pos[j] < hi[j]`` along every spatial axis."""
        return te.all_of(*[te.in_range(p, lo[j], hi[j]) for j, p in enumerate(pos)])

    def load(self, n: PrimExpr, c: PrimExpr, pos: Sequence[PrimExpr]) -> PrimExpr:
        """The input at ``pos`` clamped into it (a load that is always in bounds)."""
        idx = self.w.layout.index_from_canonical(
            (n, c, *[te.clamp_index(p, self.in_sp[j]) for j, p in enumerate(pos)]))
        return self.w.data[idx]

    def tap(self, n: PrimExpr, c: PrimExpr, pos: Sequence[PrimExpr]) -> PrimExpr:
        """The input at ``pos``: the padded copy's, or tested against the border."""
        w = self.w
        if self.padded is not None:
            return self.padded[(n, c, *[p + w.padding[j] for j, p in enumerate(pos)])]
        dt = w.data.dtype
        fill = te.min_value(dt) if w.kind == "max" else te.const(0, self.acc)
        value = self.load(n, c, pos) if w.kind == "max" else te.cast(self.load(n, c, pos),
                                                                     self.acc)
        return te.select(self.within(pos, [0] * w.rank, self.in_sp), value, fill)


def padded_for_max(w: PoolWorkload) -> Tensor | None:
    """The max pooling ``w``'s input with its padding filled with the max's
    identity, as a buffer of its own, for a canonical-layout input of static
    shape with padding; else None. It extends to where the last window
    reaches when that passes the padding, as ``ceil_mode``'s last window may."""
    if not w.canonical:
        return None
    out_sp = [arith.const_int(d) for d in w.out_layout.to_canonical(w.out_shape)[2:]]
    if any(d is None for d in out_sp):
        return None
    reach = [(out_sp[j] - 1) * w.strides[j] - w.padding[j]
             + (w.pool_size[j] - 1) * w.dilation[j] + 1 for j in range(w.rank)]
    return padded_input(w.data, w.padding, w.rank, te.min_value(w.data.dtype), reach)


def padded_input(x: Tensor, pads: Sequence[int], rank: int, fill: PrimExpr,
                 reach: list[int]) -> Tensor | None:
    """``x`` (canonical layout) padded with ``fill`` up to ``reach`` (per
    spatial axis, the end of the last window in input coordinates,
    exclusive); None without padding or for a shape that is not static.
    The convolutions' padded input too (:mod:`conv_direct`)."""
    dims = [arith.const_int(d) for d in x.shape]
    if not any(pads) or any(d is None for d in dims):
        return None
    n, c, *sp = dims
    lo, hi = pads[:rank], pads[rank:]
    # up to where the windows reach (``reach``: exclusive, input coordinates)
    shape = (n, c, *[lo[j] + max(sp[j] + hi[j], reach[j]) for j in range(rank)])

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        src = bufs[0]
        ni, ci = Var("n", "int64"), Var("c", "int64")

        def plane(extents, body, base):
            ids = [Var(f"{base}{d}", "int64") for d in range(rank)]
            stmt = body(ids)
            for d in reversed(range(rank)):
                kind = "vectorized" if d == rank - 1 and extents[d] >= 2 else "serial"
                stmt = For(ids[d], i64(0), i64(extents[d]), kind, stmt)
            return stmt
        fill_stmt = plane(shape[2:], lambda i: BufferStore(out, fill, (ni, ci, *i)), "f")
        copy_stmt = plane(sp, lambda i: BufferStore(
            out, src[(ni, ci, *i)], (ni, ci, *[i[j] + lo[j] for j in range(rank)])), "y")
        body = SeqStmt((fill_stmt, copy_stmt))
        # threads only for enough work, as the TE schedules decide (tuning)
        work = n * c * int(np.prod(shape[2:]))
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(ni, i64(0), i64(n), "serial",
                   For(ci, i64(0), i64(c), "parallel" if par else "serial", body))
    return te.extern([i64(v) for v in shape], x.dtype, [x], build, name="pad_temp")


def static_sizes(w: PoolWorkload) -> tuple[int, ...]:
    """``(n, c, H, W, OH, OW)``: the sizes of a static 2-D pooling in NCHW."""
    return tuple(int(arith.const_int(d) or 0) for d in (*w.data.shape, *w.out_shape[2:]))


def balanced_tree(values: list[PrimExpr],
                  join: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> PrimExpr:
    """``values`` joined pairwise, level by level (an associative ``join``):
    the chain of latencies is the tree's depth, not the count of values."""
    while len(values) > 1:
        values = [join(values[i], values[i + 1]) if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def max_pool_row(w: PoolWorkload, rows: Sequence[PrimExpr], row_buf: Buffer,
                 load: Callable[[PrimExpr, PrimExpr], PrimExpr],
                 store: Callable[[PrimExpr, PrimExpr], Stmt]) -> list[Stmt]:
    """One output row of the 2-D max pool ``w`` (one channel) through a
    buffer of one row: the max over the window's input ``rows`` (``load(row,
    column)``; none: a window wholly in the padding) into ``row_buf`` from
    ``w.padding[1]`` on, then each output column's max over its window from
    that buffer, stored by ``store(column, value)``. The buffer's padding
    columns hold the dtype's lowest value (the caller writes them once)."""
    dt = w.data.dtype
    _, _, _, W, _, OW = static_sizes(w)
    (_, sw), (_, dw), (_, KW) = w.strides, w.dilation, w.pool_size
    left = w.padding[1]
    j, ox = Var("j", "int64"), Var("ox", "int64")
    if rows:
        first: Stmt = For(j, i64(0), i64(W), "vectorized", nan_propagating_max(
            [load(r, j) for r in rows], dt, lambda value: BufferStore(row_buf, value, (j + left,))))
    else:
        first = For(j, i64(0), i64(W), "vectorized",
                    BufferStore(row_buf, te.min_value(dt), (j + left,)))
    return [first, For(ox, i64(0), i64(OW), "vectorized", nan_propagating_max(
        [BufferLoad(row_buf, (ox * sw + r1 * dw,)) for r1 in range(KW)], dt,
        lambda value: store(ox, value)))]


def nan_propagating_max(values: Sequence[PrimExpr], dtype: str,
                        store: Callable[[PrimExpr], Stmt]) -> Stmt:
    """``store`` of the max of ``values`` (float ``dtype``), NaN when any of
    them is NaN, each value bound to a variable first.

    ``te.max``'s combiner (LLVM's ``maximum``: a NaN propagates, -0 < +0)
    costs six vector instructions on x86; here the max is the CPU's own
    (``a if a > b else b``: one instruction) in a balanced tree, and the NaN
    comes from one unordered compare per pair of values, or-ed, and one
    select at the end: about two instructions a value instead of six. The
    values are variables because a ``Select`` or ``or`` over buffer reads
    is evaluated lazily, by branches. The one difference from ``te.max``:
    a zero maximum over values holding both -0 and +0 may be either zero,
    as with numpy's ``maximum`` (which returns its first operand on a tie)
    and ONNX Runtime's max pool."""
    bindings: list[tuple[Var, PrimExpr]] = []

    def bound(name: str, value: PrimExpr, dt: str) -> Var:
        var = Var(f"{name}{len(bindings)}", dt)
        bindings.append((var, value))
        return var
    taps = [bound("tap", v, dtype) for v in values]
    fast = balanced_tree(taps, lambda a, b: bound("max", Select(BinaryOp(">", a, b), a, b),
                                                  dtype))
    unordered = [BinaryOp("or", BinaryOp("!=", taps[i], taps[i]),
                          BinaryOp("!=", taps[i + 1], taps[i + 1]))
                 if i + 1 < len(taps) else BinaryOp("!=", taps[i], taps[i])
                 for i in range(0, len(taps), 2)]
    any_nan = balanced_tree(unordered, lambda a, b: bound("nan", BinaryOp("or", a, b), "bool"))
    stmt = store(Select(any_nan, FloatImm(float("nan"), dtype), fast))
    for var, value in reversed(bindings):
        stmt = LetStmt(var, value, stmt)
    return stmt


@dataclass(frozen=True)
class RowsFirst:
    """Where the windows of a static 2-D pooling (NCHW) lie wholly inside
    its input, for the schedules that take a window's rows first, then its
    columns (:mod:`.pool_max_rows`, :mod:`.pool_avg_rows`): output rows
    ``first..stop`` (one loop; ``border``: the others), whose window rows
    are input rows ``y0..y0 + span`` with the rows between the windows'
    tops; output columns ``lo..hi`` (one vector loop; the others one by
    one over the taps inside)."""

    first: int
    stop: int
    y0: int
    span: int
    border: tuple[int, ...]
    lo: int
    hi: int

    @staticmethod
    def of(w: PoolWorkload) -> RowsFirst:
        H, W = (arith.const_int(d) for d in w.data.shape[2:])
        OH, OW = (arith.const_int(d) for d in w.out_shape[2:])
        (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
        top, left = w.padding[0], w.padding[1]
        inner = [oy for oy in range(OH)
                 if oy * sh - top >= 0 and oy * sh - top + (KH - 1) * dh < H]
        first, stop = (inner[0], inner[-1] + 1) if inner else (0, 0)
        lo = min(OW, -(-left // sw))
        return RowsFirst(first, stop, first * sh - top,
                         (stop - 1 - first) * sh + 1 if inner else 0,
                         tuple(oy for oy in range(OH) if not first <= oy < stop),
                         lo, max(lo, min(OW, (W - 1 - (KW - 1) * dw + left) // sw + 1)))

    def flat_margins(self, w: PoolWorkload) -> tuple[int, int] | None:
        """With a stride of 1 along both axes and as many output as input
        columns, output row ``q``'s columns lie flat in the rows' buffer as
        in the output: all inner rows' columns take one flat vector loop
        (whole vectors, not rows of ``W - 2``), after which the edge columns,
        whose flat taps ran into the neighbouring rows, are recomputed over
        theirs. The elements before and after the rows' buffer that loop
        reads (the left and right padding), or None without that loop. Not
        for a window of one column (an LRN's sum over channels as a 5x1
        pool over 192x3025: its rows are long already, 719 -> 778 us flat)."""
        (sh, sw), dw, KW = w.strides, w.dilation[1], w.pool_size[1]
        if not (KW > 1 and sh == sw == 1 and arith.const_int(w.out_shape[3]) == arith.const_int(
                w.data.shape[3]) and self.hi > self.lo and self.stop > self.first):
            return None
        return w.padding[1], (KW - 1) * dw - w.padding[1]


#: the longest phase row whose de-interleave is unrolled (see PhaseGeometry.copy)
MAX_UNROLLED_COLUMNS = 32


@dataclass(frozen=True)
class PhaseGeometry:
    """The ``sh x sw`` stride phases of a channel of an NCHW input (static
    sizes) laid flat, for a strided window (a depthwise convolution):
    ``ph[a*sw + e, u*V + v] = x[u*sh + a - top, v*sw + e - left]``, a fill
    value for the padding and past the input (:meth:`copy`). Tap ``(r0,
    r1)`` of the output at ``p = y*V + x`` reads phase ``((r0*dh) % sh,
    (r1*dw) % sw)`` at ``p + (r0*dh)//sh * V + (r1*dw)//sw``: contiguous in
    ``p``. ``V`` columns a phase row, ``U`` rows, ``columns`` flat outputs
    (``OH*V`` rounded up to whole tiles, the extra ones computed and
    dropped), ``length`` elements a phase. ``reach`` (at most ``V``) phase
    columns a row hold values; an aligned geometry leaves the rest of each
    row unwritten (no kept output's taps read them). An aligned geometry
    also places column phase ``e``'s elements ``shifts[e]`` elements into
    its phase (:meth:`shift`; ``span`` elements hold values, ``length`` is
    the distance between phases), so that the copy's vectors, read from
    input columns at whole multiples of ``sw*lanes``, are stored whole and
    aligned too (see :meth:`copy_by_rows`)."""

    H: int
    W: int
    U: int
    V: int
    columns: int
    length: int
    strides: tuple[int, int]
    lead: tuple[int, int]
    reach: int = 0
    shifts: tuple[int, ...] = ()
    span: int = 0

    @staticmethod
    def of(hw: tuple[int, int], out_hw: tuple[int, int], window: tuple[int, int],
           strides: Sequence[int], dilation: Sequence[int], lead: tuple[int, int],
           tile: int, align: int = 1) -> PhaseGeometry:
        """The geometry of an ``hw`` input under a window; with ``align``,
        phase rows (``V``) and phases (``length``) of a multiple of
        ``align`` elements, so that a row's taps at whole phase columns
        load whole aligned vectors."""
        (OH, OW), (KH, KW), (sh, sw), (dh, dw) = out_hw, window, strides, dilation
        U = OH + (KH - 1) * dh // sh      # phase rows every output row's taps reach
        reach = OW + (KW - 1) * dw // sw  # phase columns
        V = -(-reach // align) * align
        columns = -(-OH * V // tile) * tile
        span = columns + (KH - 1) * dh // sh * V + (KW - 1) * dw // sw
        # column phase e's first whole vector of the copy starts at phase
        # column _first(e) (input column 0 or the next of its phase):
        # shifted by -_first(e), it lands at an aligned element
        shifts = tuple((-_first(e, lead[1], sw)) % align for e in range(sw)) \
            if align > 1 else ()
        length = -(-(span + max(shifts, default=0)) // align) * align
        return PhaseGeometry(hw[0], hw[1], U, V, columns, length, (sh, sw), lead, reach,
                             shifts, span)

    def shift(self, e: int) -> int:
        """Where column phase ``e``'s elements start in its phase (see the
        class docstring; 0 unless the geometry is aligned)."""
        return self.shifts[e] if self.shifts else 0

    def copy(self, src: Buffer, b: Var, ch: Var, fill: PrimExpr,
             at: Callable[[PrimExpr, PrimExpr], tuple[PrimExpr, ...]],
             lanes: int = 0) -> list[Stmt]:
        """Channel ``(b, ch)`` of ``src`` into its phases, phase ``f``
        element ``q`` stored at index ``at(f, q)``: every input row some
        window reaches, de-interleaved (in whole vectors of ``lanes`` when
        given and the row holds one), and ``fill`` wherever no input
        element lands (the padding, past the input)."""
        stmts, rows, row = self.copy_by_rows(src, b, ch, fill, at, lanes)
        if rows > 0:
            y = Var("y", "int64")
            stmts.append(For(y, i64(0), i64(rows), "serial", row(y)))
        return stmts

    def padding_rows(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The phase rows ``(a, u)`` (row phase, phase row) no input row
        lands in: above the input, and below it."""
        sh, top = self.strides[0], self.lead[0]
        rows = max(0, min(self.H, self.U * sh - top))
        above: list[tuple[int, int]] = []
        below: list[tuple[int, int]] = []
        for a in range(sh):
            first = min(self.U, max(0, -(-(top - a) // sh)))     # first row with input
            stop = min(self.U, max(first, -(-(rows + top - a) // sh)))  # past the last
            above += [(a, u) for u in range(first)]
            below += [(a, u) for u in range(stop, self.U)]
        return above, below

    def fill_rows(self, which: Sequence[tuple[int, int]], fill: PrimExpr,
                  at: Callable[[PrimExpr, PrimExpr], tuple[PrimExpr, ...]],
                  ring: int) -> list[Stmt]:
        """``fill`` over the phase rows ``which`` (see :meth:`padding_rows`),
        each stored at its slot ``u % ring`` of a ring of phase rows."""
        sw, V = self.strides[1], self.V
        stmts: list[Stmt] = []
        for a, u in which:
            for e in range(sw):
                q = Var("q", "int64")
                where = at(i64(a * sw + e), q + ((u % ring) * V + self.shift(e)))
                stmts.append(For(q, i64(0), i64(V), "vectorized",
                                 BufferStore(where[0], fill, where[1:])))
        return stmts

    def copy_by_rows(self, src: Buffer, b: Var, ch: Var, fill: PrimExpr,
                     at: Callable[[PrimExpr, PrimExpr], tuple[PrimExpr, ...]],
                     lanes: int = 0, ring: int = 0
                     ) -> tuple[list[Stmt], int, Callable[..., Stmt]]:
        """:meth:`copy` in parts: the fills of the phase rows no input row
        lands in, the number of input rows copied, and the copy of input
        row ``y`` (an expression; it stores ``fill`` at the padding columns
        of its phase rows; optionally given its phase and phase row,
        ``(y + top) % sh`` and ``(y + top) // sh``, in a simpler form), for a
        caller that copies each row just before the output rows that read
        it. With ``ring``, each phase holds a ring of that many phase rows
        (row ``u`` at slot ``u % ring``, see :meth:`fill_rows`), the fills
        are those of the rows above the input only: the caller fills the
        rows below when their slots are free."""
        (sh, sw), (top, left), V = self.strides, self.lead, self.V
        reach = self.reach or V
        rows = max(0, min(self.H, self.U * sh - top))
        cols = max(0, min(self.W, reach * sw - left))
        # the phase rows no input row lands in (the padding above, below,
        # and the tail past the last row), filled with contiguous stores;
        # the whole phases filled first cost as much as the sums
        stmts: list[Stmt] = self.fill_rows(self.padding_rows()[0], fill, at, ring) \
            if ring else []
        for a in range(0 if ring else sh):
            first = min(self.U, max(0, -(-(top - a) // sh)))     # first row with input
            stop = min(self.U, max(first, -(-(rows + top - a) // sh)))  # past the last
            for e in range(sw):
                for lo_q, hi_q in ((0, first * V), (stop * V, self.span or self.length)):
                    if hi_q > lo_q:
                        q = Var("q", "int64")
                        where = at(i64(a * sw + e), q + (lo_q + self.shift(e)))
                        stmts.append(For(q, i64(0), i64(hi_q - lo_q), "vectorized",
                                         BufferStore(where[0], fill, where[1:])))
        # phase column v takes input columns v*sw + e - left (e < sw): the sw
        # contiguous loads of a vector of v are one interleaved group (loads
        # and shuffles; a scatter element by element, with its // and % per
        # element, was most of a pool's time). The few columns v whose group
        # crosses the border are stored one by one, where they exist.
        def build_row(y: PrimExpr, phase_row: tuple[PrimExpr, PrimExpr] | None = None
                      ) -> Stmt | None:
            v = Var("v", "int64")
            a, u = phase_row or ((y + top) % sh, (y + top) // sh)
            if ring:
                u = u % ring

            def put(col: PrimExpr, e: int) -> Stmt:
                where = at(a * sw + e, u * V + (col + self.shift(e)))
                return BufferStore(where[0], src[(b, ch, y, col * sw + (e - left))], where[1:])

            def fill_at(col: int, e: int) -> Stmt:
                where = at(a * sw + e, u * V + (col + self.shift(e)))
                return BufferStore(where[0], fill, where[1:])
            if self.shifts and cols >= sw * lanes:
                return self._aligned_row(put, fill_at, cols, lanes)
            lo = min(reach, -(-left // sw))                        # first whole group
            hi = max(lo, min(reach, (cols + left - sw) // sw + 1))  # past the last one
            row: list[Stmt] = []
            # whole vectors of phase columns, as wide as the row holds (at most
            # ``lanes``, at least 4), the last one overlapping the one before
            # (the same values stored twice): each vector ``sw`` full loads and
            # one shuffle a phase. Unrolled, the SLP vectorizer made masked
            # loads, small shuffles and scalar moves of a row (of a 14x14
            # input's 6 columns, mostly scalar: 576x14x14 3x3/2 46.5 -> 42 us;
            # a 56x56 input's 27 columns, no measurable change).
            width = min(lanes, 1 << max(0, (hi - lo).bit_length() - 1))
            if width >= 4:
                k = Var("k", "int64")

                def group(start: PrimExpr) -> Stmt:
                    j = Var("j", "int64")
                    return For(j, i64(0), i64(width), "vectorized",
                               seq(tuple(put(start + j, e) for e in range(sw))))
                whole = (hi - lo) // width
                row.append(group(i64(lo)) if whole == 1 else
                           For(k, i64(0), i64(whole), "serial", group(k * width + lo)))
                if (hi - lo) % width:
                    row.append(group(i64(hi - width)))
            elif hi > lo:
                # a short row unrolled: the SLP vectorizer groups its loads and
                # stores in whole vectors, where the loop vectorizer took 4 lanes
                # and a scalar tail for 13-17 columns (pool 576x14x14: 57 -> 45 us)
                kind = "unroll" if hi - lo <= MAX_UNROLLED_COLUMNS else "vectorized"
                row.append(For(v, i64(lo), i64(hi - lo), kind,
                               seq(tuple(put(v, e) for e in range(sw)))))
            row += [put(i64(col), e) if 0 <= col * sw + e - left < cols else fill_at(col, e)
                    for col in (*range(lo), *range(hi, reach)) for e in range(sw)]
            if not row:
                return None
            return seq(row)
        copied = build_row(Var("y", "int64")) is not None
        return stmts, rows if copied else 0, build_row  # type: ignore[return-value]

    def _aligned_row(self, put: Callable[[PrimExpr, int], Stmt],
                     fill_at: Callable[[int, int], Stmt], cols: int, lanes: int) -> Stmt:
        """An input row of an aligned geometry into its phase rows: vectors
        of ``sw*lanes`` input columns from column 0, each column phase
        ``e``'s ``lanes`` elements stored at phase column ``_first(e) +
        start``, aligned (:meth:`shift`); the rest of the row one vector of
        phase columns for every phase (the last whole one, unaligned: a
        last ``sw*lanes`` group overlapping the one before was left scalar
        by LLVM), then the columns no vector covers one by one: input
        there, else ``fill``. The phase rows' loads and stores started at
        the first whole group of phase columns (input column 1 of a padded
        3x3 stride 2), every one of them split across two cache lines
        (16x112x112 3x3/2 + ReLU: 48-55 -> 43 us alone)."""
        (sw, left), reach = (self.strides[1], self.lead[1]), self.reach or self.V
        firsts = [_first(e, left, sw) for e in range(sw)]
        whole = cols // (sw * lanes)
        k, j = Var("k", "int64"), Var("j", "int64")
        row: list[Stmt] = [For(k, i64(0), i64(whole), "serial", For(
            j, i64(0), i64(lanes), "vectorized",
            seq(tuple(put(k * lanes + (firsts[e] + j), e) for e in range(sw)))))]
        covered = [set(range(f, f + whole * lanes)) for f in firsts]
        hi = min(reach, (cols + left - sw) // sw + 1)  # past the last whole group
        # (a vector of phase columns from hi - lanes reads input columns from
        # (hi - lanes)*sw - left: none left of the row, else the singles)
        if hi - lanes >= -(-left // sw) and any(not set(range(hi - lanes, hi)) <= c
                                               for c in covered):
            j2 = Var("j", "int64")
            row.append(For(j2, i64(0), i64(lanes), "vectorized", seq(tuple(
                put(i64(hi - lanes) + j2, e) for e in range(sw)))))
            covered = [c | set(range(hi - lanes, hi)) for c in covered]
        for e in range(sw):
            for col in sorted(set(range(reach)) - covered[e]):
                row.append(put(i64(col), e) if 0 <= col * sw + e - left < cols
                           else fill_at(col, e))
        return seq(tuple(row))


def _first(e: int, left: int, sw: int) -> int:
    """The phase column of column phase ``e`` that input column ``(e -
    left) mod sw`` lands in (the first of the phase within input columns
    ``[0, sw)``)."""
    return ((e - left) % sw + left - e) // sw


def stride_phases(x: Tensor, out_hw: tuple[int, int], window: tuple[int, int],
                  strides: Sequence[int], dilation: Sequence[int], lead: tuple[int, int],
                  fill: PrimExpr, tile: int) -> tuple[Tensor, int, int]:
    """``x`` (NCHW, static) split into its ``sh x sw`` stride phases laid
    flat, for a strided window over every channel at once (a convolution
    of few input channels, :mod:`.conv_few_channels`):
    ``ph[b, c, a*sw + e, u*V + v] = x[b, c, u*sh + a - top, v*sw + e - left]``,
    ``fill`` for the padding and past the input, written by hand
    (:meth:`PhaseGeometry.copy`). Tap ``(r0, r1)`` of
    the output at ``p = y*V + x`` reads phase ``((r0*dh) % sh, (r1*dw) % sw)``
    at ``p + (r0*dh)//sh * V + (r1*dw)//sw``: contiguous in ``p``. Returns the
    phases, ``V`` and the flat output's columns (``OH*V`` rounded up to whole
    ``tile``s, the extra ones computed and dropped)."""
    n, c, H, W = (arith.const_int(d) for d in x.shape)
    (sh, sw) = strides
    geo = PhaseGeometry.of((H, W), out_hw, window, strides, dilation, lead, tile)
    V, columns, length = geo.V, geo.columns, geo.length

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        b, ch = Var("b", "int64"), Var("ch", "int64")
        stmts = geo.copy(bufs[0], b, ch, fill, lambda f, q: (out, b, ch, f, q))
        work = n * c * sh * sw * length
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(ch, i64(0), i64(c),
                                                   "parallel" if par else "serial",
                                                   seq(tuple(stmts))))
    phases = te.extern((i64(n), i64(c), i64(sh * sw), i64(length)), x.dtype, [x], build,
                       name="stride_phases")
    return phases, V, columns
