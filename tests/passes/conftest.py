"""What the pass tests share: packed functions registered for one test."""

from __future__ import annotations

import pytest

from phasec.runtime.packed import register_func, remove_func


@pytest.fixture
def packed():
    """``add(name, fn)`` registers a packed function until the test ends."""
    names = []

    def add(name, fn):
        register_func(name, fn, override=True)
        names.append(name)

    yield add
    for n in names:
        remove_func(n)
