"""Concatenations in place: which concat kernel calls StaticPlanBlockMemory
can drop by letting each operand's producer write its slice of the result.

A call qualifies when

* its kernel is exactly a concatenation (:func:`concat_layout`): one block,
  one store, every output element read from the operand it falls in at the
  shifted position along one axis — checked at every position of that axis,
  so a concatenation fused with anything else (a relu, a cast) does not match;
* every dimension before the axis is 1 in the static shape, so each
  operand's slice is one contiguous byte range of the result;
* the result and every operand are planned allocations (not escaping, not
  parameters or constants: those are not allocations) of constant shape and
  the same dtype, and each operand variable aliases exactly one allocation;
* each operand is written by one kernel call only, its first use, and is
  otherwise only read by kernels (a parameter the kernel never stores into
  nor takes the address of: another concatenation that copies it is such a
  read), by this concatenation once; a concatenation with any operand that
  does not qualify is left alone (all or nothing: the concat kernel cannot
  copy only some operands), and the first concatenation in binding order
  that qualifies takes its operands;
* an operand may be the result of an earlier concatenation taken in place
  (DenseNet's chains, ``c2 = c1 || d``): that one's operands then lie in
  the outer result's storage too, at their offsets within the operand's
  slice (its "producer", for the rule above, is its dropped concat call).

These are candidates: the planner leaves some of them copies when taking
them all would need more storage (see StaticPlanBlockMemory's docstring).
A later read of an operand by another kernel is fine: the operand is then a
view of the result's storage, which the planner keeps for the whole group
(from the first operand's allocation to the last use of the result or of any
operand), and nothing else writes there meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from phasec.ir import Binding, Call, DataflowVar, Op, Var, VarBinding, collect_exprs, tir
from phasec.runtime.binary_ops import BINARY_OPS

__all__ = ["ConcatGroup", "concat_groups", "concat_layout"]


class _NoMatch(Exception):
    pass


@dataclass
class ConcatGroup:
    """A concatenation taken in place: ``members[k]`` (tokens) are written at
    ``offsets[k]`` bytes into the storage of ``output`` (a token); the call
    at binding ``call_index`` is dropped."""

    output: Any
    members: list[Any]
    offsets: list[int]
    call_index: int


# -- the kernel ------------------------------------------------------------------

_PLAIN_NEST = frozenset((tir.For, tir.SeqStmt, tir.Block, tir.BufferStore))

def _walk(body: tir.Stmt) -> tuple[list[tir.Block], list[tir.BufferStore]]:
    """The blocks and stores of a nest of loops, blocks and stores only."""
    stmts = [body]
    for s in stmts:  # (the list grows as it is read: every statement once)
        if type(s) not in _PLAIN_NEST:
            raise _NoMatch  # conditions, allocations, calls: not a plain copy
        stmts.extend(tir.stmt_children(s))
    blocks = [s for s in stmts if type(s) is tir.Block]
    stores = [s for s in stmts if type(s) is tir.BufferStore]
    return blocks, stores


def _ints(e: tir.PrimExpr, axis: tir.Var, v: np.ndarray) -> np.ndarray:
    """``e`` at every ``axis = v[i]`` (int64 or bool arrays), or _NoMatch
    when it reads anything else (the integer operators of
    ``phasec.runtime.binary_ops``: ``//`` and ``%`` floor)."""
    t = type(e)
    if t is tir.IntImm:
        return np.full(v.shape, e.value, np.bool_ if e.dtype == "bool" else np.int64)
    if t is tir.Var:
        if e is not axis:
            raise _NoMatch
        return v
    if t is tir.Cast and tir.is_int(e.dtype):
        return _ints(e.value, axis, v)
    if t is tir.Not:
        return ~_ints(e.value, axis, v).astype(bool)
    if t is not tir.BinaryOp or e.op not in _INT_OPS:
        raise _NoMatch
    a, b = _ints(e.lhs, axis, v), _ints(e.rhs, axis, v)
    if e.op in ("//", "%") and not b.all():
        raise _NoMatch
    return _INT_OPS[e.op](a, b)


#: the integer operators on arrays: TIR's semantics as the TIR interpreter
#: computes them (``phasec.runtime.binary_ops``), and/or elementwise
_INT_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    **{s: op.array for s, op in BINARY_OPS.items()
       if op.array is not None and s not in ("/", "pow")},
    "and": np.logical_and, "or": np.logical_or,
}


