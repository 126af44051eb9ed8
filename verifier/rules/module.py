"""WF3xx: module-level names (every phase)."""

from __future__ import annotations

import difflib
from typing import Any

from phasec.ir.expr import Binding, Call, GlobalVar, Var, VarBinding
from phasec.ir.module import IRModule
from phasec.ir.struct_info import ObjectStructInfo

from phasec.verifier.context import Context
from phasec.verifier.injection import Choose, entry_function, global_uses, insert_bindings, pick
from phasec.verifier.rules.base import Rule, TVMCheck, register


@register
class UndefinedGlobal(Rule):
    code = "WF301"
    title = "GlobalVar names no function of the module"
    explanation = """
    A GlobalVar (cls.f in TVMScript) refers to a function of the same module
    by name. A reference to a name the module does not define cannot be
    resolved by the VM or the code generator; it usually means a pass
    removed or renamed a function without updating its callers.
    """
    help = "add the function to the module or fix the name"
    tvm = TVMCheck.REFUSES
    injection = "delete a function that is still called (or call a missing one)"

    def global_use(self, ctx: Context, gvar: Any) -> None:
        name = gvar.name_hint
        if name in ctx.mod.functions:
            return
        close = difflib.get_close_matches(name, list(ctx.mod.functions), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        ctx.report(self, f"cls.{name} names no function of the module{hint}", gvar)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        called = set()
        for _, func in mod.relax_functions():
            called |= global_uses(func)
        called = sorted(n for n in called if n in mod.functions and n != "main")
        if called and choose(2) == 0:
            return mod.remove(pick(called, choose))

        def build(x: Var) -> list[Binding]:
            call = Call(GlobalVar("missing_function"), [x], struct_info=ObjectStructInfo())
            return [VarBinding(Var("v", ObjectStructInfo()), call)]
        return insert_bindings(mod, build, choose)


@register
class GlobalSymbolMismatch(Rule):
    code = "WF302"
    title = "global_symbol differs from the function's name, or is exported twice"
    explanation = """
    An exported module-level function carries a global_symbol attribute:
    the name it is looked up by at run time. A Relax function's must equal
    the name the module stores it under, or calls by name (and the VM's
    function table) would reach the wrong function. A PrimFunc's is the
    symbol its kernel is linked under, which may differ from its name (TVM
    allows it; phasec calls kernels through their GlobalVar), but no two
    functions may export one symbol: a library built from the module would
    hold two definitions of it. Private functions have no global_symbol.
    """
    help = "rename the function or set global_symbol to its name (or make it private)"
    tvm = TVMCheck.REFUSES
    tvm_note = (
        "TVM compares a Relax function's global_symbol with its name, but not two "
        "functions exporting one symbol: phasec alone refuses that (a build would link "
        "two definitions of it).")
    injection = "set a global_symbol different from the function's name"

    def enter_function(self, ctx: Context, func: Any) -> None:
        symbol = func.attrs.get("global_symbol")
        if ctx.func_depth == 0 and symbol is not None and symbol != ctx.func_name:
            ctx.report(self, f"function '{ctx.func_name}' has global_symbol {symbol!r}; they "
                       "must be equal", func)

    def prim_func(self, ctx: Context, func: Any) -> None:
        symbol = func.attrs.get("global_symbol")
        if symbol is None or symbol == ctx.func_name:
            return  # names are unique, so a symbol equal to its name cannot clash
        others = [name for name, f in ctx.mod.functions.items() if name != ctx.func_name
                  and (getattr(f, "attrs", None) or {}).get("global_symbol") == symbol]
        if others:
            ctx.report(self, f"PrimFunc '{ctx.func_name}' exports global_symbol {symbol!r}, "
                       f"which function '{others[0]}' exports too", func)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        name, func = entry_function(mod, choose)
        return mod.update({name: func.with_attr("global_symbol", name + "_renamed")})
