"""Every row tile of a GEMM's micro-panel before the next
(:func:`tiles_by_panel`): a constant B packed at build time that is not in
the cache when a layer starts, or a reduction run in blocks
(``GemmPlan.k_block``). Split from :mod:`.gemm`, whose emitter it uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from phasec.ir import tir
from phasec.ir.tir import BinaryOp, Buffer, For, PrimExpr, Stmt, Var
from phasec.te.analysis import static_int
from phasec.te.operation import i64
from phasec.te.schedules.gemm_prefetch import (
    index_add as _add, index_mul as _mul, next_panel_prefetch,
)
from phasec.te.schedules.gemm_tile import register_tile, tiled_rows
from phasec.te.stmt import seq

if TYPE_CHECKING:
    from phasec.te.schedules.gemm import GemmEmitter

_I64 = "int64"


def tiles_by_panel(em: GemmEmitter, mr: int, col0: PrimExpr, tiles: int, width: int,
                   bp: Buffer | None, parallel: bool) -> Stmt:
    """Every row tile of micro-panel ``t``, then of ``t + 1``, ...: the
    weight (B, packed at build time) is not in the cache when a model's
    layer starts, and in the row-tile-first order the first row tile
    read all of it at once, its few rows of work waiting on every line
    (MobileNetV2 at 224x224, 480 -> 160 over 7x7: the 307 KB weight).
    Here the next micro-panel is prefetched over this one's first row
    tiles (:func:`.gemm_prefetch.next_panel_prefetch`); ``parallel``:
    threads over the micro-panels.

    A reduction in blocks (``GemmPlan.k_block``): every row tile of the
    micro-panel's first block, then of its second..., the partial sums
    in ``_part`` between blocks (the first block's from the anchor's
    init, filled in :meth:`.gemm.GemmEmitter.emit`); the next block of
    the micro-panel prefetched over this one (from its last block, the
    next micro-panel's first). The micro-panels in two chunks (``parallel``:
    one a thread), the blocks inside each: a parallel loop per block cost
    two threads ~25%."""
    Ms = static_int(em.M)
    K = static_int(em.K)
    assert Ms is not None and K is not None
    n_full, rem, end = tiled_rows(em, Ms, mr)
    inner = K // static_int(em.rexts[0])

    def rows(t: Var, nxt: PrimExpr, first: PrimExpr | None) -> Stmt:
        kb, col = em._kblock, _add(col0, _mul(t, width))

        def ahead(io: PrimExpr) -> Callable[[Var, PrimExpr], Stmt] | None:
            if bp is None:
                return None
            if kb is None:  # (the step along the first reduction axis)
                return lambda k, _: next_panel_prefetch(bp, nxt, io, k, K, width)
            # (each step of the block: its flat index)
            return lambda _, flat: next_panel_prefetch(
                bp, nxt, io, flat - _mul(kb[1], inner), kb[2] * inner, width, first, K)
        body: list[Stmt] = []
        if n_full:
            body.append(em._row_loop(n_full, mr, end, "serial", lambda io, row0, st: (
                register_tile(em, row0, mr, col, t, width, bp, ahead=ahead(io), **st))))
        if rem:
            body.append(register_tile(em, i64(Ms - rem), rem, col, t, width, bp,
                                      ahead=ahead(i64(n_full))))
        return seq(body)
    def following(t: Var) -> PrimExpr:
        return BinaryOp("min", _add(t, i64(1)), i64(tiles - 1))
    if em._part is None:
        t = Var(em.low.names.fresh("jt"), _I64)
        return For(t, i64(0), i64(tiles), "parallel" if parallel else "serial",
                   rows(t, following(t), None))
    K0, kb = static_int(em.rexts[0]), em.plan.k_block
    assert K0 is not None
    blocks = -(-K0 // kb)
    # two chunks of micro-panels (two threads), each block of the
    # reduction over all of a chunk's micro-panels: A's block is read
    # from L1/L2 by the chunk's micro-panels, not from L3 by each
    chunks = 2 if tiles % 2 == 0 else tiles
    ch, kv = Var(em.low.names.fresh("jc"), _I64), Var(em.low.names.fresh("kb"), _I64)
    per = tiles // chunks

    def chunk(body: Callable[[Var], Stmt]) -> Stmt:  # (t: micro-panel tt of chunk ch)
        tt, t = (Var(em.low.names.fresh("jt"), _I64) for _ in range(2))
        return For(tt, i64(0), i64(per), "serial", tir.LetStmt(
            t, _add(_mul(ch, per), tt), body(t)))
    if K0 % kb == 0:
        # Equal blocks: one loop over all of them, the last's epilogue
        # chosen in the tile by a condition (the tiles of the last block
        # as a second copy: LLVM 531-611 ms for ResNet-50's 3x3 512 -> 512
        # over 7x7, one loop 343-487 ms, and 4-5% faster at run time;
        # bench/README.md, issue 29, coldr). Each micro-panel's next block
        # is fetched while the chunk's others run; from the last block,
        # the next micro-panel's first: ``(kv + 1) // blocks`` is 1 there
        # only, ``(kv + 1) % blocks`` 0.
        em._kblock = (em._part, _mul(kv, kb), kb,
                        BinaryOp("==", kv, i64(blocks - 1)))
        turn = BinaryOp("//", _add(kv, i64(1)), i64(blocks))
        every = chunk(lambda t: rows(t, BinaryOp("min", _add(t, turn), i64(tiles - 1)),
                                     _mul(_mul(BinaryOp("%", _add(kv, i64(1)),
                                                        i64(blocks)), kb), inner)))
        em._kblock = None
        body = For(kv, i64(0), i64(blocks), "serial", every)
        return For(ch, i64(0), i64(chunks), "parallel" if parallel else "serial", body)
    em._kblock = (em._part, _mul(kv, kb), kb, False)
    # (each micro-panel's next block, fetched while the chunk's others run)
    ahead_rows = chunk(lambda t: rows(t, t, _mul(_mul(_add(kv, i64(1)), kb), inner)))
    em._kblock = (em._part, i64((blocks - 1) * kb), K0 - (blocks - 1) * kb, True)
    last = chunk(lambda t: rows(t, following(t), i64(0)))
    em._kblock = None
    body = seq([For(kv, i64(0), i64(blocks - 1), "serial", ahead_rows), last])
    return For(ch, i64(0), i64(chunks), "parallel" if parallel else "serial", body)