def _static(shape: tuple[tir.PrimExpr, ...]) -> tuple[int, ...]:
    if not all(type(d) is tir.IntImm for d in shape):
        raise _NoMatch
    return tuple(int(d.value) for d in shape)


def concat_layout(pf: tir.PrimFunc) -> tuple[int, tuple[int, ...]] | None:
    """``(axis, sizes along it)`` when ``pf`` is exactly a concatenation of
    its buffer parameters but the last into the last (static shapes, one
    dtype, every operand non-empty), else None."""
    try:
        return _concat_layout(pf)
    except _NoMatch:
        return None


def _concat_layout(pf: tir.PrimFunc) -> tuple[int, tuple[int, ...]]:
    params = pf.params
    if len(params) < 2 or not all(type(p) is tir.Buffer for p in params):
        raise _NoMatch
    *ins, out = params
    oshape = _static(out.shape)
    if not oshape:
        raise _NoMatch  # (a 0-d result has no axis to concatenate along)
    if any(p.dtype != out.dtype or len(p.shape) != len(oshape) for p in ins):
        raise _NoMatch
    blocks, stores = _walk(pf.body)
    if len(blocks) != 1 or len(stores) != 1:
        raise _NoMatch
    (block,), (store,) = blocks, stores
    if block.body is not store or block.init is not None or store.buffer is not out:
        raise _NoMatch
    ivars = [iv.var for iv in block.iter_vars]
    if (len(ivars) != len(oshape) or any(iv.kind != "S" or iv.has_min for iv in block.iter_vars)
            or _static(tuple(iv.extent for iv in block.iter_vars)) != oshape
            or len(store.indices) != len(ivars)
            or any(i is not v for i, v in zip(store.indices, ivars))):
        raise _NoMatch
    shapes = [_static(p.shape) for p in ins]
    # the axis: the one dimension where the operands' sizes differ from the output's
    diff = [d for d in range(len(oshape)) if any(s[d] != oshape[d] for s in shapes)]
    axis = diff[0] if diff else 0
    if len(diff) > 1:
        raise _NoMatch
    sizes = tuple(s[axis] for s in shapes)
    if sum(sizes) != oshape[axis] or min(sizes) <= 0:
        raise _NoMatch
    av = ivars[axis]
    # every position of the axis at once: the load each one reaches through
    # the Select chain must be its operand's, at the shifted position
    positions = np.arange(oshape[axis], dtype=np.int64)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    shifted = positions - np.repeat(np.cumsum((0, *sizes[:-1])), sizes)
    leaves = [(store.value, np.ones(positions.shape, bool))]
    while leaves:
        e, mask = leaves.pop()
        if not mask.any():
            continue
        if type(e) is tir.Select:
            cond = _ints(e.condition, av, positions).astype(bool)
            leaves += [(e.true_value, mask & cond), (e.false_value, mask & ~cond)]
            continue
        k = next((j for j, b in enumerate(ins) if b is getattr(e, "buffer", None)), None)
        if type(e) is not tir.BufferLoad or k is None:
            raise _NoMatch
        for d, (i, v) in enumerate(zip(e.indices, ivars)):
            if d == axis:
                if not (owner[mask] == k).all() or \
                        not (_ints(i, av, positions)[mask] == shifted[mask]).all():
                    raise _NoMatch
            elif i is not v:
                raise _NoMatch
    return axis, sizes


def _params_read_only(pf: tir.PrimFunc) -> frozenset[int]:
    """Positions of the buffer parameters ``pf`` neither stores into nor takes
    the address of."""
    touched: set[int] = set()
    stack: list[Any] = [pf.body]
    exprs: list[Any] = []
    while stack:
        s = stack.pop()
        if type(s) is tir.BufferStore:
            touched.add(id(s.buffer))
        stack.extend(tir.stmt_children(s))
        exprs.extend(tir.stmt_exprs(s))
    while exprs:
        e = exprs.pop()
        if type(e) is tir.BufferData:
            touched.add(id(e.buffer))
        exprs.extend(tir.expr_children(e))
    return frozenset(k for k, p in enumerate(pf.params)
                     if type(p) is tir.Buffer and id(p) not in touched)


# -- the calls ----------------------------------------------------------------------

