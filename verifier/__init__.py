"""The phasec well-formedness verifier: structural rules plus phase invariants.

Public API::

    verifier.check(mod, phase=None) -> list[Diagnostic]   # every violation
    verifier.verify(mod, phase=None, pass_name=None)      # raises WellFormedError
    verifier.infer_phase(mod) -> Phase                    # highest phase satisfied
    verifier.rules_table() -> list[(code, phase, title)]  # for PHASES.md
    verifier.explain(code) -> str                         # a rule's documentation

Rule codes are stable and grouped:

* ``WF0xx`` variables and scopes (defined before use and once, dataflow and
  branch scoping, symbolic variables, parameters not shared);
* ``WF1xx`` normal form (A-normal form, SeqExpr placement, inline PrimFuncs,
  no If in dataflow blocks; WF100 malformed nodes);
* ``WF2xx`` purity (no impure call in dataflow blocks or pure functions,
  force_pure only on pure functions);
* ``WF3xx`` module-level names (GlobalVars resolve, global_symbol matches);
* ``WF4xx`` struct info (present, agrees with inference, call signatures,
  call_tir against the PrimFunc's buffers, known operators);
* ``WF5xx`` TIR (variables and buffers in scope);
* ``PH1xx`` optimization, ``PH2xx`` lowering, ``PH3xx`` build: the phase
  invariants, each applying from its phase on.

The ``WF`` rules apply at every phase. ``verifier.explain(code)`` (or
``phasec-check --explain CODE``) prints a rule's full explanation. Each rule
also says how TVM's own check treats its violation (``Rule.tvm``, a
:class:`TVMCheck`) and can inject it into a module (``Rule.inject``, which
:mod:`phasec.testing.mutations` uses).
"""

from __future__ import annotations

from phasec.verifier.checker import check, infer_phase, verify
from phasec.verifier.diagnostics import ERROR, WARNING, Diagnostic, format_diagnostic
from phasec.verifier.rules import Rule, TVMCheck, all_rules, explain, get_rule, rules_table

__all__ = ["check", "verify", "infer_phase", "Diagnostic", "ERROR", "WARNING",
           "format_diagnostic", "Rule", "TVMCheck", "all_rules", "get_rule", "rules_table",
           "explain"]
