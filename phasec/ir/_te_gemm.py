"""The blocked, packed GEMM schedule of a matmul (and batch matmul) nest, with
its epilogue fused into the output tile (used by :mod:`phasec.ir._te_emit`).

For one matrix of the nest (inside the batch loops), with the register tile
MR x NR and panels of NC = TPP * NR columns (sizes from
:class:`phasec.ir.tuning.TargetTuning`)::

    for each panel of NC columns of B:               # parallel when there are several
        Bp[t, k, c] = B[k, col0 + t*NR + c]          # packed once per panel (contiguous
                                                     # micro-panels K x NR, L2-sized)
        for each tile of MR rows (then the M % MR remainder rows):
            for each micro-panel t of the panel:
                acc[MR, NR] = 0                      # registers
                for k: acc[ii, c] += A[row0+ii, k] * Bp[t, k, c]
                out[row0+ii, col0+t*NR+c] = epilogue(acc[ii, c])

The N % NR remainder columns get a narrower tile (reading B directly); the
M % MR remainder rows a shorter one (a static M) or a loop of one-row tiles
(a symbolic M). Panels are not packed when fewer than
``gemm_pack_min_row_tiles`` row tiles would read them (e.g. a batch-1
matrix-vector product: the copy would cost as much as the product).

K is not split: a packed micro-panel (K x NR) is read sequentially from L2
while the panel (K x NC, sized to ``gemm_panel_bytes``) stays there, so the
accumulators never leave registers and the epilogue applies to the finished
tile.
"""

from __future__ import annotations

import builtins as _b
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, For, IntImm, PrimExpr, Stmt, Var,
)
from .te import Tensor, _post_order, _static

if TYPE_CHECKING:
    from ._te_emit import _NestEmitter
    from ._te_lower import _Stage

_I64 = "int64"


def _i64(v: int) -> IntImm:
    return IntImm(v, _I64)


def _add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, IntImm) and a.value == 0:
        return b
    if isinstance(b, IntImm) and b.value == 0:
        return a
    return BinaryOp("+", a, b)


def _mul(a: PrimExpr, c: int) -> PrimExpr:
    if c == 1:
        return a
    if isinstance(a, IntImm):
        return _i64(a.value * c)
    return BinaryOp("*", a, _i64(c))


def _vars_of(e: PrimExpr) -> set[int]:
    return {id(n) for n in _post_order([e]) if isinstance(n, Var)}


@dataclass
class GemmPlan:
    """What the GEMM schedule needs to know about one matmul anchor."""

    a_expr: PrimExpr       # the row operand (uses i, not j), in the anchor's axis vars
    b_expr: PrimExpr       # the column operand (uses j, not i)
    b_first: bool          # the product is ``b * a`` (operand order kept)
    rows: int              # MR
    cols: int              # NR
    panel_tiles: int       # TPP: micro-panels per packed panel
    pack: bool
    lanes: int             # elements of one vector register
    #: a matrix-vector product (a few rows): tiles ``cols`` wide whose
    #: accumulators live in L1, one vectorized loop over them per k
    wide: bool = False


