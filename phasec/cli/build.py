"""``phasec build``: compile a module file to a VM executable file.

    phasec build model.py -o model.pvm [--opt-level 2] [--verify each] [--timing]

Runs :func:`phasec.build` (the default pipeline from the module's phase,
VM codegen, kernel compilation) and writes the executable with
:meth:`Executable.save`. A default build of a file (no ``--passes``,
``--timing``, ``--trace``, ``--report``, validation or plugins) reuses an
identical earlier build from the cache (:mod:`phasec.buildcache`). Run it with ``phasec run model.pvm`` or
``phasec.VirtualMachine(phasec.Executable.load("model.pvm"))``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phasec.errors import InputError, PhasecError, counted
from phasec.fileio import same_file
from phasec.pipeline import build
from phasec.buildcache import lookup, remember
from phasec.transform import VERIFY_MODES, PassTiming, PassTrace, load_plugins
from phasec.cli._report import CliReport, add_report_argument
from phasec.cli._validate import add_validate_arguments, validate_instruments
from phasec.cli.opt import (
    OUTPUT_SUFFIXES, check_opt_level, check_outputs_differ, check_read_module, read_module,
)
from phasec.cli._outputs import is_stream, output_option, to_stdout

#: the conventional suffix of executable files
EXECUTABLE_SUFFIX = ".pvm"


KERNEL_CHOICES = ("llvm", "interp")


def _kernels_choice(value: str) -> str:
    # "none" was build's spelling of "do not compile now" before both
    # commands shared one vocabulary; still accepted, not advertised
    return "interp" if value == "none" else value


def add_kernels_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--kernels llvm|interp`` (build and run): the same two words mean
    native kernels or the TIR interpreter on every command."""
    parser.add_argument("--kernels", type=_kernels_choice, choices=KERNEL_CHOICES,
                        default="llvm", help=help)


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N``: the threads the compiled kernels' parallel loops use."""
    parser.add_argument("--threads", type=_thread_count, default=None, metavar="N",
                        help="threads for the kernels' parallel loops, 1 to 256 (default: "
                             "PHASEC_NUM_THREADS, else the CPUs this process may use, after "
                             "its affinity mask and cgroup quota)")


def _thread_count(value: str) -> int:
    if not value.strip().isdigit() or not 1 <= int(value) <= 256:
        raise argparse.ArgumentTypeError(f"expected a number of threads from 1 to 256, "
                                         f"not {value!r}")
    return int(value)


def add_bounds_arguments(parser: argparse.ArgumentParser) -> None:
    """``--check-bounds`` / ``--unchecked`` (build and run): by default every
    buffer access not proven in bounds is checked at run time."""
    bounds = parser.add_mutually_exclusive_group()
    bounds.add_argument("--check-bounds", dest="check_bounds", action="store_const", const=True,
                        default=None,
                        help="check every buffer access, proven or not (slower). By default "
                             "the accesses not proven in bounds are checked: a wrong index is "
                             "an error naming kernel, buffer, index and extent, not a crash")
    bounds.add_argument("--unchecked", dest="check_bounds", action="store_const", const=False,
                        help="no bounds checks, for trusted code only: a wrong index reads or "
                             "writes memory it does not own. An executable built with "
                             "--unchecked still runs checked unless its user gives this flag "
                             "to run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT",
                        help="module file: .py (TVMScript), .json, an ONNX model (.onnx), or - "
                             "for standard input")
    parser.add_argument("-o", "--output", metavar="OUT", default=None,
                        help=f"executable file to write, or - for standard output (default: "
                             f"INPUT with suffix {EXECUTABLE_SUFFIX} in the current directory)")
    parser.add_argument("--opt-level", type=int, default=2, metavar="N",
                        help="optimization level, 0 to 4 (default 2)")
    parser.add_argument("--verify", choices=VERIFY_MODES, default="each",
                        help="verify after every pass (each, the default), after transitions, "
                             "or off")
    add_kernels_argument(parser, "compile the kernels with LLVM now, to catch errors before the "
                                 "executable is written (llvm, the default), or only prepare them "
                                 "for the TIR interpreter (interp). Either way the executable "
                                 "holds no machine code: `phasec run` compiles the kernels when "
                                 "it loads it, unless given --kernels interp")
    # default (None): check every buffer access not proven in bounds at compile time
    add_bounds_arguments(parser)
    add_report_argument(parser)
    add_pipeline_arguments(parser)
    add_validate_arguments(parser)


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """``--passes``, ``--timing`` and ``--trace`` (build and run)."""
    parser.add_argument("--passes", metavar="SPEC", default=None,
                        help="a textual pipeline to use instead of the default one (must end "
                             "in the build phase)")
    parser.add_argument("--timing", action="store_true",
                        help="print the time spent in each pass (to standard error)")
    parser.add_argument("--trace", action="store_true",
                        help="print each pass with its phase before and after (to standard "
                             "error)")


