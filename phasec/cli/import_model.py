"""``phasec import``: an ONNX model as a phasec module file.

    phasec import model.onnx                    # TVMScript on standard output
    phasec import model.onnx -o model.py        # or model.json (the JSON module format)
    phasec import model.onnx --shape x=batch,3,224,224 -o model.json
    cat model.onnx | phasec import - -o model.json   # the model from standard input

The model is imported with :func:`phasec.frontend.onnx.from_onnx` (verified,
phase ingestion) and written atomically (a temporary file, then a rename:
a failure leaves any previous file as it was). ``--shape NAME=D1,D2,...``
overrides a graph input's shape; a dimension that is not an integer is a
symbolic dimension of that name. Weights are written as constants: the
JSON format stores them as bytes, TVMScript as nested lists (much larger and
slower to read back for big models). A model using unsupported operators
exits with status 2 and lists every unsupported node.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from phasec.errors import InputError
from phasec.fileio import read_stream, same_file, write_atomic
from phasec import console
from phasec.frontend.onnx import from_onnx
from phasec.script.printer import syntax
from phasec.cli.opt import add_syntax_argument, check_output_suffix, module_text
from phasec.cli._outputs import is_stream, output_option, to_stdout

#: constants beyond this many bytes make a TVMScript output worth a note
_LARGE_TEXT_CONSTANTS = 16 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="MODEL",
                        help="ONNX model file (.onnx), or - for standard input")
    parser.add_argument("-o", "--output", metavar="OUTPUT", default=None,
                        help="write the module here (.py: TVMScript, .json: JSON) instead of "
                             "standard output")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="shape of graph input NAME (a non-integer dimension is a symbolic "
                             "dimension of that name); repeatable")
    add_syntax_argument(parser)


def parse_shapes(items: list[str]) -> dict[str, tuple[int | str, ...]]:
    """``["x=batch,3,224,224"]`` -> ``{"x": ("batch", 3, 224, 224)}``."""
    shapes: dict[str, tuple[int | str, ...]] = {}
    for item in items:
        name, eq, dims = item.rpartition("=")
        if not eq or not name:
            raise InputError(f"--shape {item!r}: expected NAME=D1,D2,... e.g. --shape x=1,3,224,224")
        parts = [d.strip() for d in dims.split(",")] if dims.strip() else []
        out: list[int | str] = []
        for d in parts:
            if re.fullmatch(r"\d+", d):
                out.append(int(d))
            elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", d):
                out.append(d)
            else:
                raise InputError(f"--shape {item!r}: dimension {d!r} is neither a non-negative "
                                 "integer nor a name")
        shapes[name] = tuple(out)
    return shapes


def run(args: argparse.Namespace) -> int:
    output = output_option(args.output)
    check_output_suffix(output)
    shapes = parse_shapes(args.shape)
    from_stdin = args.input == "-"
    if (output is not None and not is_stream(output) and not from_stdin
            and same_file(args.input, output)):
        raise InputError(f"-o {output!r} is the input model; choose another name")
    model = read_stream(sys.stdin, "standard input") if from_stdin else args.input
    if from_stdin and isinstance(model, str):  # (a text stream without a binary buffer)
        model = model.encode("utf-8", "surrogateescape")
    if from_stdin and not model:
        raise InputError("standard input is empty: expected an ONNX model (phasec import - "
                         "< model.onnx)")
    with console.step(f"importing {'standard input' if from_stdin else Path(args.input).name}"):
        mod = from_onnx(model, shapes=shapes or None)
    with syntax(args.syntax), console.step("printing the module"):
        text = module_text(mod, output)
    if output is None or to_stdout(output):
        sys.stdout.write(text)
        return 0
    write_atomic(output, text, what="module")
    fmt = "JSON" if Path(output).suffix.lower() == ".json" else "TVMScript"
    n_bindings = sum(len(b.bindings) for b in mod["main"].body.blocks)
    print(f"wrote {output}: {fmt}, phase {mod.phase.label}, {n_bindings} bindings in main",
          file=sys.stderr)
    if fmt == "TVMScript" and len(text) > _LARGE_TEXT_CONSTANTS:
        print("note: the weights are written as nested lists; the JSON format (-o *.json) "
              "stores them as bytes, smaller and faster to read", file=sys.stderr)
    return 0
