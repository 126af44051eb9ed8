"""The properties phasec's pass orderings must satisfy, as reusable checks.

For a module ``mod``, a pass sequence ``seq`` and inputs ``args``:

1. **static validation is exact**: ``seq`` is refused by ``Sequential``
   validation (a :class:`~phasec.PhaseError` before anything runs) if and
   only if running its passes one by one hits a ``PhaseError``, at the same
   pass;
2. **invariants**: every pass that runs produces a module the verifier
   accepts for the module's (new) phase;
3. **results**: the reference interpreter gives the same answer before and
   after every pass, and a sequence that reaches the build phase gives the
   same answer on the VM;
4. (mutations: see :mod:`phasec.testing.mutations`);
5. **round trips**: ``parse(mod.script())`` and ``from_json(to_json(mod))``
   are structurally equal to ``mod``.

:func:`check_sequence` checks 1-3 (and optionally 5 on every intermediate
module) and returns a :class:`SequenceReport` listing :class:`Failure`\\ s;
:func:`assert_sequence_ok` raises :class:`PropertyFailure` instead. Each
failure carries the module the failing pass ran on, so it is a reproducer.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from phasec.errors import PhaseError
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec import interp, verifier
from phasec.ir.expr import BindingBlock, Function, If, SeqExpr, VarBinding
from phasec.ir.structural import first_mismatch as _first_mismatch
from phasec.script.parser import parse
from phasec.transform import PassContext, Sequential, get_pass

__all__ = ["Failure", "PropertyFailure", "SequenceReport", "FAILURE_KINDS", "RTOL", "ATOL",
           "compare_results", "check_sequence", "assert_sequence_ok", "roundtrip_problem",
           "verify_problem", "reference_results", "merge_plain_blocks", "run_vm", "time_limit",
           "HangError", "copy_args"]

#: Default comparison tolerance (float results; ints and bools compare exactly).
RTOL = 1e-5
ATOL = 1e-4

#: Failure kinds and what each means.
FAILURE_KINDS: dict[str, str] = {
    "crash": "a pass raised an exception other than a PhaseError",
    "invariant": "a pass produced a module the verifier rejects for its phase",
    "results": "the interpreter's results changed after a pass",
    "runtime": "the interpreter failed on a pass's output",
    "vm": "the VM failed or disagrees with the interpreter",
    "validation": "static validation disagrees with running the passes one by one",
    "roundtrip": "a text or JSON round trip is not exact",
    "reference": "the interpreter failed on the generated module itself",
    "hang": "a pass, the interpreter or the VM ran past the time limit",
    "generator": "phasec.testing's program generator failed (a bug in the fuzzer itself)",
    # phasec fuzz --against tvm (phasec.testing.against_tvm)
    "tvm-verdict": "TVM's well-formedness check and phasec's verifier disagree on a module",
    "tvm-phase": "a TVM pass produced a module that breaks an invariant of its phase",
    "tvm-unreadable": "phasec cannot read back what a TVM pass printed",
    "tvm-crash": "a TVM pass or TVM's build failed on a module both verifiers accept",
    "tvm-results": "TVM's VM disagrees with phasec's interpreter after TVM's passes",
}


@dataclass
class Failure:
    """One property violation.

    ``before`` is the module the failing pass (``pass_spec``, at
    ``position`` in the sequence) ran on, ``after`` what it returned (if it
    returned); running ``pass_spec`` on ``before`` reproduces it.
    """

    kind: str
    message: str
    pass_spec: str | None = None
    position: int | None = None
    before: IRModule | None = None
    after: IRModule | None = None
    detail: str = ""

    @property
    def signature(self) -> tuple:
        """A key grouping failures that are (very likely) the same bug: the
        kind, the pass (without options) and, for invariant failures, the rule
        codes reported, else the first line of the message without names
        and numbers."""
        import re

        name = (self.pass_spec or "").split("{")[0]
        if self.kind == "invariant":
            codes = sorted(set(re.findall(r"\[([A-Z]{2}\d{3})\]", self.message)))
            return (self.kind, name, ",".join(codes))
        first = self.message.splitlines()[0] if self.message else ""
        return (self.kind, name, _strip_details(first))

    def __str__(self) -> str:
        where = f" in {self.pass_spec}" if self.pass_spec else ""
        return f"[{self.kind}]{where}: {self.message}"

    def report(self, max_lines: int = 80) -> str:
        """The failure with the module the failing pass ran on, as TVMScript."""
        text = [str(self)]
        if self.before is not None:
            lines = self.before.script().splitlines()
            if len(lines) > max_lines:
                lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines)"]
            text += ["", "The module it ran on:", *("    " + line for line in lines)]
        return "\n".join(text)


class PropertyFailure(AssertionError):
    """A property does not hold; ``failure`` says which and where (the message
    includes the module the failing pass ran on)."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(failure.report())


