"""The interleaving schedule of an elementwise nest whose last axis ``x``
is read through ``x // s`` and ``x % s`` (the phases of a transposed
convolution interleaved back, a nearest upsampling, a depth-to-space).

The plain nest vectorizes along ``x``, where such a load is a gather. Here
the last axis is split ``x = q*s + m``::

    for q in range(X // s):       # vectorized
        for m in range(s):        # unrolled: index // s and % s now affine in q
            out[..., q*s + m] = f(...)
    the X % s last columns one by one

so every load is contiguous along ``q`` and the ``s`` stores of one ``q``
form an interleaved group that LLVM vectorizes with shuffles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasec import arith
from phasec.ir.tir import BinaryOp, For, IntImm, PrimExpr, Stmt, Var
from phasec.te.analysis import loads_of, static_int
from phasec.te.operation import i64
from phasec.te.stmt import seq
from phasec.te.tensor import post_order

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter

__all__ = ["InterleaveNest", "schedule", "phase_count"]

_I64 = "int64"
#: the largest phase count unrolled (a stride of a transposed convolution)
MAX_PHASES = 4


class InterleaveNest:
    """The interleaving schedule of a nest with ``phases`` phases along its last axis."""

    anchor = None
    vectorizes_last_axis = False

    def __init__(self, phases: int) -> None:
        self.phases = phases

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """Every axis but the last, which :meth:`emit_inner` splits."""
        return [("axis", t, nest.shape[t]) for t in range(nest.m - 1)]

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        low, root, m, s = nest.low, nest.root, nest.m, self.phases
        cols = static_int(nest.shape[m - 1])
        assert cols is not None
        xname = root.axes[m - 1].name

        def element(x: PrimExpr) -> Stmt:
            nest.axis_expr[root.axes[m - 1]] = arith.simplify(x)
            values = [nest.axis_expr[ax] for ax in root.axes]
            return seq(nest.emit_stage(root, values, lambda ivs: (root.buffer, tuple(ivs))))
        stmts: list[Stmt] = []
        full = cols // s
        if full:
            q = Var(low.names.fresh(xname + "_q"), _I64)
            body = seq([element(q * s + k) for k in range(s)])
            stmts.append(For(q, i64(0), i64(full), "vectorized", body))
        for x in range(full * s, cols):
            stmts.append(element(i64(x)))
        return seq(stmts)


def phase_count(nest: NestEmitter) -> int | None:
    """The divisor ``s`` (2..MAX_PHASES) of the last axis in the loads of
    ``nest``'s root when every ``//`` or ``%`` of an expression of the last
    axis is by that one constant, and some load's last index has one."""
    root, m = nest.root, nest.m
    xvar = root.axes[m - 1]
    found: set[int] = set()
    for ld in loads_of(root.expr):
        for idx in ld.indices:
            for n in post_order([idx]):
                if (isinstance(n, BinaryOp) and n.op in ("//", "%")
                        and any(v is xvar for v in post_order([n.lhs]))):
                    if not isinstance(n.rhs, IntImm):
                        return None
                    found.add(n.rhs.value)
    if len(found) != 1:
        return None
    s = found.pop()
    return s if 2 <= s <= MAX_PHASES else None


def schedule(nest: NestEmitter) -> InterleaveNest | None:
    """The interleaving schedule when ``nest`` is an elementwise root with
    nothing attached, a static last axis of at least two vectors' worth of
    phases, read through ``// s`` and ``% s``."""
    root, m = nest.root, nest.m
    if m < 1 or root.is_reduce or nest.attached or not nest.opt.vectorize:
        return None
    cols = static_int(nest.shape[m - 1])
    s = phase_count(nest)
    if cols is None or s is None or cols < 8 * s:
        return None
    return InterleaveNest(s)
