"""Hypothesis strategies for phasec: random modules, pass sequences and inputs.

    from hypothesis import given
    from phasec.testing import modules, pass_sequences, inputs_for

    @given(modules(), pass_sequences())
    def test_my_pipeline(mod, seq): ...

* :func:`modules` draws well-formed modules of a phase: random DAGs of the
  registered operators over consistent shapes (broadcasting, symbolic
  dimensions), tuples, if/else, nested functions and closures capturing
  variables, dataflow blocks, constants, several functions calling each other,
  impure and force_pure functions with packed calls, bounded recursion.
  Modules of a later phase are ingestion modules run through the transition
  passes (and the passes they require) up to that phase.
* :func:`pass_sequences` draws orderings of registered passes, repetitions
  included, valid from a phase (or, on request, any ordering) as a
  :class:`~phasec.transform.Sequential` (whose repr is the textual pipeline).
* :func:`inputs_for` draws numpy arguments for a module's entry function.

Values are numerically safe by construction (see :mod:`phasec.testing._values`):
float inputs lie in [-2, 2], integer inputs in [-3, 3], and the generator
only applies an operator where its result stays finite and away from
singularities, so results can be compared with a tight tolerance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.ir.struct_info import (
    ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.transform import Pass, PassContext, Sequential, get_pass, get_pass_entry, list_passes
from phasec.transform.info import TRANSITION_PASSES, describe_phases
from phasec.testing._gen import GenConfig, generate_module
from phasec.testing._values import INPUT_RANGE, INT_INPUT_RANGE
from phasec.testing.errors import GeneratorError
from phasec.interp import eval_prim_expr
from phasec.runtime.random_inputs import RandomBudget, random_uniform
from phasec.pipeline import default_pipeline

__all__ = ["modules", "pass_sequences", "inputs_for", "GenConfig", "GeneratorError",
           "advance_to_phase", "OPTION_CHOICES", "EXCLUDED_PASSES", "default_pass_names",
           "make_inputs", "FuzzSequence"]

#: Options the sequence strategy draws for some passes (others use defaults).
OPTION_CHOICES: Mapping[str, Mapping[str, Sequence[Any]]] = {
    "FuseOps": {"fuse_opt_level": (-1, 0, 1, 2)},
    "ConvertToDataflow": {"min_size": (2, 1, 3)},
    "FoldConstant": {"max_elements": (1048576, 1, 4)},
}

#: Registered passes never drawn by default, and why.
EXCLUDED_PASSES: Mapping[str, str] = {
    "PrintIR": "prints the module; it has no effect to test",
}

#: The transition into each phase (required passes are added by Sequential).
_TRANSITIONS = TRANSITION_PASSES


def default_pass_names() -> list[str]:
    """Every registered pass except :data:`EXCLUDED_PASSES`."""
    return [n for n in list_passes() if n not in EXCLUDED_PASSES]


def advance_to_phase(mod: IRModule, phase: Phase | int | str,
                     prefix: str = "transitions") -> IRModule:
    """``mod`` taken from its phase to ``phase`` by a pipeline prefix.

    ``prefix="transitions"``: only the transition passes (and the passes they
    require), so the result is as close to the input as the phase allows;
    ``prefix="default"``: the default pipeline (opt_level 3) up to and
    including the transition into ``phase`` (fused, folded modules). The
    result is verified at every transition.
    """
    target = Phase.parse(phase)
    if target <= mod.phase:
        return mod
    if prefix == "default":
        pipeline = default_pipeline(opt_level=3)
        windows = pipeline.windows()
        passes = list(pipeline.passes[windows[mod.phase][0]:windows[target][0]])
    elif prefix == "transitions":
        passes = [get_pass(_TRANSITIONS[p]) for p in Phase if mod.phase < p <= target]
    else:
        raise ValueError(f"prefix must be 'transitions' or 'default', not {prefix!r}")
    with PassContext(opt_level=3, verify="transitions"):
        return Sequential(passes, name="advance")(mod)


def modules(phase: Phase | int | str = Phase.INGESTION, *, max_bindings: int = 8,
            max_functions: int = 3, max_params: int = 3, max_rank: int = 4, max_dim: int = 4,
            max_depth: int = 2, symbolic: bool = True, control_flow: bool = True,
            closures: bool = True, packed: bool = True, dataflow: bool = True,
            constants: bool = True, ops: Iterable[str] | None = None,
            prefix: str | None = None, swarm: bool = False,
            focus: Iterable[str] | None = None, chains: bool = True
            ) -> st.SearchStrategy[IRModule]:
    """Well-formed modules in ``phase`` (with an entry function ``main``).

    Args:
        phase: the phase of the modules drawn. Modules past ingestion are
            generated at ingestion and advanced by the transition passes;
            a module the transitions fail on is rejected (the pass-ordering
            properties report such failures themselves).
        max_bindings: statements per function body (each adds 1-3 bindings).
        max_functions: module-level functions, ``main`` included.
        max_params: parameters of ``main``.
        max_rank, max_dim: tensor rank and dimension bounds (symbolic
            dimensions take values up to ``max_dim`` in :func:`inputs_for`).
        max_depth: nesting of if-branches and nested functions.
        symbolic, control_flow, closures, packed, dataflow, constants: turn
            features of the generated programs off.
        ops: restrict the operators to these registry names (``relax.add``).
        prefix: how modules past ingestion are made (see
            :func:`advance_to_phase`): ``"transitions"``, ``"default"`` (the
            default pipeline's prefix), or None to draw either.
        swarm: swarm testing: each module is dense in a small random subset
            of the operators (of ``ops``) and uses a random subset of the
            features above (see :class:`GenConfig`); ``check_pass`` and
            ``phasec fuzz`` draw this way.
        focus: with ``swarm``, operators drawn three times in four (those a
            pass under test rewrites).
        chains: with ``swarm``, half the operator calls are followed by one
            or two elementwise operators on their result, in a dataflow
            block (the groups FuseOps fuses); False: none.
    """
    target = Phase.parse(phase)
    if prefix not in (None, "transitions", "default"):
        raise ValueError(f"prefix must be 'transitions', 'default' or None, not {prefix!r}")
    cfg = GenConfig(max_bindings=max_bindings, max_functions=max_functions,
                    max_params=max_params, max_rank=max_rank, max_dim=max_dim,
                    max_depth=max_depth, symbolic=symbolic, control_flow=control_flow,
                    closures=closures, packed=packed, dataflow=dataflow, constants=constants,
                    ops=_op_set(ops), swarm=swarm, focus=_op_set(focus), chains=chains)

    @st.composite
    def draw_module(draw: Any) -> IRModule:
        mod = generate_module(draw, cfg)
        if target != Phase.INGESTION:
            how = prefix or draw(st.sampled_from(["transitions", "default"]))
            try:
                mod = advance_to_phase(mod, target, how)
            except PhasecError:
                reject()
        return mod

    return draw_module()


def _op_set(ops: Iterable[str] | None) -> frozenset[str] | None:
    if ops is None:
        return None
    return frozenset(o if o.startswith("relax.") else "relax." + o for o in ops)


def pass_sequences(passes: Iterable[Any] | None = None, *, min_size: int = 1,
                   max_size: int = 6, start_phase: Phase | int | str = Phase.INGESTION,
                   valid: bool | None = True) -> st.SearchStrategy[Any]:
    """Sequences (``Sequential``) of registered passes, repetitions included.

    Args:
        passes: pass names or pass objects to draw from (default: every
            registered pass but :data:`EXCLUDED_PASSES`). Names get options
            from :data:`OPTION_CHOICES`.
        min_size, max_size: number of passes drawn (required passes that
            ``Sequential`` adds are not counted).
        start_phase: the phase of the modules the sequence will run on.
        valid: True (default) draws only sequences that pass static
            validation from ``start_phase`` (and half of them end with the
            transitions up to build), so they run on ``modules(start_phase)``;
            False draws any ordering (to test that misorderings are refused
            with a PhaseError); None mixes both, as fuzzing campaigns do.

    A valid sequence reaches every pass it draws: when the pass does not
    accept the current phase but a later one, the transitions up to that
    phase are inserted before it (their required passes follow from
    ``Sequential``), so ``pass_sequences(["FuseOps", MyPass])`` runs both on
    ingestion modules. The result is a :class:`FuzzSequence` whose
    ``reach_notes`` say which transitions were added and why.
    """
    pool: list[Any] = list(passes) if passes is not None else default_pass_names()
    if not pool:
        raise ValueError("pass_sequences needs at least one pass to draw from")
    start = Phase.parse(start_phase)

    def make(item: Any, draw: Any) -> Pass:
        if isinstance(item, Pass):
            return item
        choices = OPTION_CHOICES.get(item, {})
        opts = {k: draw(st.sampled_from(list(v))) for k, v in choices.items()}
        try:
            return get_pass(item, **opts)
        except PhasecError:  # an option this version of the pass lacks
            return get_pass(item)

    def info(item: Any) -> Any:
        if isinstance(item, Pass):
            return item.info
        return get_pass_entry(item).info

    @st.composite
    def draw_seq(draw: Any) -> Any:
        size = draw(st.integers(min_size, max_size))
        # mixed: three in four valid (invalid ones are refused before running)
        want_valid = valid if valid is not None else draw(st.integers(0, 3)) != 3
        chosen: list[Pass] = []
        notes: list[str] = []
        phase = start
        for _ in range(size):
            if want_valid:
                # a pass of a later phase is reachable: the transitions take
                # the module there (users name passes, not transitions)
                cands = [p for p in pool if any(ph >= phase for ph in info(p).phases)]
                if not cands:
                    break
                item = cands[draw(st.integers(0, len(cands) - 1))]
            else:
                item = pool[draw(st.integers(0, len(pool) - 1))]
            p = make(item, draw)
            if want_valid and phase not in p.info.phases:
                target = min(ph for ph in p.info.phases if ph > phase)
                added = [get_pass(TRANSITION_PASSES[t]) for t in Phase if phase < t <= target]
                chosen.extend(added)
                notes.append(f"{','.join(a.info.name for a in added)} before "
                             f"{p.info.name} (it runs in {describe_phases(p.info.phases)}; "
                             f"the module starts in {phase.label})")
                for a in added:
                    phase = _phase_after(a, phase)
            chosen.append(p)
            if want_valid:
                phase = _phase_after(p, phase)
        if want_valid and draw(st.booleans()):
            # finish the pipeline: the remaining transitions up to build
            for target in Phase:
                if target > phase:
                    chosen.append(get_pass(TRANSITION_PASSES[target]))
        return FuzzSequence(chosen, reach_notes=notes)

    return draw_seq()


class FuzzSequence(Sequential):
    """A drawn sequence: a ``Sequential`` named ``fuzz`` that remembers the
    transitions added to reach a drawn pass's phase (``reach_notes``, shown
    in reproducers and the campaign summary)."""

    __slots__ = ("reach_notes",)

    def __init__(self, passes: Iterable[Any] = (), *, reach_notes: Sequence[str] = (),
                 **kw: Any) -> None:
        kw.setdefault("name", "fuzz")
        super().__init__(passes, **kw)
        self.reach_notes = tuple(reach_notes)

    def __repr__(self) -> str:
        text = super().__repr__()
        return text + (f"  # reach: {'; '.join(self.reach_notes)}" if self.reach_notes else "")


def _phase_after(p: Any, phase: Phase) -> Phase:
    """The phase after ``p`` runs, its required passes included."""
    for name in p.info.required:
        phase = _phase_after(get_pass(name), phase)
    return p.info.transition_to if p.info.transition_to is not None else phase


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def inputs_for(mod: IRModule, entry: str = "main", *, max_dim: int = 4
               ) -> st.SearchStrategy[tuple]:
    """Numpy arguments for ``mod[entry]``.

    Symbolic dimensions get values in ``[1, max_dim]`` (consistent across
    parameters); float tensors are uniform in [-2, 2], integer tensors in
    [-3, 3], bool tensors fair coins. The values come from a drawn seed, so
    they are generic (no exact ties or integers) and shrink trivially.
    """
    func = mod[entry]
    syms: list[tir.Var] = []
    for p in func.params:
        for v in _sym_vars(p.struct_info):
            if v not in syms:
                syms.append(v)

    @st.composite
    def draw_inputs(draw: Any) -> tuple:
        values = {v: draw(st.integers(1, max_dim)) for v in syms}
        seed = draw(st.integers(0, 2**32 - 1))
        return make_inputs(mod, seed, values, entry=entry, max_dim=max_dim)

    return draw_inputs()


def make_inputs(mod: IRModule, seed: int, sym_values: Mapping[Any, int] | None = None,
                entry: str = "main", max_dim: int = 4) -> tuple:
    """The arguments :func:`inputs_for` would draw for ``seed`` (deterministic)."""
    rng = np.random.default_rng(seed)
    values = dict(sym_values or {})
    budget = RandomBudget()  # a declared shape can ask for more memory than there is

    def dim(d: Any) -> int:
        def lookup(v: Any) -> int:
            if v not in values:
                values[v] = int(rng.integers(1, max_dim + 1))
            return values[v]
        return int(eval_prim_expr(d, lookup))

    def value(sinfo: Any, where: str) -> Any:
        if isinstance(sinfo, TensorStructInfo):
            shape = tuple(dim(d) for d in sinfo.shape) if sinfo.shape is not None else \
                (2,) * max(sinfo.ndim, 0)
            dtype = "float32" if sinfo.dtype == "void" else sinfo.dtype
            budget.charge(shape, "bool" if dtype == "bool" else dtype, where)
            if dtype == "bool":
                return rng.random(shape) < 0.5
            if dtype.startswith(("int", "uint")):
                return rng.integers(INT_INPUT_RANGE[0], INT_INPUT_RANGE[1] + 1,
                                    size=shape).astype(dtype)
            return random_uniform(rng, *INPUT_RANGE, shape, dtype)  # (in place, same values)
        if isinstance(sinfo, TupleStructInfo):
            return tuple(value(f, f"{where}[{i}]") for i, f in enumerate(sinfo.fields))
        if isinstance(sinfo, ShapeStructInfo):
            return tuple(dim(d) for d in sinfo.values) if sinfo.values is not None else (2,)
        if isinstance(sinfo, PrimStructInfo):
            if sinfo.value is not None:
                return eval_prim_expr(sinfo.value, lambda v: values.setdefault(v, 1))
            if sinfo.dtype == "bool":
                return bool(rng.random() < 0.5)
            if sinfo.dtype.startswith("int"):
                return int(rng.integers(INT_INPUT_RANGE[0], INT_INPUT_RANGE[1] + 1))
            return float(rng.uniform(*INPUT_RANGE))
        if isinstance(sinfo, ObjectStructInfo):
            return None
        raise GeneratorError(f"inputs_for cannot make a value for struct info "
                             f"{type(sinfo).__name__}")

    func = mod[entry]
    return tuple(value(p.struct_info, f"parameter {p.name_hint!r} of {entry!r}")
                 for p in func.params)


def _sym_vars(sinfo: Any) -> list[tir.Var]:
    out: list[tir.Var] = []
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        dims = sinfo.shape
    elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        dims = sinfo.values
    elif isinstance(sinfo, TupleStructInfo):
        return [v for f in sinfo.fields for v in _sym_vars(f)]
    else:
        dims = ()
    for d in dims:
        if isinstance(d, tir.Var):
            out.append(d)
    return out
