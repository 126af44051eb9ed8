"""``phasec opt``: run a textual pass pipeline on a module file (like ``mlir-opt``).

    phasec opt model.py --passes "LambdaLifting,FoldConstant,FuseOps{fuse_opt_level=2}"
    phasec opt model.json --passes LambdaLifting -o lifted.json
    cat model.py | phasec opt - --print-after-all

INPUT is TVMScript (``.py``), the JSON module format (``.json``) or ``-`` for
standard input (JSON when it starts with ``{``, TVMScript otherwise). The
result goes to standard output as TVMScript, or to ``-o OUTPUT`` (TVMScript
or JSON by its suffix). Diagnostics (``--print-after-all``,
``--print-after PASS``, ``--print-after-change``, ``--print-before PASS``,
``--timing``, ``--trace``, notes on skipped passes) go to standard error, so
standard output is only the resulting module.

Without ``--passes`` the default pipeline (:func:`phasec.pipeline.default_pipeline`
at ``--opt-level``) runs from the module's phase to the build phase, as
``phasec build`` would, and the lowered module is printed.

Every error is a message on standard error, never a traceback: exit status
2 for bad input or usage (parse error, unknown pass or option), 1 for a
failed check (phase error, verifier violation, failing pass).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from phasec import console
from phasec.errors import FileAccessError, InputError, ParseError, PhasecError
from phasec.fileio import read_stream, same_file, write_atomic
from phasec.cli._outputs import is_stream, output_option, to_stdout
from phasec.ir import IRModule
from phasec.ir.node import Span
from phasec.cli._report import CliReport, add_report_argument
from phasec.cli._validate import add_validate_arguments, validate_instruments
from phasec.pipeline import default_pipeline, pipeline_for_phase, run_pipeline
from phasec.script.loader import load
from phasec.script.parser import decode_source, parse
from phasec.script.printer import SYNTAXES, syntax
from phasec.transform import (
    REGISTRY, VERIFY_MODES, PassConfigError, PassContext, PassInstrument, PassTiming, PassTrace,
    PrintAfterAll, PrintBeforeAll, get_pass, load_plugins, parse_pipeline,
)
from phasec.verifier.inputs import check_input

#: output suffix -> format
OUTPUT_SUFFIXES = {".py": "TVMScript", ".json": "JSON"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT",
                        help="module file: .py (TVMScript), .json, an ONNX model (.onnx), or - "
                             "for standard input")
    parser.add_argument("--passes", metavar="SPEC", default=None,
                        help='textual pipeline, e.g. "LambdaLifting,FuseOps{fuse_opt_level=2}" '
                             "(see `phasec passes`); default: the default pipeline from the "
                             "module's phase to the build phase")
    parser.add_argument("-o", "--output", metavar="OUTPUT", default=None,
                        help="write the result here (.py: TVMScript, .json: JSON) instead of "
                             "standard output")
    parser.add_argument("--opt-level", type=int, default=2, metavar="N",
                        help="PassContext opt_level, 0 to 4: passes above it are skipped (default 2)")
    parser.add_argument("--verify", choices=VERIFY_MODES, default="each",
                        help="verify after every pass (each, the default), after transitions "
                             "only, or never (off)")
    parser.add_argument("--print-after-all", action="store_true",
                        help="print the module after every pass (to standard error)")
    parser.add_argument("--print-before", action="append", default=[], metavar="PASS",
                        help="print the module before every run of PASS (repeatable)")
    parser.add_argument("--print-after", action="append", default=[], metavar="PASS",
                        help="print the module after every run of PASS (repeatable)")
    parser.add_argument("--print-after-change", action="store_true",
                        help="print the module after every pass that changed it")
    add_syntax_argument(parser)
    add_report_argument(parser)
    parser.add_argument("--timing", action="store_true",
                        help="print the time spent in each pass and in the verifier")
    parser.add_argument("--trace", action="store_true",
                        help="print every pass run or skipped, with the phase before and after")
    add_validate_arguments(parser)


# -- shared with `phasec build` and `phasec run` ----------------------------------
def add_syntax_argument(parser: argparse.ArgumentParser) -> None:
    """``--syntax``: the TVMScript spelling of every module the command prints."""
    parser.add_argument("--syntax", choices=SYNTAXES, default="tvm",
                        help="TVMScript spelling of printed modules: tvm (what TVM 0.27 prints "
                             "and parses, the default) or legacy (tir, T.block, out_sinfo=, "
                             'out_dtype="void", as TVM before 0.27)')


def read_stdin_text(stream: Any = None) -> str:
    """All of standard input (or ``stream``) as text: read as bytes and
    decoded as UTF-8 (BOM allowed), so binary input is a clear ParseError."""
    stream = sys.stdin if stream is None else stream
    if stream is None:
        raise ParseError("cannot read standard input: it is closed", Span("<stdin>", 1, 0))
    try:
        data = read_stream(stream)  # capped: `< /dev/zero` ends with an error, not OOM
    except FileAccessError as exc:
        raise ParseError(f"cannot read standard input: {exc.reason}",
                         Span("<stdin>", 1, 0)) from None
    if isinstance(data, str):
        return data
    return decode_source(data, "<stdin>")


def module_from_text(text: str, filename: str) -> IRModule:
    """Parse module text of unknown format: JSON when it starts with ``{``,
    TVMScript otherwise."""
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        # (imported for JSON only, here and below: loading it builds the JSON schema, ~1 s)
        from phasec.script.json_format import from_json

        return from_json(text)
    return parse(text, filename=filename)


def read_module(path: str) -> IRModule:
    """Load INPUT: a ``.py``/``.json`` file, an ONNX model (``.onnx``,
    imported by :func:`phasec.frontend.onnx.from_onnx`), or ``-`` for
    standard input."""
    name = "standard input" if path == "-" else Path(path).name
    if path != "-" and Path(path).suffix.lower() == ".onnx":
        from phasec.frontend.onnx import from_onnx  # (its converters load for ONNX input only)

        with console.step(f"importing {name}"):
            return from_onnx(path)
    with console.step(f"reading {name}"):
        if path != "-":
            return load(path)
        return module_from_text(read_stdin_text(), "<stdin>")


def check_read_module(mod: IRModule, path: str, verify: str, report: Any = None) -> None:
    """Refuse an ill-formed input as the input's error (what ``phasec-check``
    reports, with the file named), not as the first pass's: the one input
    check of ``opt``, ``build`` and ``run``. Skipped with ``--verify off``;
    what Normalize repairs (IR not in A-normal form, missing struct info) is
    no error. ``report`` (a CliReport) gets the error too."""
    if verify == "off":
        return
    try:
        check_input(mod, "standard input" if path == "-" else path, repair=get_pass("Normalize"))
    except PhasecError as exc:
        if report is not None:
            report.write(mod, error=exc)
        raise


def module_text(mod: IRModule, output: str | None) -> str:
    """The module in the format ``output``'s suffix asks for (TVMScript by default)."""
    if output is not None and Path(output).suffix.lower() == ".json":
        from phasec.script.json_format import to_json

        return to_json(mod, indent=1) + "\n"
    text = mod.script()
    return text if text.endswith("\n") else text + "\n"


