"""Mutation operators: one per verifier rule, each injecting that violation.

``mutate(mod, "WF002")`` returns a copy of a well-formed module with exactly
the kind of mistake rule WF002 describes (here: a variable bound twice), the
way a faulty pass would make it. The property "the verifier catches
mutations" is: for every rule and every well-formed module of a phase where
the rule applies, ``verifier.check(mutate(mod, code))`` reports ``code``.

Each operator takes a ``choose(n) -> int`` callback (in ``range(n)``) for its
choices (which function, which binding, where to insert), so hypothesis can
drive and shrink them; the default always picks the first option. Operators
prefer a realistic edit of existing code (duplicate an existing binding,
delete a function that is still called, leak an existing dataflow variable)
and fall back to inserting a small self-contained offending binding or
function when the module has nothing to edit.

Every rule of the verifier has an operator (:data:`MUTATIONS`);
:data:`UNINJECTABLE` lists rules that cannot be injected (none at present).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc, Function,
    GlobalVar, If, Op, SeqExpr, ShapeExpr, Tuple, Var, VarBinding,
)
from phasec.ir.module import IRModule
from phasec.op import call_op
from phasec.ir.phase import Phase
from phasec.ir.struct_info import (
    ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
)
from phasec.ir.node import replace
from phasec.ir.visitor import collect_exprs
from phasec.script.parser import parse

__all__ = ["Mutation", "MUTATIONS", "UNINJECTABLE", "mutate", "mutation_for",
           "FORCE_PURE"]

FORCE_PURE = "relax.force_pure"
Choose = Callable[[int], int]


def _first(n: int) -> int:
    return 0


@dataclass(frozen=True)
class Mutation:
    """Injects a violation of rule ``code`` into a module of phase ``>= since``."""

    code: str
    description: str
    since: Phase
    apply: Callable[[IRModule, Choose], IRModule]

    def __call__(self, mod: IRModule, choose: Choose = _first) -> IRModule:
        return self.apply(mod, choose)


MUTATIONS: dict[str, Mutation] = {}

#: Rules no operator can inject, and why.
UNINJECTABLE: dict[str, str] = {}


def _mutation(code: str, description: str, since: Phase = Phase.INGESTION) -> Callable:
    def register(fn: Callable[[IRModule, Choose], IRModule]) -> Callable:
        MUTATIONS[code] = Mutation(code, description, since, fn)
        return fn
    return register


def mutation_for(code: str) -> Mutation:
    """The operator for rule ``code``; KeyError if there is none."""
    try:
        return MUTATIONS[code.upper()]
    except KeyError:
        reason = UNINJECTABLE.get(code.upper())
        raise KeyError(f"no mutation operator for {code}" + (f": {reason}" if reason else "")
                       ) from None


def mutate(mod: IRModule, code: str, choose: Choose = _first) -> IRModule:
    """``mod`` with a violation of rule ``code`` injected."""
    return mutation_for(code)(mod, choose)


# ---------------------------------------------------------------------------
# Editing helpers
# ---------------------------------------------------------------------------

def _pick(items: list, choose: Choose) -> Any:
    return items[choose(len(items)) % len(items)] if len(items) > 1 else items[0]


def _entry(mod: IRModule, choose: Choose) -> tuple[str, Function]:
    """A Relax function of the module (main preferred first)."""
    names = sorted((n for n, _ in mod.relax_functions()), key=lambda n: (n != "main", n))
    if not names:
        raise ValueError("the module has no Relax function to mutate")
    name = _pick(names, choose)
    return name, mod[name]


def _tensor_param(func: Function) -> Var | None:
    params = [p for p in func.params if isinstance(p.struct_info, TensorStructInfo)]
    floats = [p for p in params if p.struct_info.dtype == "float32"]
    return (floats or params or [None])[0]


def _anchor(mod: IRModule, choose: Choose) -> tuple[IRModule, str, Function, Var]:
    """A function with a tensor parameter to put new bindings in (a new
    function ``mutant`` when there is none)."""
    cands = [(n, f) for n, f in mod.relax_functions() if _tensor_param(f) is not None]
    cands.sort(key=lambda nf: (nf[0] != "main", nf[0]))
    if cands:
        name, func = _pick(cands, choose)
        return mod, name, func, _tensor_param(func)
    x = Var("x", TensorStructInfo((2,), "float32"))
    func = _function([x], SeqExpr([], x), "mutant", pure=mod.phase < Phase.BUILD)
    mod = mod.update({"mutant": func})
    return mod, "mutant", func, x


def _function(params: list[Var], body: SeqExpr, name: str | None, pure: bool = True,
              attrs: dict | None = None) -> Function:
    attrs = dict(attrs or {})
    if name is not None:
        attrs.setdefault("global_symbol", name)
    return Function(params, body, None, pure, attrs)


def _with_body(func: Function, blocks: list, body: Any = None, **changes: Any) -> Function:
    seq = SeqExpr(blocks, func.body.body if body is None else body, span=func.body.span)
    return Function(func.params, seq, changes.get("ret", func.ret_struct_info),
                    changes.get("pure", func.is_pure), changes.get("attrs", func.attrs),
                    span=func.span)


def _insert(mod: IRModule, name: str, func: Function, block: BindingBlock,
            choose: Choose, at: str | None = None) -> IRModule:
    """Insert a new block at the start or the end of ``func``'s body."""
    blocks = list(func.body.blocks)
    where = at or ("start", "end")[choose(2) % 2]
    if where == "start":
        blocks.insert(0, block)
    else:
        blocks.append(block)
    return mod.update({name: _with_body(func, blocks)})


