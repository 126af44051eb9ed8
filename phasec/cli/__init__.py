"""The ``phasec`` command line: one subcommand per module in this package.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int``.

Exit status, the same for every subcommand: 0 success; 1 the check failed
(a phase error, a verifier violation, results that do not match, fuzzing
failures); 2 the input or the usage is wrong (unknown option, missing or
unreadable file, syntax error, invalid JSON); 130/143 interrupted by
SIGINT/SIGTERM. Any :class:`phasec.errors.PhasecError` becomes a message on
stderr (a parse error with its source line and a caret), never a Python
traceback. Anything else that escapes a subcommand is a bug in phasec: it is
reported as one "internal error, please report" line, exit status 1 (set
``PHASEC_TRACEBACK=1`` to see the traceback).

Text written to stdout and stderr while a subcommand runs goes through
:func:`phasec.errors.printable` (:class:`phasec.errors.MessageStream`): control characters
from model text, programs or servers are shown escaped; on stderr (messages)
over-long lines are clipped too. Binary output (``.buffer``) is untouched.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from phasec import __version__, console, fileio
from phasec.errors import InputError, MessageStream, ParseError, PhasecError
from phasec.interrupts import interrupted_exit, signals_as_exceptions
from phasec.target.tuning import host_tuning

EXIT_FAILED, EXIT_USAGE = 1, 2
EPILOG = ("exit status: 0 success, 1 check failed (phase error, violations, mismatching "
          "results), 2 input or usage error, 130/143 interrupted")

#: subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "opt": ("phasec.cli.opt", "run a textual pass pipeline on a module (like mlir-opt)"),
    "passes": ("phasec.cli.passes", "list every registered pass with its phases"),
    "build": ("phasec.cli.build", "compile a module to a VM executable"),
    "run": ("phasec.cli.run", "compile and run a module (default: the bundled example model)"),
    "fuzz": ("phasec.cli.fuzz", "fuzz pass orderings on random programs"),
    "bisect": ("phasec.cli.bisect",
               "find the pass that made the compiled model differ from its reference"),
    "schema": ("phasec.cli.schema", "print the JSON Schema of the module format"),
    "import": ("phasec.cli.import_model", "import an ONNX model as TVMScript or JSON"),
    "example": ("phasec.cli.example", "write out a bundled example model (mlp, cnn, transformer)"),
    "cache": ("phasec.cli.cache",
              "show (info), empty (clear) or shrink (prune) the persistent kernel cache"),
}


#: the subcommands that read no input file (no --max-input-size)
READ_NOTHING = frozenset({"passes", "schema", "cache", "example"})


def add_input_limit_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-input-size``: the cap on what one read takes (phasec.fileio)."""
    parser.add_argument("--max-input-size", metavar="SIZE", default=None,
                        help="refuse input files (and archive members) larger than SIZE "
                             "(e.g. 512M, 8G; default 4G or $PHASEC_MAX_INPUT_SIZE)")


def add_verbosity_arguments(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose``, on every subcommand (a subcommand
    that defines one itself, with a more specific help, keeps its own)."""
    taken = parser._option_string_actions
    if "-q" not in taken and "--quiet" not in taken:
        parser.add_argument("-q", "--quiet", action="store_true",
                            help="print results and errors only (no progress lines)")
    if "-v" not in taken and "--verbose" not in taken:
        parser.add_argument("-v", "--verbose", action="store_true",
                            help="say more: also what LLVM reports while compiling kernels "
                                 "(optimization remarks, loops it did not vectorize)")


def apply_verbosity(args: argparse.Namespace) -> None:
    """Set :mod:`phasec.console`'s verbosity from ``-q``/``-v`` (both at once
    is a usage error) and show progress lines if standard error is a terminal."""
    quiet, verbose = getattr(args, "quiet", False), getattr(args, "verbose", False)
    if quiet and verbose:
        raise InputError("-q (--quiet) and -v (--verbose) contradict each other: give one")
    console.set_verbosity(console.QUIET if quiet else console.VERBOSE if verbose
                          else console.NORMAL)
    console.enable_progress()


def apply_input_limit(value: str | None) -> None:
    """Set the process-wide input cap from ``--max-input-size`` (and check
    ``$PHASEC_MAX_INPUT_SIZE`` now, so a bad value is a usage error at once)."""
    fileio.set_max_input_bytes(None)  # each invocation starts from the environment
    if value is not None:
        fileio.set_max_input_bytes(fileio.parse_size(value, "--max-input-size"))
    else:
        fileio.max_input_bytes()


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: the first argument that is
    not an option (the top-level parser only has --help and --version)."""
    return next((a for a in argv if not a.startswith("-")), None)


#: the subcommands that take a pipeline, and so ``--load`` (pass plugins)
PIPELINE_SUBCOMMANDS = ("opt", "passes", "build", "run", "fuzz")


