"""``phasec schema``: print the JSON Schema of the module format."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--indent", type=int, default=2, help="indentation (default 2)")


def run(args: argparse.Namespace) -> int:
    from ..script.json_format import json_schema

    print(json.dumps(json_schema(), indent=args.indent))
    return 0
