"""TIR statements in LLVM IR: sequences, stores, branches, allocations, lets,
attributes (prefetch hints), evaluations and blocks; loops are
:mod:`.loops`'s."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from phasec.ir import tir
from phasec.ir.node import Node
from phasec.te.schedules.gemm_amx import AMX_ATTR, AMX_SU_ATTR
from phasec.backend.llvm.access import BufferAccess
from phasec.backend.llvm.amx import emit_amx_tile
from phasec.backend.llvm.context import BufferInfo, KernelContext
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.expressions import ExpressionEmitter
from phasec.backend.llvm.exprtypes import ExprTypes, bad_index
from phasec.backend.llvm.irtext import (
    LLVM_TYPE, elem_bytes, is_float, is_intlike, mem_type, sanitize,
)
from phasec.backend.llvm.loops import LoopEmitter

__all__ = ["StatementEmitter", "ALLOCA_LIMIT"]

#: Constant-size temporaries up to this many bytes live on the stack.
ALLOCA_LIMIT = 16 * 1024


class StatementEmitter:
    """Emits a kernel's statements into ``ctx``'s function; loops go to ``loops``."""

    def __init__(self, ctx: KernelContext, types: ExprTypes, conversions: Conversions,
                 expressions: ExpressionEmitter, access: BufferAccess, loops: LoopEmitter) -> None:
        self.ctx = ctx
        self.types = types
        self.conversions = conversions
        self.expressions = expressions
        self.access = access
        self.loops = loops

    def emit(self, root: tir.Stmt) -> None:
        """Emit ``root`` (iteratively: no Python recursion on deep nests)."""
        tasks: list[Any] = [root]
        while tasks:
            t = tasks.pop()
            if not isinstance(t, Node):
                t()
                continue
            handler = _HANDLERS.get(type(t))
            if handler is None:
                raise self.ctx.error(f"unsupported statement node {type(t).__name__}", t)
            handler(self, t, tasks)

    def _for(self, s: tir.For, tasks: list[Any]) -> None:
        self.loops.emit_for(s, tasks)

    def _while(self, s: tir.While, tasks: list[Any]) -> None:
        self.loops.emit_while(s, tasks)

    def _seq(self, s: tir.SeqStmt, tasks: list[Any]) -> None:
        tasks.extend(reversed(s.stmts))

    def _store(self, s: tir.BufferStore, tasks: list[Any]) -> None:
        buf = s.buffer
        info = self.ctx.lookup_buffer(buf, s)
        if len(s.indices) != len(info.dims):
            raise self.ctx.error(f"buffer '{buf.name}' has {len(info.dims)} dimension(s) but is "
                                 f"indexed with {len(s.indices)} index(es)", s)
        what = f"the value stored into buffer '{buf.name}'"
        value = self.expressions.emit_value_as(s.value, buf.dtype, what)
        index_ops = []
        for idx in s.indices:
            if is_float(self.types.dtype_of(idx)) or self.types.dtype_of(idx) == "bool":
                raise self.ctx.error(bad_index(buf.name, self.types.dtype_of(idx)), s)
            index_ops.append(self.expressions.emit_expr(idx))
        _, p = self.access.element_ptr(buf, s.indices, index_ops, s)
        fn = self.ctx.fn
        if buf.dtype == "bool":
            z = fn.tmp("b")
            fn.emit(f"{z} = zext i1 {value} to i8")
            value = z
        fn.emit(f"store {mem_type(buf.dtype)} {value}, ptr {p}, align {elem_bytes(buf.dtype)}")

    def _if(self, s: tir.IfThenElse, tasks: list[Any]) -> None:
        fn = self.ctx.fn
        c = self.expressions.emit_cond(s.condition)
        lt, lm = fn.label("if.then"), fn.label("if.end")
        le = fn.label("if.else") if s.else_case is not None else lm
        fn.emit(f"br i1 {c}, label %{lt}, label %{le}")
        fn.start(lt)

        def end() -> None:
            fn.emit(f"br label %{lm}")
            fn.start(lm)

        if s.else_case is None:
            tasks.extend([end, s.then_case])
        else:
            def mid() -> None:
                fn.emit(f"br label %{lm}")
                fn.start(le)
            tasks.extend([end, s.else_case, mid, s.then_case])

    def _allocate(self, s: tir.Allocate, tasks: list[Any]) -> None:
        buf = s.buffer
        self.ctx.check_dtype(buf.dtype, f"buffer '{buf.name}'", s)
        fn = self.ctx.fn
        dims = [self.expressions.emit_value_as(d, "int64", f"dimension of buffer '{buf.name}'")
                for d in buf.shape]
        elem = elem_bytes(buf.dtype)
        static = all(isinstance(d, tir.IntImm) for d in buf.shape)
        nbytes = elem * math.prod(int(d.value) for d in buf.shape) if static else None
        ptr = fn.tmp(sanitize(buf.name))
        free = False
        size = ""
        if nbytes is not None and nbytes <= ALLOCA_LIMIT:
            # In the entry block, so a loop around the Allocate reuses one slot.
            fn.allocas.append(f"  {ptr} = alloca i8, i64 {max(nbytes, 1)}, align 64")
        else:
            if nbytes is not None:
                size = str((nbytes + 63) // 64 * 64)
            else:
                # Checked size: an overflowing or negative size becomes an
                # impossible request, so aligned_alloc fails -> out of memory.
                mulo = self.ctx.mod.intrinsic("llvm.smul.with.overflow.i64", "{ i64, i1 }",
                                          ["i64", "i64"])
                n, bad = str(elem), "false"
                for d in dims:
                    pr = fn.tmp("sz")
                    fn.emit(f"{pr} = call {{ i64, i1 }} {mulo}(i64 {n}, i64 {d})")
                    m, o, b2 = fn.tmp("sz"), fn.tmp("ovf"), fn.tmp("ovf")
                    fn.emit(f"{m} = extractvalue {{ i64, i1 }} {pr}, 0")
                    fn.emit(f"{o} = extractvalue {{ i64, i1 }} {pr}, 1")
                    fn.emit(f"{b2} = or i1 {bad}, {o}")
                    n, bad = m, b2
                neg, bad2 = fn.tmp("ovf"), fn.tmp("ovf")
                fn.emit(f"{neg} = icmp slt i64 {n}, 0")
                fn.emit(f"{bad2} = or i1 {bad}, {neg}")
                smax = self.ctx.mod.intrinsic("llvm.smax.i64", "i64", ["i64", "i64"])
                pos = fn.tmp("sz")
                fn.emit(f"{pos} = call i64 {smax}(i64 {n}, i64 64)")
                up, rnd = fn.tmp("sz"), fn.tmp("sz")
                fn.emit(f"{up} = add i64 {pos}, 63")
                fn.emit(f"{rnd} = and i64 {up}, -64")
                size = fn.tmp("sz")
                fn.emit(f"{size} = select i1 {bad2}, i64 -64, i64 {rnd}")
            # through the runtime's cache of freed blocks (see bufcache.BUFFER_CACHE_IR),
            # given back there by an error exit too (a block lent by the cache
            # must return to its slot)
            mod = self.ctx.mod
            mod.declare("phasec_rt_alloc", "declare noalias ptr @phasec_rt_alloc(i64) nounwind")
            mod.declare("phasec_rt_free", "declare void @phasec_rt_free(ptr, i64) nounwind")
            fn.emit(f"{ptr} = call ptr @phasec_rt_alloc(i64 {size})")
            isnull = fn.tmp("null")
            fn.emit(f"{isnull} = icmp eq ptr {ptr}, null")
            ok = fn.label("alloc.ok")
            fn.emit(f"br i1 {isnull}, label %{self.ctx.get_oom_label()}, label %{ok}")
            fn.start(ok)
            free = True
            self.ctx.heap.append((ptr, size))  # freed by an error exit inside its scope, too
        prev = self.ctx.bufs.get(id(buf))
        self.ctx.bufs[id(buf)] = BufferInfo(buf, ptr, dims)

        def close() -> None:
            if free:
                fn.emit(f"call void @phasec_rt_free(ptr {ptr}, i64 {size})")
                self.ctx.heap.pop()
            if prev is None:
                del self.ctx.bufs[id(buf)]
            else:
                self.ctx.bufs[id(buf)] = prev

        tasks.extend([close, s.body])

    def _let(self, s: tir.LetStmt, tasks: list[Any]) -> None:
        v = s.var
        self.ctx.check_dtype(v.dtype, f"let variable '{v.name}'", s)
        what = f"the value of let variable '{v.name}'"
        op = self.expressions.emit_value_as(s.value, v.dtype, what)
        prev = self.ctx.bind_var(v, op)
        tasks.extend([lambda: self.ctx.unbind_var(v, prev), s.body])

    def _attr(self, s: tir.AttrStmt, tasks: list[Any]) -> None:
        if s.key in (AMX_ATTR, AMX_SU_ATTR) and emit_amx_tile(self, s):
            return  # an integer GEMM tile on AMX (its body: the same sums, without)
        if (s.key in (tir.PREFETCH_ATTR, tir.PREFETCH_WRITE_ATTR)
                and type(s.value) is tir.BufferLoad):
            self._prefetch(s.value, s.key == tir.PREFETCH_WRITE_ATTR)
        if (s.key == tir.KEEP_LOOP_ATTR and type(s.body) is tir.For
                and type(s.value) is tir.IntImm):
            self.loops.keep(s.body, int(s.value.value))
        tasks.append(s.body)  # otherwise a hint for TVM's lowering; nothing to emit

    def _prefetch(self, at: tir.BufferLoad, write: bool) -> None:
        """``llvm.prefetch`` of the address of ``at`` (to L1; nothing is
        loaded, so the index is not checked: a prefetch does not fault, and the
        address is computed without ``inbounds``)."""
        info = self.ctx.lookup_buffer(at.buffer, at)
        if len(at.indices) != len(info.dims):
            raise self.ctx.error(f"buffer '{at.buffer.name}' has {len(info.dims)} dimension(s) but "
                                 f"is indexed with {len(at.indices)} index(es)", at)
        fn = self.ctx.fn
        flat = "0"
        for d, idx in enumerate(at.indices):
            i64 = self.conversions.to_i64(self.expressions.emit_expr(idx), self.types.dtype_of(idx))
            if d == 0:
                flat = i64
                continue
            m, a = fn.tmp("ix"), fn.tmp("ix")
            fn.emit(f"{m} = mul i64 {flat}, {info.dims[d]}")
            fn.emit(f"{a} = add i64 {m}, {i64}")
            flat = a
        p = fn.tmp("pf." + sanitize(at.buffer.name))
        fn.emit(f"{p} = getelementptr {mem_type(at.buffer.dtype)}, ptr {info.ptr}, i64 {flat}")
        callee = self.ctx.mod.intrinsic("llvm.prefetch.p0", "void", ["ptr", "i32", "i32", "i32"])
        fn.emit(f"call void {callee}(ptr {p}, i32 {1 if write else 0}, i32 3, i32 1)")

    def _evaluate(self, s: tir.Evaluate, tasks: list[Any]) -> None:
        if isinstance(s.value, tir.Call) and s.value.name == "assume":
            return  # T.assume: a stated fact, never evaluated (see phasec.ir.intrinsics)
        if isinstance(s.value, tir.Call) and s.value.name == tir.RET:
            raise self.ctx.error("this PrimFunc returns a value (T.ret / return); the LLVM backend "
                                 "compiles kernels, which return nothing", s)
        if not isinstance(s.value, (tir.IntImm, tir.FloatImm)):
            self.expressions.emit_expr(s.value)

    def _block(self, s: tir.Block, tasks: list[Any]) -> None:
        fn = self.ctx.fn
        ops = []
        for iv, value in zip(s.iter_vars, s.iter_values):
            dt = self.ctx.check_dtype(iv.var.dtype, f"block axis '{iv.var.name}'", s)
            if not is_intlike(dt) or dt == "bool":
                raise self.ctx.error(f"block axis '{iv.var.name}' must have an integer dtype", s)
            what = f"the binding of block axis '{iv.var.name}'"
            ops.append(self.expressions.emit_value_as(value, dt, what))
        prevs = [self.ctx.bind_var(iv.var, op) for iv, op in zip(s.iter_vars, ops)]

        def unbind() -> None:
            for iv, prev in zip(reversed(s.iter_vars), reversed(prevs)):
                self.ctx.unbind_var(iv.var, prev)

        tasks.append(unbind)
        tasks.append(s.body)
        if s.init is None:
            return
        reduce_ops = [(iv, op) for iv, op in zip(s.iter_vars, ops) if iv.kind == "R"]
        if not reduce_ops:
            tasks.append(s.init)
            return
        # TVM block semantics: run init at the first iteration of every reduce axis.
        cond = None
        for iv, op in reduce_ops:
            c = fn.tmp("first")
            # the first iteration is the domain's start (0 unless `(begin, end)`)
            what = f"the domain start of block axis '{iv.var.name}'"
            start = (self.expressions.emit_value_as(iv.min, iv.var.dtype, what) if iv.has_min
                     else "0")
            fn.emit(f"{c} = icmp eq {LLVM_TYPE[iv.var.dtype]} {op}, {start}")
            if cond is not None:
                both = fn.tmp("first")
                fn.emit(f"{both} = and i1 {cond}, {c}")
                c = both
            cond = c
        li, lc = fn.label("init"), fn.label("init.end")
        fn.emit(f"br i1 {cond}, label %{li}, label %{lc}")
        fn.start(li)

        def after_init() -> None:
            fn.emit(f"br label %{lc}")
            fn.start(lc)

        tasks.append(after_init)
        tasks.append(s.init)


#: statement type -> handler(emitter, statement, tasks): emits the statement's
#: head and pushes what comes next on ``tasks``
_HANDLERS: Mapping[type, Callable[[StatementEmitter, Any, list[Any]], None]] = {
    tir.SeqStmt: StatementEmitter._seq,
    tir.BufferStore: StatementEmitter._store,
    tir.For: StatementEmitter._for,
    tir.IfThenElse: StatementEmitter._if,
    tir.While: StatementEmitter._while,
    tir.Allocate: StatementEmitter._allocate,
    tir.LetStmt: StatementEmitter._let,
    tir.AttrStmt: StatementEmitter._attr,
    tir.Evaluate: StatementEmitter._evaluate,
    tir.Block: StatementEmitter._block,
}
