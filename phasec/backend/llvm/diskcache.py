"""The persistent kernel cache: compiled object code on disk.

A second process compiling the same kernels (a second ``phasec run`` of a
model, a test suite, a service restart) loads their machine code instead of
running LLVM again. An entry is keyed by the SHA-256 of everything the code
depends on. For kernel libraries (:func:`program_key`) that is the program
itself (an exact fingerprint of the PrimFuncs, names included), the code
generation settings and the code generator's own sources, so a warm build
finds its entry without generating any LLVM IR; for IR compiled directly
(:func:`entry_key`) it is the IR text. Both add the optimization level, the
target (triple, CPU, features), and the phasec, llvmlite and LLVM versions.

Where: ``$PHASEC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/phasec/kernels``,
else ``~/.cache/phasec/kernels``. ``PHASEC_KERNEL_CACHE=off`` turns the cache
off; ``phasec cache clear`` (or :func:`clear`) empties it, ``phasec cache
info`` shows where it is and how big, ``phasec cache prune`` (or
:func:`prune`) shrinks it to its size limit.

**Trust.** An entry is native code that runs in the process that loads it,
so the cache trusts nothing it did not write itself:

* Every directory level phasec creates is made with mode 0700 (an existing
  parent such as ``~/.cache`` is left as it is).
* The cache directory, its subdirectories and its entries must be owned by
  the current user and writable by nobody else (as ssh, gpg and pip
  require). Otherwise phasec says so once per process (a
  :class:`KernelCacheWarning`) and compiles without that directory or
  entry; a ``PHASEC_CACHE_DIR`` on a shared directory (``/tmp`` itself, a
  group-writable project folder) is therefore never used.
* Every level is opened relative to the one above it, never following a
  link (``O_NOFOLLOW``), so nothing can be swapped in between the checks
  and the reads. An entry must be a regular file (opened non-blocking: a
  FIFO cannot hang the open) of at most :data:`MAX_ENTRY_BYTES` (256 MiB;
  the largest kernel library of the bundled models is a few MiB), read
  from the checked descriptor.
* An entry carries its own key and an HMAC-SHA256 of its whole content
  under a random secret phasec keeps in the cache directory (``secret``,
  mode 0600). An entry filed under another key's name (a swapped or copied
  entry), damaged, truncated, or written by anything that does not know
  the secret (a checksum recomputed over other bytes) is ignored and
  rebuilt; all of this is checked before a byte reaches LLVM.
* On a system that cannot open directories (Windows) none of this can be
  held, and the cache is not used.
* Entries are written atomically (a temporary file renamed into place,
  :func:`phasec.fileio.write_atomic`): concurrent processes never see half
  an entry, and whatever is at an entry's name (a link, a FIFO) is replaced,
  never written through.

**Size.** The cache holds at most ``PHASEC_CACHE_MAX_SIZE`` bytes (default
1 GiB; ``512M``, ``4G``, a byte count): the least recently used entries
(by modification time, which a load refreshes) are removed until it fits,
at a process's first new entry and then whenever it has written another
sixteenth of the limit since (listing the whole cache after every entry
cost each store time proportional to the cache: a process compiling a
thousand small models spent 15% of its time listing it). So each process
writing at the same time may take the cache a sixteenth over its limit
until its next eviction. An invalid ``PHASEC_KERNEL_CACHE`` or
``PHASEC_CACHE_MAX_SIZE`` is an :class:`~phasec.errors.InputError` naming
the variable.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import mmap
import os
import re
import secrets
import stat
import struct
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from phasec.errors import FileAccessError, InputError
from phasec.fileio import format_size, open_regular, parse_size, write_atomic

__all__ = ["cache_dir", "enabled", "entry_key", "program_key", "load", "store", "discard", "clear",
           "info",
           "prune", "max_bytes", "KernelCacheWarning", "MAX_ENTRY_BYTES", "DEFAULT_MAX_BYTES",
           "CACHE_DIR_ENV", "KERNEL_CACHE_ENV", "MAX_SIZE_ENV"]

#: where the cache is (see the module docstring for the default)
CACHE_DIR_ENV = "PHASEC_CACHE_DIR"
#: ``off`` turns the cache off
KERNEL_CACHE_ENV = "PHASEC_KERNEL_CACHE"
#: the size limit of the whole cache
MAX_SIZE_ENV = "PHASEC_CACHE_MAX_SIZE"
#: the default size limit of the whole cache
DEFAULT_MAX_BYTES = 1 << 30
#: the largest entry read (or written): far above any kernel library, far
#: below what a link to ``/dev/zero`` or a planted huge file would cost
MAX_ENTRY_BYTES = 256 << 20

# Entry layout: magic, HMAC-SHA256 (under the cache's secret) of everything
# after it, the key (32 raw bytes), the object code's and the optimized IR's
# sizes, then the object code and the IR (UTF-8).
_MAGIC = b"PHASECK2"
_HEADER = struct.Struct("<8s32s32sQQ")
_SUFFIX = ".kc"
#: the file suffix of each kind of entry: kernel libraries' object code, and
#: whole builds (executables, see phasec/backend/vm/buildcache.py)
_SUFFIXES = {"kernels": _SUFFIX, "build": ".kb"}
_SECRET = "secret"
_SECRET_BYTES = 32
_KEY = re.compile(r"[0-9a-f]{64}")
#: a temporary file older than this was left by a process that died mid-write
_STALE_TEMPORARY_SECONDS = 3600
#: a process evicts once it has written this share of the size limit since
#: its last eviction (see the module docstring, "Size")
_EVICT_SHARE = 1 / 16
#: bytes this process has stored since its last eviction (None: it has not
#: evicted yet)
_unevicted: int | None = None
_EVICT_LOCK = threading.Lock()

_ON = ("on", "1", "yes", "true", "")
_OFF = ("off", "0", "no", "false")

_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class KernelCacheWarning(UserWarning):
    """The kernel cache (or an entry) is not private to the current user,
    or not what phasec writes: it is not used. Issued once per process."""


def enabled() -> bool:
    """False when ``PHASEC_KERNEL_CACHE`` is ``off``/``0``/``no``/``false``.

    Also checks ``PHASEC_CACHE_MAX_SIZE``: an invalid value of either is an
    :class:`InputError` naming the variable (every cache user asks this
    first, so a typo is reported before anything is compiled)."""
    value = os.environ.get(KERNEL_CACHE_ENV, "on").strip().lower()
    if value not in _ON + _OFF:
        raise InputError(f"the environment variable {KERNEL_CACHE_ENV}: {value!r} is neither "
                         f"on nor off (on, off, 1, 0, yes, no, true, false)")
    if value in _OFF:
        return False
    max_bytes()
    return True


def max_bytes() -> int:
    """The size limit of the cache: ``PHASEC_CACHE_MAX_SIZE``, else 1 GiB."""
    value = os.environ.get(MAX_SIZE_ENV, "").strip()
    return parse_size(value, f"the environment variable {MAX_SIZE_ENV}") if value \
        else DEFAULT_MAX_BYTES


def cache_dir() -> Path:
    """The directory of the cache (see the module docstring)."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "phasec" / "kernels"


