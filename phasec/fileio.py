"""Every file phasec reads or writes goes through here.

Writing (:func:`write_atomic`): the data goes to a temporary file in the
target's directory, is flushed to disk (``fsync``) and only then renamed
over the target (``os.replace``, atomic on POSIX and Windows). On any
failure — a full disk, a permission problem, Ctrl-C, SIGTERM — the previous
file stands untouched and the temporary file is removed, so a reader never
sees half a file and a failed command never destroys what was there. A
signal acts within a second even while gigabytes are written: data goes to
the file (and to a compressor, through :func:`pieces`) in pieces of
:data:`WRITE_PIECE_BYTES`, and the final ``fsync`` runs in a helper thread
while the caller waits in short slices. The
error is a :class:`~phasec.errors.FileAccessError` naming the path. Nothing
is ever written through a symbolic link: phasec resolves no link itself, a
link at the target's name is refused, and the rename replaces a name, never
a link's target.

Reading (:func:`read_bytes`, :func:`open_regular`, :func:`read_stream`):
only regular files are read — a device (``/dev/zero``), a FIFO or a socket
would block or never end — and sizes are capped: a file, standard input,
or what an archive's members declare (in total, or one of them) beyond
:func:`max_input_bytes` is refused before it is read or inflated. The cap
is 4 GiB by default (well above the models phasec compiles); set the
environment variable ``PHASEC_MAX_INPUT_SIZE`` (``512M``, ``8G``, a byte
count) or the ``--max-input-size`` option of the command-line tools to
change it.

JSON documents (:func:`load_json`) are counted before they are parsed: a
document with more values or deeper nesting than its reader allows is
refused before ``json.loads`` builds a single object (an executable's
``executable.json`` that inflates to half a gigabyte of ``{}`` would
otherwise take gigabytes).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import re
import secrets
import stat
import sys
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO, Union

from phasec.errors import FileAccessError, InputError

__all__ = ["write_atomic", "stream_descriptor", "read_bytes", "read_stream", "open_regular", "check_regular",
           "SafeZip", "read_npz", "load_json", "pieces", "check_json_size", "JSON_MAX_DEPTH",
           "max_input_bytes", "set_max_input_bytes", "parse_size", "format_size",
           "same_file", "input_limit_scope", "DEFAULT_MAX_INPUT_BYTES", "MAX_INPUT_ENV"]

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


# ---------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------

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


def _too_big(name: str, size: int | None, limit: int) -> FileAccessError:
    said = f" ({format_size(size)})" if size is not None else ""
    return _fail("read", name, f"it is larger{said} than the input size limit of "
                 f"{format_size(limit)}; raise the limit with --max-input-size or the "
                 f"environment variable {MAX_INPUT_ENV} if it is genuine")


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

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
            data = fh.read(limit + 1)  # a file that grew since fstat is still capped
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


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

# How the temporary file is opened; tests replace it to make writes fail midway.
_fdopen = os.fdopen

#: the paths that name one of this process's own open descriptors: written
#: to that descriptor (what a shell does with them), never reopened
_STREAM_PATH = re.compile(r"/dev/(?:(stdout)|(stderr)|fd/(\d+))|/proc/self/fd/(\d+)")


def stream_descriptor(path: PathLike) -> int | None:
    """The descriptor ``path`` names when it is one of this process's own
    streams (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), else None. :func:`write_atomic` writes to that
    descriptor as it is (a pipe, a terminal, a file the shell opened)."""
    m = _STREAM_PATH.fullmatch(os.fspath(path))
    if m is None:
        return None
    stdout, stderr, fd, proc_fd = m.groups()
    return 1 if stdout else 2 if stderr else int(fd or proc_fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: PathLike, data: Data, what: str = "file", encoding: str = "utf-8",
                 *, dir_fd: int | None = None, mode: int | None = None,
                 replace_special: bool = False) -> None:
    """Write ``data`` to ``path`` whole or not at all, never through a link.

    ``data`` is bytes, text (encoded with ``encoding``) or a function that
    writes to the binary file object it is given (for zip archives and
    ``numpy.savez``). The data goes to a temporary file in the target's
    directory (a rename across file systems would not be atomic), which is
    then renamed over ``path``: the rename replaces ``path`` itself, so a
    file is never written through a symbolic link to somewhere else.

    **Links.** phasec never resolves a link itself (the kernel's rules for
    links in sticky, world-writable directories then hold). A symbolic link
    at ``path`` is refused: it is either the user's own, and replacing it
    with a regular file would silently break it, or planted (say in
    ``/tmp``) to make phasec overwrite its target; phasec cannot tell the
    two apart, and the message says what to do (write to the link's target
    by its own path, or remove the link). Links in the directories leading
    to ``path`` are followed, as by any program. Should a link appear at
    ``path`` while the data is written, the rename replaces the link, not
    its target.

    **Not a file.** A directory is refused. An existing device or FIFO (say
    ``/dev/null``) cannot be replaced atomically and is written directly
    (opened without following links). ``/dev/stdout``, ``/dev/stderr``,
    ``/dev/fd/N`` and ``/proc/self/fd/N`` are written to this process's own
    descriptor (so ``-o /dev/stdout`` works on a pipe).

    The new file gets ``mode``; by default an existing file's permission
    bits, or what ``open()`` would give (``0o666`` less the umask).
    ``dir_fd``: ``path`` is relative to that open directory (as for
    ``os.open``). ``replace_special``: whatever is at ``path`` and is not a
    regular file (a link, a FIFO, a device) is replaced by the new file,
    never written into or refused -- for files phasec owns, like kernel
    cache entries.

    Raises :class:`FileAccessError` naming ``what`` and the path, saying the
    previous file is unchanged; a KeyboardInterrupt (or any other exception)
    leaves the previous file in place too, and is re-raised.
    """
    name = _Name(what, path)
    text = os.fspath(path)
    if "\x00" in text:
        raise _fail("write", name, "a path cannot contain NUL characters")
    if not text:
        raise _fail("write", name, "an empty path names no file")
    stream = stream_descriptor(text) if dir_fd is None and not replace_special else None
    if stream is not None:
        _write_stream(stream, name, data, encoding)
        return
    directory, base = os.path.split(text)
    if base in ("", ".", ".."):
        raise _fail("write", name, "it is a directory")
    directory = directory or "."
    if not _DIRECTORY_DESCRIPTORS:  # Windows: the same steps by path
        if dir_fd is not None:
            raise _fail("write", name, "this system cannot write relative to a directory")
        if not os.path.isdir(directory):
            raise _fail("write", name, f"there is no directory {directory!r}")
        _replace_in(_Dir(None, directory), base, name, data, encoding, mode, replace_special)
        return
    try:
        dfd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _fail("write", name, f"there is no directory {directory!r}") from None
    except NotADirectoryError:
        raise _fail("write", name, f"{directory!r} is not a directory") from None
    except OSError as exc:
        raise _open_error(name, exc, "write") from None
    try:
        _replace_in(_Dir(dfd, directory), base, name, data, encoding, mode, replace_special)
    finally:
        os.close(dfd)


#: whether directories can be opened and named relative to (POSIX; not Windows)
_DIRECTORY_DESCRIPTORS = os.open in os.supports_dir_fd and bool(_O_DIRECTORY)


class _Dir:
    """The target's directory: an open descriptor (names relative to it:
    nothing can be swapped in between), or only its path (Windows)."""

    def __init__(self, fd: int | None, path: str) -> None:
        self.fd = fd
        self.path = path

    def name(self, entry: str) -> str:
        """How to name ``entry`` together with ``dir_fd=self.fd``."""
        return entry if self.fd is not None else os.path.join(self.path, entry)

    def sync(self) -> None:
        """Make a rename in it durable (best effort: not every system can)."""
        fd = self.fd
        if fd is None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            if fd != self.fd:
                os.close(fd)


def _replace_in(where: _Dir, base: str, name: str, data: Data, encoding: str,
                mode: int | None, replace_special: bool) -> None:
    """Replace the entry ``base`` of the directory ``where`` (see write_atomic)."""
    try:
        st: os.stat_result | None = os.stat(where.name(base), dir_fd=where.fd,
                                            follow_symlinks=False)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _open_error(name, exc, "write") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise _fail("write", name, "it is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode) and not replace_special:
        if stat.S_ISLNK(st.st_mode):
            raise _link_refused(where, base, name)
        _write_special(where, base, name, data, encoding)
        return
    existed = st is not None
    if mode is None:  # the old file's bits, or what a plain open() would give
        mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) \
            else 0o666 & ~_umask()
    fd, tmp = _temporary(where, base, name, existed)
    try:
        try:  # created 0600; now the old file's bits or the default
            os.fchmod(fd, mode)
        except (AttributeError, OSError):  # no fchmod (Windows) or not permitted: keep 0600
            pass
        with _fdopen(fd, "wb") as fh:
            fd = -1  # owned by fh now
            _write_data(_Pieces(fh), data, encoding)
            fh.flush()
            _fsync_interruptibly(fh.fileno())
        # replaces the name: a link there is replaced, never its target
        os.replace(where.name(tmp), where.name(base), src_dir_fd=where.fd, dst_dir_fd=where.fd)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(where.name(tmp), dir_fd=where.fd)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _write_error(name, exc, existed) from None
        raise
    where.sync()


def _temporary(where: _Dir, base: str, name: str, existed: bool) -> tuple[int, str]:
    """A new file (mode 0600, created exclusively, never through a link) beside ``base``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | \
        getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = f".{base[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(where.name(tmp), flags, 0o600, dir_fd=where.fd), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise _write_error(name, exc, existed) from None
    raise _fail("write", name, "no temporary file name was free")