class HangError(Exception):
    """Raised inside a :func:`time_limit` block that ran too long."""


@dataclass
class SequenceReport:
    """What happened when a sequence ran on a module."""

    static_refusal: str | None = None  # the pass static validation refused
    dynamic_refusal: str | None = None  # the pass whose phase check failed when run
    passes_run: int = 0
    final: IRModule | None = None
    reached_build: bool = False
    failures: list[Failure] = field(default_factory=list)
    #: (pass name, phase it ran in, whether it is a transition), in order
    ran: list[tuple[str, Phase, bool]] = field(default_factory=list)
    vm_ran: bool = False  # the final module ran on the VM

    @property
    def ok(self) -> bool:
        return not self.failures


def _strip_details(text: str) -> str:
    """Drop the parts of a message that vary between instances of one bug."""
    import re

    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", text)
    text = re.sub(r"\b\d+(\.\d+)?\b", "N", text)
    return text[:160]


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`HangError` in the block after ``seconds`` (main thread,
    Unix only; elsewhere no limit)."""
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise HangError(f"still running after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def copy_args(args: Sequence[Any]) -> tuple:
    """Deep copies of numpy arguments (nothing may see another run's writes)."""
    def copy(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return v.copy()
        if isinstance(v, tuple):
            return tuple(copy(x) for x in v)
        return v
    return tuple(copy(a) for a in args)


def compare_results(expected: Any, actual: Any, rtol: float = RTOL, atol: float = ATOL,
                    where: str = "result") -> str | None:
    """None when equal, else a description of the first difference.

    Floats are equal within ``rtol`` plus ``atol`` times the largest finite
    magnitude of ``expected`` (at least 1); NaN equals NaN and infinities of
    the same sign are equal. Other dtypes, shapes and dtypes compare exactly.
    """
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"{where}: expected a tuple of {len(expected)}, got {_describe(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            problem = compare_results(e, a, rtol, atol, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(expected, (np.ndarray, np.generic)) or np.isscalar(expected):
        e = np.asarray(expected)
        try:
            a = np.asarray(actual)
        except Exception:  # noqa: BLE001 - any unconvertible value is a mismatch
            return f"{where}: expected a tensor, got {_describe(actual)}"
        if a.dtype == object:
            return f"{where}: expected a tensor, got {_describe(actual)}"
        if e.shape != a.shape:
            return f"{where}: shape {a.shape} instead of {e.shape}"
        if e.dtype != a.dtype:
            return f"{where}: dtype {a.dtype} instead of {e.dtype}"
        if e.dtype.kind == "f":
            # the absolute tolerance scales with the output's magnitude: rounding
            # errors of a different evaluation order grow with the values summed
            finite = np.abs(e[np.isfinite(e)])
            scale = max(1.0, float(finite.max())) if finite.size else 1.0
            ok = np.isclose(a, e, rtol=rtol, atol=atol * scale, equal_nan=True)
        else:
            ok = a == e
        if not np.all(ok):
            bad = tuple(int(i) for i in np.argwhere(~ok)[0]) if e.ndim else ()
            count = int(np.size(ok) - np.count_nonzero(ok))
            return (f"{where}: {count} of {e.size} element(s) differ; at index {bad}: expected "
                    f"{e[bad]!r}, got {a[bad]!r}")
        return None
    if expected is None or isinstance(expected, str):
        return None if actual == expected else f"{where}: expected {expected!r}, got {actual!r}"
    return None  # closures and other objects: not comparable by value


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"tensor {v.shape} {v.dtype}"
    if isinstance(v, tuple):
        return f"tuple of {len(v)}"
    return type(v).__name__


def verify_problem(mod: IRModule) -> str | None:
    """The verifier's errors for ``mod`` at its phase, as text, or None."""
    errors = [d for d in verifier.check(mod) if d.is_error]
    if not errors:
        return None
    return "\n".join(str(d) for d in errors[:8]) + (
        f"\n... and {len(errors) - 8} more" if len(errors) > 8 else "")


def merge_plain_blocks(mod: IRModule) -> IRModule:
    """``mod`` with adjacent ordinary binding blocks merged.

    TVMScript has no syntax for the boundary between two adjacent ordinary
    blocks, so the text round trip of a module that has them yields one
    block; that is the only difference the text round trip may show.
    """
    def seq(s: SeqExpr) -> SeqExpr:
        blocks: list = []
        changed = False
        for block in s.blocks:
            bindings = [binding(b) for b in block.bindings]
            if any(x is not y for x, y in zip(bindings, block.bindings)):
                block = type(block)(bindings, span=block.span)
                changed = True
            if blocks and type(block) is BindingBlock and type(blocks[-1]) is BindingBlock:
                prev = blocks.pop()
                block = BindingBlock([*prev.bindings, *block.bindings], span=prev.span)
                changed = True
            blocks.append(block)
        return SeqExpr(blocks, s.body, span=s.span) if changed else s

    def binding(b: Any) -> Any:
        v = b.value
        if isinstance(v, Function):
            new = func(v)
        elif isinstance(v, If):
            t, f = seq(v.true_branch), seq(v.false_branch)
            new = v if (t is v.true_branch and f is v.false_branch) else If(
                v.cond, t, f, struct_info=v.struct_info, span=v.span)
        else:
            return b
        return b if new is v else VarBinding(b.var, new, span=b.span)

    def func(f: Function) -> Function:
        body = seq(f.body)
        return f if body is f.body else Function(f.params, body, f.ret_struct_info, f.is_pure,
                                                 f.attrs, span=f.span)

    return mod.map_functions(lambda _, f: func(f))


def roundtrip_problem(mod: IRModule) -> str | None:
    """None when the text and JSON round trips of ``mod`` are exact (the text
    one up to :func:`merge_plain_blocks`)."""
    # (loaded on first use: importing the JSON format builds its schema, ~1 s)
    from phasec.script.json_format import from_json, to_json

    try:
        text = mod.script()
    except Exception as exc:  # noqa: BLE001 - any printer failure is a finding
        return f"printing failed: {type(exc).__name__}: {exc}"
    try:
        back = parse(text)
    except Exception as exc:  # noqa: BLE001
        return f"parsing the printed module failed: {type(exc).__name__}: {exc}"
    where = _first_mismatch(merge_plain_blocks(mod), back)
    if where is not None:
        return f"parse(mod.script()) differs from the module at {where}"
    try:
        again = from_json(to_json(mod))
    except Exception as exc:  # noqa: BLE001
        return f"JSON round trip failed: {type(exc).__name__}: {exc}"
    where = _first_mismatch(mod, again)
    if where is not None:
        return f"from_json(to_json(mod)) differs from the module at {where}"
    return None


def reference_results(mod: IRModule, args: Sequence[Any], entry: str = "main",
                      timeout: float | None = None) -> Any:
    """The interpreter's results (raises what the interpreter raises)."""
    with time_limit(timeout), _quiet():
        return interp.run(mod, *copy_args(args), entry=entry)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Programs drawn with R.print write to standard output: the properties
    run them many times, and a campaign's terminal is for its progress."""
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        yield


def run_vm(mod: IRModule, args: Sequence[Any], entry: str = "main", kernels: str = "llvm",
           timeout: float | None = None) -> Any:
    """Compile a build-phase module to VM bytecode and run it."""
    # (the VM and its LLVM backend load when something runs on it, as in phasec.pipeline)
    from phasec.backend.vm import VirtualMachine, codegen

    with time_limit(timeout), _quiet():
        exe = codegen(mod)
        return VirtualMachine(exe, kernels=kernels)[entry](*copy_args(args))


def _error_text(exc: BaseException) -> str:
    # the root cause, where a pass wrapped it
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    lines = traceback.format_exception(type(cause), cause, cause.__traceback__, limit=-6)
    return "".join(lines)


# ---------------------------------------------------------------------------
# Sequences
# ---------------------------------------------------------------------------

def _leaf_steps(seq: Any, ctx: Any) -> list[Any]:
    """The passes a Sequential runs, one by one, as the dynamic check sees
    them (written from the documented semantics, independently of
    ``Sequential.plan``): each leaf pass preceded by its required passes
    (theirs first), except a requirement still in effect — it ran, and only
    other requirements of the same pass ran since; passes the context
    disables are skipped, transitions never are."""
    ran: list[str] = []
    steps: list[Any] = []

    def still_in_effect(name: str, owner: Any) -> bool:
        for done in reversed(ran):
            if done == name:
                return True
            if done not in owner.required:
                return False
        return False

    def add(p: Any, chain: tuple = ()) -> None:
        for name in p.info.required:
            if name in chain or still_in_effect(name, p.info):
                continue
            add(get_pass(name), chain + (name,))
        steps.append(p)
        ran.append(p.info.name)

    for p in (seq.flatten() if isinstance(seq, Sequential) else [seq]):
        enabled, _ = ctx.pass_enabled(p.info)
        if enabled or p.info.is_transition:
            add(p)
    return steps


def check_sequence(mod: IRModule, seq: Any, args: Sequence[Any] | None = None, *,
                   expected: Any = None, compare: str = "each", vm: bool = True,
                   roundtrip: bool = False, opt_level: int = 3, kernels: str = "llvm",
                   rtol: float = RTOL, atol: float = ATOL, timeout: float | None = 60.0,
                   entry: str = "main", stop_at_first: bool = True) -> SequenceReport:
    """Run ``seq`` on ``mod`` pass by pass and check properties 1-3 (and 5).

    Args:
        args: inputs of ``entry``; None skips the result checks.
        expected: the interpreter's results on ``mod`` (computed if None).
        compare: ``"each"`` compares results after every pass (exact blame),
            ``"end"`` only at the end, ``"none"`` never.
        vm: when the sequence reaches the build phase, also run the VM.
        roundtrip: also check text/JSON round trips of every module produced.
        opt_level: the PassContext opt_level (3 runs every pass).
        kernels: how the VM runs PrimFuncs (``"llvm"`` or ``"interp"``).
        timeout: seconds allowed for each pass, interpreter or VM run.
    """
    if not isinstance(seq, Sequential):
        seq = Sequential(list(seq) if isinstance(seq, (list, tuple)) else [seq], name="fuzz")
    report = SequenceReport(final=mod)

    def fail(kind: str, message: str, **kw: Any) -> bool:
        report.failures.append(Failure(kind, message, **kw))
        return stop_at_first

    if args is not None and compare != "none" and expected is None:
        try:
            expected = reference_results(mod, args, entry, timeout)
        except HangError as exc:
            fail("hang", f"the interpreter on the input module: {exc}", before=mod)
            return report
        except Exception as exc:  # noqa: BLE001 - the generated program must run
            fail("reference", f"the interpreter failed on the input module: "
                 f"{type(exc).__name__}: {exc}", before=mod, detail=_error_text(exc))
            return report

    if roundtrip:
        problem = roundtrip_problem(mod)
        if problem is not None and fail("roundtrip", f"the input module: {problem}", before=mod):
            return report

    with PassContext(opt_level=opt_level, verify="off") as ctx:
        try:
            seq.plan(mod.phase, ctx)
        except PhaseError as exc:
            report.static_refusal = getattr(exc, "pass_name", None) or "?"
        steps = _leaf_steps(seq, ctx)
        current = mod
        for index, p in enumerate(steps):
            spec = p.spec()
            try:
                with time_limit(timeout):
                    result = p(current)
            except PhaseError:
                report.dynamic_refusal = p.info.name
                break
            except HangError as exc:
                fail("hang", f"{spec}: {exc}", pass_spec=spec, position=index, before=current)
                return report
            except Exception as exc:  # noqa: BLE001 - every other error is a crash
                fail("crash", f"{type(exc).__name__}: {exc}", pass_spec=spec, position=index,
                     before=current, detail=_error_text(exc))
                return report
            report.passes_run += 1
            report.ran.append((p.info.name, current.phase, p.info.is_transition))
            problem = verify_problem(result)
            if problem is not None:
                if fail("invariant", f"output is not well-formed at phase {result.phase.label}:"
                        f"\n{problem}", pass_spec=spec, position=index, before=current,
                        after=result):
                    return report
            # a pass that changed nothing returns its input, checked already
            # (round trips were a third of a campaign's time)
            if roundtrip and result is not current:
                problem = roundtrip_problem(result)
                if problem is not None and fail("roundtrip", problem, pass_spec=spec,
                                                position=index, before=current, after=result):
                    return report
            if args is not None and compare == "each" and result is not current:
                if not _check_results(report, fail, result, args, expected, spec, index,
                                      current, entry, timeout, rtol, atol):
                    return report
            current = report.final = result

    # property 1: the static verdict matches what running found
    if report.static_refusal != report.dynamic_refusal:
        static = (f"refused at {report.static_refusal}" if report.static_refusal
                  else "accepted")
        dynamic = (f"hit a PhaseError at {report.dynamic_refusal}" if report.dynamic_refusal
                   else "ran without a PhaseError")
        fail("validation", f"static validation {static}, but running the passes one by one "
             f"{dynamic}", pass_spec=seq.spec(), before=mod)
        return report
    if report.dynamic_refusal is not None:
        return report
    final = report.final
    if args is not None and compare == "end" and final is not mod:
        if not _check_results(report, fail, final, args, expected, seq.spec(), None, mod,
                              entry, timeout, rtol, atol):
            return report
    report.reached_build = final.phase == Phase.BUILD
    if vm and args is not None and compare != "none" and report.reached_build:
        report.vm_ran = True
        try:
            out = run_vm(final, args, entry, kernels, timeout)
        except HangError as exc:
            fail("hang", f"the VM: {exc}", pass_spec=seq.spec(), before=mod, after=final)
            return report
        except Exception as exc:  # noqa: BLE001
            fail("vm", f"the VM failed: {type(exc).__name__}: {exc}", pass_spec=seq.spec(),
                 before=mod, after=final, detail=_error_text(exc))
            return report
        problem = compare_results(expected, out, rtol, atol)
        if problem is not None:
            fail("vm", f"the VM's results differ from the interpreter's: {problem}",
                 pass_spec=seq.spec(), before=mod, after=final)
    return report


def _check_results(report: SequenceReport, fail: Any, result: IRModule, args: Sequence[Any],
                   expected: Any, spec: str, index: int | None, before: IRModule, entry: str,
                   timeout: float | None, rtol: float, atol: float) -> bool:
    """Compare the interpreter on ``result`` with ``expected``; False: stop."""
    try:
        got = reference_results(result, args, entry, timeout)
    except HangError as exc:
        return not fail("hang", f"the interpreter after {spec}: {exc}", pass_spec=spec,
                        position=index, before=before, after=result)
    except Exception as exc:  # noqa: BLE001
        return not fail("runtime", f"the interpreter failed on the output: "
                        f"{type(exc).__name__}: {exc}", pass_spec=spec, position=index,
                        before=before, after=result, detail=_error_text(exc))
    problem = compare_results(expected, got, rtol, atol)
    if problem is not None:
        return not fail("results", problem, pass_spec=spec, position=index, before=before,
                        after=result)
    return True


def assert_sequence_ok(mod: IRModule, seq: Any, args: Sequence[Any] | None = None,
                       **options: Any) -> SequenceReport:
    """:func:`check_sequence`, raising :class:`PropertyFailure` on the first failure."""
    report = check_sequence(mod, seq, args, **options)
    if report.failures:
        raise PropertyFailure(report.failures[0])
    return report
