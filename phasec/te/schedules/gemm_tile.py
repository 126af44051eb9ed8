"""The GEMM's register tile: one tile of ``mr`` rows and ``width`` columns
of the output, its accumulators in registers through the reduction, its
epilogue applied to the finished sums (:mod:`.gemm` plans the tiles and
panels around it; :mod:`.gemm_amx` puts integer tiles on AMX)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from phasec.ir import tir
from phasec.arith import simplify
from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var,
)
from phasec.te.analysis import static_int
from phasec.te.operation import i64
from phasec.te.schedules.gemm_amx import AMX_ROWS, amx_blocks, amx_tile
from phasec.te.schedules.gemm_operands import is_dot4
from phasec.te.schedules.gemm_prefetch import (
    epilogue_prefetch, index_add as _add, index_mul as _mul, next_rows_prefetch,
)
from phasec.te.stmt import block, combine, seq
from phasec.te.tensor import Tensor

if TYPE_CHECKING:
    from phasec.te.schedules.gemm import GemmEmitter

_I64 = "int64"
#: :func:`tiled_rows` computes at most M / this many rows in vain
#: (bench/README.md, issue 29, rowtail)
_PADDED_ROWS_PART = 64


def tiled_rows(em: GemmEmitter, M: int, mr: int) -> tuple[int, int, int | None]:
    """(tiles of ``mr`` rows in the row loop of ``em``'s GEMM over ``M``
    static rows, rows left for a shorter tile after it, M when the loop's
    last tile ends at M). The ``M % mr`` rows left after the whole tiles
    run as one more tile of their loop (moved back to end at M, or its rows
    past M computing row M - 1; either way storing only its own rows:
    :meth:`.gemm.GemmEmitter._row_loop`), not as a second copy of the
    register tile (and of each of its column variants) after it, when at
    most M / ``_PADDED_ROWS_PART`` rows are computed in vain (SqueezeNet's
    256 rows in tiles of 6: 2). Not for a wide tile (a few rows of one long
    loop), an AMX plan (its tiles' rows are whole AMX tiles,
    :func:`.gemm_amx.rest_rows`) nor an integer GEMM (none measured). Each
    tile still stores only its own rows: no two iterations of a parallel
    row loop store one element."""
    p = em.plan
    n_full, rem = divmod(M, mr)
    if (rem and n_full and (mr - rem) * _PADDED_ROWS_PART <= M and not p.wide
            and p.rows not in AMX_ROWS and not is_dot4(em.anchor.expr)):
        return n_full + 1, 0, M
    return n_full, rem, None


def register_tile(em: GemmEmitter, row0: PrimExpr, mr: int, col: PrimExpr, t: Var,
                  width: int, bp: Buffer | None,
                  ahead: Callable[[Var, PrimExpr], Stmt] | None = None,
                  rows_end: int | None = None, first_stored: PrimExpr | None = None) -> Stmt:
    """One register tile of rows ``[row0, row0 + mr)`` and ``width``
    columns from ``col``; ``ahead(k, flat)``: a prefetch for reduction
    step ``k`` of the first axis, ``flat`` of all (else
    :func:`.gemm_prefetch.next_rows_prefetch`'s, if any). ``rows_end``
    (M, when the tile may reach past it: the last of a loop of
    ``ceil(M / mr)`` tiles, :func:`tiled_rows`):
    its rows past M compute row M - 1 again (valid reads, results
    discarded) and its epilogue stores only the rows before M.
    ``first_stored``: the tile's epilogue stores only the rows from there
    on (the last tile of such a loop moved back to end at M, the rows it
    shares with the one before left to that one:
    :meth:`.gemm.GemmEmitter._row_loop`)."""
    nest, low, root, anchor, m, ri = (em.nest, em.low, em.root, em.anchor, em.m,
                                      em.ri)
    assert rows_end is first_stored is None or not em.plan.wide, "a wide tile's rows"

    def row_of(ii: Var) -> PrimExpr:  # (the row a tile row computes)
        row = _add(row0, ii)
        return row if rows_end is None else BinaryOp("min", row, i64(rows_end - 1))
    shape = [low.map_shape(s) for s in anchor.tensor.shape]
    # The columns as whole vectors (unrolled), then the rest as vectors of
    # powers of two (see _vector_pieces); a wide tile (few rows) is one
    # long vectorized loop.
    if em.plan.wide:
        groups = [(0, 1, width)]
    else:
        pieces = em._vector_pieces(width)
        nvec = pieces.count(em.plan.lanes)
        groups = [(0, nvec, em.plan.lanes)] if nvec else []
        start = nvec * em.plan.lanes
        for piece in pieces[nvec:]:
            groups.append((start, 1, piece))
            start += piece
    # a last whole vector past the real columns (_whole_tail): computed,
    # and the epilogue stores only the real ones
    stored = groups
    if not em.plan.wide and sum(pieces) > width:
        lanes = em.plan.lanes
        last = (nvec - 1) * lanes
        stored = ([(0, nvec - 1, lanes)] if nvec > 1 else []) + [(last, 1, width - last)]
    acc_shape = (i64(mr), i64(groups[-1][0] + groups[-1][1] * groups[-1][2]))
    if stored is not groups:  # (the init and update blocks' columns reach past N)
        end = em.N + acc_shape[1].value - width
        if em.plan.flat:  # (rows of the image past its last: _padded_rest)
            shape[m - 2] = i64(-(-end // em.plan.flat))
        else:
            shape[m - 1] = i64(end)
    acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, em.dtype)

    def loops(make: Callable[[Var, PrimExpr], Stmt], ii_kind: str,
              parts_of: list[tuple[int, int, int]] = groups, stores: bool = False) -> Stmt:
        # rows x vectors unrolled, each vector's lanes one vectorized loop
        # whose extent is the vector width (no loop is left once LLVM
        # vectorizes it, so the accumulators stay in registers)
        ii = Var(low.names.fresh(root.axes[ri].name + "_i"), _I64)
        parts: list[Stmt] = []
        for start, count, ext in parts_of:
            jv = Var(low.names.fresh(root.axes[m - 1].name + "_v"), _I64)
            jl = Var(low.names.fresh(root.axes[m - 1].name + "_i"), _I64)
            ji = _add(i64(start), _add(_mul(jv, ext), jl) if count > 1 else jl)
            kind = "vectorized" if em.vectorize and ext >= 2 else "serial"
            stmt: Stmt = For(jl, i64(0), i64(ext), kind, make(ii, ji))
            if count > 1:
                stmt = For(jv, i64(0), i64(count), "unroll", stmt)
            parts.append(stmt)
        body = seq(parts)
        # (a condition per row, not a loop over fewer rows: over a constant
        # count LLVM unrolls the rows and the accumulators stay in registers)
        if stores and rows_end is not None:
            body = tir.IfThenElse(BinaryOp("<", _add(row0, ii), i64(rows_end)), body)
        if stores and first_stored is not None:
            # (one value a tile: the rows of the tile before it, 0 but in the last)
            body = tir.IfThenElse(BinaryOp(">=", ii, first_stored - row0), body)
        return For(ii, i64(0), i64(mr), ii_kind, body)

    kblock = em._kblock
    # A's row panels (gemm_prepack.row_panels): the tile's panel and first row in it
    a_rows = None
    if em.a_rows is not None:
        ap, per = em.a_rows
        first = simplify(BinaryOp("//", row0, i64(per)))
        lane = simplify(BinaryOp("%", row0, i64(per)))
        assert isinstance(lane, tir.IntImm) and lane.value + mr <= per, (row0, mr, per)
        a_rows = (ap, first, lane)

    def init(ii: Var, ji: PrimExpr) -> Stmt:
        if kblock is not None:  # (the previous blocks' sums)
            return BufferStore(acc, BufferLoad(kblock[0], (row_of(ii), _add(col, ji))),
                               (ii, ji))
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        return block(nest.block_name(anchor.name + "_init"), ivs,
                      em._anchor_values(row_of(ii), _add(col, ji)),
                      BufferStore(acc, low.map_shape(anchor.init), (ii, ji)))

    ks, kstep = em._reduction_loops("")
    # A matrix-vector product adds ``unroll`` rows of B per pass over its
    # accumulators (in L1, not registers): the same additions in the same
    # order (bitwise the same sums), a quarter of the accumulator loads
    # and stores, and four rows of B streaming at once.
    K0 = static_int(em.rexts[0]) if len(em.rexts) == 1 else None
    unroll = 4 if (em.plan.wide and bp is None and K0 is not None and K0 >= 8
                   and K0 % 4 == 0) else 1

    def update(ii: Var, ji: PrimExpr) -> Stmt:
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
        kivs = [nest.iter_var(ax.var.name, ext, "R")
                for ax, ext in zip(anchor.raxes, em.rexts)]
        vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
        for ax, iv in zip(anchor.raxes, kivs):
            vmap[ax.var] = iv.var
        total: PrimExpr = BufferLoad(acc, (ii, ji))
        for q in range(unroll):
            if q:
                vmap[anchor.raxes[0].var] = kivs[0].var + q
            a = (low.emit_value(em.plan.a_expr, vmap, low.default_load) if a_rows is None
                 else BufferLoad(a_rows[0], (a_rows[1], _add(kivs[0].var, i64(q)),
                                             _add(a_rows[2], ii))))
            if bp is not None:
                kflat: PrimExpr = kivs[0].var
                for iv, ext in zip(kivs[1:], em.rexts[1:]):
                    kflat = _add(_mul(kflat, static_int(ext)), iv.var)
                b: PrimExpr = BufferLoad(bp, (t, kflat, ji))
            elif em.plan.row_group:
                # the same for every row of the tile: read at its first row
                # (not per row, which LLVM would not see is the same load)
                b = low.emit_value(em.plan.b_expr, {**vmap, anchor.axes[ri]: row0},
                                   low.default_load)
            else:
                b = low.emit_value(em.plan.b_expr, vmap, low.default_load)
            ops = (b, a) if em.plan.b_first else (a, b)
            # (an integer GEMM: acc + dot4(a, b) is one vpdpbusd)
            prod = (tir.Call("dot4_u8s8", ops, "int32") if is_dot4(anchor.expr)
                    else ops[0] * ops[1])
            total = combine("sum", total, prod)
        body = low.with_lets([total], lambda v: BufferStore(acc, v[0], (ii, ji)))
        kvalues = [_mul(ks[0], unroll)] if unroll > 1 else kbind
        return block(nest.block_name(anchor.name + "_update"), ivs + kivs,
                      em._anchor_values(row_of(ii), _add(col, ji)) + kvalues, body)

    def keep(ii: Var, ji: PrimExpr) -> Stmt:  # (a block before the last)
        assert kblock is not None
        return BufferStore(kblock[0], BufferLoad(acc, (ii, ji)), (_add(row0, ii), _add(col, ji)))

    def epilogue(ii: Var, ji: PrimExpr) -> Stmt:
        nest.axis_expr[root.axes[ri]] = _add(row0, ii)
        for t, value in em.plan.column_values(m, _add(col, ji)).items():
            nest.axis_expr[root.axes[t]] = value
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
    amx = amx_blocks(em, mr, width, bp, row0) if unroll == 1 else None
    assert amx is None or rows_end is first_stored is None, "an AMX tile's rows"
    if amx is not None and bp is not None:  # (the zeroing and most of K on AMX)
        def update_at(k: PrimExpr) -> Stmt:
            kbind[:] = [k]
            return loops(update, "unroll")
        return Allocate(acc, seq([*amx_tile(em, amx, acc, bp, t, ks[0], loops(
            init, "unroll"), update_at), loops(epilogue, "serial", stored)]))
    if unroll > 1:
        upd: Stmt = For(ks[0], i64(0), i64(K0 // unroll), "serial", loops(update, "unroll"))
    else:
        hint = (ahead(ks[0], kstep) if ahead is not None
                else None if a_rows is not None  # (one stream: the prefetchers follow it)
                else next_rows_prefetch(em, row0, mr, ks[0]))
        upd = em._wrap_reduction(ks, loops(update, "unroll") if hint is None
                                   else seq([hint, loops(update, "unroll")]))
    last = True if kblock is None else kblock[3]
    if last is False:  # (a block before the last)
        return Allocate(acc, seq([loops(init, "unroll"), upd,
                                  loops(keep, "serial", groups, True)]))
    prefetch = epilogue_prefetch(em, row0, mr, col, width)
    finish = loops(epilogue, "serial", stored, True)
    if last is not True:  # (every block, one loop: the epilogue in the last only)
        prefetch = [tir.IfThenElse(last, seq(prefetch))] if prefetch else []
        finish = tir.IfThenElse(last, finish, loops(keep, "serial", groups, True))
    return Allocate(acc, seq([loops(init, "unroll"), *prefetch, upd, finish]))
