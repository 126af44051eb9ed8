"""Property-based testing for phasec: random programs, pass orderings, check_pass.

Phase checking promises that every ordering of passes is either refused up
front (a ``PhaseError`` from static validation) or produces a well-formed
module with the same results. This package is how that promise is tested,
and how users test their own passes.

Strategies (hypothesis)::

    from hypothesis import given
    from phasec.testing import modules, pass_sequences, inputs_for

    @given(modules(phase=Phase.OPTIMIZATION, max_bindings=6),
           pass_sequences(start_phase=Phase.OPTIMIZATION))
    def test_something(mod, seq): ...

* :func:`modules` — well-formed modules of a phase: operator DAGs over
  broadcasting and symbolic shapes, tuples, if/else, closures, dataflow
  blocks, constants, helpers, impure/force_pure functions with packed
  calls, bounded recursion. Numerically safe by construction; shrinks to a
  few readable bindings.
* :func:`pass_sequences` — orderings of registered passes (repetitions,
  options, valid or not) as a ``Sequential``.
* :func:`inputs_for` — numpy arguments for a module's entry function.

Checking a pass::

    from phasec.testing import check_pass
    check_pass(MyPass(), max_examples=200)   # PassCheckFailure with a reproducer

Properties (:mod:`phasec.testing.properties`): :func:`check_sequence` runs a
sequence pass by pass and checks that static validation is exact, that every
output verifies at its phase, that results are preserved (interpreter, and
the VM once a sequence reaches build) and optionally that text and JSON
round trips are exact. Mutations (:mod:`phasec.testing.mutations`): one
operator per verifier rule that injects exactly that violation.

Campaigns: ``phasec fuzz --seconds 600`` (:func:`run_campaign`) saves each
new failure as a reproducer file replayable with ``phasec opt``.

Importing this package registers the deterministic packed functions that
generated programs call (``phasec.testing.scale2`` ...).
"""

from __future__ import annotations

from phasec.testing.campaign import CampaignStats, run_campaign
from phasec.testing.check_pass import CheckPassReport, PassCheckFailure, check_pass
from phasec.testing.packed_funcs import register_testing_funcs
from phasec.testing.properties import (
    Failure, PropertyFailure, SequenceReport, assert_sequence_ok, check_sequence,
    roundtrip_problem,
)
from phasec.testing.strategies import (
    EXCLUDED_PASSES, OPTION_CHOICES, GenConfig, GeneratorError, advance_to_phase,
    default_pass_names, inputs_for, make_inputs, modules, pass_sequences,
)

register_testing_funcs()

__all__ = ["modules", "pass_sequences", "inputs_for", "make_inputs", "advance_to_phase",
           "GenConfig", "GeneratorError", "OPTION_CHOICES", "EXCLUDED_PASSES",
           "default_pass_names", "register_testing_funcs", "check_pass", "PassCheckFailure",
           "CheckPassReport", "check_sequence", "assert_sequence_ok", "roundtrip_problem",
           "Failure", "PropertyFailure", "SequenceReport", "run_campaign", "CampaignStats"]
