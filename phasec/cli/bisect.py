"""``phasec bisect``: which pass made the compiled model differ from its reference?

    phasec bisect model.onnx                  # against ONNX Runtime
    phasec bisect model.py --inputs in.npz    # against the interpreter on the module
    phasec bisect model.py --passes SPEC --opt-level 3
    phasec bisect DUMP_DIR --start model.py   # TVM's pipeline, from its DumpIR files

The model is lowered with the default pipeline (or ``--passes``), keeping
the module after every pass; the compiled model (VM, kernels compiled with
LLVM) runs on the inputs (``--inputs``, the rest seeded random, as for
``phasec run``) and is compared with the reference: ONNX Runtime for an
``.onnx`` model, the module itself in the reference interpreter (in
float64 where it has a float64 form) otherwise. When they differ, the
first pass introducing the difference is found by bisection over the
stages, running the interpreter O(log passes) times, and reported with the
functions it changed, before and after. Tolerances as for
``--validate-each`` (README, "Which pass changed my results?").

Given a directory, ``phasec bisect`` reads the stages TVM's DumpIR
instrument wrote there (``NNN_PassName.py``, the module after each TVM
pass; :func:`phasec.tvm.check_dump_results`), runs each in the interpreter on
the same inputs and names the first TVM pass whose results leave the
bounds of the reference: ``--start FILE``, the module given to
``tvm.compile`` (DumpIR writes no file for it), else the first stage that
runs. Stages it cannot run (unreadable text, TVM's TIR pipeline, an
interpreter failure) are listed as such, with the reason.

Exit status: 0 the compiled model agrees with the reference, 1 it differs
(the report names the pass, or says the starting module already differs,
or that only the compiled code does), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from phasec import interp
from phasec.backend.kernel_runner import llvm_kernel_runner
from phasec.backend.vm import VirtualMachine
from phasec.cli._inputs import load_npz, make_inputs, onnx_input_names, parse_dims
from phasec.cli._ort import ort_feed, ort_session
from phasec.cli.opt import check_opt_level, read_module
from phasec.errors import InputError
from phasec.pipeline import codegen_and_compile, pipeline_from
from phasec.testing.bisect import bisect_stages, run_stages
from phasec.tvm import check_dump_results
from phasec.testing.minimize import describe_saved, minimize_stage_change, save_minimized
from phasec.transform.results import (
    Tolerance, as_float64, compare_outputs, copy_value, rounding_length, widen,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="MODEL",
                        help="an ONNX model (.onnx), a module (.py TVMScript, .json), or a "
                             "directory of TVM's DumpIR files")
    parser.add_argument("--start", metavar="FILE", default=None,
                        help="with a DumpIR directory: the module TVM started from (the "
                             "reference; default: the first stage that runs)")
    parser.add_argument("--inputs", metavar="NPZ", default=None,
                        help="arrays by input name (.npz); inputs not given are seeded random")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                        help="value of a symbolic dimension (default 1); repeatable")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--entry", default="main", help="function to run (default main)")
    parser.add_argument("--opt-level", type=int, default=2, metavar="N",
                        help="optimization level (default 2)")
    parser.add_argument("--passes", metavar="SPEC", default=None,
                        help="a textual pipeline instead of the default one (must end in the "
                             "build phase)")
    parser.add_argument("--rtol", type=float, default=None, help="relative tolerance (1e-5)")
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (1e-6)")
    parser.add_argument("--reproducer", metavar="DIR", default=None,
                        help="write a minimized reproducer of the blamed pass to DIR, in the "
                             "format of phasec fuzz (module, inputs .npz, replay commands)")


def _ort_reference(path: str, mod: Any, entry: str, inputs: list[Any]) -> Any:
    """ONNX Runtime's outputs for ``inputs`` (given by the imported ``main``'s parameters)."""
    session = ort_session(path)
    outs = session.run(None, ort_feed(session, [p.name_hint for p in mod[entry].params], inputs))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _write_reproducer(args: argparse.Namespace, result: Any, inputs: list[Any], tol: Tolerance,
                      runner: Any) -> None:
    change = result.change
    passes = pipeline_from(args.passes, args.opt_level).passes
    found = minimize_stage_change(result.stages, change.position, passes, inputs,
                                  entry=args.entry, tolerance=tol, kernel_runner=runner,
                                  seed=args.seed)
    if found is None:
        print(f"phasec bisect: note: no reproducer: {change.pass_name} is not a pass of the "
              "pipeline (a required pass?)", file=sys.stderr)
        return
    print(describe_saved(save_minimized(args.reproducer, found), found))


def _tolerance(args: argparse.Namespace) -> Tolerance:
    base = Tolerance()
    return Tolerance(base.rtol if args.rtol is None else args.rtol,
                     base.atol if args.atol is None else args.atol)


def _tvm_dump(args: argparse.Namespace, given: dict[str, Any]) -> int:
    start = read_module(args.start) if args.start is not None else None
    found = check_dump_results(args.input, start=start, inputs=given or None,
                               tolerance=_tolerance(args), entry=args.entry)
    print(f"phasec bisect: {args.input}: {len(found.verdicts)} stage(s) of TVM's pipeline")
    print(found.report())
    return 1 if found.first_change is not None else 0


def run(args: argparse.Namespace) -> int:
    check_opt_level(args.opt_level)
    dims = parse_dims(args.dim)
    given = load_npz(args.inputs) if args.inputs is not None else {}
    if Path(args.input).is_dir():
        return _tvm_dump(args, given)
    if args.start is not None:
        raise InputError("--start is for a directory of TVM's DumpIR files")
    is_onnx = Path(args.input).suffix.lower() == ".onnx"
    mod = read_module(args.input)
    if is_onnx:
        given = onnx_input_names(given)
    if args.entry not in mod:
        raise InputError(f"the module has no function {args.entry!r}")
    params = [(p.name_hint, p.struct_info) for p in mod[args.entry].params]
    inputs, _ = make_inputs(params, given, dims, args.seed)
    tol = _tolerance(args)
    runner = llvm_kernel_runner()

    stages = run_stages(mod, args.passes, args.opt_level)
    if is_onnx:
        ref32, ref64, reference = _ort_reference(args.input, mod, args.entry, inputs), None, \
            "ONNX Runtime"
    else:
        ref32 = interp.run(mod, *(copy_value(a) for a in inputs), entry=args.entry,
                           kernel_runner=runner)
        ref64, reference = None, "the interpreter on the module"
        try:
            ref64 = interp.run(widen(mod), *(as_float64(copy_value(a)) for a in inputs),
                               entry=args.entry, kernel_runner=runner)
            reference = "the interpreter on the module, in float64"
        except Exception as exc:  # noqa: BLE001 - not every module has a float64 twin
            print(f"phasec bisect: note: no float64 evaluation ({type(exc).__name__}); "
                  "comparing with the module's own results", file=sys.stderr)
    exe = codegen_and_compile(stages[-1].module)
    with np.errstate(all="ignore"):
        compiled = VirtualMachine(exe)[args.entry](*(copy_value(a) for a in inputs))
    problem = compare_outputs(compiled, ref32, ref64, tol, rounding_length(mod))
    print(f"phasec bisect: {args.input}: {len(stages) - 1} passes; reference: {reference}")
    if problem is None:
        print("the compiled model agrees with the reference")
        return 0
    print(f"the compiled model differs from the reference: {problem.describe()}")
    result = bisect_stages(stages, inputs, ref32, ref64, reference=reference, tolerance=tol,
                           entry=args.entry, kernel_runner=runner)
    print(result.describe())
    if result.change is not None and args.reproducer is not None:
        _write_reproducer(args, result, inputs, tol, runner)
    if result.change is None and result.start_problem is None:
        print("every stage agrees in the interpreter: the difference comes from VM codegen or "
              "the compiled kernels")
    return 1
