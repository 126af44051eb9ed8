"""What a schedule declares about the transforms of its operands that
depend on a weight alone (the GEMM's packed panels, Winograd's ``G w G^T``):
when the weight is a constant of the module, the transform can run once at
build time instead of on every call
(:class:`phasec.passes.pack_constant_weights.PackConstantWeights`).

A schedule marks each loop nest computing such a transform with an
``AttrStmt`` (its :attr:`WeightPlan.mark`) and declares a
:class:`WeightTransform`: given a kernel, its :attr:`~WeightTransform.plan`
says which parameter is the weight, the buffer the kernel reads the
transformed weight from once the marked nests are gone, and how to compute
that value from the weight's. The table of :mod:`phasec.te.schedules` lists
the declarations (``WEIGHT_TRANSFORMS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.node import Node, children

__all__ = ["WeightPlan", "WeightTransform", "stored_buffer", "static_dims", "statements",
           "ir_nodes"]


@dataclass(frozen=True)
class WeightPlan:
    """How one kernel reads a weight transformed at build time."""

    #: the position of the weight among the kernel's parameters
    index: int
    #: the parameter that holds the transformed weight
    transformed: tir.Buffer
    #: the AttrStmt key around every nest that computes (part of) the
    #: transform in the kernel; each writes one buffer
    mark: str
    #: where the buffer a marked nest writes starts in ``transformed``
    #: (an offset of the first index), from the mark statement
    offset: Callable[[tir.AttrStmt], Any]
    #: the kernel's attributes once the marked nests are gone
    attrs: dict[str, Any]
    #: the transformed weight from the weight's value
    compute: Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class WeightTransform:
    """A schedule's declaration of a transform of a weight."""

    #: what the transform is (for messages)
    name: str
    #: the plan for a kernel the schedule made, or None when the kernel has
    #: no such transform (or not in the form the schedule marks)
    plan: Callable[[tir.PrimFunc], WeightPlan | None]


def stored_buffer(s: Any) -> tir.Buffer | None:
    """The one buffer the statement ``s`` stores to (None: none, or several)."""
    found = {id(n.buffer): n.buffer for n in ir_nodes(s) if type(n) is tir.BufferStore}
    return next(iter(found.values())) if len(found) == 1 else None


def static_dims(b: tir.Buffer) -> list[int] | None:
    """The dimensions of ``b`` when they are all constants."""
    dims = [d.value if isinstance(d, tir.IntImm) else None for d in b.shape]
    return None if None in dims else dims


def statements(root: tir.Stmt) -> list[tir.Stmt]:
    """Every statement under ``root`` (not their expressions: a cheap walk)."""
    out, stack = [], [root]
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(tir.stmt_children(s))
    return out


def ir_nodes(root: Any) -> list[Any]:
    """Every IR node under ``root`` (statements and expressions)."""
    out, stack = [], [root]
    pop, extend = stack.pop, stack.extend
    while stack:
        x = pop()
        if isinstance(x, Node):
            out.append(x)
            extend(children(x))  # (each class's node fields only: no strings, no dtypes)
        elif type(x) is tuple:
            extend(x)
    return out