def _insert_bindings(mod: IRModule, build: Callable[[Var], list[Binding]], choose: Choose,
                     dataflow: bool = False, at: str | None = None) -> IRModule:
    """Insert ``build(param)`` as a new block of a function with a tensor param."""
    mod, name, func, param = _anchor(mod, choose)
    block_cls = DataflowBlock if dataflow else BindingBlock
    return _insert(mod, name, func, block_cls(build(param)), choose, at)


def _top_bindings(func: Function) -> list[tuple[int, int, Binding]]:
    return [(bi, ki, b) for bi, block in enumerate(func.body.blocks)
            for ki, b in enumerate(block.bindings)]


def _replace_block(func: Function, index: int, bindings: list[Binding]) -> Function:
    blocks = list(func.body.blocks)
    blocks[index] = type(blocks[index])(bindings, span=blocks[index].span)
    return _with_body(func, blocks)


def _other_sinfo(sinfo: StructInfo | None) -> StructInfo:
    """Struct info that provably conflicts with ``sinfo``."""
    if isinstance(sinfo, TensorStructInfo):
        dtype = "int32" if sinfo.dtype != "int32" else "float32"
        return TensorStructInfo(sinfo.shape, dtype, sinfo.ndim)
    return TensorStructInfo((), "float32")


def _packed_call(x: Var) -> Call:
    return Call(ExternFunc("phasec.testing.scale2"), [x], sinfo_args=[x.struct_info],
                struct_info=x.struct_info)


def _true() -> Constant:
    return Constant(np.array(True))


def _trivial_if(x: Var, then_bindings: list[Binding], then_result: Any) -> If:
    true_branch = SeqExpr([BindingBlock(then_bindings)] if then_bindings else [], then_result)
    return If(_true(), true_branch, SeqExpr([], x), struct_info=x.struct_info)


_KERNEL_SOURCE = '''
@I.ir_module
class Kernel:
    @T.prim_func(private=True)
    def mutant_copy(A: T.Buffer((T.int64(2),), "float32"), B: T.Buffer((T.int64(2),), "float32")):
        for i in range(T.int64(2)):
            B[i] = A[i]
'''


@lru_cache(maxsize=1)
def _kernel() -> tir.PrimFunc:
    return parse(_KERNEL_SOURCE)["mutant_copy"]


def _some_prim_func(mod: IRModule, choose: Choose) -> tuple[IRModule, str, tir.PrimFunc]:
    """A PrimFunc of the module (the small ``mutant_copy`` kernel, added, if none)."""
    funcs = [(n, f) for n, f in mod.prim_funcs() if _first_store(f.body) is not None]
    if funcs:
        name, func = _pick(sorted(funcs, key=lambda nf: nf[0]), choose)
        return mod, name, func
    return mod.update({"mutant_copy": _kernel()}), "mutant_copy", _kernel()


