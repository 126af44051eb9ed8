"""The ``phasec`` command line: one subcommand per module in this package.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int``.
Any :class:`phasec.errors.PhasecError` becomes a message on stderr and exit
status 1 (2 for usage errors and unusable files or paths), never a Python
traceback. Anything else that escapes a subcommand is a bug in phasec: it is
reported as one "internal error, please report" line, exit status 1 (set
``PHASEC_TRACEBACK=1`` to see the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from ..errors import PhasecError

#: subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "opt": ("phasec.cli.opt", "run a textual pass pipeline on a module (like mlir-opt)"),
    "passes": ("phasec.cli.passes", "list every registered pass with its phases"),
    "build": ("phasec.cli.build", "compile a module to a VM executable"),
    "run": ("phasec.cli.run", "compile and run a module (default: the bundled example model)"),
    "fuzz": ("phasec.cli.fuzz", "fuzz pass orderings on random programs"),
    "schema": ("phasec.cli.schema", "print the JSON Schema of the module format"),
}


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="phasec", description="phase-checked tensor compiler")
    parser.add_argument("--version", action="version", version=f"phasec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in SUBCOMMANDS.items():
        try:
            impl = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            # Not in this installation (yet): listed, but says so when run.
            p = sub.add_parser(name, help=f"{help_text} (not available)", description=help_text)
            p.set_defaults(_module=None)
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        impl.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args._module is None:
        print(f"phasec {args.command}: error: this subcommand is not available in this "
              "installation", file=sys.stderr)
        return 2
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except PhasecError as err:
        print(f"phasec {args.command}: error: {err}", file=sys.stderr)
        return 1
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
    except KeyboardInterrupt:
        return 130
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
