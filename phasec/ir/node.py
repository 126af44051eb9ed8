"""Base machinery shared by every IR node: spans, immutability, field lists.

Nodes are frozen, slotted dataclasses compared by identity (``eq=False``):
``Var`` identity is object identity, and structural equality is the separate
function :func:`phasec.ir.structural_equal`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["Span", "Node", "node", "replace"]


@dataclass(frozen=True, slots=True)
class Span:
    """A source location: 1-based line, 0-based column (like Python's ast)."""

    file: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


class Node:
    """Root of all IR nodes.

    Subclasses are declared with :func:`node`. ``_fields`` lists the fields that
    take part in structural equality and traversal (everything except ``span``
    and, for non-Var expressions, the derived ``struct_info``).
    """

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:  # short and never recursive-deep
        return f"<{type(self).__name__} at {id(self):#x}>"

    def __copy__(self) -> "Node":
        return self

    def __deepcopy__(self, memo: dict) -> "Node":
        return self


_NOT_STRUCTURAL = frozenset({"span"})


def node(cls=None, *, derived: tuple[str, ...] = (), structural: tuple[str, ...] = ()):
    """Class decorator: a frozen, slotted, identity-compared dataclass node.

    ``derived`` names fields computed from the others (e.g. the inferred
    ``struct_info`` of a Call): they are not compared structurally, and
    subclasses inherit that unless they list the field in ``structural``.
    """

    def wrap(c):
        dc = dataclass(frozen=True, slots=True, eq=False, repr=False)(c)
        inherited = set(getattr(dc.__mro__[1], "_derived_fields", ()))
        dc._derived_fields = tuple((inherited | set(derived)) - set(structural))
        skip = _NOT_STRUCTURAL | set(dc._derived_fields)
        dc._fields = tuple(f.name for f in dataclasses.fields(dc) if f.name not in skip)
        return dc

    return wrap if cls is None else wrap(cls)


def replace(n: Node, **changes: Any) -> Node:
    """Return a copy of ``n`` with some fields changed (the node is immutable)."""
    return dataclasses.replace(n, **changes)


def set_field(obj: Node, name: str, value: Any) -> None:
    """Initialise a field inside ``__post_init__`` of a frozen node."""
    object.__setattr__(obj, name, value)
