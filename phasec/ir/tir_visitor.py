"""Visitor and mutator for TIR: statements, expressions, buffers, PrimFuncs.

The children of a node are read off its dataclass fields
(:func:`phasec.ir.node.children`), so a new node class is walked without
code here. Dispatch is by node type to ``visit_<kind>_`` methods (the
class name in snake case: ``visit_buffer_load_``, ``visit_for_``), as in
the Relax visitors of :mod:`phasec.ir.visitor`.

Both walk with an explicit stack, never recursion: neither a long statement
sequence nor a deeply nested expression (``a0 + a1 + ... + a9999``) meets
Python's recursion limit.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

from phasec.ir.node import Node, children, node_fields

__all__ = ["StmtExprVisitor", "StmtExprMutator", "walk"]

_METHOD_NAMES: dict[type, str] = {}


def _method_name(cls: type) -> str:
    """``visit_<kind>_`` for a node class: ``BufferLoad`` -> ``visit_buffer_load_``."""
    name = _METHOD_NAMES.get(cls)
    if name is None:
        name = _METHOD_NAMES[cls] = \
            "visit_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower() + "_"
    return name


def walk(root: Node) -> Iterator[Node]:
    """Every node under ``root`` (itself included) in pre-order, children in
    field order; a node reached twice (a buffer at each of its loads) is
    yielded each time."""
    stack = [root]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


class StmtExprVisitor:
    """Walks TIR in pre-order, children in field order.

    For each node the walk calls ``visit_<kind>_(node)`` when the subclass
    defines it (``visit_for_``, ``visit_buffer_load_``, ``visit_var_``...),
    else :meth:`generic_visit`. A method that returns ``False`` keeps the walk
    out of that node's children; anything else (None) walks into them.
    """

    def visit(self, root: Node) -> None:
        """Walk ``root`` and everything under it."""
        stack = [root]
        while stack:
            n = stack.pop()
            method = getattr(self, _method_name(type(n)), None)
            descend = (method or self.generic_visit)(n)
            if descend is not False:
                stack.extend(reversed(children(n)))

    def generic_visit(self, node: Node) -> bool | None:
        """Called for a node of a kind the subclass has no method for."""
        return None


class StmtExprMutator:
    """Rebuilds TIR bottom-up, reusing every unchanged node.

    Children are rewritten first; a node whose children changed is rebuilt
    with them (:func:`dataclasses.replace`: derived fields, such as an
    operator's dtype, are kept). Then ``visit_<kind>_(node)`` is called on
    it when the subclass defines one, and its result replaces the node.
    Results are remembered by node identity: a node shared by several
    parents (a variable, a buffer) is rewritten once and every parent gets
    the same replacement.
    """

    def visit(self, root: Node) -> Any:
        """The rewritten ``root``."""
        memo: dict[int, Any] = {}
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            kids = children(n)
            if not ready and kids:
                stack.append((n, True))
                stack.extend((k, False) for k in reversed(kids) if id(k) not in memo)
                continue
            new = n
            if any(memo[id(k)] is not k for k in kids):
                new = _rebuilt(n, memo)
            method: Callable[[Any], Any] | None = getattr(self, _method_name(type(n)), None)
            memo[id(n)] = new if method is None else method(new)
        return memo[id(root)]


def _rebuilt(n: Node, memo: dict[int, Any]) -> Node:
    """``n`` with each child replaced by its rewrite in ``memo``."""
    changes = {}
    for name, _shape, _classes, _optional in node_fields(type(n)):
        old = getattr(n, name)
        value = _replaced(old, memo)
        if value is not old:
            changes[name] = value
    return dataclasses.replace(n, **changes) if changes else n


def _replaced(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, Node):
        return memo.get(id(value), value)
    if type(value) is tuple or type(value) is list:
        items = [_replaced(x, memo) for x in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items)
    return value
