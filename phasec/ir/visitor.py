"""Visitor and mutator base classes for Relax expressions.

Dispatch is by node type to ``visit_<kind>_`` methods (TVM's naming).
Binding lists are walked with loops, never recursion, so long programs do not
meet Python's recursion limit; recursion depth is bounded by the nesting of
functions, branches and tuples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Callable

from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr,
    ExternFunc, Function, GlobalVar, If, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var,
)

__all__ = ["ExprVisitor", "ExprMutator", "post_order_visit", "collect_exprs"]

_KIND = {
    Var: "var", DataflowVar: "dataflow_var", Constant: "constant", Tuple: "tuple",
    TupleGetItem: "tuple_getitem", Op: "op", GlobalVar: "global_var",
    ExternFunc: "extern_func", ShapeExpr: "shape_expr", PrimValue: "prim_value",
    StringImm: "string_imm", DataTypeImm: "data_type_imm", Call: "call", If: "if",
    SeqExpr: "seq_expr", Function: "function",
}


class ExprVisitor:
    """Walks an expression; override ``visit_<kind>_`` methods to act on nodes."""

    def visit_expr(self, expr: Expr) -> None:
        getattr(self, "visit_" + _KIND[type(expr)] + "_")(expr)

    # leaves
    def visit_var_(self, var: Var) -> None: ...
    def visit_dataflow_var_(self, var: DataflowVar) -> None:
        self.visit_var_(var)
    def visit_constant_(self, expr: Constant) -> None: ...
    def visit_op_(self, expr: Op) -> None: ...
    def visit_global_var_(self, expr: GlobalVar) -> None: ...
    def visit_extern_func_(self, expr: ExternFunc) -> None: ...
    def visit_shape_expr_(self, expr: ShapeExpr) -> None: ...
    def visit_prim_value_(self, expr: PrimValue) -> None: ...
    def visit_string_imm_(self, expr: StringImm) -> None: ...
    def visit_data_type_imm_(self, expr: DataTypeImm) -> None: ...

    # composites
    def visit_tuple_(self, expr: Tuple) -> None:
        for f in expr.fields:
            self.visit_expr(f)

    def visit_tuple_getitem_(self, expr: TupleGetItem) -> None:
        self.visit_expr(expr.tuple_value)

    def visit_call_(self, expr: Call) -> None:
        self.visit_expr(expr.op)
        for a in expr.args:
            self.visit_expr(a)

    def visit_if_(self, expr: If) -> None:
        self.visit_expr(expr.cond)
        self.visit_expr(expr.true_branch)
        self.visit_expr(expr.false_branch)

    def visit_seq_expr_(self, expr: SeqExpr) -> None:
        for block in expr.blocks:
            self.visit_binding_block(block)
        self.visit_expr(expr.body)

    def visit_function_(self, func: Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)

    # bindings
    def visit_binding_block(self, block: BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_binding(self, binding: Binding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_var_def(self, var: Var) -> None:
        """Called at each definition site (parameters, binding targets)."""


BindingResult = Binding | Sequence[Binding] | None


class ExprMutator:
    """Rebuilds an expression bottom-up, reusing every unchanged node.

    ``var_remap`` substitutes variables at use sites. ``visit_binding`` may
    return one binding, a sequence of bindings, or None to drop the binding.
    A rebuilt SeqExpr drops the dataflow blocks left empty, and every empty
    block when ``drop_empty_blocks`` is set.
    """

    drop_empty_blocks = False

    def __init__(self) -> None:
        self.var_remap: dict[Var, Expr] = {}

    def visit_expr(self, expr: Expr) -> Expr:
        return getattr(self, "visit_" + _KIND[type(expr)] + "_")(expr)

    def visit_var_(self, var: Var) -> Expr:
        return self.var_remap.get(var, var)

    def visit_dataflow_var_(self, var: DataflowVar) -> Expr:
        return self.visit_var_(var)

    def _leaf(self, expr: Expr) -> Expr:
        return expr

    visit_constant_ = visit_op_ = visit_global_var_ = visit_extern_func_ = _leaf
    visit_shape_expr_ = visit_prim_value_ = visit_string_imm_ = visit_data_type_imm_ = _leaf

    def visit_tuple_(self, expr: Tuple) -> Expr:
        fields = [self.visit_expr(f) for f in expr.fields]
        if all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return Tuple(fields, span=expr.span)

    def visit_tuple_getitem_(self, expr: TupleGetItem) -> Expr:
        tup = self.visit_expr(expr.tuple_value)
        if tup is expr.tuple_value:
            return expr
        return TupleGetItem(tup, expr.index, span=expr.span)

    def visit_call_(self, expr: Call) -> Expr:
        op = self.visit_expr(expr.op)
        args = [self.visit_expr(a) for a in expr.args]
        if op is expr.op and all(a is b for a, b in zip(args, expr.args)):
            return expr
        return Call(op, args, expr.attrs, expr.sinfo_args, struct_info=expr.struct_info,
                    span=expr.span)

    def visit_if_(self, expr: If) -> Expr:
        cond = self.visit_expr(expr.cond)
        tb = self.visit_expr(expr.true_branch)
        fb = self.visit_expr(expr.false_branch)
        if cond is expr.cond and tb is expr.true_branch and fb is expr.false_branch:
            return expr
        return If(cond, tb, fb, struct_info=expr.struct_info, span=expr.span)

    def visit_seq_expr_(self, expr: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(b) for b in expr.blocks]
        body = self.visit_expr(expr.body)
        if body is expr.body and all(a is b for a, b in zip(blocks, expr.blocks)):
            return expr
        drop_all = self.drop_empty_blocks
        return SeqExpr([b for b in blocks
                        if b.bindings or not (drop_all or isinstance(b, DataflowBlock))],
                       body, span=expr.span)

    def visit_function_(self, func: Function) -> Expr:
        params = [self.visit_var_def(p) for p in func.params]
        body = self.visit_expr(func.body)
        if body is func.body and all(a is b for a, b in zip(params, func.params)):
            return func
        return Function(params, body, func.ret_struct_info, func.is_pure, func.attrs,
                        span=func.span)

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        out: list[Binding] = []
        changed = False
        for b in block.bindings:
            r = self.visit_binding(b)
            if r is b:
                out.append(b)
                continue
            changed = True
            if r is None:
                continue
            if isinstance(r, Binding):
                out.append(r)
            else:
                out.extend(r)
        if not changed:
            return block
        return type(block)(out, span=block.span)

    def visit_binding(self, binding: Binding) -> BindingResult:
        value = self.visit_expr(binding.value)
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            return binding
        return binding.rebind(value, var)

    def visit_var_def(self, var: Var) -> Var:
        """Called at each definition site; may return a replacement Var."""
        return var


def post_order_visit(expr: Expr, fn: Callable[[Expr], Any]) -> None:
    """Call ``fn`` on every sub-expression of ``expr``, children first."""

    class _V(ExprVisitor):
        def visit_expr(self, e: Expr) -> None:
            super().visit_expr(e)
            fn(e)

    _V().visit_expr(expr)


def collect_exprs(expr: Expr, kinds: Collection[type]) -> list[Expr]:
    """Every sub-expression of ``expr`` (itself included) whose exact type is
    in ``kinds``, e.g. ``frozenset((Var, DataflowVar))``, in no particular order.

    Walks operands, branches, binding values and nested function bodies, not
    definition sites (binding targets, parameters); a node of one of
    ``kinds`` is not walked into. Iterative: no recursion limit.
    """
    found: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        e = stack.pop()
        t = type(e)
        if t in kinds:
            found.append(e)
        elif t is Call:
            stack.append(e.op)
            stack.extend(e.args)
        elif t is Tuple:
            stack.extend(e.fields)
        elif t is TupleGetItem:
            stack.append(e.tuple_value)
        elif t is If:
            stack.append(e.cond)
            stack.append(e.true_branch)
            stack.append(e.false_branch)
        elif t is SeqExpr:
            for block in e.blocks:
                stack.extend(b.value for b in block.bindings)
            stack.append(e.body)
        elif t is Function:
            stack.append(e.body)
    return found
