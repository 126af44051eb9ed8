"""Minimized reproducers for a pass that changed results.

Once a pass is blamed (by ``ValidateResults``, ``--validate-each`` or
``phasec bisect``), :func:`minimize_change` shrinks the module the pass ran
on while the discrepancy persists, keeping it well-formed at its phase (the
verifier checks every candidate): the entry function is cut after each of
its bindings in turn (the earliest cut that still shows the change wins),
bindings the result does not use are dropped, parameters nothing uses are
removed with their inputs, large constants of the entry function become
parameters (their values go to the inputs file, so the module prints in a
few lines), and functions nothing calls any more are removed.
:func:`save_minimized` writes it in the fuzzer's reproducer format
(:mod:`phasec.testing.reproducers`: the module as TVMScript with its
``# sequence:`` header, its inputs as ``.npz``, the commands that replay it).
Shapes are not shrunk (static shapes are part of the kernels a lowered
module holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from phasec import interp, verifier
from phasec.interp import KernelRunner
from phasec.ir import Constant, DataflowVar, GlobalVar, IRModule, Var, collect_exprs
from phasec.ir.expr import BindingBlock, Function, SeqExpr, VarBinding
from phasec.ir.visitor import ExprMutator
from phasec.transform import Pass, PassContext, Sequential
from phasec.transform.results import Tolerance, compare_outputs, copy_value, rounding_length
from phasec.testing.properties import Failure
from phasec.testing.reproducers import SavedFailure, save_reproducer

__all__ = ["Minimized", "minimize_change", "save_minimized"]

#: constants of the entry function with more elements than this become parameters
LIFT_CONSTANTS_ABOVE = 8


@dataclass
class Minimized:
    """The smallest module found on which ``pass_`` still changes results."""

    module: IRModule
    args: tuple
    pass_: Pass
    problem: str
    candidates_tried: int


def _changes(mod: IRModule, args: Sequence[Any], pass_: Pass, tol: Tolerance, entry: str,
             runner: KernelRunner | None) -> str | None:
    """How ``pass_`` changes ``mod``'s results (None: it does not, or the
    candidate is not a valid reproducer)."""
    if any(d.is_error for d in verifier.check(mod)):
        return None
    try:
        before = interp.run(mod, *(copy_value(a) for a in args), entry=entry,
                            kernel_runner=runner)
    except Exception:  # noqa: BLE001 - a candidate the interpreter cannot run is no reproducer
        return None
    try:
        with PassContext(opt_level=3):
            after_mod = pass_(mod)
        after = interp.run(after_mod, *(copy_value(a) for a in args), entry=entry,
                           kernel_runner=runner)
    except Exception as exc:  # noqa: BLE001 - failing after the pass is a change too
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    problem = compare_outputs(after, before, None, tol, rounding_length(mod))
    return problem.describe() if problem is not None else None


def _used_vars(expr: Any) -> set[int]:
    return {id(v) for v in collect_exprs(expr, frozenset((Var, DataflowVar)))}


def _plain_blocks(blocks: Sequence[BindingBlock]) -> list[BindingBlock] | None:
    """The blocks as ordinary binding blocks, dataflow variables made
    ordinary ones (so that any of them can be returned)."""
    mutator = ExprMutator()
    out: list[BindingBlock] = []
    for block in blocks:
        bindings = []
        for b in block.bindings:
            if not isinstance(b, VarBinding):
                return None
            var = b.var
            if isinstance(var, DataflowVar):
                var = Var(var.name_hint, var.struct_info, span=var.span)
                mutator.var_remap[b.var] = var
            bindings.append(VarBinding(var, mutator.visit_expr(b.value), span=b.span))
        out.append(BindingBlock(tuple(bindings), span=block.span))
    return out


def _cut(func: Function, block_index: int, binding_index: int) -> Function | None:
    """``func`` returning the var of one binding, with the bindings it does
    not need dropped (None when that var cannot be returned)."""
    blocks = func.body.blocks
    target = blocks[block_index].bindings[binding_index]
    if not isinstance(target, VarBinding):
        return None
    last = blocks[block_index]
    kept: list[BindingBlock] | None = [*blocks[:block_index],
                                       type(last)(last.bindings[:binding_index + 1],
                                                  span=last.span)]
    result: Any = target.var
    if isinstance(target.var, DataflowVar):
        kept = _plain_blocks(kept)
        if kept is None:
            return None
        result = kept[-1].bindings[-1].var
    return _drop_dead(Function(func.params, SeqExpr(kept, result), result.struct_info,
                               func.is_pure, func.attrs, span=func.span))


def _drop_dead(func: Function) -> Function:
    live = _used_vars(func.body.body)
    blocks: list[BindingBlock] = []
    for block in reversed(func.body.blocks):
        kept = []
        for b in reversed(block.bindings):
            if isinstance(b, VarBinding) and id(b.var) not in live:
                continue
            kept.append(b)
            live |= _used_vars(b.value) if isinstance(b, VarBinding) else _used_vars(b)
        blocks.append(type(block)(tuple(reversed(kept)), span=block.span))
    return Function(func.params, SeqExpr(list(reversed(blocks)), func.body.body),
                    func.ret_struct_info, func.is_pure, func.attrs, span=func.span)


def _drop_unused(mod: IRModule, entry: str, args: tuple) -> tuple[IRModule, tuple]:
    """Remove unused parameters of ``entry`` (with their arguments) and
    functions nothing refers to."""
    func = mod[entry]
    used = _used_vars(func.body)
    keep = [i for i, p in enumerate(func.params) if id(p) in used]
    if len(keep) != len(func.params):
        func = Function([func.params[i] for i in keep], func.body, func.ret_struct_info,
                        func.is_pure, func.attrs, span=func.span)
        mod = mod.update_func(entry, func)
        args = tuple(args[i] for i in keep)
    reachable, todo = {entry}, [entry]
    while todo:
        name = todo.pop()
        f = mod[name]
        if isinstance(f, Function):
            for g in collect_exprs(f, frozenset((GlobalVar,))):
                if g.name_hint in mod and g.name_hint not in reachable:
                    reachable.add(g.name_hint)
                    todo.append(g.name_hint)
    dead = [n for n in mod if n not in reachable]
    return (mod.remove(*dead) if dead else mod), args


class _Lift(ExprMutator):
    def __init__(self, consts: list[Constant]) -> None:
        super().__init__()
        self.params = {id(c): Var(f"c{k}", c.struct_info) for k, c in enumerate(consts)}

    def visit_constant_(self, expr: Constant) -> Any:
        return self.params.get(id(expr), expr)


def _lift_constants(mod: IRModule, entry: str, args: tuple) -> tuple[IRModule, tuple]:
    """Large constants used by ``entry`` become its last parameters."""
    func = mod[entry]
    consts = [c for c in collect_exprs(func.body, frozenset((Constant,)))
              if np.asarray(c.data).size > LIFT_CONSTANTS_ABOVE and c.struct_info is not None]
    if not consts:
        return mod, args
    lift = _Lift(consts)
    body = lift.visit_expr(func.body)
    lifted = Function([*func.params, *lift.params.values()], body, func.ret_struct_info,
                      func.is_pure, func.attrs, span=func.span)
    return mod.update_func(entry, lifted), (*args, *(np.asarray(c.data) for c in consts))


def minimize_change(before: IRModule, pass_: Pass, args: Sequence[Any], *,
                    entry: str = "main", tolerance: Tolerance | None = None,
                    kernel_runner: KernelRunner | None = None) -> Minimized:
    """Shrink ``before`` (the module ``pass_`` ran on) while ``pass_`` still
    changes its results on ``args``; see the module docstring."""
    tol = tolerance or Tolerance()
    args = tuple(args)
    best, tried = before, 0
    problem = _changes(before, args, pass_, tol, entry, kernel_runner)
    if problem is None:
        raise ValueError(f"{pass_.info.name} does not change the results of this module")
    func = before[entry]
    positions = [(i, j) for i, block in enumerate(func.body.blocks)
                 for j in range(len(block.bindings))]
    for i, j in positions:  # the earliest cut that still shows the change
        cut = _cut(func, i, j)
        if cut is None:
            continue
        candidate, cand_args = _drop_unused(before.update_func(entry, cut), entry, args)
        tried += 1
        found = _changes(candidate, cand_args, pass_, tol, entry, kernel_runner)
        if found is not None:
            best, args, problem = candidate, cand_args, found
            break
    else:
        candidate, cand_args = _drop_unused(before.update_func(entry, _drop_dead(func)),
                                            entry, args)
        found = _changes(candidate, cand_args, pass_, tol, entry, kernel_runner)
        if found is not None:
            best, args, problem = candidate, cand_args, found
    lifted, lifted_args = _lift_constants(best, entry, args)
    if lifted is not best:
        tried += 1
        found = _changes(lifted, lifted_args, pass_, tol, entry, kernel_runner)
        if found is not None:
            best, args, problem = lifted, lifted_args, found
    return Minimized(best, args, pass_, problem, tried)


def save_minimized(folder: str | Path, found: Minimized, number: int = 1) -> SavedFailure:
    """Write the reproducer (``NNN-results-PASS.py`` and ``.npz``) in the
    fuzzer's format: ``phasec opt FILE --passes PASS`` and ``phasec fuzz
    --replay FILE`` replay it (a pass of your own must be registered)."""
    spec = found.pass_.spec()
    failure = Failure("results", f"{spec} changes the results: {found.problem}", spec, 0,
                      found.module, None)
    return save_reproducer(Path(folder), number, failure, found.module, Sequential([found.pass_]),
                           found.args)
