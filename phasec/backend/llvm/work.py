"""The estimated work of a loop body, in element stores: what decides
whether a parallel loop is worth the threads (see :mod:`.irlib`'s runtime)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.intrinsics import INTRINSIC_TABLE

__all__ = ["estimate_work"]


#: Transcendental intrinsics (a polynomial of ~10-20 vector operations, see
#: mathlib, or a libm call: the ``costly`` ones) and what each counts for in
#: :func:`estimate_work`: measured on one AVX-512 core, a store of
#: gelu_tanh's value (one tanh) costs 0.7 ns against ~0.1 ns for a scaled copy.
_MATH_CALLS = frozenset(i.name for i in INTRINSIC_TABLE.values() if i.costly)
_MATH_CALL_WORK = 8


def _math_calls(e: tir.PrimExpr) -> int:
    """Transcendental calls in ``e`` (a node shared in the tree counted once:
    the walk stays linear in the size of the graph)."""
    count = 0
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is tir.Call and x.name in _MATH_CALLS:
            count += 1
        stack.extend(tir.expr_children(x))
    return count


def estimate_work(body: tir.Stmt) -> int:
    """Rough count of element stores per iteration of an enclosing loop, a
    transcendental call in a stored or bound value counting for
    ``_MATH_CALL_WORK`` more stores.

    Used to keep small parallel loops serial, to leave a sleeping pool
    worker asleep for a small loop, and to size chunks; symbolic inner
    extents count as 256.
    """
    total = 0
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        n, mult = stack.pop()
        if isinstance(n, tir.For):
            ext = n.extent.value if isinstance(n.extent, tir.IntImm) else 256
            stack.append((n.body, mult * max(int(ext), 1)))
        elif isinstance(n, tir.BufferStore):
            total += mult * (1 + _MATH_CALL_WORK * _math_calls(n.value))
        elif isinstance(n, tir.SeqStmt):
            stack.extend((s, mult) for s in n.stmts)
        elif isinstance(n, (tir.IfThenElse,)):
            stack.append((n.then_case, mult))
            if n.else_case is not None:
                stack.append((n.else_case, mult))
        elif isinstance(n, tir.LetStmt):
            total += mult * _MATH_CALL_WORK * _math_calls(n.value)
            stack.append((n.body, mult))
        elif isinstance(n, (tir.Allocate, tir.AttrStmt)):
            stack.append((n.body, mult))
        elif isinstance(n, tir.While):  # trips unknown: counted as a loop of 256
            stack.append((n.body, mult * 256))
        elif isinstance(n, tir.Block):
            stack.append((n.body, mult))
            if n.init is not None:
                stack.append((n.init, mult))
    return max(total, 1)
