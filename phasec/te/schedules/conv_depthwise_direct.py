"""A strided depthwise NCHW conv2d whose output rows are one vector each,
its taps read at the stride straight from the input plane.

:mod:`conv_depthwise_strided`'s flat form copies every input row into
``sh x sw`` de-interleaved phase rows before the sums read them; for
192x28x28 3x3/2 (14-wide output rows) the copy is most of the kernel. Here
an output row of ``OW <= lanes`` columns is one vector of ``lanes`` (the
columns past ``OW`` computed and dropped), and tap ``(r0, r1)`` of output
``(y, x)`` reads the channel's plane as if flat at ``(y*sh + r0*dh -
top)*W + x*sw + r1*dw - left``: a load at the stride, which LLVM's loop
vectorizer makes whole vector loads and shuffles (an interleaved group of
``sw`` members), the input read once from where it is, nothing stored and
read back.

* **Whole groups.** LLVM vectorizes an interleaved group with a member
  missing (3x3/2 reads columns ``2x-1, 2x, 2x+1``: a pair and a lone
  member) only with a scalar iteration after the vector ones, which a loop
  of one vector does not have: it took 8 lanes and a remainder, slower
  than the phases (192x28x28 3x3/2 40 -> 74-79 us). So the loads are
  completed to whole groups of ``sw`` consecutive columns (column ``2x+2``
  for a 3x3/2), the extra member used in a select on ``ones[x]`` (1.0 in
  every lane, stored once a channel) that always takes the real tap: the
  value is unchanged.
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
  of a 3x3/2 over 28x28).

The middle output rows go two an iteration, one loop body: the input row
they share (``2y+1`` of a 3x3/2) is loaded and de-interleaved once
(192x28x28 3x3/2 + ReLU6 29-32 -> 27-30 us, 240x28x28 + SiLU 47 -> 43-44
us). Each output is the same sum, in the direct convolution's tap order,
as the padded convolution's: the values are unchanged. The sums go to a plane of
rows of ``lanes`` (in the cache), then the epilogue (bias, activation)
stores the channel's rows through ``store_through`` (each 14-wide row one
masked vector). Alone at one thread on the Intel Xeon (bench/README.md):
192x28x28 3x3/2 + ReLU6 40 -> 27-30 us, 240x28x28 3x3/2 + SiLU 59 -> 43-44
us.
Not taken: 5x5 windows (96x28x28 5x5/2 + hardswish 30 -> 39 us: six loads
and three groups a row of the window), rows of half a vector (576x14x14
3x3/2 with 8-lane rows 33 -> 57 us), rows of a vector or more (the phases'
copy shares each de-interleaved input row between output rows and taps;
here every vector shuffles its own: 144x56x56 3x3/2 104-120 against 107
us, 96x112x112 3x3/2 282-306 against 263 us).
"""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, Cast, For, IntImm, LetStmt, PrimExpr,
    Select, Stmt, Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["schedule", "direct_rows", "takes", "MAX_TAPS"]

#: the most taps of a window the direct rows take (3x3; see the module docstring)
MAX_TAPS = 9


def takes(OW: int, sw: int, taps: int, lanes: int) -> bool:
    """Whether the direct rows take a depthwise convolution strided along
    its rows (``sw > 1``) whose output rows are ``OW`` wide (more than half
    a vector, less than one: rows of whole vectors take
    :mod:`conv_depthwise_strided`'s) and whose window has ``taps`` taps."""
    return sw > 1 and lanes < 2 * OW < 2 * lanes and taps <= MAX_TAPS


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
    return direct_rows(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)


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


def _groups(offsets: list[int], sw: int) -> list[int]:
    """The column offsets ``offsets`` completed to whole groups of ``sw``
    consecutive ones from the first (see the module docstring)."""
    return sorted({o - (o - offsets[0]) % sw + e for o in offsets for e in range(sw)})


