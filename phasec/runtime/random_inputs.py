"""Seeded random arrays for declared shapes, within the memory there is.

``phasec run`` makes random values for the parameters ``--inputs`` does not
give, and :func:`phasec.testing.make_inputs` for the modules it tests. A
declared shape can ask for anything (``R.Tensor((65536, 65536))``, a typo in
``--dim``), so every such array is first charged to a :class:`RandomBudget`:
by default half the memory available when the budget is made (the smaller
of ``MemAvailable``, what the process's cgroup still allows and the room
under its address-space limit), the same
budget for all the inputs of one call. A request beyond it is an
:class:`~phasec.errors.InputError` naming the parameter, its shape and dtype,
its size and the budget. Arrays are filled in place, a chunk at a time, so
making one takes its own size plus a few MiB, not several times its size.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from phasec.errors import InputError
from phasec.fileio import format_size

__all__ = ["available_memory", "RandomBudget", "random_normal", "random_integers",
           "random_uniform", "random_bool", "FALLBACK_BUDGET", "CHUNK_ELEMENTS"]

#: the budget where the available memory cannot be found out (not Linux, say)
FALLBACK_BUDGET = 16 << 30
#: elements generated per step (the temporary a step takes: 2 MiB of float64)
CHUNK_ELEMENTS = 1 << 18


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # other POSIX systems: free physical pages
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _reclaimable(stat_path: str, key: bytes) -> int:
    """The page cache a cgroup can drop at once (``inactive_file`` of its
    ``memory.stat``): counted as used, yet free for the taking."""
    try:
        with open(stat_path, "rb") as fh:
            for line in fh.read(1 << 16).splitlines():
                name, _, value = line.partition(b" ")
                if name == key and value.strip().isdigit():
                    return int(value)
    except OSError:
        pass
    return 0


def _cgroup_available(root: str = "/sys/fs/cgroup", own: str = "/proc/self/cgroup"
                      ) -> int | None:
    """What the memory cgroup of this process still allows (v2, then v1),
    reclaimable page cache included. (``root`` and ``own``: for tests.)"""
    v2 = [root]
    v1 = [root + "/memory"]
    try:
        with open(own, "rb") as fh:
            for line in fh.read(1 << 16).decode("utf-8", "replace").splitlines():
                number, _, rest = line.partition(":")
                controllers, _, path = rest.partition(":")
                if number == "0" and not controllers and path.startswith("/"):
                    v2.insert(0, root + path.rstrip("/"))
                elif "memory" in controllers.split(",") and path.startswith("/"):
                    v1.insert(0, root + "/memory" + path.rstrip("/"))
    except OSError:
        pass
    for folder in v2:
        limit = _read_int(os.path.join(folder, "memory.max"))
        if limit is not None:
            used = _read_int(os.path.join(folder, "memory.current")) or 0
            used -= _reclaimable(os.path.join(folder, "memory.stat"), b"inactive_file")
            return max(limit - max(used, 0), 0)
    for folder in v1:
        limit = _read_int(os.path.join(folder, "memory.limit_in_bytes"))
        if limit is not None and limit < 1 << 60:  # v1 says "no limit" with a huge number
            used = _read_int(os.path.join(folder, "memory.usage_in_bytes")) or 0
            used -= _reclaimable(os.path.join(folder, "memory.stat"), b"total_inactive_file")
            return max(limit - max(used, 0), 0)
    return None


def _address_space_available(status_path: str = "/proc/self/status") -> int | None:
    """The room left under the process's address-space limit (``ulimit -v``,
    ``RLIMIT_AS``): the limit less the address space mapped now (``VmSize``);
    None without a limit. Beyond it an allocation fails, and native code that
    does not check (protobuf's arenas) crashes the process."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    try:
        with open(status_path, "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return max(limit - int(line.split()[1]) * 1024, 0)
    except (OSError, ValueError, IndexError):
        pass
    return limit


def available_memory() -> int | None:
    """Bytes this process can still allocate without swapping or being killed:
    the smaller of the system's ``MemAvailable``, the room left in its memory
    cgroup and the room left under its address-space limit; None where none
    can be read."""
    known = [m for m in (_meminfo_available(), _cgroup_available(), _address_space_available())
             if m is not None]
    return min(known) if known else None


class RandomBudget:
    """How many bytes of random arrays may still be made (see the module doc)."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is None:
            available = available_memory()
            self.limit = available // 2 if available is not None else FALLBACK_BUDGET
            self.source = ("half the memory available" if available is not None else
                           "the default cap")
        else:
            self.limit, self.source = int(limit), "the limit"
        self.used = 0

    def charge(self, shape: tuple[int, ...], dtype: Any, where: str) -> None:
        """Account for an array of ``shape`` and ``dtype`` (an InputError if it
        does not fit what is left)."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if self.used + nbytes > self.limit:
            others = (f", after {format_size(self.used)} of other random inputs"
                      if self.used else "")
            raise InputError(
                f"{where} would be a {np.dtype(dtype)} array of shape "
                f"{tuple(shape)} ({format_size(nbytes)}), more than random inputs may take: "
                f"{format_size(self.limit)} ({self.source}{others}); use smaller --dim "
                f"values or give it with --inputs")
        self.used += nbytes


def _fill(shape: tuple[int, ...], dtype: Any, step: Callable[[int], np.ndarray]) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` filled ``CHUNK_ELEMENTS`` at a
    time with ``step(count)`` (converted into place)."""
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)  # (a view: out is contiguous)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, flat.size)
        flat[start:stop] = step(stop - start)
    return out


def random_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any,
                  divisor: float = 1.0) -> np.ndarray:
    """``(rng.standard_normal(shape) / divisor).astype(dtype)``, the same values,
    made a chunk at a time."""
    def step(n: int) -> np.ndarray:
        chunk = rng.standard_normal(n)
        if divisor != 1.0:
            chunk /= divisor
        return chunk
    return _fill(shape, dtype, step)


def random_uniform(rng: np.random.Generator, low: float, high: float,
                   shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``rng.uniform(low, high, shape).astype(dtype)``, the same values, made a
    chunk at a time."""
    return _fill(shape, dtype, lambda n: rng.uniform(low, high, n))


def random_integers(rng: np.random.Generator, low: int, high: int,
                    shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Integers uniform in ``[low, high)``, drawn directly in ``dtype`` (no
    int64 copy)."""
    return _fill(shape, dtype, lambda n: rng.integers(low, high, n, dtype=np.dtype(dtype)))


def random_bool(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Fair coins."""
    return _fill(shape, np.bool_, lambda n: rng.integers(0, 2, n, dtype=np.bool_))
