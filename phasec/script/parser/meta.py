"""``name = I.meta_var(value)`` / ``T.meta_var(value)``: a name for a value.

In TVM, ``meta_var`` marks a Python value that the parser substitutes where
the name is used (``C = I.meta_var(T.int64(16))`` makes ``C`` the constant
16 in the shapes that follow; ``scale = I.meta_var(T.FloatImm("float32",
0.1))`` an attribute value). phasec does the same on the syntax tree, before
parsing a function: the assignment disappears and every later use of the
name reads the value's expression, in whatever position it appears
(dimension, scalar, attribute, operand). Nothing is evaluated.
"""

from __future__ import annotations

import ast
import copy
from typing import TYPE_CHECKING

from phasec.script.parser.common import _dotted

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser

__all__ = ["expand_meta_vars"]


def expand_meta_vars(mp: ModuleParser, fdef: ast.FunctionDef) -> ast.FunctionDef:
    """``fdef`` with its ``meta_var`` names replaced by their values (``fdef``
    itself when it uses none)."""
    names = ((mp.I, "meta_var"), (mp.T, "meta_var"))
    if not any(isinstance(n, ast.Call) and _dotted(n.func) in names for n in ast.walk(fdef)):
        return fdef
    return _Expander(mp, names).visit(copy.deepcopy(fdef))


class _Expander(ast.NodeTransformer):
    """Walks a function in source order: a ``meta_var`` assignment records
    its value, a later load of the name becomes a copy of the value, a later
    assignment to the name ends the substitution."""

    def __init__(self, mp: ModuleParser, names: tuple[tuple[str, str], ...]) -> None:
        self.mp = mp
        self.names = names
        self.values: dict[str, ast.expr] = {}

    def _meta_value(self, node: ast.AST) -> ast.expr | None:
        if not (isinstance(node, ast.Call) and _dotted(node.func) in self.names):
            return None
        if len(node.args) != 1 or node.keywords:
            raise self.mp.error(f"{self.mp.src(node.func)} takes one value, e.g. "
                                f"{self.mp.I}.meta_var({self.mp.T}.int64(16))", node)
        return node.args[0]

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:  # noqa: N802 - ast API
        node.value = self.visit(node.value)  # uses of earlier meta vars in the value
        if len(node.targets) == 1:
            target = node.targets[0]
            pairs = (list(zip(target.elts, node.value.elts))
                     if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                     and len(target.elts) == len(node.value.elts) else [(target, node.value)])
            keep = []
            for t, v in pairs:
                meta = self._meta_value(v)
                if meta is None:
                    keep.append((t, v))
                    continue
                if not isinstance(t, ast.Name):
                    raise self.mp.error(f"{self.mp.src(v.func)} must be assigned to a name",
                                        t)
                self.values[t.id] = meta
            if not keep:
                return None  # only meta vars: the statement disappears
            if len(keep) != len(pairs):
                target = ast.copy_location(ast.Tuple([t for t, _ in keep], ast.Store()), target)
                value = ast.copy_location(ast.Tuple([v for _, v in keep], ast.Load()), node.value)
                node.targets = [target]
                node.value = value
        node.targets = [self.visit(t) for t in node.targets]  # a name assigned again ends
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 - ast API
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        if isinstance(node.ctx, ast.Store):
            self.values.pop(node.id, None)
        return node
