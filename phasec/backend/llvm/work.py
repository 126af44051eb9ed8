"""The estimated work of a loop body, in element stores: what decides
whether a parallel loop is worth the threads (see :mod:`.irlib`'s runtime)
and which LLVM pipeline a small library gets (:func:`library_pipeline`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from phasec.ir import tir
from phasec.ir.intrinsics import INTRINSIC_TABLE
from phasec.backend.llvm.objworker import PIPELINE_SWITCHES

__all__ = ["SMALL_LIBRARY_WORK", "estimate_work", "library_pipeline"]


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


def estimate_work(body: tir.Stmt, symbolic_extent: int = 256) -> int:
    """Rough count of element stores per iteration of an enclosing loop, a
    transcendental call in a stored or bound value counting for
    ``_MATH_CALL_WORK`` more stores. A loop of symbolic extent (or a
    ``While``) counts ``symbolic_extent`` trips.

    Used to keep small parallel loops serial, to leave a sleeping pool
    worker asleep for a small loop, and to size chunks (symbolic inner
    extents counted as 256 there).
    """
    total = 0
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        n, mult = stack.pop()
        if isinstance(n, tir.For):
            ext = n.extent.value if isinstance(n.extent, tir.IntImm) else symbolic_extent
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
        elif isinstance(n, tir.While):  # trips unknown
            stack.append((n.body, mult * symbolic_extent))
        elif isinstance(n, tir.Block):
            stack.append((n.body, mult))
            if n.init is not None:
                stack.append((n.init, mult))
    return max(total, 1)


#: A library whose kernels together store at most this many elements (a
#: conformance case's 3x4x5 tensors, a model's shape arithmetic, a softmax
#: over 1,000 classes) is optimized at O2 with LLVM's own loop
#: vectorization, SLP vectorization, unrolling and interleaving off (the
#: loops phasec marks are still vectorized and unrolled as marked). O3's own
#: decisions (full unrolling of short constant loops, then SLP over the
#: copies) cost such a module ~30% more LLVM time (the ONNX conformance
#: cases' modules: 45 -> 34 ms each, optimization and code generation) to
#: save at most a few microseconds a call, less than the VM's own cost of
#: calling it. Any symbolic extent makes a library large: its size is not
#: known at build time.
SMALL_LIBRARY_WORK = 4096


def library_pipeline(bodies: Iterable[tir.Stmt], opt_level: int) -> tuple[int, tuple[str, ...]]:
    """The LLVM pipeline a library of kernels with these bodies is compiled
    with: (level, switches off) for :func:`.objworker.optimize`. ``opt_level``
    with every switch on, but for a small library (see
    :data:`SMALL_LIBRARY_WORK`) at ``opt_level`` 2 or 3: O2 with every
    switch off. A function of the kernels alone, so a library always gets
    the same pipeline (the kernel cache's program keys, made from the
    kernels and ``opt_level``, stay exact)."""
    if opt_level < 2:
        return opt_level, ()
    total = 0
    for body in bodies:
        total += estimate_work(body, symbolic_extent=SMALL_LIBRARY_WORK + 1)
        if total > SMALL_LIBRARY_WORK:
            return opt_level, ()
    return 2, PIPELINE_SWITCHES
