"""A strided depthwise NCHW conv2d whose output rows are one or two vectors,
its taps read at the stride straight from the input plane.

:mod:`conv_depthwise_strided` copies every input row into ``sh x sw``
de-interleaved phase rows before the sums read them; for 192x28x28 3x3/2
(14-wide output rows) the copy is most of the kernel. Here each vector of
``lanes`` outputs of a row, tap ``(r0, r1)`` of output ``(y, x)``, reads
the input at column ``x*sw + r1*dw - left`` of row ``y*sh + r0*dh - top``:
a load at the stride, which LLVM's loop vectorizer makes whole vector
loads and shuffles (an interleaved group of ``sw`` members), the input
read once from where it is, nothing stored and read back. A row narrower
than a vector is one vector (the columns past ``OW`` computed and dropped)
read from the plane as if flat (past the row's end); a row of one to two
vectors is two vectors inside the row (the second overlapping the first),
the few columns whose taps reach the padding (``x = 0`` of a 3x3/2 with a
pad of 1) summed as scalars.

* **Whole groups.** LLVM vectorizes an interleaved group with a member
  missing (3x3/2 reads columns ``2x-1, 2x, 2x+1``: a pair and a lone
  member) only with a scalar iteration after the vector ones, which a loop
  of one vector does not have: it took 8 lanes and a remainder, slower
  than the phases (192x28x28 3x3/2 40 -> 74-79 us). So the loads are
  completed to whole groups of ``sw`` consecutive columns (column ``2x+2``
  for a 3x3/2, or ``2x-2`` where that one leaves the row), the extra
  member used in a select on ``ones[x]`` (1.0 in every lane, stored once a
  channel) that always takes the real tap: the value is unchanged.
* **Borders.** A tap whose column leaves the row (the left pad, the right
  one) would read the neighbouring row's end: a select makes it read 0.0,
  so each product is the padded convolution's (an infinity in a row's last
  column reaches only its own windows). The loads are bound (``LetStmt``)
  before the select: a Select's load operand is read lazily, which LLVM
  made a masked gather. The row and column of a flat read are the unsigned
  pair of a column made non-negative by borrowing whole rows (the signed
  pair was a gather). The output rows whose taps read a padding row, or
  whose flat reads would leave the plane, read a small zero-padded copy of
  their input rows instead (``edge_rows``: the first and last output rows
  of a 3x3/2 over 28x28); a border column's padding tap reads the zero in
  ``zero``, so that its product too is computed.
* **Two output rows an iteration**, one loop body a vector: the input row
  they share (``2y+1`` of a 3x3/2) is loaded and de-interleaved once
  (192x28x28 3x3/2 + ReLU6 29-32 -> 27-30 us, 240x28x28 + SiLU 47 -> 43-44
  us).

Each output is the same sum of the same products, in the direct
convolution's tap order, as the padded convolution's: rows of one vector
give the phases' values bitwise (192x28x28, 240x28x28 + SiLU); over rows
of two vectors the scalar border columns of the output rows computed one
at a time (the first, and the last of an even count) differ by an ulp at
most where LLVM contracts their multiply-adds otherwise (11 of 56448
outputs of 72x56x56 3x3/2, 2.4e-7). The sums go to a plane of
rows (in the cache), then the epilogue (bias, activation) stores the
channel's rows through ``store_through``. Alone at one thread on the Intel
Xeon (bench/README.md): 192x28x28 3x3/2 + ReLU6 40 -> 27-30 us, 240x28x28
3x3/2 + SiLU 59 -> 43-44 us, 144x56x56 3x3/2 + ReLU6 86-102 -> 77-89 us,
72x56x56 3x3/2 40-46 -> 36-42 us. Not taken: 5x5 windows (96x28x28 5x5/2
+ hardswish 30 -> 39 us: six loads and three groups a row of the window),
rows of half a vector (576x14x14 3x3/2 with 8-lane rows 33 -> 57 us), rows
of two vectors or more (there the phases are aligned and in a ring, and
each de-interleaved input row serves both odd-column taps of 1.5 output
rows, where each vector here shuffles its own groups: 96x112x112 3x3/2
263 -> 282-306 us before the pairs).
"""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, For, LetStmt, PrimExpr,
    Select, Stmt, Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64, row_col
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["schedule", "direct_rows", "takes", "MAX_TAPS"]

