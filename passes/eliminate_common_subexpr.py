"""EliminateCommonSubexpr: compute each identical pure call once.

Two calls are identical when they have the same callee, the same operands
(the same variables, equal constants, equal shapes...) after earlier merges
are substituted, the same attributes and the same ``sinfo_args``. The second
binding ``y = <call>`` is dropped and ``y``'s uses read the first result
``x``. Two exceptions keep the module well-formed: when ``y`` is a dataflow
block output and ``x`` a DataflowVar, the binding becomes ``y = x`` (run
CanonicalizeBindings to fold it into ``x``'s definition); when ``y`` is
annotated more precisely than ``x``, nothing is merged.

Scopes: a call is reused in the rest of its binding list and inside the
if-branches nested in it, never from one branch of an if into the other or
after the if, never from inside a dataflow block (a DataflowVar) to outside
it, and never across a nested function boundary (that would create new
captures). Impure calls, calls of unknown purity, and memory/VM builtins
(two allocations are two different buffers) are never merged, and functions
with a ``Codegen`` or ``Composite`` attribute are left as they are.

Runs at ``opt_level`` 3, as in TVM's pass-infrastructure tutorial: a
``Sequential`` under ``PassContext(opt_level=2)`` skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from phasec.ir import (
    Binding, BindingBlock, Call, DataflowBlock, DataflowVar, Expr, ExprMutator, Function,
    IRModule, Node, Op, Phase, SeqExpr, Var, VarBinding, tir,
)
from phasec.arith.lattice import is_base_of
from phasec.op import find_op
from phasec.transform import module_pass, register_pass

from phasec.passes.dead_code_elimination import call_is_pure
from phasec.passes.lambda_lifting import is_byoc_function

__all__ = ["EliminateCommonSubexpr", "expr_key"]

_BOUND = (Var, tir.Var, tir.Buffer)
#: Operator categories whose calls may be merged (not allocations or VM builtins).
_MERGEABLE_CATEGORIES = frozenset({"compute", "call"})


def expr_key(value: Any) -> Any:
    """A hashable key equal for structurally identical expressions in which
    variables are the same objects (free variables compare by identity)."""
    if isinstance(value, _BOUND):
        return ("var", id(value))
    if isinstance(value, Node):
        fields = type(value)._fields
        return (type(value).__name__,) + tuple(expr_key(getattr(value, f)) for f in fields)
    if isinstance(value, (tuple, list)):
        return ("seq",) + tuple(expr_key(v) for v in value)
    if isinstance(value, Mapping):
        return ("map",) + tuple((k, expr_key(value[k])) for k in sorted(value, key=str))
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    return value


class _Scope:
    """A chain of tables (key -> variable); lookups walk outwards."""

    def __init__(self, parent: "_Scope | None" = None) -> None:
        self.parent = parent
        self.table: dict[Any, Var] = {}

    def get(self, key: Any) -> Var | None:
        scope: _Scope | None = self
        while scope is not None:
            hit = scope.table.get(key)
            if hit is not None:
                return hit
            scope = scope.parent
        return None


class _Eliminator(ExprMutator):
    drop_empty_blocks = True

    def __init__(self, functions: Mapping[str, object]) -> None:
        super().__init__()
        self.functions = functions
        self.scope = _Scope()

    def _mergeable(self, call: Call) -> bool:
        if type(call.op) is Op:
            opdef = find_op(call.op.name)
            if opdef is None or opdef.category not in _MERGEABLE_CATEGORIES:
                return False
        return call_is_pure(call, self.functions)

    # -- scopes -------------------------------------------------------------------
    def visit_function_(self, func: Function) -> Expr:
        if is_byoc_function(func):
            return func  # an external backend's function (or pattern): left as it is
        saved, self.scope = self.scope, _Scope()
        try:
            return super().visit_function_(func)
        finally:
            self.scope = saved

    def visit_seq_expr_(self, expr: SeqExpr) -> Expr:
        # A function body or an if-branch: what it computes is not reused after it.
        saved, self.scope = self.scope, _Scope(self.scope)
        try:
            return super().visit_seq_expr_(expr)
        finally:
            self.scope = saved

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        if type(block) is not DataflowBlock:
            return super().visit_binding_block(block)
        outer = self.scope
        self.scope = _Scope(outer)
        try:
            return super().visit_binding_block(block)
        finally:
            inner = self.scope
            self.scope = outer
            # Block outputs (ordinary Vars) stay available after the block.
            for key, var in inner.table.items():
                if type(var) is not DataflowVar and key not in outer.table:
                    outer.table[key] = var

    # -- bindings -----------------------------------------------------------------
    def visit_binding(self, binding: Binding):
        new = super().visit_binding(binding)
        if type(new) is not VarBinding or type(new.value) is not Call:
            return new
        call = new.value
        if not self._mergeable(call):
            return new
        key = expr_key(call)
        var = new.var
        first = self.scope.get(key)
        if first is None:
            self.scope.table[key] = var
            return new
        if var.struct_info is not None and not is_base_of(var.struct_info, first.struct_info):
            return new  # var is annotated more precisely: not a plain duplicate
        if type(var) is not DataflowVar and type(first) is DataflowVar:
            return VarBinding(var, first, span=new.span)
        self.var_remap[var] = first
        return None


@register_pass
@module_pass(opt_level=3, phases=Phase.OPTIMIZATION, name="EliminateCommonSubexpr")
class EliminateCommonSubexpr:
    """Merge identical pure calls within a scope (each is computed once)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        # _Eliminator.visit_function_ leaves BYOC functions alone.
        return mod.map_functions(lambda _, func: _Eliminator(mod.functions).visit_expr(func))

