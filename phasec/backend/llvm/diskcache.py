"""The persistent kernel cache: compiled object code on disk.

A second process compiling the same kernels (a second ``phasec run`` of a
model, a test suite, a service restart) loads their machine code instead of
running LLVM again. An entry is keyed by the SHA-256 of everything the code
depends on. For kernel libraries (:func:`program_key`) that is the program
itself (an exact fingerprint of the PrimFuncs, names included), the code
generation settings and the code generator's own sources, so a warm build
finds its entry without generating any LLVM IR; for IR compiled directly
(:func:`entry_key`) it is the IR text. Both add the optimization level, the
target (triple, CPU, features), and the phasec, llvmlite and LLVM versions. Entries are written
atomically (a temporary file renamed into place), so concurrent processes
never see half an entry; each entry carries a checksum of its contents, and an
entry that is unreadable, truncated or fails its checksum is ignored (and
rebuilt on the next miss).

Where: ``$PHASEC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/phasec/kernels``,
else ``~/.cache/phasec/kernels``. ``PHASEC_KERNEL_CACHE=off`` turns the cache
off; ``phasec cache clear`` (or :func:`clear`) empties it, ``phasec cache
info`` shows where it is and how big.

Like a ``.pvm``, an entry is native code that runs when loaded: the cache
directory must be writable by you alone (phasec creates it with mode 0700).
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from phasec import __version__
from phasec.fileio import write_atomic

__all__ = ["cache_dir", "enabled", "entry_key", "program_key", "load", "store", "clear", "info"]

_MAGIC = b"PHASECK1"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256 of the payload, object size
_SUFFIX = ".kc"


def enabled() -> bool:
    """False when ``PHASEC_KERNEL_CACHE`` is ``off``/``0``/``no``/``false``."""
    return os.environ.get("PHASEC_KERNEL_CACHE", "on").strip().lower() not in (
        "off", "0", "no", "false")


def cache_dir() -> Path:
    """The directory of the cache (see the module docstring)."""
    explicit = os.environ.get("PHASEC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "phasec" / "kernels"


def entry_key(ir_text: str, opt_level: int, target: tuple[str, str, str]) -> str:
    """The key of the code compiled from ``ir_text`` for ``target`` (triple, cpu, features)."""
    h = hashlib.sha256()
    for part in (_MAGIC.decode(), __version__, llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)), *target, str(opt_level)):
        h.update(part.encode() + b"\0")
    h.update(ir_text.encode())
    return h.hexdigest()


_SOURCES_DIGEST: list[str] = []


def _sources_digest() -> str:
    """SHA-256 of the code generator's own sources (this package, and the TIR
    definitions and the intrinsic declarations it reads), computed once per process: a key made from the
    input program instead of the generated IR must change whenever the code
    that turns one into the other changes, version bump or not."""
    if not _SOURCES_DIGEST:
        here = Path(__file__).resolve().parent
        ir = here.parent.parent / "ir"
        files = sorted(here.glob("*.py")) + [ir / "tir.py", ir / "intrinsics.py"]
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


def _path(key: str) -> Path:
    return cache_dir() / key[:2] / (key + _SUFFIX)


def load(key: str) -> tuple[bytes, str] | None:
    """(object code, optimized IR) of entry ``key``, or None when absent or unusable."""
    try:
        data = _path(key).read_bytes()
    except OSError:
        return None
    if len(data) < _HEADER.size:
        return None
    magic, digest, size = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != _MAGIC or size > len(payload) or hashlib.sha256(payload).digest() != digest:
        return None  # damaged or foreign: ignored, rebuilt on this miss
    try:
        return payload[:size], payload[size:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def store(key: str, obj: bytes, optimized_ir: str) -> bool:
    """Write entry ``key`` atomically; False (and nothing written) on any error:
    the cache is an optimization, never a reason for a build to fail."""
    payload = obj + optimized_ir.encode("utf-8")
    data = _HEADER.pack(_MAGIC, hashlib.sha256(payload).digest(), len(obj)) + payload
    path = _path(key)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, data, "kernel cache entry")
    except Exception:  # noqa: BLE001 - a full disk or a read-only home must not fail a build
        return False
    return True


def clear() -> int:
    """Remove every entry; returns how many were removed."""
    root = cache_dir()
    removed = 0
    if not root.is_dir():
        return 0
    for entry in root.glob(f"*/*{_SUFFIX}"):
        try:
            entry.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def info() -> dict[str, object]:
    """Where the cache is, whether it is on, its entries and their total size."""
    root = cache_dir()
    entries = list(root.glob(f"*/*{_SUFFIX}")) if root.is_dir() else []
    size = 0
    for e in entries:
        try:
            size += e.stat().st_size
        except OSError:
            pass
    return {"dir": str(root), "enabled": enabled(), "entries": len(entries), "bytes": size}
