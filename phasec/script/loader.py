"""Loading module files: TVMScript (``.py``) or the JSON module format (``.json``)."""

from __future__ import annotations

import os
from pathlib import Path

from phasec.errors import FileAccessError, ParseError
from phasec.fileio import read_bytes
from phasec.ir.module import IRModule
from phasec.ir.node import Span
from phasec.script.parser import decode_source, parse

__all__ = ["load", "SUFFIXES"]

#: file suffix -> format
SUFFIXES = {".py": "TVMScript", ".json": "JSON"}


def load(path: str | bytes | os.PathLike) -> IRModule:
    """Read a module file: ``.py`` is TVMScript, ``.json`` the JSON module format.

    The file is data: TVMScript is parsed, never executed. Every problem
    (unknown suffix, missing or unreadable file, not a regular file, larger
    than :func:`phasec.fileio.max_input_bytes`, binary content, bad syntax)
    is a :class:`~phasec.errors.ParseError` naming the file.
    """
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load() expects a file path, not {type(path).__name__}")
    p = Path(path)
    name = str(path)
    if "\x00" in name:
        raise ParseError(f"cannot load {name!r}: a path cannot contain NUL characters")
    if p.is_dir():
        raise ParseError(f"cannot load {name!r}: it is a directory, not a module file")
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        known = ", ".join(f"{s} ({f})" for s, f in SUFFIXES.items())
        raise ParseError(f"cannot load {name!r}: unknown file type {p.suffix or '(no suffix)'!r}; "
                         f"expected {known}")
    try:
        # regular files only (a FIFO or /dev/zero would block or never end), capped in size
        data = read_bytes(p)
    except FileAccessError as exc:
        verb = "load" if exc.reason == "no such file" else "read"
        raise ParseError(f"cannot {verb} {name!r}: {exc.reason}") from None
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ParseError("the file contains NUL bytes; is it a binary file?", Span(name, line, 0))
    text = decode_source(data, name)
    if suffix == ".json":
        # pydantic's import costs more than most parses: only JSON files pay for it
        from phasec.script.json_format import from_json

        return from_json(text)
    return parse(text, filename=name)
