"""Differential fuzzing against TVM 0.27 (``phasec fuzz --against tvm``).

Each generated module is printed in TVM's syntax and parsed by TVM
(``tvm.script.from_source``); then, by :func:`check_against_tvm`:

(a) **verdicts**: TVM's structural well-formedness check
    (``relax.analysis.check_well_formed``) must agree with phasec's verifier.
    A generated module is well-formed by construction, so TVM must accept it;
    one sequence in three instead injects a structural violation of a rule
    both check (:data:`AGREED`, with :mod:`phasec.testing.mutations`), which
    TVM must refuse.
(b) **TVM's passes**: ``LambdaLift`` (the transition into optimization, as in
    phasec's pipeline), a random sequence of TVM's optimization passes
    (:data:`OPTIMIZATION_POOL`), then, for most sequences, ``tvm.compile``'s
    whole default Relax pipeline to a VM executable, all under phasec's
    :class:`phasec.tvm.PhaseCheck`. Reported: a TVM pass whose output breaks
    an invariant of the phase the module is in (``tvm-phase``; the
    disagreements PHASES.md documents for TVM's pipeline are expected, see
    :func:`phasec.tvm.documented_deviation`, the one list PhaseCheck uses
    too), output phasec cannot read back
    (``tvm-unreadable``), a pass or the build raising on a module both
    verifiers accept (``tvm-crash``), and results of TVM's VM differing from
    phasec's interpreter on the same numpy inputs (``tvm-results``).

Modules are generated without closures (TVMScript cannot spell some of
them), packed calls (TVM's VM has not phasec's test functions), operators
TVM 0.27 does not have, operators TVM's CPU pipeline lowers to host-side TIR
phasec does not read (sort, argsort, topk, median: packed sorts), float
remainders (TVM's TIR takes ``%`` on integers only), or calls whose struct
info TVM 0.27 infers wrongly (:func:`tvm_type_defect`): :func:`tvm_can_read`
says why one is left out.

TVM is imported when a check runs, never at import.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.testing.mutations import MUTATIONS, mutate
from phasec.testing.properties import FAILURE_KINDS, Failure, HangError, compare_results, time_limit
from phasec import verifier
from phasec.errors import InputError
from phasec.ir import tir
from phasec.ir.expr import Call, Function, Op, PrimValue, Tuple
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.visitor import collect_exprs
from phasec.op.registry import find_op, list_ops
from phasec.testing.coverage import ops_in
from phasec.tvm import TVM_TRANSITIONS, PhaseCheck
from phasec.verifier import TVMCheck, all_rules

__all__ = ["TVMSequence", "TVMReport", "tvm_sequences", "tvm_pass_pool", "register_tvm_pass",
           "unregister_tvm_pass", "check_against_tvm", "tvm_can_read",
           "tvm_operators", "OPTIMIZATION_POOL", "AGREED", "PHASEC_STRICTER",
           "TEXT_CANNOT_CARRY", "TVM_DOES_NOT_CHECK", "TVM_KINDS",
           "has_float_remainder", "tvm_type_defect"]

#: Failure kinds of the TVM differential mode (described in FAILURE_KINDS).
TVM_KINDS: dict[str, str] = {k: v for k, v in FAILURE_KINDS.items() if k.startswith("tvm-")}


def _rules_where(check: TVMCheck) -> frozenset[str]:
    """The codes of the rules whose violation TVM treats as ``check`` says."""
    return frozenset(rule.code for rule in all_rules() if rule.tvm is check)


#: How TVM treats each rule's violation is the rule's own ``tvm`` (a
#: :class:`~phasec.verifier.TVMCheck`; tests/tvm_bridge/test_tvm_differential.py holds each
#: rule to it against TVM). Where the two disagree by design:
#: phase rules (TVM has no phases; phasec is stricter),
PHASEC_STRICTER = _rules_where(TVMCheck.NO_PHASES)
#: violations TVMScript text cannot carry (they read back as something legal:
#: each rule's tvm_note says as what),
TEXT_CANNOT_CARRY = _rules_where(TVMCheck.TEXT_CANNOT_CARRY)
#: checks TVM's check_well_formed does not make (each rule's tvm_note says why).
TVM_DOES_NOT_CHECK = _rules_where(TVMCheck.NOT_CHECKED)
#: structural rules both check, with a mutation: a violation must be refused by both.
AGREED = tuple(sorted(_rules_where(TVMCheck.REFUSES) & set(MUTATIONS)))

#: TVM optimization passes drawn before tvm.compile: each keeps main's
#: signature and results (no parameter binding, layout change or fast math).
OPTIMIZATION_POOL = (
    "AdjustMatmulOrder", "CanonicalizeBindings", "CombineParallelMatmul", "ConvertToDataflow",
    "DeadCodeElimination", "EliminateCommonSubexpr", "ExpandMatmulOfSum", "FoldConstant",
    "FuseTransposeMatmul", "Normalize", "RemoveRedundantReshape",
    "ReorderPermuteDimsAfterConcat", "ReorderTakeAfterMatmul", "TopologicalSort",
    "DecomposeOpsForInference", "InlinePrivateFunctions", "RemoveUnusedOutputs",
    "ExpandTupleArguments", "RemoveUnusedParameters",
)

#: The label tvm.compile's passes are counted under in the coverage table.
COMPILE = "tvm.compile"


@dataclass(frozen=True)
class TVMSequence:
    """What TVM runs on one module: ``LambdaLift`` when the module is in
    ingestion, ``passes`` (TVM pass names) and, when ``compile``, tvm.compile's
    default pipeline and a VM run. ``mutation``: a rule code whose violation
    is injected instead (verdicts only: nothing runs)."""

    passes: tuple[str, ...] = ()
    compile: bool = True
    mutation: str | None = None

    reach_notes: tuple[str, ...] = ()  # the campaign's interface (restricted pools)

    def spec(self) -> str:
        """``tvm: ...`` as reproducer files record it (read back by :meth:`parse`)."""
        if self.mutation:
            return f"tvm: mutation {self.mutation}"
        steps = list(self.passes) + ([COMPILE] if self.compile else [])
        return "tvm: " + (",".join(steps) or "(parse only)")

    @classmethod
    def parse(cls, spec: str) -> TVMSequence:
        """The sequence a reproducer's ``# sequence: tvm: ...`` line names."""
        body = spec.strip().removeprefix("tvm:").strip()
        if body.startswith("mutation "):
            return cls(mutation=body.split()[1])
        steps = [s.strip() for s in body.split(",") if s.strip() and s.strip() != "(parse only)"]
        return cls(tuple(s for s in steps if s != COMPILE), COMPILE in steps)


