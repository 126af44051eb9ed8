"""``phasec example``: write out a bundled example model, to follow the
README with or to start from.

    phasec example                    # the MLP as TVMScript on standard output
    phasec example cnn -o model.py    # a file: TVMScript as bundled (comments kept)
    phasec example transformer -o model.json

These are the models ``phasec run --example NAME`` compiles and runs
(``phasec/examples/NAME.py``, package data).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phasec.fileio import write_atomic
from phasec.script.parser import parse
from phasec.cli._outputs import output_option, to_stdout
from phasec.cli.opt import check_output_suffix, module_text
from phasec.cli.run import DEFAULT_EXAMPLE, EXAMPLES, example_source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", nargs="?", default=DEFAULT_EXAMPLE,
                        choices=EXAMPLES,
                        help=f"which example: {', '.join(EXAMPLES)} (default {DEFAULT_EXAMPLE})")
    parser.add_argument("-o", "--output", metavar="OUTPUT", default=None,
                        help="write it here (.py: TVMScript, .json: JSON) instead of standard "
                             "output")


def run(args: argparse.Namespace) -> int:
    output = output_option(args.output)
    check_output_suffix(output)
    source = example_source(args.name)
    if output is not None and Path(output).suffix.lower() == ".json":
        text = module_text(parse(source, f"phasec/examples/{args.name}.py"), output)
    else:
        text = source
    if output is None or to_stdout(output):
        sys.stdout.write(text)
        return 0
    write_atomic(output, text, what="module")
    print(f"wrote {output}: the bundled {args.name} example (phase ingestion); try "
          f"phasec run {output}", file=sys.stderr)
    return 0
