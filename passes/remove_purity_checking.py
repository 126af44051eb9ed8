"""RemovePurityChecking: drop purity tracking before memory becomes explicit.

In the lowering phase (2) the next passes make allocation and kernel calls
explicit (``CallTIRRewrite``: a direct PrimFunc call writes its output
argument), which pure functions cannot contain. This pass

* marks every pure Relax function ``relax.force_pure`` (its side effects are
  internal: callers may still treat it as pure); impure functions stay as
  they are (force_pure on them would contradict their declaration);
* turns ``R.call_pure_packed(f, args...)`` into the plain packed call
  ``R.call_packed(f, args...)`` (a ``Call`` whose callee is the ``ExternFunc``);
* turns ``R.call_inplace_packed(f, args..., inplace_indices=...)`` into the
  plain packed call ``R.call_packed(f, args...)`` too (the packed function
  writes the arguments the indices name itself, as in TVM);
* turns ``R.invoke_pure_closure(c, args)`` into ``R.invoke_closure(c, args)``.

The result has no ``call_pure_packed`` / ``call_inplace_packed`` /
``invoke_pure_closure`` left and no
pure function without ``relax.force_pure``: the build-phase rules PH301 and
PH302 hold. Nested functions (only BYOC regions remain nested in lowering)
are treated like module-level ones. Running the pass twice changes nothing.
"""

from __future__ import annotations

from typing import Any

from phasec.ir import Call, ExprMutator, ExternFunc, Function, IRModule, Op, Phase
from phasec.op import op_expr
from phasec.transform import module_pass, register_pass

__all__ = ["RemovePurityChecking", "FORCE_PURE"]

FORCE_PURE = "relax.force_pure"


@register_pass
@module_pass(opt_level=0, phases=Phase.LOWERING)
class RemovePurityChecking:
    """Mark pure functions relax.force_pure; call_pure_packed -> call_packed, invoke_pure_closure -> invoke_closure."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return mod.map_functions(lambda _, func: _PurityRemover().visit_expr(func))


class _PurityRemover(ExprMutator):
    def visit_function_(self, func: Function) -> Function:
        new = super().visit_function_(func)
        if new.is_pure and not new.attrs.get(FORCE_PURE):
            new = new.with_attr(FORCE_PURE, True)
        return new

    def visit_call_(self, call: Call) -> Call:
        call = super().visit_call_(call)
        op = call.op
        if type(op) is not Op:
            return call
        if op.name == "relax.call_pure_packed" and call.args and \
                isinstance(call.args[0], ExternFunc):
            return Call(call.args[0], call.args[1:], call.attrs, call.sinfo_args,
                        struct_info=call.struct_info, span=call.span)
        if op.name == "relax.call_inplace_packed" and call.args and \
                isinstance(call.args[0], ExternFunc):
            # as TVM: the packed function writes the named arguments itself
            return Call(call.args[0], call.args[1:], None, call.sinfo_args,
                        struct_info=call.struct_info, span=call.span)
        if op.name == "relax.invoke_pure_closure":
            return Call(op_expr("relax.invoke_closure"), call.args, call.attrs, call.sinfo_args,
                        struct_info=call.struct_info, span=call.span)
        return call
