"""WF1xx: normal form and the shape of the IR (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.expr import Binding, Call, Op, SeqExpr, Var, VarBinding
from phasec.ir.module import IRModule
from phasec.ir.struct_info import ObjectStructInfo, TensorStructInfo

from phasec.verifier.context import Context
from phasec.verifier.injection import (
    Choose, copy_kernel, insert_bindings, pick, replace_block, top_bindings, trivial_if,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register


def _kind(node: Any) -> str:
    return type(node).__name__


@register
class MalformedNode(Rule):
    code = "WF100"
    title = "Node of an unexpected kind"
    explanation = """
    Every field of the IR must hold the kind of node it is declared to hold:
    a binding binds a Relax Var to a Relax expression, a function's
    parameters are Vars, a PrimFunc's body is made of TIR statements. A node
    of another kind (a TIR expression where a Relax expression belongs, a
    Python value, None) cannot be analysed or compiled. This only happens
    with IR built by hand or by a faulty pass or importer; the TVMScript
    parser never produces it. When the checker cannot analyse a function
    completely it also reports this rule.
    """
    help = "construct the node with the right class (see phasec.ir)"
    tvm = TVMCheck.REFUSES
    injection = "bind a TIR expression as if it were a Relax value"

    def bad_value(self, ctx: Context, value: Any) -> None:
        if isinstance(value, tir.PrimFunc):
            return  # WF103 reports inline PrimFuncs
        ctx.report(self, f"unexpected {_kind(value)} here: not a node of the expected kind")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("bad", ObjectStructInfo()), tir.IntImm(1))], choose)


@register
class NotANF(Rule):
    code = "WF101"
    title = "Expression not in A-normal form"
    explanation = """
    phasec keeps Relax in A-normal form, as TVM does: the operands of a call,
    the callee, the fields of a tuple, the tuple of a tuple-get-item, the
    condition of an if and the result of a function or branch body must be
    leaves (variables, constants, shapes, prim values, strings, global
    names, extern functions, operators) or tuples of leaves. Every
    intermediate value is bound to its own variable, so passes see each
    computation once, in order. Function bodies and if-branches must be
    SeqExprs. The TVMScript parser normalizes nested calls automatically;
    this rule catches passes that build nested expressions.
    """
    help = "bind the inner expression to a variable first and use the variable"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "Both parsers normalize a nested call into bindings."
    injection = "nest a call inside another call's operands"

    def non_leaf(self, ctx: Context, expr: Any, where: str) -> None:
        # located at the binding (or return): a nested expression's own span
        # is wherever a pass copied it from
        ctx.report(self, f"{_kind(expr)} used as {where}: A-normal form requires a leaf "
                   "(a variable, constant or other leaf expression) here")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
                 for bi, ki, b in top_bindings(f)
                 if isinstance(b.value, Call) and isinstance(b.value.op, Op)
                 and any(isinstance(a, Var) and isinstance(a.struct_info, TensorStructInfo)
                         for a in b.value.args)]
        if cands:
            name, func, bi, ki, b = pick(cands, choose)
            call = b.value
            i = next(i for i, a in enumerate(call.args)
                     if isinstance(a, Var) and isinstance(a.struct_info, TensorStructInfo))
            inner = Call(Op("relax.negative"), [call.args[i]], struct_info=call.args[i].struct_info)
            args = list(call.args)
            args[i] = inner
            new = Call(call.op, args, call.attrs, call.sinfo_args, struct_info=call.struct_info,
                       span=call.span)
            bindings = list(func.body.blocks[bi].bindings)
            bindings[ki] = VarBinding(b.var, new, span=b.span)
            return mod.update({name: replace_block(func, bi, bindings)})

        def build(x: Var) -> list[Binding]:
            inner = Call(Op("relax.negative"), [x], struct_info=x.struct_info)
            return [VarBinding(Var("nested", x.struct_info),
                               Call(Op("relax.negative"), [inner], struct_info=x.struct_info))]
        return insert_bindings(mod, build, choose)


@register
class MisplacedSeqExpr(Rule):
    code = "WF102"
    title = "SeqExpr outside a function or branch body"
    explanation = """
    A SeqExpr (a list of binding blocks followed by a result) may only be
    the body of a function or of an if-branch. Anywhere else — as a binding
    value, a call operand or a tuple field — it hides bindings from the
    scope rules and from every pass that walks binding blocks.
    """
    help = "move the SeqExpr's bindings into the enclosing block and use its result"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "Both parsers normalize a sequence in value position into bindings."
    injection = "bind a SeqExpr (a body) as a value"

    def misplaced_seq(self, ctx: Context, expr: Any) -> None:
        ctx.report(self, "a SeqExpr may only be the body of a function or an if-branch")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("seq", x.struct_info), SeqExpr([], x))], choose)


@register
class InlinePrimFunc(Rule):
    code = "WF103"
    title = "Inline PrimFunc"
    explanation = """
    PrimFuncs (TIR kernels) live at module level and are referenced through
    their GlobalVar, e.g. R.call_tir(cls.kernel, ...). A PrimFunc used
    directly as a Relax value or operand has no name to call it by, and
    neither the VM nor the code generator can place it.
    """
    help = "add the PrimFunc to the module and refer to it as cls.<name>"
    tvm = TVMCheck.REFUSES
    injection = "use a PrimFunc inline as a Relax value"

    def bad_value(self, ctx: Context, value: Any) -> None:
        if isinstance(value, tir.PrimFunc):
            ctx.report(self, "a PrimFunc cannot appear inside a Relax function; add it to "
                       "the module and refer to its GlobalVar")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("kernel", ObjectStructInfo()), copy_kernel())], choose)


@register
class IfInDataflow(Rule):
    code = "WF104"
    title = "If inside a dataflow block"
    explanation = """
    A dataflow block is a straight-line, side-effect-free region: every
    binding is computed exactly once, in order, so passes may reorder,
    fuse or remove its bindings freely. Control flow breaks that, so an If
    may only appear in an ordinary binding block.
    """
    help = "close the dataflow block before the if (R.output) and bind the if outside it"
    tvm = TVMCheck.REFUSES
    injection = "put an if inside a dataflow block"

    def if_(self, ctx: Context, expr: Any) -> None:
        if ctx.in_dataflow:
            ctx.report(self, "an If cannot appear inside a dataflow block", expr)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("r", x.struct_info), trivial_if(x, [], x))], choose,
            dataflow=True)
