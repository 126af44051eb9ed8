"""Editing helpers for the rules' injectors (:meth:`Rule.inject`).

Each rule can make a copy of a well-formed module with exactly the kind of
mistake it describes, the way a faulty pass would make it
(:mod:`phasec.testing.mutations` turns these into mutation operators). The
injectors share the edits below: pick a function or a binding, insert a
block, swap a statement of a PrimFunc. Every choice goes through a
``choose(n) -> int`` callback (an index in ``range(n)``), so hypothesis can
drive and shrink it; :func:`first_choice` always picks the first option.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, ExternFunc, Function, GlobalVar, If,
    SeqExpr, Var,
)
from phasec.ir.module import IRModule
from phasec.ir.node import replace
from phasec.ir.phase import Phase
from phasec.ir.struct_info import StructInfo, TensorStructInfo
from phasec.ir.visitor import collect_exprs

__all__ = [
    "Choose", "first_choice", "pick", "entry_function", "tensor_param", "anchor", "new_function",
    "with_body", "insert_block", "insert_bindings", "top_bindings", "replace_block",
    "conflicting_sinfo", "packed_call", "trivial_if", "copy_kernel", "some_prim_func",
    "first_store", "replace_stmt", "with_prim_body", "global_uses",
]

#: ``choose(n)`` -> an index in ``range(n)``: how an injector makes its choices.
Choose = Callable[[int], int]


def first_choice(n: int) -> int:
    """The default ``choose``: always the first option."""
    return 0


def pick(items: list, choose: Choose) -> Any:
    """One of ``items`` (not empty), as ``choose`` says."""
    return items[choose(len(items)) % len(items)] if len(items) > 1 else items[0]


def entry_function(mod: IRModule, choose: Choose) -> tuple[str, Function]:
    """A Relax function of the module (main preferred first)."""
    names = sorted((n for n, _ in mod.relax_functions()), key=lambda n: (n != "main", n))
    if not names:
        raise ValueError("the module has no Relax function to mutate")
    name = pick(names, choose)
    return name, mod[name]


def tensor_param(func: Function) -> Var | None:
    """A tensor parameter of ``func`` (float32 preferred), or None."""
    params = [p for p in func.params if isinstance(p.struct_info, TensorStructInfo)]
    floats = [p for p in params if p.struct_info.dtype == "float32"]
    return (floats or params or [None])[0]


def anchor(mod: IRModule, choose: Choose) -> tuple[IRModule, str, Function, Var]:
    """A function with a tensor parameter to put new bindings in (a new
    function ``mutant`` when there is none)."""
    cands = [(n, f) for n, f in mod.relax_functions() if tensor_param(f) is not None]
    cands.sort(key=lambda nf: (nf[0] != "main", nf[0]))
    if cands:
        name, func = pick(cands, choose)
        return mod, name, func, tensor_param(func)
    x = Var("x", TensorStructInfo((2,), "float32"))
    func = new_function([x], SeqExpr([], x), "mutant", pure=mod.phase < Phase.BUILD)
    mod = mod.update({"mutant": func})
    return mod, "mutant", func, x


def new_function(params: list[Var], body: SeqExpr, name: str | None, pure: bool = True,
                 attrs: dict | None = None) -> Function:
    """A Relax function, exported under ``name`` when it has one."""
    attrs = dict(attrs or {})
    if name is not None:
        attrs.setdefault("global_symbol", name)
    return Function(params, body, None, pure, attrs)


def with_body(func: Function, blocks: list, body: Any = None, **changes: Any) -> Function:
    """``func`` with these blocks (and result ``body``); ``changes`` may give a new
    ``ret`` struct info, ``pure`` flag or ``attrs``."""
    seq = SeqExpr(blocks, func.body.body if body is None else body, span=func.body.span)
    return Function(func.params, seq, changes.get("ret", func.ret_struct_info),
                    changes.get("pure", func.is_pure), changes.get("attrs", func.attrs),
                    span=func.span)


def insert_block(mod: IRModule, name: str, func: Function, block: BindingBlock,
                 choose: Choose, at: str | None = None) -> IRModule:
    """Insert a new block at the start or the end of ``func``'s body."""
    blocks = list(func.body.blocks)
    where = at or ("start", "end")[choose(2) % 2]
    if where == "start":
        blocks.insert(0, block)
    else:
        blocks.append(block)
    return mod.update({name: with_body(func, blocks)})


