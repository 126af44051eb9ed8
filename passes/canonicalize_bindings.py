"""CanonicalizeBindings: remove trivial rebindings ``y = x``.

A binding ``y = x`` of a variable to another variable is dropped and every
use of ``y`` reads ``x`` instead; so is ``y = R.match_cast(x, S)`` when
``x``'s struct info is already ``S`` (the cast checks nothing). Chains
``c = b; b = a`` collapse to ``a``.

Two rules keep the result well-formed:

* a dataflow variable cannot escape its block: for ``gv = lv`` where ``gv``
  is a block output and ``lv`` a DataflowVar, ``lv``'s own binding is made
  to define ``gv`` directly (``gv = R.add(...)``), instead of letting ``lv``
  leak out of the block;
* ``y`` is only replaced by ``x`` when ``x``'s struct info is at least as
  precise as ``y``'s (``y``'s annotation is a base of ``x``'s); otherwise
  the binding is a refinement and stays.

Dataflow and binding blocks left empty are removed. The pass is idempotent.
"""

from __future__ import annotations

from phasec.ir import (
    Binding, DataflowVar, ExprMutator, Function, If, IRModule, MatchCast, Phase,
    SeqExpr, Var,
)
from phasec.arith.lattice import is_base_of, struct_info_equal
from phasec.transform import module_pass, register_pass

__all__ = ["CanonicalizeBindings", "canonicalize_function"]


class _Planner:
    """Decides which bindings go and what replaces their variables."""

    def __init__(self) -> None:
        self.subst: dict[Var, Var] = {}
        self.redefine: dict[Var, Var] = {}   # DataflowVar -> the output Var defined instead
        self.drop: set[Binding] = set()

    def resolve(self, var: Var) -> Var:
        subst = self.subst
        root = var
        while root in subst:
            root = subst[root]
        while var in subst and subst[var] is not root:  # path compression
            var, subst[var] = subst[var], root
        return root

    def function(self, func: Function) -> None:
        # Explicit stack of SeqExprs: nesting is handled without recursion.
        stack: list[SeqExpr] = [func.body]
        while stack:
            seq = stack.pop()
            for block in seq.blocks:
                for b in block.bindings:
                    self.binding(b, stack)

    def binding(self, b: Binding, stack: list[SeqExpr]) -> None:
        value = b.value
        t = type(value)
        if t is If:
            stack.append(value.false_branch)
            stack.append(value.true_branch)
            return
        if t is Function:
            stack.append(value.body)
            return
        if t is SeqExpr:
            stack.append(value)
            return
        if t is not Var and t is not DataflowVar:
            return
        source = self.resolve(value)
        y = b.var
        if type(b) is MatchCast and not struct_info_equal(source.struct_info, b.struct_info):
            return  # a real run-time check (or refinement)
        if y.struct_info is not None and not is_base_of(y.struct_info, source.struct_info):
            return  # y is annotated more precisely than x: a refinement, keep it
        if type(y) is DataflowVar or type(source) is not DataflowVar:
            self.subst[y] = source
            self.drop.add(b)
            return
        # y is an output (Var) of the block, source a DataflowVar of the same block:
        # let source's binding define the output variable itself.
        out = Var(y.name_hint, source.struct_info, span=y.span)
        self.redefine[source] = out
        self.subst[source] = out
        self.subst[y] = out
        self.drop.add(b)


class _Rewriter(ExprMutator):
    drop_empty_blocks = True

    def __init__(self, plan: _Planner) -> None:
        super().__init__()
        self.plan = plan
        self.var_remap = {v: plan.resolve(v) for v in list(plan.subst)}

    def visit_binding(self, binding: Binding):
        if binding in self.plan.drop:
            return None
        return super().visit_binding(binding)

    def visit_var_def(self, var: Var) -> Var:
        return self.plan.redefine.get(var, var)


def canonicalize_function(func: Function) -> Function:
    """``func`` without trivial rebindings (the same object if it has none)."""
    plan = _Planner()
    plan.function(func)
    if not plan.subst:
        return func
    return _Rewriter(plan).visit_expr(func)


@register_pass
@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, name="CanonicalizeBindings")
class CanonicalizeBindings:
    """Remove trivial rebindings (``y = x``, no-op match_casts), substituting uses."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return mod.map_functions(lambda _, func: canonicalize_function(func))