#: TVM passes by name that are not in ``tvm.relax.transform`` (see register_tvm_pass).
_EXTRA_PASSES: dict[str, Any] = {}


def register_tvm_pass(name: str, make: Any) -> None:
    """Make ``make()`` (a TVM pass) drawable by name in ``--against tvm``
    pools (``run_campaign(against="tvm", passes=[name])``): to fuzz a TVM
    pass of your own, or in tests, a planted bug."""
    _EXTRA_PASSES[name] = make


def unregister_tvm_pass(name: str) -> None:
    """Forget a pass :func:`register_tvm_pass` added."""
    _EXTRA_PASSES.pop(name, None)


def tvm_pass_pool(passes: Any) -> tuple[str, ...]:
    """The TVM pass names sequences are drawn from: ``passes`` (names, or a
    comma-separated string), each a registered one or a pass of
    ``tvm.relax.transform`` taking no arguments; None: OPTIMIZATION_POOL.
    An unknown name is an :class:`~phasec.errors.InputError`."""
    if passes is None:
        return OPTIMIZATION_POOL
    names = [n.strip() for n in passes.split(",")] if isinstance(passes, str) else list(passes)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InputError("--passes with --against tvm: give TVM pass names, e.g. "
                         "FoldConstant,CanonicalizeBindings")
    from tvm import relax

    for name in names:
        if name not in _EXTRA_PASSES and not callable(getattr(relax.transform, name, None)):
            raise InputError(f"--passes: {name!r} is not a pass of tvm.relax.transform "
                             f"(TVM {'.'.join(map(str, _tvm_version()))})")
    return tuple(names)


def _tvm_version() -> tuple[int, ...]:
    import tvm

    return tuple(int(p) for p in re.findall(r"\d+", tvm.__version__)[:2])


def _make_pass(name: str) -> Any:
    from tvm import relax

    if name in _EXTRA_PASSES:
        return _EXTRA_PASSES[name]()
    return getattr(relax.transform, name)()


