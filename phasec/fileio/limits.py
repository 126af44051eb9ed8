"""Size limits on what phasec reads: ``--max-input-size`` and ``$PHASEC_MAX_INPUT_SIZE``.

Part of :mod:`phasec.fileio` (see its docstring for the whole policy)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Union

from phasec.errors import InputError


#: the default cap on what one read may take (a file, standard input, an archive member)
DEFAULT_MAX_INPUT_BYTES = 4 << 30
#: the environment variable that overrides it
MAX_INPUT_ENV = "PHASEC_MAX_INPUT_SIZE"

_override: int | None = None  # set_max_input_bytes (the CLIs' --max-input-size)

# open() flags that not every system has (0: not available)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

PathLike = Union[str, "os.PathLike[str]"]
Data = Union[bytes, str, Callable[[BinaryIO], Any]]


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, what: str = "size") -> int:
    """``"512M"`` -> 536870912; plain byte counts, K/M/G/T (binary, an
    optional ``B``/``iB`` after). ``InputError`` naming ``what`` otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(text))
    if m is None:
        raise InputError(f"{what}: {text!r} is not a size (examples: 1000000, 512M, 4G)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise InputError(f"{what}: the size must be positive, not {text!r}")
    return value


def format_size(n: int) -> str:
    """A byte count for messages: ``2 GiB``, ``1.5 MiB``, ``812 bytes``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} byte{'' if n == 1 else 's'}"


def max_input_bytes() -> int:
    """The current cap: :func:`set_max_input_bytes`, else ``PHASEC_MAX_INPUT_SIZE``,
    else :data:`DEFAULT_MAX_INPUT_BYTES`."""
    if _override is not None:
        return _override
    env = os.environ.get(MAX_INPUT_ENV)
    if env:
        return parse_size(env, f"the environment variable {MAX_INPUT_ENV}")
    return DEFAULT_MAX_INPUT_BYTES


def set_max_input_bytes(limit: int | None) -> None:
    """Set the cap for this process (None: back to the environment/default)."""
    global _override
    if limit is not None and limit <= 0:
        raise InputError(f"the input size limit must be positive, not {limit}")
    _override = limit


@contextlib.contextmanager
def input_limit_scope() -> Iterator[None]:
    """Restore the cap set by :func:`set_max_input_bytes` on leaving: a
    command-line invocation run inside a longer-lived process (a test, a
    notebook) leaves the process's cap as it found it."""
    saved = _override
    try:
        yield
    finally:
        set_max_input_bytes(saved)
