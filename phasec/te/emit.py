"""Emitting the loop nest of one root stage of a lowered TE graph: its loops
(parallel, fused, vectorized), the stages attached inside them, and the
blocks of each element (with partial accumulators for long reductions). What
runs inside the loops comes from the schedule the table of
:mod:`phasec.te.schedules` picks for the nest."""

from __future__ import annotations

import math

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, IterVar, PrimExpr, Stmt, Var,
)
from phasec.te import schedules
from phasec.te.analysis import calls, extent_guess, last_index_uses, loads_of, static_int
from phasec.te.operation import i64
from phasec.te.stmt import block, combine, seq, tiled
from phasec.te.tensor import TEError

if TYPE_CHECKING:
    from phasec.te.lowering import Lowering, Stage

__all__ = ["NestEmitter", "TileAnchor"]


class TileAnchor(NamedTuple):
    """The reduction a tiled schedule accumulates (the nest's root, or the
    one reduction attached at its full depth) and where the nest's last two
    axes are among its axes."""

    stage: Stage
    #: the position of the nest's last axis among the stage's axes
    column: int
    #: ... of the next-to-last axis (-1: not one of them)
    row: int


class NestEmitter:
    """Emits the loop nest of one root stage with the stages attached to it,
    in the schedule :func:`phasec.te.schedules.schedule_nest` picks."""

    def __init__(self, low: Lowering, root: Stage) -> None:
        self.low = low
        self.opt = low.opt
        self.root = root
        self.attached = [s for s in low.stage_list if s.root is root]
        self.m = len(root.axes)
        self.shape = [low.map_shape(s) for s in root.tensor.shape]
        self.axis_expr: dict[Var, PrimExpr] = {}
        #: buffers to allocate at the start of the level being emitted
        self.level_buffers: list[Buffer] = []
        #: the variables of the schedule's tile loops (the loop kinds other
        #: than "axis", e.g. "jo"), or the constant 0 when a loop is elided
        self.tile_vars: dict[str, PrimExpr] = {}
        self.schedule: schedules.NestSchedule = schedules.schedule_nest(self)
        #: the reduction the schedule accumulates in tiles (None: none)
        self.anchor: Stage | None = self.schedule.anchor

    @cached_property
    def tile_anchor(self) -> TileAnchor | None:
        """The reduction a tiled schedule (GEMM, rows or tiles of accumulators)
        would accumulate: the root when it is a reduction with no stage
        attached at its full depth, else the one reduction attached at full
        depth when the nest's last axis is exactly one of its axes; None
        when there is no such reduction."""
        m = self.m
        deep = [s for s in self.attached if s.depth == m]
        if self.root.is_reduce:
            if deep:
                return None
            return TileAnchor(self.root, m - 1, m - 2)
        if len(deep) != 1 or not deep[0].is_reduce:
            return None
        anchor = deep[0]
        last = self.root.axes[m - 1]
        pos = [k for k, b in enumerate(anchor.binding) if b is last]
        if len(pos) != 1:
            return None
        p_i = -1
        if m >= 2:
            prev = self.root.axes[m - 2]
            pos_i = [k for k, b in enumerate(anchor.binding) if b is prev]
            p_i = pos_i[0] if len(pos_i) == 1 else -1
        return TileAnchor(anchor, pos[0], p_i)

    # -- helpers -----------------------------------------------------------
    def _loop_var(self, axis: Var) -> Var:
        return Var(self.low.names.fresh(axis.name), "int64")

    def iter_var(self, base: str, extent: PrimExpr, kind: str) -> IterVar:
        """A fresh block axis named after ``base``."""
        return IterVar(Var(self.low.names.fresh("v_" + base), "int64"), extent, kind)

    def block_name(self, base: str) -> str:
        """A fresh block name from ``base``."""
        return self.low.block_names.fresh(base)

    def work(self) -> int:
        """Rough count of scalar operations of the nest (symbolic extents guessed)."""
        g = extent_guess
        total = 1
        for s in self.shape:
            total *= g(s)
        for st in self.attached + ([self.root] if self.root.is_reduce else []):
            count = 1
            depth = self.m if st is self.root else st.depth
            for s in self.shape[:depth]:
                count *= g(s)
            count *= st.row or 1
            for ax in st.raxes:
                count *= g(self.low.map_shape(ax.extent))
            total += count
        return total

    # -- emission ----------------------------------------------------------
    def emit(self) -> Stmt:
        """The nest: its outer loops (parallel, fused), the attached stages, the
        schedule's innermost part."""
        # the loops around the innermost part: (kind, axis index, extent)
        self.loops = self.schedule.outer_loops(self)
        self.q = sum(1 for kind, _, _ in self.loops if kind == "axis")
        self.parallel_at = self._parallel_level()
        self.fused_at = self._fused_level()
        return self._level(0)

    def _parallel_level(self) -> int:
        if not self.opt.parallel:
            return -1
        for k, (_, _, ext) in enumerate(self.loops):
            v = static_int(ext)
            if v == 1:
                continue
            if (v is None or v >= 2) and self.work() >= self.opt.min_parallel_work:
                return k
            return -1
        return -1

    def _fused_level(self) -> int:
        """The level of the parallel loop when it is fused with the next one
        into a single parallel loop (``i0 = f // E1``, ``i1 = f % E1``), or -1.

        Taken when the parallel axis has an odd number of static iterations
        below ``TargetTuning.parallel_min_iterations`` (which two threads
        cannot split evenly) and the next loop is another root axis of static
        extent, neither vectorized nor preceded by a stage computed between
        the two loops."""
        k = self.parallel_at
        if k < 0 or k + 1 >= len(self.loops) or k + 1 > self.q:
            return -1
        (kind0, _, ext0), (kind1, _, ext1) = self.loops[k], self.loops[k + 1]
        e0, e1 = static_int(ext0), static_int(ext1)
        if (kind0 != "axis" or kind1 != "axis" or e0 is None or e1 is None or e1 < 2
                or not self.opt.target.splits_unevenly(e0)
                or [st for st in self.attached if st.depth == k + 1]
                or self._loop_kind(k + 1) != "serial"):
            return -1
        return k

    def _stages_at(self, depth: int) -> list[Stage]:
        return [s for s in self.attached if s.depth == depth and s is not self.anchor]

    def _level(self, k: int) -> Stmt:
        """Code inside the first ``k`` loops of the plan.

        The first ``q`` loops each fix one root axis; a stage attached at
        depth ``d`` is computed at level ``d``, before the loop over axis
        ``d``. Tile loops (io/jo) never have stages attached inside them
        (guaranteed by the schedules that plan them).
        """
        stmts: list[Stmt] = []
        locals_: list[Buffer] = []
        pending = len(self.level_buffers)
        if k <= self.q:
            for st in self._stages_at(k):
                st.local = Buffer(self.low.names.fresh(st.name + "_local"),
                                  (i64(st.row or 1),), st.tensor.dtype)
                locals_.append(st.local)
                stmts.extend(self._emit_attached(st))
        if k == len(self.loops):
            stmts.append(self.schedule.emit_inner(self))
        else:
            kind, t, ext = self.loops[k]
            zero = i64(0)
            if kind == "axis" and k == self.fused_at:
                t1 = self.loops[k + 1][1]
                e1 = static_int(self.loops[k + 1][2])
                a0, a1 = self.root.axes[t], self.root.axes[t1]
                var = Var(self.low.names.fresh(f"{a0.name}_{a1.name}_fused"), "int64")
                self.axis_expr[a0] = var // e1
                self.axis_expr[a1] = var % e1
                stmts.append(For(var, zero, i64(static_int(ext) * e1), "parallel",
                                 self._level(k + 2)))
            elif kind == "axis":
                var = self._loop_var(self.root.axes[t])
                self.axis_expr[self.root.axes[t]] = var
                stmts.append(For(var, zero, ext, self._loop_kind(k), self._level(k + 1)))
            else:
                elide = static_int(ext) == 1 and self.parallel_at != k
                var = Var(self.low.names.fresh(self.root.axes[t].name + "_o"), "int64")
                self.tile_vars[kind] = zero if elide else var
                body = self._level(k + 1)
                stmts.append(body if elide else For(var, zero, ext, self._loop_kind(k), body))
        body_stmt = seq(stmts)
        # Buffers allocated at this level: the attached stages' locals, then
        # the partial accumulators emitted here. Allocations wrap the whole
        # level (never in the middle of a statement list, which the
        # TVMScript text could not tell apart from one that wraps the rest).
        locals_ += self.level_buffers[pending:]
        del self.level_buffers[pending:]
        for buf in reversed(locals_):
            body_stmt = Allocate(buf, body_stmt)
        return body_stmt

    def _loop_kind(self, k: int) -> str:
        if k == self.parallel_at:
            return "parallel"
        if (self.schedule.vectorizes_last_axis and self.opt.vectorize and k == self.m - 1
                and not self.root.is_reduce and not self._stages_at(self.m)):
            # A symbolic extent too: LLVM vectorizes it with a scalar remainder.
            ext = static_int(self.loops[k][2])
            if ext is None or ext >= 2:
                return "vectorized"
        return "serial"

    # -- attached stages (scalar accumulators) ---------------------------------
    def _emit_attached(self, st: Stage) -> list[Stmt]:
        values = [self.root_expr(b) for b in st.binding]
        target = st.local
        if st.row:  # the whole row, into the row buffer
            j = Var(self.low.names.fresh(st.axes[-1].name), "int64")
            body = self.emit_stage(st, values + [j], lambda ivs: (target, (ivs[-1],)))
            kind = "vectorized" if self.opt.vectorize and st.row >= 2 else "serial"
            return [For(j, i64(0), i64(st.row), kind, seq(body))]
        return self.emit_stage(st, values, lambda ivs: (target, (i64(0),)))

    def root_expr(self, e: PrimExpr) -> PrimExpr:
        """``e`` (a root axis or a constant) as the loops being emitted compute it."""
        if isinstance(e, Var):
            r = self.axis_expr.get(e)
            if r is None:
                raise TEError(f"internal: root axis {e.name} used before its loop")
            return r
        return e

    def emit_stage(self, st: Stage, values: list[PrimExpr],
                   target: Callable[[list[Var]], tuple[Buffer, tuple[PrimExpr, ...]]]) -> list[Stmt]:
        """Blocks computing one element of ``st`` whose axes are bound to ``values``.

        ``target(iter_vars)`` gives the buffer and indices the element goes to.
        """
        low = self.low
        shape = [low.map_shape(s) for s in st.tensor.shape]

        def spatial() -> tuple[list[IterVar], dict[Var, PrimExpr], Buffer, tuple[PrimExpr, ...]]:
            ivs = [self.iter_var(ax.name, ext, "S") for ax, ext in zip(st.axes, shape)]
            buf, idx = target([iv.var for iv in ivs])
            return ivs, {ax: iv.var for ax, iv in zip(st.axes, ivs)}, buf, idx

        if not st.is_reduce:
            ivs, vmap, buf, idx = spatial()
            value = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([value], lambda v: BufferStore(buf, v[0], idx))
            return [block(self.block_name(st.name), ivs, values, body)]
        init = low.map_shape(st.init)
        decompose = self.opt.decompose_reduction
        stmts: list[Stmt] = []
        if decompose:
            ivs0, _, buf0, idx0 = spatial()
            stmts.append(block(self.block_name(st.name + "_init"), ivs0, values,
                              BufferStore(buf0, init, idx0)))
        rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in st.raxes]
        rexts = [low.map_shape(ax.extent) for ax in st.raxes]
        lanes = self._partial_lanes(st, rexts) if decompose else None
        if lanes is not None:
            stmts.append(self._emit_partial_reduction(st, values, spatial, rloops, rexts, init,
                                                      lanes))
            return stmts
        rivs = [self.iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
        ivs, vmap, buf, idx = spatial()
        for ax, iv in zip(st.raxes, rivs):
            vmap[ax.var] = iv.var
        src = low.emit_value(st.expr, vmap, low.default_load)
        update = low.with_lets([src], lambda v: BufferStore(
            buf, combine(st.combiner, BufferLoad(buf, idx), v[0]), idx))
        stmt: Stmt = block(self.block_name(st.name), ivs + rivs, list(values) + rloops, update,
                          init=None if decompose else BufferStore(buf, init, idx))
        for var, ext in reversed(list(zip(rloops, rexts))):
            stmt = For(var, i64(0), ext, "serial", stmt)
        stmts.append(stmt)
        return stmts

    def _partial_lanes(self, st: Stage, rexts: list[PrimExpr]) -> int | None:
        """Lanes of partial accumulators for reducing ``st`` (None: reduce serially).

        A float reduction ``acc = acc + x[k]`` is one chain of dependent adds:
        it runs at the adder's latency, one element every few cycles, and
        LLVM may not reorder it (float addition is not associative). Summing
        into L independent partial accumulators (lane ``l`` takes ``k = ko *
        L + l``), combined once at the end, makes the inner loop elementwise,
        so it vectorizes and pipelines. It changes the order of the float
        operations (like numpy's pairwise sums do), so only reductions whose
        input is contiguous along the innermost reduction axis get it: long
        ones (``partial_min_extent``) the widest lanes that fit, short ones
        (``partial_short_min``) the narrowest, where a prologue fused into
        the sum (a SiLU before a 7x7 mean) would otherwise stay scalar.
        """
        if (not self.opt.vectorize or not st.raxes or not tir.is_float(st.tensor.dtype)
                or st.combiner not in ("sum", "prod", "fast_max", "max", "min")):
            return None
        if st.combiner in ("max", "min") and not calls(st.expr):
            # max/min are exact in any order: LLVM vectorizes those reductions
            # itself, but not around a call (a tanh GELU before a global max
            # pool stayed a scalar loop of scalar tanh calls: magika's 512 x
            # 508, 879 -> 192 us); fast_max is a select LLVM leaves a scalar chain
            return None
        extent = static_int(rexts[-1])
        if extent is None:
            return None
        # the outer reduction loops repeat the lane loop: a global average
        # pooling's 32 x 32 sums 1024 elements in 32 rows of 32
        outer = [static_int(e) for e in rexts[:-1]]
        total = extent * math.prod(outer) if None not in outer else extent
        target = self.opt.target
        short = total < target.partial_min_extent
        if short and (total < target.partial_short_min or extent < min(target.partial_lanes)):
            return None
        last = st.raxes[-1].var
        if not any(last_index_uses(ld, last) for ld in loads_of(st.expr)):
            return None
        if short:  # a short sum: one narrow lane loop (a 7x7 mean: 3 of 16 and 1)
            return min(target.partial_lanes)
        for lanes in target.partial_lanes:  # the widest with enough iterations ...
            if extent >= lanes and total >= target.partial_iterations * lanes:
                return lanes
        for lanes in target.partial_lanes:  # ... else the widest with at least 4
            if extent >= lanes and total >= 4 * lanes:
                return lanes
        return None

    def _emit_partial_reduction(self, st: Stage, values: list[PrimExpr],
                                spatial: Callable[[], Any], rloops: list[Var],
                                rexts: list[PrimExpr], init: PrimExpr, lanes: int) -> Stmt:
        """The reduction of ``st`` into ``lanes`` partial accumulators (see
        :meth:`_partial_lanes`): lanes set to ``init``; the innermost reduction
        loop split into ``ko`` (serial) and a vectorized lane loop, plus a
        serial tail for ``extent % lanes``; then the lanes combined into the
        element (which the init block has set). The lane buffer is allocated
        at the start of the enclosing level (see :meth:`_level`)."""
        low = self.low
        extent = static_int(rexts[-1])
        assert extent is not None
        part = Buffer(low.names.fresh(st.name + "_part"), (i64(lanes),), st.tensor.dtype)
        lane0 = Var(low.names.fresh("lane"), "int64")
        stmts: list[Stmt] = [For(lane0, i64(0), i64(lanes), "vectorized",
                                 BufferStore(part, init, (lane0,)))]

        def update(k_value: PrimExpr, lane: PrimExpr) -> Stmt:
            rivs = [self.iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
            ivs, vmap, _, _ = spatial()
            for ax, iv in zip(st.raxes, rivs):
                vmap[ax.var] = iv.var
            src = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([src], lambda v: BufferStore(
                part, combine(st.combiner, BufferLoad(part, (lane,)), v[0]), (lane,)))
            return block(self.block_name(st.name), ivs + rivs,
                         list(values) + rloops[:-1] + [k_value], body)

        ko, li = rloops[-1], Var(low.names.fresh("lane"), "int64")
        main: Stmt = For(ko, i64(0), i64(extent // lanes), "serial",
                         For(li, i64(0), i64(lanes), "vectorized",
                             update(tiled(ko, lanes, li), li)))
        tail = extent % lanes
        if tail and st.combiner in ("max", "min", "fast_max"):
            # idempotent: the last whole vector of the row again, overlapping
            # the lanes before it, rather than a scalar loop (of tanh calls)
            lt = Var(low.names.fresh("lane"), "int64")
            main = seq([main, For(lt, i64(0), i64(lanes), "vectorized",
                                  update(i64(extent - lanes) + lt, lt))])
        elif tail:
            lt = Var(low.names.fresh("lane"), "int64")
            main = seq([main, For(lt, i64(0), i64(tail), "serial",
                                  update(i64(extent - tail) + lt, lt))])
        for var, ext in reversed(list(zip(rloops[:-1], rexts[:-1]))):
            main = For(var, i64(0), ext, "serial", main)
        stmts.append(main)
        # Combine the lanes as a tree (halves folded onto each other, each
        # step a vector operation) rather than one serial chain of `lanes`.
        width = lanes // 2
        while width >= 2:
            lw = Var(low.names.fresh("lane"), "int64")
            stmts.append(For(lw, i64(0), i64(width), "vectorized",
                             BufferStore(part, combine(st.combiner, BufferLoad(part, (lw,)),
                                                       BufferLoad(part, (lw + i64(width),))),
                                         (lw,))))
            width //= 2
        stmts.append(BufferStore(part, combine(st.combiner, BufferLoad(part, (i64(0),)),
                                               BufferLoad(part, (i64(1),))), (i64(0),)))
        ivs, _, buf, idx = spatial()
        stmts.append(block(self.block_name(st.name + "_lanes"), ivs, values, BufferStore(
            buf, combine(st.combiner, BufferLoad(buf, idx), BufferLoad(part, (i64(0),))),
            idx)))
        self.level_buffers.append(part)  # allocated by the enclosing _level
        return seq(stmts)