def add_load_argument(parser: argparse.ArgumentParser) -> None:
    """``--load``: a user's module of passes (phasec.transform.plugins). The
    subcommand's ``run`` loads them (with $PHASEC_PLUGINS and the installed
    entry points) first, by ``load_plugins(args.load)``: the pass machinery
    is not imported for ``phasec --help``."""
    parser.add_argument("--load", metavar="MODULE_OR_FILE", action="append", default=[],
                        help="import a module of passes (a .py file or a module name; "
                             "repeatable) so its registered passes can be named like built-in "
                             "ones; also $PHASEC_PLUGINS and installed 'phasec.passes' "
                             "entry points")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the options of the subcommand ``argv`` names (every
    subcommand's, when ``argv`` is None). Only that subcommand's module is
    imported: ``phasec --help`` and ``phasec passes`` do not pay for the
    compiler, the fuzzer or the ONNX frontend."""
    parser = argparse.ArgumentParser(prog="phasec", description="phase-checked tensor compiler",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"phasec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = None if argv is None else _chosen_command(argv)
    for name, (module, help_text) in SUBCOMMANDS.items():
        if importlib.util.find_spec(module) is None:
            # Not in this installation (yet): listed, but says so when run.
            p = sub.add_parser(name, help=f"{help_text} (not available)", description=help_text)
            p.set_defaults(_module=None)
            continue
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=EPILOG)
        p.set_defaults(_module=module)
        if argv is None or name == chosen:
            importlib.import_module(module).add_arguments(p)
            if name not in READ_NOTHING:
                add_input_limit_argument(p)
            add_verbosity_arguments(p)
            if name in PIPELINE_SUBCOMMANDS:
                add_load_argument(p)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     extra: list[str]) -> int:
    """Report arguments the subcommand does not take, with its usage and the
    closest option it does take (not the top-level usage)."""
    sub_parser = next(a for a in parser._actions
                      if isinstance(a, argparse._SubParsersAction)).choices[args.command]
    known = [s for a in sub_parser._actions for s in a.option_strings]
    wrong = extra[0].split("=", 1)[0]
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6) if wrong.startswith("-") \
        else []
    hint = f"; did you mean {close[0]}?" if close else ""
    print(sub_parser.format_usage().rstrip(), file=sys.stderr)
    print(f"phasec {args.command}: error: unrecognized argument{'s' if len(extra) > 1 else ''}: "
          f"{' '.join(extra)}{hint}", file=sys.stderr)
    return EXIT_USAGE


def _error_text(command: str, err: PhasecError) -> str:
    """The message for a PhasecError; a parse error shows its source line and a caret."""
    text = f"phasec {command}: error: {err}"
    span = getattr(err, "span", None)
    if isinstance(err, ParseError) and span is not None and span.file:
        try:  # the file was read once; it may have been swapped since, so check again
            with fileio.open_regular(span.file) as fh:
                lines = fh.read(1 << 24).decode("utf-8", "replace").splitlines()
        except (OSError, PhasecError):
            return text
        # (imported here, as below: the compiler's modules load with a subcommand,
        # not for ``phasec --help``)
        from phasec.verifier.diagnostics import source_excerpt

        text = "\n".join([text, *source_excerpt(lines, span)])
    return text


def _is_usage_error(err: PhasecError) -> bool:
    """Whether the input or the usage is wrong (exit 2): a bad file, its
    contents, an option value, a bad pass specification (``--passes Nope``)."""
    from phasec.transform import PassConfigError

    return isinstance(err, (InputError, PassConfigError))


def main(argv: Sequence[str] | None = None) -> int:
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MessageStream(stdout, data=True), MessageStream(stderr)
    try:
        with signals_as_exceptions() as stopper, fileio.input_limit_scope():
            try:  # (SIGTERM too: cleanups run, exit 143)
                return _main(argv, stopper)
            except KeyboardInterrupt as exc:  # while starting up (also Terminated)
                stopper.done.set()
                status, word = interrupted_exit(exc)
                command = _chosen_command(sys.argv[1:] if argv is None else argv)
                print(f"phasec{f' {command}' if command else ''}: {word}", file=sys.stderr)
                return status
    finally:  # (a subcommand may have replaced them: stdout by devnull after a broken pipe)
        console.set_verbosity(console.NORMAL)  # -q/-v are this invocation's only
        if isinstance(sys.stdout, MessageStream) and sys.stdout.stream is stdout:
            sys.stdout = stdout
        if isinstance(sys.stderr, MessageStream) and sys.stderr.stream is stderr:
            sys.stderr = stderr


def _main(argv: Sequence[str] | None, stopper: Any) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        return _unknown_options(parser, args, extra)
    if args._module is None:
        print(f"phasec {args.command}: error: this subcommand is not available in this "
              "installation", file=sys.stderr)
        return 2
    try:
        apply_input_limit(getattr(args, "max_input_size", None))
        host_tuning()  # PHASEC_VECTOR_BITS, PHASEC_WINOGRAD: a bad value is a usage error now
        apply_verbosity(args)
        with console.erasing_progress():
            return int(importlib.import_module(args._module).run(args) or 0)
    except PhasecError as err:
        print(_error_text(args.command, err), file=sys.stderr)
        return EXIT_USAGE if _is_usage_error(err) else EXIT_FAILED
    except BrokenPipeError:  # output piped into `head`: not an error
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep the final flush quiet
        except OSError:
            pass
        return 0
    except OSError as err:
        print(f"phasec {args.command}: error: {err.strerror or err}: {err.filename or ''}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        stopper.done.set()
        # One line; files being written were left as they were (fileio).
        status, word = interrupted_exit(exc)
        print(f"phasec {args.command}: {word}", file=sys.stderr)
        return status
    except MemoryError:
        print(f"phasec {args.command}: error: out of memory", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"phasec {args.command}: error: the input is nested too deeply", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - last resort: never a traceback for the user
        if os.environ.get("PHASEC_TRACEBACK"):
            traceback.print_exc()
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        print(f"phasec {args.command}: internal error, please report: {detail[:500]}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
