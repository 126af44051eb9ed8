"""ToNonDataflow: turn every dataflow block into an ordinary binding block.

Each ``DataflowVar`` becomes an ordinary ``Var`` (same name and struct info)
and its uses are updated; adjacent binding blocks are merged, so a body is
one binding block per run of bindings (what the TVMScript printer shows and
the parser reads back). Function bodies, if-branches and nested functions
are all converted. ``LegalizeOps`` requires this pass: the lowering phase
has no dataflow blocks.
"""

from __future__ import annotations

from phasec.ir import (
    BindingBlock, DataflowBlock, DataflowVar, Expr, ExprMutator, Function, IRModule, Phase,
    SeqExpr, Var,
)
from phasec.transform import module_pass, register_pass

__all__ = ["ToNonDataflow", "to_non_dataflow_function"]


class _Converter(ExprMutator):
    def visit_var_def(self, var: Var) -> Var:
        if type(var) is DataflowVar:
            new = Var(var.name_hint, var.struct_info, span=var.span)
            self.var_remap[var] = new
            return new
        return var

    def visit_seq_expr_(self, expr: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(b) for b in expr.blocks]
        body = self.visit_expr(expr.body)
        # Without dataflow blocks, all bindings form one ordinary block.
        flat = not expr.blocks or (len(expr.blocks) == 1 and type(expr.blocks[0]) is BindingBlock
                                   and bool(expr.blocks[0].bindings))
        unchanged = body is expr.body and all(a is b for a, b in zip(blocks, expr.blocks))
        if flat and unchanged:
            return expr
        bindings = [b for block in blocks for b in block.bindings]
        merged = [BindingBlock(bindings, span=blocks[0].span)] if bindings else []
        return SeqExpr(merged, body, span=expr.span)

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        new = super().visit_binding_block(block)
        if type(new) is DataflowBlock:
            return BindingBlock(new.bindings, span=new.span)
        return new


def to_non_dataflow_function(func: Function) -> Function:
    """``func`` without dataflow blocks (the same object if it has none)."""
    return _Converter().visit_expr(func)


@register_pass
@module_pass(opt_level=0, phases=Phase.OPTIMIZATION, name="ToNonDataflow")
class ToNonDataflow:
    """Convert dataflow blocks to ordinary binding blocks (DataflowVars become Vars)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return mod.map_functions(lambda _, func: to_non_dataflow_function(func))
