"""The GEMM schedule's plan of one anchor (:func:`plan_gemm`): which
product it is (the row and column operands, a grouped convolution's row
groups, an integer convolution's windows) and the sizes it runs in — the
register tile, the panels, whether B is packed — from the target's tuning
(:class:`phasec.target.tuning.TargetTuning`). :mod:`.gemm` emits it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phasec.ir.tir import BinaryOp, FloatImm, IntImm, PrimExpr, Var
from phasec.te.analysis import loads_of, static_int, vars_of
from phasec.te.operation import row_col
from phasec.te.schedules.gemm_amx import plan_rows
from phasec.te.schedules.gemm_operands import (
    constant_matrix, is_dot4, row_group, sliding_window, unit_stride,
)
from phasec.te.schedules.gemm_windows import WINDOWS_ATTR, Windows

if TYPE_CHECKING:
    from phasec.target.tuning import TargetTuning
    from phasec.te.emit import NestEmitter
    from phasec.te.lowering import Stage

__all__ = ["GemmPlan", "GEMM_TAGS", "FLAT_COLUMNS_ATTR", "GEMM_TILE_ATTR", "plan_gemm",
           "windows_channels"]

#: an anchor's attribute (set by :mod:`.conv_pointwise_flat`): its columns
#: may span the output's last two axes (see ``GemmPlan.flat``)
FLAT_COLUMNS_ATTR = "gemm_flat_columns"

#: an anchor's attribute: (rows, vectors), the float GEMM's register tile
#: its schedule chose (:mod:`.conv_pointwise_small`), not the target's
GEMM_TILE_ATTR = "gemm_tile"


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
    #: the columns span the output's last two axes, rows of ``flat``
    #: elements (column ``j`` is ``(j // flat, j % flat)``: one GEMM over a
    #: whole image), or 0: the last axis alone
    flat: int = 0
    #: the reduction's first axis runs in blocks of this many (the last block
    #: shorter), every row tile of a chunk of micro-panels of one block before
    #: the next (``GemmEmitter._tiles_by_panel``), or 0: K not split
    k_block: int = 0

    def batch_axes(self, m: int) -> list[int]:
        """The output axes looped around the GEMM (all but the rows and columns)."""
        return [t for t in range(m - 2 if self.flat else m - 1) if t != self.row_axis]

    def column_values(self, m: int, col: PrimExpr) -> dict[int, PrimExpr]:
        """The values of the output axes that column ``col`` stands for."""
        if not self.flat:
            return {m - 1: col}
        row, column = row_col(col, self.flat)  # (unsigned: contiguous lanes)
        return {m - 2: row, m - 1: column}


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
    flat = _flat_columns(nest, anchor, row_axis, a_expr, b_expr, group) if not dot4 else 0
    if flat:
        N *= static_int(nest.shape[m - 2]) or 0
    rexts = [static_int(nest.low.map_shape(ax.extent)) for ax in anchor.raxes]
    if len(rexts) > 1 and any(e is None for e in rexts):
        return None  # several reduction axes are packed flat: static extents only
    bits = 64 if anchor.tensor.dtype == "float64" else 32
    rows, cols = tuning.gemm_rows, tuning.gemm_cols(bits)
    if dot4 and tuning.int_gemm_tile:
        # (the integer GEMM's tile, where the target sets one of its own)
        rows, cols = tuning.int_gemm_tile[0], tuning.int_gemm_tile[1] * tuning.lanes(bits)
    elif anchor.tensor.op.attrs.get(GEMM_TILE_ATTR):
        rows, vectors = anchor.tensor.op.attrs[GEMM_TILE_ATTR]
        cols = vectors * tuning.lanes(bits)
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
    elem = bits // 8
    M = static_int(nest.shape[row_axis])
    # (the panels hold one block of a reduction run in blocks)
    k_block = (0 if dot4 or group or anchor.tensor.op.tag not in tuning.gemm_k_block_tags
               else _k_block(tuning, M, rows, cols, N // cols, rexts, elem, anchor.init))
    k_guess = (K if not k_block else K // rexts[0] * k_block) if K is not None else 1024
    max_cols = min(tuning.gemm_panel_max_cols,
                      tuning.gemm_panel_bytes // max(1, k_guess * elem))
    if (flat and M is not None and K is not None and K <= tuning.gemm_flat_panel_max_k
            and M // rows >= tuning.gemm_flat_panel_min_row_tiles):
        max_cols = max(max_cols, tuning.gemm_flat_panel_bytes // (K * elem))
    elif flat and M is not None and M <= tuning.gemm_flat_micro_panel_max_rows:
        # few row tiles: each micro-panel packed, then read by them all from
        # L1 (a wider panel went to L2 and came back once a row tile)
        max_cols = cols
    tpp_max = max(1, max_cols // cols)
    n_tiles = N // cols
    if n_tiles <= tpp_max:
        tpp = max(1, n_tiles)
    else:
        tpp = max(d for d in range(1, tpp_max + 1) if n_tiles % d == 0)
        if 2 * tpp < tpp_max:
            tpp = tpp_max  # a partial last panel beats many small panels
    if M is not None and M < 1:
        return None  # nothing to compute: the plain nest handles empty shapes
    if (M is not None and M <= tuning.gemv_max_rows and K is not None
            and constant_matrix(b_expr, nest.opt.constant_inputs,
                                tuple(ax.var for ax in anchor.raxes), rexts)):
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
    if (windows is not None and windows_channels(windows, K) is not None
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
        b_expr, nest.opt.constant_inputs, tuple(ax.var for ax in anchor.raxes), rexts)))
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
                    row_group=group, pack_rest=gather, flat=flat, k_block=k_block)


def _k_block(tuning: TargetTuning, M: int | None, rows: int, cols: int, n_tiles: int,
             rexts: list[int | None], elem: int, init: PrimExpr) -> int:
    """``GemmPlan.k_block``: when a micro-panel of B (K x ``cols``) exceeds
    ``TargetTuning.gemm_k_block_min_bytes``, over at least two row tiles
    and two micro-panels, the block length along the reduction's first axis
    of the fewest equal blocks whose micro-panel block has at most
    ``gemm_k_block_bytes`` (a whole number of cache lines of A's rows when
    its other axes allow), else 0. Each micro-panel's block then meets
    every row tile from L1, A's block a chunk's micro-panels from L1/L2; with the
    whole reduction, a micro-panel of 49 x 4608 @ 4608 x 512 (1.18 MB) and
    A (0.9 MB) did not stay in a 2 MB L2 together."""
    if (not tuning.gemm_k_block_bytes or M is None or -(-M // rows) < 2
            or n_tiles < 2
            or None in rexts or not isinstance(init, (FloatImm, IntImm))):
        return 0
    K0 = rexts[0]
    inner = math.prod(rexts[1:])
    if cols * K0 * inner * elem <= tuning.gemm_k_block_min_bytes:
        return 0
    blocks = -(-cols * K0 * inner * elem // tuning.gemm_k_block_bytes)
    block = -(-K0 // blocks)
    align = 16 // math.gcd(16, inner)
    block = -(-block // align) * align
    return block if block < K0 else 0


def _flat_columns(nest: NestEmitter, anchor: Stage, row_axis: int, a_expr: PrimExpr,
                  b_expr: PrimExpr, group: int) -> int:
    """The row width ``W`` when the GEMM's columns can span the nest's last
    two axes ``(y, x)`` as ``y*W + x`` (``GemmPlan.flat``), else 0: the
    anchor asks for it (``FLAT_COLUMNS_ATTR``), both axes are static and
    neither is the row axis, A uses neither, and every load of B (unless B
    is read by gathers, and so packed whole) and of the epilogue reads them
    as a row-major pair of rows ``W`` long or not at all (so that ``H*W``
    consecutive columns are one contiguous run of each tensor, as of the
    output)."""
    m = nest.m
    if not anchor.tensor.op.attrs.get(FLAT_COLUMNS_ATTR) or m < 3 or row_axis >= m - 2:
        return 0
    H, W = static_int(nest.shape[m - 2]), static_int(nest.shape[m - 1])
    if H is None or W is None or H < 2:
        return 0
    ay, ax = anchor.axes[m - 2], anchor.axes[m - 1]
    if id(ay) in vars_of(a_expr) or id(ax) in vars_of(a_expr):
        return 0
    ry, rx = nest.root.axes[m - 2], nest.root.axes[m - 1]
    # (B read by gathers, ungrouped: every panel of it, the last narrower one
    # too, is packed, each column's value computed at its (y, x): any index
    # form. conv_im2col's windows of the image)
    gathers = not group and not unit_stride(b_expr, ax)
    if not gathers and not all(_row_major_pair(ld.indices, ld.tensor.shape, ay, ax, W)
                               for ld in loads_of(b_expr)):
        return 0
    if anchor is not nest.root and not all(
            _row_major_pair(ld.indices, ld.tensor.shape, ry, rx, W)
            for ld in loads_of(nest.root.expr)):
        return 0
    return W


def _row_major_pair(idx: tuple[PrimExpr, ...], shape: tuple[PrimExpr, ...], y: Var, x: Var,
                    W: int) -> bool:
    """Whether ``t[idx]`` (``t`` of ``shape``) reads ``y`` and ``x`` as
    ``t[.., y, x]`` with ``t``'s rows ``W`` long, or not at all."""
    uses = [id(y) in vars_of(i) or id(x) in vars_of(i) for i in idx]
    if not any(uses):
        return True
    return (len(idx) >= 2 and not any(uses[:-2]) and idx[-2] is y and idx[-1] is x
            and static_int(shape[-1]) == W)


#: at most this many panels of windows packed each by its own code
_WINDOW_PANELS = 8


def windows_channels(w: Windows, kq: int | None) -> int | None:
    """The image's channels when the windows are its rows' packed words
    (``kq`` words of four rows), else None."""
    c = static_int(w.data.shape[1]) if w.data is not None else None
    if c is None or kq is None or -(-c * w.taps // 4) != kq:
        return None
    return c
