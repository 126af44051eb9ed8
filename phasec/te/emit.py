"""Emitting the loop nests of a lowered TE graph: loop order, tiling,
vectorization and blocks (used by :mod:`phasec.te.lowering`)."""

from __future__ import annotations

import builtins as _b
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, BinaryOp, Block, Buffer, BufferLoad, BufferStore, For, IntImm, IterVar, LetStmt,
    PrimExpr, Select, SeqStmt, Stmt, Var,
)
from phasec.te import (
    ProducerLoad, TEError, Tensor, _expr_key,
    _extent_guess, _post_order, _static,
)

if TYPE_CHECKING:
    from phasec.te.lowering import _Lowering, _Stage


def _combine(combiner: str, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
    if combiner == "sum":
        return BinaryOp("+", acc, value)
    if combiner == "prod":
        return BinaryOp("*", acc, value)
    if combiner == "fast_max":  # see te.fast_max: LLVM emits the CPU's max for this select
        return Select(BinaryOp(">", acc, value), acc, value)
    return BinaryOp(combiner, acc, value)


def _seq(stmts: list[Stmt]) -> Stmt:
    """The statements in sequence (nested sequences flattened). An allocation
    or let followed by more statements takes them into its scope: the same
    program (its buffer or variable is fresh), and scoped statements end their
    lists, so the kernel prints with ``T.alloc_buffer`` and reads back exactly."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    for i in range(len(flat) - 1):
        if isinstance(flat[i], (Allocate, LetStmt)):
            flat[i:] = [_extend_scope(flat[i], flat[i + 1:])]
            break
    return flat[0] if len(flat) == 1 else SeqStmt(flat)


def _extend_scope(stmt: Allocate | LetStmt, rest: list[Stmt]) -> Stmt:
    """``stmt`` (an Allocate/LetStmt chain) with ``rest`` appended to its body."""
    chain: list[Allocate | LetStmt] = []
    inner: Stmt = stmt
    while isinstance(inner, (Allocate, LetStmt)):
        chain.append(inner)
        inner = inner.body
    body = _seq([inner, *rest])
    for s in reversed(chain):
        body = (Allocate(s.buffer, body) if isinstance(s, Allocate)
                else LetStmt(s.var, s.value, body))
    return body


class _NestEmitter:
    """Emits the loop nest of one root stage with the stages attached to it."""

    def __init__(self, low: _Lowering, root: _Stage) -> None:
        self.low = low
        self.opt = low.opt
        self.root = root
        self.attached = [s for s in low.stage_list if s.root is root]
        self.m = len(root.axes)
        self.shape = [low._map_shape(s) for s in root.tensor.shape]
        self.axis_expr: dict[Var, PrimExpr] = {}
        #: buffers to allocate at the start of the level being emitted
        self.level_buffers: list[Buffer] = []
        self.gemm: Any = None  # the GemmPlan in "gemm" mode
        self.mode, self.anchor, self.it, self.jt = self._choose_mode()

    # -- mode selection ----------------------------------------------------
    def _choose_mode(self) -> tuple[str, _Stage | None, int, int]:
        m = self.m
        if not self.opt.tile or m == 0:
            return "scalar", None, 1, 1
        deep = [s for s in self.attached if s.depth == m]
        if self.root.is_reduce:
            if deep:
                return "scalar", None, 1, 1
            anchor = self.root
            p_j = m - 1
            p_i = m - 2
        else:
            from phasec.te.schedules.transpose import takes_transpose
            if not self.attached and takes_transpose(self):
                return "transpose", None, 1, 1
            if len(deep) != 1 or not deep[0].is_reduce:
                return "scalar", None, 1, 1
            anchor = deep[0]
            last = self.root.axes[m - 1]
            pos = [k for k, b in enumerate(anchor.binding) if b is last]
            if len(pos) != 1:
                return "scalar", None, 1, 1
            p_j = pos[0]
            p_i = -1
            if m >= 2:
                prev = self.root.axes[m - 2]
                pos_i = [k for k, b in enumerate(anchor.binding) if b is prev]
                p_i = pos_i[0] if len(pos_i) == 1 else -1
        from phasec.te.schedules.gemm import plan_gemm
        self.gemm = plan_gemm(self, anchor)
        if self.gemm is not None:
            return "gemm", anchor, 1, 1
        jvar = anchor.axes[p_j]
        # Row-wise accumulation pays off when some input is contiguous along j
        # (matmul's B[k, j], conv2d's input row); otherwise reduce per element.
        if not _b.any(_last_index_uses(ld, jvar) for ld in _loads_of(anchor.expr)):
            return "scalar", None, 1, 1
        J = _static(self.shape[m - 1])
        if J is None or J < 2:
            return "scalar", None, 1, 1
        jt = _pick_tile(J, (64, 32, 16, 8), 64, self.opt.max_row)
        if jt is None:
            return "scalar", None, 1, 1
        it = 1
        if m >= 2 and p_i >= 0 and not [s for s in self.attached if s.depth >= m - 1
                                         and s is not anchor]:
            I = _static(self.shape[m - 2])
            if I is not None:
                it = next((t for t in self.opt.target.tile_rows if I % t == 0), 1)
            if it > 1:
                jt = _pick_tile(J, (32, 16, 8), 32, self.opt.max_row) or jt
        return ("tile" if it > 1 else "row"), anchor, it, jt

    # -- helpers -----------------------------------------------------------
    def _loop_var(self, axis: Var) -> Var:
        return Var(self.low.names.fresh(axis.name), "int64")

    def _iter_var(self, base: str, extent: PrimExpr, kind: str) -> IterVar:
        return IterVar(Var(self.low.names.fresh("v_" + base), "int64"), extent, kind)

    def _block_name(self, base: str) -> str:
        return self.low.block_names.fresh(base)

    def _work(self) -> int:
        """Rough count of scalar operations of the nest (symbolic extents guessed)."""
        g = _extent_guess
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
                count *= g(self.low._map_shape(ax.extent))
            total += count
        return total

    # -- emission ----------------------------------------------------------
    def emit(self) -> Stmt:
        self.loops = self._outer_loop_plan()
        self.q = _b.sum(1 for kind, _, _ in self.loops if kind == "axis")
        self.parallel_at = self._parallel_level()
        self.fused_at = self._fused_level()
        return self._level(0)

    def _outer_loop_plan(self) -> list[tuple[str, int, PrimExpr]]:
        """The loops around the innermost part: (kind, axis index, extent)."""
        m = self.m
        plan: list[tuple[str, int, PrimExpr]] = []
        if self.mode == "scalar":
            plan = [("axis", t, self.shape[t]) for t in range(m)]
        elif self.mode == "gemm":  # the batch loops; _te_gemm emits the rest
            plan = [("axis", t, self.shape[t]) for t in self.gemm.batch_axes(m)]
        elif self.mode == "transpose":  # the outer axes; _te_transpose emits the last two
            plan = [("axis", t, self.shape[t]) for t in range(m - 2)]
        elif self.mode == "row":
            plan = [("axis", t, self.shape[t]) for t in range(m - 1)]
            plan.append(("jo", m - 1, IntImm(_static(self.shape[m - 1]) // self.jt, "int64")))
        else:
            plan = [("axis", t, self.shape[t]) for t in range(m - 2)]
            plan.append(("io", m - 2, IntImm(_static(self.shape[m - 2]) // self.it, "int64")))
            plan.append(("jo", m - 1, IntImm(_static(self.shape[m - 1]) // self.jt, "int64")))
        return plan

    def _parallel_level(self) -> int:
        if not self.opt.parallel:
            return -1
        for k, (_, _, ext) in enumerate(self.loops):
            v = _static(ext)
            if v == 1:
                continue
            if (v is None or v >= 2) and self._work() >= self.opt.min_parallel_work:
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
        e0, e1 = _static(ext0), _static(ext1)
        if (kind0 != "axis" or kind1 != "axis" or e0 is None or e1 is None or e1 < 2
                or e0 >= self.opt.target.parallel_min_iterations or e0 % 2 == 0
                or [st for st in self.attached if st.depth == k + 1]
                or self._loop_kind(k + 1) != "serial"):
            return -1
        return k

    def _stages_at(self, depth: int) -> list[_Stage]:
        return [s for s in self.attached if s.depth == depth and s is not self.anchor]

    def _level(self, k: int) -> Stmt:
        """Code inside the first ``k`` loops of the plan.

        The first ``q`` loops each fix one root axis; a stage attached at
        depth ``d`` is computed at level ``d``, before the loop over axis
        ``d``. Tile loops (io/jo) never have stages attached inside them
        (guaranteed by the mode choice).
        """
        stmts: list[Stmt] = []
        locals_: list[Buffer] = []
        pending = len(self.level_buffers)
        if k <= self.q:
            for st in self._stages_at(k):
                st.local = Buffer(self.low.names.fresh(st.name + "_local"),
                                  (IntImm(st.row or 1, "int64"),), st.tensor.dtype)
                locals_.append(st.local)
                stmts.extend(self._emit_attached(st))
        if k == len(self.loops):
            stmts.append(self._inner())
        else:
            kind, t, ext = self.loops[k]
            zero = IntImm(0, "int64")
            if kind == "axis" and k == self.fused_at:
                t1 = self.loops[k + 1][1]
                e1 = _static(self.loops[k + 1][2])
                a0, a1 = self.root.axes[t], self.root.axes[t1]
                var = Var(self.low.names.fresh(f"{a0.name}_{a1.name}_fused"), "int64")
                self.axis_expr[a0] = BinaryOp("//", var, IntImm(e1, "int64"))
                self.axis_expr[a1] = BinaryOp("%", var, IntImm(e1, "int64"))
                stmts.append(For(var, zero, IntImm(_static(ext) * e1, "int64"), "parallel",
                                 self._level(k + 2)))
            elif kind == "axis":
                var = self._loop_var(self.root.axes[t])
                self.axis_expr[self.root.axes[t]] = var
                stmts.append(For(var, zero, ext, self._loop_kind(k), self._level(k + 1)))
            else:
                elide = _static(ext) == 1 and self.parallel_at != k
                var = Var(self.low.names.fresh(self.root.axes[t].name + "_o"), "int64")
                setattr(self, kind + "_var", zero if elide else var)
                body = self._level(k + 1)
                stmts.append(body if elide else For(var, zero, ext, self._loop_kind(k), body))
        body_stmt = _seq(stmts)
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
        if (self.mode == "scalar" and self.opt.vectorize and k == self.m - 1
                and not self.root.is_reduce and not self._stages_at(self.m)):
            ext = _static(self.loops[k][2])
            if ext is not None and ext >= 2:
                return "vectorized"
        return "serial"

    # -- attached stages (scalar accumulators) ---------------------------------
    def _emit_attached(self, st: _Stage) -> list[Stmt]:
        values = [self._root_expr(b) for b in st.binding]
        target = st.local
        if st.row:  # the whole row, into the row buffer
            j = Var(self.low.names.fresh(st.axes[-1].name), "int64")
            body = self._emit_stage(st, values + [j], lambda ivs: (target, (ivs[-1],)))
            kind = "vectorized" if self.opt.vectorize and st.row >= 2 else "serial"
            return [For(j, IntImm(0, "int64"), IntImm(st.row, "int64"), kind, _seq(body))]
        return self._emit_stage(st, values, lambda ivs: (target, (IntImm(0, "int64"),)))

    def _root_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            r = self.axis_expr.get(e)
            if r is None:
                raise TEError(f"internal: root axis {e.name} used before its loop")
            return r
        return e

    def _emit_stage(self, st: _Stage, values: list[PrimExpr],
                    target: Callable[[list[Var]], tuple[Buffer, tuple[PrimExpr, ...]]]) -> list[Stmt]:
        """Blocks computing one element of ``st`` whose axes are bound to ``values``.

        ``target(iter_vars)`` gives the buffer and indices the element goes to.
        """
        low = self.low
        shape = [low._map_shape(s) for s in st.tensor.shape]

        def spatial() -> tuple[list[IterVar], dict[Var, PrimExpr], Buffer, tuple[PrimExpr, ...]]:
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(st.axes, shape)]
            buf, idx = target([iv.var for iv in ivs])
            return ivs, {ax: iv.var for ax, iv in zip(st.axes, ivs)}, buf, idx

        if not st.is_reduce:
            ivs, vmap, buf, idx = spatial()
            value = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([value], lambda v: BufferStore(buf, v[0], idx))
            return [_block(self._block_name(st.name), ivs, values, body)]
        init = low._map_shape(st.init)
        decompose = self.opt.decompose_reduction
        stmts: list[Stmt] = []
        if decompose:
            ivs0, _, buf0, idx0 = spatial()
            stmts.append(_block(self._block_name(st.name + "_init"), ivs0, values,
                               BufferStore(buf0, init, idx0)))
        rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in st.raxes]
        rexts = [low._map_shape(ax.extent) for ax in st.raxes]
        lanes = self._partial_lanes(st, rexts) if decompose else None
        if lanes is not None:
            stmts.append(self._emit_partial_reduction(st, values, spatial, rloops, rexts, init,
                                                      lanes))
            return stmts
        rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
        ivs, vmap, buf, idx = spatial()
        for ax, iv in zip(st.raxes, rivs):
            vmap[ax.var] = iv.var
        src = low.emit_value(st.expr, vmap, low.default_load)
        update = low.with_lets([src], lambda v: BufferStore(
            buf, _combine(st.combiner, BufferLoad(buf, idx), v[0]), idx))
        stmt: Stmt = _block(self._block_name(st.name), ivs + rivs, list(values) + rloops, update,
                           init=None if decompose else BufferStore(buf, init, idx))
        for var, ext in reversed(list(zip(rloops, rexts))):
            stmt = For(var, IntImm(0, "int64"), ext, "serial", stmt)
        stmts.append(stmt)
        return stmts

    def _partial_lanes(self, st: _Stage, rexts: list[PrimExpr]) -> int | None:
        """Lanes of partial accumulators for reducing ``st`` (None: reduce serially).

        A float reduction ``acc = acc + x[k]`` is one chain of dependent adds:
        it runs at the adder's latency, one element every few cycles, and
        LLVM may not reorder it (float addition is not associative). Summing
        into L independent partial accumulators (lane ``l`` takes ``k = ko *
        L + l``), combined once at the end, makes the inner loop elementwise,
        so it vectorizes and pipelines. It changes the order of the float
        operations (like numpy's pairwise sums do), so only long reductions
        whose input is contiguous along the innermost reduction axis get it.
        """
        if (not self.opt.vectorize or not st.raxes or not tir.is_float(st.tensor.dtype)
                or st.combiner not in ("sum", "prod", "fast_max")):
            # max/min are exact in any order: LLVM vectorizes those reductions itself
            # (fast_max is too, but as a select LLVM leaves it a scalar chain)
            return None
        extent = _static(rexts[-1])
        if extent is None or extent < self.opt.target.partial_min_extent:
            return None
        last = st.raxes[-1].var
        if not _b.any(_last_index_uses(ld, last) for ld in _loads_of(st.expr)):
            return None
        target = self.opt.target
        for lanes in target.partial_lanes:  # the widest with enough iterations ...
            if extent >= target.partial_iterations * lanes:
                return lanes
        for lanes in target.partial_lanes:  # ... else the widest with at least 4
            if extent >= 4 * lanes:
                return lanes
        return None

    def _emit_partial_reduction(self, st: _Stage, values: list[PrimExpr],
                                spatial: Callable[[], Any], rloops: list[Var],
                                rexts: list[PrimExpr], init: PrimExpr, lanes: int) -> Stmt:
        """The reduction of ``st`` into ``lanes`` partial accumulators (see
        :meth:`_partial_lanes`): lanes set to ``init``; the innermost reduction
        loop split into ``ko`` (serial) and a vectorized lane loop, plus a
        serial tail for ``extent % lanes``; then the lanes combined into the
        element (which the init block has set). The lane buffer is allocated
        at the start of the enclosing level (see :meth:`_level`)."""
        low = self.low
        i64 = lambda v: IntImm(v, "int64")  # noqa: E731
        extent = _static(rexts[-1])
        assert extent is not None
        part = Buffer(low.names.fresh(st.name + "_part"), (i64(lanes),), st.tensor.dtype)
        lane0 = Var(low.names.fresh("lane"), "int64")
        stmts: list[Stmt] = [For(lane0, i64(0), i64(lanes), "vectorized",
                                 BufferStore(part, init, (lane0,)))]

        def update(k_value: PrimExpr, lane: PrimExpr) -> Stmt:
            rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
            ivs, vmap, _, _ = spatial()
            for ax, iv in zip(st.raxes, rivs):
                vmap[ax.var] = iv.var
            src = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([src], lambda v: BufferStore(
                part, _combine(st.combiner, BufferLoad(part, (lane,)), v[0]), (lane,)))
            return _block(self._block_name(st.name), ivs + rivs,
                          list(values) + rloops[:-1] + [k_value], body)

        ko, li = rloops[-1], Var(low.names.fresh("lane"), "int64")
        main: Stmt = For(ko, i64(0), i64(extent // lanes), "serial",
                         For(li, i64(0), i64(lanes), "vectorized",
                             update(_tiled(ko, lanes, li), li)))
        tail = extent % lanes
        if tail:
            lt = Var(low.names.fresh("lane"), "int64")
            main = _seq([main, For(lt, i64(0), i64(tail), "serial",
                                   update(BinaryOp("+", i64(extent - tail), lt), lt))])
        for var, ext in reversed(list(zip(rloops[:-1], rexts[:-1]))):
            main = For(var, i64(0), ext, "serial", main)
        stmts.append(main)
        # Combine the lanes as a tree (halves folded onto each other, each
        # step a vector operation) rather than one serial chain of `lanes`.
        width = lanes // 2
        while width >= 2:
            lw = Var(low.names.fresh("lane"), "int64")
            stmts.append(For(lw, i64(0), i64(width), "vectorized",
                             BufferStore(part, _combine(st.combiner, BufferLoad(part, (lw,)),
                                                        BufferLoad(part, (lw + i64(width),))),
                                         (lw,))))
            width //= 2
        stmts.append(BufferStore(part, _combine(st.combiner, BufferLoad(part, (i64(0),)),
                                                BufferLoad(part, (i64(1),))), (i64(0),)))
        ivs, _, buf, idx = spatial()
        stmts.append(_block(self._block_name(st.name + "_lanes"), ivs, values, BufferStore(
            buf, _combine(st.combiner, BufferLoad(buf, idx), BufferLoad(part, (i64(0),))),
            idx)))
        self.level_buffers.append(part)  # allocated by the enclosing _level
        return _seq(stmts)

    # -- innermost part ----------------------------------------------------
    def _inner(self) -> Stmt:
        root = self.root
        if self.mode == "scalar":
            values = [self.axis_expr[ax] for ax in root.axes]
            stmts = self._emit_stage(root, values, lambda ivs: (root.buffer, tuple(ivs)))
            return _seq(stmts)
        if self.mode == "gemm":
            from phasec.te.schedules.gemm import GemmEmitter
            parallel = (self.opt.parallel and self.parallel_at < 0
                        and self._work() >= self.opt.min_parallel_work)
            return GemmEmitter(self, self.gemm, parallel).emit()
        if self.mode == "transpose":
            from phasec.te.schedules.transpose import emit_transpose
            return emit_transpose(self)
        return self._emit_tile()

    def _emit_tile(self) -> Stmt:
        """Row (1 x JT) or tile (IT x JT) accumulation of the anchor plus the epilogue."""
        low = self.low
        root, anchor, m = self.root, self.anchor, self.m
        it, jt = self.it, self.jt
        i64 = lambda v: IntImm(v, "int64")  # noqa: E731
        acc_shape = (i64(it), i64(jt)) if it > 1 else (i64(jt),)
        acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, anchor.tensor.dtype)
        jo = self.jo_var

        def tile_loops(make_body: Callable[[PrimExpr | None, Var], Stmt], ii_kind: str) -> Stmt:
            ji = Var(low.names.fresh(root.axes[m - 1].name + "_i"), "int64")
            ii = Var(low.names.fresh(root.axes[m - 2].name + "_i"), "int64") if it > 1 else None
            inner = make_body(ii, ji)
            kind = "vectorized" if self.opt.vectorize and jt >= 2 else "serial"
            stmt: Stmt = For(ji, i64(0), i64(jt), kind, inner)
            if ii is not None:
                stmt = For(ii, i64(0), i64(it), ii_kind, stmt)
            return stmt

        def set_axes(ii: Var | None, ji: Var) -> None:
            self.axis_expr[root.axes[m - 1]] = _tiled(jo, jt, ji)
            if ii is not None:
                self.axis_expr[root.axes[m - 2]] = _tiled(self.io_var, it, ii)

        def acc_index(ii: Var | None, ji: Var) -> tuple[PrimExpr, ...]:
            return (ii, ji) if ii is not None else (ji,)

        # anchor element bound to the current tile position
        def anchor_values() -> list[PrimExpr]:
            if anchor is root:
                return [self.axis_expr[ax] for ax in root.axes]
            return [self._root_expr(b) for b in anchor.binding]

        shape = [low._map_shape(s) for s in anchor.tensor.shape]
        rexts = [low._map_shape(ax.extent) for ax in anchor.raxes]

        def init_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            init = low._map_shape(anchor.init)
            return _block(self._block_name(anchor.name + "_init"), ivs, anchor_values(),
                         BufferStore(acc, init, acc_index(ii, ji)))

        rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in anchor.raxes]

        def update_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(anchor.raxes, rexts)]
            vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
            for ax, iv in zip(anchor.raxes, rivs):
                vmap[ax.var] = iv.var
            src = low.emit_value(anchor.expr, vmap, low.default_load)
            idx = acc_index(ii, ji)
            body = low.with_lets([src], lambda v: BufferStore(
                acc, _combine(anchor.combiner, BufferLoad(acc, idx), v[0]), idx))
            return _block(self._block_name(anchor.name + "_update"), ivs + rivs,
                         anchor_values() + rloops, body)

        def epilogue_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, self.shape)]
            values = [self.axis_expr[ax] for ax in root.axes]
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
            return _block(self._block_name(root.name), ivs, values, body)

        stmts: list[Stmt] = [tile_loops(init_body, "unroll")]
        upd: Stmt = tile_loops(update_body, "unroll")
        for var, ext in reversed(list(zip(rloops, rexts))):
            upd = For(var, i64(0), ext, "serial", upd)
        stmts.append(upd)
        stmts.append(tile_loops(epilogue_body, "serial"))
        return Allocate(acc, _seq(stmts))


def _block(name: str, iter_vars: Sequence[IterVar], values: Sequence[PrimExpr], body: Stmt,
           init: Stmt | None = None) -> Block:
    """A Block with its read and write regions (single points, or the whole
    dimension when an index depends on a value computed inside the block)."""
    reads: list[tir.BufferRegion] = []
    writes: list[tir.BufferRegion] = []
    seen: set[Any] = set()
    let_vars: set[int] = set()
    exprs: list[PrimExpr] = []
    stores: list[BufferStore] = []
    for stmt in (init, body):
        while isinstance(stmt, LetStmt):
            exprs.append(stmt.value)
            let_vars.add(id(stmt.var))
            stmt = stmt.body
        if isinstance(stmt, BufferStore):
            exprs.append(stmt.value)
            exprs.extend(stmt.indices)
            stores.append(stmt)

    def region(buf: Buffer, indices: Sequence[PrimExpr]) -> tir.BufferRegion:
        dims = []
        for d, i in enumerate(indices):
            if isinstance(i, IntImm):
                dynamic = False
            elif isinstance(i, Var):
                dynamic = id(i) in let_vars
            else:
                dynamic = _b.any(isinstance(n, BufferLoad) or id(n) in let_vars
                                 for n in _post_order([i]))
            dims.append((IntImm(0, "int64"), buf.shape[d]) if dynamic
                        else (i, IntImm(1, "int64")))
        return tir.BufferRegion(buf, tuple(dims))

    for n in _post_order(exprs):
        if isinstance(n, BufferLoad):
            key = (id(n.buffer), tuple(_expr_key(i) for i in n.indices))
            if key not in seen:
                seen.add(key)
                reads.append(region(n.buffer, n.indices))
    wseen: set[Any] = set()
    for st in stores:
        key = (id(st.buffer), tuple(_expr_key(i) for i in st.indices))
        if key not in wseen:
            wseen.add(key)
            writes.append(region(st.buffer, st.indices))
    return Block(name, tuple(iter_vars), tuple(values), body, init, tuple(reads), tuple(writes))


def _tiled(outer: PrimExpr, factor: int, inner: Var) -> PrimExpr:
    """``outer * factor + inner`` (just ``inner`` when outer is the constant 0)."""
    if isinstance(outer, IntImm) and outer.value == 0:
        return inner
    return BinaryOp("+", BinaryOp("*", outer, IntImm(factor, "int64")), inner)


def _costly(e: PrimExpr) -> bool:
    """True when computing ``e`` does arithmetic beyond index computations."""
    for n in _post_order([e]):
        if isinstance(n, (tir.Call, Select)):
            return True
        if isinstance(n, BinaryOp) and not tir.is_int(n.dtype) and not (
                tir.is_bool(n.dtype) and tir.is_int(n.lhs.dtype)):
            return True
    return False


def _loads_of(e: PrimExpr) -> list[ProducerLoad]:
    return [n for n in _post_order([e]) if isinstance(n, ProducerLoad)]


def _last_index_uses(ld: ProducerLoad, var: Var) -> bool:
    """True when the innermost index of ``ld`` uses ``var`` (contiguous along it)."""
    if not ld.indices:
        return False
    return _b.any(n is var for n in _post_order([ld.indices[-1]]))


def _pick_tile(extent: int, candidates: tuple[int, ...], whole_max: int, cap: int) -> int | None:
    if extent <= whole_max:
        return extent
    for c in candidates:
        if extent % c == 0:
            return c
    return extent if extent <= cap else None