def _first_store(stmt: Any) -> tir.BufferStore | None:
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.BufferStore):
            return s
        if isinstance(s, tir.SeqStmt):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, tir.IfThenElse):
            stack.extend(x for x in (s.else_case, s.then_case) if x is not None)
        elif isinstance(s, tir.Block):
            stack.append(s.body)
        elif isinstance(s, (tir.For, tir.Allocate, tir.LetStmt)):
            stack.append(s.body)
    return None


def _replace_stmt(stmt: Any, target: Any, new: Any) -> Any:
    """``stmt`` with the statement object ``target`` replaced by ``new``."""
    if stmt is target:
        return new
    t = type(stmt)
    if t is tir.SeqStmt:
        parts = [_replace_stmt(s, target, new) for s in stmt.stmts]
        if any(a is not b for a, b in zip(parts, stmt.stmts)):
            return tir.SeqStmt(parts, span=stmt.span)
        return stmt
    if t is tir.IfThenElse:
        then = _replace_stmt(stmt.then_case, target, new)
        other = None if stmt.else_case is None else _replace_stmt(stmt.else_case, target, new)
        if then is stmt.then_case and other is stmt.else_case:
            return stmt
        return tir.IfThenElse(stmt.condition, then, other, span=stmt.span)
    if t in (tir.For, tir.Allocate, tir.LetStmt, tir.Block):
        body = _replace_stmt(stmt.body, target, new)
        if body is stmt.body:
            return stmt
        return replace(stmt, body=body)
    return stmt


def _with_prim_body(func: tir.PrimFunc, body: Any) -> tir.PrimFunc:
    return tir.PrimFunc(func.params, body, func.attrs, span=func.span)


# ---------------------------------------------------------------------------
# WF0xx: variables and scopes
# ---------------------------------------------------------------------------

@_mutation("WF001", "use a variable before its binding (or one never bound)")
def _use_before_def(mod: IRModule, choose: Choose) -> IRModule:
    mod, name, func, x = _anchor(mod, choose)
    later = [b for _, _, b in _top_bindings(func) if type(b.var) is Var]
    if later and choose(2) == 0:
        target = _pick(later, choose).var
    else:
        target = Var("ghost", x.struct_info)
    use = VarBinding(Var("early", target.struct_info), target)
    return _insert(mod, name, func, BindingBlock([use]), choose, at="start")


@_mutation("WF002", "bind the same variable twice (a copied binding)")
def _define_twice(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f) for n, f in mod.relax_functions() if _top_bindings(f)]
    if not cands:
        def build(x: Var) -> list[Binding]:
            v = Var("twice", x.struct_info)
            return [VarBinding(v, x), VarBinding(v, x)]
        return _insert_bindings(mod, build, choose)
    name, func = _pick(sorted(cands, key=lambda nf: nf[0]), choose)
    bi, ki, b = _pick(_top_bindings(func), choose)
    bindings = list(func.body.blocks[bi].bindings)
    bindings.insert(ki + 1, b)  # the very same binding again
    return mod.update({name: _replace_block(func, bi, bindings)})


@_mutation("WF003", "use a dataflow variable after its dataflow block")
def _leak_dataflow_var(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f, bi, b.var) for n, f in mod.relax_functions()
             for bi, ki, b in _top_bindings(f)
             if type(b.var) is DataflowVar and isinstance(f.body.blocks[bi], DataflowBlock)]
    if cands:
        name, func, bi, dv = _pick(cands, choose)
        blocks = list(func.body.blocks)
        blocks.insert(bi + 1, BindingBlock([VarBinding(Var("leak", dv.struct_info), dv)]))
        return mod.update({name: _with_body(func, blocks)})
    mod, name, func, x = _anchor(mod, choose)
    dv = DataflowVar("lv", x.struct_info)
    blocks = [DataflowBlock([VarBinding(dv, x)]),
              BindingBlock([VarBinding(Var("leak", dv.struct_info), dv)]), *func.body.blocks]
    return mod.update({name: _with_body(func, blocks)})