def entry_key(ir_text: str, opt_level: int, target: tuple[str, str, str],
              off: tuple[str, ...] = ()) -> str:
    """The key of the code compiled from ``ir_text`` for ``target`` (triple,
    cpu, features) at ``opt_level`` with the pipeline switches ``off`` off."""
    from phasec import __version__  # the package's own attribute: importing it here avoids a cycle

    h = hashlib.sha256()
    for part in (_MAGIC.decode(), __version__, llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)), *target,
                 "-".join([str(opt_level), *off])):
        h.update(part.encode() + b"\0")
    h.update(ir_text.encode())
    return h.hexdigest()


_SOURCES_DIGEST: list[str] = []


def _sources_digest() -> str:
    """SHA-256 of the code generator's own sources (this package and the TIR
    definitions it reads), computed once per process: a key made from the
    input program instead of the generated IR must change whenever the code
    that turns one into the other changes, version bump or not."""
    if not _SOURCES_DIGEST:
        here = Path(__file__).resolve().parent
        root = here.parent.parent  # the code generator reads the TIR, its intrinsics and
        # the binary-operator table: a change to any of them changes the code
        # (and the proofs that decide which accesses go unchecked, and the
        # simplifier both the proofs and the vector loops' addresses use)
        files = sorted(here.glob("*.py")) + [root / "ir" / "tir.py", root / "ir" / "intrinsics.py",
                                             root / "runtime" / "binary_ops.py",
                                             root / "arith" / "__init__.py",
                                             root / "arith" / "inbounds.py",
                                             root / "arith" / "outofbounds.py"]
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0")
            try:
                h.update(f.read_bytes())
            except OSError:
                h.update(b"?")
        _SOURCES_DIGEST.append(h.hexdigest())
    return _SOURCES_DIGEST[0]


