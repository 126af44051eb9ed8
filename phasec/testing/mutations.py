"""Mutation operators: one per verifier rule, each injecting that violation.

``mutate(mod, "WF002")`` returns a copy of a well-formed module with exactly
the kind of mistake rule WF002 describes (here: a variable bound twice), the
way a faulty pass would make it. The property "the verifier catches
mutations" is: for every rule and every well-formed module of a phase where
the rule applies, ``verifier.check(mutate(mod, code))`` reports ``code``.

The operators are the rules' own injectors (``Rule.inject``, beside each
rule's check in ``verifier/rules/``), so a new rule brings its operator.
Each takes a ``choose(n) -> int`` callback (in ``range(n)``) for its
choices (which function, which binding, where to insert), so hypothesis can
drive and shrink them; the default always picks the first option.

Every rule of the verifier has an operator (:data:`MUTATIONS`);
:data:`UNINJECTABLE` lists rules that cannot be injected, and why (a rule's
``uninjectable``; none at present).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.verifier import all_rules
from phasec.verifier.injection import Choose, first_choice
from phasec.verifier.util import FORCE_PURE

__all__ = ["Mutation", "MUTATIONS", "UNINJECTABLE", "mutate", "mutation_for",
           "FORCE_PURE"]


@dataclass(frozen=True)
class Mutation:
    """Injects a violation of rule ``code`` into a module of phase ``>= since``."""

    code: str
    description: str
    since: Phase
    apply: Callable[[IRModule, Choose], IRModule]

    def __call__(self, mod: IRModule, choose: Choose = first_choice) -> IRModule:
        return self.apply(mod, choose)


#: Rule code -> its operator, for every rule that has one (in rule order).
MUTATIONS: dict[str, Mutation] = {
    rule.code: Mutation(rule.code, rule.injection, rule.since, rule.inject)
    for rule in all_rules() if rule.injectable}

#: Rules no operator can inject, and why.
UNINJECTABLE: dict[str, str] = {
    rule.code: rule.uninjectable for rule in all_rules() if not rule.injectable}


def mutation_for(code: str) -> Mutation:
    """The operator for rule ``code``; KeyError if there is none."""
    try:
        return MUTATIONS[code.upper()]
    except KeyError:
        reason = UNINJECTABLE.get(code.upper())
        raise KeyError(f"no mutation operator for {code}" + (f": {reason}" if reason else "")
                       ) from None


def mutate(mod: IRModule, code: str, choose: Choose = first_choice) -> IRModule:
    """``mod`` with a violation of rule ``code`` injected."""
    return mutation_for(code)(mod, choose)
