"""WF0xx: variables and scopes (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.expr import (
    Binding, BindingBlock, DataflowBlock, DataflowVar, If, SeqExpr, ShapeExpr, Var, VarBinding,
)
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.ir.struct_info import ShapeStructInfo, TensorStructInfo

from phasec.verifier.context import BRANCH, DATAFLOW, Context
from phasec.verifier.injection import (
    Choose, anchor, insert_bindings, insert_block, new_function, pick, replace_block,
    top_bindings, trivial_if, with_body,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register


def _name(var: Any) -> str:
    return getattr(var, "name_hint", None) or getattr(var, "name", "?")


@register
class UseBeforeDef(Rule):
    code = "WF001"
    title = "Variable used before its definition or outside its scope"
    explanation = """
    Every Relax variable must be defined (as a parameter or by a binding)
    before it is used, and used only where its definition is in scope: the
    rest of the function body it is defined in, including nested functions
    (which capture it). A variable defined inside a nested function is not
    visible outside that function. Using a variable that is defined later, or
    never, means the program reads a value that does not exist yet; passes
    that reorder or drop bindings typically introduce it.
    """
    help = "define the variable before this use, or use a variable that is in scope here"
    tvm = TVMCheck.REFUSES
    injection = "use a variable before its binding (or one never bound)"

    def var_use(self, ctx: Context, var: Any) -> None:
        frame = ctx.defined_in.get(var)
        if frame is None:
            if var not in ctx.recursive:
                ctx.report(self, f"variable '{_name(var)}' is used before it is defined "
                           "(or it is never defined)")
        elif not frame.open and frame.kind not in (BRANCH, DATAFLOW):
            ctx.report(self, f"variable '{_name(var)}' is used outside its scope: it is "
                       f"defined inside another function ({frame.kind} of '{frame.function}')")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, name, func, x = anchor(mod, choose)
        later = [b for _, _, b in top_bindings(func) if type(b.var) is Var]
        if later and choose(2) == 0:
            target = pick(later, choose).var
        else:
            target = Var("ghost", x.struct_info)
        use = VarBinding(Var("early", target.struct_info), target)
        return insert_block(mod, name, func, BindingBlock([use]), choose, at="start")


@register
class DefinedTwice(Rule):
    code = "WF002"
    title = "Variable defined more than once"
    explanation = """
    A Relax variable is identified by the object, not its name, and must be
    defined exactly once in the module: as one parameter of one function, or
    by one binding. A second definition of the same variable makes every use
    ambiguous. This usually comes from a pass that copies bindings or a
    function body without creating fresh variables.
    """
    help = "bind a fresh variable (passes: copy with new Vars, e.g. through a var remap)"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A variable bound twice reads back as two variables."
    injection = "bind the same variable twice (a copied binding)"

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if var not in ctx.defined_in:
            return
        owner = ctx.param_owner.get(var)
        if kind == "param" and owner is not None and owner != ctx.func_name:
            return  # WF008 reports a parameter shared between functions
        # at the second definition (the Var's own span is its first one)
        ctx.report(self, f"variable '{_name(var)}' is defined more than once")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f) for n, f in mod.relax_functions() if top_bindings(f)]
        if not cands:
            def build(x: Var) -> list[Binding]:
                v = Var("twice", x.struct_info)
                return [VarBinding(v, x), VarBinding(v, x)]
            return insert_bindings(mod, build, choose)
        name, func = pick(sorted(cands, key=lambda nf: nf[0]), choose)
        bi, ki, b = pick(top_bindings(func), choose)
        bindings = list(func.body.blocks[bi].bindings)
        bindings.insert(ki + 1, b)  # the very same binding again
        return mod.update({name: replace_block(func, bi, bindings)})


@register
class DataflowVarEscapes(Rule):
    code = "WF003"
    title = "Dataflow variable used outside its dataflow block"
    explanation = """
    A DataflowVar is local to the dataflow block that defines it: it may be
    used only by later bindings of the same block. Values that leave the
    block must be bound to ordinary variables (the ones listed in
    R.output(...)). A DataflowVar used after its block, in another block, in
    the function's result or inside a nested function breaks that contract,
    and passes that rely on it (dead-code elimination, ToNonDataflow) would
    miscompile.
    """
    help = "list the variable in R.output(...) and use the output variable outside the block"
    tvm = TVMCheck.REFUSES
    injection = "use a dataflow variable after its dataflow block"

    def var_use(self, ctx: Context, var: Any) -> None:
        if type(var) is not DataflowVar:
            return
        frame = ctx.defined_in.get(var)
        if frame is None or frame.kind != DATAFLOW:
            return  # undefined (WF001) or defined outside a block (WF004)
        if not frame.open:
            ctx.report(self, f"dataflow variable '{_name(var)}' is used after the end of "
                       "its dataflow block")
        elif not ctx.in_dataflow:
            ctx.report(self, f"dataflow variable '{_name(var)}' is used inside a nested "
                       "function, outside its dataflow block")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f, bi, b.var) for n, f in mod.relax_functions()
                 for bi, ki, b in top_bindings(f)
                 if type(b.var) is DataflowVar and isinstance(f.body.blocks[bi], DataflowBlock)]
        if cands:
            name, func, bi, dv = pick(cands, choose)
            blocks = list(func.body.blocks)
            blocks.insert(bi + 1, BindingBlock([VarBinding(Var("leak", dv.struct_info), dv)]))
            return mod.update({name: with_body(func, blocks)})
        mod, name, func, x = anchor(mod, choose)
        dv = DataflowVar("lv", x.struct_info)
        blocks = [DataflowBlock([VarBinding(dv, x)]),
                  BindingBlock([VarBinding(Var("leak", dv.struct_info), dv)]), *func.body.blocks]
        return mod.update({name: with_body(func, blocks)})


@register
class DataflowVarOutside(Rule):
    code = "WF004"
    title = "Dataflow variable defined outside a dataflow block"
    explanation = """
    DataflowVars may only be bound inside a dataflow block (with
    R.dataflow()). A DataflowVar that is a function parameter or is bound in
    an ordinary binding block has no block to be local to. Use an ordinary
    Var there; passes that remove dataflow blocks (ToNonDataflow) must turn
    DataflowVars into Vars.
    """
    help = "use an ordinary Var here (ToNonDataflow converts DataflowVars when it removes blocks)"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A dataflow variable outside a dataflow block reads back as an ordinary one."
    injection = "bind a dataflow variable outside any dataflow block"

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if type(var) is DataflowVar and (kind == "param" or not ctx.in_dataflow):
            where = "as a function parameter" if kind == "param" else "outside a dataflow block"
            ctx.report(self, f"dataflow variable '{_name(var)}' is defined {where}", var)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(mod, lambda x: [VarBinding(DataflowVar("lv", x.struct_info), x)],
                               choose)


@register
class BranchVarEscapes(Rule):
    code = "WF005"
    title = "Variable bound inside an if-branch used after the if"
    explanation = """
    The bindings of an if-branch are local to that branch. Only the branch's
    result leaves it, through the variable the If is bound to. A variable
    bound inside a branch and used after the If would be undefined whenever
    the other branch ran.
    """
    help = "use the variable the If is bound to, or compute the value before the if"
    tvm = TVMCheck.REFUSES
    injection = "use a variable bound inside an if-branch after the if"

    def var_use(self, ctx: Context, var: Any) -> None:
        frame = ctx.defined_in.get(var)
        if frame is not None and not frame.open and frame.kind == BRANCH:
            ctx.report(self, f"variable '{_name(var)}' is bound inside an if-branch and used "
                       "after the if")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        for name, func in sorted(mod.relax_functions(), key=lambda nf: nf[0]):
            for bi, ki, b in top_bindings(func):
                if isinstance(b.value, If):
                    inner = [c for br in (b.value.true_branch, b.value.false_branch)
                             for blk in br.blocks for c in blk.bindings]
                    if inner:
                        v = pick(inner, choose).var
                        bindings = list(func.body.blocks[bi].bindings)
                        bindings.insert(ki + 1, VarBinding(Var("escaped", v.struct_info), v))
                        return mod.update({name: replace_block(func, bi, bindings)})

        def build(x: Var) -> list[Binding]:
            t = Var("inner", x.struct_info)
            r = Var("r", x.struct_info)
            return [VarBinding(r, trivial_if(x, [VarBinding(t, x)], t)),
                    VarBinding(Var("escaped", t.struct_info), t)]
        return insert_bindings(mod, build, choose)


@register
class SymbolicUseBeforeDef(Rule):
    code = "WF006"
    title = "Symbolic shape variable used before its definition"
    explanation = """
    A symbolic shape variable (the n of R.Tensor((n, 4))) is defined by its
    occurrence as a whole dimension in a parameter's struct info or in the
    target of an R.match_cast; everywhere else it is a use: compound
    dimensions (n * n), binding annotations, R.shape(...), R.prim_value(...),
    return struct info, call_tir outputs and tir_vars. A use before any
    definition names a value nobody provides at run time.
    A function's parameters bind together, as in TVM: the whole dimensions of
    ALL parameters are bound first, then compound dimensions are checked. So
    in f(a: R.Tensor((n * n,)), x: R.Tensor((n, n))) the n of a's shape is
    defined by x, although x comes later (lifted closures take their
    captured values, which often define the variables, after their own
    parameters). A compound dimension whose variables no parameter has as a
    whole dimension is an error. An R.match_cast target binds the same way
    within itself. Like Relax variables, symbolic variables defined in an
    if-branch are not visible after it.
    """
    help = "bind the variable first with R.match_cast (or take it from a parameter's shape)"
    tvm = TVMCheck.REFUSES
    injection = "use a symbolic variable nothing defines"

    def sym_use(self, ctx: Context, var: Any) -> None:
        if ctx.sym_visible(var):
            return
        owner = ctx.sym_owner.get(var)
        if owner is not None and owner != ctx.func_name:
            return  # shared between functions: WF007
        ctx.report(self, f"symbolic variable '{_name(var)}' is used before it is defined", None)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        k = tir.Var("k_undefined")
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("s", ShapeStructInfo([k])), ShapeExpr([k]))], choose)


@register
class SymbolicShared(Rule):
    code = "WF007"
    title = "Symbolic shape variable shared between functions"
    explanation = """
    Every module-level function has its own symbolic shape variables: the n
    of one function's signature is unrelated to the n of another, even when
    they are spelled alike. Sharing one variable object between two
    functions of the module makes passes that substitute or bind shape
    variables in one function silently change the other. (A nested function
    is part of its enclosing function and may use that function's symbolic
    variables; LambdaLifting gives the lifted function fresh ones.)
    """
    help = "give each function its own symbolic variables (copy them when cloning a function)"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A symbolic variable shared between functions reads back as one per function."
    injection = "share one symbolic variable between two functions"

    def _check(self, ctx: Context, var: Any) -> None:
        owner = ctx.sym_owner.get(var)
        if owner is not None and owner != ctx.func_name:
            seen = ctx.state(self)
            key = (var, ctx.func_name)
            if key not in seen:
                seen.add(key)
                ctx.report(self, f"symbolic variable '{_name(var)}' is also used in function "
                           f"'{owner}'", None)

    sym_def = _check
    sym_use = _check

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        syms = []
        for _, func in sorted(mod.relax_functions(), key=lambda nf: nf[0]):
            for p in func.params:
                s = p.struct_info
                if isinstance(s, TensorStructInfo) and s.shape is not None:
                    syms.extend(d for d in s.shape if isinstance(d, tir.Var))
        if syms:
            n = pick(syms, choose)
            funcs = {}
        else:  # two new functions sharing a fresh one
            n = tir.Var("n")
            a = Var("a", TensorStructInfo((n,), "float32"))
            funcs = {"mutant_a": new_function([a], SeqExpr([], a), "mutant_a",
                                              pure=mod.phase < Phase.BUILD)}
        b = Var("b", TensorStructInfo((n,), "float32"))
        funcs["mutant_shared"] = new_function([b], SeqExpr([], b), "mutant_shared",
                                              pure=mod.phase < Phase.BUILD)
        return mod.update(funcs)


@register
class ParamShared(Rule):
    code = "WF008"
    title = "Parameter variable shared between functions"
    explanation = """
    A parameter Var belongs to exactly one function. When two functions of
    the module list the same Var object as a parameter, a substitution or
    rewrite of one function's parameter silently affects the other. This
    usually comes from building a new function with the parameters of an
    existing one without copying them.
    """
    help = "create fresh parameter Vars for the new function"
    tvm = TVMCheck.TEXT_CANNOT_CARRY
    tvm_note = "A parameter shared between functions reads back as one per function."
    injection = "reuse another function's parameter variable"

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if kind != "param":
            return
        owner = ctx.param_owner.get(var)
        if owner is not None and owner != ctx.func_name:
            ctx.report(self, f"parameter '{_name(var)}' is also a parameter of function "
                       f"'{owner}'")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        mod, _, func, x = anchor(mod, choose)
        copy = new_function([x], SeqExpr([], x), "mutant_copy_params", pure=mod.phase < Phase.BUILD)
        return mod.update({"mutant_copy_params": copy})