def program_key(program_fingerprint: str, settings: str, opt_level: int,
                target: tuple[str, str, str]) -> str:
    """The key of the code compiled from a program (its exact fingerprint,
    :func:`phasec.ir.structural.exact_fingerprint`) with code generation
    ``settings`` (their exact text), without generating its LLVM IR: a warm
    build then skips code generation as well as LLVM. It covers what
    :func:`entry_key` covers through the IR, plus the code generator's
    sources."""
    return entry_key("program\0" + program_fingerprint + "\0" + settings + "\0"
                     + _sources_digest(), opt_level, target)


# ---------------------------------------------------------------------------
# Trust: who owns what, and who may write it
# ---------------------------------------------------------------------------

#: cache directories already warned about in this process
_WARNED: set[str] = set()


def _foreign(st: os.stat_result) -> str:
    """Why a cache directory or file with this status is not trusted ('' if it is)."""
    uid = getattr(os, "geteuid", None)
    if uid is not None and st.st_uid != uid():
        return f"is owned by {_user(st.st_uid)}, not by you ({_user(uid())})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = " and ".join(w for w, bit in (("its group", stat.S_IWGRP),
                                            ("other users", stat.S_IWOTH)) if st.st_mode & bit)
        return f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def _user(uid: int) -> str:
    try:
        import pwd  # POSIX only

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _warn(root: Path, text: str) -> None:
    """One warning per cache directory and process: the first problem found."""
    if str(root) in _WARNED:
        return
    _WARNED.add(str(root))
    warnings.warn(f"phasec: {text}", KernelCacheWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The ``stacklevel`` of the first caller outside phasec (so the warning
    points at the user's code, as library warnings do)."""
    package = str(Path(__file__).parents[2])
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith(package)
                                 or frame.f_code.co_filename == contextlib.__file__):
        frame, level = frame.f_back, level + 1
    return level


def _refuse_dir(root: Path, where: str, problem: str) -> None:
    _warn(root, f"the kernel cache directory {where} {problem}: it is not used (kernels are "
                f"compiled without the cache). The cache holds native code that runs in your "
                f"processes, so it must be owned by you and writable by you alone: use a "
                f"private directory (chmod 700) or set {CACHE_DIR_ENV} to one")


def _refuse_entry(root: Path, where: str, problem: str) -> None:
    _warn(root, f"the kernel cache entry {where} {problem}: it is not used (compiled again "
                f"instead). Only phasec writes the cache; `phasec cache clear` empties it")


def _make_private_dirs(root: Path) -> None:
    """Create the missing levels of ``root`` with mode 0700 (only those:
    an existing parent keeps its mode)."""
    missing: list[Path] = []
    level = root
    while not os.path.lexists(level):
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            continue  # another process made it; its mode is checked like any other
        with contextlib.suppress(OSError):  # a umask that removed the owner's bits
            fd = os.open(level, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
            try:
                if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
                    os.fchmod(fd, 0o700)
            finally:
                os.close(fd)


@contextlib.contextmanager
def _opened_root(create: bool) -> Iterator[int | None]:
    """The cache directory, open and checked (None: absent, unusable or refused)."""
    root = cache_dir()
    fd = -1
    try:
        if create:
            _make_private_dirs(root)
        fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        problem = _foreign(os.fstat(fd))
        if problem:
            _refuse_dir(root, str(root), problem)
            yield None
        else:
            yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _opened_subdir(root_fd: int, name: str, create: bool) -> Iterator[int | None]:
    """A subdirectory of the cache, opened without following a link and checked."""
    root = cache_dir()
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=root_fd)
        fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC,
                     dir_fd=root_fd)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:  # ELOOP: a link; ENOTDIR: a file
        _refuse_dir(root, str(root / name), f"cannot be opened as a directory ({exc.strerror})")
        yield None
        return
    try:
        problem = _foreign(os.fstat(fd))
        if problem:
            _refuse_dir(root, str(root / name), problem)
            yield None
        else:
            yield fd
    finally:
        os.close(fd)


#: a build entry's body (an executable's archive, its constants aligned in it)
#: is read to an address on this boundary: the constants are used in place
_BODY_ALIGNMENT = 64