@_mutation("WF004", "bind a dataflow variable outside any dataflow block")
def _dataflow_var_outside(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(mod, lambda x: [VarBinding(DataflowVar("lv", x.struct_info), x)],
                            choose)


@_mutation("WF005", "use a variable bound inside an if-branch after the if")
def _branch_var_escapes(mod: IRModule, choose: Choose) -> IRModule:
    for name, func in sorted(mod.relax_functions(), key=lambda nf: nf[0]):
        for bi, ki, b in _top_bindings(func):
            if isinstance(b.value, If):
                inner = [c for br in (b.value.true_branch, b.value.false_branch)
                         for blk in br.blocks for c in blk.bindings]
                if inner:
                    v = _pick(inner, choose).var
                    bindings = list(func.body.blocks[bi].bindings)
                    bindings.insert(ki + 1, VarBinding(Var("escaped", v.struct_info), v))
                    return mod.update({name: _replace_block(func, bi, bindings)})

    def build(x: Var) -> list[Binding]:
        t = Var("inner", x.struct_info)
        r = Var("r", x.struct_info)
        return [VarBinding(r, _trivial_if(x, [VarBinding(t, x)], t)),
                VarBinding(Var("escaped", t.struct_info), t)]
    return _insert_bindings(mod, build, choose)


@_mutation("WF006", "use a symbolic variable nothing defines")
def _symbolic_use_before_def(mod: IRModule, choose: Choose) -> IRModule:
    k = tir.Var("k_undefined")
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("s", ShapeStructInfo([k])), ShapeExpr([k]))], choose)


@_mutation("WF007", "share one symbolic variable between two functions")
def _symbolic_shared(mod: IRModule, choose: Choose) -> IRModule:
    syms = []
    for _, func in sorted(mod.relax_functions(), key=lambda nf: nf[0]):
        for p in func.params:
            s = p.struct_info
            if isinstance(s, TensorStructInfo) and s.shape is not None:
                syms.extend(d for d in s.shape if isinstance(d, tir.Var))
    if syms:
        n = _pick(syms, choose)
        funcs = {}
    else:  # two new functions sharing a fresh one
        n = tir.Var("n")
        a = Var("a", TensorStructInfo((n,), "float32"))
        funcs = {"mutant_a": _function([a], SeqExpr([], a), "mutant_a",
                                       pure=mod.phase < Phase.BUILD)}
    b = Var("b", TensorStructInfo((n,), "float32"))
    funcs["mutant_shared"] = _function([b], SeqExpr([], b), "mutant_shared",
                                       pure=mod.phase < Phase.BUILD)
    return mod.update(funcs)


@_mutation("WF008", "reuse another function's parameter variable")
def _param_shared(mod: IRModule, choose: Choose) -> IRModule:
    mod, _, func, x = _anchor(mod, choose)
    copy = _function([x], SeqExpr([], x), "mutant_copy_params", pure=mod.phase < Phase.BUILD)
    return mod.update({"mutant_copy_params": copy})


# ---------------------------------------------------------------------------
# WF1xx: normal form
# ---------------------------------------------------------------------------

@_mutation("WF100", "bind a TIR expression as if it were a Relax value")
def _malformed(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("bad", ObjectStructInfo()), tir.IntImm(1))], choose)


@_mutation("WF101", "nest a call inside another call's operands")
def _not_anf(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
             for bi, ki, b in _top_bindings(f)
             if isinstance(b.value, Call) and isinstance(b.value.op, Op)
             and any(isinstance(a, Var) and isinstance(a.struct_info, TensorStructInfo)
                     for a in b.value.args)]
    if cands:
        name, func, bi, ki, b = _pick(cands, choose)
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
        return mod.update({name: _replace_block(func, bi, bindings)})

    def build(x: Var) -> list[Binding]:
        inner = Call(Op("relax.negative"), [x], struct_info=x.struct_info)
        return [VarBinding(Var("nested", x.struct_info),
                           Call(Op("relax.negative"), [inner], struct_info=x.struct_info))]
    return _insert_bindings(mod, build, choose)