def pipeline_instruments(args: argparse.Namespace) -> tuple[PassTiming | None, PassTrace | None]:
    """The ``--timing`` and ``--trace`` instruments asked for (None: not asked)."""
    return (PassTiming() if args.timing else None), (PassTrace() if args.trace else None)


def print_pipeline_instruments(timing: PassTiming | None, trace: PassTrace | None) -> None:
    """What ``--timing`` and ``--trace`` recorded, to standard error."""
    if timing is not None:
        print(timing.render(), file=sys.stderr)
    if trace is not None and trace.entries:
        print(f"pass trace:\n{trace.render()}", file=sys.stderr)


def default_output(input_path: str) -> str:
    stem = "module" if input_path == "-" else Path(input_path).stem
    return stem + EXECUTABLE_SUFFIX


def check_output(input_path: str, out: str) -> None:
    """Refuse an output that would destroy a module file: the input itself
    (``build m.py -o m.py`` would replace the source with a zip archive) or
    any ``.py``/``.json`` name."""
    if is_stream(out):  # standard output, /dev/null: no file to protect, no suffix
        return
    if input_path != "-" and same_file(input_path, out):
        raise InputError(f"-o {out!r} is the input file: writing the executable there would "
                         f"replace the module source; choose another name, e.g. "
                         f"{default_output(input_path)!r}")
    if Path(out).suffix.lower() in OUTPUT_SUFFIXES:
        raise InputError(f"-o {out!r}: an executable is a zip archive, not a module file "
                         f"({Path(out).suffix}); name it with the suffix {EXECUTABLE_SUFFIX}")


def run(args: argparse.Namespace) -> int:
    load_plugins(args.load)
    check_opt_level(args.opt_level)
    out = output_option(args.output) or default_output(args.input)  # "" is refused
    check_output(args.input, out)
    check_outputs_differ(args.input, out, args.report)
    report = CliReport(args.report, args.input, args.verify)
    timing, trace = pipeline_instruments(args)
    validation = validate_instruments(args)
    # the default build of a file, nothing to show on the way: an earlier
    # identical build may be reused whole (phasec/buildcache.py)
    plain = args.input != "-" and args.passes is None and args.report is None \
        and timing is None and trace is None and not validation and not args.load \
        and args.kernels == "llvm"
    key, exe = lookup(args.input, args.opt_level, args.check_bounds, args.verify) if plain \
        else (None, None)
    if exe is None:
        mod = read_module(args.input)
        check_read_module(mod, args.input, args.verify, report)
        try:
            exe = build(mod, args.opt_level, pipeline=args.passes, verify=args.verify,
                        instruments=[i for i in (timing, trace) if i is not None]
                        + report.instruments + validation,
                        kernels=args.kernels, check_bounds=args.check_bounds)
        except PhasecError as exc:
            report.write(mod, error=exc)
            print_pipeline_instruments(None, trace)  # (up to the error)
            raise
        report.write(mod, kernels=exe.stats()["kernels"])
        remember(key, exe)
    exe.save(out)
    print_pipeline_instruments(timing, trace)
    stats = exe.stats()
    print(f"wrote {out}: {counted(stats['functions'], 'function')}, "
          f"{counted(stats['instructions'], 'instruction')}, {counted(stats['kernels'], 'kernel')}, "
          f"{counted(stats['constants'], 'constant')}",
          file=sys.stderr if to_stdout(out) else sys.stdout)  # not into the executable's bytes
    return 0