def tvm_sequences(pool: Sequence[str] = OPTIMIZATION_POOL, *,
                  mutations: bool = True) -> st.SearchStrategy[TVMSequence]:
    """Random TVM sequences: a third inject a structural violation (when
    ``mutations``), the rest run 0-4 passes of ``pool`` then (nine times in
    ten) tvm.compile."""
    passes = st.lists(st.sampled_from(tuple(pool)), max_size=4).map(tuple)
    run = st.builds(TVMSequence, passes, st.integers(0, 9).map(lambda n: n > 0))
    if not mutations:
        return run
    mutated = st.sampled_from(AGREED).map(lambda code: TVMSequence(mutation=code))
    return st.one_of(run, run, mutated)


@dataclass
class TVMReport:
    """What :func:`check_against_tvm` found (``ran``/``vm_ran`` feed the
    campaign's coverage; ``ran`` names passes ``tvm.NAME``)."""

    failures: list[Failure] = field(default_factory=list)
    passes_run: int = 0
    reached_build: bool = False
    vm_ran: bool = False
    static_refusal: str | None = None
    ran: list[tuple[str, Phase, bool]] = field(default_factory=list)
    verdicts: list[Any] = field(default_factory=list)


#: Operators TVM 0.27 registers but tvm.compile cannot build (its VM codegen
#: fails on the call LegalizeOps leaves): left out of the modules drawn against TVM.
TVM_CANNOT_BUILD = {
    "relax.hint_on_device": "only RealizeVDevice removes it, and tvm.compile never runs it",
    "relax.wrap_param": "TVM registers no legalization for it",
}


@lru_cache(maxsize=1)
def tvm_operators() -> frozenset[str]:
    """Operators of phasec's registry that TVM 0.27 also registers and
    tvm.compile builds (see :data:`TVM_CANNOT_BUILD`)."""
    import tvm

    found = set()
    for op in list_ops():
        try:
            tvm.ir.Op.get(op.name)
        except Exception:  # noqa: BLE001 - not registered in TVM
            continue
        if op.name not in TVM_CANNOT_BUILD:
            found.add(op.name)
    return frozenset(found)


def _kernel_exprs(mod: IRModule) -> Iterator[Any]:
    """The expressions of ``mod``'s kernels: their statements' values and
    conditions, and everything inside them."""
    for func in mod.functions.values():
        if not isinstance(func, tir.PrimFunc):
            continue
        stack: list[Any] = [func.body]
        while stack:
            node = stack.pop()
            if isinstance(node, tir.Stmt):
                stack.extend(tir.stmt_children(node))
                stack.extend(getattr(node, f) for f in ("value", "condition")
                             if isinstance(getattr(node, f, None), tir.PrimExpr))
            elif isinstance(node, tir.PrimExpr):
                yield node
                stack.extend(tir.expr_children(node))


def has_float_remainder(mod: IRModule) -> bool:
    """Whether a kernel of ``mod`` takes a float ``%``, which TVM's TIR has on
    integers only (a hand-written kernel may; phasec's lowering of floor_mod
    and mod on floats uses ``T.fmod`` instead)."""
    return any(type(n) is tir.BinaryOp and n.op == "%" and tir.is_float(n.dtype)
               for n in _kernel_exprs(mod))


def tvm_type_defect(mod: IRModule) -> str | None:
    """Why TVM 0.27 would refuse ``mod``'s correct struct info (a known defect
    of TVM's type inference, listed in PHASES.md), or None.

    * ``R.arange`` with a negative step: TVM's length assumes a positive step
      (``R.arange(1, -2, -1)``: TVM 5 elements, numpy and phasec 3).
    * ``R.meshgrid(..., indexing="xy")`` whose first two inputs differ in
      length: TVM's inference ignores ``indexing`` (numpy, and phasec, swap
      the first two axes of every grid).
    """
    def length(si: Any) -> Any:
        return si.shape[0] if isinstance(si, TensorStructInfo) and si.shape else None

    for func in mod.functions.values():
        if not isinstance(func, Function):
            continue
        for call in collect_exprs(func, (Call,)):
            if type(call.op) is not Op:
                continue
            if call.op.name == "relax.arange" and len(call.args) == 3:
                step = call.args[2]
                value = step.value if type(step) is PrimValue else None
                if isinstance(value, (tir.IntImm, tir.FloatImm)) and value.value < 0:
                    return ("R.arange with a negative step: TVM 0.27 infers its length as if "
                            "the step were positive")
            if call.op.name == "relax.meshgrid" and call.attrs.get("indexing") == "xy":
                grids = call.args[0]
                if type(grids) is Tuple:
                    items = [f.struct_info for f in grids.fields]
                else:
                    items = list(getattr(grids.struct_info, "fields", None) or ())
                if len(items) >= 2:
                    a, b = length(items[0]), length(items[1])
                    same = a is not None and b is not None and (
                        a is b or (isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm)
                                   and a.value == b.value))
                    if not same:
                        return ('R.meshgrid(..., indexing="xy"): TVM 0.27 infers the "ij" '
                                "shapes (its inference ignores indexing)")
    return None


