"""The rule table: every rule of the verifier, registered by its module.

Codes are stable and grouped (see :mod:`verifier` for the list):

* ``WF0xx`` variables and scopes, ``WF1xx`` normal form, ``WF2xx`` purity,
  ``WF3xx`` module-level names, ``WF4xx`` struct info, ``WF5xx`` TIR —
  structural rules that apply at every phase;
* ``PH1xx`` optimization, ``PH2xx`` lowering, ``PH3xx`` build — the phase
  invariants, cumulative from their phase on.
"""

from __future__ import annotations

from phasec.verifier.rules.base import HOOKS, Rule, all_rules, explain, get_rule, register, rules_table

__all__ = ["Rule", "HOOKS", "register", "all_rules", "get_rule", "rules_table", "explain"]

_loaded = False


def _load_all() -> None:
    """Import the rule modules (each registers its rules on import)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from phasec.verifier.rules import module, normal_form, phase, purity, scope, struct_info, tir  # noqa: F401
