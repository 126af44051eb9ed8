"""``-o OUTPUT`` of the subcommands (``opt``, ``build``, ``import``): where a
result goes.

``-`` is standard output (as ``/dev/stdout``, which works on a pipe: it is
written to the descriptor the process has, never reopened); an empty path
is a usage error (it used to fall back to the default name silently); an
existing device or FIFO (``/dev/null``) is written as it is. Everything
else is written atomically by :func:`phasec.fileio.write_atomic`, which
never writes through a symbolic link.
"""

from __future__ import annotations

import os
import stat

from phasec.errors import InputError
from phasec.fileio import stream_descriptor

__all__ = ["STDOUT", "output_option", "is_stream", "to_stdout"]

#: how ``-`` is written
STDOUT = "/dev/stdout"


def output_option(value: str | None, option: str = "-o") -> str | None:
    """The path ``-o VALUE`` names: None (not given) stays None, ``-`` is
    :data:`STDOUT`, ``""`` is an InputError (exit status 2)."""
    if value is None:
        return None
    if not value.strip():
        raise InputError(f"{option} {value!r}: an empty path names no file; give a file name, "
                         f"or - for standard output")
    return STDOUT if value == "-" else value


def is_stream(path: str) -> bool:
    """Whether ``path`` is a stream rather than a file named by its suffix:
    one of the process's own descriptors (``/dev/stdout``) or an existing
    device or FIFO (``/dev/null``)."""
    if path == "-" or stream_descriptor(path) is not None:
        return True
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISBLK(mode) or \
        stat.S_ISSOCK(mode)


def to_stdout(path: str | None) -> bool:
    """Whether ``path`` (after :func:`output_option`) is standard output."""
    return path is not None and (path == "-" or stream_descriptor(path) == 1)