def _read_aligned(fh: Any, limit: int, align_at: int) -> memoryview | None:
    """The rest of ``fh`` (at most ``limit`` bytes, else None) in a new
    buffer where byte ``align_at`` lies on a :data:`_BODY_ALIGNMENT` boundary."""
    size = os.fstat(fh.fileno()).st_size
    if size > limit:
        return None
    # Anonymous memory: page-aligned, its pages mapped at once where Linux
    # can (MAP_POPULATE: half the cost of faulting 40,000 pages in one by one
    # during the read; a bytearray is zeroed first, numpy's huge pages are
    # slow to fault in a fresh process); one more byte: a file that grew is seen.
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0) | \
        getattr(mmap, "MAP_POPULATE", 0)
    raw = mmap.mmap(-1, size + 1 + _BODY_ALIGNMENT, **({"flags": flags} if flags else {}))
    skew = -align_at % _BODY_ALIGNMENT
    view = memoryview(raw)[skew:skew + size + 1]
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return view[:got] if got <= min(size, limit) else None


def _read_checked(dir_fd: int, name: str, where: str, limit: int,
                  align_at: int | None = None) -> bytes | memoryview | None:
    """The content of the file ``name`` in ``dir_fd``, or None: absent
    (silently), or not a regular file of the user's, writable by them alone,
    within ``limit`` (a warning). With ``align_at``, a view of a buffer
    where that byte is aligned (:func:`_read_aligned`)."""
    root = cache_dir()
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        _refuse_entry(root, where, f"is larger ({format_size(st.st_size)}) than the "
                                   f"{format_size(limit)} an entry may be")
        return None
    try:
        fh = open_regular(name, where, limit, follow_symlinks=False, dir_fd=dir_fd)
    except FileAccessError as exc:
        if not isinstance(exc.__context__, FileNotFoundError):
            _refuse_entry(root, where, exc.reason)
        return None
    with fh:
        problem = _foreign(os.fstat(fh.fileno()))  # the file that was opened, not a name
        if problem:
            _refuse_entry(root, where, problem)
            return None
        try:
            if align_at is not None:
                return _read_aligned(fh, limit, align_at)
            data = fh.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None


def _secret(root_fd: int, create: bool) -> bytes | None:
    """The cache's HMAC secret (created, mode 0600, when absent or unusable
    and ``create``)."""
    where = str(cache_dir() / _SECRET)
    data = _read_checked(root_fd, _SECRET, where, 4096)
    if data is not None and len(data) == _SECRET_BYTES:
        return data
    if not create:
        return None
    write_atomic(_SECRET, secrets.token_bytes(_SECRET_BYTES), "kernel cache secret",
                 dir_fd=root_fd, mode=0o600, replace_special=True)
    data = _read_checked(root_fd, _SECRET, where, 4096)  # a concurrent writer's may have won
    return data if data is not None and len(data) == _SECRET_BYTES else None


def _pack(secret: bytes, key: str, obj: bytes | memoryview, optimized_ir: bytes
          ) -> list[bytes | memoryview]:
    """An entry as the pieces of its file, in order: the magic, the MAC and
    the body (key, sizes, object code, IR). Not joined: a build entry's
    object code is an executable of up to hundreds of megabytes, which two
    concatenations copied twice (ResNet-50's 126 MB: 0.55 of the 1.2 s of
    storing it, the build's last serial step)."""
    head = bytes.fromhex(key) + struct.pack("<QQ", len(obj), len(optimized_ir))
    return [_MAGIC, _mac(secret, head, obj, optimized_ir), head, obj, optimized_ir]


def _mac(secret: bytes, *body: bytes | memoryview) -> bytes:
    """The HMAC of an entry: of the magic and the body, given in one or more
    pieces (hashed in place: an entry may take hundreds of megabytes)."""
    h = hmac.new(secret, _MAGIC, hashlib.sha256)
    for piece in body:
        h.update(piece)
    return h.digest()


