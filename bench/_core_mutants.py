"""The mutation operators of ``bench_core_mutation.py``: an ``ast`` mutator.

A module's mutants are numbered in one deterministic walk of its syntax
tree; :func:`mutants` lists them and :func:`mutate` returns the tree of one,
compiled in place of the original (line numbers kept, the file never
rewritten). Operators:

* comparisons: ``<``/``<=`` and ``>``/``>=`` swapped (boundaries), ``==``/``!=``,
  ``is``/``is not``, ``in``/``not in`` negated;
* ``and``/``or`` swapped, ``not x`` replaced by ``x``;
* integer constants ``+1`` and ``-1``, ``True``/``False`` swapped;
* ``return value`` replaced by ``return None``;
* statements deleted: a call used as a statement, ``raise``, ``continue``,
  ``break`` (each replaced by ``pass``);
* a keyword argument dropped from a call (the callee's default takes over).

Annotations, docstrings and f-strings are left alone (``from __future__
import annotations`` never evaluates the first; the others only change text).
Each mutant knows its scope: the chain of ``def``/``class``/``lambda`` whose
body holds it, so that the runner can swap one function's code object.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

_COMPARE_SWAP: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_OP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
            ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
            ast.NotIn: "not in"}


@dataclass(frozen=True)
class Mutant:
    """One mutation: its number in the module's walk, where, what, and the
    scopes (``(kind, name, lineno)``, outermost first) whose body holds it."""

    index: int
    lineno: int
    col: int
    operator: str
    description: str
    scopes: tuple[tuple[str, str, int], ...]


class _Walker(ast.NodeTransformer):
    """Numbers every mutation point; with ``target`` set, applies that one."""

    def __init__(self, target: int = -1) -> None:
        self.target = target
        self.count = 0
        self.found: list[Mutant] = []
        self.scopes: list[tuple[str, str, int]] = []
        self.applied = False

    # -- bookkeeping ----------------------------------------------------------
    def _point(self, node: ast.AST, operator: str, description: str) -> bool:
        """Record a mutation point; True if it is the one to apply."""
        index = self.count
        self.count += 1
        if self.target < 0:
            self.found.append(Mutant(index, node.lineno, node.col_offset, operator,
                                     description, tuple(self.scopes)))
            return False
        if index == self.target:
            self.applied = True
            return True
        return False

    # -- scopes: decorators, defaults and annotations belong to the outer one ----
    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        self._visit_defaults(node.args)
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        self.scopes.append(("def", node.name, first))
        node.body = self._visit_body(node.body)
        self.scopes.pop()
        return node

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def

    def _visit_defaults(self, args: ast.arguments) -> None:
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [d if d is None else self.visit(d) for d in args.kw_defaults]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        self.scopes.append(("class", node.name, first))
        node.body = self._visit_body(node.body)
        self.scopes.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self._visit_defaults(node.args)
        self.scopes.append(("lambda", "<lambda>", node.lineno))
        node.body = self.visit(node.body)
        self.scopes.pop()
        return node

    def _visit_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        start = 0
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            start = 1  # the docstring
        out = body[:start]
        for stmt in body[start:]:
            new = self.visit(stmt)
            if new is None:
                continue
            out.extend(new if isinstance(new, list) else [new])
        return out or [ast.Pass()]

    # -- leave alone ------------------------------------------------------------
    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return node

    def visit_Import(self, node: ast.Import) -> ast.AST:
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        test = node.test
        if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            return node
        node.test = self.visit(node.test)
        node.body = self._visit_body(node.body)
        node.orelse = self._visit_body(node.orelse) if node.orelse else []
        return node

    # -- operators ----------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            new = _COMPARE_SWAP.get(type(op))
            if new is not None and self._point(
                    node, "compare", f"{_OP_TEXT[type(op)]} -> {_OP_TEXT[new]}"):
                node.ops[i] = new()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        if self._point(node, "boolop", f"{old} -> {new}"):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._point(node, "not", "not x -> x"):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            if self._point(node, "constant", f"{value} -> {not value}"):
                return ast.copy_location(ast.Constant(not value), node)
        elif isinstance(value, int):
            for delta in (1, -1):
                if self._point(node, "constant", f"{value} -> {value + delta}"):
                    return ast.copy_location(ast.Constant(value + delta), node)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None and not (isinstance(node.value, ast.Constant)
                                           and node.value.value is None):
            if self._point(node, "return", "return value -> return None"):
                node.value = None
        return node

    def _delete(self, node: ast.stmt, what: str) -> ast.AST:
        if self._point(node, "delete", f"delete {what}"):
            return ast.copy_location(ast.Pass(), node)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Call):
            return self._delete(node, f"call {_callee(node.value)}(...)")
        return node

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        self.generic_visit(node)
        return self._delete(node, "raise")

    def visit_Continue(self, node: ast.Continue) -> ast.AST:
        return self._delete(node, "continue")

    def visit_Break(self, node: ast.Break) -> ast.AST:
        return self._delete(node, "break")

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        for i, kw in enumerate(node.keywords):
            if kw.arg is not None and self._point(
                    node, "argument", f"drop {kw.arg}= from {_callee(node)}(...)"):
                del node.keywords[i]
                break
        return node


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return "." + func.attr
    return "<expr>"


def mutants(source: str, filename: str = "<module>") -> list[Mutant]:
    """Every mutant of ``source``, numbered in walk order."""
    walker = _Walker()
    walker.visit(ast.parse(source, filename))
    return walker.found


def mutate(source: str, index: int, filename: str = "<module>") -> ast.Module:
    """The syntax tree of mutant ``index`` (its line numbers are the source's)."""
    tree = ast.parse(source, filename)
    walker = _Walker(index)
    tree = walker.visit(copy.deepcopy(tree))
    if not walker.applied:
        raise IndexError(f"{filename} has no mutant {index}")
    return ast.fix_missing_locations(tree)
