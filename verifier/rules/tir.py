"""WF5xx: TIR kernels — variables and buffers in scope (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.verifier.context import Context
from phasec.verifier.rules.base import Rule, register


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

    def tir_var_use(self, ctx: Context, var: Any) -> None:
        if var not in ctx.tir_scope:
            ctx.report(self, f"TIR variable '{var.name}' is used outside its scope (not a "
                       "parameter, an enclosing loop or let variable, or a block axis)", None)


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

    def tir_buffer_use(self, ctx: Context, buffer: Any) -> None:
        if buffer not in ctx.tir_scope:
            ctx.report(self, f"buffer '{buffer.name}' is used outside its scope (not a parameter "
                       "or an enclosing allocation)", None)


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

    def tir_var_def(self, ctx: Context, var: Any) -> None:
        if var in ctx.tir_scope:
            ctx.report(self, f"TIR variable '{var.name}' is defined again while already in scope",
                       None)
