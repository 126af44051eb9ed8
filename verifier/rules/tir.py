"""WF5xx: TIR kernels — variables and buffers in scope (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.module import IRModule

from phasec.verifier.context import Context
from phasec.verifier.injection import (
    Choose, first_store, pick, replace_stmt, some_prim_func, with_prim_body,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register


@register
class TirVarOutOfScope(Rule):
    code = "WF501"
    title = "TIR variable used outside its scope"
    explanation = """
    In a PrimFunc a scalar variable is in scope only where it is defined: a
    loop variable inside its loop, a let-bound variable in the rest of its
    body, a block axis inside its block, a scalar parameter or a symbolic
    extent of a buffer parameter everywhere. Reading a variable anywhere else
    (a loop variable after its loop, an axis outside its block, a variable
    from another kernel) has no value at run time; loop transformations that
    forget to substitute variables typically cause it.
    """
    help = "use a variable that is in scope here (substitute it when moving code out of a loop)"
    tvm = TVMCheck.REFUSES
    injection = "index a buffer with a loop variable that is not in scope"

    def tir_var_use(self, ctx: Context, var: Any) -> None:
        if var not in ctx.tir_scope:
            ctx.report(self, f"TIR variable '{var.name}' is used outside its scope (not a "
                       "parameter, an enclosing loop or let variable, or a block axis)", None)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        store = first_store(func.body)
        stray = tir.Var("i_out_of_scope")
        new = tir.BufferStore(store.buffer, store.value, (stray,) * len(store.indices),
                              span=store.span)
        if not store.indices:  # a 0-d buffer: put the stray variable in the value
            value = tir.Cast(store.buffer.dtype, stray)
            new = tir.BufferStore(store.buffer, value, (), span=store.span)
        return mod.update({name: with_prim_body(func, replace_stmt(func.body, store, new))})


@register
class BufferOutOfScope(Rule):
    code = "WF502"
    title = "Buffer used outside its scope"
    explanation = """
    A PrimFunc may only load, store or declare regions of buffers it owns:
    its buffer parameters and the buffers it allocates (T.alloc_buffer),
    the latter only inside the allocation's scope. A buffer of another
    kernel, or an allocation used after its scope, refers to memory that
    does not exist when the kernel runs.
    """
    help = "pass the buffer as a parameter or allocate it in the enclosing scope"
    tvm = TVMCheck.REFUSES
    injection = "store into a buffer the kernel does not own"

    def tir_buffer_use(self, ctx: Context, buffer: Any) -> None:
        if buffer not in ctx.tir_scope:
            ctx.report(self, f"buffer '{buffer.name}' is used outside its scope (not a parameter "
                       "or an enclosing allocation)", None)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        store = first_store(func.body)
        stray = tir.Buffer("stray", store.buffer.shape, store.buffer.dtype)
        new = tir.BufferStore(stray, store.value, store.indices, span=store.span)
        return mod.update({name: with_prim_body(func, replace_stmt(func.body, store, new))})


@register
class TirVarRedefined(Rule):
    code = "WF503"
    title = "TIR variable defined again inside its own scope"
    explanation = """
    A loop variable, let variable or block axis must not be defined again
    while it is in scope (for example two nested loops over the same Var
    object, or a loop over a scalar parameter). The inner definition would
    shadow the outer one, and code generation, which maps each variable to
    one register, would compute wrong indices.
    """
    help = "use a fresh TIR variable for the inner loop, let or block axis"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A loop variable bound again inside its loop is Python shadowing in the text."
    injection = "define a loop variable again inside its own loop"

    def tir_var_def(self, ctx: Context, var: Any) -> None:
        if var in ctx.tir_scope:
            ctx.report(self, f"TIR variable '{var.name}' is defined again while already in scope",
                       None)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        loops = []
        stack = [func.body]
        while stack:
            s = stack.pop()
            if isinstance(s, tir.For):
                loops.append(s)
            for field in ("body", "then_case", "else_case"):
                child = getattr(s, field, None)
                if isinstance(child, tir.Stmt):
                    stack.append(child)
            if isinstance(s, tir.SeqStmt):
                stack.extend(s.stmts)
        if loops:
            loop = pick(loops, choose)
            inner = tir.For(loop.loop_var, tir.IntImm(0), tir.IntImm(1), "serial", loop.body)
            new = tir.For(loop.loop_var, loop.min, loop.extent, loop.kind, inner, span=loop.span)
            return mod.update({name: with_prim_body(func, replace_stmt(func.body, loop, new))})
        v = tir.Var("i")
        body = tir.For(v, 0, 1, "serial", tir.For(v, 0, 1, "serial", func.body))
        return mod.update({name: with_prim_body(func, body)})
