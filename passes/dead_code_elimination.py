"""DeadCodeElimination: drop unused pure bindings and private functions nothing calls.

Within every binding list (function bodies, if-branches, nested functions) a
single backward liveness sweep removes each binding whose variable is never
used and whose value has no side effect; one sweep reaches the fixpoint,
because a binding is only kept when something after it (already decided)
uses it. Then the module's functions are walked from the entry points (the
functions with a ``global_symbol`` attribute, plus ``entry_functions``);
functions not reachable through a GlobalVar are removed.

What counts as a side effect (kept even when unused): calls of impure
operators, packed calls (``R.call_packed``), direct calls of PrimFuncs,
calls of impure functions or of callables whose purity is unknown, and an
``If`` containing any of those. A ``R.match_cast`` whose target mentions a
symbolic variable is kept too (it may define that variable); an unused
match_cast to a fully static struct info is removed like any pure binding.

A module without any entry point keeps all its functions (there is nothing
to be reachable from). The helpers :func:`call_is_pure`, :func:`used_vars`
and :func:`global_refs` are shared with the other passes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from phasec.ir import (
    BindingBlock, Call, DataflowVar, Expr, ExternFunc, Function, FuncStructInfo,
    GlobalVar, If, IRModule, MatchCast, Op, Phase, SeqExpr, Var, collect_exprs,
)
from phasec.arith.lattice import collect_shape_vars
from phasec.op import find_op
from phasec.transform import PassConfigError, module_pass, register_pass

__all__ = ["DeadCodeElimination", "call_is_pure", "used_vars", "reachable_functions",
           "global_refs"]


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------

def call_is_pure(call: Call, functions: Mapping[str, object]) -> bool:
    """True when evaluating ``call`` has no side effect (it may be removed,
    merged or moved into a dataflow block).

    ``functions`` maps global names to the module's functions (to know
    whether a called GlobalVar is a pure Relax function). Callees of unknown
    purity count as impure: the passes using this must stay safe.
    """
    op = call.op
    t = type(op)
    if t is Op:
        opdef = find_op(op.name)
        return opdef is not None and opdef.pure
    if t is ExternFunc:
        return False
    if t is GlobalVar:
        target = functions.get(op.name_hint)
        return isinstance(target, Function) and target.is_pure
    sinfo = getattr(op, "struct_info", None)
    return isinstance(sinfo, FuncStructInfo) and sinfo.purity


_VAR_KINDS = frozenset((Var, DataflowVar))
_GLOBAL_KINDS = frozenset((GlobalVar,))


def used_vars(expr: Expr) -> set[Var]:
    """Every Relax variable referenced anywhere inside ``expr`` (nested
    branches and functions included). Iterative: no recursion limit."""
    return set(collect_exprs(expr, _VAR_KINDS))


def global_refs(func: Function) -> set[str]:
    """Names of the module functions ``func`` refers to (calls, call_tir, values)."""
    return {g.name_hint for g in collect_exprs(func.body, _GLOBAL_KINDS)}


def reachable_functions(mod: IRModule, extra_entries: Iterable[str] = ()) -> set[str] | None:
    """Names of the functions reachable from the entry points (functions with
    a ``global_symbol``, plus ``extra_entries``); None when there is no entry."""
    roots = [name for name, f in mod.functions.items()
             if "global_symbol" in (f.attrs or {})]
    roots.extend(n for n in extra_entries if n in mod.functions)
    if not roots:
        return None
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or name not in mod.functions:
            continue
        seen.add(name)
        func = mod.functions[name]
        if isinstance(func, Function):
            stack.extend(global_refs(func) - seen)
    return seen


# ---------------------------------------------------------------------------
# Binding elimination
# ---------------------------------------------------------------------------

class _Eliminator:
    """Backward liveness over each binding list; nested scopes are processed
    (recursively, depth = nesting of branches/functions) before their uses
    are collected."""

    def __init__(self, functions: Mapping[str, object]) -> None:
        self.functions = functions

    def function(self, func: Function) -> Function:
        body, _, _ = self.seq(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs,
                        span=func.span)

    def seq(self, seq: SeqExpr) -> tuple[SeqExpr, set[Var], bool]:
        """(new seq, variables it uses, whether it has a side effect)."""
        live = used_vars(seq.body)
        effect = False
        changed = False
        new_blocks: list[BindingBlock] = []
        for block in reversed(seq.blocks):
            kept = []
            block_changed = False
            for b in reversed(block.bindings):
                value, uses, has_effect = self.value(b.value)
                keep = has_effect or b.var in live or (
                    type(b) is MatchCast and collect_shape_vars(b.struct_info))
                if not keep:
                    block_changed = True
                    continue
                effect = effect or has_effect
                live.update(uses)
                if value is not b.value:
                    block_changed = True
                    b = b.rebind(value)
                kept.append(b)
            if block_changed:
                changed = True
                if kept:
                    kept.reverse()
                    new_blocks.append(type(block)(kept, span=block.span))
            else:
                new_blocks.append(block)
        if not changed:
            return seq, live, effect
        new_blocks.reverse()
        return SeqExpr(new_blocks, seq.body, span=seq.span), live, effect

    def value(self, value: Expr) -> tuple[Expr, Collection[Var], bool]:
        """(new value, variables it uses, whether evaluating it has a side effect)."""
        t = type(value)
        if t is If:
            tb, tuses, teff = self.seq(value.true_branch)
            fb, fuses, feff = self.seq(value.false_branch)
            uses = tuses | fuses
            uses.update(collect_exprs(value.cond, _VAR_KINDS))
            if tb is not value.true_branch or fb is not value.false_branch:
                value = If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span)
            return value, uses, teff or feff
        if t is Function:
            new = self.function(value)
            return new, collect_exprs(new.body, _VAR_KINDS), False
        if t is SeqExpr:  # not normal form, but keep it working
            return self.seq(value)
        # A list, not a set: the caller adds it to the live set.
        uses = collect_exprs(value, _VAR_KINDS)
        if t is Call:
            return value, uses, not call_is_pure(value, self.functions)
        return value, uses, False


@register_pass
@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, name="DeadCodeElimination")
class DeadCodeElimination:
    """Remove unused pure bindings and private functions nothing calls.

    ``entry_functions`` names extra functions to keep (and keep reachable
    from), besides those with a ``global_symbol``.
    """

    entry_functions: tuple[str, ...] = ()

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        entries = self.entry_functions
        if isinstance(entries, str):
            entries = (entries,)
        unknown = [n for n in entries if n not in mod.functions]
        if unknown:
            raise PassConfigError(
                f"DeadCodeElimination(entry_functions=...) names {', '.join(map(repr, unknown))}, "
                f"which the module does not define; its functions are "
                f"{', '.join(sorted(mod.functions))}")
        elim = _Eliminator(mod.functions)
        out = mod.map_functions(lambda _, func: elim.function(func))
        keep = reachable_functions(out, entries)
        if keep is not None and len(keep) < len(out.functions):
            out = out.with_functions({n: f for n, f in out.functions.items() if n in keep})
        return out