def direct_rows(w: ConvWorkload, n: int, c: int, hw: tuple[int, int],
                out_hw: tuple[int, int], window: tuple[int, int], lanes: int) -> Tensor:
    """The depthwise convolution ``w`` (strides ``sh, sw``, output rows of at
    most ``lanes``) as direct rows read at the stride (module docstring)."""
    (sh, sw), (dh, dw), dt = w.strides, w.dilation, w.data.dtype
    H, W = hw
    OH, OW = out_hw
    KH, KW = window
    top, left = w.padding[0], w.padding[1]
    V = lanes
    offsets = [r1 * dw - left for r1 in range(KW)]
    full = _groups(offsets, sw)
    extra = [o for o in full if o not in offsets]
    col_lo, col_hi = full[0], sw * (V - 1) + full[-1]   # the columns a row reads
    ya, yb = _middle(H, W, OH, sh, top, (KH - 1) * dh, col_lo, col_hi)
    edges = [y for y in range(OH) if not ya <= y < yb]
    borrow = -(-max(0, -col_lo) // W)                   # rows borrowed (see flat)
    lead = -col_lo                                      # an edge row's columns before 0
    PW = -(-max(col_hi - col_lo + 1, lead + W) // lanes) * lanes   # an edge row's width
    zero = te.const(0, dt)
    Store = Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt]
    Load = Callable[[Var, int, int], PrimExpr]

    def build(bufs: list[Buffer], out: Buffer, store: Store | None = None) -> Stmt:
        x, weight = bufs
        b, ch = Var("b", "int64"), Var("ch", "int64")
        sums = Buffer("row_sums", (i64(OH * V),), dt)
        edge = Buffer("edge_rows", (i64(KH * PW),), dt)
        ones = Buffer("ones", (i64(V),), dt)

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)

        def row(y: PrimExpr, load: Load, count: int = 1) -> Stmt:
            # output rows y .. y + count - 1, one vector each, in one loop:
            # load(j, dy, off) reads input column j*sw + off of input row
            # y*sh - top + dy; the rows two output rows share read once
            j = Var("j", "int64")
            vals: dict[tuple[int, int], Var] = {}
            lets: list[tuple[Var, PrimExpr]] = []
            for dy in sorted({t * sh + r0 * dh for t in range(count) for r0 in range(KH)}):
                for o in full:                   # each group's members in order
                    vals[(dy, o)] = Var(f"t{dy}_{len(vals)}", dt)
                    lets.append((vals[(dy, o)], load(j, dy, o)))
            stores: list[Stmt] = []
            for t in range(count):
                acc: PrimExpr | None = None
                for r0 in range(KH):             # the direct convolution's tap order
                    dy = t * sh + r0 * dh
                    for r1, off in enumerate(offsets):
                        v: PrimExpr = vals[(dy, off)]
                        col = j * sw + off
                        conds = ([BinaryOp(">=", col, i64(0))] if off < 0 else []) \
                            + ([BinaryOp("<", col, i64(W))] if (OW - 1) * sw + off >= W
                               else [])
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
                stores.append(BufferStore(sums, acc, ((y + t) * V + j,)))
            body: Stmt = seq(stores)
            for tv, value in reversed(lets):
                body = LetStmt(tv, value, body)
            return For(j, i64(0), i64(V), "vectorized", body)

        def flat(y: PrimExpr) -> Load:
            def load(j: Var, dy: int, off: int) -> PrimExpr:
                # the unsigned pair of a column made non-negative (whole rows
                # borrowed): LLVM sees the address as affine in j
                u = Cast("uint64", j * sw + (off + borrow * W))
                wd = IntImm(W, "uint64")
                return BufferLoad(x, (
                    b, ch, y * sh + (dy - top - borrow)
                    + Cast("int64", BinaryOp("//", u, wd, "uint64")),
                    Cast("int64", BinaryOp("%", u, wd, "uint64"))))
            return load

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
            stmts.append(row(i64(y), lambda j, dy, off: BufferLoad(
                edge, (i64(dy // dh * PW + lead + off) + j * sw,))))
            return seq(stmts)

        o, y, y2, j = (Var(v, "int64") for v in ("o", "y", "y2", "j"))
        stmts: list[Stmt] = [For(o, i64(0), i64(V), "serial",
                                 BufferStore(ones, te.const(1, dt), (o,)))] if extra else []
        stmts += [edge_row(e) for e in edges if e < ya]
        pairs = (yb - ya) // 2      # two output rows an iteration (see row)
        if pairs:
            yy = Var("yy", "int64")
            stmts.append(For(yy, i64(0), i64(pairs), "serial",
                             row(ya + 2 * yy, flat(ya + 2 * yy), 2)))
        if yb > ya + 2 * pairs:
            stmts.append(For(y, i64(ya + 2 * pairs), i64(yb - ya - 2 * pairs), "serial",
                             row(y, flat(y))))
        stmts += [edge_row(e) for e in edges if e >= yb]
        # the epilogue over the channel's rows of sums
        stmts.append(For(y2, i64(0), i64(OH), "serial", For(
            j, i64(0), i64(OW), "vectorized", put(BufferLoad(sums, (y2 * V + j,)),
                                                  (b, ch, y2, j)))))
        work = n * c * OH * V * KH * KW
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(sums, Allocate(edge, Allocate(ones, seq(stmts))))))
    return te.extern((i64(n), i64(c), i64(OH), i64(OW)), dt, [w.data, w.weight], build,
                     name="T_conv2d", store_through=build)
