"""WF0xx: variables and scopes (every phase)."""

from __future__ import annotations

from typing import Any

from phasec.ir.expr import DataflowVar

from phasec.verifier.context import BRANCH, DATAFLOW, Context
from phasec.verifier.rules.base import Rule, register


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

    def var_use(self, ctx: Context, var: Any) -> None:
        frame = ctx.defined_in.get(var)
        if frame is None:
            if var not in ctx.recursive:
                ctx.report(self, f"variable '{_name(var)}' is used before it is defined "
                           "(or it is never defined)")
        elif not frame.open and frame.kind not in (BRANCH, DATAFLOW):
            ctx.report(self, f"variable '{_name(var)}' is used outside its scope: it is "
                       f"defined inside another function ({frame.kind} of '{frame.function}')")


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

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if var not in ctx.defined_in:
            return
        owner = ctx.param_owner.get(var)
        if kind == "param" and owner is not None and owner != ctx.func_name:
            return  # WF008 reports a parameter shared between functions
        # at the second definition (the Var's own span is its first one)
        ctx.report(self, f"variable '{_name(var)}' is defined more than once")


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

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if type(var) is DataflowVar and (kind == "param" or not ctx.in_dataflow):
            where = "as a function parameter" if kind == "param" else "outside a dataflow block"
            ctx.report(self, f"dataflow variable '{_name(var)}' is defined {where}", var)


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

    def var_use(self, ctx: Context, var: Any) -> None:
        frame = ctx.defined_in.get(var)
        if frame is not None and not frame.open and frame.kind == BRANCH:
            ctx.report(self, f"variable '{_name(var)}' is bound inside an if-branch and used "
                       "after the if")


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

    def sym_use(self, ctx: Context, var: Any) -> None:
        if ctx.sym_visible(var):
            return
        owner = ctx.sym_owner.get(var)
        if owner is not None and owner != ctx.func_name:
            return  # shared between functions: WF007
        ctx.report(self, f"symbolic variable '{_name(var)}' is used before it is defined", None)


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

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if kind != "param":
            return
        owner = ctx.param_owner.get(var)
        if owner is not None and owner != ctx.func_name:
            ctx.report(self, f"parameter '{_name(var)}' is also a parameter of function "
                       f"'{owner}'")
