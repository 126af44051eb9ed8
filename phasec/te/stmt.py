"""The statements every loop nest is made of: sequences, blocks with their
read and write regions, reduction updates and tiled indices. Shared by the
nest emitter (:mod:`phasec.te.emit`) and the schedules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, BinaryOp, Block, Buffer, BufferLoad, BufferStore, IntImm, IterVar, LetStmt,
    PrimExpr, SeqStmt, Stmt, Var,
)
from phasec.te.analysis import expr_key
from phasec.te.operation import gt, select
from phasec.te.tensor import post_order

__all__ = ["combine", "seq", "block", "tiled"]


def combine(combiner: str, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
    """One step of a reduction: ``acc`` combined with ``value``."""
    if combiner == "sum":
        return acc + value
    if combiner == "prod":
        return acc * value
    if combiner == "fast_max":  # see te.fast_max: LLVM emits the CPU's max for this select
        return select(gt(acc, value), acc, value)
    return BinaryOp(combiner, acc, value)


def seq(stmts: list[Stmt]) -> Stmt:
    """The statements in sequence (nested sequences flattened). An allocation
    or let followed by more statements takes them into its scope: the same
    program (its buffer or variable is fresh), and scoped statements end their
    lists, so the kernel prints with ``T.alloc_buffer`` and reads back exactly."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    for i in range(len(flat) - 1):
        if isinstance(flat[i], (Allocate, LetStmt)):
            flat[i:] = [_extend_scope(flat[i], flat[i + 1:])]
            break
    return flat[0] if len(flat) == 1 else SeqStmt(flat)


def _extend_scope(stmt: Allocate | LetStmt, rest: list[Stmt]) -> Stmt:
    """``stmt`` (an Allocate/LetStmt chain) with ``rest`` appended to its body."""
    chain: list[Allocate | LetStmt] = []
    inner: Stmt = stmt
    while isinstance(inner, (Allocate, LetStmt)):
        chain.append(inner)
        inner = inner.body
    body = seq([inner, *rest])
    for s in reversed(chain):
        body = (Allocate(s.buffer, body) if isinstance(s, Allocate)
                else LetStmt(s.var, s.value, body))
    return body


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