def check_output_suffix(output: str | None) -> None:
    if output is None or is_stream(output):  # standard output, /dev/null: TVMScript
        return
    suffix = Path(output).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        known = ", ".join(f"{s} ({f})" for s, f in OUTPUT_SUFFIXES.items())
        raise ParseError(f"cannot write {output!r}: unknown output type "
                         f"{Path(output).suffix or '(no suffix)'!r}; expected {known}")


def check_outputs_differ(input_path: str, output: str | None, report: str | None) -> None:
    """Refuse a ``--report`` that names the input or the output file: one
    would silently replace the other."""
    if report is None:
        return
    if input_path != "-" and same_file(input_path, report):
        raise InputError(f"--report {report!r} is the input file; choose another name")
    if output is not None and output != "-" and same_file(output, report):
        raise InputError(f"--report {report!r} and -o {output!r} name the same file; choose "
                         f"another name for one of them")


#: the optimization levels the default pipeline knows (FuseOps' fuse_opt_level)
OPT_LEVELS = range(0, 5)
OPT_LEVEL_HELP = "optimization level, 0 to 4 (default 2)"


def check_opt_level(level: int) -> None:
    if level not in OPT_LEVELS:
        raise PassConfigError(f"--opt-level must be from {OPT_LEVELS[0]} to {OPT_LEVELS[-1]}, "
                              f"not {level}")