def insert_bindings(mod: IRModule, build: Callable[[Var], list[Binding]], choose: Choose,
                    dataflow: bool = False, at: str | None = None) -> IRModule:
    """Insert ``build(param)`` as a new block of a function with a tensor param."""
    mod, name, func, param = anchor(mod, choose)
    block_cls = DataflowBlock if dataflow else BindingBlock
    return insert_block(mod, name, func, block_cls(build(param)), choose, at)


def top_bindings(func: Function) -> list[tuple[int, int, Binding]]:
    """``(block index, binding index, binding)`` for the bindings of ``func``'s body."""
    return [(bi, ki, b) for bi, block in enumerate(func.body.blocks)
            for ki, b in enumerate(block.bindings)]


def replace_block(func: Function, index: int, bindings: list[Binding]) -> Function:
    """``func`` with the bindings of block ``index`` replaced."""
    blocks = list(func.body.blocks)
    blocks[index] = type(blocks[index])(bindings, span=blocks[index].span)
    return with_body(func, blocks)


def conflicting_sinfo(sinfo: StructInfo | None) -> StructInfo:
    """Struct info that provably conflicts with ``sinfo``."""
    if isinstance(sinfo, TensorStructInfo):
        dtype = "int32" if sinfo.dtype != "int32" else "float32"
        return TensorStructInfo(sinfo.shape, dtype, sinfo.ndim)
    return TensorStructInfo((), "float32")


def packed_call(x: Var) -> Call:
    """An (impure) packed call of phasec's test function on ``x``."""
    return Call(ExternFunc("phasec.testing.scale2"), [x], sinfo_args=[x.struct_info],
                struct_info=x.struct_info)


def _true() -> Constant:
    return Constant(np.array(True))


def trivial_if(x: Var, then_bindings: list[Binding], then_result: Any) -> If:
    """``if True: then_bindings; then_result else: x``."""
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
def copy_kernel() -> tir.PrimFunc:
    """A small PrimFunc copying one buffer into another (``mutant_copy``)."""
    # (the parser is imported here: the verifier does not need it otherwise,
    # and it costs ~0.2 s to import)
    from phasec.script.parser import parse

    return parse(_KERNEL_SOURCE)["mutant_copy"]


def some_prim_func(mod: IRModule, choose: Choose) -> tuple[IRModule, str, tir.PrimFunc]:
    """A PrimFunc of the module (the small ``mutant_copy`` kernel, added, if none)."""
    funcs = [(n, f) for n, f in mod.prim_funcs() if first_store(f.body) is not None]
    if funcs:
        name, func = pick(sorted(funcs, key=lambda nf: nf[0]), choose)
        return mod, name, func
    return mod.update({"mutant_copy": copy_kernel()}), "mutant_copy", copy_kernel()


def first_store(stmt: Any) -> tir.BufferStore | None:
    """The first BufferStore in ``stmt``, or None."""
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.BufferStore):
            return s
        if isinstance(s, tir.SeqStmt):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, tir.IfThenElse):
            stack.extend(x for x in (s.else_case, s.then_case) if x is not None)
        elif isinstance(getattr(s, "body", None), tir.Stmt):  # (loops, lets, attributes...)
            stack.append(s.body)
    return None


def replace_stmt(stmt: Any, target: Any, new: Any) -> Any:
    """``stmt`` with the statement object ``target`` replaced by ``new``."""
    if stmt is target:
        return new
    t = type(stmt)
    if t is tir.SeqStmt:
        parts = [replace_stmt(s, target, new) for s in stmt.stmts]
        if any(a is not b for a, b in zip(parts, stmt.stmts)):
            return tir.seq(parts, span=stmt.span)
        return stmt
    if t is tir.IfThenElse:
        then = replace_stmt(stmt.then_case, target, new)
        other = None if stmt.else_case is None else replace_stmt(stmt.else_case, target, new)
        if then is stmt.then_case and other is stmt.else_case:
            return stmt
        return tir.IfThenElse(stmt.condition, then, other, span=stmt.span)
    if isinstance(getattr(stmt, "body", None), tir.Stmt):  # (loops, lets, attributes, blocks...)
        body = replace_stmt(stmt.body, target, new)
        if body is stmt.body:
            return stmt
        return replace(stmt, body=body)
    return stmt


def with_prim_body(func: tir.PrimFunc, body: Any) -> tir.PrimFunc:
    """``func`` with a new body."""
    return tir.PrimFunc(func.params, body, func.attrs, span=func.span)


def global_uses(func: Function) -> set[str]:
    """The names of the GlobalVars ``func`` refers to."""
    return {g.name_hint for g in collect_exprs(func, (GlobalVar,))}
