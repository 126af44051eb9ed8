"""The statements every loop nest is made of: sequences, blocks with their
read and write regions, reduction updates and tiled indices. Shared by the
nest emitter (:mod:`phasec.te.emit`) and the schedules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from phasec.ir import tir
from phasec.ir.node import node_fields
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.ir.tir import (
    Allocate, BinaryOp, Block, Buffer, BufferLoad, BufferStore, IntImm, IterVar, LetStmt,
    PrimExpr, SeqStmt, Stmt, Var,
)
from phasec.te.analysis import expr_key
from phasec.te.operation import gt, select
from phasec.te.tensor import post_order

__all__ = ["combine", "seq", "block", "tiled", "bind_once", "kept_loop"]


def combine(combiner: str, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
    """One step of a reduction: ``acc`` combined with ``value``."""
    if combiner == "sum":
        return acc + value
    if combiner == "prod":
        return acc * value
    if combiner == "fast_max":  # see te.fast_max: LLVM emits the CPU's max for this select
        return select(gt(acc, value), acc, value)
    return BinaryOp(combiner, acc, value)


def kept_loop(loop: tir.For, copies: int = 1) -> Stmt:
    """The serial ``loop`` with the hint that it stays a loop, its body in
    at most ``copies`` copies (``tir.KEEP_LOOP_ATTR``: 1, not unrolled)."""
    return tir.AttrStmt(tir.KEEP_LOOP_ATTR, IntImm(copies, "int32"), loop)


def seq(stmts: list[Stmt]) -> Stmt:
    """The statements in sequence (nested sequences flattened). An allocation
    or let followed by more statements takes them into its scope: the same
    program (its buffer or variable is fresh), and scoped statements end their
    lists, so the kernel prints with ``T.alloc_buffer`` and reads back exactly.

    A loop, not recursion, over the scopes: a max pool's border windows are
    let chains one after another, each then inside the one before (ddddocr's
    13 x 13 pool: ~1000 deep)."""
    scopes: list[tuple[list[Stmt], list[Allocate | LetStmt]]] = []  # (before, chain)
    flat = _flat(stmts)
    while True:
        i = next((k for k in range(len(flat) - 1) if isinstance(flat[k], (Allocate, LetStmt))),
                 None)
        if i is None:
            break
        chain: list[Allocate | LetStmt] = []
        inner: Stmt = flat[i]
        while isinstance(inner, (Allocate, LetStmt)):
            chain.append(inner)
            inner = inner.body
        scopes.append((flat[:i], chain))
        flat = _flat([inner, *flat[i + 1:]])
    body = tir.seq(flat)
    for before, chain in reversed(scopes):
        for s in reversed(chain):
            body = (Allocate(s.buffer, body) if isinstance(s, Allocate)
                    else LetStmt(s.var, s.value, body))
        body = tir.seq([*before, body])
    return body


def _flat(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with the statements of sequences among them in their place."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat


def block(name: str, iter_vars: Sequence[IterVar], values: Sequence[PrimExpr], body: Stmt,
          init: Stmt | None = None) -> Block:
    """A Block with its read and write regions (single points, or the whole
    dimension when an index depends on a value computed inside the block)."""
    reads: list[tir.BufferRegion] = []
    writes: list[tir.BufferRegion] = []
    seen: set[Any] = set()
    let_vars: set[int] = set()
    exprs: list[PrimExpr] = []
    stores: list[BufferStore] = []
    for stmt in (init, body):
        while isinstance(stmt, LetStmt):
            exprs.append(stmt.value)
            let_vars.add(id(stmt.var))
            stmt = stmt.body
        if isinstance(stmt, BufferStore):
            exprs.append(stmt.value)
            exprs.extend(stmt.indices)
            stores.append(stmt)

    def region(buf: Buffer, indices: Sequence[PrimExpr]) -> tir.BufferRegion:
        dims = []
        for d, i in enumerate(indices):
            if isinstance(i, IntImm):
                dynamic = False
            elif isinstance(i, Var):
                dynamic = id(i) in let_vars
            else:
                dynamic = any(isinstance(n, BufferLoad) or id(n) in let_vars
                              for n in post_order([i]))
            dims.append((IntImm(0, "int64"), buf.shape[d]) if dynamic
                        else (i, IntImm(1, "int64")))
        return tir.BufferRegion(buf, tuple(dims))

    for n in post_order(exprs):
        if isinstance(n, BufferLoad):
            key = (id(n.buffer), tuple(expr_key(i) for i in n.indices))
            if key not in seen:
                seen.add(key)
                reads.append(region(n.buffer, n.indices))
    wseen: set[Any] = set()
    for st in stores:
        key = (id(st.buffer), tuple(expr_key(i) for i in st.indices))
        if key not in wseen:
            wseen.add(key)
            writes.append(region(st.buffer, st.indices))
    return Block(name, tuple(iter_vars), tuple(values), body, init, tuple(reads), tuple(writes))


def tiled(outer: PrimExpr, factor: int, inner: Var) -> PrimExpr:
    """``outer * factor + inner`` (just ``inner`` when outer is the constant 0)."""
    if isinstance(outer, IntImm) and outer.value == 0:
        return inner
    return outer * factor + inner


def _binders(s: Stmt) -> tuple[Var | Buffer, ...]:
    """The variables (or the buffer) ``s`` binds over its body."""
    t = type(s)
    if t is tir.For:
        return (s.loop_var,)
    if t is LetStmt:
        return (s.var,)
    if t is Block:
        return tuple(iv.var for iv in s.iter_vars)
    if t is Allocate:
        return (s.buffer,)
    return ()


class _Rename(StmtExprMutator):
    def __init__(self, fresh: dict[Any, Any]) -> None:
        self.fresh = fresh

    def visit_var_(self, v: Var) -> Var:
        return self.fresh.get(v, v)

    def visit_buffer_(self, b: Buffer) -> Buffer:
        return self.fresh.get(b, b)


def _fresh(v: Var | Buffer) -> Var | Buffer:
    return Var(v.name, v.dtype) if type(v) is Var else replace(v)


def _with_stmts(s: Stmt, kids: list[Stmt]) -> Stmt:
    """``s`` with its statement children (:func:`tir.stmt_children` order) replaced."""
    if all(a is b for a, b in zip(kids, tir.stmt_children(s))):
        return s
    if type(s) is SeqStmt:
        return tir.seq(kids, span=s.span)
    it = iter(kids)
    changes = {name: next(it) for name, *_ in node_fields(type(s))
               if isinstance(getattr(s, name), Stmt)}
    return replace(s, **changes)


def _rebind_round(body: Stmt) -> tuple[Stmt, bool]:
    """``body`` with each statement that binds a variable (or allocates a
    buffer) already bound before it (in program order) binding a fresh one
    instead, its uses inside renamed; by position, so one statement object
    used twice gets two variables. Rebindings inside a renamed statement
    wait for the next round. Walks with a stack: let chains can be
    thousands deep."""
    seen: set[Var | Buffer] = set()
    out: list[Stmt] = []
    stack: list[tuple[Stmt, bool]] = [(body, False)]
    changed = False
    while stack:
        s, done = stack.pop()
        kids = tir.stmt_children(s)
        if done:
            new = _with_stmts(s, out[len(out) - len(kids):])
            del out[len(out) - len(kids):]
            out.append(new)
            continue
        bound = _binders(s)
        again = [v for v in bound if v in seen]
        if again:
            out.append(_Rename({v: _fresh(v) for v in again}).visit(s))
            changed = True
            continue
        seen.update(bound)
        stack.append((s, True))
        stack.extend((k, False) for k in reversed(kids))
    return out[0], changed


def bind_once(body: Stmt) -> Stmt:
    """``body`` with every variable and buffer bound by one statement only:
    a loop, let or block axis binding a variable that another statement
    binds (schedules reuse a Var for sibling loops) binds a fresh variable
    of the same name instead; an allocation, a fresh buffer. The program is
    the same; its text then reads back as itself (two loops of one name are
    two variables there), and the verifier's WF505 holds."""
    changed = True
    while changed:
        body, changed = _rebind_round(body)
    return body
