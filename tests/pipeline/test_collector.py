"""The cyclic collector's policy around builds, checks and JSON
(``phasec.collector``): set while a block runs, restored after it, whatever
the nesting and the threads."""

from __future__ import annotations

import gc
import threading

import pytest

from phasec import collector
from phasec.pipeline import build
from phasec.errors import PhaseError
from helpers.sample_modules import add_chain_module


@pytest.fixture(autouse=True)
def _known_collector():
    before = (gc.isenabled(), gc.get_threshold())
    gc.enable()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before[1])
    (gc.enable if before[0] else gc.disable)()


def test_rare_collections_raise_the_young_threshold_only_inside():
    with collector.rare_collections():
        assert gc.isenabled()
        assert gc.get_threshold() == (collector.YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10) and gc.isenabled()


def test_paused_inside_rare_turns_off_then_back_to_rare():
    with collector.rare_collections():
        with collector.paused():
            assert not gc.isenabled()
        # the verifier's pause inside a build must not leave the build paused
        assert gc.isenabled()
        assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)


def test_a_user_who_turned_the_collector_off_keeps_it_off():
    gc.disable()
    with collector.rare_collections(), collector.paused():
        pass
    with collector.rare_collections():
        assert not gc.isenabled()
    assert not gc.isenabled()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_larger_threshold_of_the_users_is_kept():
    gc.set_threshold(10 * collector.YOUNG_THRESHOLD, 10, 10)
    with collector.rare_collections():
        assert gc.get_threshold()[0] == 10 * collector.YOUNG_THRESHOLD
    assert gc.get_threshold()[0] == 10 * collector.YOUNG_THRESHOLD


def test_blocks_ending_out_of_order_on_threads_restore_what_was_found():
    # thread A enters, then B; A leaves first: a per-block save and restore
    # would leave B's view (the raised threshold) behind for good
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with collector.rare_collections():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with collector.paused():
            b_in.set()
            a_out.wait(5)
            assert not gc.isenabled()  # A leaving does not end B's pause

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)


def test_a_failing_build_restores_the_collector():
    with pytest.raises(PhaseError):  # (raised inside the build's block)
        build(add_chain_module(3), pipeline=[], kernels="none")
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)
