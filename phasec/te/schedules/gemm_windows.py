"""A convolution's windows (``im2col``) written as runs, and packed straight
from the input into the integer GEMM's panels (an implicit GEMM).

:func:`tap_runs` writes the columns ``[c0, c1)`` of one row of the windows
(one tap of one channel) as runs: for each output row, the input row it
reads copied in contiguous runs (strided for strides > 1) and the padding
filled, all ranges known at build time (no test per element). A stride-1
tap whose output rows are as wide as the input's (a "same" padding) is one
run over the channel's rows laid end to end, its padding columns written
after. ``nn.im2col`` writes all its columns this way.

``nn.im2col_matmul`` (``W @ im2col(x)``, 8-bit) marks its GEMM's
reduction with :data:`WINDOWS_ATTR` (a :class:`Windows`); the GEMM schedule
then packs each panel's words from the input (:func:`pack_panel`): a few
channels' window bytes at a time into a scratch that stays in L1, then
their words of four bytes into the packed micro-panels, so the columns
never exist whole (1.8 MB written and read again for a 3x3 convolution of
64 channels over 56x56). A stride-1 "same" convolution whose groups of
channels are a few words (a 3x3's, :data:`DIRECT_MAX_ROWS`) has no scratch:
its interior panels (every tap inside the image rows) load each word's
bytes from the image, its edge panels from their rows staged with the
padding. A larger one's panels copy each kernel row's taps into the
scratch in a loop over the kernel rows (from the image, or from the staged
rows at the image's edges): the code, and LLVM's time, per kernel column
rather than per tap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from phasec.arith import simplify
from phasec.ir import tir
from phasec.ir.tir import Buffer, BufferStore, For, IfThenElse, IntImm, PrimExpr, Stmt, Var
from phasec.te.operation import i64
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["WINDOWS_ATTR", "Windows", "inside", "pack_panel", "tap_runs"]

#: the attribute of an integer GEMM's reduction whose column operand is the
#: windows of an input (value: a :class:`Windows`)
WINDOWS_ATTR = "phasec.gemm_windows"


@dataclass(frozen=True)
class Windows:
    """The windows of an NCHW image: sizes, kernel, strides, padding (top,
    left, bottom, right), dilation, output grid and the value of the padding."""

    hw: tuple[int, int]
    kernel: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    grid: tuple[int, int]
    fill: PrimExpr
    #: the image (``[N, C, H, W]``) the GEMM packs from (None for nn.im2col)
    data: Tensor | None = None

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1]


#: the most rows of a group of channels (``cg * taps``: whole words) whose
#: words a stride-1 "same" convolution loads straight from the image: a
#: 3x3's 36 (a 5x5's 100 took LLVM twice as long as through the scratch,
#: 1.6 -> 3.0 s for 9 channels over 60x28)
DIRECT_MAX_ROWS = 36

#: ``column_mask(x_lo, x_hi)(p)``: whether output position ``p``'s column is
#: outside ``[x_lo, x_hi)`` (a condition)
ColumnMask = Callable[[int, int], Callable[[PrimExpr], PrimExpr]]


def inside(edge: int, size: int, stride: int, count: int) -> tuple[int, int]:
    """The outputs ``[lo, hi)`` of ``[0, count)`` whose input ``o * stride +
    edge`` (``edge``: the tap's offset minus the padding before) is in
    ``[0, size)``."""
    lo = min(max(0, -(edge // stride)), count)
    hi = (size - 1 - edge) // stride + 1
    return lo, max(lo, min(hi, count))


def tap_runs(g: Windows, i: int, j: int, c0: int, c1: int,
             load: Callable[[PrimExpr, PrimExpr], PrimExpr],
             store: Callable[[PrimExpr, PrimExpr], Stmt],
             column_mask: ColumnMask | None = None) -> list[Stmt]:
    """Columns ``[c0, c1)`` of the windows' row of tap ``(i, j)``:
    ``store(p, value)`` for each output position ``p`` there, the value
    ``load(y, x)`` of the input or ``g.fill`` in the padding. With
    ``column_mask``, a stride-1 "same" tap's copy selects the fill at the
    padding columns (``column_mask(x_lo, x_hi)(p)``: whether position ``p``'s
    column is outside ``[x_lo, x_hi)``) instead of writing them after, byte
    by byte."""
    (h, w), (oh, ow) = g.hw, g.grid
    (sy, sx), (dy, dx) = g.strides, g.dilation
    y_edge, x_edge = i * dy - g.padding[0], j * dx - g.padding[1]
    y_lo, y_hi = inside(y_edge, h, sy, oh)
    x_lo, x_hi = inside(x_edge, w, sx, ow)

    def fills(a: PrimExpr | int, b: PrimExpr | int, n: int | None = None) -> list[Stmt]:
        """The fill at ``[a, b)`` (``n = b - a`` when the bounds are not static)."""
        n = (b - a) if n is None else n
        if n <= 0:
            return []
        q = Var("q", "int64")
        start = i64(a) if isinstance(a, int) else a
        return [For(q, i64(0), i64(n), "vectorized", store(start + q, g.fill))]

    if y_hi <= y_lo or x_hi <= x_lo:
        return fills(c0, c1)
    if (sy, sx) == (1, 1) and ow == w:
        # position p of the rows [y_lo, y_hi) reads element p + off of the
        # channel's rows laid end to end: one copy, the padding columns then
        # overwritten (the copy stops where it would leave the channel:
        # those positions are padding too)
        off = y_edge * w + x_edge
        p0, p1 = max(y_lo * w, -off), min(y_hi * w, h * w - off)
        a, b = max(c0, p0), min(c1, p1)
        parts = fills(c0, min(c1, p0))
        masked = column_mask is not None and (x_lo > 0 or x_hi < w)
        if b > a:
            f = Var("f", "int64")
            src = f + i64(a + off)
            value = load(src // i64(w), src % i64(w))
            if column_mask is not None and masked:
                value = tir.Select(column_mask(x_lo, x_hi)(f + i64(a)), g.fill, value)
            parts.append(For(f, i64(0), i64(b - a), "vectorized", store(f + i64(a), value)))
        parts += fills(max(c0, p1), c1)
        if b > a and (x_lo or x_hi < w) and not masked:
            pads = [(0, x_lo), (x_hi, w)]
            full0, full1 = max(y_lo, -(-a // w)), min(y_hi, b // w)
            if full1 > full0:
                oy = Var("oy", "int64")
                base = oy * i64(w)
                line = [s for x0, x1 in pads for s in fills(base + i64(x0), None, x1 - x0)]
                parts.append(For(oy, i64(full0), i64(full1 - full0), "serial", seq(line)))
            for r in sorted({a // w, (b - 1) // w}):  # rows only partly in [a, b)
                if y_lo <= r < y_hi and not full0 <= r < full1:
                    for x0, x1 in pads:
                        parts += fills(max(a, r * w + x0), min(b, r * w + x1))
        return parts
    parts: list[Stmt] = []

    def piece(r: PrimExpr | int, xa: int, xb: int) -> list[Stmt]:
        """Row ``r`` (in ``[y_lo, y_hi)``), output columns ``[xa, xb)``."""
        base = i64(r * ow) if isinstance(r, int) else r * i64(ow)
        out = fills(base + i64(xa), None, min(xb, x_lo) - xa)
        u0, u1 = max(xa, x_lo), min(xb, x_hi)
        if u1 > u0:
            ox = Var("ox", "int64")
            y = (i64(r) if isinstance(r, int) else r) * i64(sy) + i64(y_edge)
            xx = (ox + i64(u0)) * i64(sx) + i64(x_edge)
            out.append(For(ox, i64(0), i64(u1 - u0), "vectorized",
                           store(base + i64(u0) + ox, load(y, xx))))
        x0 = max(xa, x_hi)
        return out + fills(base + i64(x0), None, xb - x0)

    full0, full1 = -(-c0 // ow), c1 // ow
    if full1 < full0:  # [c0, c1) within one output row
        r = c0 // ow
        return (piece(r, c0 - r * ow, c1 - r * ow) if y_lo <= r < y_hi else fills(c0, c1))
    if c0 % ow:
        r = c0 // ow
        parts += piece(r, c0 % ow, ow) if y_lo <= r < y_hi else fills(c0, (r + 1) * ow)
    parts += fills(full0 * ow, min(full1, y_lo) * ow)
    r0, r1 = max(full0, y_lo), min(full1, y_hi)
    if r1 > r0:
        oy = Var("oy", "int64")
        parts.append(For(oy, i64(r0), i64(r1 - r0), "serial", seq(piece(oy, 0, ow))))
    parts += fills(max(full0, y_hi) * ow, full1 * ow)
    if c1 % ow:
        r = full1
        parts += piece(r, 0, c1 % ow) if y_lo <= r < y_hi else fills(r * ow, c1)
    return parts


def pack_panel(g: Windows, channels: int, kq_count: int, bp: Buffer, col0: PrimExpr,
               tiles: int, width: int, load: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
               panels: tuple[Var, int, int] | None, name: str) -> Stmt:
    """``bp[t, kq, c]``: the int32 word of the windows' bytes ``4*kq .. 4*kq+3``
    (byte 0 lowest, zero past the last row) at column ``col0 + t*width + c``
    (what :func:`.gemm_prepack.byte_word` of the columns is), for the
    ``tiles`` micro-panels of one panel. ``load(ch, y, x)`` reads the input.

    A few channels at a time (whole words: 4 of 9 taps), their window bytes
    written into a scratch that stays in L1, then regrouped into words
    (all at once, the scratch was ~K x panel bytes in L2 and the regrouping
    its slowest part). A ``col0`` that is not a constant is ``v * step``
    for the panel loop ``panels = (v, count, step)``: the panels whose
    windows are all inside the rows their taps read (a stride-1 "same"
    convolution, panels of whole rows) share one packing, a copy per tap
    from the panel's first row, or each word's four bytes loaded straight
    from the image (groups of at most ``DIRECT_MAX_ROWS`` rows: no scratch;
    3x3 64 ch 56x56 on Zen 4, the kernel 580-583 -> 563 us); the others
    have their own, the runs' ranges known at build time."""
    ncols = tiles * width
    cg = 4 // math.gcd(g.taps, 4)  # channels of a group: whole words
    rows = cg * g.taps
    scratch = Buffer(name + "_windows", (i64(rows), i64(ncols)), "uint8")
    w = g.hw[1]
    masks: dict[tuple[int, int], Buffer] = {}

    def column_mask(c0: int) -> ColumnMask:
        """The masks of the panel from ``c0`` (a multiple of ``w`` for the
        shared packing), indexed by position."""
        def make(x_lo: int, x_hi: int) -> Callable[[PrimExpr], PrimExpr]:
            buf = masks.get((x_lo, x_hi))
            if buf is None:
                buf = masks[x_lo, x_hi] = Buffer(f"{name}_pad{x_lo}_{x_hi}", (i64(ncols),),
                                                 "uint8")
            return lambda p: tir.BinaryOp("!=", tir.BufferLoad(buf, (simplify(p - i64(c0)),)),
                                          IntImm(0, "uint8"))
        return make

    def taps_of(ch: PrimExpr, row0: PrimExpr, c0: int, first_row: PrimExpr | None
                ) -> list[Stmt]:
        """One channel's taps into scratch rows ``row0 + tap``: the runs of
        columns ``[c0, c0 + ncols)``, or (``first_row`` given) the shared
        copy of the panel starting at that output row."""
        stmts: list[Stmt] = []

        def at(y: PrimExpr, x: PrimExpr) -> PrimExpr:
            return load(ch, y, x)

        def storer(row: PrimExpr) -> Callable[[PrimExpr, PrimExpr], Stmt]:
            return lambda p, v: BufferStore(scratch, _u8(v), (row, simplify(p - i64(c0))))
        if first_row is not None:
            # the kernel's rows a loop: their copies differ only by whole
            # image rows (a tap's code per kernel row, not per tap: the
            # loop vectorizer's time grows faster than the kernel's loops)
            ki = Var("ki", "int64")
            row_base = simplify(row0 + ki * i64(g.kernel[1]))
            copies = [_interior_copy(g, ki, j, first_row, ncols, at,
                                     storer(simplify(row_base + i64(j))), column_mask(0))
                      for j in range(g.kernel[1])]
            return [For(ki, i64(0), i64(g.kernel[0]), "serial", seq(copies))]
        if staged:
            # a panel at the image's top or bottom edge (or anywhere when
            # its first column is known): the rows its taps read staged
            # with the padding rows filled, then the same copy per kernel
            # row as the shared packing's, from the staged rows (25 copies
            # of a 5x5's taps, each its own runs, took LLVM ~0.1 s each)
            rows_buf, margin = staged[0], _staged_margin(g)
            assert margin is not None
            r0 = c0 // w - g.padding[0] - margin  # the image row of staged row 0
            stmts = _stage_rows(g, rows_buf, r0, at)
            ki = Var("ki", "int64")
            row_base = simplify(row0 + ki * i64(g.kernel[1]))
            copies = []
            for j in range(g.kernel[1]):
                x_edge = j * g.dilation[1] - g.padding[1]
                f = Var("f", "int64")
                src = ((ki * i64(g.dilation[0]) + i64(margin)) * i64(w) + f
                       + i64(c0 % w + x_edge))
                value: PrimExpr = tir.BufferLoad(rows_buf, (simplify(src),))
                x_lo, x_hi = inside(x_edge, w, 1, w)
                if x_lo > 0 or x_hi < w:
                    value = tir.Select(column_mask(c0)(x_lo, x_hi)(f + i64(c0)), _u8(g.fill),
                                       value)
                copies.append(For(f, i64(0), i64(ncols), "vectorized",
                                  storer(simplify(row_base + i64(j)))(f + i64(c0), value)))
            return stmts + [For(ki, i64(0), i64(g.kernel[0]), "serial", seq(copies))]
        for i in range(g.kernel[0]):
            for j in range(g.kernel[1]):
                row = simplify(row0 + i64(i * g.kernel[1] + j))
                stmts += tap_runs(g, i, j, c0, c0 + ncols, at, storer(row), column_mask(c0))
        return stmts

    def regroup(nch: int, kq0: PrimExpr) -> list[Stmt]:
        """The words from ``kq0`` on of the scratch's first ``nch`` channels."""
        stmts: list[Stmt] = []
        used = nch * g.taps
        words = -(-used // 4)
        if words * 4 > used:  # the last word's bytes past the last row: zero
            r, c = Var("r", "int64"), Var("c", "int64")
            stmts.append(For(r, i64(used), i64(words * 4 - used), "serial", For(
                c, i64(0), i64(ncols), "vectorized", BufferStore(scratch, IntImm(0, "uint8"),
                                                                  (r, c)))))
        t, kq, c = Var("tw", "int64"), Var("kw", "int64"), Var("cw", "int64")
        word: PrimExpr | None = None
        for q in range(4):
            byte: PrimExpr = tir.Cast("int32", tir.BufferLoad(
                scratch, (kq * i64(4) + i64(q), t * i64(width) + c)))
            if q:
                byte = tir.Call("shift_left", (byte, IntImm(8 * q, "int32")), "int32")
            word = byte if word is None else tir.Call("bitwise_or", (word, byte), "int32")
        assert word is not None
        stmts.append(For(t, i64(0), i64(tiles), "serial", For(kq, i64(0), i64(words), "serial",
                     For(c, i64(0), i64(width), "vectorized",
                         BufferStore(bp, word, (t, simplify(kq0 + kq), c))))))
        return stmts

    #: ``byte(l, ch, i, j, p)``: the byte of tap ``(i, j)`` of channel ``ch``
    #: (the group's ``l``-th) at position ``p`` of the panel
    Byte = Callable[[int, PrimExpr, int, int, PrimExpr], PrimExpr]

    def direct(byte_at: Byte, prologue: Callable[[PrimExpr, int], list[Stmt]]) -> Stmt:
        """The panel's words straight from where their bytes are (the
        image, or its rows staged by ``prologue(ch0, channels)`` for each
        group of channels): no scratch of window bytes, no regrouping."""
        used = channels * g.taps
        grp = Var("cg", "int64")
        tw, c = Var("tw", "int64"), Var("cw", "int64")
        pos = tw * i64(width) + c

        def words(ch0: PrimExpr, nrows: int) -> Stmt:
            # (expressions built as they are, not simplified: a simplify for
            # each byte doubled the whole build's time of a 3x3 model)
            out: list[Stmt] = []
            kq0 = simplify(ch0 // i64(cg) * i64(rows // 4))
            for kq in range(-(-nrows // 4)):
                word: PrimExpr | None = None
                for r in range(4 * kq, min(4 * kq + 4, nrows)):  # (bytes past K: zero)
                    tap, lc = r % g.taps, r // g.taps
                    byte: PrimExpr = tir.Cast("int32", _u8(byte_at(
                        lc, ch0 + i64(lc) if lc else ch0, tap // g.kernel[1],
                        tap % g.kernel[1], pos)))
                    if r % 4:
                        byte = tir.Call("shift_left", (byte, IntImm(8 * (r % 4), "int32")),
                                        "int32")
                    word = byte if word is None else tir.Call("bitwise_or", (word, byte),
                                                              "int32")
                assert word is not None
                out.append(BufferStore(bp, word, (tw, kq0 + i64(kq) if kq else kq0, c)))
            # (one loop for the group's words: the masks' tests shared)
            return seq(prologue(ch0, -(-nrows // g.taps)) + [For(
                tw, i64(0), i64(tiles), "serial",
                For(c, i64(0), i64(width), "vectorized", seq(out)))])
        full, rest = divmod(channels, cg)
        stmts: list[Stmt] = []
        if full:
            stmts.append(For(grp, i64(0), i64(full), "serial", words(grp * i64(cg), rows)))
        if rest:
            stmts.append(words(i64(full * cg), used - full * rows))
        return seq(stmts)

    def interior(first_row: PrimExpr) -> Stmt:
        """The shared packing: the bytes from the image rows from the
        panel's first row on (all inside the image)."""
        row = Var("first_row", "int64")  # (bound once: the bytes' indices stay short)

        def byte_at(_: int, ch: PrimExpr, i: int, j: int, p: PrimExpr) -> PrimExpr:
            return _interior_value(g, i, j, row, p,
                                   lambda y, x: load(ch, y, x), column_mask(0))
        return tir.LetStmt(row, first_row, direct(byte_at, lambda ch0, n: []))

    def staged_words(c0: int, margin: int) -> Stmt:
        """A panel of its own of a stride-1 "same" convolution: each group's
        channels' rows staged with the padding rows filled, then the bytes
        from the staged rows (the padding columns masked)."""
        n = (-(-(c0 % w + ncols) // w) + (g.kernel[0] - 1) * g.dilation[0] + 2 * margin) * w
        rows_buf = Buffer(name + "_rows", (i64(cg * n),), "uint8")
        r0 = c0 // w - g.padding[0] - margin  # the image row of staged row 0

        def prologue(ch0: PrimExpr, count: int) -> list[Stmt]:
            return [s for lc in range(count) for s in _stage_rows(
                g, rows_buf, r0, lambda y, x, lc=lc: load(simplify(ch0 + i64(lc)), y, x),
                lc * n, n // w)]

        def byte_at(lc: int, _: PrimExpr, i: int, j: int, p: PrimExpr) -> PrimExpr:
            x_edge = j * g.dilation[1] - g.padding[1]
            value: PrimExpr = tir.BufferLoad(rows_buf, (
                p + i64(lc * n + (i * g.dilation[0] + margin) * w + c0 % w + x_edge),))
            x_lo, x_hi = inside(x_edge, w, 1, w)
            if x_lo > 0 or x_hi < w:
                value = tir.Select(column_mask(c0)(x_lo, x_hi)(p + i64(c0)), _u8(g.fill),
                                   value)
            return value
        return tir.Allocate(rows_buf, direct(byte_at, prologue))

    def with_masks(stmts: list[Stmt], c0: int) -> Stmt:
        """``stmts`` after the padding columns' masks of the panel from ``c0``."""
        for (x_lo, x_hi), buf in reversed(list(masks.items())):
            q = Var("q", "int64")
            col = (q + i64(c0)) % i64(w)
            outside = tir.BinaryOp("or", tir.BinaryOp("<", col, i64(x_lo)),
                                   tir.BinaryOp(">=", col, i64(x_hi)))
            stmts.insert(0, For(q, i64(0), i64(ncols), "vectorized", BufferStore(
                buf, tir.Select(outside, IntImm(1, "uint8"), IntImm(0, "uint8")), (q,))))
            stmts = [tir.Allocate(buf, seq(stmts))]
        return seq(stmts)

    staged: list[Buffer] = []  # the staged rows of the current panel, if any

    def panel(c0: int, first_row: PrimExpr | None = None) -> Stmt:
        full, rest = divmod(channels, cg)
        masks.clear()
        staged.clear()
        if direct_words and first_row is not None:
            return with_masks([interior(first_row)], 0)
        if direct_words and margin is not None:
            return with_masks([staged_words(c0, margin)], c0)
        if margin is not None and first_row is None:
            n = (-(-(c0 % w + ncols) // w) + (g.kernel[0] - 1) * g.dilation[0] + 2 * margin) * w
            staged.append(Buffer(name + "_rows", (i64(n),), "uint8"))
        # One loop over the channels, their taps' code once (the groups of
        # cg channels and the rest apart, it was twice: the loop vectorizer's
        # time grows with the copies), each group regrouped after its last
        # channel, the rest after the loop.
        ch = Var("ch", "int64")
        body = taps_of(ch, (ch % i64(cg)) * i64(g.taps), c0, first_row)
        if full:
            # (clamped: a group's last channel is in a full group, so the
            # clamp changes nothing, but the words written are provably in bp)
            kq0 = tir.BinaryOp("min", ch // i64(cg), i64(full - 1)) * i64(rows // 4)
            words = regroup(cg, kq0)
            body += (words if cg == 1 else [IfThenElse(
                tir.BinaryOp("==", ch % i64(cg), i64(cg - 1)), seq(words))])
        stmts: list[Stmt] = [For(ch, i64(0), i64(channels), "serial", seq(body))]
        if rest:
            stmts += regroup(rest, i64(full * rows // 4))
        packing = tir.Allocate(scratch, with_masks(stmts, c0))
        return tir.Allocate(staged[0], packing) if staged else packing

    assert -(-channels * g.taps // 4) == kq_count
    # a stride-1 "same" convolution: every panel's words straight from the
    # image or its staged rows, when a group of channels is a few words
    # (a 3x3's 36 rows); any other: the scratch of window bytes
    margin = _staged_margin(g)
    direct_words = margin is not None and rows <= DIRECT_MAX_ROWS
    start = simplify(col0)
    if isinstance(start, IntImm):
        return panel(start.value)
    assert panels is not None, "a panel that is not a constant needs its loop"
    v, count, step = panels
    shared = _interior_panels(g, count, step)
    own = [n for n in range(count) if shared is None or not shared[0] <= n < shared[1]]
    body = [IfThenElse(tir.BinaryOp("==", v, i64(n)), panel(n * step)) for n in own]
    if shared is not None:
        lo, hi = shared
        # (clamped: the rows read are then provably inside the image)
        first = tir.BinaryOp("max", i64(lo), tir.BinaryOp("min", v, i64(hi - 1))) * i64(step // w)
        inner = tir.BinaryOp("and", tir.BinaryOp(">=", v, i64(lo)),
                             tir.BinaryOp("<", v, i64(hi)))
        body.append(IfThenElse(inner, panel(0, first)))
    return seq(body)


def _interior_panels(g: Windows, count: int, step: int) -> tuple[int, int] | None:
    """``[lo, hi)``: the panels of ``step`` columns (whole output rows of a
    stride-1 "same" convolution) whose positions every tap reads inside the
    image rows, or None."""
    (h, w), (oh, ow) = g.hw, g.grid
    if g.strides != (1, 1) or ow != w or step % w:
        return None
    lo, hi = 0, count
    for i in range(g.kernel[0]):
        for j in range(g.kernel[1]):
            y_edge, x_edge = i * g.dilation[0] - g.padding[0], j * g.dilation[1] - g.padding[1]
            y_lo, y_hi = inside(y_edge, h, 1, oh)
            off = y_edge * w + x_edge
            p0, p1 = max(y_lo * w, -off), min(y_hi * w, h * w - off)
            lo = max(lo, -(-p0 // step))
            hi = min(hi, p1 // step)
    return (lo, hi) if hi > lo else None


def _staged_margin(g: Windows) -> int | None:
    """The whole rows staged above and below a panel of a stride-1 "same"
    convolution (its taps' column offsets read that far past a row), or
    None when the convolution is not one."""
    w = g.hw[1]
    if g.strides != (1, 1) or g.grid[1] != w:
        return None
    return max(-(-abs(j * g.dilation[1] - g.padding[1]) // w) for j in range(g.kernel[1]))


def _stage_rows(g: Windows, rows: Buffer, r0: int,
                load: Callable[[PrimExpr, PrimExpr], PrimExpr], base: int = 0,
                count: int | None = None) -> list[Stmt]:
    """``rows`` from ``base`` on: ``count`` (default: all) image rows from
    ``r0`` on laid end to end, the fill for the rows outside the image (all
    ranges static)."""
    h, w = g.hw
    count = int(rows.shape[0].value) // w if count is None else count
    lo = min(max(0, -r0), count)
    hi = max(lo, min(count, h - r0))
    out: list[Stmt] = []
    for a, b in ((0, lo), (hi, count)):
        if b > a:
            q = Var("q", "int64")
            out.append(For(q, i64(0), i64((b - a) * w), "vectorized",
                           BufferStore(rows, _u8(g.fill), (q + i64(base + a * w),))))
    if hi > lo:
        k, x = Var("k", "int64"), Var("x", "int64")
        out.append(For(k, i64(lo), i64(hi - lo), "serial", For(
            x, i64(0), i64(w), "vectorized",
            BufferStore(rows, _u8(load(k + i64(r0), x)), (k * i64(w) + x + i64(base),)))))
    return out


def _interior_copy(g: Windows, i: PrimExpr, j: int, first_row: PrimExpr, ncols: int,
                   load: Callable[[PrimExpr, PrimExpr], PrimExpr],
                   store: Callable[[PrimExpr, PrimExpr], Stmt], column_mask: ColumnMask) -> Stmt:
    """Tap ``(i, j)`` (``i`` the kernel row, a loop variable) of a stride-1
    "same" convolution over the positions ``[first_row * w, first_row * w +
    ncols)`` (:func:`_interior_value`), one copy."""
    f = Var("f", "int64")
    return For(f, i64(0), i64(ncols), "vectorized",
               store(f, _interior_value(g, i, j, first_row, f, load, column_mask)))


def _interior_value(g: Windows, i: PrimExpr | int, j: int, first_row: PrimExpr, f: PrimExpr,
                    load: Callable[[PrimExpr, PrimExpr], PrimExpr],
                    column_mask: ColumnMask) -> PrimExpr:
    """The byte of tap ``(i, j)`` of a stride-1 "same" convolution at
    position ``f`` of a panel of whole rows from ``first_row``, all inside
    the image rows it reads (:func:`_interior_panels`): the channel's rows
    laid end to end, the padding columns masked (``column_mask`` by the
    position's offset in the panel, which starts a row)."""
    w = g.hw[1]
    x_edge = j * g.dilation[1] - g.padding[1]
    x_lo, x_hi = inside(x_edge, w, 1, w)
    lift = -(x_edge // w) if x_edge < 0 else 0  # whole rows keeping the offset >= 0
    src = f + i64(x_edge + lift * w)
    y0 = (first_row + i64(i * g.dilation[0] - g.padding[0] - lift) if isinstance(i, int)
          else simplify(first_row + i * i64(g.dilation[0]) - i64(g.padding[0] + lift)))
    value = load(y0 + src // i64(w), src % i64(w))
    if x_lo > 0 or x_hi < w:
        value = tir.Select(column_mask(x_lo, x_hi)(f), g.fill, value)
    return value


def _u8(v: PrimExpr) -> PrimExpr:
    return v if v.dtype == "uint8" else tir.Cast("uint8", v)
