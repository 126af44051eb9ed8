"""Base machinery shared by every IR node: spans, immutability, field lists,
the children a node holds, and the hook through which the IR prints itself.

Nodes are frozen, slotted dataclasses compared by identity (``eq=False``):
``Var`` identity is object identity, and structural equality is the separate
function :func:`phasec.ir.structural_equal`. A node's children are read off
its field annotations (:func:`children`, :func:`node_fields`): traversals
need no per-class code. ``repr(node)`` and ``str(module)`` print through the
function installed with :func:`set_printer` (the TVMScript printer, a layer
above the IR).
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Union

__all__ = ["Span", "Node", "node", "replace", "node_fields", "children", "children_getter",
           "no_children", "set_printer", "script_text"]


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
        a debugger), or no printer at all, falls back to ``<Kind at 0x...>``.
        """
        try:
            text = script_text(self)
        except Exception:  # noqa: BLE001 - repr must not fail
            text = None
        return text if text is not None else f"<{type(self).__name__} at {id(self):#x}>"

    def __copy__(self) -> "Node":
        return self

    def __deepcopy__(self, memo: dict) -> "Node":
        return self


# The IR never imports a printer (printers are a higher layer): the printer
# installs itself here when it is imported (phasec.script.printer), and the
# package root installs one that imports it on first use.
_printer: Callable[[Any, str | None], str | None] | None = None


def set_printer(printer: Callable[[Any, str | None], str | None]) -> None:
    """Install the function that prints IR as TVMScript: ``printer(obj,
    syntax)`` gives the text of a module, function, expression, binding,
    struct info or TIR node in the spelling ``syntax`` (None: the default),
    or None for an object it cannot show."""
    global _printer
    _printer = printer


def script_text(obj: Any, syntax: str | None = None) -> str | None:
    """``obj`` as TVMScript through the installed printer; None when no
    printer is installed or it cannot show ``obj``."""
    return None if _printer is None else _printer(obj, syntax)


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


# ---------------------------------------------------------------------------
# Children, read off the dataclass fields
# ---------------------------------------------------------------------------
#
# A node's children are read off its dataclass fields: the structural fields
# (``_fields``: not the span, not derived fields such as an operator's dtype)
# whose annotation can hold IR nodes -- a node, an optional node, a tuple of
# them (nested tuples flattened: a BufferRegion's (min, extent) pairs), or
# ``Any`` (checked value by value). Strings, numbers and attribute mappings
# are data, not children. A new node class needs no traversal code here.

#: How a field holds nodes: one node (or None), a tuple of them (nested
#: tuples flattened), or anything (each value checked).
_ONE, _SEQ, _ANY = "one", "seq", "any"


def _hint_shape(hint: Any) -> tuple[str, tuple[type, ...] | None, bool] | None:
    """(how an annotated field holds nodes, the node classes it names (None:
    not known), whether it admits None), or None when it holds no node."""
    if hint is Any or hint is object:
        return _ANY, None, True
    origin = typing.get_origin(hint)
    if origin is None:
        if isinstance(hint, type):
            return (_ONE, (hint,), False) if issubclass(hint, Node) else None
        return _ANY, None, True  # an annotation this reading does not know
    args = typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        optional = type(None) in args
        shapes = [s for s in (_hint_shape(m) for m in args if m is not type(None))
                  if s is not None]
        if not shapes:
            return None
        if all(s[0] == _ONE and s[1] is not None for s in shapes):
            return _ONE, tuple(c for s in shapes for c in s[1]), optional
        if len(shapes) == 1:
            return shapes[0][0], shapes[0][1], optional or shapes[0][2]
        return _ANY, None, True
    if origin is tuple:
        shapes = [s for s in (_hint_shape(m) for m in args if m is not Ellipsis)
                  if s is not None]
        if not shapes:
            return None
        flat = all(s[0] == _ONE and s[1] is not None for s in shapes)
        return _SEQ, tuple(c for s in shapes for c in s[1]) if flat else None, False
    if isinstance(origin, type) and issubclass(origin, (Mapping, str, int, float)):
        return None
    return _ANY, None, True


_FIELD_SHAPES: dict[type, tuple[tuple[str, str, tuple[type, ...] | None, bool], ...]] = {}


def node_fields(cls: type) -> tuple[tuple[str, str, tuple[type, ...] | None, bool], ...]:
    """The fields of node class ``cls`` that can hold nodes, in declaration
    order: ``(name, shape, classes, optional)`` where ``shape`` is ``"one"``
    (a node), ``"seq"`` (a tuple of nodes, nested tuples flattened) or
    ``"any"`` (any value, nodes among them), ``classes`` the node classes the
    annotation names (None: not known), ``optional`` whether it may be None."""
    plan = _FIELD_SHAPES.get(cls)
    if plan is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # noqa: BLE001 - an annotation that does not resolve: check values
            hints = {}
        out = []
        for name in cls._fields:
            shape = _hint_shape(hints[name]) if name in hints else (_ANY, None, True)
            if shape is not None:
                out.append((name, *shape))
        plan = _FIELD_SHAPES[cls] = tuple(out)
    return plan


def _flatten(value: Any, kind: type, out: list[Any]) -> None:
    """Append the nodes of type ``kind`` in ``value`` (a node, or tuples of
    them nested as deep as a field's annotation says) to ``out``, in order."""
    if isinstance(value, kind):
        out.append(value)
    elif type(value) is tuple or type(value) is list:
        for x in value:
            if isinstance(x, kind):
                out.append(x)
            elif type(x) is tuple or type(x) is list:
                _flatten(x, kind, out)


def no_children(n: Any) -> tuple:
    """The children of a node that holds none."""
    return ()


def children_getter(cls: type, kind: type) -> Callable[[Any], tuple]:
    """A function returning the nodes of type ``kind`` a ``cls`` node holds, in
    field order; the common shapes (two operands, one tuple of operands) are
    read with one ``attrgetter``."""
    if not (isinstance(cls, type) and issubclass(cls, Node)):
        return no_children
    fields = [(name, shape, classes, optional) for name, shape, classes, optional
              in node_fields(cls)
              if classes is None or any(issubclass(c, kind) or issubclass(kind, c)
                                        for c in classes)]
    if not fields:
        return no_children
    exact = all(classes is not None and all(issubclass(c, kind) for c in classes)
                for _, _, classes, _ in fields)
    if exact and len(fields) == 1 and fields[0][1] == _SEQ:
        return operator.attrgetter(fields[0][0])  # a tuple already (set in __post_init__)
    if exact and all(shape == _ONE and not optional for _, shape, _, optional in fields):
        if len(fields) == 1:
            name = fields[0][0]
            return lambda n: (getattr(n, name),)
        return operator.attrgetter(*(f[0] for f in fields))
    names = tuple(f[0] for f in fields)

    def children(n: Any) -> tuple:
        out: list[Any] = []
        for name in names:
            _flatten(getattr(n, name), kind, out)
        return tuple(out)

    return children


_NODE_CHILDREN: dict[type, Callable[[Any], tuple]] = {}


def children(n: Node) -> tuple[Node, ...]:
    """Every node ``n`` holds directly, in field order: operands, bodies,
    buffers, loop and block variables, the bounds of regions..."""
    try:
        return _NODE_CHILDREN[type(n)](n)
    except KeyError:
        get = _NODE_CHILDREN[type(n)] = children_getter(type(n), Node)
        return get(n)
