"""The flat schedule of an elementwise nest whose rows are not whole
vectors: its last two axes ``(y, x)`` run as one loop over ``f = y*W + x``.

The plain nest vectorizes along ``x`` alone. When ``W`` is not a multiple
of the vector width, LLVM picks a narrower vector that divides it (a 56
wide row of float32: eight lanes of AVX-512's sixteen) or leaves a scalar
remainder per row. Every load of the nest that reads its last two axes
reads them as a contiguous row-major pair (``t[.., y, x]`` with ``t``'s
rows ``W`` long, or ``t[.., y*W + x]``), and the output is contiguous too,
so ``y = f // W`` and ``x = f % W`` make each of them one contiguous run
of ``H*W`` elements: whole vectors (a QDQ conv's input quantization,
64x56x56: 31 -> 27 us, one thread). The same elements are computed by
the same expression: only the loop structure changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasec import arith
from phasec.ir.tir import For, IntImm, PrimExpr, Stmt, Var
from phasec.te.analysis import loads_of, static_int, uses_var
from phasec.te.operation import i64
from phasec.te.stmt import seq

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter

__all__ = ["FlatNest", "schedule"]

_I64 = "int64"
#: rows at least this many vectors wide keep the plain nest (their tail is small)
MAX_ROW_VECTORS = 16


class FlatNest:
    """The last two axes of an elementwise nest as one vectorized loop."""

    anchor = None
    vectorizes_last_axis = False

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """Every axis but the last two, which :meth:`emit_inner` runs flat."""
        return [("axis", t, nest.shape[t]) for t in range(nest.m - 2)]

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        low, root, m = nest.low, nest.root, nest.m
        H, W = static_int(nest.shape[m - 2]), static_int(nest.shape[m - 1])
        assert H is not None and W is not None
        f = Var(low.names.fresh(root.axes[m - 2].name + "_" + root.axes[m - 1].name), _I64)
        nest.axis_expr[root.axes[m - 2]] = f // i64(W)
        nest.axis_expr[root.axes[m - 1]] = f % i64(W)
        values = [nest.axis_expr[ax] for ax in root.axes]
        body = seq(nest.emit_stage(root, values, lambda ivs: (root.buffer, tuple(ivs))))
        return For(f, i64(0), i64(H * W), "vectorized", body)


def _flat_load(ld, y: Var, x: Var, W: int, low) -> bool:
    """Whether ``ld`` reads the nest's last two axes as a row-major pair
    (``[.., y, x]`` of rows ``W`` long, or ``[.., y*W + x]``), or not at all."""
    idx = ld.indices
    if not any(uses_var(i, y) or uses_var(i, x) for i in idx):
        return True
    if any(uses_var(i, y) or uses_var(i, x) for i in idx[:-2]):
        return False
    last = idx[-1]
    if len(idx) >= 2 and idx[-1] is x and idx[-2] is y:
        return static_int(low.map_shape(ld.tensor.shape[-1])) == W
    if len(idx) >= 2 and (uses_var(idx[-2], y) or uses_var(idx[-2], x)):
        return False
    rest = arith.simplify(last - (y * i64(W) + x))
    return isinstance(rest, IntImm) or not (uses_var(rest, y) or uses_var(rest, x))


def schedule(nest: NestEmitter) -> FlatNest | None:
    """The flat schedule when ``nest`` is an elementwise root of rank 3 or
    more (a matrix's rows keep the plain nest) with nothing attached, static
    last two axes whose rows are not whole vectors (nor
    wider than :data:`MAX_ROW_VECTORS` vectors), every load reads them as a
    row-major pair or not at all, and (when the nest is worth running in
    parallel) an outer axis is left to run in parallel, not a short odd one
    the plain nest would fuse with the next."""
    root, m = nest.root, nest.m
    if m < 3 or root.is_reduce or nest.attached or not nest.opt.vectorize:
        return None
    H, W = static_int(nest.shape[m - 2]), static_int(nest.shape[m - 1])
    lanes = nest.opt.target.lanes(32)
    if H is None or W is None or H < 2 or W < 1 or W % lanes == 0 or W >= MAX_ROW_VECTORS * lanes:
        return None
    # the outer loops must still offer the parallel loop the plain nest would have
    outer = [static_int(nest.shape[t]) for t in range(m - 2)]
    if nest.opt.parallel and nest.work() >= nest.opt.min_parallel_work:
        if not any(v is None or v >= 2 for v in outer):
            return None
        # a short odd parallel axis, which two threads cannot split evenly:
        # the plain nest fuses it with the next one (NestEmitter._fused_level)
        first = next(v for v in outer if v != 1)
        if first is not None and nest.opt.target.splits_unevenly(first):
            return None
    y, x = root.axes[m - 2], root.axes[m - 1]
    if not all(_flat_load(ld, y, x, W, nest.low) for ld in loads_of(root.expr)):
        return None
    return FlatNest()
