"""WF2xx: purity (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.verifier.context import Context
from phasec.verifier.util import FORCE_PURE, impure_reason, is_force_pure
from phasec.verifier.rules.base import Rule, register


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

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if ctx.in_dataflow:
            reason = impure_reason(ctx, call, opdef)
            if reason is not None:
                ctx.report(self, f"impure call inside a dataflow block: {reason}", call)


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

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        func = ctx.func
        if func is None or not func.is_pure or is_force_pure(func):
            return
        reason = impure_reason(ctx, call, opdef)
        if reason is not None:
            ctx.report(self, f"function is pure but contains an impure call: {reason}", call)


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

    def enter_function(self, ctx: Context, func: Any) -> None:
        if is_force_pure(func) and not func.is_pure:
            ctx.report(self, f"function has {FORCE_PURE} but is declared impure (pure=False)",
                       func)
