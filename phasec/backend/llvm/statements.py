"""TIR statements and buffer memory of the kernel code generator (sequences,
stores, branches, allocations, lets, blocks); a mixin of the per-kernel codegen
in :mod:`phasec.backend.llvm.codegen`, as :mod:`.loops` is for loops."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from phasec.ir import tir
from phasec.ir.node import Node
from phasec.backend.llvm._base import (
    _LLVM_TYPE, ALLOCA_LIMIT, OOB_EXTENT, OOB_SITE, OOB_VALUE, RC_BUFFER_OUT_OF_BOUNDS,
    _bad_index, _BufInfo, _elem_bytes, _is_float, _is_intlike, _mem_type, _sanitize,
    buffer_site, buffers_in_order,
)

__all__ = ["StatementCodegen"]


class StatementCodegen:
    """Emits a kernel's statements (mixed into ``_KernelCodegen``)."""

    def element_ptr(self, buf: tir.Buffer, indices: Sequence[Any], index_ops: Sequence[str],
                    node: Any) -> tuple[_BufInfo, str]:
        info = self.lookup_buffer(buf, node)
        if len(indices) != len(info.dims):
            raise self.error(f"buffer '{buf.name}' has {len(info.dims)} dimension(s) but is "
                             f"indexed with {len(indices)} index(es)", node)
        fn = self.fn
        flat = "0"
        check = self.mod.options.check_bounds
        for d, (idx, op) in enumerate(zip(indices, index_ops)):
            i64 = self.to_i64(op, self.dtype_of(idx))
            if check:
                self._check_bound(buf, d, i64, info.dims[d], isinstance(node, tir.BufferStore))
            if d == 0:
                flat = i64
                continue
            m = fn.tmp("ix")
            fn.emit(f"{m} = mul nsw i64 {flat}, {info.dims[d]}")
            a = fn.tmp("ix")
            fn.emit(f"{a} = add nsw i64 {m}, {i64}")
            flat = a
        p = fn.tmp("p." + _sanitize(buf.name))
        fn.emit(f"{p} = getelementptr inbounds {_mem_type(buf.dtype)}, ptr {info.ptr}, i64 {flat}")
        return info, p

    def _check_bound(self, buf: tir.Buffer, dim: int, index: str, extent: str,
                     write: bool) -> None:
        """check_bounds: ``0 <= index < extent`` or record the access and
        return RC_BUFFER_OUT_OF_BOUNDS (freeing live heap buffers)."""
        fn = self.fn
        ok = fn.tmp("inb")
        fn.emit(f"{ok} = icmp ult i64 {index}, {extent}")  # unsigned: negatives fail too
        bad, cont = fn.label("oob"), fn.label("inb")
        fn.emit(f"br i1 {ok}, label %{cont}, label %{bad}, !prof {self.mod.unlikely_md()}")
        fn.start(bad)
        if self._ordinals is None:
            self._ordinals = {id(b): k for k, b in enumerate(buffers_in_order(self.func))}
        site = buffer_site(self._ordinals.get(id(buf), 0), dim, write)
        fn.emit(f"store atomic i64 {index}, ptr @{OOB_VALUE} monotonic, align 8")
        fn.emit(f"store atomic i64 {extent}, ptr @{OOB_EXTENT} monotonic, align 8")
        fn.emit(f"store atomic i64 {site}, ptr @{OOB_SITE} monotonic, align 8")
        self.error_return(str(RC_BUFFER_OUT_OF_BOUNDS))
        fn.start(cont)

    def _load(self, n: tir.BufferLoad, index_ops: Sequence[str]) -> str:
        _, p = self.element_ptr(n.buffer, n.indices, index_ops, n)
        dtype = n.buffer.dtype
        fn = self.fn
        r = fn.tmp(_sanitize(n.buffer.name))
        fn.emit(f"{r} = load {_mem_type(dtype)}, ptr {p}, align {_elem_bytes(dtype)}")
        if dtype == "bool":
            b = fn.tmp("b")
            fn.emit(f"{b} = icmp ne i8 {r}, 0")
            return b
        return r

    def emit_stmt(self, root: tir.Stmt) -> None:
        tasks: list[Any] = [root]
        while tasks:
            t = tasks.pop()
            if not isinstance(t, Node):
                t()
                continue
            handler = self._STMT.get(type(t))
            if handler is None:
                raise self.error(f"unsupported statement node {type(t).__name__}", t)
            handler(self, t, tasks)

    def _seq(self, s: tir.SeqStmt, tasks: list[Any]) -> None:
        tasks.extend(reversed(s.stmts))

    def _store(self, s: tir.BufferStore, tasks: list[Any]) -> None:
        buf = s.buffer
        info = self.lookup_buffer(buf, s)
        if len(s.indices) != len(info.dims):
            raise self.error(f"buffer '{buf.name}' has {len(info.dims)} dimension(s) but is "
                             f"indexed with {len(s.indices)} index(es)", s)
        value = self.emit_value_as(s.value, buf.dtype, f"the value stored into buffer "
                                   f"'{buf.name}'")
        index_ops = []
        for idx in s.indices:
            if _is_float(self.dtype_of(idx)) or self.dtype_of(idx) == "bool":
                raise self.error(_bad_index(buf.name, self.dtype_of(idx)), s)
            index_ops.append(self.emit_expr(idx))
        _, p = self.element_ptr(buf, s.indices, index_ops, s)
        fn = self.fn
        if buf.dtype == "bool":
            z = fn.tmp("b")
            fn.emit(f"{z} = zext i1 {value} to i8")
            value = z
        fn.emit(f"store {_mem_type(buf.dtype)} {value}, ptr {p}, align {_elem_bytes(buf.dtype)}")

    def _if(self, s: tir.IfThenElse, tasks: list[Any]) -> None:
        fn = self.fn
        c = self.emit_cond(s.condition)
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
        self.check_dtype(buf.dtype, f"buffer '{buf.name}'", s)
        fn = self.fn
        dims = [self.emit_value_as(d, "int64", f"dimension of buffer '{buf.name}'")
                for d in buf.shape]
        elem = _elem_bytes(buf.dtype)
        static = all(isinstance(d, tir.IntImm) for d in buf.shape)
        nbytes = elem * math.prod(int(d.value) for d in buf.shape) if static else None
        ptr = fn.tmp(_sanitize(buf.name))
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
                mulo = self.mod.intrinsic("llvm.smul.with.overflow.i64", "{ i64, i1 }",
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
                smax = self.mod.intrinsic("llvm.smax.i64", "i64", ["i64", "i64"])
                pos = fn.tmp("sz")
                fn.emit(f"{pos} = call i64 {smax}(i64 {n}, i64 64)")
                up, rnd = fn.tmp("sz"), fn.tmp("sz")
                fn.emit(f"{up} = add i64 {pos}, 63")
                fn.emit(f"{rnd} = and i64 {up}, -64")
                size = fn.tmp("sz")
                fn.emit(f"{size} = select i1 {bad2}, i64 -64, i64 {rnd}")
            # through the runtime's cache of freed blocks (see irlib.BUFFER_CACHE_IR);
            # an error exit frees a live one with free()
            self.mod.declare("phasec_rt_alloc", "declare noalias ptr @phasec_rt_alloc(i64) nounwind")
            self.mod.declare("phasec_rt_free", "declare void @phasec_rt_free(ptr, i64) nounwind")
            self.mod.declare("free", "declare void @free(ptr) nounwind")
            fn.emit(f"{ptr} = call ptr @phasec_rt_alloc(i64 {size})")
            isnull = fn.tmp("null")
            fn.emit(f"{isnull} = icmp eq ptr {ptr}, null")
            ok = fn.label("alloc.ok")
            fn.emit(f"br i1 {isnull}, label %{self.get_oom_label()}, label %{ok}")
            fn.start(ok)
            free = True
            self.heap.append(ptr)  # freed by an error exit inside its scope, too
        prev = self.bufs.get(id(buf))
        self.bufs[id(buf)] = _BufInfo(buf, ptr, dims)

        def close() -> None:
            if free:
                fn.emit(f"call void @phasec_rt_free(ptr {ptr}, i64 {size})")
                self.heap.pop()
            if prev is None:
                del self.bufs[id(buf)]
            else:
                self.bufs[id(buf)] = prev

        tasks.extend([close, s.body])

    def _let(self, s: tir.LetStmt, tasks: list[Any]) -> None:
        v = s.var
        self.check_dtype(v.dtype, f"let variable '{v.name}'", s)
        op = self.emit_value_as(s.value, v.dtype, f"the value of let variable '{v.name}'")
        prev = self.bind_var(v, op)
        tasks.extend([lambda: self.unbind_var(v, prev), s.body])

    def _attr(self, s: tir.AttrStmt, tasks: list[Any]) -> None:
        if (s.key in (tir.PREFETCH_ATTR, tir.PREFETCH_WRITE_ATTR)
                and type(s.value) is tir.BufferLoad):
            self._prefetch(s.value, s.key == tir.PREFETCH_WRITE_ATTR)
        tasks.append(s.body)  # otherwise a hint for TVM's lowering; nothing to emit

    def _prefetch(self, at: tir.BufferLoad, write: bool) -> None:
        """``llvm.prefetch`` of the address of ``at`` (to L1; nothing is
        loaded, so the index is not checked: a prefetch does not fault, and the
        address is computed without ``inbounds``)."""
        info = self.lookup_buffer(at.buffer, at)
        if len(at.indices) != len(info.dims):
            raise self.error(f"buffer '{at.buffer.name}' has {len(info.dims)} dimension(s) but "
                             f"is indexed with {len(at.indices)} index(es)", at)
        fn = self.fn
        flat = "0"
        for d, idx in enumerate(at.indices):
            i64 = self.to_i64(self.emit_expr(idx), self.dtype_of(idx))
            if d == 0:
                flat = i64
                continue
            m, a = fn.tmp("ix"), fn.tmp("ix")
            fn.emit(f"{m} = mul i64 {flat}, {info.dims[d]}")
            fn.emit(f"{a} = add i64 {m}, {i64}")
            flat = a
        p = fn.tmp("pf." + _sanitize(at.buffer.name))
        fn.emit(f"{p} = getelementptr {_mem_type(at.buffer.dtype)}, ptr {info.ptr}, i64 {flat}")
        callee = self.mod.intrinsic("llvm.prefetch.p0", "void", ["ptr", "i32", "i32", "i32"])
        fn.emit(f"call void {callee}(ptr {p}, i32 {1 if write else 0}, i32 3, i32 1)")

    def _evaluate(self, s: tir.Evaluate, tasks: list[Any]) -> None:
        if isinstance(s.value, tir.Call) and s.value.name == "assume":
            return  # T.assume: a stated fact, never evaluated (see tir.INTRINSICS)
        if isinstance(s.value, tir.Call) and s.value.name == tir.RET:
            raise self.error("this PrimFunc returns a value (T.ret / return); the LLVM backend "
                             "compiles kernels, which return nothing", s)
        if not isinstance(s.value, (tir.IntImm, tir.FloatImm)):
            self.emit_expr(s.value)

    def _block(self, s: tir.Block, tasks: list[Any]) -> None:
        fn = self.fn
        ops = []
        for iv, value in zip(s.iter_vars, s.iter_values):
            dt = self.check_dtype(iv.var.dtype, f"block axis '{iv.var.name}'", s)
            if not _is_intlike(dt) or dt == "bool":
                raise self.error(f"block axis '{iv.var.name}' must have an integer dtype", s)
            ops.append(self.emit_value_as(value, dt, f"the binding of block axis "
                                          f"'{iv.var.name}'"))
        prevs = [self.bind_var(iv.var, op) for iv, op in zip(s.iter_vars, ops)]

        def unbind() -> None:
            for iv, prev in zip(reversed(s.iter_vars), reversed(prevs)):
                self.unbind_var(iv.var, prev)

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
            start = (self.emit_value_as(iv.min, iv.var.dtype, f"the domain start of block axis "
                                        f"'{iv.var.name}'") if iv.has_min else "0")
            fn.emit(f"{c} = icmp eq {_LLVM_TYPE[iv.var.dtype]} {op}, {start}")
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
