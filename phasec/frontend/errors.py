"""Errors of the model importers.

Both derive from :class:`phasec.errors.InputError`: a model that cannot be
imported is a problem with what the user gave (the CLI exits with status 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phasec.errors import InputError, counted

__all__ = ["FrontendError", "UnsupportedModelError", "UnsupportedNode", "GRAPH_INPUT"]


class FrontendError(InputError):
    """A model that cannot be read or converted (malformed, inconsistent)."""


@dataclass(frozen=True)
class UnsupportedNode:
    """One node the frontend cannot convert, and why."""

    name: str       #: the node's name (or ``<op_type>#<index>`` when it has none)
    op_type: str    #: e.g. ``"Conv"`` (``domain:op_type`` outside the default domain)
    opset: int      #: the opset version the model imports for the node's domain
    reason: str     #: e.g. "operator not supported", "attribute mode='reflect' not supported"
    index: int = -1  #: position in the graph's node list
    #: the tensor whose value the node needs at import time (a Reshape's
    #: shape...), when that is why it is unsupported; else ""
    needs_value: str = ""

    def __str__(self) -> str:
        if self.op_type == GRAPH_INPUT:  # (its reason names the input)
            return self.reason
        where = f"node {self.index}" if self.index >= 0 else "node"
        return f"{where} {self.name!r} ({self.op_type}, opset {self.opset}): {self.reason}"


#: the ``op_type`` of an :class:`UnsupportedNode` that is a graph input (an
#: input phasec cannot take: a dtype it does not compute with, not a tensor)
GRAPH_INPUT = "graph input"


class UnsupportedModelError(FrontendError):
    """The model uses operators, attributes or dtypes the frontend does not
    support. ``nodes`` lists every one of them (the whole model is checked
    before the error is raised)."""

    def __init__(self, nodes: Sequence[UnsupportedNode], what: str = "the model") -> None:
        self.nodes = list(nodes)
        inputs = sum(n.op_type == GRAPH_INPUT for n in self.nodes)
        ops = sorted({n.op_type for n in self.nodes if n.op_type != GRAPH_INPUT})
        parts = []
        if inputs:
            parts.append(counted(inputs, "unsupported graph input"))
        if ops:
            parts.append(f"{counted(len(self.nodes) - inputs, 'unsupported node')} (operators: "
                         f"{', '.join(ops)})")
        head = f"{what} has {' and '.join(parts)}:"
        lines = [f"  {n}" for n in self.nodes[:50]]
        if len(self.nodes) > 50:
            lines.append(f"  ... and {len(self.nodes) - 50} more")
        super().__init__("\n".join([head, *lines]))