def plan_gemm(nest: _NestEmitter, anchor: _Stage) -> GemmPlan | None:
    """The GEMM plan for ``nest`` (whose innermost two axes are the anchor's
    rows and columns), or None when the anchor is not a matmul this schedule
    takes (see :meth:`_NestEmitter._choose_mode`)."""
    tuning = nest.opt.target
    m = nest.m
    if (m < 2 or anchor.tensor.op.tag != "matmul" or anchor.combiner != "sum"
            or len(anchor.raxes) != 1 or anchor.tensor.dtype not in ("float32", "float64")):
        return None
    if anchor is not nest.root:
        if len(anchor.axes) != m or any(b is not a for b, a in zip(anchor.binding, nest.root.axes)):
            return None
    # other stages computed per row or per element of the nest would need
    # their own place inside the tile
    if [s for s in nest.attached if s.depth >= m - 1 and s is not anchor]:
        return None
    expr = anchor.expr
    if not isinstance(expr, BinaryOp) or expr.op != "*":
        return None
    ivar, jvar = anchor.axes[m - 2], anchor.axes[m - 1]
    lhs, rhs = _vars_of(expr.lhs), _vars_of(expr.rhs)
    if id(ivar) in lhs and id(jvar) not in lhs and id(jvar) in rhs and id(ivar) not in rhs:
        a_expr, b_expr, b_first = expr.lhs, expr.rhs, False
    elif id(jvar) in lhs and id(ivar) not in lhs and id(ivar) in rhs and id(jvar) not in rhs:
        a_expr, b_expr, b_first = expr.rhs, expr.lhs, True
    else:
        return None
    N = _static(nest.shape[m - 1])
    if N is None or N < 1:
        return None
    bits = 64 if anchor.tensor.dtype == "float64" else 32
    rows, cols = tuning.gemm_rows, tuning.gemm_cols(bits)
    K = _static(nest.low._map_shape(anchor.raxes[0].extent))
    k_guess = K if K is not None else 1024
    elem = bits // 8
    max_cols = _b.min(tuning.gemm_panel_max_cols,
                      tuning.gemm_panel_bytes // _b.max(1, k_guess * elem))
    tpp_max = _b.max(1, max_cols // cols)
    n_tiles = N // cols
    if n_tiles <= tpp_max:
        tpp = _b.max(1, n_tiles)
    else:
        tpp = _b.max(d for d in range(1, tpp_max + 1) if n_tiles % d == 0)
        if 2 * tpp < tpp_max:
            tpp = tpp_max  # a partial last panel beats many small panels
    M = _static(nest.shape[m - 2])
    if M is not None and M <= tuning.gemv_max_rows:
        # B streams past once; its rows are read contiguously, W at a time
        width = _b.min(N, tuning.gemv_cols)
        return GemmPlan(a_expr, b_expr, b_first, _b.max(M, 1), width, 1, False,
                        tuning.lanes(bits), wide=True)
    row_tiles = None if M is None else -(-M // rows)
    pack = n_tiles > 0 and (row_tiles is None or row_tiles >= tuning.gemm_pack_min_row_tiles)
    return GemmPlan(a_expr, b_expr, b_first, rows, cols, tpp, pack, tuning.lanes(bits))


class GemmEmitter:
    """Emits the GEMM part of one nest (inside its batch loops)."""

    def __init__(self, nest: _NestEmitter, plan: GemmPlan, parallel: bool) -> None:
        self.nest = nest
        self.low = nest.low
        self.plan = plan
        self.parallel = parallel
        self.root, self.anchor, self.m = nest.root, nest.anchor, nest.m
        self.dtype = self.anchor.tensor.dtype
        self.M = nest.shape[self.m - 2]
        self.N = _static(nest.shape[self.m - 1])
        self.K = self.low._map_shape(self.anchor.raxes[0].extent)
        self.vectorize = nest.opt.vectorize

    # -- structure -----------------------------------------------------------
    def emit(self) -> Stmt:
        p = self.plan
        nr, tpp = p.cols, p.panel_tiles
        n_tiles, n_rem = divmod(self.N, nr)
        full, last = divmod(n_tiles, tpp)
        Ms = _static(self.M)
        row_tiles = None if Ms is None else Ms // p.rows
        # Parallel over panels when there are several, else over row tiles.
        par_panels = self.parallel and full >= 2
        par_rows = self.parallel and not par_panels and (row_tiles is None or row_tiles >= 2)
        stmts: list[Stmt] = []
        shared: Buffer | None = None
        if p.pack and n_tiles and not par_panels:
            shared = self._pack_buffer(_b.min(tpp, n_tiles), nr)
        if full:
            jc = Var(self.low.names.fresh("jc"), _I64)
            bp = shared
            if p.pack and bp is None:
                bp = self._pack_buffer(tpp, nr)
            body = self._panel(_mul(jc, tpp * nr), tpp, nr, bp, par_rows)
            if p.pack and shared is None:
                body = Allocate(bp, body)
            stmts.append(For(jc, _i64(0), _i64(full), "parallel" if par_panels else "serial",
                             body))
        if last:
            bp = shared if shared is not None or not p.pack else self._pack_buffer(last, nr)
            tail = self._panel(_i64(full * tpp * nr), last, nr, bp, par_rows)
            stmts.append(tail if bp is shared else Allocate(bp, tail))
        if n_rem:
            stmts.append(self._panel(_i64(n_tiles * nr), 1, n_rem, None, par_rows))
        from ._te_emit import _seq
        body = _seq(stmts)
        if shared is not None:
            body = Allocate(shared, body)
        return body

    def _pack_buffer(self, tiles: int, width: int) -> Buffer:
        return Buffer(self.low.names.fresh(self.anchor.name + "_bpack"),
                      (_i64(tiles), self.K, _i64(width)), self.dtype)

    def _panel(self, col0: PrimExpr, tiles: int, width: int, bp: Buffer | None,
               par_rows: bool) -> Stmt:
        """Columns ``[col0, col0 + tiles*width)``: pack them (``bp``), then every row."""
        from ._te_emit import _seq
        p = self.plan
        stmts: list[Stmt] = []
        if bp is not None:
            stmts.append(self._pack(bp, col0, tiles, width))
        mr = p.rows
        Ms = _static(self.M)
        if Ms is not None:
            n_full, rem = divmod(Ms, mr)
            if n_full:
                io = Var(self.low.names.fresh("io"), _I64)
                kind = "parallel" if par_rows and n_full >= 2 else "serial"
                stmts.append(For(io, _i64(0), _i64(n_full), kind,
                                 self._row_block(_mul(io, mr), mr, col0, tiles, width, bp)))
            if rem:
                stmts.append(self._row_block(_i64(Ms - rem), rem, col0, tiles, width, bp))
        else:
            io = Var(self.low.names.fresh("io"), _I64)
            n_full_e = BinaryOp("//", self.M, _i64(mr))
            stmts.append(For(io, _i64(0), n_full_e, "parallel" if par_rows else "serial",
                             self._row_block(_mul(io, mr), mr, col0, tiles, width, bp)))
            r = Var(self.low.names.fresh("ir"), _I64)
            base = BinaryOp("*", n_full_e, _i64(mr))
            stmts.append(For(r, _i64(0), BinaryOp("%", self.M, _i64(mr)), "serial",
                             self._row_block(_add(base, r), 1, col0, tiles, width, bp)))
        return _seq(stmts)

    def _pack(self, bp: Buffer, col0: PrimExpr, tiles: int, width: int) -> Stmt:
        """``bp[t, k, c] = B[k, col0 + t*width + c]`` (the column operand's value)."""
        nest, low, anchor, m = self.nest, self.low, self.anchor, self.m
        t = Var(low.names.fresh("tp"), _I64)
        k = Var(low.names.fresh("kp"), _I64)
        c = Var(low.names.fresh("cp"), _I64)
        col = _add(col0, _add(_mul(t, width), c))
        shape = [low._map_shape(s) for s in anchor.tensor.shape]
        ivs = [nest._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        kiv = nest._iter_var(anchor.raxes[0].var.name, self.K, "S")
        vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
        vmap[anchor.raxes[0].var] = kiv.var
        values = self._anchor_values(None, col)
        value = low.emit_value(self.plan.b_expr, vmap, low.default_load)
        from ._te_emit import _block
        # the block's axes: the anchor's (row axis bound to 0: B does not use it) and k
        body = low.with_lets([value], lambda v: BufferStore(bp, v[0], (t, kiv.var, c)))
        blk = _block(nest._block_name(anchor.name + "_pack"), ivs + [kiv], values + [k], body)
        inner = For(c, _i64(0), _i64(width), "vectorized" if self.vectorize else "serial", blk)
        return For(t, _i64(0), _i64(tiles), "serial", For(k, _i64(0), self.K, "serial", inner))

    def _row_block(self, row0: PrimExpr, mr: int, col0: PrimExpr, tiles: int, width: int,
                   bp: Buffer | None) -> Stmt:
        """Rows ``[row0, row0 + mr)`` of the panel: one register tile per micro-panel."""
        t = Var(self.low.names.fresh("jt"), _I64)
        body = self._tile(row0, mr, _add(col0, _mul(t, width)), t, width, bp)
        return For(t, _i64(0), _i64(tiles), "serial", body)

    # -- the register tile -----------------------------------------------------
    def _anchor_values(self, row: PrimExpr | None, col: PrimExpr) -> list[PrimExpr]:
        """The anchor's axis values at (row, col) (batch axes from the outer loops)."""
        nest, m = self.nest, self.m
        vals = [nest.axis_expr[ax] for ax in self.root.axes[:m - 2]]
        return vals + [row if row is not None else _i64(0), col]

    def _tile(self, row0: PrimExpr, mr: int, col: PrimExpr, t: Var, width: int,
              bp: Buffer | None) -> Stmt:
        from ._te_emit import _block, _combine, _seq
        nest, low, root, anchor, m = self.nest, self.low, self.root, self.anchor, self.m
        acc_shape = (_i64(mr), _i64(width))
        acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, self.dtype)
        vec = "vectorized" if self.vectorize and width >= 2 else "serial"
        shape = [low._map_shape(s) for s in anchor.tensor.shape]

        lanes = self.plan.lanes if width % self.plan.lanes == 0 and not self.plan.wide else width
        nvec = width // lanes

        def loops(make: Callable[[Var, PrimExpr], Stmt], ii_kind: str) -> Stmt:
            # rows x vectors unrolled, each vector's lanes one vectorized loop
            # whose extent is the vector width (no loop is left once LLVM
            # vectorizes it, so the accumulators stay in registers)
            ii = Var(low.names.fresh(root.axes[m - 2].name + "_i"), _I64)
            jv = Var(low.names.fresh(root.axes[m - 1].name + "_v"), _I64)
            jl = Var(low.names.fresh(root.axes[m - 1].name + "_i"), _I64)
            ji = _add(_mul(jv, lanes), jl) if nvec > 1 else jl
            stmt: Stmt = For(jl, _i64(0), _i64(lanes), vec, make(ii, ji))
            if nvec > 1:
                stmt = For(jv, _i64(0), _i64(nvec), "unroll", stmt)
            return For(ii, _i64(0), _i64(mr), ii_kind, stmt)

        def init(ii: Var, ji: PrimExpr) -> Stmt:
            ivs = [nest._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            return _block(nest._block_name(anchor.name + "_init"), ivs,
                          self._anchor_values(_add(row0, ii), _add(col, ji)),
                          BufferStore(acc, low._map_shape(anchor.init), (ii, ji)))

        k = Var(low.names.fresh(anchor.raxes[0].var.name), _I64)

        def update(ii: Var, ji: PrimExpr) -> Stmt:
            ivs = [nest._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            kiv = nest._iter_var(anchor.raxes[0].var.name, self.K, "R")
            vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
            vmap[anchor.raxes[0].var] = kiv.var
            a = low.emit_value(self.plan.a_expr, vmap, low.default_load)
            if bp is not None:
                b: PrimExpr = BufferLoad(bp, (t, kiv.var, ji))
            else:
                b = low.emit_value(self.plan.b_expr, vmap, low.default_load)
            prod = BinaryOp("*", b, a) if self.plan.b_first else BinaryOp("*", a, b)
            body = low.with_lets([prod], lambda v: BufferStore(
                acc, _combine("sum", BufferLoad(acc, (ii, ji)), v[0]), (ii, ji)))
            return _block(nest._block_name(anchor.name + "_update"), ivs + [kiv],
                          self._anchor_values(_add(row0, ii), _add(col, ji)) + [k], body)

        def epilogue(ii: Var, ji: PrimExpr) -> Stmt:
            nest.axis_expr[root.axes[m - 2]] = _add(row0, ii)
            nest.axis_expr[root.axes[m - 1]] = _add(col, ji)
            ivs = [nest._iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, nest.shape)]
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
            return _block(nest._block_name(root.name), ivs, values, body)

        upd = For(k, _i64(0), self.K, "serial", loops(update, "unroll"))
        return Allocate(acc, _seq([loops(init, "unroll"), upd, loops(epilogue, "unroll")]))
