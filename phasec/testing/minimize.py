"""Minimized reproducers for a pass that changed results.

Once a pass is blamed (by ``ValidateResults``, ``--validate-each`` or
``phasec bisect``), :func:`minimize_change` shrinks the module the pass ran
on while the discrepancy persists, keeping it well-formed at its phase (the
verifier checks every candidate): the entry function is cut after each of
its bindings in turn (the earliest cut that still shows the change wins),
bindings the result does not use are dropped, parameters nothing uses are
removed with their inputs, large constants of the entry function become
parameters (their values go to the inputs file, so the module prints in a
few lines), and functions nothing calls any more are removed; kernels are
simplified (:func:`~phasec.testing.shrink.simplify_kernel`).

Shapes are shrunk where no kernel exists yet: given the module the pipeline
started from and the passes before the blamed one
(:func:`minimize_stage_change`), that module is cut at both ends (bindings
before the miscompiled part become parameters), its constants lifted and
its dimensions made small (:func:`~phasec.testing.shrink.shape_candidates`),
each candidate run through those passes; the module the blamed pass sees,
kernels included, is re-derived from the smallest one.
:func:`save_minimized` writes it in the fuzzer's reproducer format
(:mod:`phasec.testing.reproducers`: the module as TVMScript with its
``# sequence:`` header, its inputs as ``.npz``, the commands that replay it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from phasec.transform.results import (
    Tolerance, compare_outputs, copy_value, rounding_length, validation_inputs,
)
from phasec.testing.properties import Failure
from phasec.testing.reproducers import SavedFailure, save_reproducer
from phasec.testing.shrink import shape_candidates, simplify_kernel

__all__ = ["Minimized", "minimize_change", "minimize_stage_change", "save_minimized",
           "describe_saved"]

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
        # the block stays a dataflow block (a pass may only look inside
        # those): only the returned var becomes an output
        result = Var(target.var.name_hint, target.var.struct_info, span=target.var.span)
        kept[-1] = type(last)((*last.bindings[:binding_index],
                               VarBinding(result, target.value, span=target.span)),
                              span=last.span)
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


def _lifted_if_still_failing(mod: IRModule, args: tuple, entry: str, check: Check,
                             problem: str | None) -> tuple[IRModule, tuple, str | None, int]:
    """``mod`` with its large constants made parameters (:func:`_lift_constants`)
    when it still shows the problem; also the number of checks run (0 or 1)."""
    lifted, lifted_args = _lift_constants(mod, entry, args)
    if lifted is mod:
        return mod, args, problem, 0
    found = check(lifted, lifted_args)
    return (lifted, lifted_args, found, 1) if found is not None else (mod, args, problem, 1)


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


Check = Callable[[IRModule, tuple], "str | None"]


def _smallest_cut(mod: IRModule, args: tuple, entry: str,
                  check: Check) -> tuple[IRModule, tuple, str, int] | None:
    """The earliest cut of ``entry`` (unused parameters and functions
    dropped) on which ``check`` still finds the problem, with the problem
    and the candidates tried; None when no cut shows it."""
    func = mod[entry]
    tried = 0
    for i, block in enumerate(func.body.blocks):
        for j in range(len(block.bindings)):
            cut = _cut(func, i, j)
            if cut is None:
                continue
            candidate, cand_args = _drop_unused(mod.update_func(entry, cut), entry, args)
            tried += 1
            found = check(candidate, cand_args)
            if found is not None:
                return candidate, cand_args, found, tried
    candidate, cand_args = _drop_unused(mod.update_func(entry, _drop_dead(func)), entry, args)
    found = check(candidate, cand_args)
    return (candidate, cand_args, found, tried + 1) if found is not None else None


def _as_parameter(mod: IRModule, entry: str, args: tuple, var: Var,
                  seed: int) -> tuple[IRModule, tuple] | None:
    """``entry`` with the binding of ``var`` removed and ``var`` a new last
    parameter (its input drawn, seeded), the bindings it made dead dropped."""
    func = mod[entry]
    param = Var(var.name_hint, var.struct_info, span=var.span)
    if param.name_hint in {p.name_hint for p in func.params}:
        return None
    mutator = ExprMutator()
    mutator.var_remap[var] = param
    blocks = []
    for block in func.body.blocks:
        kept = [b for b in block.bindings if not (isinstance(b, VarBinding) and b.var is var)]
        blocks.append(type(block)(tuple(kept), span=block.span))
    body = mutator.visit_expr(SeqExpr(blocks, func.body.body))
    if isinstance(body.body, DataflowVar):
        return None
    new = _drop_dead(Function([*func.params, param], body, func.ret_struct_info, func.is_pure,
                              func.attrs, span=func.span))
    names = [p.name_hint for p in func.params]
    try:
        candidate = mod.update_func(entry, new)
        full = validation_inputs(candidate, entry, dict(zip(names, args)), seed)
    except Exception:  # noqa: BLE001 - no valid candidate
        return None
    return _drop_unused(candidate, entry, full)


def _front_cuts(mod: IRModule, args: tuple, entry: str, check: Check,
                seed: int) -> tuple[IRModule, tuple, str | None, int]:
    """Bindings of ``entry`` replaced by parameters, first to last, while
    ``check`` finds the problem (what a module computes before the
    miscompiled part becomes an input)."""
    problem, tried, progress = None, 0, True
    while progress:
        progress = False
        bindings = [b for block in mod[entry].body.blocks for b in block.bindings
                    if isinstance(b, VarBinding)]
        for b in bindings[:-1]:
            made = _as_parameter(mod, entry, args, b.var, seed)
            if made is None:
                continue
            tried += 1
            found = check(*made)
            if found is not None:
                (mod, args), problem, progress = made, found, True
                break
    return mod, args, problem, tried


def _shrunk(mod: IRModule, args: tuple, entry: str, check: Check,
            seed: int) -> tuple[IRModule, tuple, str | None, int]:
    """``mod`` cut, its large constants made parameters and its shapes
    shrunk (:func:`~phasec.testing.shrink.shape_candidates`, fresh seeded
    inputs for each), while ``check`` finds the problem."""
    problem: str | None = None
    tried = 0
    cut = _smallest_cut(mod, args, entry, check)
    if cut is not None:
        mod, args, problem, tried = cut
    mod, args, found, n = _front_cuts(mod, args, entry, check, seed)
    problem, tried = found or problem, tried + n
    mod, args, problem, n = _lifted_if_still_failing(mod, args, entry, check, problem)
    tried += n
    failed: set[tuple[str, int]] = set()
    progress = True
    while progress:
        progress = False
        for dim, value, candidate in shape_candidates(mod):
            if (dim, value) in failed or entry not in candidate:
                continue
            tried += 1
            try:
                cand_args = validation_inputs(candidate, entry, None, seed)
            except Exception:  # noqa: BLE001 - no inputs fit: not a candidate
                cand_args = None
            found = check(candidate, cand_args) if cand_args is not None else None
            if found is None:
                failed.add((dim, value))
                continue
            mod, args, problem, progress = candidate, cand_args, found, True
            break
    return mod, args, problem, tried


def _simplified_kernels(mod: IRModule, args: tuple, check: Check) -> tuple[IRModule, int]:
    """Each kernel of ``mod`` simplified (:func:`~phasec.testing.shrink.simplify_kernel`)
    where ``check`` still finds the problem."""
    tried = 0
    for name, func in list(mod.prim_funcs()):
        for serial in (True, False):  # loop kinds kept: the pass may look for them
            simple = simplify_kernel(func, serial)
            if simple is func:
                break
            candidate = mod.update_func(name, simple)
            tried += 1
            if check(candidate, args) is not None:
                mod = candidate
                break
    return mod, tried


def _derive(start: IRModule, prefix: Sequence[Pass]) -> IRModule:
    """``start`` through the passes that ran before the blamed one (every
    one of them runs, as it did in the pipeline)."""
    if not prefix:
        return start
    with PassContext(opt_level=4):
        return Sequential(list(prefix), name="prefix")(start)


def minimize_change(before: IRModule, pass_: Pass, args: Sequence[Any], *,
                    entry: str = "main", tolerance: Tolerance | None = None,
                    kernel_runner: KernelRunner | None = None, start: IRModule | None = None,
                    prefix: Sequence[Pass] = (), seed: int = 0) -> Minimized:
    """Shrink ``before`` (the module ``pass_`` ran on) while ``pass_`` still
    changes its results on ``args``; see the module docstring.

    With ``start`` (a module the pipeline ran ``prefix`` on to make
    ``before``: the module it started from, normalized), ``start`` is shrunk
    first -- cut, constants lifted, shapes made small -- each candidate run
    through ``prefix`` and kept while ``pass_`` still changes the results of
    what it derives; ``before`` is then the smallest module derived.
    """
    tol = tolerance or Tolerance()
    args = tuple(args)

    def check(mod: IRModule, cand_args: tuple) -> str | None:
        return _changes(mod, cand_args, pass_, tol, entry, kernel_runner)

    problem = check(before, args)
    if problem is None:
        raise ValueError(f"{pass_.info.name} does not change the results of this module")
    tried = 0
    if start is not None:
        derived: dict[int, IRModule] = {}

        def through_prefix(mod: IRModule, cand_args: tuple) -> str | None:
            try:
                made = _derive(mod, prefix)
            except Exception:  # noqa: BLE001 - a candidate the prefix refuses is no reproducer
                return None
            found = check(made, cand_args)
            if found is not None:
                derived[id(mod)] = made
            return found

        small, small_args, found, tried = _shrunk(start, args, entry, through_prefix, seed)
        if found is not None and id(small) in derived:
            before, args, problem = derived[id(small)], small_args, found
    cut = _smallest_cut(before, args, entry, check)
    if cut is not None:
        before, args, problem, n = cut
        tried += n
    before, args, problem, n = _lifted_if_still_failing(before, args, entry, check, problem)
    tried += n
    before, n = _simplified_kernels(before, args, check)
    return Minimized(before, args, pass_, problem, tried + n)


def save_minimized(folder: str | Path, found: Minimized, number: int = 1) -> SavedFailure:
    """Write the reproducer (``NNN-results-PASS.py`` and ``.npz``) in the
    fuzzer's format: ``phasec opt FILE --passes PASS`` and ``phasec fuzz
    --replay FILE`` replay it (a pass of your own must be registered)."""
    spec = found.pass_.spec()
    failure = Failure("results", f"{spec} changes the results: {found.problem}", spec, 0,
                      found.module, None)
    return save_reproducer(Path(folder), number, failure, found.module, Sequential([found.pass_]),
                           found.args)


def describe_saved(saved: SavedFailure, found: Minimized) -> str:
    """What the tools print about a reproducer they wrote."""
    lines = len(saved.path.read_text().splitlines())
    body = len([t for t in found.module.script().splitlines()
                if t.strip() and not t.startswith("#")])
    return (f"minimized reproducer ({found.candidates_tried} candidates tried): {saved.path} "
            f"({body} lines of module, {lines} with its header; inputs "
            f"{saved.path.with_suffix('.npz').name}); replay with\n"
            f"  phasec opt {saved.path} --passes '{saved.sequence}'\n"
            f"  phasec fuzz --replay {saved.path}")


def minimize_stage_change(stages: Sequence[Any], blamed: int, passes: Sequence[Pass],
                          args: Sequence[Any], *, entry: str = "main",
                          tolerance: Tolerance | None = None,
                          kernel_runner: KernelRunner | None = None,
                          seed: int = 0) -> Minimized | None:
    """:func:`minimize_change` for the pass of ``stages[blamed]`` (stages as
    :func:`phasec.testing.bisect.run_stages` returns them: ``.module`` and
    ``.pass_name``, stage 0 the starting module), its pass objects looked up
    in ``passes`` (the pipeline, in order). The start is the last stage
    still in the starting module's phase (the module normalized), so that
    shapes are shrunk before any kernel exists and the kernels the blamed
    pass sees are re-derived small. None when the pipeline has no pass of
    that name (a pass a Sequential added as required)."""
    names = [s.pass_name for s in stages]
    objects: list[Pass] = []
    pool = list(passes)
    for name in names[1:blamed + 1]:
        k = next((i for i, p in enumerate(pool) if p.info.name == name), None)
        if k is None:
            return None
        objects.append(pool[k])
        pool = pool[k + 1:]
    first_phase = stages[0].module.phase
    start = max(i for i in range(blamed) if stages[i].module.phase == first_phase)
    return minimize_change(stages[blamed - 1].module, objects[-1], args, entry=entry,
                           tolerance=tolerance, kernel_runner=kernel_runner,
                           start=stages[start].module, prefix=objects[start:blamed - 1],
                           seed=seed)
