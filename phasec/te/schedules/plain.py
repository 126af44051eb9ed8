"""The plain loop nest: one loop per axis of the root, one block per element
(a reduction's loops inside it, with partial accumulators when it is long
and contiguous), the innermost loop vectorized when it can be. The schedule
of every nest no other schedule takes, and the canonical form
(``schedule_hints=False``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasec.ir.tir import PrimExpr, Stmt
from phasec.te.stmt import seq

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter

__all__ = ["PlainNest", "PLAIN"]


class PlainNest:
    """The plain nest (stateless: one instance serves every nest)."""

    #: no reduction accumulated in tiles
    anchor = None
    #: the innermost axis loop is vectorized when it can be
    vectorizes_last_axis = True

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """A loop over every axis of the root."""
        return [("axis", t, nest.shape[t]) for t in range(nest.m)]

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        """The root's element at the loops' position."""
        root = nest.root
        values = [nest.axis_expr[ax] for ax in root.axes]
        stmts = nest.emit_stage(root, values, lambda ivs: (root.buffer, tuple(ivs)))
        return seq(stmts)


PLAIN = PlainNest()


def plan(nest: NestEmitter) -> PlainNest:
    """The plain nest takes every nest."""
    return PLAIN
