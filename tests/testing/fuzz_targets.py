"""The fuzzing properties as ordinary hypothesis tests, for HypoFuzz.

Not collected by a plain ``pytest`` run (the file name does not start with
``test_``); name it to run it::

    pytest tests/testing/fuzz_targets.py                  # a bounded run
    pip install hypofuzz && hypothesis fuzz -n 2 --no-dashboard -- tests/testing/fuzz_targets.py

HypoFuzz then runs these tests across cores (``-n N``), coverage-guided,
with the example database named by ``$PHASEC_FUZZ_DB``: a directory (share
it between machines on a network file system) or a Redis URL,
``redis://host:port/db`` (see :mod:`phasec.testing.databases`); without it,
hypothesis's default ``.hypothesis/examples``. A failure found there is
replayed by every later run of the same test, by pytest too.

``$PHASEC_FUZZ_DB`` becomes the database of hypothesis's *default* settings
(a profile loaded when this file is imported): HypoFuzz fuzzes only tests
whose database is the default one. HypoFuzz also leaves out derandomized
tests, so run it without ``CI`` set (the test suite's ``ci`` profile
derandomizes).

Each test is one property of :mod:`phasec.testing.properties` over the
generator of :mod:`phasec.testing.strategies`, the same checks as
``phasec fuzz`` (which adds reproducer files and a summary).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phasec.ir import Phase
from phasec.testing import assert_sequence_ok, inputs_for, modules, pass_sequences
from phasec.testing.databases import open_database
from phasec.testing.properties import reference_results

_DB = os.environ.get("PHASEC_FUZZ_DB")
if _DB:  # the default settings' database, as HypoFuzz requires
    settings.register_profile("phasec-fuzz-db", parent=settings.default,
                              database=open_database(_DB))
    settings.load_profile("phasec-fuzz-db")
settings.register_profile(
    "phasec-fuzz", parent=settings.default, deadline=None,
    # every health check but nested_given: HypoFuzz leaves out tests that
    # suppress it (it cannot fuzz a @given inside a @given; none is here)
    suppress_health_check=[h for h in HealthCheck if h is not HealthCheck.nested_given],
    max_examples=int(os.environ.get("PHASEC_FUZZ_EXAMPLES", "25")))
FUZZ = settings.get_profile("phasec-fuzz")


@FUZZ
@given(modules(max_bindings=6), pass_sequences(valid=None), st.data())
def test_pass_orderings_keep_invariants_and_results(mod, seq, data):
    """Every ordering is refused up front exactly when it would hit a phase
    error, or gives a well-formed module with the same results (interpreter,
    and the VM once it reaches build)."""
    args = data.draw(inputs_for(mod), label="inputs")
    opt_level = data.draw(st.sampled_from((3, 2, 1, 0)), label="opt_level")
    assert_sequence_ok(mod, seq, args, kernels="interp", opt_level=opt_level, timeout=60)


@FUZZ
@given(modules(phase=Phase.OPTIMIZATION, max_bindings=6),
       pass_sequences(start_phase=Phase.OPTIMIZATION, valid=True), st.data())
def test_optimization_sequences_preserve_results(mod, seq, data):
    """Valid sequences from the optimization phase (fused, folded programs)."""
    args = data.draw(inputs_for(mod), label="inputs")
    expected = reference_results(mod, args, timeout=60)
    assert_sequence_ok(mod, seq, args, expected=expected, kernels="interp", timeout=60)


@FUZZ
@given(modules(max_bindings=6))
def test_roundtrips_are_exact(mod):
    """Text and JSON round trips of generated programs are exact."""
    assert_sequence_ok(mod, [], None, roundtrip=True)