#: operators whose TVM 0.27 CPU lowering phasec cannot read back (checked with
#: relax.backend.DispatchSortScan then LegalizeOps: T.call_packed in the TIR)
_HOST_TIR_OPS = frozenset({"sort", "argsort", "topk", "median"})


def _called_ops(mod: IRModule) -> set[str]:
    return set(re.findall(r"\bR\.([A-Za-z_][\w.]*)\(", mod.script(syntax="tvm")))


#: TIR intrinsics phasec's kernels call that TVM 0.27 has none of (the
#: integer GEMM's 8-bit dot product, lowered to vpdpbusd)
PHASEC_TIR_INTRINSICS = frozenset({"dot4_u8s8"})


def phasec_own_operator(mod: IRModule) -> str | None:
    """Why TVM 0.27 cannot even parse ``mod`` (it calls an operator only
    phasec has, such as ``R.nn.lstm``, or a kernel calls such an intrinsic,
    ``T.dot4_u8s8``), or None."""
    for name in sorted(_called_ops(mod)):
        if find_op("relax." + name) is not None and "relax." + name not in tvm_operators():
            return f"R.{name} is phasec's own operator (TVM 0.27 has none of that name)"
    for node in _kernel_exprs(mod):
        if type(node) is tir.Call and node.name in PHASEC_TIR_INTRINSICS:
            return f"T.{node.name} is phasec's own intrinsic (TVM 0.27 has none of that name)"
    return None


def tvm_can_read(mod: IRModule) -> str | None:
    """None when TVM 0.27 can take ``mod`` as it is, else why not."""
    own = phasec_own_operator(mod)
    if own is not None:
        return own
    for name in _called_ops(mod):
        if "relax." + name in TVM_CANNOT_BUILD:
            return f"R.{name}: tvm.compile cannot build it ({TVM_CANNOT_BUILD['relax.' + name]})"
        if name in _HOST_TIR_OPS:
            return (f"R.{name}: TVM's CPU pipeline (DispatchSortScan) lowers it to TIR that "
                    "calls a packed sort (T.call_packed), host-side TIR phasec does not read")
    if has_float_remainder(mod):
        return "a float % in a kernel (TVM's TIR takes % on integers only)"
    return tvm_type_defect(mod)


def _first_line(exc: BaseException) -> str:
    """The first meaningful line of a (TVM) error, without its traceback."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # TVM puts "XxxError: message" after its C++ traceback
        if (re.match(r"^(tvm\.)?\w*(Error|Exception)\b:", ln) or ln.startswith("Check failed")
                or ln.startswith("error:")):  # TVMScript's parser: "error: ..." then a caret
            return ln[:300]
    return (lines[-1] if lines else type(exc).__name__)[:300]


def _to_numpy(value: Any) -> Any:
    """TVM's VM results as numpy arrays, tuples and Python numbers."""
    import numpy as np

    if hasattr(value, "numpy"):
        return value.numpy()
    if isinstance(value, (int, float, bool, np.generic)):
        return value
    try:
        return tuple(_to_numpy(v) for v in value)
    except TypeError:
        return value


def _tvm_verdict(text: str) -> tuple[Any, str | None]:
    """TVM's parse of ``text`` and None, or None and why TVM refuses it."""
    import tvm
    from tvm import relax

    try:
        tvm_mod = tvm.script.from_source(text)
    except Exception as exc:  # noqa: BLE001 - TVM's parser refusing is a verdict
        return None, f"TVM's parser refuses it: {_first_line(exc)}"
    try:
        ok = bool(relax.analysis.check_well_formed(tvm_mod))
    except Exception as exc:  # noqa: BLE001
        return None, f"TVM's check_well_formed raises: {_first_line(exc)}"
    return (tvm_mod, None) if ok else (None, "TVM's check_well_formed says not well-formed")


