"""The table of operator generators: every registered compute operator the
random program generator draws, in the order it tries them.

Made from the registry (issue 13), none listed by hand: the operators whose
declaration gives an ``order`` first (hypothesis shrinks towards them), then
the other operators with a draw declaration (:mod:`._opdeclared`), then the
elementwise operators found by probing their numpy reference
(:mod:`._opderived`). The generic machinery they are made of is
:mod:`._opgen`.
"""

from __future__ import annotations

from phasec.op import OpDef, list_ops
from phasec.testing._opdeclared import declared_generators
from phasec.testing._opderived import derived_generators
from phasec.testing._opgen import OpGen

__all__ = ["UNGENERATED", "all_op_gens", "op_names"]


#: Compute operators the generator never emits, and why: none. Every
#: registered compute operator is drawn, from its draw
#: declaration in the registry (:mod:`phasec.op._draw`) or from its
#: elementwise reference (:mod:`phasec.testing._opderived`); an operator that
#: cannot be drawn goes here with the reason (a test keeps the list exact).
UNGENERATED: dict[str, str] = {}


#: the registry's operator definitions the cached generators were made from,
#: and those generators (made once per registry state: they are stateless,
#: and every generated module needs them)
_CACHED: tuple[tuple[OpDef, ...], tuple[OpGen, ...]] = ((), ())


def all_op_gens() -> list[OpGen]:
    """Every generator, all from the registry's declarations: those with a
    place among the simplest (``order``) in that order, then the other
    operators that declare how they are drawn (:mod:`phasec.testing._opdeclared`,
    in registry order), then the elementwise operators found by probing
    their numpy reference (:mod:`phasec.testing._opderived`)."""
    global _CACHED
    ops = tuple(list_ops())
    made_from, gens = _CACHED
    if len(ops) != len(made_from) or any(a is not b for a, b in zip(ops, made_from)):
        gens = tuple(_make_op_gens())
        _CACHED = (ops, gens)
    return list(gens)


def _make_op_gens() -> list[OpGen]:
    declared = declared_generators(frozenset())
    ranked = sorted((g for g in declared if g.order is not None), key=lambda g: g.order)
    orders = [g.order for g in ranked]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two operators declare the same draw order: {orders}")
    return [*ranked, *(g for g in declared if g.order is None),
            *derived_generators({g.name for g in declared})]


def op_names() -> list[str]:
    """The operators the generator can emit, in the generator's order."""
    return [g.name for g in all_op_gens()]
