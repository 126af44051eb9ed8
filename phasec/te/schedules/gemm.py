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
        for each tile of MR rows (then the M % MR remainder rows, or
                                  they end the loop's last tile):
            for each micro-panel t of the panel:
                acc[MR, NR] = 0                      # registers
                prefetch the epilogue's lines        # a residual, the output (K >= 256)
                for k: acc[ii, c] += A[row0+ii, k] * Bp[t, k, c]
                out[row0+ii, col0+t*NR+c] = epilogue(acc[ii, c])

When the columns are at most N / 64 short of whole micro-panels, every
column is one loop over the panels instead: the last panel's count a
``min``, the last micro-panel ending at N, recomputing the few columns it
shares with the one before (:meth:`GemmEmitter._one_loop`): one copy of
the register tile in the kernel, where the panel of fewer micro-panels and
the last narrower tile were two more, most of a 1x1 convolution's LLVM
time. Otherwise the N % NR remainder columns get a narrower tile (reading
B directly; its columns made of whole vectors, then vectors of 8, 4
lanes..., so that each
is one register), or, when they are not whole vectors, join the last
micro-panel in one wider tile with fewer rows (56 = 32 + 24 columns: one
4 x 56 tile, not 8 x 32 + 8 x 24, whose half-width vectors leave the FMA
units partly idle). The M % MR remainder rows are one more tile of the
row tiles' loop when at most M / 64 rows are computed in vain (moved back
to end at M, its epilogue storing only its own rows:
:func:`.gemm_tile.tiled_rows`), else a shorter tile (a static M),
or a loop of one-row tiles (a symbolic M). Panels are not packed when
fewer than
``gemm_pack_min_row_tiles`` row tiles would read them (e.g. a batch-1
matrix-vector product: the copy would cost as much as the product), nor
when B is small enough to stay in L2 (``gemm_pack_min_bytes``), nor when
it is a window sliding along one row (a 1-D convolution: its taps re-read
the same few input rows, which stay in L1).

K is not split while a packed micro-panel (K x NR) fits well in L2: it is
read sequentially from L2 while the panel (K x NC, sized to
``gemm_panel_bytes``) stays there, so the accumulators never leave
registers and the epilogue applies to the finished tile. A longer one
(``GemmPlan.k_block``: a micro-panel over ``gemm_k_block_min_bytes``) runs
in blocks, the partial sums in memory between them (bitwise the same sums;
:func:`.gemm_by_panel.tiles_by_panel`).

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

from phasec.arith.bound import prove_bounded
from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, AttrStmt, BinaryOp, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var,
)
from phasec.target.tuning import build_threads
from phasec.te.analysis import static_int
from phasec.te.operation import i64
from phasec.te.schedules.gemm_operands import constant_matrix, is_dot4
from phasec.te.schedules.gemm_prefetch import index_add as _add, index_mul as _mul
from phasec.te.schedules.gemm_by_panel import tiles_by_panel
from phasec.te.schedules.gemm_tile import register_tile, tiled_rows
from phasec.te.schedules.gemm_windows import pack_panel
from phasec.te.schedules.gemm_amx import AMX_ROWS, rest_rows
from phasec.te.schedules.gemm_plan import GemmPlan, plan_gemm, windows_channels
from phasec.te.schedules.gemm_prepack import (
    PACK_MARK, PREPACK_ATTR, PREPACK_TRANSPOSED_ATTR, PREPACK_WIDTH_ATTR, PREPACK_WORDS_ATTR,
    b_parameter, row_panels, word_parameter,
)
from phasec.te.stmt import block, seq
from phasec.te.tensor import ProducerLoad, post_order

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter
    from phasec.te.lowering import Stage