def concat_groups(bindings: list[Binding], planned: list[Any], alias: dict[Var, tuple[Any, ...]],
                  kernel: Callable[[Call], tir.PrimFunc | None]) -> list[ConcatGroup]:
    """The concatenations of one binding sequence to take in place.

    ``planned``: the sequence's planned tokens (``index``, ``shape``,
    ``dtype``, ``nbytes``, ``size_class``); ``alias``: what each variable may
    hold; ``kernel(call)``: the PrimFunc a direct kernel call calls, or None.
    """
    ids = {id(t) for t in planned}
    # per token: its kernel uses (binding index, PrimFunc, position), in order
    uses: dict[int, list[tuple[int, tir.PrimFunc, int]]] = {}
    unsafe: set[int] = set()
    calls: list[tuple[int, Call, tir.PrimFunc]] = []
    for i, b in enumerate(bindings):
        value = b.value
        if type(b) is VarBinding and isinstance(value, Var):
            continue  # an alias: no use
        pf = kernel(value) if type(value) is Call else None
        if pf is None:
            if type(value) is Call and type(value.op) is Op and value.op.name in _KILLS:
                continue
            for v in collect_exprs(value, _VARS):  # held by anything else: left alone
                unsafe.update(id(t) for t in alias.get(v, ()))
            continue
        calls.append((i, value, pf))
        for p, a in enumerate(value.args):
            toks = alias.get(a, ()) if isinstance(a, Var) else ()
            if not isinstance(a, Var):
                for v in collect_exprs(a, _VARS):
                    unsafe.update(id(t) for t in alias.get(v, ()))
            elif len(toks) > 1:
                unsafe.update(id(t) for t in toks)
            for t in toks:
                uses.setdefault(id(t), []).append((i, pf, p))
    read_only: dict[int, frozenset[int]] = {}

    def reads(pf: tir.PrimFunc, p: int) -> bool:
        ro = read_only.get(id(pf))
        if ro is None:
            ro = read_only[id(pf)] = _params_read_only(pf)
        return p in ro

    def sole(a: Any) -> Any:
        toks = alias.get(a, ()) if isinstance(a, Var) else ()
        if len(toks) != 1 or id(toks[0]) not in ids or id(toks[0]) in unsafe \
                or toks[0].size_class is not None:
            return None
        return toks[0]

    groups: list[ConcatGroup] = []
    outputs: set[int] = set()  # the results of the concatenations taken
    nested: set[int] = set()  # their operands
    for i, call, pf in calls:
        out = sole(call.args[-1])
        if out is None or id(out) in outputs or id(out) in nested \
                or len(call.args) != len(pf.params):
            continue
        members = [sole(a) for a in call.args[:-1]]
        if any(m is None or id(m) in nested or m.dtype != out.dtype or m.index > i
               for m in members) or len({id(m) for m in members}) != len(members):
            continue
        if any(u[0] < i for u in uses.get(id(out), ())):
            continue  # the result is used before the concatenation writes it
        if not all(_written_once(uses[id(m)], i, k, reads) for k, m in enumerate(members)):
            continue
        layout = concat_layout(pf)
        if layout is None:
            continue
        axis, sizes = layout
        dims = [int(d.value) for d in out.shape]
        if any(d != 1 for d in dims[:axis]):
            continue  # a slice would not be one byte range
        inner = math.prod(dims[axis + 1:]) * (out.nbytes // max(math.prod(dims), 1))
        if any(m.nbytes != n * inner for m, n in zip(members, sizes)):
            continue  # (a well-formed call passes tensors of the kernel's shapes)
        offsets, at = [], 0
        for n in sizes:
            offsets.append(at * inner)
            at += n
        groups.append(ConcatGroup(out, members, offsets, i))
        nested.update(id(m) for m in members)
        outputs.add(id(out))
    return groups


_VARS = frozenset((Var, DataflowVar))
_KILLS = frozenset(("relax.memory.kill_tensor", "relax.memory.kill_storage"))


def _written_once(uses: list[tuple[int, tir.PrimFunc, int]], at: int, position: int,
                  reads: Callable[[tir.PrimFunc, int], bool]) -> bool:
    """Whether a member's kernel uses are: first its producer (a parameter the
    kernel writes), then only reads, its concatenation among them once, at
    ``position`` of the call at binding ``at``."""
    if not uses or reads(uses[0][1], uses[0][2]) or uses[0][0] >= at:
        return False
    in_concat = [u for u in uses if u[0] == at]
    if len(in_concat) != 1 or in_concat[0][2] != position:
        return False
    return all(reads(pf, p) for i, pf, p in uses[1:] if i != at)
