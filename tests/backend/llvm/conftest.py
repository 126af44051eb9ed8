"""What the LLVM code generator's tests share: the thread-pool fixture."""

from __future__ import annotations

import pytest

from phasec.backend.llvm import get_num_threads, set_min_parallel_work, set_num_threads
from phasec.backend.llvm import set_parallel_wake_work
from phasec.target.tuning import host_tuning


@pytest.fixture
def threads_always():
    """Parallel loops use the thread pool whatever their size, waking its
    worker if it sleeps; restored after."""
    saved = get_num_threads()
    set_min_parallel_work(0)
    set_parallel_wake_work(0)
    yield
    set_min_parallel_work(host_tuning().parallel_min_work)
    set_parallel_wake_work(host_tuning().parallel_wake_work)
    set_num_threads(saved)