def check_against_tvm(mod: IRModule, seq: TVMSequence, args: Sequence[Any] | None,
                      expected: Any = None, *, timeout: float | None = 60.0,
                      isolate: bool = True) -> TVMReport:
    """Check ``mod`` against TVM as ``seq`` says (see the module docstring).

    ``expected`` is phasec's interpreter's result on ``args`` (None: results
    are not compared). Every finding is a :class:`Failure` in the report.

    ``isolate``: run TVM in a forked child process (where fork exists), so
    that TVM crashing the process (a segfault in its C++ code, as its
    printer does on some modules) is a ``tvm-crash`` finding naming the
    pass, not the end of the campaign; a child still running after
    ``timeout`` (twice, plus a minute, for the whole check) is killed.
    """
    if isolate and hasattr(os, "fork"):
        return _isolated(mod, seq, args, expected, timeout)
    return _check(mod, seq, args, expected, timeout)


#: In a forked child: the pipe the stages are written to (see _isolated).
_progress_fd: int | None = None


def _stage(text: str) -> None:
    """Tell the parent what the child is doing (the last stage names a crash)."""
    if _progress_fd is not None:
        os.write(_progress_fd, b"S" + text.encode("utf-8", "replace").replace(b"\n", b" ")
                 + b"\n")


def _isolated(mod: IRModule, seq: TVMSequence, args: Sequence[Any] | None, expected: Any,
              timeout: float | None) -> TVMReport:
    global _progress_fd
    import base64
    import pickle
    import select
    import signal
    import time

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check, send the report, leave without cleanups
        status = 0
        try:
            os.close(read_fd)
            _progress_fd = write_fd
            report = _check(mod, seq, args, expected, timeout)
            report.verdicts = []
            for failure in report.failures:
                failure.before = failure.after = None
            blob = base64.b64encode(pickle.dumps(report))
            view = memoryview(b"R" + blob + b"\n")
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:  # noqa: BLE001 - the parent reports a child without report
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks: list[bytes] = []
    limit = time.monotonic() + 2 * (timeout or 60.0) + 60.0
    killed = False
    try:
        while True:
            left = limit - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                data = os.read(read_fd, 1 << 16)
                if not data:
                    break
                chunks.append(data)
    except BaseException:  # Ctrl-C or SIGTERM: the child goes too
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    stages = [ln[1:].decode("utf-8", "replace") for ln in b"".join(chunks).split(b"\n")
              if ln.startswith(b"S")]
    for line in b"".join(chunks).split(b"\n"):
        if line.startswith(b"R"):
            report: TVMReport = pickle.loads(base64.b64decode(line[1:]))
            return report
    where = stages[-1] if stages else "parsing the module"
    report = TVMReport()
    if killed:
        why = "TVM ran past the time limit"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = f"TVM crashed the process ({signal.Signals(sig).name})"
    else:
        why = f"the TVM check ended without a report (exit status {os.WEXITSTATUS(status)})"
    pass_name = where.split(" ", 1)[1] if " " in where else where
    report.failures.append(Failure("tvm-crash", f"{why} {where}", pass_spec=pass_name,
                                   detail="stages: " + " | ".join(stages[-8:])))
    return report


def _check(mod: IRModule, seq: TVMSequence, args: Sequence[Any] | None, expected: Any,
           timeout: float | None) -> TVMReport:
    report = TVMReport()
    if seq.mutation:
        if MUTATIONS[seq.mutation].since > mod.phase:
            report.static_refusal = f"mutation {seq.mutation} needs a later phase"
            return report
        try:
            bad = mutate(mod, seq.mutation)
        except Exception:  # noqa: BLE001 - no place for it in this module
            report.static_refusal = f"mutation {seq.mutation} has no place here"
            return report
        codes = {d.code for d in verifier.check(bad, mod.phase) if d.severity == verifier.ERROR}
        text = bad.script(syntax="tvm")
        tvm_mod, refusal = _tvm_verdict(text)
        if seq.mutation not in codes:  # the mutation did not take: nothing to compare
            report.static_refusal = f"mutation {seq.mutation} not injected"
        elif tvm_mod is not None:
            what = MUTATIONS[seq.mutation].description
            report.failures.append(Failure(
                "tvm-verdict", f"phasec rejects {seq.mutation} ({what}) but TVM's "
                f"check_well_formed accepts the module",
                pass_spec=f"mutation {seq.mutation}", detail=text))
        return report
    text = mod.script(syntax="tvm")
    _stage("in tvm.script.from_source")
    tvm_mod, refusal = _tvm_verdict(text)
    if tvm_mod is None:
        report.failures.append(Failure("tvm-verdict", f"phasec's verifier accepts the module, "
                                       f"but {refusal}", pass_spec="tvm.script.from_source",
                                       detail=text))
        return report
    ops = ", ".join(sorted(n.removeprefix("relax.") for n in ops_in(mod)))
    _run_tvm(tvm_mod, mod.phase, seq, args, expected, report, timeout, ops)
    return report


