"""Property-based testing for phasec: random programs, pass orderings, check_pass.

Public API (hypothesis strategies and checkers)::

    from phasec.testing import modules, pass_sequences, inputs_for, check_pass

* :func:`modules`, :func:`pass_sequences`, :func:`inputs_for` — strategies;
* :func:`check_pass` — fuzz a user's pass against random modules of every
  phase it accepts; raises :class:`PassCheckFailure` with a minimal reproducer;
* :mod:`phasec.testing.properties` — the properties the fuzzer checks (static
  validation is exact, passes keep invariants, results are preserved, round
  trips are exact), usable on any module and sequence;
* :mod:`phasec.testing.mutations` — one mutation operator per verifier rule;
* :func:`run_campaign` — the engine of ``phasec fuzz``.

Importing this package registers the deterministic packed functions that
generated programs call (``phasec.testing.scale2`` ...).
"""

from __future__ import annotations

from .check_pass import CheckPassReport, PassCheckFailure, check_pass
from .packed_funcs import register_testing_funcs
from .strategies import (
    EXCLUDED_PASSES, OPTION_CHOICES, GenConfig, GeneratorError, advance_to_phase,
    default_pass_names, inputs_for, make_inputs, modules, pass_sequences,
)

register_testing_funcs()

__all__ = ["modules", "pass_sequences", "inputs_for", "make_inputs", "advance_to_phase",
           "GenConfig", "GeneratorError", "OPTION_CHOICES", "EXCLUDED_PASSES",
           "default_pass_names", "register_testing_funcs", "check_pass", "PassCheckFailure",
           "CheckPassReport"]