def _link_refused(where: _Dir, base: str, name: str) -> FileAccessError:
    try:
        to = f" (to {os.readlink(where.name(base), dir_fd=where.fd)!r})"
    except OSError:
        to = ""
    return _fail("write", name, f"it is a symbolic link{to}; phasec never writes through a "
                 f"link: give the path of the file itself, or remove the link")


#: the most one write call hands the system (or a compressor) at once: Python
#: runs signal handlers only between such calls, so Ctrl-C acts within one piece
WRITE_PIECE_BYTES = 1 << 20


class _Pieces:
    """A file object passing every write on in pieces of at most
    :data:`WRITE_PIECE_BYTES`: a write of gigabytes (a large array, a zip
    member being deflated) is many short calls, between which a SIGINT or
    SIGTERM handler can run. Everything else is the inner file's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if len(view) <= WRITE_PIECE_BYTES:
            return self._inner.write(view)
        for start in range(0, len(view), WRITE_PIECE_BYTES):
            self._inner.write(view[start:start + WRITE_PIECE_BYTES])
        return len(view)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> "_Pieces":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.close()


def pieces(fh: Any) -> Any:
    """``fh`` writing in pieces (see :class:`_Pieces`): for a writer that hands
    a large buffer to a call that cannot be interrupted, such as a member of a
    deflated zip archive (``zipfile`` compresses each write in one call)."""
    return _Pieces(fh)


def _fsync_interruptibly(fd: int) -> None:
    """``os.fsync(fd)`` in a helper thread, the calling thread waiting in short
    slices: flushing a large file can take seconds, during which a signal
    handler could not run; this way Ctrl-C and SIGTERM act at once (the
    caller then removes the temporary file; the flush finishes on its own)."""
    if threading.current_thread() is not threading.main_thread():
        os.fsync(fd)  # (signal handlers run in the main thread only)
        return
    done = threading.Event()
    failed: list[OSError] = []

    def flush() -> None:
        try:
            os.fsync(fd)
        except OSError as exc:
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=flush, name="phasec-fsync", daemon=True).start()
    while not done.wait(0.05):
        pass
    if failed:
        raise failed[0]


def _write_data(fh: BinaryIO, data: Data, encoding: str) -> None:
    if callable(data):
        data(fh)
    else:
        fh.write(data.encode(encoding) if isinstance(data, str) else data)


class _Sequential:
    """A stream (a pipe, a terminal, ``/dev/null``) as a file that cannot
    seek: ``zipfile`` and ``numpy.savez`` then write it front to back
    (``/dev/null`` claims to seek, yet always reports position 0, which
    breaks the zip directory's offsets)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, data: Any) -> int:
        return self._inner.write(data)

    def flush(self) -> None:
        self._inner.flush()

    def read(self, *args: Any) -> bytes:  # numpy tells a file object from a path by it
        raise io.UnsupportedOperation("a stream being written cannot be read")

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        raise io.UnsupportedOperation("a stream has no position")

    def seek(self, *args: Any) -> int:
        raise io.UnsupportedOperation("a stream cannot seek")


def _write_error(name: str, exc: OSError, existed: bool) -> FileAccessError:
    why = "no space left on device" if exc.errno == errno.ENOSPC else \
        "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
    after = "the previous file is unchanged" if existed else "nothing was written"
    return _fail("write", name, f"{why} ({after})")


def _write_special(where: _Dir, base: str, name: str, data: Data, encoding: str) -> None:
    """Write into an existing device or FIFO (not atomic: it cannot be)."""
    try:
        fd = os.open(where.name(base), os.O_WRONLY | _O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
                     | _O_CLOEXEC, dir_fd=where.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since it was looked at
            raise _link_refused(where, base, name) from None
        raise _fail("write", name, exc.strerror or str(exc)) from None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a file since: not atomic, refuse
            raise _fail("write", name, "it changed while being opened; nothing was written")
        with os.fdopen(fd, "wb") as fh:
            fd = -1
            _write_data(_Sequential(fh), data, encoding)
    except OSError as exc:
        raise _fail("write", name, exc.strerror or str(exc)) from None
    finally:
        if fd >= 0:
            os.close(fd)


def _write_stream(fd: int, name: str, data: Data, encoding: str) -> None:
    """Write to this process's descriptor ``fd`` (``/dev/stdout``...), as it is.

    Standard output and error go through ``sys.stdout``/``sys.stderr`` (their
    text is flushed first, so the order holds). A reader that went away
    (``| head``) raises BrokenPipeError, which the command line treats as
    the end of the output."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    target = getattr(stream, "buffer", None)
    try:
        if target is not None:
            stream.flush()  # type: ignore[union-attr]
            _write_data(_Sequential(target), data, encoding)
            target.flush()
            return
        with os.fdopen(os.dup(fd), "wb") as fh:
            _write_data(_Sequential(fh), data, encoding)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _fail("write", name, exc.strerror or str(exc)) from None


# ---------------------------------------------------------------------------
# Archives (executables, .npz)
# ---------------------------------------------------------------------------

#: deflate cannot expand data more than 1032:1; a member declaring more is
#: damaged (or built to exhaust memory), whatever its data says
DEFLATE_MAX_RATIO = 1032
#: what can go wrong inside zipfile/zlib/numpy on a damaged archive
_ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError,
                   NotImplementedError, RuntimeError, KeyError, IndexError, OverflowError,
                   UnicodeDecodeError)


class SafeZip:
    """A zip archive whose members are checked before anything is inflated.

    Each member's declared size must fit the input limit (so must their
    sum), a stored member must declare its real size, and a compressed one
    no more than deflate can produce from its compressed bytes (no other
    compression method is accepted: numpy and phasec write only these two).
    ``zipfile`` never inflates past a declared size, so these checks bound
    the memory any read takes. Every problem — including a zlib or CRC error
    while reading — is a :class:`FileAccessError` saying the file is damaged.
    ``source`` is a path or the archive's bytes (an archive inside another).
    ``compressed=False`` refuses compressed members: an archive inside
    another (an executable's ``constants.npz``) must store its members as
    they are, since two layers of deflate multiply (a few kilobytes would
    inflate to gigabytes) and nothing phasec writes nests compression.
    """

    def __init__(self, source: PathLike | bytes, what: str = "archive",
                 limit: int | None = None, name: str | None = None, *,
                 compressed: bool = True) -> None:
        self.limit = max_input_bytes() if limit is None else limit
        self.compressed = compressed
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.name = name or what
            fh: Any = io.BytesIO(bytes(source))
        else:
            self.name = _Name(what, source)
            fh = open_regular(source, what, self.limit)
        self._fh = fh
        try:
            self.zf = zipfile.ZipFile(fh)
            infos = self.zf.infolist()
        except _ARCHIVE_ERRORS as exc:
            fh.close()
            raise self._damaged(None, exc, "not a zip archive") from None
        self.members = {i.filename: i for i in infos}
        total = sum(i.file_size for i in infos)
        if total > self.limit:
            self.close()
            raise self._error(f"its members declare {format_size(total)} uncompressed, more "
                              f"than the input size limit of {format_size(self.limit)}; raise "
                              f"the limit with --max-input-size or {MAX_INPUT_ENV} if it is "
                              f"genuine")
        for info in infos:
            problem = self._member_problem(info)
            if problem:
                self.close()
                raise self._error(f"member {info.filename!r} {problem}: the file is damaged "
                                  f"(or built to exhaust memory)")

    # -- checks ----------------------------------------------------------------------
    def _member_problem(self, info: zipfile.ZipInfo) -> str:
        size, packed = info.file_size, info.compress_size
        if info.flag_bits & 0x1:
            return "is encrypted"
        if info.compress_type == zipfile.ZIP_STORED:
            return "" if size == packed else (f"is stored uncompressed but declares "
                                               f"{size} bytes in {packed}")
        if info.compress_type != zipfile.ZIP_DEFLATED:
            return f"uses compression method {info.compress_type}, which phasec never writes"
        if not self.compressed:
            return ("is compressed inside an archive that is itself compressed (nested "
                    "compression, which phasec never writes)")
        if size > packed * DEFLATE_MAX_RATIO + 1024:
            return (f"declares {format_size(size)} uncompressed from {format_size(packed)} "
                    f"compressed, more than deflate can produce")
        return ""

    def _error(self, reason: str) -> FileAccessError:
        return _fail("read", self.name, reason)

    def _damaged(self, member: str | None, exc: BaseException, what: str = "") -> FileAccessError:
        where = f"member {member!r}: " if member else ""
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        return self._error(f"{where}{what or 'damaged archive'} ({detail})")

    def info(self, member: str) -> zipfile.ZipInfo:
        try:
            return self.members[member]
        except KeyError:
            raise self._error(f"member {member!r} is missing") from None

    # -- reading ---------------------------------------------------------------------
    def read(self, member: str) -> bytes:
        """A member's bytes (checked above; a zlib or CRC error: damaged file)."""
        info = self.info(member)
        try:
            return self.zf.read(info)
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc) from None

    def npy_header(self, member: str) -> tuple[tuple[int, ...], bool, Any]:
        """(shape, fortran_order, dtype) from a ``.npy`` member's header, after
        checking it declares exactly the member's size (only the header is
        inflated)."""
        import numpy as np

        info = self.info(member)
        try:
            with self.zf.open(info) as fp:
                version = np.lib.format.read_magic(fp)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
                else:
                    raise ValueError(f"unsupported .npy format version {version}")
                offset = fp.tell()
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc, "not a valid .npy array") from None
        if dtype.hasobject:
            raise self._error(f"member {member!r} holds Python objects, which phasec never "
                              f"loads")
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise self._error(f"member {member!r} declares the shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes != info.file_size - offset:
            raise self._error(f"member {member!r} declares an array of shape {shape} and "
                              f"dtype {dtype} ({nbytes} bytes) but holds "
                              f"{info.file_size - offset} bytes of data")
        return tuple(shape), fortran, dtype

    def array(self, member: str) -> Any:
        """The array in a ``.npy`` member (header checked first; never pickles)."""
        import numpy as np

        self.npy_header(member)
        try:
            with self.zf.open(self.info(member)) as fp:
                return np.lib.format.read_array(fp, allow_pickle=False)
        except _ARCHIVE_ERRORS as exc:
            raise self._damaged(member, exc) from None

    def close(self) -> None:
        if hasattr(self, "zf"):
            self.zf.close()
        self._fh.close()  # ZipFile leaves a file object it was given open

    def __enter__(self) -> "SafeZip":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_npz(source: PathLike | bytes, what: str = ".npz archive",
             limit: int | None = None) -> dict[str, Any]:
    """Every array of an ``.npz`` archive, by name, each checked (see
    :class:`SafeZip`) before it is inflated; never unpickles anything."""
    with SafeZip(source, what, limit) as z:
        out = {}
        for member in z.members:
            if not member.endswith(".npy"):
                raise z._error(f"member {member!r} is not a .npy array")
            out[member[:-4]] = z.array(member)
        return out
