"""``check_pass``: fuzz a user's pass against random modules of its phases.

    from phasec.testing import check_pass

    @module_pass(phases=Phase.OPTIMIZATION)
    def my_pass(mod, ctx): ...

    check_pass(my_pass)          # raises PassCheckFailure with a reproducer

For every phase the pass accepts (or the ``phases`` asked for), a probe
finds the operators the pass fails on or rewrites
(:mod:`phasec.testing.steering`), then hypothesis draws swarm modules of
that phase dense in them (:func:`phasec.testing.modules`) and inputs, runs
the passes it requires (as a ``Sequential`` would) and then the pass, and
checks that it

* does not crash (any exception; a ``PhaseError`` too: the pass accepts the
  phase, so the phase check cannot be the problem),
* returns a module the verifier accepts for its (new) phase,
* does not change the results of the entry function under the reference
  interpreter.

On a failure hypothesis shrinks the module and inputs, and
:class:`PassCheckFailure` (an ``AssertionError``) reports the minimal
reproducer: the module as TVMScript, the inputs, the pass, what went wrong,
and how to replay it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Verbosity, given, reject, settings, target
from hypothesis import Phase as HPhase
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from phasec.errors import PhaseError
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.testing.properties import (
    ATOL, FAILURE_KINDS, RTOL, Failure, HangError, _error_text, compare_results,
    reference_results, time_limit, verify_problem,
)
from phasec.testing.steering import changed_ops, probe_pass
from phasec.testing.strategies import inputs_for, modules
from phasec.transform import Pass, PassContext, Sequential, get_pass

__all__ = ["check_pass", "check_one", "PassCheckFailure", "CheckPassReport", "BadInput",
           "format_inputs"]

_MAX_OUTPUT_LINES = 60


class PassCheckFailure(AssertionError):
    """``check_pass`` found a module on which the pass misbehaves.

    Attributes: ``kind`` (``"crash"``, ``"invariant"``, ``"results"``,
    ``"runtime"``, ``"hang"``), ``pass_spec``, ``phase``, ``module`` (the
    minimal input module), ``inputs``, ``output`` (the pass's result, if
    any), ``failure`` (the :class:`~phasec.testing.properties.Failure`).
    The message is the full report.
    """

    def __init__(self, report: str, failure: Failure, phase: Phase,
                 inputs: Sequence[Any]) -> None:
        super().__init__(report)
        self.failure = failure
        self.kind = failure.kind
        self.pass_spec = failure.pass_spec
        self.phase = phase
        self.module = failure.before
        self.output = failure.after
        self.inputs = tuple(inputs)


@dataclass
class CheckPassReport:
    """What a successful ``check_pass`` tried."""

    pass_spec: str
    phases: list[Phase] = field(default_factory=list)
    examples: dict[str, int] = field(default_factory=dict)
    #: per phase, the operators the probe found the pass rewrites (drawn most)
    focus: dict[str, list[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        counts = ", ".join(f"{k}: {v}" for k, v in self.examples.items())
        return f"check_pass({self.pass_spec}): no failure ({counts} examples)"


class _Found(Exception):
    """Internal: a failing example (hypothesis shrinks it, then re-raises)."""

    def __init__(self, failure: Failure, inputs: Sequence[Any]) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.inputs = inputs


def _as_pass(p: Any) -> Any:
    if isinstance(p, Pass):
        return p
    if isinstance(p, str):
        return get_pass(p)
    if isinstance(p, type) and issubclass(p, Pass):
        return p()
    raise TypeError(f"check_pass takes a pass, a pass class or a registered pass name, "
                    f"not {type(p).__name__}")


def _run_required(p: Any, mod: IRModule) -> IRModule:
    """``mod`` after the passes ``p`` requires (rejected if they fail: that
    is not ``p``'s fault)."""
    if not p.info.required:
        return mod
    try:
        with PassContext(opt_level=3):
            return Sequential([get_pass(n) for n in p.info.required], name="required")(mod)
    except Exception:  # noqa: BLE001
        reject()
        raise  # unreachable: reject() raises


class BadInput(Exception):
    """The interpreter fails on the input module itself (nothing to compare)."""


def check_one(p: Any, mod: IRModule, args: Sequence[Any] | None, *, rtol: float = RTOL,
              atol: float = ATOL, timeout: float | None = 60.0,
              expected: Any = None) -> Failure | None:
    """Run pass ``p`` once on ``mod`` and check it; the failure, or None.

    The interpreter runs only when the pass succeeded and kept the
    invariants (``expected``: its results on ``mod``, computed if None;
    :class:`BadInput` if that fails).
    """
    return _check_one(p, mod, args, rtol=rtol, atol=atol, timeout=timeout,
                      expected=expected)[0]


def _check_one(p: Any, mod: IRModule, args: Sequence[Any] | None, *, rtol: float,
               atol: float, timeout: float | None, expected: Any = None
               ) -> tuple[Failure | None, IRModule | None]:
    """:func:`check_one`, and the pass's result (None if it failed to make one)."""
    spec = p.spec()
    try:
        with PassContext(opt_level=3, verify="off"), time_limit(timeout):
            result = p(mod)
    except HangError as exc:
        return Failure("hang", f"the pass is still running after the time limit ({exc})",
                       spec, 0, mod), None
    except PhaseError as exc:
        return Failure("crash", f"PhaseError although the pass accepts phase "
                       f"{mod.phase.label}: {exc}", spec, 0, mod,
                       detail=_error_text(exc)), None
    except Exception as exc:  # noqa: BLE001 - any exception is a crash of the pass
        return Failure("crash", f"{type(exc).__name__}: {exc}", spec, 0, mod,
                       detail=_error_text(exc)), None
    if not isinstance(result, IRModule):
        return Failure("crash", f"the pass returned {type(result).__name__}, not an IRModule",
                       spec, 0, mod), None
    problem = verify_problem(result)
    if problem is not None:
        return Failure("invariant", f"the output is not well-formed at phase "
                       f"{result.phase.label}:\n{problem}", spec, 0, mod, result), result
    if args is None:
        return None, result
    if expected is None:
        try:
            expected = reference_results(mod, args, timeout=timeout)
        except Exception as exc:  # noqa: BLE001
            raise BadInput(f"{type(exc).__name__}: {exc}") from exc
    try:
        got = reference_results(result, args, timeout=timeout)
    except HangError as exc:
        return Failure("hang", f"the interpreter on the output: {exc}", spec, 0, mod,
                       result), result
    except Exception as exc:  # noqa: BLE001
        return Failure("runtime", f"the interpreter failed on the output: "
                       f"{type(exc).__name__}: {exc}", spec, 0, mod, result,
                       detail=_error_text(exc)), result
    problem = compare_results(expected, got, rtol, atol)
    if problem is not None:
        return Failure("results", f"the results changed: {problem}", spec, 0, mod,
                       result), result
    return None, result


def check_pass(p: Any, *, max_examples: int = 100, phases: Iterable[Phase | int | str] | None
               = None, check_results: bool = True, rtol: float = RTOL, atol: float = ATOL,
               timeout: float | None = 60.0, module_options: Mapping[str, Any] | None = None,
               database: Any = None, derandomize: bool | None = None,
               seed: int | None = None, probe: bool = True) -> CheckPassReport:
    """Fuzz pass ``p`` against random modules of each phase it accepts.

    For each phase, first the *probe* (:mod:`phasec.testing.steering`): the
    pass runs on three tiny modules per operator (up to ``2 * max_examples``
    operators), which finds the operators it fails on or rewrites; then
    hypothesis draws ``max_examples`` swarm modules (each dense in a few
    operators and features, three in four drawn from those the probe
    found) and inputs, and shrinks a failure to a minimal reproducer.

    Args:
        p: a pass object, a pass class (built with no options) or a
            registered pass name.
        max_examples: examples per phase (the probe's modules besides).
        phases: only these of the phases the pass accepts (default: all).
        check_results: compare the interpreter's results before and after.
        rtol, atol: the tolerance for float results.
        timeout: seconds allowed for the pass (and for each interpreter run).
        module_options: keyword arguments for :func:`phasec.testing.modules`
            (e.g. ``{"max_bindings": 4, "closures": False}``; ``"swarm":
            False`` draws from the whole pool, as before swarm testing).
        database: a hypothesis example database (default: none, so a
            check is reproducible from its arguments alone).
        derandomize: passed to hypothesis (default: the active profile's).
        seed: seeds hypothesis's search (default: the profile's randomness).
        probe: run the probe first (False: no steering toward the
            operators the pass rewrites).

    Returns a :class:`CheckPassReport`; raises :class:`PassCheckFailure`
    with a minimal reproducer when the pass crashes, breaks an invariant of
    its output phase or changes results.
    """
    pass_ = _as_pass(p)
    accepted = sorted(pass_.info.phases)
    if phases is not None:
        wanted = {Phase.parse(x) for x in phases}
        unknown = wanted - set(accepted)
        if unknown:
            raise ValueError(f"{pass_.info.name} does not accept phase(s) "
                             f"{', '.join(x.label for x in sorted(unknown))}; it accepts "
                             f"{', '.join(x.label for x in accepted)}")
        accepted = [x for x in accepted if x in wanted]
    report = CheckPassReport(pass_.spec(), list(accepted))
    options = dict(module_options or {})
    overrides: dict[str, Any] = dict(
        max_examples=max_examples, deadline=None, database=database,
        report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False,
        # no "explain" phase: the report is check_pass's own, and explaining
        # took a third of the time of a found failure
        phases=[HPhase.explicit, HPhase.reuse, HPhase.generate, HPhase.target, HPhase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large])
    if derandomize is not None:
        overrides["derandomize"] = derandomize
    check = dict(rtol=rtol, atol=atol, timeout=timeout)

    def run_probe(mod: IRModule, args: Sequence[Any]) -> tuple[Any, Any]:
        try:
            with PassContext(opt_level=3):
                if pass_.info.required:
                    mod = Sequential([get_pass(n) for n in pass_.info.required],
                                     name="required")(mod)
            failure, result = _check_one(pass_, mod, args if check_results else None, **check)
        except Exception:  # noqa: BLE001 - the probe module itself does not run
            return None, None
        return failure, (mod, result) if result is not None else None

    for phase in accepted:
        focus = None
        seen = None
        if probe and options.get("swarm", True):
            seen = probe_pass(run_probe, phase, options, limit=2 * max_examples,
                              seed=seed or 0)
            focus = seen.focus()
            report.focus[phase.label] = sorted(focus or ())
        count = [0]

        @settings(settings.default, **overrides)
        @given(modules(phase, **{"swarm": True, "focus": focus, **options}), st.data())
        def prop(mod: IRModule, data: Any) -> None:
            args = data.draw(inputs_for(mod), label="inputs") if check_results else None
            # a pass may rely on the passes it requires having run (LegalizeOps on
            # ToNonDataflow): run them first, and check the pass on their output
            mod = _run_required(pass_, mod)
            count[0] += 1
            try:
                failure, result = _check_one(pass_, mod, args, **check)
            except BadInput:
                reject()  # the generated module itself does not run: not the pass's fault
            if failure is not None:
                raise _Found(failure, args or ())
            if result is not None and focus:
                # steer toward modules where the pass rewrites more of the focus
                target(float(len(changed_ops(mod, result) & focus)), label="focus rewritten")

        if seed is not None:
            prop = hypothesis_seed(seed)(prop)
        try:
            prop()
        except _Found as found:
            text = format_report(found.failure, phase, found.inputs, pass_)
            raise PassCheckFailure(text, found.failure, phase, found.inputs) from None
        if seen is not None and seen.failures:
            # the search missed what the probe saw: report the probe's module
            # (a few statements; not shrunk further)
            failure, inputs = seen.failures[0]
            text = format_report(failure, phase, inputs, pass_)
            raise PassCheckFailure(text, failure, phase, inputs)
        report.examples[phase.label] = count[0]
    return report


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def format_inputs(mod: IRModule | None, inputs: Sequence[Any], entry: str = "main") -> str:
    """Python source building the inputs (``name = np.array(...)`` lines)."""
    names = [p.name_hint for p in mod[entry].params] if mod is not None and entry in mod else []
    lines = []
    with np.printoptions(threshold=10_000, precision=8, floatmode="maxprec"):
        for i, value in enumerate(inputs):
            name = names[i] if i < len(names) else f"arg{i}"
            lines.append(f"{name} = {_value_source(value)}")
    return "\n".join(lines)


def _value_source(value: Any) -> str:
    if isinstance(value, np.ndarray):
        body = np.array2string(value, separator=", ")
        if value.ndim == 0:
            body = repr(value.item())
        return f"np.array({body}, dtype=np.{value.dtype})"
    if isinstance(value, tuple):
        inner = ", ".join(_value_source(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _indent(text: str, limit: int | None = None) -> str:
    lines = text.rstrip("\n").splitlines()
    if limit is not None and len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return textwrap.indent("\n".join(lines), "    ")


def format_report(failure: Failure, phase: Phase, inputs: Sequence[Any], pass_: Any) -> str:
    """The text of a :class:`PassCheckFailure`."""
    info = pass_.info
    accepts = ", ".join(x.label for x in sorted(info.phases))
    trans = f", transition to {info.transition_to.label}" if info.transition_to else ""
    out = [
        f"check_pass: {failure.pass_spec} failed on a module of phase {phase.label} "
        f"({failure.kind}: {FAILURE_KINDS.get(failure.kind, failure.kind)})",
        "",
        f"  pass:    {failure.pass_spec} (accepts {accepts}{trans}; opt_level {info.opt_level})",
        "  problem: " + textwrap.indent(failure.message, "           ").lstrip(),
    ]
    if failure.detail and failure.kind in ("crash", "runtime"):
        out += ["", "Traceback (root cause):", _indent(failure.detail, 30)]
    if failure.before is not None:
        out += ["", "Minimal reproducer, the input module (TVMScript):", "",
                _indent(failure.before.script())]
        if inputs:
            out += ["", "Inputs of main:", "", _indent(format_inputs(failure.before, inputs))]
    if failure.after is not None:
        out += ["", "What the pass returned:", "",
                _indent(failure.after.script(), _MAX_OUTPUT_LINES)]
    out += ["", "Replay: parse the module with phasec.parse(text), run the pass on it "
            "(and phasec.interp.run(mod, *inputs) before and after to compare results)."]
    return "\n".join(out)
