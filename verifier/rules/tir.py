"""WF5xx: TIR kernels — variables and buffers in scope, each variable bound
once, and buffer accesses certainly out of bounds (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.arith.outofbounds import find_out_of_bounds
from phasec.ir.memo import remembered
from phasec.ir.module import IRModule

from phasec.verifier.context import Context
from phasec.verifier.injection import (
    Choose, first_store, pick, replace_stmt, some_prim_func, with_prim_body,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register


def _what(var: Any) -> str:
    return "buffer" if isinstance(var, tir.Buffer) else "TIR variable"


def _loops(body: tir.Stmt) -> list[tir.For]:
    """The loops of ``body``."""
    loops = []
    stack = [body]
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
    return loops


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
    title = "TIR variable or buffer defined again inside its own scope"
    explanation = """
    A loop variable, let variable, block axis or allocated buffer must not
    be defined again while it is in scope (for example two nested loops over
    the same Var object, a loop over a scalar parameter, or a buffer
    allocated again inside its own allocation). The inner definition would
    shadow the outer one, and code generation, which maps each variable to
    one register, would compute wrong indices.
    """
    help = "use a fresh TIR variable for the inner loop, let or block axis"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A loop variable bound again inside its loop is Python shadowing in the text."
    injection = "define a loop variable again inside its own loop"

    def tir_var_def(self, ctx: Context, var: Any) -> None:
        if var in ctx.tir_scope:
            ctx.report(self, f"{_what(var)} '{var.name}' is defined again while already in scope",
                       None)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        loops = _loops(func.body)
        if loops:
            loop = pick(loops, choose)
            inner = tir.For(loop.loop_var, tir.IntImm(0), tir.IntImm(1), "serial", loop.body)
            new = tir.For(loop.loop_var, loop.min, loop.extent, loop.kind, inner, span=loop.span)
            return mod.update({name: with_prim_body(func, replace_stmt(func.body, loop, new))})
        v = tir.Var("i")
        body = tir.For(v, 0, 1, "serial", tir.For(v, 0, 1, "serial", func.body))
        return mod.update({name: with_prim_body(func, body)})


@register
class TirVarBoundTwice(Rule):
    code = "WF505"
    title = "TIR variable or buffer bound by two statements"
    explanation = """
    A loop variable, let variable, block axis or allocated buffer is bound
    by one statement of its PrimFunc only. Two sibling loops over the same
    Var object are one program to the code generator, but not to the text:
    printed, they are two loops of the same name, which read back as two
    variables, so the kernel does not read back as itself (and a pass that
    maps each variable to one range or value would see one variable with
    two); likewise a buffer allocated by two statements. Schedules that
    reuse a Var for sibling loops cause it; TE lowering's last step
    (``phasec.te.stmt.bind_once``) gives the second binding a fresh variable
    or buffer. A variable or buffer bound again inside its own scope is
    WF503.
    """
    help = "bind a fresh TIR variable or buffer (of the same name) in the second statement"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "Two loops of one name read back as two variables."
    injection = "bind a loop's variable again in a sibling loop"

    def prim_func(self, ctx: Context, func: Any) -> None:
        ctx.state(self).clear()  # the variables bound so far in this PrimFunc

    def tir_var_def(self, ctx: Context, var: Any) -> None:
        bound = ctx.state(self)
        if var in bound and var not in ctx.tir_scope:  # in scope: WF503
            ctx.report(self, f"{_what(var)} '{var.name}' is bound again: another statement "
                       "of this kernel binds it", None)
        bound.add(var)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        loops = _loops(func.body)
        if loops:  # the loop again after itself: the same variables bound twice
            loop = pick(loops, choose)
            twice = tir.SeqStmt((loop, loop))
            return mod.update({name: with_prim_body(func, replace_stmt(func.body, loop, twice))})
        v = tir.Var("i", "int64")
        nop = tir.Evaluate(tir.IntImm(0, "int32"))
        twice = tir.SeqStmt((tir.For(v, 0, 1, "serial", nop), tir.For(v, 0, 1, "serial", nop)))
        return mod.update({name: with_prim_body(func, tir.seq([func.body, twice]))})


@register
class BufferAccessOutOfBounds(Rule):
    code = "WF504"
    title = "Buffer access certainly out of bounds"
    explanation = """
    A load or store whose index certainly leaves its buffer when the kernel
    runs: the index is an affine function of loop variables with constant
    ranges, the buffer's dimension is a constant, and nothing (an if, a
    Select branch, a block's init) can keep the access from running; yet some
    iteration indexes outside [0, extent). Such a kernel reads or writes
    memory it does not own: the LLVM code generator refuses to compile it,
    and this rule reports it before anything runs. (Accesses that only *may*
    leave their buffer, such as data-dependent indices, are checked at run
    time instead; see the bounds checks in the README.)
    """
    help = "check the loop bounds and the index arithmetic against the buffer's shape"
    tvm = TVMCheck.NOT_CHECKED
    tvm_note = ("TVM's well-formedness check does not evaluate indices (its code generator "
                "compiles the kernel).")
    injection = "store one element past the end of a buffer"

    def prim_func(self, ctx: Context, func: Any) -> None:
        found = _out_of_bounds(func)
        if found is not None:
            ctx.report(self, found.message, found.node)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func = some_prim_func(mod, choose)
        # a scratch buffer of one element, stored into at index 1 before the body
        scratch = tir.Buffer("mutant_oob", (tir.IntImm(1),), "float32")
        store = tir.BufferStore(scratch, tir.FloatImm(0.0, "float32"), (tir.IntImm(1),),
                                span=first_store(func.body).span)
        extra = tir.Allocate(scratch, store)
        return mod.update({name: with_prim_body(func, tir.SeqStmt((extra, func.body)))})


def _out_of_bounds(func: tir.PrimFunc) -> Any:
    """:func:`find_out_of_bounds`, remembered for the last kernels seen: the
    passes after LegalizeOps keep most kernels as they are, verification after
    each pass would otherwise analyse the same (immutable) kernel again every
    time, and the code generator asks again (the same memo)."""
    return remembered(find_out_of_bounds, func)