class _PrintBefore(PrintBeforeAll):
    """Print the module before each run of the named passes."""

    def __init__(self, names: set[str], file: Any) -> None:
        super().__init__(file)
        self.names = names

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        if info.name in self.names:
            super().run_before_pass(mod, info)


class _SkipNotes(PassInstrument):
    """Collect the passes a Sequential skipped (shown as notes)."""

    def __init__(self) -> None:
        self.skipped: list[tuple[str, str]] = []

    def run_on_skip(self, mod: IRModule, info: Any, reason: str) -> None:
        self.skipped.append((info.name, reason))


def _check_pass_names(names: list[str], option: str) -> None:
    for name in names:
        if name not in REGISTRY:
            raise PassConfigError(f"{option}: {REGISTRY.unknown_message(name)}")


def run(args: argparse.Namespace) -> int:
    load_plugins(args.load)
    with syntax(args.syntax):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    check_opt_level(args.opt_level)
    output = output_option(args.output)
    check_output_suffix(output)
    _check_pass_names(args.print_before, "--print-before")
    _check_pass_names(args.print_after, "--print-after")
    # Parse the pipeline and check the report path before reading the input:
    # a typo fails fast.
    spec_seq = parse_pipeline(args.passes, name="opt") if args.passes is not None else None
    check_outputs_differ(args.input, output, args.report)
    report = CliReport(args.report, args.input, args.verify)
    mod = read_module(args.input)
    check_read_module(mod, args.input, args.verify, report)
    if spec_seq is not None:
        pipeline: Any = spec_seq
    else:
        pipeline = pipeline_for_phase(default_pipeline(args.opt_level), mod.phase)

    err = sys.stderr
    instruments: list[PassInstrument] = []
    if args.print_before:
        instruments.append(_PrintBefore(set(args.print_before), err))
    if args.print_after_all or args.print_after or args.print_after_change:
        only = set(args.print_after) if args.print_after and not args.print_after_all else None
        instruments.append(PrintAfterAll(file=err, only=only,
                                         only_changed=args.print_after_change))
    timing = PassTiming() if args.timing else None
    trace = PassTrace() if args.trace else None
    notes = _SkipNotes()
    instruments += [i for i in (timing, trace) if i is not None] + [notes] + report.instruments
    instruments += validate_instruments(args)

    ctx = PassContext(opt_level=args.opt_level, verify=args.verify, instruments=instruments)
    try:
        result = run_pipeline(pipeline, mod, ctx)
    except PhasecError as exc:
        # Show what ran before the failure: it helps to locate it.
        if trace is not None and trace.entries:
            print(f"pass trace (up to the error):\n{trace.render()}", file=err)
        report.write(mod, error=exc)
        raise
    report.write(mod, result)
    for name, reason in notes.skipped:
        hint = " (raise --opt-level)" if "opt_level" in reason else ""
        print(f"phasec opt: note: {name} skipped: {reason}{hint}", file=err)
    if trace is not None:
        print(f"pass trace:\n{trace.render()}", file=err)
    if timing is not None:
        print(timing.render(), file=err)

    text = module_text(result, output)
    if output is None or to_stdout(output):
        sys.stdout.write(text)
    else:
        # written whole or not at all; `-o INPUT` is fine: the input was read first
        write_atomic(output, text, what="output")
    return 0
