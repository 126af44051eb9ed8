"""Reading: regular files only, sizes capped, JSON counted before it is parsed.

Part of :mod:`phasec.fileio` (see its docstring for the whole policy)."""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import IO, Any, BinaryIO

from phasec.errors import FileAccessError, InputError
from phasec.fileio.limits import (
    MAX_INPUT_ENV, PathLike, _O_CLOEXEC, _O_NOFOLLOW, _O_NONBLOCK, format_size, max_input_bytes,
)


class _Name(str):
    """How messages name a file (``output 'x.py'``), remembering its path."""

    path: str

    def __new__(cls, what: str, path: PathLike) -> "_Name":
        text = os.fspath(path)
        self = super().__new__(cls, f"{what} {text!r}".strip())
        self.path = text
        return self


def _fail(verb: str, name: str, reason: str) -> FileAccessError:
    """``cannot read 'x.py': it is a FIFO (named pipe), not a regular file``."""
    return FileAccessError(f"cannot {verb} {name}: {reason}", path=getattr(name, "path", name),
                           reason=reason)


def _too_big(name: str, size: int | None, limit: int) -> FileAccessError:
    said = f" ({format_size(size)})" if size is not None else ""
    return _fail("read", name, f"it is larger{said} than the input size limit of "
                 f"{format_size(limit)}; raise the limit with --max-input-size or the "
                 f"environment variable {MAX_INPUT_ENV} if it is genuine")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_error(name: str, exc: OSError, verb: str = "read") -> FileAccessError:
    if isinstance(exc, FileNotFoundError):
        why = "no such file"
    elif isinstance(exc, IsADirectoryError):
        why = "it is a directory"
    elif isinstance(exc, PermissionError):
        why = "permission denied"
    else:
        why = exc.strerror or str(exc)
    return _fail(verb, name, why)


def check_regular(path: PathLike, what: str = "", *, follow_symlinks: bool = True,
                  dir_fd: int | None = None) -> os.stat_result:
    """``os.stat`` of ``path`` if it is a regular file (symbolic links
    followed unless ``follow_symlinks`` is False: then a link is refused);
    otherwise a FileAccessError saying what it is. Does not open the file,
    so a FIFO cannot block here. ``dir_fd`` as for ``os.stat``."""
    name = _Name(what, path)
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        if isinstance(exc, ValueError):
            raise _fail("read", name, "a path cannot contain NUL characters") from None
        raise _open_error(name, exc) from None
    if stat.S_ISLNK(st.st_mode):
        raise _fail("read", name, "it is a symbolic link, which is not followed here")
    if not stat.S_ISREG(st.st_mode):
        raise _fail("read", name, f"it is {_kind(st.st_mode)}, not a regular file")
    return st


