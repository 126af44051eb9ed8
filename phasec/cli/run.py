"""``phasec run``: compile a module, run it on the VM and check it.

    phasec run                                  # the bundled MLP example
    phasec run --example transformer --dim n=2  # another bundled example
    phasec run model.py --inputs inputs.npz --repeat 20
    phasec run model.pvm                        # a saved executable: just run it

For a module (TVMScript, JSON or a bundled example) it

1. compiles it with :func:`phasec.pipeline.lower` and shows every pass with
   its phase (before -> after), its time and the verifier's time;
2. generates VM bytecode and compiles the kernels with LLVM;
3. runs the entry function ``--repeat`` times and prints the best time;
4. runs the ORIGINAL module on the reference interpreter
   (:func:`phasec.interp.run`) and compares: the maximum absolute error, the
   relative error ``max|vm - ref| / max|ref|``, PASS or FAIL. The exit
   status is 1 on FAIL. NaN and infinity must sit where the reference has
   them; an output with no finite value at all is a FAIL (nothing was
   checked).

**Repeats.** ``--repeat N`` runs exactly N times. By default runs repeat up
to 10 times within about two seconds, so a slow model (a large one on the
TIR interpreter) runs once; runs longer than a second report progress on
standard error.

**Inputs.** ``--inputs FILE.npz`` gives arrays by parameter name (float64
arrays for float32 parameters are cast, with a note); every parameter it does
not give gets a random value, seeded by ``--seed`` (0): floats from a normal
distribution with standard deviation ``1/sqrt(n)``, ``n`` the product of all
but the first dimension (1 for scalars and vectors) — the fan-in scaling of
weight initialisers, which keeps the activations of deep models finite where
unscaled N(0, 1) values overflow —, integers in [0, 8), booleans uniformly. Shapes come from the parameters' struct info; a symbolic
dimension (``n``) takes its value from an array given in ``--inputs``, else
from ``--dim n=VALUE``, else 1. All random inputs together may take half the
memory available (``MemAvailable``, or less if the process's cgroup allows
less): a larger shape is an error naming the parameter, its shape and that
cap. They are made in place in their dtype, a chunk at a time
(:mod:`phasec.runtime.random_inputs`).

**Tolerance.** ``--rtol`` (default 1e-4) bounds ``max|vm - ref| / max|ref|``
for float outputs; other outputs must be equal. The kernels compute in
float32 like numpy but sum in a different order (vectorized, tiled) and use
phasec's vectorized exp/erf/tanh (within 4 ulps), so a reduction over K
terms may differ by about K * 2^-24 relative to the terms' magnitude; the
error is measured against the output's largest magnitude because an element
near zero that results from cancelling terms cannot be held to a relative
bound of its own.

A saved executable (``phasec build``) runs the same way: it records the
struct info of every function's parameters (:meth:`Executable.signature`),
so random inputs and symbolic dimensions work as for a module (an
executable of an older phasec, which does not record them, needs
``--inputs``). Without the original module there is no reference to compare
with; the check is skipped and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import textwrap
import time
import zipfile
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from phasec.backend.llvm import compile_prim_funcs, get_num_threads, set_num_threads
from phasec.backend.vm import Executable, VirtualMachine, profile_run
from phasec.backend.vm.vm import DEFAULT_MAX_CALL_DEPTH
from phasec.backend.vm.profiler import array_text
from phasec.buildcache import compile_and_remember, compile_worker_ahead, lookup
from phasec.errors import InputError, PhasecError, counted
from phasec.fileio import same_file, write_atomic
from phasec import interp
from phasec.pipeline import codegen_and_compile, lower
from phasec.script.parser import parse
from phasec.cli._ort import ort_profile
from phasec.cli._inputs import DEFAULT_DIM, load_npz, make_inputs, onnx_input_names, parse_dims
from phasec.cli._report import CliReport, add_report_argument
from phasec.cli._validate import add_validate_arguments, validate_instruments
from phasec.ir import IRModule
from phasec.ir.expr import Function
from phasec.ir.struct_info import StructInfo
from phasec.transform import VERIFY_MODES, PassInstrument, get_pass, list_passes, load_plugins
from phasec.verifier.inputs import check_input
from phasec.cli.build import (
    EXECUTABLE_SUFFIX, add_bounds_arguments, add_kernels_argument, add_pipeline_arguments,
    add_threads_argument, pipeline_instruments, print_pipeline_instruments,
)
from phasec.cli.opt import check_opt_level, check_outputs_differ, read_module

#: bundled example models (files phasec/examples/<name>.py)
EXAMPLES: tuple[str, ...] = ("mlp", "cnn", "transformer")
DEFAULT_EXAMPLE = "mlp"
DEFAULT_RTOL = 1e-4
#: default repeats: up to DEFAULT_REPEAT runs, stopping once they took REPEAT_BUDGET_SECONDS
DEFAULT_REPEAT = 10
REPEAT_BUDGET_SECONDS = 2.0
#: what --emit prints
EMIT_KINDS = ("llvm", "asm", "vm")
#: the width the report is wrapped to
OUTPUT_COLUMNS = 100
#: a run longer than this reports progress on standard error
PROGRESS_SECONDS = 1.0


# -- bundled examples -----------------------------------------------------------
def example_source(name: str) -> str:
    """The TVMScript text of a bundled example (package data)."""
    if name not in EXAMPLES:
        raise InputError(f"unknown example {name!r}; the bundled examples are "
                         f"{', '.join(EXAMPLES)}")
    return (resources.files("phasec") / "examples" / f"{name}.py").read_text(encoding="utf-8")


def load_example(name: str) -> IRModule:
    """A bundled example model, parsed (ingestion phase)."""
    return parse(example_source(name), filename=f"phasec/examples/{name}.py")


# -- arguments ----------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", nargs="?", default=None,
                        help="module file (.py TVMScript, .json), ONNX model (.onnx) or "
                             "executable (phasec build); "
                             f"default: the bundled {DEFAULT_EXAMPLE} example")
    parser.add_argument("--example", choices=EXAMPLES, default=None,
                        help=f"run a bundled example model (default {DEFAULT_EXAMPLE})")
    parser.add_argument("--inputs", metavar="NPZ", default=None,
                        help="arrays by parameter name (.npz); parameters not given are random")
    parser.add_argument("--entry", default="main", help="function to run (default main)")
    parser.add_argument("--opt-level", type=int, default=2, metavar="N",
                        help="optimization level, 0 to 4 (default 2)")
    parser.add_argument("--verify", choices=VERIFY_MODES, default="each",
                        help="verify after every pass (each, the default), transitions, or off")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help=f"run N times and report the best time (default: up to "
                             f"{DEFAULT_REPEAT} runs within {REPEAT_BUDGET_SECONDS:g} s)")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help=f"value of a symbolic dimension, e.g. n=4 (default {DEFAULT_DIM}); "
                             "repeatable")
    parser.add_argument("--max-call-depth", type=int, default=DEFAULT_MAX_CALL_DEPTH,
                        metavar="N",
                        help=f"most Relax calls pending at once on the VM and the reference "
                             f"interpreter (default {DEFAULT_MAX_CALL_DEPTH:,}): a guard against "
                             f"runaway recursion; calls in tail position (an ONNX Loop's) "
                             f"do not count")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random inputs (default 0): floats are normal with "
                             "standard deviation 1/sqrt(n), n the product of all but the first "
                             "dimension, so deep models stay finite; integers in [0, 8)")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                        help=f"tolerance of the check, max|vm-ref|/max|ref| (default {DEFAULT_RTOL:g})")
    add_kernels_argument(parser, "run kernels as native code compiled with LLVM (llvm, the "
                                 "default) or on the TIR interpreter (interp)")
    add_threads_argument(parser)
    parser.add_argument("--profile", action="store_true",
                        help="after the run, time each kernel and the VM between them (the "
                             "best of several rounds); for an .onnx model, ONNX Runtime's own "
                             "profile of the same inputs beside it, at the same thread count")
    # default (None): check every buffer access not proven in bounds at compile time
    add_bounds_arguments(parser)
    add_pipeline_arguments(parser)
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="do not list the passes, no progress lines")
    add_report_argument(parser)
    add_validate_arguments(parser, inputs_option=False)
    parser.add_argument("--save-inputs", metavar="NPZ", default=None,
                        help="write the inputs of the run (given or random) to NPZ, one array "
                             "per parameter name: a later run takes them with --inputs NPZ")
    parser.add_argument("--save-outputs", metavar="NPZ", default=None,
                        help="write the outputs to NPZ: 'output' for one tensor, 'output[0]', "
                             "'output[1][0]', ... for the leaves of a tuple")
    parser.add_argument("--emit", choices=EMIT_KINDS, default=None,
                        help="print the compiled code instead of running it: the kernels' "
                             "optimized LLVM IR (llvm), their host assembly (asm), or the VM "
                             "bytecode (vm)")


# -- the pass log -------------------------------------------------------------------------
class PassLog(PassInstrument):
    """Every pass call in order: phase before and after, time, verifier time,
    and passes skipped (with the reason).

    The verify column says ``cached`` for a pass whose result needed no new
    verification (the pass handed back a module already verified), and
    ``-`` where the verify mode checks nothing after that pass.
    """

    def __init__(self, verify_mode: str = "each") -> None:
        self.verify_mode = verify_mode
        self.rows: list[dict[str, Any]] = []
        self._stack: list[tuple[int, float]] = []
        self._pending_verify = 0.0
        self._pending_required: dict[str, str] = {}

    def enter_pass_ctx(self) -> None:
        self.__init__(self.verify_mode)

    def run_before_required(self, mod: IRModule, info: Any, required_by: Any) -> None:
        self._pending_required[info.name] = required_by.name

    def run_after_verify(self, mod: IRModule, info: Any, seconds: float, stage: str) -> None:
        if stage == "input":  # verified before the pass starts: count it for the pass
            self._pending_verify += seconds
            return
        for row in reversed(self.rows):
            if row["name"] == info.name:
                row["verify"] += seconds
                row["verified"] = True
                return

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self.rows.append({"name": info.name, "before": mod.phase, "after": mod.phase,
                          "seconds": 0.0, "verify": self._pending_verify,
                          "verified": self._pending_verify > 0, "status": "running",
                          "reason": "", "required_by": self._pending_required.pop(info.name, None),
                          "depth": len(self._stack)})
        self._pending_verify = 0.0
        self._stack.append((len(self.rows) - 1, time.perf_counter()))

    def _finish(self, mod: IRModule, status: str, reason: str = "") -> None:
        index, start = self._stack.pop()
        row = self.rows[index]
        row.update(seconds=time.perf_counter() - start, after=mod.phase, status=status,
                   reason=reason)

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        if self._stack:
            self._finish(mod, "ran")

    def run_on_error(self, mod: IRModule, info: Any, error: BaseException) -> None:
        if self._stack and self.rows[self._stack[-1][0]]["name"] == info.name:
            self._finish(mod, "failed", str(error).splitlines()[0] if str(error) else "")

    def run_on_skip(self, mod: IRModule, info: Any, reason: str) -> None:
        self.rows.append({"name": info.name, "before": mod.phase, "after": mod.phase,
                          "seconds": 0.0, "verify": 0.0, "status": "skipped", "reason": reason,
                          "required_by": self._pending_required.pop(info.name, None),
                          "depth": len(self._stack)})

    def _verify_cell(self, row: dict[str, Any]) -> str:
        if row.get("verified"):
            return f"{row['verify'] * 1e3:.3f}"
        transition = row["before"] != row["after"]
        checked = self.verify_mode == "each" or (self.verify_mode == "transitions" and transition)
        return "cached" if checked and row["status"] == "ran" else "-"

    def render(self) -> str:
        header = f"  {'#':>3}  {'pass':<24} {'phase':<28} {'time (ms)':>10} {'verify (ms)':>12}"
        lines = [header, "  " + "-" * (len(header) - 2)]
        total = verify = 0.0
        number = 0
        for row in self.rows:
            before, after = row["before"], row["after"]
            phase = before.label if before == after else f"{before.label} -> {after.label}"
            name = "  " * row["depth"] + row["name"]
            if row["status"] == "skipped":
                lines.append(f"  {'-':>3}  {name:<24} {phase:<28} skipped: {row['reason']}")
                continue
            number += 1
            if row["depth"] == 0:
                total += row["seconds"]
            verify += row["verify"]
            note = f"  (required by {row['required_by']})" if row["required_by"] else ""
            if row["status"] == "failed":
                note += f"  FAILED: {row['reason']}"
            lines.append(f"  {number:>3}  {name:<24} {phase:<28} {row['seconds'] * 1e3:>10.3f} "
                         f"{self._verify_cell(row):>12}{note}")
        lines.append("  " + "-" * (len(header) - 2))
        lines.append(f"  {'':>3}  {'total':<24} {'':<28} {total * 1e3:>10.3f} "
                     f"{verify * 1e3:>12.3f}")
        return "\n".join(lines)


# -- comparing results --------------------------------------------------------------------
def _leaves(value: Any, path: str = "output") -> Iterator[tuple[str, Any]]:
    if isinstance(value, (tuple, list)) and not _is_shape(value):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value) \
        and len(value) > 0


def _describe(value: Any) -> str:
    return array_text(value) if isinstance(value, np.ndarray) else type(value).__name__


def summarize(value: np.ndarray) -> str:
    """A short text summary of an array (numbers as plain Python floats)."""
    if value.size == 0:
        return "empty"
    if value.dtype.kind in "fc":
        flat = value.ravel()
        first = ", ".join(f"{float(x):.4g}" for x in flat[:3])
        finite = flat[np.isfinite(flat)]
        bad = flat.size - finite.size
        note = f"  ({bad} NaN or infinite)" if bad else ""
        if not finite.size:
            return f"no finite value{note}  first [{first}{', ...' if flat.size > 3 else ''}]"
        return (f"min {float(finite.min()):.4g}  max {float(finite.max()):.4g}  "
                f"mean {float(finite.mean()):.4g}{note}  "
                f"first [{first}{', ...' if flat.size > 3 else ''}]")
    flat = value.ravel()
    return f"first [{', '.join(str(x) for x in flat[:6].tolist())}{', ...' if flat.size > 6 else ''}]"


def compare(out: Any, ref: Any, rtol: float) -> tuple[bool, list[str]]:
    """Compare the VM's result with the reference: (passed, one line per leaf)."""
    outs, refs = list(_leaves(out)), list(_leaves(ref))
    if len(outs) != len(refs):
        return False, [f"output has {len(outs)} values, the reference {len(refs)}"]
    ok = True
    lines = []
    for (path, y), (_, r) in zip(outs, refs):
        y = np.asarray(y) if isinstance(y, np.generic) else y
        r = np.asarray(r) if isinstance(r, np.generic) else r
        if isinstance(y, np.ndarray) and isinstance(r, np.ndarray):
            if y.shape != r.shape or y.dtype != r.dtype:
                ok = False
                lines.append(f"{path}: {_describe(y)}, but the reference is {_describe(r)}  FAIL")
                continue
            if y.dtype.kind in "fc":
                problem = _non_finite_problem(y, r)
                if problem:
                    ok = False
                    lines.append(f"{path}: {_describe(y)}: {problem}  FAIL")
                    continue
                finite = np.isfinite(r)
                y64 = np.where(finite, y, 0).astype(np.float64)
                r64 = np.where(finite, r, 0).astype(np.float64)
                abs_err = float(np.max(np.abs(y64 - r64))) if y.size else 0.0
                scale = float(np.max(np.abs(r64))) if r.size else 0.0
                rel_err = abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else float("inf"))
                good = rel_err <= rtol
                ok &= good
                lines.append(f"{path}: {_describe(y)}  max abs error {abs_err:.3g}, max rel error "
                             f"{rel_err:.3g} (tolerance {rtol:g})  {'PASS' if good else 'FAIL'}")
            else:
                good = bool(np.array_equal(y, r))
                ok &= good
                mismatched = int(np.count_nonzero(y != r)) if not good else 0
                lines.append(f"{path}: {_describe(y)}  "
                             f"{'equal' if good else f'{mismatched} elements differ'}  "
                             f"{'PASS' if good else 'FAIL'}")
        else:
            good = _plain(y) == _plain(r)
            ok &= good
            lines.append(f"{path}: {_plain(y)!r} vs reference {_plain(r)!r}  "
                         f"{'PASS' if good else 'FAIL'}")
    return ok, lines


