"""Accumulating a reduction a row (1 x JT) or a tile (IT x JT) of outputs at
a time, then its epilogue over the same row or tile.

For a reduction whose innermost output axis ``j`` indexes the innermost
dimension of one of its inputs (conv2d's input row, a matmul the GEMM
schedule does not take): the reduction loops go outside, a contiguous,
vectorized loop over the JT columns of ``j`` inside, into a local
accumulator; IT rows of the next-to-last axis are accumulated together
when they divide it (``TargetTuning.tile_rows``), so that each input vector
loaded feeds IT products::

    for jo in range(J // JT):                  # (and io in range(I // IT))
        acc[ii, ji] = init                     # ii unrolled, ji vectorized
        for k...: acc[ii, ji] = acc[ii, ji] + src(io*IT + ii, jo*JT + ji, k...)
        out[io*IT + ii, jo*JT + ji] = epilogue(acc[ii, ji])

A symbolic ``J`` (``q @ k^T`` over a sequence known at run time) takes
rows of one vector's width, then its ``J % JT`` last columns one at a time,
in tiles of ``TargetTuning.gemm_rows`` rows when the rows share their loads
along ``j`` (then the ``I % IT`` last rows one at a time); the tile loops
are inside the kernel's innermost part.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phasec.ir.tir import Allocate, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var
from phasec.te.analysis import last_index_uses, loads_of, static_int, uses_var
from phasec.te.operation import i64
from phasec.te.stmt import block, combine, seq, tiled
from phasec.te.tensor import Tensor

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter
    from phasec.te.lowering import Stage

__all__ = ["RowTile", "plan"]


@dataclass(frozen=True)
class RowTile:
    """A row (``rows`` = 1) or tile of accumulators of the anchor."""

    anchor: Stage
    rows: int     # IT
    columns: int  # JT
    symbolic: bool = False  # J known at run time only (rows of one)
    vectorizes_last_axis = False

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """The root's axes but the tiled ones, then the loops over the tiles
        of the next-to-last axis ("io", tiles only) and of the last ("jo";
        for a symbolic J, both in :meth:`emit_inner`)."""
        m = nest.m
        tiled_axes = 1 if self.rows == 1 else 2
        loops = [("axis", t, nest.shape[t]) for t in range(m - tiled_axes)]
        if self.symbolic:
            return loops
        if self.rows > 1:
            loops.append(("io", m - 2, i64(static_int(nest.shape[m - 2]) // self.rows)))
        loops.append(("jo", m - 1, i64(static_int(nest.shape[m - 1]) // self.columns)))
        return loops

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        """Row (1 x JT) or tile (IT x JT) accumulation of the anchor plus the epilogue."""
        it, jt, anchor = self.rows, self.columns, self.anchor
        if not self.symbolic:
            jo = nest.tile_vars["jo"]
            io = nest.tile_vars.get("io")
            return _emit_tile(nest, anchor, it, jt, lambda ji: tiled(jo, jt, ji),
                              None if it == 1 else lambda ii: tiled(io, it, ii))
        m, names = nest.m, nest.low.names

        def loop(axis: int, suffix: str, extent: PrimExpr,
                 body: Callable[[Var], Stmt]) -> Stmt:
            var = Var(names.fresh(nest.root.axes[axis].name + suffix), "int64")
            return For(var, i64(0), extent, "serial", body(var))

        def columns(rows: int, row: Callable[[Var | None], PrimExpr] | None) -> Stmt:
            J = nest.shape[m - 1]
            return seq([
                loop(m - 1, "_o", J // jt, lambda jo: _emit_tile(
                    nest, anchor, rows, jt, lambda ji: tiled(jo, jt, ji), row)),
                loop(m - 1, "_r", J % jt, lambda jr: _emit_tile(
                    nest, anchor, rows, 1, lambda ji: J // jt * jt + jr + ji, row))])
        if it == 1:
            return columns(1, None)
        I = nest.shape[m - 2]
        return seq([
            loop(m - 2, "_o", I // it, lambda io: columns(it, lambda ii: tiled(io, it, ii))),
            loop(m - 2, "_r", I % it, lambda ir: columns(1, lambda _: I // it * it + ir))])


def plan(nest: NestEmitter) -> RowTile | None:
    """The row or tile of ``nest`` (see the module docstring), or None when
    no input is contiguous along the last axis."""
    m = nest.m
    anchor, p_j, p_i = nest.tile_anchor
    jvar = anchor.axes[p_j]
    # Row-wise accumulation pays off when some input is contiguous along j
    # (matmul's B[k, j], conv2d's input row); otherwise reduce per element.
    if not any(last_index_uses(ld, jvar) for ld in loads_of(anchor.expr)):
        return None
    ivar = anchor.axes[p_i] if m >= 2 and p_i >= 0 else None
    # rows of a tile share the loads of the inputs contiguous along j that do
    # not depend on the row (a convolution's input row for every output
    # channel); when each row reads its own (a depthwise convolution's
    # channel), a tile of rows only multiplies the accumulators
    shared = ivar is not None and any(
        last_index_uses(ld, jvar) and not any(uses_var(i, ivar) for i in ld.indices)
        for ld in loads_of(anchor.expr)) and not [
            s for s in nest.attached if s.depth >= m - 1 and s is not anchor]
    J = static_int(nest.shape[m - 1])
    tile_rows = nest.opt.target.tile_rows
    if J is None:
        # rows of one vector in tiles of as many rows as a GEMM's register
        # tile (q @ k^T: one vector of k^T feeds them all), the rest one by one
        it = nest.opt.target.gemm_rows if shared else 1
        bits = 64 if anchor.tensor.dtype == "float64" else 32
        return RowTile(anchor, it, nest.opt.target.lanes(bits), symbolic=True)
    if J < 2:
        return None
    jt = _pick_tile(J, (64, 32, 16, 8), 64, nest.opt.max_row)
    if jt is None:
        return None
    it = 1
    if shared:
        I = static_int(nest.shape[m - 2])
        if I is not None:
            it = next((t for t in tile_rows if I % t == 0), 1)
        if it > 1:
            jt = _pick_tile(J, (32, 16, 8), 32, nest.opt.max_row) or jt
    return RowTile(anchor, it, jt)


def _pick_tile(extent: int, candidates: tuple[int, ...], whole_max: int, cap: int) -> int | None:
    if extent <= whole_max:
        return extent
    for c in candidates:
        if extent % c == 0:
            return c
    return extent if extent <= cap else None


def _emit_tile(nest: NestEmitter, anchor: Stage, it: int, jt: int,
               column: Callable[[Var], PrimExpr],
               row: Callable[[Var | None], PrimExpr] | None) -> Stmt:
    """One tile at the columns ``column(ji)``, ji < jt, and the rows
    ``row(ii)``, ii < it (``row(None)`` for one row; no ``row``: the row axis
    is a loop outside)."""
    low = nest.low
    root, m = nest.root, nest.m
    acc_shape = (i64(it), i64(jt)) if it > 1 else (i64(jt),)
    acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, anchor.tensor.dtype)

    def tile_loops(make_body: Callable[[PrimExpr | None, Var], Stmt], ii_kind: str) -> Stmt:
        ji = Var(low.names.fresh(root.axes[m - 1].name + "_i"), "int64")
        ii = Var(low.names.fresh(root.axes[m - 2].name + "_i"), "int64") if it > 1 else None
        inner = make_body(ii, ji)
        kind = "vectorized" if nest.opt.vectorize and jt >= 2 else "serial"
        stmt: Stmt = For(ji, i64(0), i64(jt), kind, inner)
        if ii is not None:
            stmt = For(ii, i64(0), i64(it), ii_kind, stmt)
        return stmt

    def set_axes(ii: Var | None, ji: Var) -> None:
        nest.axis_expr[root.axes[m - 1]] = column(ji)
        if row is not None:
            nest.axis_expr[root.axes[m - 2]] = row(ii)

    def acc_index(ii: Var | None, ji: Var) -> tuple[PrimExpr, ...]:
        return (ii, ji) if ii is not None else (ji,)

    # anchor element bound to the current tile position
    def anchor_values() -> list[PrimExpr]:
        if anchor is root:
            return [nest.axis_expr[ax] for ax in root.axes]
        return [nest.root_expr(b) for b in anchor.binding]

    shape = [low.map_shape(s) for s in anchor.tensor.shape]
    rexts = [low.map_shape(ax.extent) for ax in anchor.raxes]

    def init_body(ii: Var | None, ji: Var) -> Stmt:
        set_axes(ii, ji)
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        init = low.map_shape(anchor.init)
        return block(nest.block_name(anchor.name + "_init"), ivs, anchor_values(),
                     BufferStore(acc, init, acc_index(ii, ji)))

    rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in anchor.raxes]

    def update_body(ii: Var | None, ji: Var) -> Stmt:
        set_axes(ii, ji)
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        rivs = [nest.iter_var(ax.var.name, ext, "R") for ax, ext in zip(anchor.raxes, rexts)]
        vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
        for ax, iv in zip(anchor.raxes, rivs):
            vmap[ax.var] = iv.var
        src = low.emit_value(anchor.expr, vmap, low.default_load)
        idx = acc_index(ii, ji)
        body = low.with_lets([src], lambda v: BufferStore(
            acc, combine(anchor.combiner, BufferLoad(acc, idx), v[0]), idx))
        return block(nest.block_name(anchor.name + "_update"), ivs + rivs,
                     anchor_values() + rloops, body)

    def epilogue_body(ii: Var | None, ji: Var) -> Stmt:
        set_axes(ii, ji)
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, nest.shape)]
        values = [nest.axis_expr[ax] for ax in root.axes]
        idx = acc_index(ii, ji)
        if anchor is root:
            value: PrimExpr = BufferLoad(acc, idx)
        else:
            vmap = {ax: iv.var for ax, iv in zip(root.axes, ivs)}

            def load(t: Tensor, ind: tuple[PrimExpr, ...]) -> PrimExpr:
                if not t.is_placeholder and low.stages.get(id(t)) is anchor:
                    return BufferLoad(acc, idx)
                return low.default_load(t, ind)
            value = low.emit_value(root.expr, vmap, load)
        body = low.with_lets([value], lambda v: BufferStore(root.buffer, v[0],
                                                            tuple(iv.var for iv in ivs)))
        return block(nest.block_name(root.name), ivs, values, body)

    stmts: list[Stmt] = [tile_loops(init_body, "unroll")]
    upd: Stmt = tile_loops(update_body, "unroll")
    for var, ext in reversed(list(zip(rloops, rexts))):
        upd = For(var, i64(0), ext, "serial", upd)
    stmts.append(upd)
    stmts.append(tile_loops(epilogue_body, "serial"))
    return Allocate(acc, seq(stmts))
