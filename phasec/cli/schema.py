"""``phasec schema``: print the JSON Schema of the module format."""

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


def run(args: argparse.Namespace) -> int:
    from ..script.json_format import json_schema

    print(json.dumps(json_schema(), indent=args.indent))
    return 0
