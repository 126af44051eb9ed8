"""A bounded, thread-safe memo for analyses of immutable IR.

Verification runs after every pass, and most of what it derives (a kernel's
out-of-bounds analysis, a clean walk of a kernel's body, an operator call's
inferred struct info) is the same for the same immutable IR; the code
generator then asks some of the same questions again (:func:`remembered`).
Entries keyed by an object's ``id`` keep the object in the value (its id
cannot be reused while the entry lives) and compare it on lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, TypeVar

__all__ = ["BoundedMemo", "remembered"]

_MISSING = object()


class BoundedMemo:
    """At most ``size`` entries, the least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, default: Any = None) -> Any:
        """The value kept under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            value = self._entries.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._entries.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        """Keep ``value`` under ``key``, dropping the oldest entries past the size."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def values(self) -> list[Any]:
        """A snapshot of the kept values, oldest first."""
        with self._lock:
            return list(self._entries.values())


_T = TypeVar("_T")

#: (id(analysis), id(node), args) -> (node, analysis(node, *args))
_RESULTS = BoundedMemo(1024)


def remembered(analysis: Callable[..., _T], node: Any, *args: Any) -> _T:
    """``analysis(node, *args)``, remembered for the last 1,024 calls: for a
    pure function of an immutable node and hashable ``args`` (the verifier
    and the code generator both look for certain out-of-bounds accesses in
    every kernel; a cold build asks for each kernel's ABI twice). An
    exception is raised again each time, never remembered."""
    key = (id(analysis), id(node), args)
    entry = _RESULTS.get(key)
    if entry is not None and entry[0] is node:
        return entry[1]
    result = analysis(node, *args)
    _RESULTS.put(key, (node, result))
    return result
