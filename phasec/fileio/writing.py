"""Writing: whole or not at all, never through a link, interruptible.

Part of :mod:`phasec.fileio` (see its docstring for the whole policy)."""

from __future__ import annotations

import errno
import io
import os
import re
import secrets
import stat
import sys
import threading
from typing import Any, BinaryIO

from phasec.errors import FileAccessError
from phasec.fileio.limits import Data, PathLike, _O_CLOEXEC, _O_DIRECTORY, _O_NOFOLLOW
from phasec.fileio.reading import _Name, _fail, _open_error


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
