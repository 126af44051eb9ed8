"""Give every block its own axes for the loop variables it uses.

TVM's well-formedness check (0.27) refuses a non-opaque block that reads a
loop variable of an enclosing loop directly instead of through one of its
axes ("Loop iterator var ... is defined outside of any block, but is used
inside the non-opaque current block"). phasec's schedules (register tiles,
accumulators indexed by the inner loop) do use outer loop variables inside
blocks, so :func:`bind_loop_vars_in_blocks` rewrites each such block: one
extra spatial axis per loop variable, bound to that variable, replaces it
inside the block. The value of every expression is unchanged (an axis is its
binding), so kernels compute exactly what they did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasec.ir import tir
from phasec.arith import substitute
from phasec.ir.node import Node, replace

__all__ = ["bind_loop_vars_in_blocks"]


def bind_loop_vars_in_blocks(body: tir.Stmt) -> tir.Stmt:
    """``body`` with every block's uses of enclosing loop variables bound to
    new spatial axes of that block (see the module docstring)."""
    return _rewrite(body, {})


def _children(s: tir.Stmt) -> tuple[tir.Stmt | None, ...]:
    """The statements directly under ``s`` that :func:`_rewrite` walks."""
    t = type(s)
    if t is tir.SeqStmt:
        return tuple(s.stmts)
    if t in (tir.For, tir.LetStmt, tir.Allocate, tir.AttrStmt, tir.While):
        return (s.body,)
    if t is tir.IfThenElse:
        return (s.then_case, s.else_case)
    return ()


def _rebuilt(s: tir.Stmt, new: list[Any]) -> tir.Stmt:
    """``s`` with its children (:func:`_children`) replaced by ``new``."""
    old = _children(s)
    if all(a is b for a, b in zip(new, old)):
        return s
    t = type(s)
    if t is tir.SeqStmt:
        return replace(s, stmts=tuple(new))
    if t is tir.IfThenElse:
        return replace(s, then_case=new[0], else_case=new[1])
    return replace(s, body=new[0])


def _rewrite(root: tir.Stmt, loops: Mapping[int, tir.For]) -> tir.Stmt:
    """:func:`bind_loop_vars_in_blocks` below ``loops``, with an explicit
    stack: a fused kernel of many stages nests its buffers' allocations and
    lets hundreds deep (ddddocr's detector reached Python's recursion limit)."""
    done: list[Any] = []  # rewritten statements, children before their parent
    work: list[tuple[Any, Mapping[int, tir.For], bool]] = [(root, loops, False)]
    while work:
        s, outer, expanded = work.pop()
        if expanded:
            n = len(_children(s))
            new = done[len(done) - n:]
            del done[len(done) - n:]
            done.append(_rebuilt(s, new))
            continue
        t = type(s)
        if s is None or not isinstance(s, tir.Stmt):
            done.append(s)
            continue
        if t is tir.Block:
            done.append(_bind_block(s, outer))
            continue
        kids = _children(s)
        if not kids:
            done.append(s)
            continue
        inner = {**outer, id(s.loop_var): s} if t is tir.For else outer
        work.append((s, outer, True))
        work.extend((k, inner, False) for k in reversed(kids))
    return done[0]


def _bind_block(blk: tir.Block, loops: Mapping[int, tir.For]) -> tir.Block:
    # Loops inside the block are the block's own: start afresh below it.
    body = _rewrite(blk.body, {})
    init = None if blk.init is None else _rewrite(blk.init, {})
    used = _loop_vars_used((body, init, blk.reads, blk.writes), loops)
    if not used:
        if body is blk.body and init is blk.init:
            return blk
        return replace(blk, body=body, init=init)
    taken = {iv.var.name for iv in blk.iter_vars}
    vmap: dict[tir.Var, tir.PrimExpr] = {}
    iter_vars = list(blk.iter_vars)
    iter_values = list(blk.iter_values)
    for loop_var in used:
        loop = loops[id(loop_var)]
        name = "v_" + loop_var.name
        while name in taken:
            name += "_"
        taken.add(name)
        axis = tir.Var(name, loop_var.dtype)
        extent = loop.extent if _is_zero(loop.min) else loop.min + loop.extent
        iter_vars.append(tir.IterVar(axis, extent, "S"))
        iter_values.append(loop_var)
        vmap[loop_var] = axis
    return replace(blk, iter_vars=tuple(iter_vars), iter_values=tuple(iter_values),
                   body=_substitute(body, vmap), init=_substitute(init, vmap),
                   reads=_substitute(blk.reads, vmap), writes=_substitute(blk.writes, vmap))


def _is_zero(e: tir.PrimExpr) -> bool:
    return type(e) is tir.IntImm and e.value == 0


def _loop_vars_used(roots: Any, loops: Mapping[int, tir.For]) -> list[tir.Var]:
    """The enclosing loops' variables mentioned under ``roots``, in order of first mention."""
    if not loops:
        return []  # a block outside every loop: nothing to look for
    found: dict[int, tir.Var] = {}
    stack = [roots]
    while stack:
        x = stack.pop()
        if type(x) is tir.Var:
            if id(x) in loops and id(x) not in found:
                found[id(x)] = x
        elif isinstance(x, Node):
            stack.extend(reversed([getattr(x, f) for f in type(x)._fields]))
        elif isinstance(x, tuple):
            stack.extend(reversed(x))
    return list(found.values())


def _substitute(x: Any, vmap: Mapping[tir.Var, tir.PrimExpr]) -> Any:
    """``x`` (a statement, region, expression or tuple of them) with ``vmap`` applied."""
    if isinstance(x, tir.PrimExpr):
        return substitute(x, vmap)
    if isinstance(x, tuple):
        return tuple(_substitute(i, vmap) for i in x)
    if isinstance(x, Node) and not isinstance(x, tir.Buffer):
        changes = {}
        for f in type(x)._fields:
            old = getattr(x, f)
            new = _substitute(old, vmap)
            if new is not old:
                changes[f] = new
        return replace(x, **changes) if changes else x
    return x
