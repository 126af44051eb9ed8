"""``--validate-each`` and its options, shared by ``phasec opt``, ``build``
and ``run``: result validation after passes
(:class:`phasec.transform.validate.ValidateResults`, kernels compiled with
LLVM). The first pass that changes the results is an error (exit status 1)
naming it; otherwise a one-line summary with the overhead goes to standard
error."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from phasec.backend.kernel_runner import llvm_kernel_runner
from phasec.cli._inputs import load_npz, onnx_input_names
from phasec.errors import InputError
from phasec.pipeline import pipeline_from
from phasec.testing.bisect import run_stages
from phasec.testing.minimize import describe_saved, minimize_stage_change, save_minimized
from phasec.transform import PassContext, PassInstrument
from phasec.transform.results import Tolerance
from phasec.transform.validate import ValidateResults

__all__ = ["add_validate_arguments", "validate_instruments", "parse_every"]


def add_validate_arguments(parser: argparse.ArgumentParser, inputs_option: bool = True) -> None:
    group = parser.add_argument_group("result validation")
    group.add_argument("--validate-each", action="store_true",
                       help="run the module in the reference interpreter after every pass and "
                            "stop at the first pass that changes its results")
    group.add_argument("--validate-every", metavar="N", default=None,
                       help="validate after every N-th pass, or 'transitions' (a change is "
                            "localized to its pass by bisection); implies --validate-each")
    group.add_argument("--validate-rtol", type=float, default=None, metavar="R",
                       help="relative tolerance of the comparison (default 1e-5, plus the "
                            "rounding bounds; see README)")
    group.add_argument("--validate-atol", type=float, default=None, metavar="A",
                       help="absolute tolerance of the comparison (default 1e-6)")
    group.add_argument("--validate-reproducer", metavar="DIR", default=None,
                       help="when a pass changes the results, write a minimized reproducer of "
                            "it to DIR (the format of phasec fuzz, as phasec bisect "
                            "--reproducer)")
    if inputs_option:
        group.add_argument("--validate-inputs", metavar="FILE.npz", default=None,
                           help="inputs to validate on, by parameter name (default: seeded "
                                "random values fitted to each parameter)")


def parse_every(value: str | None) -> int | str:
    if value is None:
        return 1
    if value == "transitions":
        return value
    try:
        every = int(value)
    except ValueError:
        every = 0
    if every < 1:
        raise InputError(f"--validate-every {value!r}: expected an integer >= 1 or "
                         "'transitions'")
    return every


class _CliValidate(ValidateResults):
    """Says on standard error what was checked, once the pipeline is through;
    writes a reproducer of a change when asked to."""

    def __init__(self, command: str, reproducer: str | None = None, pipeline: Any = None,
                 opt_level: int = 2, **kw: Any) -> None:
        super().__init__(**kw)
        self.command = command
        self.reproducer = reproducer
        self.pipeline = pipeline
        self.opt_level = opt_level

    def _write_reproducer(self) -> None:
        change, start = self.change, self.start_module
        assert change is not None and start is not None and self.reproducer is not None
        with PassContext():  # the pipeline again, without this instrument
            stages = run_stages(start, self.pipeline, self.opt_level,
                                to_build=self.command != "opt")
        blamed = change.position
        if not (0 < blamed < len(stages) and stages[blamed].pass_name == change.pass_name):
            print(f"phasec {self.command}: note: no reproducer: the pipeline did not run the "
                  "same passes again", file=sys.stderr)
            return
        found = minimize_stage_change(stages, blamed,
                                      pipeline_from(self.pipeline, self.opt_level).passes,
                                      self.args, entry=self.entry, tolerance=self.tolerance,
                                      kernel_runner=self.kernel_runner, seed=self.seed)
        if found is None:
            print(f"phasec {self.command}: note: no reproducer: {change.pass_name} is not a "
                  "pass of the pipeline (a required pass?)", file=sys.stderr)
            return
        print(describe_saved(save_minimized(self.reproducer, found), found), file=sys.stderr)

    def exit_pass_ctx(self) -> None:
        super().exit_pass_ctx()
        if self.change is not None and self.reproducer is not None:
            self._write_reproducer()
        if self.change is None and self.checks:
            print(f"phasec {self.command}: validated results after {self.passes_run} pass(es) "
                  f"with {len(self.checks)} interpreter run(s) ({self.seconds:.2f} s, "
                  f"reference: {self._base.reference if self._base else '-'}): no pass changed "
                  "them", file=sys.stderr)
            for note in self.notes:
                print(f"phasec {self.command}: note: {note}", file=sys.stderr)


def validate_instruments(args: argparse.Namespace, inputs: Any = None,
                         entry: str = "main") -> list[PassInstrument]:
    """The instrument ``--validate-each`` asks for (none without it).
    ``inputs``: the arguments the command runs the module on (``phasec run``)."""
    if not (args.validate_each or args.validate_every is not None):
        return []
    every = parse_every(args.validate_every)
    given = inputs
    path = getattr(args, "validate_inputs", None)
    if given is None and path is not None:
        given = load_npz(path)
        if str(args.input).lower().endswith(".onnx"):
            given = onnx_input_names(given)
    base = Tolerance()
    tolerance = Tolerance(base.rtol if args.validate_rtol is None else args.validate_rtol,
                          base.atol if args.validate_atol is None else args.validate_atol)
    command = getattr(args, "command", None) or "opt"
    return [_CliValidate(command, getattr(args, "validate_reproducer", None),
                         getattr(args, "passes", None), getattr(args, "opt_level", 2),
                         inputs=given, every=every, entry=entry, tolerance=tolerance,
                         seed=getattr(args, "seed", 0) or 0,
                         kernel_runner=llvm_kernel_runner())]
