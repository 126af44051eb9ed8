"""WF2xx: purity (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir.expr import Binding, BindingBlock, SeqExpr, Var, VarBinding
from phasec.ir.module import IRModule
from phasec.ir.struct_info import TensorStructInfo

from phasec.verifier.context import Context
from phasec.verifier.util import FORCE_PURE, impure_reason, is_force_pure
from phasec.verifier.injection import (
    Choose, entry_function, insert_bindings, insert_block, new_function, packed_call, pick,
    tensor_param, with_body,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register


@register
class ImpureInDataflow(Rule):
    code = "WF201"
    call_keyed = True
    title = "Impure call inside a dataflow block"
    explanation = """
    Bindings of a dataflow block must be free of side effects, so that
    passes may reorder, duplicate or remove them. A call with side effects —
    an impure operator, R.call_packed, a direct call of a PrimFunc, a call of
    an impure function or callable — must be placed in an ordinary binding
    block. Pure packed functions can be called in a dataflow block with
    R.call_pure_packed.
    """
    help = "move the call out of the dataflow block (or use R.call_pure_packed if it is pure)"
    tvm = TVMCheck.REFUSES
    injection = "call a packed function (impure) inside a dataflow block"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if ctx.in_dataflow:
            reason = impure_reason(ctx, call, opdef)
            if reason is not None:
                ctx.report(self, f"impure call inside a dataflow block: {reason}", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            return [VarBinding(Var("p", x.struct_info), packed_call(x))]
        return insert_bindings(mod, build, choose, dataflow=True)


@register
class ImpureInPureFunction(Rule):
    code = "WF202"
    call_keyed = True
    title = "Pure function contains an impure call"
    explanation = """
    A function marked pure (the default; R.function(pure=False) marks it
    impure) promises that calling it has no side effects, and callers'
    dataflow blocks rely on that. Its body may not contain an impure call
    unless the function carries the relax.force_pure attribute, which
    asserts that the side effects are not observable (RemovePurityChecking
    sets it in the lowering phase).
    """
    help = "declare the function with @R.function(pure=False), or set relax.force_pure if the effects are not observable"
    tvm = TVMCheck.REFUSES
    injection = "call a packed function in a pure function"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        func = ctx.func
        if func is None or not func.is_pure or is_force_pure(func):
            return
        reason = impure_reason(ctx, call, opdef)
        if reason is not None:
            ctx.report(self, f"function is pure but contains an impure call: {reason}", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        pure = [(n, f) for n, f in mod.relax_functions()
                if f.is_pure and not f.attrs.get(FORCE_PURE) and tensor_param(f) is not None]
        if pure:
            name, func = pick(sorted(pure, key=lambda nf: nf[0]), choose)
            x = tensor_param(func)
            block = BindingBlock([VarBinding(Var("p", x.struct_info), packed_call(x))])
            return insert_block(mod, name, func, block, choose)
        x = Var("x", TensorStructInfo((2,), "float32"))
        p = Var("p", x.struct_info)
        func = new_function([x], SeqExpr([BindingBlock([VarBinding(p, packed_call(x))])], p),
                            "mutant_pure", pure=True)
        return mod.update({"mutant_pure": func})


@register
class ForcePureOnImpure(Rule):
    code = "WF203"
    title = "relax.force_pure on an impure function"
    explanation = f"""
    The {FORCE_PURE} attribute says "treat this function as pure even though
    its body contains impure calls"; it only makes sense on a function whose
    is_pure flag is true. On a function declared impure (pure=False) it
    contradicts the declaration, and passes cannot know which to believe.
    """
    help = f"remove {FORCE_PURE}, or declare the function pure"
    tvm = TVMCheck.REFUSES
    injection = "mark an impure function relax.force_pure"

    def enter_function(self, ctx: Context, func: Any) -> None:
        if is_force_pure(func) and not func.is_pure:
            ctx.report(self, f"function has {FORCE_PURE} but is declared impure (pure=False)",
                       func)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        name, func = entry_function(mod, choose)
        attrs = {**func.attrs, FORCE_PURE: True}
        return mod.update({name: with_body(func, list(func.body.blocks), pure=False, attrs=attrs)})
