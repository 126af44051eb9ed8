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

    def __repr__(self) -> str:
        """The node as TVMScript (as TVM shows it), for REPLs and debuggers.

        Never raises: a node the printer cannot show (or one being built, in
        a debugger) falls back to ``<Kind at 0x...>``.
        """
        try:
            text = _script_text(self)
        except Exception:  # noqa: BLE001 - repr must not fail
            text = None
        return text if text is not None else f"<{type(self).__name__} at {id(self):#x}>"

    def __copy__(self) -> "Node":
        return self

    def __deepcopy__(self, memo: dict) -> "Node":
        return self


def _script_text(n: Node) -> str | None:
    """TVMScript for an expression, binding, struct info or TIR node; None otherwise."""
    from phasec.script import printer
    from phasec.ir import expr, struct_info, tir

    if isinstance(n, expr.Var):
        # A variable reads as its name and type, as in a signature.
        return f"{n.name_hint}: {printer.print_sinfo(n.struct_info)}"
    if isinstance(n, expr.Expr):
        return printer.print_expr(n)
    if isinstance(n, expr.Binding):
        return printer.print_binding(n)
    if isinstance(n, struct_info.StructInfo):
        return printer.print_sinfo(n)
    if isinstance(n, tir.PrimFunc):
        return printer.print_prim_func(str((n.attrs or {}).get("global_symbol", "func")), n)
    if isinstance(n, tir.PrimExpr):
        return printer.print_prim_expr(n)
    if isinstance(n, tir.Stmt):
        return printer.print_stmt(n)
    return None


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