def _run_tvm(tvm_mod: Any, phase: Phase, seq: TVMSequence, args: Sequence[Any] | None,
             expected: Any, report: TVMReport, timeout: float | None, ops: str) -> None:
    import numpy as np
    import tvm
    from tvm import relax

    check = PhaseCheck()
    ran: list[str] = []
    current = [""]

    @tvm.instrument.pass_instrument
    class _Follow:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            current[0] = info.name
            _stage(f"in {info.name}")

        def run_after_pass(self, mod: Any, info: Any) -> None:
            ran.append(info.name)
            before = check._state.phase or phase
            _stage(f"printing-the-output-of {info.name}")  # PhaseCheck reads TVM's text
            verdict = check.after_pass(mod, info.name)
            report.ran.append((f"tvm.{info.name}", before, info.name in TVM_TRANSITIONS))
            if verdict is not None and not verdict.ok and not verdict.documented:
                report.verdicts.append(verdict)
            # what fails before the next pass starts is outside a pass (tvm.compile's
            # VM codegen after its last Relax pass, TIR lowering between passes)
            if not info.name.startswith("_") and info.name != "sequential":
                current[0] = f"{COMPILE} after {info.name}"

    names = (["LambdaLift"] if phase == Phase.INGESTION else []) + list(seq.passes)
    executable = None
    try:
        with time_limit(timeout), tvm.transform.PassContext(opt_level=3,
                                                             instruments=[_Follow()]):
            passes = [_make_pass(n) for n in names]
            out = tvm.transform.Sequential(passes)(tvm_mod)
            if seq.compile:
                current[0] = f"{COMPILE} (codegen)"
                _stage(f"in {current[0]}")
                executable = tvm.compile(out, target="llvm")
    except HangError as exc:
        report.failures.append(Failure("tvm-crash", f"TVM ran past the time limit: {exc}",
                                       pass_spec=current[0] or None))
    except Exception as exc:  # noqa: BLE001 - a TVM pass or TVM's build failed
        report.failures.append(Failure(
            "tvm-crash", f"{type(exc).__name__}: {_first_line(exc)}",
            pass_spec=current[0] or None, detail=traceback.format_exc()[-4000:]))
    report.passes_run = len(ran)
    report.reached_build = check._state.phase == Phase.BUILD
    for verdict in report.verdicts[:1]:  # the first pass to break its phase
        kind = "tvm-unreadable" if verdict.unreadable else "tvm-phase"
        if verdict.unreadable:
            message = f"phasec cannot read TVM's output: {verdict.unreadable}"
        else:
            codes = sorted({d.code for d in verdict.diagnostics})
            message = (f"{','.join(codes) or 'phase order'} in phase {verdict.phase.label}: "
                       + "; ".join([*(f"{d.code}: {d.message}" for d in verdict.diagnostics),
                                    *([verdict.order_error] if verdict.order_error else [])]))
        report.failures.insert(0, Failure(kind, message, pass_spec=verdict.pass_name,
                                          detail=verdict.describe()))
    if executable is None or expected is None or args is None:
        return
    _stage("running TVM's VM")
    try:
        with time_limit(timeout):
            vm = relax.VirtualMachine(executable, tvm.cpu())
            # numpy scalars (a 0-d bool input) are tensors too; np.array, not
            # ascontiguousarray, which makes a 0-d array 1-d
            targs = [tvm.runtime.tensor(np.array(a, order="C"))
                     if isinstance(a, (np.ndarray, np.generic)) else a for a in args]
            got = _to_numpy(vm["main"](*targs))
    except Exception as exc:  # noqa: BLE001 - TVM's VM failed where phasec's interpreter ran
        report.failures.append(Failure("tvm-results", f"TVM's VM fails where phasec's "
                                       f"interpreter runs: {type(exc).__name__}: "
                                       f"{_first_line(exc)}", pass_spec=COMPILE,
                                       detail=traceback.format_exc()[-4000:]))
        return
    report.vm_ran = True
    problem = compare_results(expected, got)
    if problem is not None:
        # the first line (the signature) names the operators, not where the
        # values differ: one reproducer per operator set, not per index
        report.failures.append(Failure("tvm-results", f"TVM's VM and phasec's interpreter "
                                       f"differ on a module calling {ops or 'no operator'}\n"
                                       f"{problem}", pass_spec=COMPILE,
                                       detail=f"TVM sequence: {seq.spec()}"))