def _unpack(secret: bytes, key: str,
            data: bytes | memoryview) -> tuple[bytes | memoryview, str] | None:
    """(object code, IR) of an entry written under ``key`` with ``secret``, or
    None; the object code is a view when ``data`` is one."""
    if len(data) < _HEADER.size:
        return None
    magic, mac, entry_key_, obj_size, ir_size = _HEADER.unpack_from(data)
    if magic != _MAGIC or entry_key_ != bytes.fromhex(key) \
            or _HEADER.size + obj_size + ir_size != len(data):
        return None
    if not hmac.compare_digest(mac, _mac(secret, memoryview(data)[len(_MAGIC) + 32:])):
        return None  # damaged, or not written by phasec with this cache's secret
    try:
        return data[_HEADER.size:_HEADER.size + obj_size], \
            str(data[_HEADER.size + obj_size:], "utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------

def load(key: str, kind: str = "kernels") -> tuple[bytes | memoryview, str] | None:
    """(object code, optimized IR) of entry ``key``, or None when absent or
    unusable (see the module docstring: nothing that fails a check is ever
    returned). ``kind`` "build" reads a whole-build entry (its data and
    text), its data a read-only view starting on a 64-byte boundary (the
    executable's constants, aligned in it, are then used in place)."""
    if not _KEY.fullmatch(key) or kind not in _SUFFIXES:
        return None
    with _opened_root(create=False) as root_fd:
        if root_fd is None:
            return None
        with _opened_subdir(root_fd, key[:2], create=False) as sub_fd:
            if sub_fd is None:
                return None
            name = key + _SUFFIXES[kind]
            data = _read_checked(sub_fd, name, str(cache_dir() / key[:2] / name),
                                 MAX_ENTRY_BYTES, _HEADER.size if kind == "build" else None)
            secret = _secret(root_fd, create=False) if data is not None else None
            entry = _unpack(secret, key, data) if secret is not None and data is not None \
                else None
            if entry is not None:  # used now: last in the least-recently-used order
                with contextlib.suppress(OSError, NotImplementedError):
                    os.utime(name, dir_fd=sub_fd, follow_symlinks=False)
                if isinstance(entry[0], memoryview):  # (nothing may write through a view)
                    entry = (entry[0].toreadonly(), entry[1])
            return entry


def store(key: str, obj: bytes, optimized_ir: str, kind: str = "kernels") -> bool:
    """Write entry ``key`` atomically, then evict the least recently used
    entries beyond the size limit; False (and nothing written) on any error:
    the cache is an optimization, never a reason for a build to fail."""
    limit = max_bytes()  # an invalid value is the user's error, reported
    if not _KEY.fullmatch(key) or kind not in _SUFFIXES:
        return False
    try:
        with _opened_root(create=True) as root_fd:
            if root_fd is None:
                return False
            secret = _secret(root_fd, create=True)
            pieces = _pack(secret, key, obj, optimized_ir.encode("utf-8")) if secret else []
            size = sum(memoryview(p).nbytes for p in pieces)
            if not pieces or size > MAX_ENTRY_BYTES:
                return False

            def write(fh: Any) -> None:
                for piece in pieces:
                    fh.write(piece)

            with _opened_subdir(root_fd, key[:2], create=True) as sub_fd:
                if sub_fd is None:
                    return False
                write_atomic(key + _SUFFIXES[kind], write, "kernel cache entry", dir_fd=sub_fd,
                             mode=0o600, replace_special=True)
            if _eviction_due(size, limit):
                _evict(root_fd, limit)
    except Exception:  # noqa: BLE001 - a full disk or a read-only home must not fail a build
        return False
    return True


def discard(key: str, kind: str = "kernels") -> bool:
    """Remove entry ``key`` (a build entry stored before its build ended, for a
    build that then failed); False when there was none or it could not be
    removed. Never raises: like :func:`store`, the cache fails no build."""
    if _KEY.fullmatch(key) and kind in _SUFFIXES:
        # (absent, or a cache that cannot be written: False)
        with contextlib.suppress(Exception), _opened_root(create=False) as root_fd:
            if root_fd is not None:
                with _opened_subdir(root_fd, key[:2], create=False) as sub_fd:
                    if sub_fd is not None:  # (unlink removes the name, never a link's target)
                        os.unlink(key + _SUFFIXES[kind], dir_fd=sub_fd)
                        return True
    return False


# ---------------------------------------------------------------------------
# The whole cache: listing, eviction, clearing
# ---------------------------------------------------------------------------

def _eviction_due(stored: int, limit: int) -> bool:
    """Count ``stored`` new bytes; True when this process should evict now
    (its first entry, or a sixteenth of ``limit`` written since it last did)."""
    global _unevicted
    with _EVICT_LOCK:
        total = stored + (_unevicted or 0)
        due = _unevicted is None or total >= limit * _EVICT_SHARE
        _unevicted = 0 if due else total
    return due


def _listing(root_fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(``sub/name``, lstat) of every entry and temporary file in the cache
    (subdirectories that are links or not the user's are skipped)."""
    with os.scandir(root_fd) as top:
        subs = [e.name for e in top if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
    for sub in sorted(subs):
        with _opened_subdir(root_fd, sub, create=False) as sub_fd:
            if sub_fd is None:
                continue
            with os.scandir(sub_fd) as it:
                for e in it:
                    if e.name.endswith((*_SUFFIXES.values(), ".tmp")):
                        with contextlib.suppress(OSError):
                            yield f"{sub}/{e.name}", e.stat(follow_symlinks=False)


def _evict(root_fd: int, limit: int) -> dict[str, int]:
    """Remove stale temporary files, then the least recently used entries
    until the entries take at most ``limit`` bytes."""
    entries: list[tuple[float, int, str]] = []
    removed = freed = 0
    now = time.time()
    for path, st in _listing(root_fd):
        if _is_entry(path):
            entries.append((st.st_mtime, st.st_size, path))
        elif now - st.st_mtime > _STALE_TEMPORARY_SECONDS:
            with contextlib.suppress(OSError):
                os.unlink(path, dir_fd=root_fd)
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path, dir_fd=root_fd)
        except FileNotFoundError:
            pass  # another process evicted it
        except OSError:
            continue
        else:
            removed += 1
            freed += size
        total -= size
    return {"removed": removed, "freed": freed, "entries": len(entries) - removed,
            "bytes": total, "max_bytes": limit}


def _refusal(root: Path) -> InputError:
    try:
        st = os.stat(root)
    except OSError as exc:
        return InputError(f"the kernel cache directory {root} cannot be opened: "
                          f"{exc.strerror or exc}")
    problem = _foreign(st) or "is not a directory"
    return InputError(f"the kernel cache directory {root} {problem}; phasec does not use or "
                      f"change a cache that is not yours alone")


def prune(limit: int | None = None) -> dict[str, int]:
    """Evict the least recently used entries until the cache takes at most
    ``limit`` bytes (default :func:`max_bytes`); returns ``removed``,
    ``freed``, ``entries``, ``bytes`` (what is left) and ``max_bytes``. A
    cache directory that is not the user's alone is an InputError."""
    limit = max_bytes() if limit is None else limit
    root = cache_dir()
    if not os.path.lexists(root):
        return {"removed": 0, "freed": 0, "entries": 0, "bytes": 0, "max_bytes": limit}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelCacheWarning)
        with _opened_root(create=False) as root_fd:
            if root_fd is None:
                raise _refusal(root)
            return _evict(root_fd, limit)


def clear() -> int:
    """Remove every entry; returns how many were removed. A cache directory
    that is not the user's alone is an InputError (nothing is removed)."""
    root = cache_dir()
    if not os.path.lexists(root):
        return 0
    removed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelCacheWarning)
        with _opened_root(create=False) as root_fd:
            if root_fd is None:
                raise _refusal(root)
            for path, _ in list(_listing(root_fd)):
                try:
                    os.unlink(path, dir_fd=root_fd)
                except OSError:
                    continue
                removed += _is_entry(path)
    return removed


def info() -> dict[str, object]:
    """Where the cache is, whether it is on, its entries, their total size,
    the size limit, and why the directory is not used (``problem``, '' when
    it is)."""
    root = cache_dir()
    result: dict[str, object] = {"dir": str(root), "enabled": enabled(), "entries": 0,
                                 "builds": 0, "bytes": 0, "max_bytes": max_bytes(),
                                 "problem": ""}
    if not os.path.lexists(root):
        return result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelCacheWarning)
        with _opened_root(create=False) as root_fd:
            if root_fd is None:
                result["problem"] = str(_refusal(root))
                return result
            listed = [(path, st.st_size) for path, st in _listing(root_fd) if _is_entry(path)]
    result["entries"], result["bytes"] = len(listed), sum(size for _, size in listed)
    result["builds"] = sum(path.endswith(_SUFFIXES["build"]) for path, _ in listed)
    return result


def _is_entry(path: str) -> bool:
    return path.endswith(tuple(_SUFFIXES.values()))