_I64 = "int64"
#: :meth:`GemmEmitter._one_loop` recomputes at most N / this many columns:
#: 169 columns in tiles of 64 (23 recomputed, 14%) ran 1.09x slower, a
#: Winograd GEMM's 50 in tiles of 32 (28%) 1.18x, MobileNetV2's 784 (16,
#: 2%) 1.01-1.03x; 3025 in 32 (0.5%) and 729 (1%) as fast as before
#: (bench/README.md, issue 29, tails)
_RECOMPUTED_PART = 64


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
    schedule takes (:func:`.gemm_plan.plan_gemm`), else None."""
    anchor = nest.tile_anchor.stage
    plan = plan_gemm(nest, anchor)
    return None if plan is None else GemmNest(anchor, plan)


def _extent(n: int | PrimExpr) -> PrimExpr:
    """A loop extent: a count, constant or not."""
    return i64(n) if isinstance(n, int) else n


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
        # the columns: the last axis, or the last two as one (GemmPlan.flat)
        self.N = static_int(nest.shape[self.m - 1])
        if plan.flat and self.N is not None:
            self.N *= static_int(nest.shape[self.m - 2]) or 0
        # the reduction axes, packed flat (k = (k0 * E1 + k1) * E2 + k2 ...)
        self.rexts = [self.low.map_shape(ax.extent) for ax in self.anchor.raxes]
        self.K = (self.rexts[0] if len(self.rexts) == 1
                  else i64(math.prod(static_int(e) for e in self.rexts)))
        self.vectorize = nest.opt.vectorize
        #: the loop over whole panels (variable, count, columns a panel)
        self._panels: tuple[Var, int, int] | None = None
        #: the first column of micro-panel ``t`` of the panel being emitted
        #: when it is not ``col0 + t * width`` (:meth:`_one_loop`'s last
        #: micro-panel, ending at N)
        self._tile_col: Callable[[PrimExpr], PrimExpr] | None = None
        self._b_slack: bool | None = None  # see _whole_tail
        #: the last columns are being emitted from a packed panel of whole
        #: vectors, zero past them (see :meth:`_padded_rest`)
        self._padding = False
        #: the partial sums of a reduction run in blocks (``GemmPlan.k_block``)
        self._part: Buffer | None = None
        #: the block of the reduction being emitted: the partial sums'
        #: buffer, the block's first index and length along the first
        #: reduction axis, whether it is the last (a condition when one
        #: loop runs every block); None: all of K
        self._kblock: tuple[Buffer, PrimExpr, int, bool | PrimExpr] | None = None
        #: A read from its row panels (``gemm_prepack.row_panels``): the
        #: buffer and its rows a panel, while the row tiles are emitted
        self.a_rows: tuple[Buffer, int] | None = None

    # -- structure -----------------------------------------------------------
    def _vector_pieces(self, width: int) -> list[int]:
        """The vectors a row of ``width`` accumulators is made of: whole
        vectors, then the rest as powers of two down to 4 (12 -> 8 + 4), each
        one register that LLVM vectorizes whole, then the last 1-3 columns
        as one short loop. (A 12-wide vectorized loop became a vector of 8
        plus a scalar loop, and the accumulators went to memory.)"""
        lanes = self.plan.lanes
        if self._whole_tail(width):
            return [lanes] * -(-width // lanes)
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

    def _whole_tail(self, width: int) -> bool:
        """Whether a tile ``width`` columns wide ending at column N computes
        its last columns, more than half a vector (or 7 of 16), as one whole
        vector, its epilogue storing only the real ones (one vector under a
        constant mask: ``loops.py``): when the B the tile reads directly stays
        inside its buffers up to that vector's end (a few-channel conv's
        stride phases: rows of 112 for 111 outputs), not when B is packed or
        a plain matrix, nor over flat columns (``GemmPlan.flat``: the slack
        is proven along the last axis only). SqueezeNet's stem (111
        columns: 16+16+15, not 16+16+8+4+2+1): bench/README.md."""
        p, lanes = self.plan, self.plan.lanes
        if self._padding:
            return True  # (B is the padded panel: _padded_rest)
        tail = width % lanes
        # (or 7 of 16: 4 + 3 columns, three vectors once LLVM splits the 3
        # into 2 + 1; not 1-6, 8: measured no faster, bench/README.md)
        if (p.wide or p.pack_rest or p.flat or p.cols % lanes
                or is_dot4(self.anchor.expr)
                or not (tail > lanes // 2 or (tail > 4 and tail % 4 == 3))):
            return False
        if self._b_slack is None:
            self._b_slack = self._b_reads_within(lanes - self.N % lanes)
        return self._b_slack

    def _b_reads_within(self, extra: int) -> bool:
        """Whether every read of B, at up to ``extra`` columns past N, is
        proven inside its tensor's buffer (the loop ranges alone; reads
        under a condition, or of a tile's local buffer, are not taken)."""
        anchor, low = self.anchor, self.low
        shape = [static_int(low.map_shape(s)) for s in anchor.tensor.shape]
        rexts = [static_int(e) for e in self.rexts]
        if None in shape or None in rexts:
            return False
        bounds = {id(ax): (0, n - 1 + (extra if t == self.m - 1 else 0))
                  for t, (ax, n) in enumerate(zip(anchor.axes, shape))}
        bounds.update({id(ax.var): (0, n - 1) for ax, n in zip(anchor.raxes, rexts)})
        for n in post_order([self.plan.b_expr]):
            if isinstance(n, (tir.Select, tir.Call)):
                return False  # (a guarded read: not from the ranges alone)
            if not isinstance(n, ProducerLoad):
                continue
            t = n.tensor
            st = None if t.is_placeholder else low.stages.get(id(t))
            if not t.is_placeholder and (st is None or st.root is not None
                                         or st.buffer is None):
                return False
            dims = [static_int(low.map_shape(d)) for d in t.shape]
            for idx, d in zip(n.indices, dims):
                if d is None or prove_bounded(BinaryOp("and", BinaryOp(">=", idx, i64(0)),
                                                       BinaryOp("<", idx, i64(d))),
                                              bounds) is not True:
                    return False
        return True

    def _rows_for(self, width: int) -> int:
        """Rows of a register tile ``width`` columns wide: the plan's rows,
        halved while the accumulators would exceed the plan's own tile (so
        that a wider tile still leaves registers for B and A)."""
        p = self.plan
        base = p.rows if p.rows not in AMX_ROWS else min(p.rows, self.nest.opt.target.gemm_rows)
        budget = base * len(self._vector_pieces(p.cols))
        rows, regs = base, len(self._vector_pieces(width))
        narrow = self.nest.opt.target.gemm_narrow_rows
        if (regs == 1 and narrow and not p.wide and not p.row_group
                and not is_dot4(self.anchor.expr) and p.rows not in AMX_ROWS):
            # last columns of one vector: the target's narrow tile, whose
            # accumulators cover the FMA latency (a 28x28 image's 784 =
            # 12 x 64 + 16: 25 tiles of 5 x 1 vectors, now 16 of 8; 1x1
            # 512 -> 128 over 28x28 972 -> 956 us, bench/README.md)
            return max(rows, narrow)
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
        """The GEMM; with ``GemmPlan.k_block``, the partial sums' buffer
        around it (see :func:`.gemm_by_panel.tiles_by_panel`)."""
        p = self.plan
        if not p.k_block:
            return self._columns()
        Ms = static_int(self.M)
        assert Ms is not None and self.N is not None
        # (a vector of slack past N: a tile's last whole vector, see _whole_tail)
        part = Buffer(self.low.names.fresh(self.anchor.name + "_part"),
                      (i64(Ms), i64(self.N + p.lanes)), self.dtype)
        r, c = Var(self.low.names.fresh("rz"), _I64), Var(self.low.names.fresh("cz"), _I64)
        fill = For(r, i64(0), i64(Ms), "serial", For(
            c, i64(0), i64(self.N + p.lanes), "vectorized" if self.vectorize else "serial",
            BufferStore(part, self.low.map_shape(self.anchor.init), (r, c))))
        self._part = part
        body = self._columns()
        self._part = None
        return Allocate(part, seq([fill, body]))

    def _columns(self) -> Stmt:
        """Every column of the GEMM: its whole panels, its last narrower ones."""
        p = self.plan
        nr, tpp = p.cols, p.panel_tiles
        # a constant B read by gathers (a weight read transposed): its last,
        # narrower columns are packed at build time too, as the first of
        # their micro-panel (zero past them: pack_weight), so they do not
        # join the whole micro-panel before them in one wider tile
        prepack_rest = p.pack_rest and constant_matrix(
            p.b_expr, self.nest.opt.constant_inputs, tuple(ax.var for ax in self.anchor.raxes),
            [static_int(e) for e in self.rexts])
        # (an AMX plan keeps its whole micro-panels on AMX tiles)
        n_tiles, n_rem = self._column_split(merge=not prepack_rest and p.rows not in AMX_ROWS)
        if not prepack_rest and (n_rem or n_tiles % tpp) and self._one_loop_fits():
            return self._one_loop()
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
            body = self._panel(_mul(jc, tpp * nr), tpp, nr, bp, par_rows, _mul(jc, tpp),
                               blocked=True)
            if p.pack and shared is None:
                body = Allocate(bp, body)
            stmts.append(For(jc, i64(0), i64(full), "parallel" if par_panels else "serial",
                             body))
        if last:
            bp = shared if shared is not None or not p.pack else self._pack_buffer(last, nr)
            tail = self._panel(i64(full * tpp * nr), last, nr, bp, par_rows, i64(full * tpp),
                               blocked=True)
            stmts.append(tail if bp is shared else Allocate(bp, tail))
        if n_rem:
            self._padding = self._padded_rest(n_tiles, n_rem)
            width = -(-n_rem // p.lanes) * p.lanes if self._padding else n_rem
            bp_rest = (self._pack_buffer(1, nr if prepack_rest else width)
                       if p.pack_rest or self._padding else None)
            rest = self._panel(i64(n_tiles * nr), 1, n_rem, bp_rest, par_rows,
                               i64(n_tiles) if prepack_rest else None,
                               rows=self._rows_for(n_rem))
            self._padding = False
            stmts.append(rest if bp_rest is None else Allocate(bp_rest, rest))
        body = seq(stmts)
        if shared is not None:
            body = Allocate(shared, body)
        return body

    def _one_loop_fits(self) -> bool:
        """Whether :meth:`_one_loop` takes every column: at least one whole
        micro-panel; micro-panels of whole vectors; B packed at run time or
        read in place (not packed at build time, nor from an image's
        windows, nor its last columns packed apart); no reduction in
        blocks (a recomputed column would add a block twice); float tiles
        of the plan's rows; and an epilogue that does not read the output
        (a recomputed column would read its own result). And few columns
        recomputed: at most N / ``_RECOMPUTED_PART``."""
        p, N = self.plan, self.N
        if (N is None or N < p.cols or -N % p.cols * _RECOMPUTED_PART > N or p.wide
                or p.pack_rest or p.row_group or p.cols % p.lanes or p.windows is not None
                or p.k_block or p.rows in AMX_ROWS or is_dot4(self.anchor.expr)):
            return False
        if self._reads_output():
            return False
        if not p.pack:
            return True
        probe = self._pack_buffer(1, p.cols)  # (B packed at build time: PACK_MARK)
        return self._pack(probe, i64(0), 1, p.cols)[1] is None

    def _one_loop(self) -> Stmt:
        """Every column in one loop over the panels of whole micro-panels:
        the last panel's count a ``min``, the last micro-panel ending at N
        (recomputing the columns it shares with the one before it: the same
        sums in the same order, stored twice). One copy of the register
        tile (and of B's packing): the panel of fewer micro-panels and the
        last narrower tile after the parallel loop, each another copy on
        the calling thread, were most of a 1x1 convolution's LLVM time
        (bench/README.md, issue 29, tails). The panels are as many as keep
        the threads evenly busy within a quarter over the panel's size."""
        p = self.plan
        nr, N = p.cols, self.N
        assert N is not None
        total, tpp = -(-N // nr), p.panel_tiles
        threads = build_threads()
        count = -(-total // tpp)
        # threads over the panels when two whole ones would be (else over
        # the row tiles of each panel, as before)
        par_panels = self.parallel and total // tpp >= 2
        if par_panels and threads > 1:
            # (cost: rounds of panels on the threads x micro-panels a panel)
            least = -(-total // (tpp + tpp // 4))
            count = min(range(count, max(least, 2) - 1, -1),
                        key=lambda c: -(-c // threads) * -(-total // c))
        per = -(-total // count)
        count = -(-total // per)
        while par_panels and N % nr and count > 1 and total - (count - 1) * per == 1:
            # a last panel of only the micro-panel ending at N would store
            # the columns it shares with the one before it from another
            # thread: the same values, but two threads writing them at once
            per += 1
            count = -(-total // per)
        Ms = static_int(self.M)
        par_rows = (self.parallel and not par_panels
                    and (Ms is None or Ms // p.rows >= 2))
        jc = Var(self.low.names.fresh("jc"), _I64)
        first = _mul(jc, per)
        tiles: PrimExpr = (i64(per) if count * per == total
                           else BinaryOp("min", i64(per), i64(total) - first))

        def column(t: PrimExpr) -> PrimExpr:
            col = _mul(_add(first, t), nr)
            return col if N % nr == 0 else BinaryOp("min", col, i64(N - nr))
        bp = self._pack_buffer(per, nr) if p.pack else None
        self._panels, self._tile_col = (jc, count, per * nr), column
        body = self._panel(_mul(jc, per * nr), tiles, nr, bp, par_rows)
        self._tile_col = None
        if bp is not None and par_panels:
            body = Allocate(bp, body)
        loop = For(jc, i64(0), i64(count), "parallel" if par_panels else "serial", body)
        return loop if bp is None or par_panels else Allocate(bp, loop)

    def _padded_rest(self, n_tiles: int, n_rem: int) -> bool:
        """Whether the last, narrower columns of a GEMM over flat columns
        (``GemmPlan.flat``) whose panels are packed are packed too, into a
        panel of whole vectors zero past them, and computed as whole vectors
        (the epilogue storing only the real ones: :meth:`_whole_tail`'s
        form, whose B read in place could not reach past the image).
        SqueezeNet's classifier, 512 -> 1000 over 13x13: 169 columns are two
        tiles of 64 and 41 = 16 + 16 + 8 + 1 (a scalar column of FMAs), now
        three vectors (bench/README.md). The same remainders as
        :meth:`_whole_tail` (more than half a vector, or 7 of 16) when the
        panels are packed; any remainder when B is read in place (not
        packed): its last columns, read and stored at flat positions that
        are not whole vectors, were 4-lane gathers and scatters
        (MobileNetV2's 1x1s over 14x14: 196 = 3 x 64 + 4) or scalar
        columns (96 -> 200 over 9x9: 66 -> 26 us, bench/README.md)."""
        p, lanes = self.plan, self.plan.lanes
        tail = n_rem % lanes
        return bool(p.flat and n_tiles and not p.pack_rest and not p.wide
                    and p.windows is None and not p.row_group and p.cols % lanes == 0
                    and tail and (not p.pack or tail > lanes // 2
                                  or (tail > 4 and tail % 4 == 3)))

    def _pack_buffer(self, tiles: int, width: int) -> Buffer:
        return Buffer(self.low.names.fresh(self.anchor.name + "_bpack"),
                      (i64(tiles), self.K, i64(width)), self.dtype)

    def _panel(self, col0: PrimExpr, tiles: int | PrimExpr, width: int, bp: Buffer | None,
               par_rows: bool, tile0: PrimExpr | None = None, rows: int | None = None,
               blocked: bool = False) -> Stmt:
        """Columns ``[col0, col0 + tiles*width)``: pack them (``bp``), then every
        row, ``rows`` at a time (default: the plan's). ``tile0``: the index of
        the panel's first micro-panel in B; ``blocked``: whole micro-panels,
        their reduction in blocks when the plan has them."""
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
            if self._padding:
                # the columns past the last: zero (uninitialized, they could
                # be denormals, slow in every FMA; they are never stored)
                k, c = Var(self.low.names.fresh("kz"), _I64), Var(self.low.names.fresh("cz"), _I64)
                pad = static_int(bp.shape[2]) - width
                stmts.append(For(k, i64(0), self.K, "serial", For(
                    c, i64(width), i64(pad), "serial",
                    BufferStore(bp, tir.FloatImm(0.0, self.dtype), (i64(0), k, c)))))
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
        elif Ms is not None and ((prepacked and self._panels_outer(Ms, tiles, width))
                                 or (blocked and self._part is not None)):
            stmts.append(tiles_by_panel(self, self._balanced_rows(Ms, mr, width), col0, tiles,
                                        width, bp, par_rows))
        elif Ms is not None:
            mr = self._balanced_rows(Ms, mr, width)
            n_full, rem, end = tiled_rows(self, Ms, mr)
            panels = row_panels(self, Ms, mr)
            self.a_rows = None if panels is None else (panels[0], mr)
            rows: list[Stmt] = [] if panels is None else [panels[1]]
            if n_full:
                kind = "parallel" if par_rows and n_full >= 2 else "serial"
                rows.append(self._row_loop(n_full, mr, end, kind, lambda _, row0, st: (
                    self._row_block(row0, mr, col0, tiles, width, bp, st))))
            row = Ms - rem
            for part in rest_rows(self, rem):
                rows.append(self._row_block(i64(row), part, col0, tiles, width, bp))
                row += part
            self.a_rows = None
            stmts.append(seq(rows) if panels is None else Allocate(panels[0], seq(rows)))
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
        (:func:`.gemm_by_panel.tiles_by_panel`): a convolution whose B is its constant
        weight packed at build time (the output channels as the columns:
        ``conv_pointwise_small``, ``conv_small_image``), over a few row
        tiles of positions, several micro-panels of whole vectors."""
        return (self.anchor.tensor.op.tag == "conv2d" and self.dtype == "float32"
                and not is_dot4(self.anchor.expr) and tiles >= 2
                and width % 16 == 0 and M <= 16 * self.plan.rows
                and static_int(self.K) is not None)

    def _balanced_rows(self, M: int, mr: int, width: int) -> int:
        """Rows of the register tiles over ``M`` static float rows, ``width``
        columns: ``mr``, or fewer when ``M % mr`` would leave a last tile of
        under ``mr / 2`` rows, whose few accumulator chains wait on the
        multiply-add's latency over the whole reduction (49 positions: 7
        tiles of 7, not 6 of 8 and one of 1). A target's
        ``gemm_tail_min_accumulators`` keeps ``mr`` when the last tile has
        at least that many accumulators and follows at least eight whole
        tiles (the Xeon: 128 rows in 6 x 4 tiles, the last of 2 x 4, not 5 x 4
        ones; 32 rows stay 8 x 4, not 5 x 6 + 2: the last tile's loads per
        multiply-add weigh more there). The integer GEMM keeps its tiles."""
        if self.plan.wide or is_dot4(self.anchor.expr) or M <= mr or M % mr >= mr // 2 \
                or M % mr == 0:
            return mr
        enough = self.nest.opt.target.gemm_tail_min_accumulators
        if enough and M >= 8 * mr and M % mr * len(self._vector_pieces(width)) >= enough:
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
        """The reduction loops around ``body``: the first over the current
        block (``_kblock``) or all of it, the others whole."""
        for t, (var, ext) in reversed(list(enumerate(zip(loop_vars, self.rexts)))):
            start, ext = ((self._kblock[1], i64(self._kblock[2])) if t == 0 and self._kblock
                          else (i64(0), ext))
            body = For(var, start, ext, "serial", body)
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

    def _pack(self, bp: Buffer, col0: PrimExpr, tiles: int | PrimExpr, width: int
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
            channels = windows_channels(g, static_int(self.K))
            assert channels is not None
            return pack_panel(g, channels, static_int(self.K), bp, col0, tiles, width, image,
                              self._panels,
                              low.names.fresh(anchor.name)), None
        t = Var(low.names.fresh("tp"), _I64)
        c = Var(low.names.fresh("cp"), _I64)
        ks, _ = self._reduction_loops("p")
        col = _add(self._tile_col(t) if self._tile_col is not None
                   else _add(col0, _mul(t, width)), c)
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
        return For(t, i64(0), _extent(tiles), "serial", self._wrap_reduction(ks, inner)), param

    def _row_loop(self, n: int, mr: int, end: int | None, kind: str,
                  tile: Callable[[PrimExpr, PrimExpr, dict[str, PrimExpr | int]], Stmt]
                  ) -> Stmt:
        """The loop over ``n`` row tiles of ``mr`` rows; ``tile(io, row0,
        stored)``: tile ``io``'s statement, its first row, and which of its
        rows it stores (:func:`.gemm_tile.register_tile`'s arguments). When
        the tiles end at ``end`` (M, not a whole tile:
        :func:`.gemm_tile.tiled_rows`), the last one is moved back to
        end there, over rows of the one before it, and its epilogue stores
        only its own rows (a condition per row): A's reads stay at a
        constant stride, one ``min`` a tile, and no element is stored
        twice (a ``parallel`` loop's tiles may run on different threads).
        Recomputing those rows and storing them again from the same thread
        instead (a parallel loop's last iteration running both tiles) was
        no faster in the models and cost LLVM more (bench/README.md, issue
        29, rowtail). A's row panels (whole tiles of rows, zero past M)
        keep the last tile in place, its rows past M clamped to M - 1 and
        not stored."""
        io = Var(self.low.names.fresh("io"), _I64)
        row0 = _mul(io, mr)
        if end is None:
            return For(io, i64(0), i64(n), kind, tile(io, row0, {}))
        if self.a_rows is not None:
            return For(io, i64(0), i64(n), kind, tile(io, row0, {"rows_end": end}))
        moved = BinaryOp("min", row0, i64(end - mr))
        return For(io, i64(0), i64(n), kind, tile(io, moved, {"first_stored": row0}))

    def _reads_output(self) -> bool:
        """Whether the epilogue reads the output it writes (a recomputed
        element would read its own result)."""
        out = self.root.buffer
        return any(isinstance(n, ProducerLoad) and n.tensor.is_placeholder
                   and self.low.buffers.get(id(n.tensor)) is out
                   for n in post_order([self.root.expr]))

    def _row_block(self, row0: PrimExpr, mr: int, col0: PrimExpr, tiles: int | PrimExpr,
                   width: int, bp: Buffer | None,
                   stored: dict[str, PrimExpr | int] | None = None) -> Stmt:
        """Rows ``[row0, row0 + mr)`` of the panel (``stored``: which of them
        the tiles store, see :meth:`_row_tile`): one register tile per
        micro-panel."""
        t = Var(self.low.names.fresh("jt"), _I64)
        col = self._tile_col(t) if self._tile_col is not None else _add(col0, _mul(t, width))
        body = register_tile(self, row0, mr, col, t, width, bp, **(stored or {}))
        return For(t, i64(0), _extent(tiles), "serial", body)

    def _anchor_values(self, row: PrimExpr | None, col: PrimExpr) -> list[PrimExpr]:
        """The anchor's axis values at (row, col) (the others from the outer loops)."""
        nest, ri = self.nest, self.ri
        cols = self.plan.column_values(self.m, col)
        return [(row if row is not None else i64(0)) if t == ri else cols[t] if t in cols
                else nest.axis_expr[ax] for t, ax in enumerate(self.root.axes)]