@_mutation("WF102", "bind a SeqExpr (a body) as a value")
def _misplaced_seq(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("seq", x.struct_info), SeqExpr([], x))], choose)


@_mutation("WF103", "use a PrimFunc inline as a Relax value")
def _inline_prim_func(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("kernel", ObjectStructInfo()), _kernel())], choose)


@_mutation("WF104", "put an if inside a dataflow block")
def _if_in_dataflow(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("r", x.struct_info), _trivial_if(x, [], x))], choose,
        dataflow=True)


# ---------------------------------------------------------------------------
# WF2xx: purity
# ---------------------------------------------------------------------------

@_mutation("WF201", "call a packed function (impure) inside a dataflow block")
def _impure_in_dataflow(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(mod, lambda x: [VarBinding(Var("p", x.struct_info), _packed_call(x))],
                            choose, dataflow=True)


@_mutation("WF202", "call a packed function in a pure function")
def _impure_in_pure(mod: IRModule, choose: Choose) -> IRModule:
    pure = [(n, f) for n, f in mod.relax_functions()
            if f.is_pure and not f.attrs.get(FORCE_PURE) and _tensor_param(f) is not None]
    if pure:
        name, func = _pick(sorted(pure, key=lambda nf: nf[0]), choose)
        x = _tensor_param(func)
        block = BindingBlock([VarBinding(Var("p", x.struct_info), _packed_call(x))])
        return _insert(mod, name, func, block, choose)
    x = Var("x", TensorStructInfo((2,), "float32"))
    p = Var("p", x.struct_info)
    func = _function([x], SeqExpr([BindingBlock([VarBinding(p, _packed_call(x))])], p),
                     "mutant_pure", pure=True)
    return mod.update({"mutant_pure": func})


@_mutation("WF203", "mark an impure function relax.force_pure")
def _force_pure_on_impure(mod: IRModule, choose: Choose) -> IRModule:
    name, func = _entry(mod, choose)
    attrs = {**func.attrs, FORCE_PURE: True}
    return mod.update({name: _with_body(func, list(func.body.blocks), pure=False, attrs=attrs)})


# ---------------------------------------------------------------------------
# WF3xx: module-level names
# ---------------------------------------------------------------------------

def _global_uses(func: Function) -> set[str]:
    return {g.name_hint for g in collect_exprs(func, (GlobalVar,))}


@_mutation("WF301", "delete a function that is still called (or call a missing one)")
def _undefined_global(mod: IRModule, choose: Choose) -> IRModule:
    called = set()
    for _, func in mod.relax_functions():
        called |= _global_uses(func)
    called = sorted(n for n in called if n in mod.functions and n != "main")
    if called and choose(2) == 0:
        return mod.remove(_pick(called, choose))

    def build(x: Var) -> list[Binding]:
        call = Call(GlobalVar("missing_function"), [x], struct_info=ObjectStructInfo())
        return [VarBinding(Var("v", ObjectStructInfo()), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("WF302", "set a global_symbol different from the function's name")
def _global_symbol_mismatch(mod: IRModule, choose: Choose) -> IRModule:
    name, func = _entry(mod, choose)
    return mod.update({name: func.with_attr("global_symbol", name + "_renamed")})


# ---------------------------------------------------------------------------
# WF4xx: struct info
# ---------------------------------------------------------------------------

@_mutation("WF401", "bind a variable without struct info")
def _missing_sinfo(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(mod, lambda x: [VarBinding(Var("untyped", None), x)], choose)


@_mutation("WF402", "annotate a call's result with a wrong dtype")
def _call_annotation(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
             for bi, ki, b in _top_bindings(f)
             if isinstance(b.value, Call) and isinstance(b.value.op, Op)
             and isinstance(b.var.struct_info, TensorStructInfo)]
    if cands:
        name, func, bi, ki, b = _pick(cands, choose)
        cls = type(b.var)
        bad = VarBinding(cls("wrong", _other_sinfo(b.var.struct_info)), b.value)
        bindings = list(func.body.blocks[bi].bindings)
        bindings.insert(ki + 1, bad)
        return mod.update({name: _replace_block(func, bi, bindings)})

    def build(x: Var) -> list[Binding]:
        call = call_op("relax.stop_fusion", x) if mod.phase < Phase.LOWERING else \
            call_op("relax.call_dps_packed", ExternFunc("phasec.testing.scale2_dps"),
                    Tuple([x]), sinfo_args=[x.struct_info])
        return [VarBinding(Var("wrong", _other_sinfo(x.struct_info)), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("WF403", "declare a return struct info the body contradicts")
def _return_mismatch(mod: IRModule, choose: Choose) -> IRModule:
    name, func = _entry(mod, choose)
    ret = _other_sinfo(func.ret_struct_info)
    return mod.update({name: _with_body(func, list(func.body.blocks), ret=ret)})


@_mutation("WF404", "annotate a variable with struct info its value contradicts")
def _binding_value_mismatch(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(
        mod, lambda x: [VarBinding(Var("wrong", _other_sinfo(x.struct_info)), x)], choose)


@_mutation("WF405", "call an operator with the wrong number of operands")
def _call_signature(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = Call(Op("relax.add"), [x], struct_info=x.struct_info)  # add takes two
        return [VarBinding(Var("v", x.struct_info), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("WF406", "call a PrimFunc with call_tir and mismatched buffers")
def _call_tir_mismatch(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
             for bi, ki, b in _top_bindings(f)
             if isinstance(b.value, Call) and isinstance(b.value.op, Op)
             and b.value.op.name == "relax.call_tir" and b.value.sinfo_args
             and isinstance(b.value.sinfo_args[0], TensorStructInfo)]
    if cands:
        name, func, bi, ki, b = _pick(cands, choose)
        call = b.value
        wrong = _other_sinfo(call.sinfo_args[0])
        new = Call(call.op, call.args, call.attrs, (wrong, *call.sinfo_args[1:]),
                   struct_info=wrong, span=call.span)
        bindings = list(func.body.blocks[bi].bindings)
        bindings[ki] = VarBinding(type(b.var)(b.var.name_hint, wrong), new, span=b.span)
        # the old variable's uses now refer to nothing: keep it defined
        bindings.insert(ki, b)
        return mod.update({name: _replace_block(func, bi, bindings)})
    mod = mod.update({"mutant_copy": _kernel()}) if "mutant_copy" not in mod else mod

    def build(x: Var) -> list[Binding]:
        out = TensorStructInfo((5,), "int32")  # the kernel writes float32[2]
        call = Call(Op("relax.call_tir"), [GlobalVar("mutant_copy"), Tuple([x])],
                    sinfo_args=[out], struct_info=out)
        return [VarBinding(Var("y", out), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("WF407", "call an operator that is not registered")
def _unknown_op(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = Call(Op("relax.no_such_operator"), [x], struct_info=x.struct_info)
        return [VarBinding(Var("v", x.struct_info), call)]
    return _insert_bindings(mod, build, choose)


# ---------------------------------------------------------------------------
# WF5xx: TIR
# ---------------------------------------------------------------------------

@_mutation("WF501", "index a buffer with a loop variable that is not in scope")
def _tir_var_out_of_scope(mod: IRModule, choose: Choose) -> IRModule:
    mod, name, func = _some_prim_func(mod, choose)
    store = _first_store(func.body)
    stray = tir.Var("i_out_of_scope")
    new = tir.BufferStore(store.buffer, store.value, (stray,) * len(store.indices),
                          span=store.span)
    if not store.indices:  # a 0-d buffer: put the stray variable in the value
        value = tir.Cast(store.buffer.dtype, stray)
        new = tir.BufferStore(store.buffer, value, (), span=store.span)
    return mod.update({name: _with_prim_body(func, _replace_stmt(func.body, store, new))})


@_mutation("WF502", "store into a buffer the kernel does not own")
def _buffer_out_of_scope(mod: IRModule, choose: Choose) -> IRModule:
    mod, name, func = _some_prim_func(mod, choose)
    store = _first_store(func.body)
    stray = tir.Buffer("stray", store.buffer.shape, store.buffer.dtype)
    new = tir.BufferStore(stray, store.value, store.indices, span=store.span)
    return mod.update({name: _with_prim_body(func, _replace_stmt(func.body, store, new))})


@_mutation("WF503", "define a loop variable again inside its own loop")
def _tir_var_redefined(mod: IRModule, choose: Choose) -> IRModule:
    mod, name, func = _some_prim_func(mod, choose)
    loops = []
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.For):
            loops.append(s)
        for field in ("body", "then_case", "else_case"):
            child = getattr(s, field, None)
            if isinstance(child, tir.Stmt):
                stack.append(child)
        if isinstance(s, tir.SeqStmt):
            stack.extend(s.stmts)
    if loops:
        loop = _pick(loops, choose)
        inner = tir.For(loop.loop_var, tir.IntImm(0), tir.IntImm(1), "serial", loop.body)
        new = tir.For(loop.loop_var, loop.min, loop.extent, loop.kind, inner, span=loop.span)
        return mod.update({name: _with_prim_body(func, _replace_stmt(func.body, loop, new))})
    v = tir.Var("i")
    body = tir.For(v, 0, 1, "serial", tir.For(v, 0, 1, "serial", func.body))
    return mod.update({name: _with_prim_body(func, body)})


# ---------------------------------------------------------------------------
# Phase invariants
# ---------------------------------------------------------------------------

@_mutation("PH101", "leave a nested function after lambda lifting", Phase.OPTIMIZATION)
def _nested_function(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        a = Var("a", x.struct_info)
        inner = Function([a], SeqExpr([], a), None, mod.phase < Phase.BUILD, {})
        return [VarBinding(Var("inner", inner.struct_info), inner)]
    return _insert_bindings(mod, build, choose)


@_mutation("PH201", "leave a dataflow block in the lowering phase", Phase.LOWERING)
def _dataflow_block(mod: IRModule, choose: Choose) -> IRModule:
    return _insert_bindings(mod, lambda x: [VarBinding(Var("gv", x.struct_info), x)], choose,
                            dataflow=True)


@_mutation("PH202", "leave a high-level operator in the lowering phase", Phase.LOWERING)
def _high_level_op(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = call_op("relax.stop_fusion", x)
        return [VarBinding(Var("v", call.struct_info), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("PH301", "leave a pure function (no force_pure) in the build phase", Phase.BUILD)
def _pure_function(mod: IRModule, choose: Choose) -> IRModule:
    cands = [(n, f) for n, f in mod.relax_functions()
             if f.attrs.get(FORCE_PURE) and f.is_pure]
    if cands:
        name, func = _pick(sorted(cands, key=lambda nf: nf[0]), choose)
        return mod.update({name: func.without_attr(FORCE_PURE)})
    x = Var("x", TensorStructInfo((2,), "float32"))
    return mod.update({"mutant_pure": _function([x], SeqExpr([], x), "mutant_pure", pure=True)})


@_mutation("PH302", "leave R.call_pure_packed in the build phase", Phase.BUILD)
def _pure_call(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = call_op("relax.call_pure_packed", ExternFunc("phasec.testing.scale2"), x,
                       sinfo_args=[x.struct_info])
        return [VarBinding(Var("p", x.struct_info), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("PH303", "leave R.call_dps_packed in the build phase", Phase.BUILD)
def _call_tir_in_build(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = call_op("relax.call_dps_packed", ExternFunc("phasec.testing.scale2_dps"),
                       Tuple([x]), sinfo_args=[x.struct_info])
        return [VarBinding(Var("y", x.struct_info), call)]
    return _insert_bindings(mod, build, choose)


@_mutation("PH304", "leave a memory builtin in the build phase", Phase.BUILD)
def _memory_builtin(mod: IRModule, choose: Choose) -> IRModule:
    def build(x: Var) -> list[Binding]:
        call = call_op("relax.builtin.alloc_tensor", (2,), dtype="float32")
        return [VarBinding(Var("alloc", call.struct_info), call)]
    return _insert_bindings(mod, build, choose)
