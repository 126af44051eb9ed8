"""The cyclic garbage collector around phasec's allocation-heavy work.

Building a model, checking a module and reading or writing its JSON allocate
IR nodes by the hundred thousand, nearly all of them acyclic and alive until
the work ends. CPython's collector still counts every one of them: a young
collection each 700 allocations, and every so often a full one that rescans
the whole heap, the module being built included. These managers change that
for the duration of the work only, and nest (the first to enter sets the
policy, the last to leave restores what it found), from any thread.

* :func:`paused` turns the collector off: for walks that create no cycles
  (the verifier, the JSON reader and writer), where a collection only
  rescans a growing heap (it tripled the load time of a 100k-binding module).
* :func:`rare_collections` keeps it on but collects the young generation
  every :data:`YOUNG_THRESHOLD` allocations, not every 700: a build's
  passes and code generation may make cyclic garbage (closures, exceptions
  caught), so it is still collected, in larger batches. A cold SqueezeNet
  build spent ~45 ms of its building thread in the collector (a full
  collection of 27-39 ms among them), ~5 ms with this.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = ["paused", "rare_collections", "YOUNG_THRESHOLD"]

#: allocations (net) between two young collections during a build
YOUNG_THRESHOLD = 50_000

_lock = threading.Lock()
_holders = {"paused": 0, "rare": 0}  # blocks running, by policy
_found: tuple[bool, tuple[int, int, int]] = (True, (700, 10, 10))  # before the first


@contextmanager
def _held(kind: str) -> Iterator[None]:
    global _found
    with _lock:
        if not any(_holders.values()):
            _found = (gc.isenabled(), gc.get_threshold())
        _holders[kind] += 1
        _apply()
    try:
        yield
    finally:
        with _lock:
            _holders[kind] -= 1
            _apply()


def _apply() -> None:
    """The collector as the blocks running want it (under ``_lock``): off
    while any is paused, rare while any wants rare collections, else as the
    first found it."""
    enabled, (g0, g1, g2) = _found
    gc.set_threshold(max(g0, YOUNG_THRESHOLD) if _holders["rare"] else g0, g1, g2)
    if enabled and not _holders["paused"]:
        gc.enable()
    else:
        gc.disable()


def paused() -> AbstractContextManager[None]:
    """The cyclic collector off while the block runs (see the module docstring)."""
    return _held("paused")


def rare_collections() -> AbstractContextManager[None]:
    """Young collections every :data:`YOUNG_THRESHOLD` allocations while the
    block runs (the older generations' thresholds kept)."""
    return _held("rare")
