"""Lowering a TE graph to a PrimFunc: stages, inlining, attachment
(compute_at) and the entry points :func:`lower` and :func:`create_prim_func`.
Each root stage's loop nest is emitted by :class:`phasec.te.emit.NestEmitter`
in the schedule the table of :mod:`phasec.te.schedules` picks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phasec.arith.bound import prove_bounded
from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, FloatImm, IntImm, IterVar, LetStmt, PrimExpr, PrimFunc,
    Stmt, Var,
)
from phasec.te.analysis import (
    costly, expr_key, last_index_uses, loads_of, simplify_index, static_int,
)
from phasec.te.blocks import bind_loop_vars_in_blocks
from phasec.te.emit import NestEmitter
from phasec.te.options import ScheduleOptions
from phasec.te.stmt import bind_once, seq
from phasec.te.tensor import (
    ComputeOp, ExternOp, OWN_NEST, ProducerLoad, ROW_LOCAL, Reduce, STORE_THROUGH, TEError,
    Tensor, children, post_order, rebuild,
)

__all__ = ["Lowering", "Stage", "LoweredTE", "lower", "create_prim_func"]


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        base = base or "v"
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


class Stage:
    """A materialized compute: an output, a reduction, or a forced non-inline
    compute (or an extern), and where it is computed (its own nest, or
    attached to a consumer's)."""

    def __init__(self, tensor: Tensor, index: int) -> None:
        self.tensor = tensor
        self.index = index  # topological position
        op = tensor.op
        self.extern: ExternOp | None = op if isinstance(op, ExternOp) else None
        if self.extern is not None:
            self.axes: tuple[Var, ...] = ()
            self.is_reduce = False
            self.raxes: tuple[IterVar, ...] = ()
            self.combiner = ""
            self.init: PrimExpr | None = None
            self.expr: PrimExpr | None = None
        else:
            self._init_compute(op)
        self.is_output = False
        self.loads: list[ProducerLoad] = []
        self.root: Stage | None = None      # nest this stage is attached to (None: own nest)
        self.binding: tuple[PrimExpr, ...] = ()  # element computed, in the root's axis vars
        self.depth = 0
        #: attached with its last dimension whole (a row kept in a local
        #: buffer, see Lowering._try_row_attach): that dimension's extent
        self.row: int | None = None
        self.buffer: Buffer | None = None    # global buffer (param or intermediate)
        self.local: Buffer | None = None     # local accumulator when attached

    def _init_compute(self, op: ComputeOp) -> None:
        self.axes = op.axes
        self.is_reduce = isinstance(op.body, Reduce)
        self.raxes: tuple[IterVar, ...] = op.body.axis if self.is_reduce else ()
        self.combiner = op.body.combiner if self.is_reduce else ""
        self.init: PrimExpr | None = op.body.init if self.is_reduce else None
        self.expr = op.body.source if self.is_reduce else op.body  # expanded later

    @property
    def name(self) -> str:
        return self.tensor.name


def _prove(cond: PrimExpr, bounds: Mapping[int, tuple[int, int]]) -> bool | None:
    try:
        return prove_bounded(cond, bounds)
    except Exception:  # noqa: BLE001 - simplification is best effort
        return None


def _stage_bounds(st: Stage) -> dict[int, tuple[int, int]]:
    """``id(var) -> (lo, hi)`` of the stage's axes and reduction axes with static
    extents: the values its body is evaluated at."""
    bounds: dict[int, tuple[int, int]] = {}
    for var, ext in zip(st.axes, st.tensor.shape):
        n = static_int(ext)
        if n is not None and n > 0:
            bounds[id(var)] = (0, n - 1)
    for iv in st.raxes:
        n = static_int(iv.extent)
        lo = 0 if iv.min is None else static_int(iv.min)
        if n is not None and n > 0 and lo is not None:
            bounds[id(iv.var)] = (lo, lo + n - 1)
    return bounds


class Lowering:
    """The lowering of one TE graph to one PrimFunc (:meth:`run`, once); the
    nest emitter and the schedules use its names, buffers and expression
    helpers (:meth:`map_shape`, :meth:`emit_value`, :meth:`default_load`,
    :meth:`with_lets`)."""

    def __init__(self, args: Sequence[Tensor | Var], options: ScheduleOptions,
                 attrs: Mapping[str, Any] | None, no_row_local: frozenset[int] = frozenset()
                 ) -> None:
        self.opt = options
        # ids of ROW_LOCAL tensors not to materialize (a first try could not
        # attach them; see lower())
        self.no_row_local = no_row_local
        self.row_local_failed: set[int] = set()
        self.attrs = dict(attrs or {})
        self.names = _Names()
        self.block_names = _Names()
        self.svmap: dict[Var, Var] = {}   # symbolic shape var -> fresh copy for this PrimFunc
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []
        self.extra_vars: list[Var] = []
        seen: set[int] = set()
        for a in args:
            if isinstance(a, Var):
                self.extra_vars.append(a)
                continue
            if not isinstance(a, Tensor):
                raise TEError(f"create_prim_func: arguments must be te.Tensors or tir.Vars, "
                              f"got {type(a).__name__}")
            if id(a) in seen:
                raise TEError(f"create_prim_func: tensor {a.name} is listed twice")
            seen.add(id(a))
            (self.inputs if a.is_placeholder else self.outputs).append(a)
        if not self.outputs:
            raise TEError("create_prim_func: no output tensor (computes) in the argument list")

    # -- graph -------------------------------------------------------------
    def _topo(self) -> list[Tensor]:
        order: list[Tensor] = []
        state: dict[int, int] = {}
        for out in self.outputs:
            stack: list[tuple[Tensor, bool]] = [(out, False)]
            while stack:
                t, done = stack.pop()
                if done:
                    state[id(t)] = 2
                    order.append(t)
                    continue
                if state.get(id(t)):
                    continue
                state[id(t)] = 1
                stack.append((t, True))
                if isinstance(t.op, (ComputeOp, ExternOp)):
                    for inp in reversed(t.op.inputs):
                        if not state.get(id(inp)):
                            stack.append((inp, False))
        return order

    def _shape_var(self, v: Var) -> Var:
        fresh = self.svmap.get(v)
        if fresh is None:
            fresh = Var(self.names.fresh(v.name), v.dtype)
            self.svmap[v] = fresh
        return fresh

    def map_shape(self, e: PrimExpr) -> PrimExpr:
        """``e`` (a shape or extent of the TE graph) in the PrimFunc's variables."""
        return self._subst(e, {})

    def _subst(self, e: PrimExpr, vmap: Mapping[Var, PrimExpr]) -> PrimExpr:
        """Substitute vars (unknown vars are symbolic dims: mapped to fresh copies)."""
        if isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            r = vmap.get(e)
            return r if r is not None else self._shape_var(e)
        memo: dict[int, PrimExpr] = {}
        for n in post_order([e]):
            if isinstance(n, Var):
                r = vmap.get(n)
                memo[id(n)] = r if r is not None else self._shape_var(n)
            elif isinstance(n, (ProducerLoad, Reduce)):
                raise TEError("internal: unexpected tensor expression in an index")
            else:
                memo[id(n)] = rebuild(n, [memo[id(c)] for c in children(n)])
        return memo[id(e)]

    def run(self) -> PrimFunc:
        """The PrimFunc of the graph."""
        order = self._topo()
        input_ids = {id(t) for t in self.inputs}
        output_ids = {id(t) for t in self.outputs}
        for t in order:
            if t.is_placeholder and id(t) not in input_ids:
                raise TEError(f"create_prim_func: placeholder {t.name} is used but not listed "
                              "among the arguments")
        # Names: inputs, outputs first so they keep their names.
        self.buffers: dict[int, Buffer] = {}
        self.stages: dict[int, Stage] = {}
        self.inlined: set[int] = set()
        stage_list: list[Stage] = []
        staged = self._operands_to_stage(order, output_ids) if self.opt.tile else set()
        for t in order:  # an extern statement reads its inputs from buffers
            if isinstance(t.op, ExternOp):
                staged.update(id(i) for i in t.op.inputs if not i.is_placeholder)
        for t in order:
            if t.is_placeholder:
                continue
            op = t.op
            materialize = (id(t) in output_ids or op.is_reduction or op.inline is False
                           or (self.opt.tile and op.attrs.get(ROW_LOCAL) and op.inline is None
                               and id(t) not in self.no_row_local)
                           or id(t) in staged)
            if id(t) in output_ids and op.inline:
                raise TEError(f"create_prim_func: output {t.name} is marked inline")
            if materialize:
                st = Stage(t, len(stage_list))
                st.is_output = id(t) in output_ids
                self.stages[id(t)] = st
                stage_list.append(st)
            else:
                self.inlined.add(id(t))
        self.stage_list = stage_list
        params: list[Buffer | Var] = []
        for t in self.inputs:
            buf = Buffer(self.names.fresh(t.name), tuple(self.map_shape(s) for s in t.shape),
                         t.dtype)
            self.buffers[id(t)] = buf
            params.append(buf)
        for t in self.outputs:
            st = self.stages[id(t)]
            st.buffer = Buffer(self.names.fresh(t.name),
                               tuple(self.map_shape(s) for s in t.shape), t.dtype)
            params.append(st.buffer)
        self._expand_all()
        self._attach()
        self.stored_through = self._store_through() if self.opt.tile else {}
        # TVM reads a loop variable inside a block only through an axis; a
        # variable bound by two statements (schedules reuse one for sibling
        # loops) would read back from the text as two.
        body = bind_once(bind_loop_vars_in_blocks(self._emit_all()))
        params.extend(self._scalar_params(params, body))
        attrs = {"tirx.noalias": True, **self.attrs}
        return PrimFunc(params, body, attrs)

    @staticmethod
    def _operands_to_stage(order: list[Tensor], output_ids: set[int]) -> set[int]:
        """Inlinable operands of reductions that get their own buffer (a schedule hint).

        * A matmul operand read along the output's last axis ``j`` that is a
          transpose of its input (``permute_dims(w)[k, j] = w[j, k]``): inlined,
          the matmul's innermost loop would be strided. Staged, it costs one
          copy and the matmul keeps its contiguous, vectorized schedule (TVM
          packs such weights for the same reason).
        * An operand that does arithmetic (``gelu(x)`` feeding a matmul) and is
          read independently of one of the reduction's output axes: inlined,
          it would be recomputed for every value of that axis.
        """
        staged: set[int] = set()
        for t in order:
            op = t.op
            if not isinstance(op, ComputeOp) or not op.is_reduction:
                continue
            spatial = [a for a, ext in zip(op.axes, t.shape) if static_int(ext) != 1]
            for ld in loads_of(op.body.source):
                src = ld.tensor
                sop = src.op
                if (not isinstance(sop, ComputeOp) or sop.is_reduction or sop.inline is not None
                        or id(src) in output_ids or id(src) in staged):
                    continue
                used = {id(n) for i in ld.indices for n in post_order([i]) if isinstance(n, Var)}
                if costly(sop.body) and any(id(a) not in used for a in spatial):
                    staged.add(id(src))
                    continue
                if op.tag != "matmul" or not op.axes or not src.shape:
                    continue
                if not last_index_uses(ld, op.axes[-1]):
                    continue
                inner = [x for x in loads_of(sop.body) if x.indices]
                if inner and not any(last_index_uses(x, sop.axes[-1]) for x in inner):
                    staged.add(id(src))
        return staged

    # -- inlining ----------------------------------------------------------
    def _expand_all(self) -> None:
        self.inline_memo: dict[Any, PrimExpr] = {}
        self.let_names: dict[int, str] = {}
        for st in self.stage_list:
            if st.extern is not None:
                continue
            st.expr = self._expand(st.expr, _stage_bounds(st))
            st.loads = [e for e in post_order([st.expr])
                        if isinstance(e, ProducerLoad) and id(e.tensor) in self.stages]

    def _expand(self, root: PrimExpr, bounds: Mapping[int, tuple[int, int]] | None = None
                ) -> PrimExpr:
        """Replace loads of inlined tensors by their (recursively expanded) bodies.

        ``bounds``: the ranges of the stage's axes, for the indices (a fused
        reshape -> permute_dims -> reshape then reads ``x[c % g * n + c // g]``
        instead of a dozen divisions of a flat index)."""
        ctxs: list[dict] = [{}]
        memo: dict[tuple[int, int], PrimExpr] = {}
        # stack items: (expr, ctx, state, extra)
        stack: list[tuple[PrimExpr, dict, int, Any]] = [(root, ctxs[0], 0, None)]
        while stack:
            e, ctx, state, extra = stack.pop()
            key = (id(e), id(ctx))
            if state == 0:
                if key in memo:
                    continue
                if isinstance(e, Var):
                    memo[key] = ctx.get(e, e)
                    continue
                if isinstance(e, (IntImm, FloatImm)):
                    memo[key] = e
                    continue
                if isinstance(e, Reduce):
                    raise TEError("a reduction must be the whole body of a compute")
                stack.append((e, ctx, 1, None))
                for c in children(e):
                    if (id(c), id(ctx)) not in memo:
                        stack.append((c, ctx, 0, None))
                continue
            if state == 1:
                new = [memo[(id(c), id(ctx))] for c in children(e)]
                if isinstance(e, ProducerLoad) and id(e.tensor) in self.inlined:
                    idx = tuple(simplify_index(i, bounds) for i in new)
                    ikey = (id(e.tensor), tuple(expr_key(i) for i in idx))
                    hit = self.inline_memo.get(ikey)
                    if hit is not None:
                        memo[key] = hit
                        continue
                    op = e.tensor.op
                    ctx2 = dict(zip(op.axes, idx))
                    ctxs.append(ctx2)
                    stack.append((e, ctx, 2, (ikey, ctx2)))
                    stack.append((op.body, ctx2, 0, None))
                    continue
                if isinstance(e, ProducerLoad):
                    new = [simplify_index(i, bounds) for i in new]
                elif bounds and isinstance(e, tir.Select):
                    # a border test the ranges decide (a pooling window or
                    # a pad without padding on that side) picks its branch
                    known = _prove(new[0], bounds)
                    if known is not None:
                        memo[key] = new[1] if known else new[2]
                        continue
                memo[key] = rebuild(e, new)
                continue
            ikey, ctx2 = extra
            value = memo[(id(e.tensor.op.body), id(ctx2))]
            self.inline_memo[ikey] = value
            self.let_names.setdefault(id(value), e.tensor.name)
            memo[key] = value
        return memo[(id(root), id(ctxs[0]))]

    # -- attachment (compute_at) -------------------------------------------
    def _attach(self) -> None:
        consumers: dict[int, list[tuple[Stage, ProducerLoad]]] = {}
        for st in self.stage_list:
            for ld in st.loads:
                consumers.setdefault(id(ld.tensor), []).append((st, ld))
        for st in reversed(self.stage_list):
            if st.is_output or st.extern is not None:
                continue
            uses = consumers.get(id(st.tensor), [])
            own = isinstance(st.tensor.op, ComputeOp) and st.tensor.op.attrs.get(OWN_NEST)
            placed = self._try_attach(st, uses) if uses and not own else False
            if not placed:
                st.root = None

    def _try_attach(self, st: Stage, uses: list[tuple[Stage, ProducerLoad]]) -> bool:
        if self._attach_with(st, uses, row=False):
            return True
        if st.tensor.op.attrs.get(ROW_LOCAL) and not st.is_reduce and not st.is_output:
            if self._attach_with(st, uses, row=True):
                return True
            self.row_local_failed.add(id(st.tensor))
        return False

    def _attach_with(self, st: Stage, uses: list[tuple[Stage, ProducerLoad]], row: bool
                     ) -> bool:
        """Attach ``st`` to the nest of its consumers when every use reads the
        element its outer loop indices identify (``row``: when they identify
        a row, the last index being free; the row is then computed into a
        local buffer and read from there, TVM's compute_at with a row-sized
        cache)."""
        roots = {id(c.root or c) for c, _ in uses}
        if len(roots) != 1:
            return False
        row_extent = None
        if row:
            if st.tensor.ndim < 2:
                return False
            row_extent = static_int(st.tensor.shape[-1])
            if row_extent is None or not 1 <= row_extent <= self.opt.max_row:
                return False
        root = uses[0][0].root or uses[0][0]
        root_axes = {id(v): i for i, v in enumerate(root.axes)}
        binding_key = None
        binding: tuple[PrimExpr, ...] = ()
        for consumer, ld in uses:
            if consumer is root:
                vmap: dict[Var, PrimExpr] = {}
            else:
                vmap = dict(zip(consumer.axes, consumer.binding))
            idx = []
            for i in (ld.indices[:-1] if row else ld.indices):
                j = simplify_index(self._subst_keep(i, vmap))
                if isinstance(j, Var) and id(j) in root_axes:
                    idx.append(j)
                elif isinstance(j, IntImm):
                    idx.append(j)
                else:
                    return False
            k = tuple(expr_key(i) for i in idx)
            if binding_key is None:
                binding_key, binding = k, tuple(idx)
            elif k != binding_key:
                return False
        used = sorted(root_axes[id(v)] for v in binding if isinstance(v, Var))
        if len(set(used)) != len(used) or used != list(range(len(used))):
            return False  # would recompute the stage for loops it does not depend on
        st.root = root
        st.binding = binding
        st.depth = len(used)
        st.row = row_extent
        return True

    @staticmethod
    def _subst_keep(e: PrimExpr, vmap: Mapping[Var, PrimExpr]) -> PrimExpr:
        if not vmap or isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            return vmap.get(e, e)
        memo: dict[int, PrimExpr] = {}
        for n in post_order([e]):
            if isinstance(n, Var):
                memo[id(n)] = vmap.get(n, n)
            else:
                memo[id(n)] = rebuild(n, [memo[id(c)] for c in children(n)])
        return memo[id(e)]

    def _store_through(self) -> dict[int, Stage]:
        """The externs that store through their consumer (``STORE_THROUGH``):
        ``id(extern stage) -> consumer stage``, for an extern (not an output)
        whose only reader is one stage of the same shape and dtype, not a
        reduction, with nothing attached to its nest, that reads it only at
        its own indices and reads no stage computed after the extern or
        inside another stage's nest (only from buffers)."""
        readers: dict[int, list[tuple[Stage, ProducerLoad]]] = {}
        for st in self.stage_list:
            for ld in st.loads:
                readers.setdefault(id(ld.tensor), []).append((st, ld))
        roots = {id(st.root) for st in self.stage_list if st.root is not None}
        fused: dict[int, Stage] = {}
        for st in self.stage_list:
            if st.extern is None or st.is_output or STORE_THROUGH not in st.extern.attrs:
                continue
            uses = readers.get(id(st.tensor), [])
            consumer = uses[0][0] if uses else None
            if (consumer is None or any(c is not consumer for c, _ in uses)
                    or consumer.is_reduce or consumer.extern is not None
                    or consumer.root is not None or id(consumer) in roots
                    or consumer.tensor.dtype != st.tensor.dtype
                    or len(consumer.axes) != len(st.tensor.shape)
                    or any(expr_key(a) != expr_key(b) for a, b
                           in zip(consumer.tensor.shape, st.tensor.shape))):
                continue
            if any(len(ld.indices) != len(consumer.axes)
                   or any(i is not a for i, a in zip(ld.indices, consumer.axes))
                   for _, ld in uses):
                continue  # read elsewhere than at the consumer's own element
            if any(id(ld.tensor) != id(st.tensor)
                   and (self.stages[id(ld.tensor)].index > st.index
                        or self.stages[id(ld.tensor)].root is not None)
                   for ld in consumer.loads):
                continue  # it reads a stage computed after the extern, or in a nest
            fused[id(st)] = consumer
        return fused

    # -- emission ----------------------------------------------------------
    def _emit_all(self) -> Stmt:
        nests: list[Stmt] = []
        intermediates: list[Buffer] = []
        done: set[int] = set()
        for st in self.stage_list:
            if st.root is not None or id(st) in done:
                continue
            consumer = self.stored_through.get(id(st))
            if consumer is not None:
                if consumer.buffer is None:
                    consumer.buffer = Buffer(self.names.fresh(consumer.name),
                                             tuple(self.map_shape(s)
                                                   for s in consumer.tensor.shape),
                                             consumer.tensor.dtype)
                    intermediates.append(consumer.buffer)
                nests.append(self._emit_stored_through(st, consumer))
                done.add(id(consumer))
                continue
            if st.buffer is None:  # a global intermediate
                st.buffer = Buffer(self.names.fresh(st.name),
                                   tuple(self.map_shape(s) for s in st.tensor.shape),
                                   st.tensor.dtype)
                intermediates.append(st.buffer)
            if st.extern is not None:
                nests.append(self._emit_extern(st))
                continue
            nests.append(NestEmitter(self, st).emit())
        # seq: a stage's scoped accumulator takes the later stages into its
        # scope, so no allocation is followed by statements outside it
        body: Stmt = seq(nests)
        for buf in reversed(intermediates):
            body = Allocate(buf, body)
        return body

    def _emit_stored_through(self, st: Stage, consumer: Stage) -> Stmt:
        """Extern ``st`` writing ``consumer``'s buffer: each value it stores
        goes through the consumer's expression first."""
        out = consumer.buffer
        assert out is not None

        def store(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            def load(t: Tensor, ind: tuple[PrimExpr, ...]) -> PrimExpr:
                return value if t is st.tensor else self.default_load(t, ind)
            expr = self.emit_value(consumer.expr, dict(zip(consumer.axes, idx)), load)
            return self.with_lets([expr], lambda vs: tir.BufferStore(out, vs[0], tuple(idx)))
        stmt = st.extern.attrs[STORE_THROUGH](self._extern_inputs(st), out, store)
        if not isinstance(stmt, Stmt):
            raise TEError(f"extern {st.name}: the builder must return a TIR statement, "
                          f"got {type(stmt).__name__}")
        return stmt

    def _extern_inputs(self, st: Stage) -> list[Buffer]:
        bufs = []
        for t in st.extern.inputs:
            if t.is_placeholder:
                bufs.append(self.buffers[id(t)])
            else:
                src = self.stages[id(t)]
                if src.buffer is None:
                    raise TEError(f"extern {st.name}: input {t.name} has no buffer")
                bufs.append(src.buffer)
        return bufs

    def _emit_extern(self, st: Stage) -> Stmt:
        stmt = st.extern.builder(self._extern_inputs(st), st.buffer)
        if not isinstance(stmt, Stmt):
            raise TEError(f"extern {st.name}: the builder must return a TIR statement, "
                          f"got {type(stmt).__name__}")
        return stmt

    def _scalar_params(self, params: list[Buffer | Var], body: Stmt) -> list[Var]:
        # A bare symbolic dimension of any buffer parameter, input or output,
        # is bound by the buffer's shape (as TVM's create_prim_func does), so
        # only a variable every buffer has inside an expression (``2 * n``)
        # needs a scalar parameter.
        bound: set[int] = set()
        for p in params:
            for d in p.shape:
                if isinstance(d, Var):
                    bound.add(id(d))
        out: list[Var] = []
        seen: set[int] = set(bound)
        for v in self.extra_vars:
            fresh = self._shape_var(v)
            if id(fresh) not in seen:
                seen.add(id(fresh))
                out.append(fresh)
        for fresh in self.svmap.values():
            if id(fresh) not in seen:
                seen.add(id(fresh))
                out.append(fresh)
        return out

    # -- expression emission -------------------------------------------
    def emit_value(self, expr: PrimExpr, vmap: Mapping[Var, PrimExpr],
                   load: Callable[[Tensor, tuple[PrimExpr, ...]], PrimExpr]) -> PrimExpr:
        """``expr`` (a stage's expanded body) as TIR: its axes replaced by
        ``vmap``, each tensor element read by ``load(tensor, indices)``."""
        memo: dict[int, PrimExpr] = {}
        loads: dict[Any, PrimExpr] = {}  # identical loads become one node (then one let)
        for n in post_order([expr]):
            if isinstance(n, Var):
                r = vmap.get(n)
                memo[id(n)] = r if r is not None else self._shape_var(n)
            elif isinstance(n, ProducerLoad):
                idx = tuple(simplify_index(memo[id(c)]) for c in n.indices)
                key = (id(n.tensor), tuple(expr_key(i) for i in idx))
                hit = loads.get(key)
                if hit is None:
                    hit = loads[key] = load(n.tensor, idx)
                    if n.tensor.is_placeholder:
                        self.let_names.setdefault(id(hit), n.tensor.name)
                memo[id(n)] = hit
            else:
                new = rebuild(n, [memo[id(c)] for c in children(n)])
                memo[id(n)] = new
                if id(n) in self.let_names:
                    self.let_names.setdefault(id(new), self.let_names[id(n)])
        return memo[id(expr)]

    def default_load(self, t: Tensor, idx: tuple[PrimExpr, ...]) -> PrimExpr:
        """The read of ``t[idx]``: from its buffer, or from its local buffer
        when it is attached to the nest being emitted."""
        if t.is_placeholder:
            return BufferLoad(self.buffers[id(t)], idx)
        st = self.stages[id(t)]
        if st.root is not None:
            return BufferLoad(st.local, (idx[-1],) if st.row else (IntImm(0, "int64"),))
        return BufferLoad(st.buffer, idx)

    def with_lets(self, values: list[PrimExpr], make: Callable[[list[PrimExpr]], Stmt]) -> Stmt:
        """CSE: bind shared (or very deep) subexpressions with LetStmt around ``make``."""
        nodes = post_order(values)
        refs: dict[int, int] = {}
        for n in nodes:
            for c in children(n):
                refs[id(c)] = refs.get(id(c), 0) + 1
        has_load: dict[int, bool] = {}
        for n in nodes:
            has_load[id(n)] = (isinstance(n, (BufferLoad, tir.Call))
                               or any(has_load[id(c)] for c in children(n)))
        root_ids = {id(v) for v in values}
        mapped: dict[int, PrimExpr] = {}
        depth: dict[int, int] = {}
        lets: list[tuple[Var, PrimExpr]] = []
        for n in nodes:
            kids = children(n)
            new = rebuild(n, [mapped[id(c)] for c in kids]) if kids else n
            d = 1 + max((depth[id(c)] for c in kids), default=0)
            trivial = isinstance(n, (Var, IntImm, FloatImm))
            shared = refs.get(id(n), 0) > 1 and has_load[id(n)]
            if not trivial and id(n) not in root_ids and (shared or d > 48):
                name = self.let_names.get(id(n), "cse")
                var = Var(self.names.fresh(name), n.dtype)
                lets.append((var, new))
                mapped[id(n)] = var
                depth[id(n)] = 0
            else:
                mapped[id(n)] = new
                depth[id(n)] = d
        stmt = make([mapped[id(v)] for v in values])
        for var, value in reversed(lets):
            stmt = LetStmt(var, value, stmt)
        return stmt


@dataclass(frozen=True)
class LoweredTE:
    """The result of :func:`lower`: the kernel and its symbolic-variable mapping.

    ``shape_vars`` maps each symbolic variable of the TE graph to its fresh
    copy in ``prim_func``; ``scalar_params`` lists, for each scalar
    parameter of ``prim_func`` (in order), the original TE-graph variable
    whose value the caller must pass (``call_tir``'s ``tir_vars``).
    """

    prim_func: PrimFunc
    shape_vars: Mapping[Var, Var]
    scalar_params: tuple[Var, ...]


def lower(tensors: Sequence[Tensor | Var], schedule_hints: bool | ScheduleOptions
          | Mapping[str, Any] = True, attrs: Mapping[str, Any] | None = None) -> LoweredTE:
    """Like :func:`create_prim_func`, also returning the symbolic-variable mapping."""
    options = ScheduleOptions.make(schedule_hints)
    low = Lowering(tensors, options, attrs)
    func = low.run()
    if low.row_local_failed:
        # A ROW_LOCAL tensor could not be kept per row: inline it instead
        # (recomputing it beats a pass over memory through a global buffer).
        low = Lowering(tensors, options, attrs, frozenset(low.row_local_failed))
        func = low.run()
    original = {id(fresh): orig for orig, fresh in low.svmap.items()}
    scalars = tuple(original[id(p)] for p in func.params if isinstance(p, Var))
    return LoweredTE(func, dict(low.svmap), scalars)


def create_prim_func(tensors: Sequence[Tensor | Var], schedule_hints: bool | ScheduleOptions
                     | Mapping[str, Any] = True, attrs: Mapping[str, Any] | None = None) -> PrimFunc:
    """Generate one PrimFunc computing the output tensors of ``tensors``.

    ``tensors`` lists inputs (placeholders) and outputs (computes); the
    PrimFunc's parameters are the input buffers (in the listed order), then
    the output buffers (in the listed order, destination-passing style), then
    one int64 scalar parameter for each symbolic dimension that no input
    buffer has as a bare dimension (``tir.Var``s listed in ``tensors`` first,
    then in order of first use). Symbolic variables are replaced by fresh
    ones of the same name, so the PrimFunc shares no variable with the
    program it came from (see :func:`lower` for the mapping).

    Non-output injective computes are inlined; reductions are materialized
    and fused with their elementwise consumers where possible (see the
    docstring of :mod:`phasec.te`). ``schedule_hints`` turns the performance
    annotations on/off (or gives :class:`ScheduleOptions`). ``attrs`` are
    added to the PrimFunc's attributes (``tirx.noalias`` is always set).
    """
    return lower(tensors, schedule_hints, attrs).prim_func