def open_regular(path: PathLike, what: str = "", limit: int | None = None, *,
                 follow_symlinks: bool = True, dir_fd: int | None = None) -> BinaryIO:
    """Open a regular file for binary reading, after checking what it is and
    its size (``limit``, default :func:`max_input_bytes`).

    The file is opened non-blocking and checked again on the open descriptor,
    so a path swapped for a FIFO between the two checks neither blocks nor
    gets read. ``follow_symlinks=False`` opens with ``O_NOFOLLOW``: a link
    is refused, even one that appears between the check and the open.
    ``dir_fd``: ``path`` is relative to that open directory."""
    name = _Name(what, path)
    limit = max_input_bytes() if limit is None else limit
    check_regular(path, what, follow_symlinks=follow_symlinks, dir_fd=dir_fd)
    flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= _O_NOFOLLOW
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise _fail("read", name, "it is a symbolic link, which is not followed here"
                        ) from None
        raise _open_error(name, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail("read", name, f"it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise _too_big(name, st.st_size, limit)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: PathLike, what: str = "", limit: int | None = None) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes
    (default :func:`max_input_bytes`); FileAccessError naming the path for a
    missing, unreadable, special or too large file."""
    name = _Name(what, path)
    limit = max_input_bytes() if limit is None else limit
    with open_regular(path, what, limit) as fh:
        try:
            # the size fstat saw, plus one byte: read(limit + 1) would allocate
            # the whole limit (4 GiB) up front, an "out of memory" for a tiny
            # file under `ulimit -v` or strict overcommit
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(min(size, limit) + 1)
            while size < len(data) <= limit:  # it grew since fstat: read on, still capped
                chunk = fh.read(min(1 << 20, limit + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise _open_error(name, exc) from None
    if len(data) > limit:
        raise _too_big(name, None, limit)
    return data


def read_stream(stream: IO[Any], name: str = "standard input", limit: int | None = None
                ) -> bytes | str:
    """All of ``stream`` (standard input, whatever it is connected to — a
    pipe, a terminal, ``/dev/zero``), read in chunks and refused once it
    passes ``limit``. Returns bytes for a binary stream, str for a text one."""
    limit = max_input_bytes() if limit is None else limit
    source = stream.buffer if hasattr(stream, "buffer") else stream
    chunks: list[Any] = []
    total = 0
    while True:
        try:
            chunk = source.read(min(1 << 20, limit + 1 - total))
        except OSError as exc:
            raise _fail("read", name, exc.strerror or str(exc)) from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_big(name, None, limit)
    if chunks and isinstance(chunks[0], str):
        return "".join(chunks)
    return b"".join(chunks)


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether two paths name the same file (the same inode when both exist;
    the same resolved path otherwise)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        try:
            return os.path.realpath(a) == os.path.realpath(b)
        except (OSError, ValueError):
            return False


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------

#: how deeply a JSON document phasec reads may nest (arrays and objects)
JSON_MAX_DEPTH = 200
_JSON_SCAN_CHUNK = 4 << 20


def check_json_size(text: str | bytes, what: str, max_values: int,
                    max_depth: int = JSON_MAX_DEPTH) -> None:
    """Refuse a JSON text with more than ``max_values`` values (objects,
    arrays and the items in them, counted by their separators) or nested
    more than ``max_depth`` deep, without parsing it: the count runs over
    the text (strings skipped) with numpy, a few MiB at a time, so a
    document built to expand into gigabytes of Python objects is refused in
    a fraction of a second. ``InputError`` naming ``what``. Invalid JSON is
    left to the parser."""
    import numpy as np  # (fileio itself does without numpy)

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    # An escaped backslash or quote is two bytes that neither open nor close a
    # string: blank them (same length), left to right as JSON reads them.
    if b"\\" in data:
        data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    codes = np.frombuffer(data, np.uint8)
    inside = False  # within a string at the end of the previous chunk
    values = depth = deepest = 0
    for start in range(0, len(codes), _JSON_SCAN_CHUNK):
        chunk = codes[start:start + _JSON_SCAN_CHUNK]
        quotes = chunk == ord('"')
        in_string = np.bitwise_xor.accumulate(quotes)  # (a closing quote: False)
        if inside:
            in_string = ~in_string
        inside = bool(in_string[-1])
        structural = chunk[~in_string & ~quotes]
        opens = np.count_nonzero((structural == ord("[")) | (structural == ord("{")))
        values += opens + np.count_nonzero((structural == ord(",")) | (structural == ord(":")))
        if values > max_values:
            raise InputError(f"{what}: the JSON document holds more than {max_values:,} "
                             f"values; it is damaged or built to exhaust memory")
        closes = (structural == ord("]")) | (structural == ord("}"))
        brackets = structural[closes | (structural == ord("[")) | (structural == ord("{"))]
        if len(brackets) and max_depth >= 0:
            steps = np.where((brackets == ord("]")) | (brackets == ord("}")), -1, 1)
            running = depth + np.cumsum(steps, dtype=np.int64)
            deepest = max(deepest, int(running.max()))
            depth = int(running[-1])
            if deepest > max_depth:
                raise InputError(f"{what}: the JSON document is nested too deeply (more than "
                                 f"{max_depth} levels): it is damaged or built to exhaust "
                                 f"the parser")


def load_json(text: str | bytes, what: str, max_values: int,
              max_depth: int = JSON_MAX_DEPTH) -> Any:
    """``json.loads(text)`` after :func:`check_json_size`; an ``InputError``
    naming ``what`` for too large, too deep or invalid JSON."""
    check_json_size(text, what, max_values, max_depth)
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{what}: invalid JSON ({' '.join(str(exc).split())[:200]})") from None
    except RecursionError:  # (a lower max_depth than Python's stack allows is checked above)
        raise InputError(f"{what}: the JSON document is nested too deeply") from None
