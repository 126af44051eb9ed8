"""The rule table: every rule of the verifier, registered by its group.

Codes are stable and grouped (see :mod:`phasec.verifier` for the list):

* ``WF0xx`` variables and scopes, ``WF1xx`` normal form, ``WF2xx`` purity,
  ``WF3xx`` module-level names, ``WF4xx`` struct info, ``WF5xx`` TIR —
  structural rules that apply at every phase;
* ``PH1xx`` optimization, ``PH2xx`` lowering, ``PH3xx`` build — the phase
  invariants, cumulative from their phase on.

Each group module defines its rules on :class:`~phasec.verifier.rules.base.Rule`
and registers them on import; importing this package imports every group, so
the queries below always see the whole table.
"""

from __future__ import annotations

import difflib
import textwrap

from phasec.ir.phase import Phase

# the groups register their rules on import
from phasec.verifier.rules import (  # noqa: F401
    module, normal_form, phase, purity, scope, struct_info, tir,
)
from phasec.verifier.rules.base import HOOKS, Rule, TVMCheck, register, registered

__all__ = ["Rule", "TVMCheck", "HOOKS", "register", "all_rules", "get_rule", "rules_table",
           "explain"]


def all_rules() -> list[Rule]:
    """Every registered rule: structural (WF) rules first, then by phase and code."""
    return sorted(registered().values(), key=lambda r: (r.since, r.code))


def get_rule(code: str) -> Rule:
    """The rule with this code (case-insensitive); KeyError naming close codes."""
    rules = registered()
    key = code.strip().upper()
    if key in rules:
        return rules[key]
    close = difflib.get_close_matches(key, list(rules), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown rule code {code!r}{hint} (known codes: {min(rules)}..{max(rules)})")


def rules_table() -> list[tuple[str, str, str]]:
    """``(code, phase label, title)`` for every rule, in :func:`all_rules` order (for PHASES.md)."""
    return [(r.code, r.since.label, r.title) for r in all_rules()]


def explain(code: str) -> str:
    """The full documentation of one rule: title, phase, explanation and help."""
    rule = get_rule(code)
    since = ("every phase" if rule.since == Phase.INGESTION
             else f"phase {rule.since.label} ({int(rule.since)}) and later")
    body = textwrap.fill(" ".join(rule.explanation.split()), width=78)
    text = (f"{rule.code}: {rule.title}\n\nApplies to: {since}. Severity: {rule.severity}."
            f"\n\n{body}\n")
    if rule.help:
        text += f"\nHow to fix: {rule.help}\n"
    return text
