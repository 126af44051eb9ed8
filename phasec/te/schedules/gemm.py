"""The blocked, packed GEMM schedule of a matmul (and batch matmul) or
convolution nest, with its epilogue fused into the output tile.

The anchor is a sum of ``A * B`` where ``A`` uses the row axis but not the
last (column) axis of the output and ``B`` the other way round: a matmul
(rows ``i``, columns ``j``, reduction ``k``), or a convolution (NCHW: rows
the output channels, columns the output positions of one output row, the
reduction axes ``rc, ry, rx`` packed flat as ``k``; a channels-last layout
the other way round). Every other output axis is a "batch" loop around the
GEMM. For one matrix (inside the batch loops), with the register tile
MR x NR and panels of NC = TPP * NR columns (sizes from
:class:`phasec.target.tuning.TargetTuning`)::

    for each panel of NC columns of B:               # parallel when there are several
        Bp[t, k, c] = B[k, col0 + t*NR + c]          # packed once per panel (contiguous
                                                     # micro-panels K x NR, L2-sized)
        for each tile of MR rows (then the M % MR remainder rows):
            for each micro-panel t of the panel:
                acc[MR, NR] = 0                      # registers
                prefetch the epilogue's lines        # a residual, the output (K >= 256)
                for k: acc[ii, c] += A[row0+ii, k] * Bp[t, k, c]
                out[row0+ii, col0+t*NR+c] = epilogue(acc[ii, c])

The N % NR remainder columns get a narrower tile (reading B directly; its
columns made of whole vectors, then vectors of 8, 4 lanes..., so that each
is one register), or, when they are not whole vectors, join the last
micro-panel in one wider tile with fewer rows (56 = 32 + 24 columns: one
4 x 56 tile, not 8 x 32 + 8 x 24, whose half-width vectors leave the FMA
units partly idle); the M % MR
remainder rows a shorter one (a static M) or a loop of one-row tiles (a
symbolic M). Panels are not packed when fewer than
``gemm_pack_min_row_tiles`` row tiles would read them (e.g. a batch-1
matrix-vector product: the copy would cost as much as the product), nor
when B is small enough to stay in L2 (``gemm_pack_min_bytes``), nor when
it is a window sliding along one row (a 1-D convolution: its taps re-read
the same few input rows, which stay in L1).

K is not split: a packed micro-panel (K x NR) is read sequentially from L2
while the panel (K x NC, sized to ``gemm_panel_bytes``) stays there, so the
accumulators never leave registers and the epilogue applies to the finished
tile.

An integer GEMM is the same schedule over int32 sums of ``T.dot4_u8s8`` of
words of four 8-bit values (:mod:`phasec.backend.llvm.intdot`: a vpdpbusd);
an integer convolution's (``nn.im2col_matmul``) packs each panel's words
straight from the image (:mod:`.gemm_windows`).

Measurements behind these choices: bench/README.md, "Schedule notes moved
from docstrings".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, AttrStmt, BinaryOp, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var,
)
from phasec.te.analysis import static_int, vars_of
from phasec.te.operation import i64
from phasec.te.schedules.gemm_operands import (
    constant_matrix, is_dot4, row_group, sliding_window, unit_stride,
)
from phasec.te.schedules.gemm_prefetch import (
    epilogue_prefetch, index_add as _add, index_mul as _mul, next_panel_prefetch,
    next_rows_prefetch,
)
from phasec.te.schedules.gemm_windows import WINDOWS_ATTR, Windows, pack_panel
from phasec.te.schedules.gemm_amx import AMX_ROWS, amx_blocks, amx_tile, plan_rows, rest_rows
from phasec.te.schedules.gemm_prepack import (
    PACK_MARK, PREPACK_ATTR, PREPACK_TRANSPOSED_ATTR, PREPACK_WIDTH_ATTR, PREPACK_WORDS_ATTR,
    b_parameter, word_parameter,
)
from phasec.te.stmt import block, combine, seq
from phasec.te.tensor import ProducerLoad, Tensor, post_order

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter
    from phasec.te.lowering import Stage

_I64 = "int64"




@dataclass
class GemmPlan:
    """What the GEMM schedule needs to know about one anchor."""

    a_expr: PrimExpr       # the row operand (uses the row axis, not the column axis)
    b_expr: PrimExpr       # the column operand (uses the column axis, not the row axis)
    b_first: bool          # the product is ``b * a`` (operand order kept)
    row_axis: int          # the output axis of the tile rows (the last one: the columns)
    rows: int              # MR
    cols: int              # NR
    panel_tiles: int       # TPP: micro-panels per packed panel
    pack: bool
    lanes: int             # elements of one vector register
    #: a matrix-vector product (a few rows): tiles ``cols`` wide whose
    #: accumulators live in L1, one vectorized loop over them per k
    wide: bool = False
    #: B is read by gathers (see :func:`.gemm_operands.unit_stride`), or a
    #: constant streamed by a matrix-vector product: the last, narrower panel
    #: of columns is packed too
    pack_rest: bool = False
    #: B uses the row axis only as ``row // c`` with ``c`` a multiple of
    #: ``row_group`` (a grouped convolution): every tile's rows lie in one
    #: group (whole tiles, then each group's last rows in a smaller one) and
    #: the tile reads B at its first row (0: B does not use the row axis)
    row_group: int = 0
    #: B is the windows of an image (an integer convolution, ``WINDOWS_ATTR``):
    #: every panel packed from the image (gemm_windows.pack_panel)
    windows: Windows | None = None

    def batch_axes(self, m: int) -> list[int]:
        """The output axes looped around the GEMM (all but the rows and columns)."""
        return [t for t in range(m - 1) if t != self.row_axis]


@dataclass(frozen=True)
class GemmNest:
    """The GEMM schedule of one nest: the anchor and its plan."""

    anchor: Stage
    plan: GemmPlan
    vectorizes_last_axis = False

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """The batch loops (:meth:`GemmPlan.batch_axes`); the GEMM emits the rest."""
        return [("axis", t, nest.shape[t]) for t in self.plan.batch_axes(nest.m)]

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        """The GEMM of one matrix, parallel when no outer loop is."""
        parallel = (nest.opt.parallel and nest.parallel_at < 0
                    and nest.work() >= nest.opt.min_parallel_work)
        return GemmEmitter(nest, self.plan, parallel).emit()


def schedule(nest: NestEmitter) -> GemmNest | None:
    """The GEMM schedule of ``nest`` when its tile anchor is a product this
    schedule takes (:func:`plan_gemm`), else None."""
    anchor = nest.tile_anchor.stage
    plan = plan_gemm(nest, anchor)
    return None if plan is None else GemmNest(anchor, plan)


#: anchors the GEMM schedule takes: matmuls and convolutions, whose output
#: channels are the rows and output positions the columns (or the other way
#: round in channels-last layouts). A grouped convolution reads its input
#: channel by output channel group (``oc // og``): its register tiles are
#: kept within a group (see ``GemmPlan.row_group``), so that every tile
#: reads one B; a depthwise one (``og`` = 1) has no such split
GEMM_TAGS = ("matmul", "conv1d", "conv2d", "conv3d")


def plan_gemm(nest: NestEmitter, anchor: Stage) -> GemmPlan | None:
    """The GEMM plan for ``nest`` (its last axis the anchor's columns), or
    None when the anchor is not a product this schedule takes (see
    :func:`phasec.te.schedules.schedule_nest`)."""
    tuning = nest.opt.target
    m = nest.m
    expr = anchor.expr
    dot4 = is_dot4(expr) and anchor.tensor.dtype == "int32"
    if (m < 2 or anchor.tensor.op.tag not in GEMM_TAGS or anchor.combiner != "sum"
            or not anchor.raxes or (anchor.tensor.dtype not in ("float32", "float64")
                                    and not dot4)):
        return None
    if anchor is not nest.root:
        if len(anchor.axes) != m or any(b is not a for b, a in zip(anchor.binding, nest.root.axes)):
            return None
    if dot4:
        operands = expr.args
    elif isinstance(expr, BinaryOp) and expr.op == "*":
        operands = (expr.lhs, expr.rhs)
    else:
        return None
    jvar = anchor.axes[m - 1]
    lhs, rhs = vars_of(operands[0]), vars_of(operands[1])
    split = None
    group = 0  # B reads the rows in groups of this many (a grouped convolution), or 0
    for row_axis in range(m - 2, -1, -1):  # matmul: m - 2; conv2d NCHW: the channels
        ivar = anchor.axes[row_axis]
        for a, b, first in ((operands[0], operands[1], False),
                            (operands[1], operands[0], True)):
            av, bv = (lhs, rhs) if not first else (rhs, lhs)
            if id(ivar) not in av or id(jvar) in av or id(jvar) not in bv:
                continue
            if id(ivar) not in bv:
                split = (row_axis, a, b, first)
            else:
                group = row_group(b, ivar)
                if group:
                    split = (row_axis, a, b, first)
            if split is not None:
                break
        if split is not None:
            break
    if split is None:
        return None
    row_axis, a_expr, b_expr, b_first = split
    # other stages computed inside the loops of the tile would need their own
    # place in it (stages at the batch loops' level are fine)
    if [s for s in nest.attached if s.depth > row_axis and s is not anchor]:
        return None
    N = static_int(nest.shape[m - 1])
    if N is None or N < 1:
        return None
    rexts = [static_int(nest.low.map_shape(ax.extent)) for ax in anchor.raxes]
    if len(rexts) > 1 and any(e is None for e in rexts):
        return None  # several reduction axes are packed flat: static extents only
    bits = 64 if anchor.tensor.dtype == "float64" else 32
    rows, cols = tuning.gemm_rows, tuning.gemm_cols(bits)
    if dot4 and tuning.int_gemm_tile:
        # (the integer GEMM's tile, where the target sets one of its own)
        rows, cols = tuning.int_gemm_tile[0], tuning.int_gemm_tile[1] * tuning.lanes(bits)
    elif N <= tuning.lanes(bits) and tuning.gemm_narrow_rows:
        # columns of one vector: the accumulators of a few rows would not
        # cover the FMA units' latency
        rows = tuning.gemm_narrow_rows
    if group:
        # every register tile's rows in one group: B is the same for all of
        # them. The plan's rows (at most the group's), each group's last rows
        # in one smaller tile when they do not divide it (GemmEmitter._panel).
        # Rows that divide the group instead (2 for 34) were slower: tiles
        # of two rows reuse each B vector twice, not eight times
        M = static_int(nest.shape[row_axis])
        if M is None or M % group:
            return None
        rows = 1 << (rows.bit_length() - 1)  # (halved below: 6 rows would give 3, then 1)
        while rows > group:
            rows //= 2
        if rows < 2:
            return None
    K = None if rexts[0] is None else max(1, math.prod(rexts))
    k_guess = K if K is not None else 1024
    elem = bits // 8
    max_cols = min(tuning.gemm_panel_max_cols,
                      tuning.gemm_panel_bytes // max(1, k_guess * elem))
    tpp_max = max(1, max_cols // cols)
    n_tiles = N // cols
    if n_tiles <= tpp_max:
        tpp = max(1, n_tiles)
    else:
        tpp = max(d for d in range(1, tpp_max + 1) if n_tiles % d == 0)
        if 2 * tpp < tpp_max:
            tpp = tpp_max  # a partial last panel beats many small panels
    M = static_int(nest.shape[row_axis])
    if M is not None and M < 1:
        return None  # nothing to compute: the plain nest handles empty shapes
    if (M is not None and M <= tuning.gemv_max_rows and K is not None
            and constant_matrix(b_expr, nest.opt.constant_inputs,
                                 tuple(ax.var for ax in anchor.raxes))):
        # A constant B (a weight): micro-panels of gemv_cols(M) columns packed
        # once per build (PackConstantWeights), each one sequential stream
        # into register accumulators (see TargetTuning.gemv_cols)
        width = tuning.gemv_cols(M, bits)
        lanes = tuning.lanes(bits)
        # fewer columns than a tile: one micro-panel of whole vectors (a
        # squeeze-excite's 48); for B read transposed (B[j, k]), whose other
        # columns would be gathers, also with the last columns read as they are
        if N < width and (N % lanes == 0 or (N >= lanes and id(jvar) in vars_of(
                b_expr.indices[0]))):
            width = N // lanes * lanes
        if N >= width:
            # Its last, narrower columns are packed too, at build time (as the
            # first of a micro-panel, zero past them): read in place, B[k, j]
            # for a few hundred j a row 4 KB apart, they were a stream the
            # prefetchers lose at every page and kept the unpacked weight
            # alive beside the packed one (1 x 1280 @ 1280 x 1000 + bias,
            # one core: 60.7 -> 53.0 us warm, 165 -> 115 us after a 32 MB
            # sweep of the caches, as in a model); B read transposed would
            # be gathers there
            return GemmPlan(a_expr, b_expr, b_first, row_axis, M, width, 1, True,
                            tuning.lanes(bits), pack_rest=True)
    # the windows of an image: every panel packed from it, the last narrower
    # one too (read in place, B is a gather per element), whatever M
    windows = anchor.tensor.op.attrs.get(WINDOWS_ATTR) if dot4 and not group else None
    if (windows is not None and _windows_channels(windows, K) is not None
            and windows.data is not None and windows.data.is_placeholder):
        # (the image read from its buffer: not a producer inlined into the nest)
        # panels of whole image rows when a stride-1 "same" convolution's
        # fit: they share one packing (gemm_windows.pack_panel)
        whole = windows.hw[1] // math.gcd(windows.hw[1], cols)
        if (windows.strides == (1, 1) and windows.grid[1] == windows.hw[1]
                and whole <= tpp_max and n_tiles > whole):
            tpp = tpp_max // whole * whole
        elif -(-n_tiles // tpp) > _WINDOW_PANELS:
            # each panel's packing written on its own: wider panels, fewer
            # of them (the kernel's code, and its compile time, grow with them)
            tpp = -(-n_tiles // _WINDOW_PANELS)
        return GemmPlan(a_expr, b_expr, b_first, row_axis, plan_rows(tuning, rows, cols), cols,
                        tpp, n_tiles > 0, tuning.lanes(bits), pack_rest=True, windows=windows)
    if M is not None and M <= tuning.gemv_max_rows and not group:
        # B streams past once, its rows read whole (see TargetTuning.gemv_acc_bytes)
        width = max(1, min(N, tuning.gemv_acc_bytes // (M * elem)))
        return GemmPlan(a_expr, b_expr, b_first, row_axis, max(M, 1), width, 1, False,
                        tuning.lanes(bits), wide=True)
    row_tiles = None if M is None else -(-M // rows)
    # B not contiguous along the columns (a strided convolution reads every
    # s-th input column): the tiles' vector loads would be gathers, so every
    # panel, the last narrower one too, is packed whatever its size
    gather = not group and not unit_stride(b_expr, jvar)
    pack = (n_tiles > 0 and (row_tiles is None or row_tiles >= tuning.gemm_pack_min_row_tiles)
            and (K is None or K * N * elem >= tuning.gemm_pack_min_bytes) and not group)
    # (fewer columns than a tile: packed when B is a constant, at build time)
    pack = pack or (gather and (n_tiles > 0 or constant_matrix(
        b_expr, nest.opt.constant_inputs, tuple(ax.var for ax in anchor.raxes))))
    # a 1-D window sliding along B's rows (a 1-D convolution: t[.., j + r]):
    # every tap reads the same input row shifted, so the packed panel would
    # be the taps' copies of a few rows that stay in L1 when read in place
    # (64 -> 64 channels, 1x9 over 4000: 2.77 -> 2.62 ms, one thread)
    pack = pack and not sliding_window(b_expr, jvar, [ax.var for ax in anchor.raxes],
                                        rexts)
    # a constant B's words are packed at build time: reading packed panels
    # beats regrouping its bytes on every call, whatever its size
    pack = pack or (dot4 and n_tiles > 0 and constant_matrix(b_expr, nest.opt.constant_inputs))
    # a run-time B of bytes too, whatever its size, once two row tiles read
    # it: each tile would regroup four rows' bytes into words again (a 1x1
    # QDQ conv, 128 -> 128 channels over 28x28: 83 -> 70 us)
    pack = pack or (dot4 and n_tiles > 0 and not group
                    and (row_tiles is None or row_tiles >= tuning.gemm_pack_min_row_tiles))
    if dot4 and pack and not group:
        rows = plan_rows(tuning, rows, cols)
    return GemmPlan(a_expr, b_expr, b_first, row_axis, rows, cols, tpp, pack, tuning.lanes(bits),
                    row_group=group, pack_rest=gather)


#: at most this many panels of windows packed each by its own code
_WINDOW_PANELS = 8


def _windows_channels(w: Windows, kq: int | None) -> int | None:
    """The image's channels when the windows are its rows' packed words
    (``kq`` words of four rows), else None."""
    c = static_int(w.data.shape[1]) if w.data is not None else None
    if c is None or kq is None or -(-c * w.taps // 4) != kq:
        return None
    return c


def _byte_rows(plan: GemmPlan) -> int | None:
    """K (bytes) of the 2-D 8-bit B whose words the column operand reads."""
    loads = [n for n in post_order([plan.b_expr]) if isinstance(n, ProducerLoad)]
    return static_int(loads[0].tensor.shape[0]) if loads else None


class GemmEmitter:
    """Emits the GEMM part of one nest (inside its batch loops)."""

    def __init__(self, nest: NestEmitter, plan: GemmPlan, parallel: bool) -> None:
        self.nest = nest
        self.low = nest.low
        self.plan = plan
        self.parallel = parallel
        self.root, self.anchor, self.m = nest.root, nest.anchor, nest.m
        self.dtype = self.anchor.tensor.dtype
        self.ri = plan.row_axis
        self.M = nest.shape[self.ri]
        self.N = static_int(nest.shape[self.m - 1])
        # the reduction axes, packed flat (k = (k0 * E1 + k1) * E2 + k2 ...)
        self.rexts = [self.low.map_shape(ax.extent) for ax in self.anchor.raxes]
        self.K = (self.rexts[0] if len(self.rexts) == 1
                  else i64(math.prod(static_int(e) for e in self.rexts)))
        self.vectorize = nest.opt.vectorize
        #: the loop over whole panels (variable, count, columns a panel)
        self._panels: tuple[Var, int, int] | None = None

    # -- structure -----------------------------------------------------------
    def _vector_pieces(self, width: int) -> list[int]:
        """The vectors a row of ``width`` accumulators is made of: whole
        vectors, then the rest as powers of two down to 4 (12 -> 8 + 4), each
        one register that LLVM vectorizes whole, then the last 1-3 columns
        as one short loop. (A 12-wide vectorized loop became a vector of 8
        plus a scalar loop, and the accumulators went to memory.)"""
        lanes = self.plan.lanes
        pieces = [lanes] * (width // lanes)
        tail = width % lanes
        bit = lanes
        while tail >= 4:
            bit //= 2
            if tail >= bit:
                pieces.append(bit)
                tail -= bit
        if tail:
            pieces.append(tail)
        return pieces

    def _rows_for(self, width: int) -> int:
        """Rows of a register tile ``width`` columns wide: the plan's rows,
        halved while the accumulators would exceed the plan's own tile (so
        that a wider tile still leaves registers for B and A)."""
        p = self.plan
        base = p.rows if p.rows not in AMX_ROWS else min(p.rows, self.nest.opt.target.gemm_rows)
        budget = base * len(self._vector_pieces(p.cols))
        rows, regs = base, len(self._vector_pieces(width))
        while rows > 1 and rows * regs > budget:
            rows //= 2
        return rows

    def _column_split(self, merge: bool = True) -> tuple[int, int]:
        """(whole micro-panels, width of the last, narrower tile). Columns left
        over that are not whole vectors join the last whole micro-panel in
        one wider tile of fewer rows when it stays within
        ``TargetTuning.gemm_wide_tail_vectors`` registers a row: a tile of
        8 x 24 (a full and a half vector a row) leaves the FMA units partly
        idle, 4 x 56 (three full vectors and a half one) keeps them busy."""
        p = self.plan
        n_tiles, n_rem = divmod(self.N, p.cols)
        if (merge and n_rem % p.lanes and n_tiles and not p.wide
                and len(self._vector_pieces(p.cols + n_rem))
                <= self.nest.opt.target.gemm_wide_tail_vectors):
            return n_tiles - 1, p.cols + n_rem
        return n_tiles, n_rem

    def emit(self) -> Stmt:
        p = self.plan
        nr, tpp = p.cols, p.panel_tiles
        # a constant B read by gathers (a weight read transposed): its last,
        # narrower columns are packed at build time too, as the first of
        # their micro-panel (zero past them: pack_weight), so they do not
        # join the whole micro-panel before them in one wider tile
        prepack_rest = p.pack_rest and constant_matrix(
            p.b_expr, self.nest.opt.constant_inputs, tuple(ax.var for ax in self.anchor.raxes))
        # (an AMX plan keeps its whole micro-panels on AMX tiles)
        n_tiles, n_rem = self._column_split(merge=not prepack_rest and p.rows not in AMX_ROWS)
        full, last = divmod(n_tiles, tpp)
        Ms = static_int(self.M)
        row_tiles = None if Ms is None else Ms // p.rows
        # Parallel over panels when there are several, else over row tiles.
        par_panels = self.parallel and full >= 2
        par_rows = self.parallel and not par_panels and (row_tiles is None or row_tiles >= 2)
        stmts: list[Stmt] = []
        shared: Buffer | None = None
        if p.pack and n_tiles and not par_panels:
            shared = self._pack_buffer(min(tpp, n_tiles), nr)
        if full:
            jc = Var(self.low.names.fresh("jc"), _I64)
            self._panels = (jc, full, tpp * nr)
            bp = shared
            if p.pack and bp is None:
                bp = self._pack_buffer(tpp, nr)
            body = self._panel(_mul(jc, tpp * nr), tpp, nr, bp, par_rows, _mul(jc, tpp))
            if p.pack and shared is None:
                body = Allocate(bp, body)
            stmts.append(For(jc, i64(0), i64(full), "parallel" if par_panels else "serial",
                             body))
        if last:
            bp = shared if shared is not None or not p.pack else self._pack_buffer(last, nr)
            tail = self._panel(i64(full * tpp * nr), last, nr, bp, par_rows, i64(full * tpp))
            stmts.append(tail if bp is shared else Allocate(bp, tail))
        if n_rem:
            bp_rest = (self._pack_buffer(1, nr if prepack_rest else n_rem) if p.pack_rest
                       else None)
            rest = self._panel(i64(n_tiles * nr), 1, n_rem, bp_rest, par_rows,
                               i64(n_tiles) if prepack_rest else None,
                               rows=self._rows_for(n_rem))
            stmts.append(rest if bp_rest is None else Allocate(bp_rest, rest))
        body = seq(stmts)
        if shared is not None:
            body = Allocate(shared, body)
        return body

    def _pack_buffer(self, tiles: int, width: int) -> Buffer:
        return Buffer(self.low.names.fresh(self.anchor.name + "_bpack"),
                      (i64(tiles), self.K, i64(width)), self.dtype)

    def _panel(self, col0: PrimExpr, tiles: int, width: int, bp: Buffer | None,
               par_rows: bool, tile0: PrimExpr | None = None, rows: int | None = None) -> Stmt:
        """Columns ``[col0, col0 + tiles*width)``: pack them (``bp``), then every
        row, ``rows`` at a time (default: the plan's). ``tile0``: the index of
        the panel's first micro-panel in B."""
        p = self.plan
        stmts: list[Stmt] = []
        prepacked = False
        if bp is not None:
            pack, param = self._pack(bp, col0, tiles, width)
            if param is not None and tile0 is not None:
                prepacked = True
                # B is a parameter read as B[k, j]: packed in advance, this nest
                # can go (see passes/pack_constant_weights.py)
                pack = AttrStmt(PACK_MARK, tile0, pack)
                # (the last columns' buffer is a whole micro-panel wide)
                self._declare_prepack(param[0], static_int(bp.shape[2]), param[1])
            stmts.append(pack)
        mr = rows or p.rows
        Ms = static_int(self.M)
        if Ms is not None and p.row_group and p.row_group % mr:
            # tiles within each group (plan_gemm: M is whole groups): its
            # whole tiles, then its last rows in one smaller tile
            og = p.row_group
            n_full, rem = divmod(og, mr)
            g = Var(self.low.names.fresh("ig"), _I64)
            base = _mul(g, og)
            inner: list[Stmt] = []
            if n_full:
                io = Var(self.low.names.fresh("io"), _I64)
                inner.append(For(io, i64(0), i64(n_full), "serial", self._row_block(
                    _add(base, _mul(io, mr)), mr, col0, tiles, width, bp)))
            inner.append(self._row_block(_add(base, i64(og - rem)), rem, col0, tiles, width,
                                         bp))
            kind = "parallel" if par_rows and Ms // og >= 2 else "serial"
            stmts.append(For(g, i64(0), i64(Ms // og), kind, seq(inner)))
        elif Ms is not None and prepacked and self._panels_outer(Ms, tiles, width):
            assert bp is not None
            stmts.append(self._tiles_by_panel(self._balanced_rows(Ms, mr), col0, tiles,
                                              width, bp, par_rows))
        elif Ms is not None:
            mr = self._balanced_rows(Ms, mr)
            n_full, rem = divmod(Ms, mr)
            if n_full:
                io = Var(self.low.names.fresh("io"), _I64)
                kind = "parallel" if par_rows and n_full >= 2 else "serial"
                stmts.append(For(io, i64(0), i64(n_full), kind,
                                 self._row_block(_mul(io, mr), mr, col0, tiles, width, bp)))
            row = Ms - rem
            for part in rest_rows(self, rem):
                stmts.append(self._row_block(i64(row), part, col0, tiles, width, bp))
                row += part
        else:
            io = Var(self.low.names.fresh("io"), _I64)
            n_full_e = self.M // mr
            stmts.append(For(io, i64(0), n_full_e, "parallel" if par_rows else "serial",
                             self._row_block(_mul(io, mr), mr, col0, tiles, width, bp)))
            r = Var(self.low.names.fresh("ir"), _I64)
            base = n_full_e * mr
            stmts.append(For(r, i64(0), self.M % mr, "serial",
                             self._row_block(_add(base, r), 1, col0, tiles, width, bp)))
        return seq(stmts)

    def _panels_outer(self, M: int, tiles: int, width: int) -> bool:
        """Whether each micro-panel of B meets every row tile before the next
        (:meth:`_tiles_by_panel`): a convolution whose B is its constant
        weight packed at build time (the output channels as the columns:
        ``conv_pointwise_small``, ``conv_small_image``), over a few row
        tiles of positions, several micro-panels of whole vectors."""
        return (self.anchor.tensor.op.tag == "conv2d" and self.dtype == "float32"
                and not is_dot4(self.anchor.expr) and tiles >= 2
                and width % 16 == 0 and M <= 16 * self.plan.rows
                and static_int(self.K) is not None)

    def _tiles_by_panel(self, mr: int, col0: PrimExpr, tiles: int, width: int,
                        bp: Buffer, parallel: bool) -> Stmt:
        """Every row tile of micro-panel ``t``, then of ``t + 1``, ...: the
        weight (B, packed at build time) is not in the cache when a model's
        layer starts, and in the row-tile-first order the first row tile
        read all of it at once, its few rows of work waiting on every line
        (MobileNetV2 at 224x224, 480 -> 160 over 7x7: the 307 KB weight).
        Here the next micro-panel is prefetched over this one's first row
        tiles (:func:`.gemm_prefetch.next_panel_prefetch`); ``parallel``:
        threads over the micro-panels."""
        Ms = static_int(self.M)
        K = static_int(self.K)
        assert Ms is not None and K is not None
        t = Var(self.low.names.fresh("jt"), _I64)
        nxt = BinaryOp("min", _add(t, i64(1)), i64(tiles - 1))
        col = _add(col0, _mul(t, width))
        n_full, rem = divmod(Ms, mr)
        body: list[Stmt] = []
        if n_full:
            io = Var(self.low.names.fresh("io"), _I64)
            body.append(For(io, i64(0), i64(n_full), "serial", self._tile(
                _mul(io, mr), mr, col, t, width, bp,
                ahead=lambda k, io=io: next_panel_prefetch(bp, nxt, io, k, K, width))))
        if rem:
            body.append(self._tile(i64(Ms - rem), rem, col, t, width, bp,
                                   ahead=lambda k: next_panel_prefetch(bp, nxt, i64(n_full), k,
                                                                       K, width)))
        return For(t, i64(0), i64(tiles), "parallel" if parallel else "serial", seq(body))

    def _balanced_rows(self, M: int, mr: int) -> int:
        """Rows of the register tiles over ``M`` static float rows: ``mr``,
        or fewer when ``M % mr`` would leave a last tile of under ``mr / 2``
        rows, whose few accumulator chains wait on the multiply-add's
        latency over the whole reduction (49 positions: 7 tiles of 7, not 6
        of 8 and one of 1). The integer GEMM keeps its tiles."""
        if self.plan.wide or is_dot4(self.anchor.expr) or M <= mr or M % mr >= mr // 2 \
                or M % mr == 0:
            return mr
        for r in range(mr - 1, mr // 2, -1):
            if M % r == 0 or M % r >= mr // 2:
                return r
        return mr

    def _reduction_loops(self, base: str) -> tuple[list[Var], PrimExpr]:
        """Fresh loop variables for the reduction axes and their flat index."""
        names = self.low.names
        loop_vars = [Var(names.fresh(ax.var.name + base), _I64) for ax in self.anchor.raxes]
        flat: PrimExpr = loop_vars[0]
        for var, ext in zip(loop_vars[1:], self.rexts[1:]):
            flat = _add(_mul(flat, static_int(ext)), var)
        return loop_vars, flat

    def _wrap_reduction(self, loop_vars: list[Var], body: Stmt) -> Stmt:
        for var, ext in reversed(list(zip(loop_vars, self.rexts))):
            body = For(var, i64(0), ext, "serial", body)
        return body

    def _declare_prepack(self, param: Buffer, width: int, transposed: bool) -> None:
        attrs = self.low.attrs
        known = attrs.get(PREPACK_ATTR)
        if known is None:
            attrs[PREPACK_ATTR] = param.name
            attrs[PREPACK_WIDTH_ATTR] = width
            if transposed:
                attrs[PREPACK_TRANSPOSED_ATTR] = True
        elif (known != param.name or attrs.get(PREPACK_WIDTH_ATTR) != width
              or bool(attrs.get(PREPACK_TRANSPOSED_ATTR)) != transposed):
            attrs[PREPACK_ATTR] = ""  # two packed operands: the pass leaves the kernel

    def _pack(self, bp: Buffer, col0: PrimExpr, tiles: int, width: int
              ) -> tuple[Stmt, tuple[Buffer, bool] | None]:
        """``bp[t, k, c] = B[k, col0 + t*width + c]`` (the column operand's value;
        ``k`` the flat index of the reduction axes), and B's parameter buffer
        when the value is exactly ``B[k, j]`` of a 2-D parameter, or ``B[j, k]``
        of one laid out transposed (with True), else None."""
        nest, low, anchor = self.nest, self.low, self.anchor
        g = self.plan.windows
        if g is not None:
            batch = self._anchor_values(None, col0)

            def image(ch: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
                idx = tuple(batch[a] for a in range(len(batch)) if a not in (self.ri, self.m - 1))
                return low.default_load(g.data, (*idx, ch, y, x))
            channels = _windows_channels(g, static_int(self.K))
            assert channels is not None
            return pack_panel(g, channels, static_int(self.K), bp, col0, tiles, width, image,
                              self._panels,
                              low.names.fresh(anchor.name)), None
        t = Var(low.names.fresh("tp"), _I64)
        c = Var(low.names.fresh("cp"), _I64)
        ks, _ = self._reduction_loops("p")
        col = _add(col0, _add(_mul(t, width), c))
        shape = [low.map_shape(s) for s in anchor.tensor.shape]
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        kivs = [nest.iter_var(ax.var.name, ext, "S") for ax, ext in zip(anchor.raxes, self.rexts)]
        vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
        for ax, iv in zip(anchor.raxes, kivs):
            vmap[ax.var] = iv.var
        kflat: PrimExpr = kivs[0].var
        for iv, ext in zip(kivs[1:], self.rexts[1:]):
            kflat = _add(_mul(kflat, static_int(ext)), iv.var)
        values = self._anchor_values(None, col)
        value = low.emit_value(self.plan.b_expr, vmap, low.default_load)
        # the block's axes: the anchor's (the row axis bound to 0: B does not use it)
        body = low.with_lets([value], lambda v: BufferStore(bp, v[0], (t, kflat, c)))
        blk = block(nest.block_name(anchor.name + "_pack"), ivs + kivs, values + ks, body)
        inner = For(c, i64(0), i64(width), "vectorized" if self.vectorize else "serial", blk)
        param = None
        if (type(value) is BufferLoad
                and any(value.buffer is b for b in low.buffers.values())):
            param = b_parameter(value, [iv.var for iv in kivs],
                                [static_int(e) for e in self.rexts], ivs[-1].var, self.N)
        elif is_dot4(anchor.expr) and len(kivs) == 1:  # words of a constant's bytes
            words = word_parameter(value, kivs[0].var, ivs[-1].var, _byte_rows(self.plan),
                                   low.buffers.values())
            if words is not None and static_int(words.shape[1]) == self.N:
                param = (words, False)
                self.low.attrs[PREPACK_WORDS_ATTR] = True
        return For(t, i64(0), i64(tiles), "serial", self._wrap_reduction(ks, inner)), param

    def _row_block(self, row0: PrimExpr, mr: int, col0: PrimExpr, tiles: int, width: int,
                   bp: Buffer | None) -> Stmt:
        """Rows ``[row0, row0 + mr)`` of the panel: one register tile per micro-panel."""
        t = Var(self.low.names.fresh("jt"), _I64)
        body = self._tile(row0, mr, _add(col0, _mul(t, width)), t, width, bp)
        return For(t, i64(0), i64(tiles), "serial", body)

    # -- the register tile -----------------------------------------------------
    def _anchor_values(self, row: PrimExpr | None, col: PrimExpr) -> list[PrimExpr]:
        """The anchor's axis values at (row, col) (the others from the outer loops)."""
        nest, m, ri = self.nest, self.m, self.ri
        return [(row if row is not None else i64(0)) if t == ri else col if t == m - 1
                else nest.axis_expr[ax] for t, ax in enumerate(self.root.axes)]

    def _tile(self, row0: PrimExpr, mr: int, col: PrimExpr, t: Var, width: int,
              bp: Buffer | None, ahead: Callable[[Var], Stmt] | None = None) -> Stmt:
        """One register tile of rows ``[row0, row0 + mr)`` and ``width``
        columns from ``col``; ``ahead(k)``: a prefetch for reduction step
        ``k`` (else :func:`.gemm_prefetch.next_rows_prefetch`'s, if any)."""
        nest, low, root, anchor, m, ri = (self.nest, self.low, self.root, self.anchor, self.m,
                                          self.ri)
        acc_shape = (i64(mr), i64(width))
        acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, self.dtype)
        shape = [low.map_shape(s) for s in anchor.tensor.shape]
        # The columns as whole vectors (unrolled), then the rest as vectors of
        # powers of two (see _vector_pieces); a wide tile (few rows) is one
        # long vectorized loop.
        if self.plan.wide:
            groups = [(0, 1, width)]
        else:
            pieces = self._vector_pieces(width)
            nvec = pieces.count(self.plan.lanes)
            groups = [(0, nvec, self.plan.lanes)] if nvec else []
            start = nvec * self.plan.lanes
            for piece in pieces[nvec:]:
                groups.append((start, 1, piece))
                start += piece

        def loops(make: Callable[[Var, PrimExpr], Stmt], ii_kind: str) -> Stmt:
            # rows x vectors unrolled, each vector's lanes one vectorized loop
            # whose extent is the vector width (no loop is left once LLVM
            # vectorizes it, so the accumulators stay in registers)
            ii = Var(low.names.fresh(root.axes[ri].name + "_i"), _I64)
            parts: list[Stmt] = []
            for start, count, ext in groups:
                jv = Var(low.names.fresh(root.axes[m - 1].name + "_v"), _I64)
                jl = Var(low.names.fresh(root.axes[m - 1].name + "_i"), _I64)
                ji = _add(i64(start), _add(_mul(jv, ext), jl) if count > 1 else jl)
                kind = "vectorized" if self.vectorize and ext >= 2 else "serial"
                stmt: Stmt = For(jl, i64(0), i64(ext), kind, make(ii, ji))
                if count > 1:
                    stmt = For(jv, i64(0), i64(count), "unroll", stmt)
                parts.append(stmt)
            return For(ii, i64(0), i64(mr), ii_kind, seq(parts))

        def init(ii: Var, ji: PrimExpr) -> Stmt:
            ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            return block(nest.block_name(anchor.name + "_init"), ivs,
                          self._anchor_values(_add(row0, ii), _add(col, ji)),
                          BufferStore(acc, low.map_shape(anchor.init), (ii, ji)))

        ks, _ = self._reduction_loops("")
        # A matrix-vector product adds ``unroll`` rows of B per pass over its
        # accumulators (in L1, not registers): the same additions in the same
        # order (bitwise the same sums), a quarter of the accumulator loads
        # and stores, and four rows of B streaming at once.
        K0 = static_int(self.rexts[0]) if len(self.rexts) == 1 else None
        unroll = 4 if (self.plan.wide and bp is None and K0 is not None and K0 >= 8
                       and K0 % 4 == 0) else 1

        def update(ii: Var, ji: PrimExpr) -> Stmt:
            ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            kivs = [nest.iter_var(ax.var.name, ext, "R")
                    for ax, ext in zip(anchor.raxes, self.rexts)]
            vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
            for ax, iv in zip(anchor.raxes, kivs):
                vmap[ax.var] = iv.var
            total: PrimExpr = BufferLoad(acc, (ii, ji))
            for q in range(unroll):
                if q:
                    vmap[anchor.raxes[0].var] = kivs[0].var + q
                a = low.emit_value(self.plan.a_expr, vmap, low.default_load)
                if bp is not None:
                    kflat: PrimExpr = kivs[0].var
                    for iv, ext in zip(kivs[1:], self.rexts[1:]):
                        kflat = _add(_mul(kflat, static_int(ext)), iv.var)
                    b: PrimExpr = BufferLoad(bp, (t, kflat, ji))
                elif self.plan.row_group:
                    # the same for every row of the tile: read at its first row
                    # (not per row, which LLVM would not see is the same load)
                    b = low.emit_value(self.plan.b_expr, {**vmap, anchor.axes[ri]: row0},
                                       low.default_load)
                else:
                    b = low.emit_value(self.plan.b_expr, vmap, low.default_load)
                ops = (b, a) if self.plan.b_first else (a, b)
                # (an integer GEMM: acc + dot4(a, b) is one vpdpbusd)
                prod = (tir.Call("dot4_u8s8", ops, "int32") if is_dot4(anchor.expr)
                        else ops[0] * ops[1])
                total = combine("sum", total, prod)
            body = low.with_lets([total], lambda v: BufferStore(acc, v[0], (ii, ji)))
            kvalues = [_mul(ks[0], unroll)] if unroll > 1 else kbind
            return block(nest.block_name(anchor.name + "_update"), ivs + kivs,
                          self._anchor_values(_add(row0, ii), _add(col, ji)) + kvalues, body)

        def epilogue(ii: Var, ji: PrimExpr) -> Stmt:
            nest.axis_expr[root.axes[ri]] = _add(row0, ii)
            nest.axis_expr[root.axes[m - 1]] = _add(col, ji)
            ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, nest.shape)]
            values = [nest.axis_expr[ax] for ax in root.axes]
            if anchor is root:
                value: PrimExpr = BufferLoad(acc, (ii, ji))
            else:
                vmap = {ax: iv.var for ax, iv in zip(root.axes, ivs)}

                def load(tensor: Tensor, ind: tuple[PrimExpr, ...]) -> PrimExpr:
                    if not tensor.is_placeholder and low.stages.get(id(tensor)) is anchor:
                        return BufferLoad(acc, (ii, ji))
                    return low.default_load(tensor, ind)
                value = low.emit_value(root.expr, vmap, load)
            body = low.with_lets([value], lambda v: BufferStore(
                root.buffer, v[0], tuple(iv.var for iv in ivs)))
            return block(nest.block_name(root.name), ivs, values, body)

        kbind: list[PrimExpr] = list(ks)  # the reduction's values in update's blocks
        amx = amx_blocks(self, mr, width, bp, row0) if unroll == 1 else None
        if amx is not None and bp is not None:  # (the zeroing and most of K on AMX)
            def update_at(k: PrimExpr) -> Stmt:
                kbind[:] = [k]
                return loops(update, "unroll")
            return Allocate(acc, seq([*amx_tile(self, amx, acc, bp, t, ks[0], loops(
                init, "unroll"), update_at), loops(epilogue, "serial")]))
        if unroll > 1:
            upd: Stmt = For(ks[0], i64(0), i64(K0 // unroll), "serial", loops(update, "unroll"))
        else:
            hint = (ahead(ks[0]) if ahead is not None
                    else next_rows_prefetch(self, row0, mr, ks[0]))
            upd = self._wrap_reduction(ks, loops(update, "unroll") if hint is None
                                       else seq([hint, loops(update, "unroll")]))
        prefetch = epilogue_prefetch(self, row0, mr, col, width)
        return Allocate(acc, seq([loops(init, "unroll"), *prefetch, upd,
                                   loops(epilogue, "serial")]))
