"""Intel AMX (tile registers) on this host: whether the integer GEMM may use it.

A Linux process must ask for the tile data state before its first tile
instruction (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, Linux
5.16 and later); without it ``ldtilecfg`` raises SIGILL, which would kill
the process. :func:`amx_permitted` asks once per process (the permission
is process-wide: the parallel runtime's threads have it too) and answers
whether it was granted. The LLVM backend's target features
(:func:`phasec.backend.llvm.jit.host_target_info`) keep ``+amx-int8`` only
when it was, so a kernel compiled with AMX (in memory or in the on-disk
cache, whose keys hold the features) is never run by a process without the
permission; ``PHASEC_CPU_FEATURES=-amx-int8`` turns AMX off (the integer
GEMM then uses ``vpdpbusd``, as on CPUs without AMX).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

__all__ = ["AMX_FEATURES", "amx_permitted", "amx_enabled", "without_amx", "host_amx"]

#: the LLVM features the AMX microkernels need (:mod:`phasec.backend.llvm.amx`)
AMX_FEATURES = ("amx-tile", "amx-int8")
_SYS_ARCH_PRCTL = 158  # x86-64
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


def _request() -> int:
    """The system call asking for the tile data state: 0 when granted.
    (Tests replace this function to simulate a refusal.)"""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA))


@functools.lru_cache(maxsize=1)
def amx_permitted() -> bool:
    """Whether this process may run AMX tile instructions (asked once, on
    x86-64 Linux only; False elsewhere or when the kernel refuses)."""
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        return False
    try:
        return _request() == 0
    except (OSError, AttributeError):
        return False


def amx_enabled(features: str) -> bool:
    """Whether the LLVM feature string ``features`` enables the AMX
    microkernels (``+amx-tile`` and ``+amx-int8``)."""
    flags = set(features.split(","))
    return all(f"+{f}" in flags for f in AMX_FEATURES)


def without_amx(features: str) -> str:
    """``features`` with every AMX feature it enables turned off."""
    return ",".join(f"-{f[1:]}" if f.startswith("+amx") else f for f in features.split(","))


def host_amx(cpu_flags: set[str], override: str) -> bool:
    """Whether the schedules plan for AMX: the CPU has it (``cpu_flags``,
    /proc/cpuinfo's names), ``override`` (``PHASEC_CPU_FEATURES``) does not
    turn it off, and the OS granted the permission (asked here if not yet)."""
    off = {f.strip()[1:] for f in override.split(",") if f.strip().startswith("-")}
    return (all(f.replace("-", "_") in cpu_flags and f not in off for f in AMX_FEATURES)
            and amx_permitted())
