"""Steering generation toward what a pass rewrites (``check_pass``'s probe).

A pass usually rewrites a few operators or constructs; with ~180 operators
drawn evenly a program rarely holds the one it rewrites, in a form where the
rewrite shows. Before its hypothesis search, ``check_pass`` *probes* the
pass: three tiny modules per operator (made once per process and phase, the
operator applied to fresh operands, with other attributes and shapes in
each: one module can hide a rewrite), the pass run on each, and

* the operators on whose module the pass fails (crash, broken invariant,
  changed results) are *hot*;
* the operators named on a line the pass changed (the module printed before
  and after) are *touched*.

The search then draws swarm modules (:class:`phasec.testing.strategies.modules`
with ``swarm=True``) whose operators come three times in four from the
*focus*: the hot operators if any, else the touched ones (unless the pass
touches everything, as FuseOps does). ``hypothesis.target`` further steers
toward modules where the pass changes more lines.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis.errors import HypothesisException, StopTest
# the one way to draw a value of a strategy outside a test without the search
# engine (``find`` and ``example()`` run it: 5x slower for one module)
from hypothesis.internal.conjecture.data import ConjectureData

import numpy as np

from phasec import verifier
from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.expr import BindingBlock, Constant, Function, SeqExpr, VarBinding
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.op.unary import STOP_FUSION_PACKED
from phasec.testing._optable import op_names
from phasec.testing.coverage import ops_in
from phasec.testing.strategies import make_inputs, modules

__all__ = ["Probe", "probe_pass", "changed_ops", "probe_module", "draw_once", "constant_twin"]

#: how the probe's modules are drawn: one function, a few statements, no
#: control flow, closures or packed calls, so the operator is what they hold
#: (an elementwise operator's may chain it on its own result: the probe of a
#: FuseOps bug sees that group fused)
_PROBE_OPTIONS: Mapping[str, Any] = dict(max_bindings=3, max_functions=1, control_flow=False,
                                         closures=False, packed=False)
#: options of the user's ``module_options`` the probe keeps
_KEPT = ("max_rank", "max_dim", "symbolic", "dataflow", "constants", "max_params")

#: draws tried per operator before the probe gives up on it
_PROBE_TRIES = 12
#: distinct modules per operator: one module may hide a rewrite (an attribute
#: at the value a mutation leaves unchanged, a reduction of one element, a
#: dead result), a second or third one with other attributes and shapes shows it
PROBE_VARIANTS = 3

_CACHE: dict[tuple, IRModule | None] = {}
_CALL = re.compile(r"\bR\.([A-Za-z_][\w.]*)\(")


def probe_module(phase: Phase, op: str, options: Mapping[str, Any] | None = None,
                 variant: int = 0) -> IRModule | None:
    """A tiny module of ``phase`` made of ``op`` (None when none can be made);
    the same one each time in a process. ``variant`` ``k`` is drawn from
    other random sources (another module of the same operator)."""
    opts = {**{k: v for k, v in (options or {}).items() if k in _KEPT}, **_PROBE_OPTIONS}
    key = (phase, op, tuple(sorted((k, repr(v)) for k, v in opts.items())), variant)
    if key not in _CACHE:
        strategy = modules(phase, ops=[op], prefix="transitions", swarm=True, **opts)
        _CACHE[key] = None
        # drawn directly (no search engine: a few draws per operator), and not
        # the simplest module (one element): a few elements, so a rewrite shows
        for attempt in range(_PROBE_TRIES):
            mod = draw_once(strategy, attempt + 1000 * variant)
            if mod is not None and ops_in(mod)[op] and _visible(mod):
                _CACHE[key] = mod
                break
    return _CACHE[key]


def draw_once(strategy: Any, seed: int) -> Any:
    """One value of ``strategy`` drawn with a seeded random source (None if
    the draw is rejected or runs out of choices): a plain random sample,
    independent of hypothesis's search heuristics (which favour, e.g.,
    constants found in the source files of the project)."""
    data = ConjectureData(random=random.Random(seed), max_choices=20_000)
    try:
        return data.draw(strategy)
    except (StopTest, HypothesisException, PhasecError):
        return None


def _visible(mod: IRModule) -> bool:
    params = mod["main"].params
    shape = getattr(params[0].struct_info, "shape", None) if params else None
    if shape is None:
        return False
    size = 1
    for d in shape:
        size *= d.value if hasattr(d, "value") else 2
    return size >= 4


def constant_twin(mod: IRModule, args: Sequence[Any]) -> IRModule | None:
    """``mod`` with ``main``'s parameters bound to ``args`` as constants (no
    parameters left); None when a parameter is not a tensor of static shape
    or the twin is not well-formed."""
    func = mod["main"]
    bindings = []
    for p, a in zip(func.params, args):
        shape = getattr(p.struct_info, "shape", None)
        if not isinstance(a, np.ndarray) or shape is None or \
                any(not isinstance(d, (int, tir.IntImm)) for d in shape):
            return None
        bindings.append(VarBinding(p, Constant(a)))
    body = func.body
    if not isinstance(body, SeqExpr):
        return None
    twin = Function([], SeqExpr([BindingBlock(bindings), *body.blocks], body.body),
                    func.ret_struct_info, func.is_pure, func.attrs)
    out = mod.update({"main": twin})
    if any(d.is_error for d in verifier.check(out)):
        return None
    return out


def changed_ops(before: IRModule, after: IRModule) -> set[str]:
    """Registry names of the operators on the lines of ``before`` that are
    not in ``after`` (as printed)."""
    kept = set(after.script().splitlines())
    out: set[str] = set()
    for line in before.script().splitlines():
        if line not in kept:
            if f'"{STOP_FUSION_PACKED}"' in line:
                out.add("relax.stop_fusion")  # printed as a packed call (TVM's syntax)
            out.update("relax." + m for m in _CALL.findall(line)
                       if not m.startswith(("func_attr", "Tensor", "Tuple", "Shape", "Object",
                                            "Prim", "dataflow", "output", "const")))
    return out


@dataclass
class Probe:
    """What the probe of one pass at one phase saw."""

    probed: list[str] = field(default_factory=list)
    hot: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    #: (failure, inputs) of each hot operator's module
    failures: list[tuple[Any, tuple]] = field(default_factory=list)
    seconds: float = 0.0

    def focus(self) -> frozenset[str] | None:
        """The operators to draw most: hot ones, else touched ones (None
        when the pass touches nothing, or every operator probed)."""
        if self.hot:
            return frozenset(self.hot)
        if self.touched and len(self.touched) < len(self.probed):
            return frozenset(self.touched)
        return None


def probe_pass(run: Callable[[IRModule, Sequence[Any]], tuple[Any, IRModule | None]],
               phase: Phase, options: Mapping[str, Any] | None = None,
               limit: int | None = None, seed: int = 0,
               deadline: float | None = None) -> Probe:
    """Probe a pass at ``phase``: ``run(mod, args)`` runs it (its required
    passes first) and returns (its failure or None, the module it ran on and
    the result, or None). ``limit``: probe that many operators (a sample
    drawn with ``seed``) instead of all; ``options``: the check's
    ``module_options`` (its ``ops`` restrict the operators probed);
    ``deadline`` (a ``time.monotonic()`` value): stop there, the operators
    taken in an order shuffled with ``seed`` so that a probe cut short has
    probed a fair sample of them."""
    start = time.perf_counter()
    ops = op_names()
    wanted = (options or {}).get("ops")
    if wanted is not None:
        names = {o if o.startswith("relax.") else "relax." + o for o in wanted}
        ops = [o for o in ops if o in names]
    if limit is not None and limit < len(ops):
        ops = sorted(random.Random(seed).sample(ops, limit), key=ops.index)
    if deadline is not None:
        ops = random.Random(seed).sample(ops, len(ops))
    out = Probe()
    for op in ops:
        if deadline is not None and time.monotonic() >= deadline:
            break
        for variant in range(PROBE_VARIANTS):
            mod = probe_module(phase, op, options, variant)
            if mod is None:
                continue
            if op not in out.probed:
                out.probed.append(op)
            if _probe_one(run, op, mod, seed, out):
                break  # hot: one failure of this operator is enough
    out.seconds = time.perf_counter() - start
    return out


def _probe_one(run: Callable[[IRModule, Sequence[Any]], tuple[Any, IRModule | None]],
               op: str, mod: IRModule, seed: int, out: Probe) -> bool:
    """Run the pass on ``mod`` and its constant twin, recording into ``out``
    whether it fails on ``op`` (hot: returns True) or rewrites it (touched)."""
    try:
        args = make_inputs(mod, seed)
    except PhasecError:
        return False
    # the module, then its twin with the inputs as constants (what
    # FoldConstant-like passes rewrite)
    for m, a in ((mod, args), (constant_twin(mod, args), ())):
        if m is None:
            continue
        failure, ran = run(m, a)
        if failure is not None:
            out.hot.append(op)
            out.failures.append((failure, tuple(a)))
            return True
        if ran is not None and op in changed_ops(*ran) and op not in out.touched:
            out.touched.append(op)
    return False