def _non_finite_problem(y: np.ndarray, r: np.ndarray) -> str:
    """Why NaN/inf values make the comparison fail, or '' when they do not."""
    if y.size and not np.isfinite(y).any():
        what = "NaN" if np.isnan(y).all() else "NaN or infinite"
        return (f"every value is {what}, so nothing could be checked (the computation "
                "overflowed: try smaller inputs)")
    if not np.array_equal(np.isnan(y), np.isnan(r)):
        return f"{int(np.isnan(y).sum())} NaN values where the reference has " \
               f"{int(np.isnan(r).sum())}, not at the same places"
    inf_y, inf_r = np.isinf(y), np.isinf(r)
    if not np.array_equal(inf_y, inf_r) or not np.array_equal(y[inf_y], r[inf_r]):
        return f"{int(inf_y.sum())} infinite values where the reference has " \
               f"{int(inf_r.sum())}, not the same"
    return ""


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _copy(value: Any) -> Any:
    """Detach a result from VM storage (a later run may reuse it)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value


def _time_runs(fn: Callable[[], Any], repeat: int | None) -> tuple[Any, list[float]]:
    """Run ``fn`` ``repeat`` times, or by default up to DEFAULT_REPEAT times
    within REPEAT_BUDGET_SECONDS; slow runs report progress on stderr."""
    times: list[float] = []
    result = None
    count = repeat if repeat is not None else DEFAULT_REPEAT
    for i in range(count):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
        if i == 0:
            result = _copy(out)
        if times[-1] > PROGRESS_SECONDS:
            print(f"phasec run: run {i + 1}{f'/{count}' if repeat is not None else ''} took "
                  f"{times[-1]:.1f} s", file=sys.stderr, flush=True)
        if repeat is None and sum(times) >= REPEAT_BUDGET_SECONDS:
            break
    return result, times


def _print_profile(args: argparse.Namespace, exe: Executable, inputs: list[Any],
                   param_names: list[str], onnx_path: str | None) -> None:
    """``--profile``: phasec's kernels and VM, then ONNX Runtime's operators."""
    rounds = args.repeat
    found = profile_run(exe, args.entry, inputs, kernels=args.kernels, rounds=rounds,
                        max_call_depth=args.max_call_depth)
    threads = get_num_threads() if args.kernels == "llvm" else 1
    print(f"profile: best of {found.rounds} rounds, {counted(threads, 'thread')} "
          f"(each kernel timed alone; the whole call on an untimed VM)")
    print(found.table())
    if onnx_path is None:
        return
    try:
        import onnxruntime  # noqa: F401  (optional: only to profile beside it)
    except ImportError:
        print("(install onnxruntime to see ONNX Runtime's profile of the same model beside it)")
        return
    try:
        theirs = ort_profile(onnx_path, param_names, inputs, found.rounds, threads)
    except Exception as exc:  # noqa: BLE001 - ORT's own exception types; its refusal is news
        print(f"(ONNX Runtime could not run the model for its profile: "
              f"{str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__})")
        return
    print(f"ONNX Runtime {onnxruntime.__version__}, same inputs, {counted(threads, 'thread')}, "
          f"its profiler (best of {theirs.rounds} rounds):")
    print(theirs.table(phasec_seconds=found.whole_seconds))


def _kernels_phrase(kernels: str) -> str:
    if kernels != "llvm":
        return "on the TIR interpreter"
    return f"compiled with LLVM ({counted(get_num_threads(), 'thread')})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


# -- the command ---------------------------------------------------------------------------------
def _is_executable_file(path: str) -> bool:
    """A ``.pvm`` name (even missing: Executable.load says so) or a zip archive."""
    if path == "-" or Path(path).suffix.lower() in (".py", ".json"):
        return False
    if Path(path).suffix.lower() == EXECUTABLE_SUFFIX:
        return True
    if not Path(path).is_file():  # a FIFO or device: is_zipfile would block on it
        return False
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    load_plugins(args.load)
    check_opt_level(args.opt_level)
    if args.repeat is not None and args.repeat < 1:
        raise InputError(f"--repeat must be at least 1, not {args.repeat}")
    if args.max_call_depth < 1:
        raise InputError(f"--max-call-depth must be at least 1, not {args.max_call_depth}")
    if not args.rtol >= 0:
        raise InputError(f"--rtol must be >= 0, not {args.rtol}")
    if args.input is not None and args.example is not None:
        raise InputError("give either INPUT or --example, not both")
    dims = parse_dims(args.dim)
    _check_save_paths(args)
    if args.threads is not None:
        set_num_threads(args.threads)
    given = load_npz(args.inputs) if args.inputs is not None else {}
    runner = _run_executable if args.input is not None and _is_executable_file(args.input) \
        else _run_module
    if args.emit is None:
        return runner(args, dims, given)
    # The code alone goes to standard output (to pipe or save it); the report to stderr.
    args.emit_to = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return runner(args, dims, given)


def emitted_code(exe: Any, kind: str) -> str:
    """The executable's code as text: ``vm`` bytecode, or its kernels as
    optimized LLVM IR (``llvm``) or host assembly (``asm``)."""
    if kind == "vm":
        text = exe.as_text()
    else:
        if not exe.prim_funcs:
            return "; the executable has no kernels\n"
        lib = compile_prim_funcs(exe.prim_funcs)
        text = lib.optimized_ir if kind == "llvm" else lib.assembly()
    return text if text.endswith("\n") else text + "\n"


def _entry_params(mod: IRModule, entry: str) -> list[tuple[str, StructInfo | None]]:
    if entry not in mod.functions or not isinstance(mod[entry], Function):
        names = [n for n, _ in mod.relax_functions()]
        raise InputError(f"the module has no Relax function {entry!r} to run; it has "
                         f"{', '.join(names) or '(none)'} (choose one with --entry)")
    return [(p.name_hint, p.struct_info) for p in mod[entry].params]


def _print_inputs(params: list[tuple[str, Any]], args_: list[Any], generated: list[str],
                  seed: int, given_file: str | None) -> None:
    parts = []
    for (name, _), value in zip(params, args_):
        parts.append(f"{name}: {_describe(value) if isinstance(value, np.ndarray) else repr(value)}")
    origin = []
    if given_file is not None:
        origin.append(f"from {given_file}")
    if generated:
        origin.append(f"random (seed {seed}): {', '.join(generated)}")
    heading = f"inputs ({'; '.join(origin) or 'none'}):"
    if len(heading) <= OUTPUT_COLUMNS:
        print(heading)
    else:  # one origin a line; a path is never broken (it may run past the width)
        print("inputs:")
        for o in origin:
            print(f"  {o}" if o.startswith("from ") else textwrap.fill(
                o, width=OUTPUT_COLUMNS, initial_indent="  ", subsequent_indent="    ",
                break_long_words=False, break_on_hyphens=False))
    if not parts:
        print("  (the function takes no parameters)")
        return
    line = "  "
    for k, part in enumerate(parts):  # wrap between parameters, never inside one
        piece = part + ("," if k < len(parts) - 1 else "")
        if len(line) + len(piece) + 1 > OUTPUT_COLUMNS and line.strip():
            print(line.rstrip())
            line = "  "
        line += piece + " "
    print(line.rstrip())


def _run_module(args: argparse.Namespace, dims: dict[str, int], given: dict[str, np.ndarray]) -> int:
    if args.input is not None:
        check_outputs_differ(args.input, None, args.report)
    report = CliReport(args.report, args.input or f"{args.example or DEFAULT_EXAMPLE}.py",
                       args.verify)
    if args.input is None:
        name = args.example or DEFAULT_EXAMPLE
        mod = load_example(name)
        what = f"example {name!r} (bundled: phasec/examples/{name}.py)"
    else:
        mod = read_module(args.input)
        what = args.input
        if Path(args.input).suffix.lower() == ".onnx":
            given = onnx_input_names(given)
    if args.verify != "off":
        # An ill-formed input is the input's error (as phasec-check reports it), not the
        # first pass's; what Normalize repairs (IR not in A-normal form) is no error.
        try:
            check_input(mod, "standard input" if args.input == "-" else what,
                        repair=get_pass("Normalize"))
        except PhasecError as exc:
            report.write(mod, error=exc)
            raise
    params = _entry_params(mod, args.entry)
    inputs, generated = make_inputs(params, given, dims, args.seed)

    print(f"phasec run: {what}, phase {mod.phase.label}, entry {args.entry!r}")
    timing, trace = pipeline_instruments(args)
    validation = validate_instruments(args, inputs, args.entry)
    start = time.perf_counter()
    key, exe = _reusable_build(args, bool(validation) or timing is not None or trace is not None)
    if exe is not None:
        reused_seconds = time.perf_counter() - start
        if not args.quiet:
            print("passes: none run: the build of this file (same bytes, options and phasec) "
                  "was reused from the build cache (PHASEC_KERNEL_CACHE=off builds it again)")
        return _run_built(args, mod, exe, params, inputs, generated,
                          f"compile: reused from the build cache in {_ms(reused_seconds)} "
                          f"({counted(exe.stats()['kernels'], 'kernel')}, their machine code "
                          f"from the kernel cache)")
    list_passes()  # import the passes now, so that their import is not timed
    # (a compile worker starts now, beside the passes: buildcache.compile_worker_ahead)
    with compile_worker_ahead(mod):
        log = PassLog(args.verify)
        start = time.perf_counter()
        try:
            lowered = lower(mod, args.opt_level, pipeline=args.passes, verify=args.verify,
                            instruments=[log, *(i for i in (timing, trace) if i is not None),
                                         *report.instruments, *validation])
        except PhasecError as exc:
            if log.rows and not args.quiet:
                print(f"passes (opt_level {args.opt_level}, verify {args.verify}), "
                      "up to the error:")
                print(log.render())
            print_pipeline_instruments(None, trace)  # (up to the error)
            report.write(mod, error=exc)
            raise
        lower_seconds = time.perf_counter() - start
        print_pipeline_instruments(timing, trace)
        if not args.quiet:
            print(f"passes (opt_level {args.opt_level}, verify {args.verify}):")
            print(log.render() if log.rows else "  (none: the module is already in phase build)")
        start = time.perf_counter()
        exe = codegen_and_compile(lowered, kernels="none", check_bounds=args.check_bounds)
        codegen_seconds = time.perf_counter() - start
        report.write(mod, lowered, kernels=exe.stats()["kernels"])
        if args.emit is not None:
            return _run_built(args, mod, exe, params, inputs, generated, "")
        start = time.perf_counter()
        compile_and_remember(key, exe, args.kernels)  # (key None: not a build to keep)
        kernel_seconds = time.perf_counter() - start
    stats = exe.stats()
    return _run_built(args, mod, exe, params, inputs, generated,
                      f"compile: passes {_ms(lower_seconds)}, VM codegen {_ms(codegen_seconds)} "
                      f"({counted(stats['functions'], 'function')}, {stats['instructions']} "
                      f"instructions),\n  {counted(stats['kernels'], 'kernel')} "
                      f"{_kernels_phrase(args.kernels)} in {_ms(kernel_seconds)}")


def _reusable_build(args: argparse.Namespace,
                    instrumented: bool) -> tuple[str | None, Executable | None]:
    """(build-cache key, cached executable) of the file being run, as
    ``phasec build`` finds them: only the default build of a file, with
    nothing to show on the way (no --passes, --report, --timing, --trace,
    validation or plugins; LLVM kernels); (None, None) otherwise."""
    plain = args.input not in (None, "-") and args.passes is None and args.report is None \
        and not instrumented and not args.load and args.kernels == "llvm"
    return lookup(args.input, args.opt_level, args.check_bounds, args.verify) if plain \
        else (None, None)


def _run_built(args: argparse.Namespace, mod: IRModule, exe: Executable,
               params: list[tuple[str, Any]], inputs: list[Any], generated: list[str],
               compile_line: str) -> int:
    """Run ``exe`` (built or reused from the build cache) on the inputs and
    check its result against the reference interpreter on ``mod``."""
    if args.emit is not None:
        print(emitted_code(exe, args.emit), end="", file=args.emit_to)
        return 0
    vm = VirtualMachine(exe, kernels=args.kernels, max_call_depth=args.max_call_depth)
    print(compile_line)
    _print_inputs(params, inputs, generated, args.seed, args.inputs)
    _save_inputs(args.save_inputs, params, inputs)

    with np.errstate(all="ignore"):  # overflow shows in the check, not as numpy warnings
        result, times = _time_runs(lambda: vm[args.entry](*inputs), args.repeat)
        _print_result(result, times, vm)
        _save_outputs(args.save_outputs, result)
        if args.profile:
            onnx_path = args.input if args.input not in (None, "-") \
                and Path(args.input).suffix.lower() == ".onnx" else None
            _print_profile(args, exe, inputs, [name for name, _ in params], onnx_path)
        if min(times) > PROGRESS_SECONDS:
            print("phasec run: running the reference interpreter...", file=sys.stderr,
                  flush=True)
        start = time.perf_counter()
        reference = interp.run(mod, *inputs, entry=args.entry,
                               max_call_depth=args.max_call_depth)
        ref_seconds = time.perf_counter() - start
        ok, lines = compare(result, reference, args.rtol)
    print(f"check against the reference interpreter (phasec.interp on the original module, "
          f"{_ms(ref_seconds)}):")
    for line in lines:
        print(f"  {line}")
    print("PASS" if ok else "FAIL: the compiled program's result differs from the reference")
    return 0 if ok else 1


def _check_save_paths(args: argparse.Namespace) -> None:
    """--save-inputs/--save-outputs: .npz names, none of them an input file."""
    paths = [(opt, path) for opt, path in (("--save-inputs", args.save_inputs),
                                           ("--save-outputs", args.save_outputs)) if path]
    for opt, path in paths:
        if Path(path).suffix.lower() != ".npz":
            raise InputError(f"{opt} {path!r}: the file must end in .npz (numpy's archive of "
                             f"named arrays)")
        for other in (args.input, args.inputs):
            if other is not None and other != "-" and same_file(other, path):
                raise InputError(f"{opt} {path!r} is an input file; choose another name")
    if len(paths) == 2 and same_file(paths[0][1], paths[1][1]):
        raise InputError("--save-inputs and --save-outputs name the same file")


def _save_npz(path: str, arrays: dict[str, np.ndarray], what: str) -> None:
    write_atomic(path, lambda f: np.savez(f, **arrays), f"{what} file")
    print(f"{what} written to {path} ({counted(len(arrays), 'array')})")


def _save_inputs(path: str | None, params: list[tuple[str, Any]], inputs: list[Any]) -> None:
    if path is not None:
        _save_npz(path, {name: np.asarray(v) for (name, _), v in zip(params, inputs)}, "inputs")


def _save_outputs(path: str | None, result: Any) -> None:
    if path is not None:
        _save_npz(path, {key: v if isinstance(v, np.ndarray) else np.asarray(_plain(v))
                         for key, v in _leaves(result)}, "outputs")


def _print_result(result: Any, times: list[float], vm: Any) -> None:
    best = min(times)
    median = statistics.median(times)
    print(f"run: best of {len(times)}: {_ms(best)} (median {_ms(median)}); "
          f"peak VM memory {vm.peak_bytes / 1024:.1f} KiB")
    for path, value in _leaves(result):
        if isinstance(value, np.ndarray):
            print(f"  {path}: {_describe(value)}  {summarize(value)}")
        else:
            print(f"  {path}: {_plain(value)!r}")


def _run_executable(args: argparse.Namespace, dims: dict[str, int],
                    given: dict[str, np.ndarray]) -> int:
    exe = Executable.load(args.input, check_bounds=args.check_bounds)
    if args.emit is not None:
        print(emitted_code(exe, args.emit), end="", file=args.emit_to)
        return 0
    if args.entry not in exe:
        raise InputError(f"the executable has no function {args.entry!r}; it has "
                         f"{', '.join(exe.function_names())} (choose one with --entry)")
    params = exe.signature(args.entry)
    unknown = [name for name, sinfo in params if sinfo is None and name not in given]
    if unknown:  # e.g. an executable saved by an older phasec: no signature recorded
        raise InputError(f"the executable records no struct info for parameter(s) "
                         f"{', '.join(map(repr, unknown))} of {args.entry!r}, so no random "
                         f"input can be made: give them with --inputs (or rebuild the "
                         f"executable with `phasec build`: executables of older phasec "
                         f"versions do not record it)")
    inputs, generated = make_inputs(params, given, dims, args.seed)
    print(f"phasec run: executable {args.input}, entry {args.entry!r} "
          "(compiled already: no passes to show)")
    start = time.perf_counter()
    vm = VirtualMachine(exe, kernels=args.kernels, max_call_depth=args.max_call_depth)
    print(f"kernels: {counted(len(exe.prim_funcs), 'kernel')} "
          f"{_kernels_phrase(args.kernels)} "
          f"in {_ms(time.perf_counter() - start)}")
    _print_inputs(params, inputs, generated, args.seed, args.inputs)
    _save_inputs(args.save_inputs, params, inputs)
    with np.errstate(all="ignore"):
        result, times = _time_runs(lambda: vm[args.entry](*inputs), args.repeat)
        _print_result(result, times, vm)
        _save_outputs(args.save_outputs, result)
        if args.profile:
            _print_profile(args, exe, inputs, [name for name, _ in params], None)
    print("check: skipped: INPUT is a compiled executable, and the reference interpreter needs "
          "the original module (run `phasec run` on the module file to compare)")
    return 0


__all__ = ["EXAMPLES", "DEFAULT_EXAMPLE", "InputError", "example_source", "load_example",
           "make_inputs", "parse_dims", "compare", "summarize", "PassLog", "add_arguments", "run"]