#: the most taps of a window the direct rows take (3x3; see the module docstring)
MAX_TAPS = 9


def takes(OW: int, sw: int, taps: int, lanes: int) -> bool:
    """Whether the direct rows take a depthwise convolution strided along
    its rows (``sw > 1``) whose output rows are ``OW`` wide (more than half
    a vector, less than two, not exactly one: rows of whole vectors and of
    two or more, aligned and in a ring, keep :mod:`conv_depthwise_strided`'s
    phases) and whose window has ``taps`` taps."""
    return sw > 1 and lanes < 2 * OW < 4 * lanes and OW != lanes and taps <= MAX_TAPS


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d) as direct rows
    read at the stride (see the module docstring); None unless it is
    depthwise with static sizes and :func:`takes` it."""
    dims = w.depthwise_dims()
    if dims is None:
        return None
    n, c, H, W, KH, KW, OH, OW = dims
    lanes = tuning.host_tuning().lanes(int(w.data.dtype[5:]))
    if not takes(OW, w.strides[1], KH * KW, lanes):
        return None
    return direct_rows(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)  # (or None)


def _middle(H: int, W: int, OH: int, sh: int, top: int, reach_rows: int,
            col_lo: int, col_hi: int) -> tuple[int, int]:
    """``[ya, yb)``: the output rows whose every tap reads input rows inside
    the plane (``reach_rows`` below the first), and whose flat reads of
    those rows (columns ``col_lo..col_hi``, past the row's ends) stay
    inside the plane."""
    lo = -(-max(0, -col_lo) // W)                  # the first row read flat
    hi = min(H - 1, (H * W - 1 - col_hi) // W)     # the last
    ya = max(0, -(-(lo + top) // sh))
    yb = min(OH, (hi - reach_rows + top) // sh + 1)
    return ya, max(ya, yb)


def _groups(offsets: list[int], sw: int, right: bool = False) -> list[int]:
    """The column offsets ``offsets`` completed to whole groups of ``sw``
    consecutive ones from the first (``right``: up to the last; see the
    module docstring)."""
    if right:
        return sorted({o + (offsets[-1] - o) % sw - e for o in offsets for e in range(sw)})
    return sorted({o - (o - offsets[0]) % sw + e for o in offsets for e in range(sw)})


def _vectors(OW: int, V: int, offsets: list[int], sw: int, W: int
             ) -> tuple[list[int], dict[int, tuple[list[int], bool]], list[int]] | None:
    """``(starts, plan, borders)``: the first columns of a row's vectors of
    ``V`` outputs (the last overlapping the one before), each vector's
    loads (``plan[start]``: its whole groups of columns, and whether they
    stay inside the row, else read flat) and the columns left to scalar
    sums (``borders``: those whose taps read the padding, in rows of a
    vector or more); None when no vector stays inside such a row."""
    groups = (_groups(offsets, sw, False), _groups(offsets, sw, True))
    if OW < V:          # one vector a row, read flat
        return [0], {0: (groups[0], False)}, []
    x_lo = -(-max(0, -offsets[0]) // sw)
    x_hi = min(OW, (W - 1 - offsets[-1]) // sw + 1)
    if x_hi - x_lo < V:
        return None
    starts = list(range(x_lo, x_hi - V + 1, V))
    if starts[-1] + V < x_hi:
        starts.append(x_hi - V)
    plan: dict[int, tuple[list[int], bool]] = {}
    for start in starts:
        inside = [g for g in groups
                  if start * sw + g[0] >= 0 and (start + V - 1) * sw + g[-1] < W]
        if not inside:
            return None
        plan[start] = (inside[0], True)
    return starts, plan, [x for x in range(OW) if not x_lo <= x < x_hi]


def direct_rows(w: ConvWorkload, n: int, c: int, hw: tuple[int, int],
                out_hw: tuple[int, int], window: tuple[int, int], lanes: int
                ) -> Tensor | None:
    """The depthwise convolution ``w`` (strides ``sh, sw``) as direct rows
    read at the stride (module docstring); None when a row of a vector or
    more has no vector whose reads stay inside it."""
    (sh, sw), (dh, dw), dt = w.strides, w.dilation, w.data.dtype
    H, W = hw
    OH, OW = out_hw
    KH, KW = window
    top, left = w.padding[0], w.padding[1]
    V = lanes
    offsets = [r1 * dw - left for r1 in range(KW)]
    layout = _vectors(OW, V, offsets, sw, W)
    if layout is None:
        return None
    starts, plan, borders = layout
    RL = -(-max(OW, starts[-1] + V) // lanes) * lanes       # a row's pitch in the sums
    col_lo = min([start * sw + g[0] for start, (g, _) in plan.items()]
                 + [x * sw + offsets[0] for x in borders])
    col_hi = max([(start + V - 1) * sw + g[-1] for start, (g, _) in plan.items()]
                 + [x * sw + offsets[-1] for x in borders])
    extras = any(set(g) - set(offsets) for g, _ in plan.values())
    ya, yb = _middle(H, W, OH, sh, top, (KH - 1) * dh, col_lo, col_hi)
    edges = [y for y in range(OH) if not ya <= y < yb]
    borrow = -(-max(0, -col_lo) // W)                   # rows borrowed (see flat)
    lead = -col_lo                                      # an edge row's columns before 0
    PW = -(-max(col_hi - col_lo + 1, lead + W) // lanes) * lanes   # an edge row's width
    zero = te.const(0, dt)
    Store = Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt]
    Load = Callable[[Var, int, int, bool], PrimExpr]

    def build(bufs: list[Buffer], out: Buffer, store: Store | None = None) -> Stmt:
        x, weight = bufs
        b, ch = Var("b", "int64"), Var("ch", "int64")
        sums = Buffer("row_sums", (i64(OH * RL),), dt)
        zbuf = Buffer("zero", (i64(1),), dt)
        edge = Buffer("edge_rows", (i64(KH * PW),), dt)
        ones = Buffer("ones", (i64(V),), dt)

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)

        def row(y: PrimExpr, load: Load, at: Callable[[int, int], PrimExpr | None],
                count: int = 1) -> Stmt:
            # output rows y .. y + count - 1: each vector of them in one loop
            # (the rows two output rows share read once), then the border
            # columns; at(dy, col) is the scalar of a border tap (None: zbuf)
            stmts = [vector(y, start, load, count) for start in starts]
            for t in range(count):
                for x_ in borders:
                    acc: PrimExpr | None = None
                    for r0 in range(KH):
                        for r1, off in enumerate(offsets):
                            v = at(t * sh + r0 * dh, x_ * sw + off)
                            term = (BufferLoad(zbuf, (i64(0),)) if v is None else v) \
                                * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1)))
                            acc = term if acc is None else acc + term
                    assert acc is not None
                    stmts.append(BufferStore(sums, acc, ((y + t) * RL + x_,)))
            return seq(stmts)

        def vector(y: PrimExpr, start: int, load: Load, count: int) -> Stmt:
            # load(j, dy, col, inside) reads input column j*sw + col of input
            # row y*sh - top + dy
            j = Var("j", "int64")
            full, inside = plan[start]
            extra = [o for o in full if o not in offsets]
            vals: dict[tuple[int, int], Var] = {}
            lets: list[tuple[Var, PrimExpr]] = []
            for dy in sorted({t * sh + r0 * dh for t in range(count) for r0 in range(KH)}):
                for o in full:                   # each group's members in order
                    vals[(dy, o)] = Var(f"t{dy}_{len(vals)}", dt)
                    lets.append((vals[(dy, o)], load(j, dy, start * sw + o, inside)))
            stores: list[Stmt] = []
            for t in range(count):
                acc: PrimExpr | None = None
                for r0 in range(KH):             # the direct convolution's tap order
                    dy = t * sh + r0 * dh
                    for r1, off in enumerate(offsets):
                        v: PrimExpr = vals[(dy, off)]
                        col = (j + start) * sw + off
                        conds = ([BinaryOp(">=", col, i64(0))] if start * sw + off < 0
                                 else []) \
                            + ([BinaryOp("<", col, i64(W))]
                               if (min(start + V, OW) - 1) * sw + off >= W else [])
                        if conds:
                            v = Select(conds[0] if len(conds) == 1
                                       else BinaryOp("and", *conds), v, zero)
                        for o in extra if r1 == KW - 1 else []:
                            # the groups' extra members, used where they
                            # change nothing (ones[j] is 1.0), whatever the lane
                            v = Select(BinaryOp("!=", BufferLoad(ones, (j,)), zero), v,
                                       vals[(dy, o)])
                        term = v * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1)))
                        acc = term if acc is None else acc + term
                assert acc is not None
                stores.append(BufferStore(sums, acc, ((y + t) * RL + start + j,)))
            body: Stmt = seq(stores)
            for tv, value in reversed(lets):
                body = LetStmt(tv, value, body)
            return For(j, i64(0), i64(V), "vectorized", body)

        def flat(y: PrimExpr) -> Load:
            def load(j: Var, dy: int, off: int, inside: bool) -> PrimExpr:
                if inside:
                    return BufferLoad(x, (b, ch, y * sh + (dy - top), j * sw + off))
                # the unsigned pair of a column made non-negative (whole rows
                # borrowed): LLVM sees the address as affine in j
                row, col = row_col(j * sw + (off + borrow * W), W)
                return BufferLoad(x, (b, ch, y * sh + (dy - top - borrow) + row, col))
            return load

        def plain(y: PrimExpr) -> Callable[[int, int], PrimExpr | None]:
            # a border column's tap: the input's element, None in the padding
            return lambda dy, col: BufferLoad(x, (b, ch, y * sh + (dy - top), i64(col))) \
                if 0 <= col < W else None

        def edge_row(y: int) -> Stmt:
            # the rows output row y reads, zero-padded (the pad columns'
            # taps are selected to zero anyway; the zeros keep the dropped
            # lanes defined), then the row from them
            stmts: list[Stmt] = []
            for r0 in range(KH):
                iy = y * sh + r0 * dh - top
                spans = [(0, PW)]
                if 0 <= iy < H:
                    q = Var("q", "int64")
                    stmts.append(For(q, i64(0), i64(W), "vectorized", BufferStore(
                        edge, BufferLoad(x, (b, ch, i64(iy), q)), (i64(r0 * PW + lead) + q,))))
                    spans = [(0, lead), (lead + W, PW)]
                for lo, hi in spans:
                    if hi > lo:
                        z = Var("z", "int64")
                        stmts.append(For(z, i64(0), i64(hi - lo), "serial", BufferStore(
                            edge, zero, (i64(r0 * PW + lo) + z,))))
            stmts.append(row(i64(y), lambda j, dy, off, _: BufferLoad(
                edge, (i64(dy // dh * PW + lead + off) + j * sw,)),
                lambda dy, col: BufferLoad(edge, (i64(dy // dh * PW + lead + col),))))
            return seq(stmts)

        o, y, y2, j = (Var(v, "int64") for v in ("o", "y", "y2", "j"))
        stmts: list[Stmt] = [For(o, i64(0), i64(V), "serial",
                                 BufferStore(ones, te.const(1, dt), (o,)))] if extras else []
        if borders:
            stmts.append(BufferStore(zbuf, zero, (i64(0),)))
        stmts += [edge_row(e) for e in edges if e < ya]
        pairs = (yb - ya) // 2      # two output rows an iteration (see row)
        if pairs:
            yy = Var("yy", "int64")
            stmts.append(For(yy, i64(0), i64(pairs), "serial",
                             row(ya + 2 * yy, flat(ya + 2 * yy), plain(ya + 2 * yy), 2)))
        if yb > ya + 2 * pairs:
            stmts.append(For(y, i64(ya + 2 * pairs), i64(yb - ya - 2 * pairs), "serial",
                             row(y, flat(y), plain(y))))
        stmts += [edge_row(e) for e in edges if e >= yb]
        # the epilogue over the channel's rows of sums
        stmts.append(For(y2, i64(0), i64(OH), "serial", For(
            j, i64(0), i64(OW), "vectorized", put(BufferLoad(sums, (y2 * RL + j,)),
                                                  (b, ch, y2, j)))))
        work = n * c * OH * V * KH * KW
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(sums, Allocate(edge, Allocate(ones, Allocate(zbuf, seq(stmts)))))))
    return te.extern((i64(n), i64(c), i64(OH), i64(OW)), dt, [w.data, w.weight], build,
                     name="T_conv2d", store_through=build)
