"""``phasec schema``: print the JSON Schema of the module format (or, with
``--report``, of pipeline reports)."""

from __future__ import annotations

import argparse
import json


def _indent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 0 <= value <= MAX_INDENT:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_INDENT}, not {value}")
    return value


#: largest --indent accepted (the output grows with it)
MAX_INDENT = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--indent", type=_indent, default=2,
                        help=f"indentation, 0..{MAX_INDENT} (default 2)")
    parser.add_argument("--report", action="store_true",
                        help="the schema of pipeline reports (--report out.json) instead")


def run(args: argparse.Namespace) -> int:
    # (the one schema asked for is loaded: building the module format's takes ~1 s)
    if args.report:
        from phasec.explorer import report_json_schema as schema
    else:
        from phasec.script.json_format import json_schema as schema

    print(json.dumps(schema(), indent=args.indent))
    return 0
