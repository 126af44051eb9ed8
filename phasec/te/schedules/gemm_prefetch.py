"""Cache prefetch hints of the GEMM schedule's register tiles
(``tir.PREFETCH_ATTR``): the lines a tile's epilogue reads and writes, and
the next row tile's A (a constant weight streamed once per call). Addresses
only: a prefetch never faults and nothing is read, so no index is checked."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from phasec.arith import simplify
from phasec.ir.tir import (
    PREFETCH_ATTR, PREFETCH_WRITE_ATTR, AttrStmt, BinaryOp, Buffer, BufferLoad, Evaluate,
    FloatImm, For, IntImm, PrimExpr, Stmt, Var,
)
from phasec.te.analysis import static_int, subst_var, vars_of
from phasec.te.operation import i64
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

if TYPE_CHECKING:
    from phasec.te.schedules.gemm import GemmEmitter

__all__ = ["index_add", "index_mul", "epilogue_prefetch", "next_rows_prefetch",
           "next_panel_prefetch"]

_I64 = "int64"


def index_add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a + b``, without adding a constant 0."""
    if isinstance(a, IntImm) and a.value == 0:
        return b
    if isinstance(b, IntImm) and b.value == 0:
        return a
    return a + b


def index_mul(a: PrimExpr, c: int) -> PrimExpr:
    """``a * c``, folded when ``a`` is a constant, without multiplying by 1."""
    if c == 1:
        return a
    if isinstance(a, IntImm):
        return i64(a.value * c)
    return a * c


def epilogue_prefetch(em: GemmEmitter, row0: PrimExpr, mr: int, col: PrimExpr, width: int
                       ) -> list[Stmt]:
    """Cache prefetches, issued before the tile's reduction, of the lines
    its epilogue reads along the tile's columns (a residual) and writes
    (the output): one per cache line of each of the tile's rows (see
    ``tir.PREFETCH_ATTR``). Touched only at the end of the tile, a few
    hundred bytes per row here and there, each line was a cache miss that
    stalled the pipeline."""
    nest, low, root, m, ri = em.nest, em.low, em.root, em.m, em.ri
    K = static_int(em.K)
    if em.plan.wide or K is None or K < nest.opt.target.gemm_prefetch_min_k:
        return []  # (a short reduction hides no miss and pays for the prefetches)
    if em.plan.flat:
        # the tile's columns are one run of each plane, not a few hundred
        # bytes of each of its rows: the prefetchers follow them (and each
        # address would be a division by the row width, twice the kernel's
        # LLVM time: 64 -> 256 + residual over 56x56 alone 0.94 -> 0.91 ms)
        return []
    ii = Var(low.names.fresh("pf_i"), _I64)
    jj = Var(low.names.fresh("pf_j"), _I64)
    values = {ax: (index_add(row0, ii) if t == ri else index_add(col, jj) if t == m - 1
                   else nest.axis_expr[ax]) for t, ax in enumerate(root.axes)}
    found: dict[int, tuple[str, Buffer, tuple[PrimExpr, ...]]] = {}

    def collect(tensor: Tensor, idx: tuple[PrimExpr, ...]) -> PrimExpr:
        st = None if tensor.is_placeholder else low.stages.get(id(tensor))
        buf = (low.buffers[id(tensor)] if tensor.is_placeholder
               else None if st is None or st is em.anchor or st.root is not None
               else st.buffer)
        if buf is not None and any(id(jj) in vars_of(i) for i in idx):
            found.setdefault(id(buf), (PREFETCH_ATTR, buf, idx))
        return FloatImm(0.0, tensor.dtype)
    if em.anchor is not root:
        low.emit_value(root.expr, values, collect)
    found.setdefault(id(root.buffer), (PREFETCH_WRITE_ATTR, root.buffer,
                                       tuple(values[ax] for ax in root.axes)))
    step = 64 // (8 if em.dtype == "float64" else 4)  # elements of a cache line
    points = list(range(0, width, step))
    if width - 1 not in points:
        points.append(width - 1)  # the last line of a row that is not line-aligned
    stmts: list[Stmt] = []
    for key, buf, idx in found.values():
        row = Var(low.names.fresh("pf_i"), _I64)  # a loop variable per loop
        idx = tuple(subst_var(i, ii, row) for i in idx)
        body = [AttrStmt(key, BufferLoad(buf, tuple(subst_var(i, jj, i64(p))
                                                    for i in idx)),
                         Evaluate(IntImm(0, "int32"))) for p in points]
        stmts.append(For(row, i64(0), i64(mr), "unroll", seq(body)))
    return stmts


def next_rows_prefetch(em: GemmEmitter, row0: PrimExpr, mr: int, k: Var) -> Stmt | None:
    """A cache prefetch for reduction step ``k`` of a tile of rows ``[row0,
    row0 + mr)``: a line of the row operand (A) of the next ``mr`` rows,
    step ``k`` taking line ``k // mr`` of row ``k % mr`` (so the lines are
    requested evenly over the first ``mr / 16`` of the reduction, not in
    one burst the cache's miss buffers drop), or None (``tir.PREFETCH_ATTR``).
    A is read directly, a few hundred bytes of each row per row tile: too
    short a stream for the hardware prefetchers, so a weight that is not
    in cache (every call of a model whose weights exceed the L2: each
    layer's are read once) missed on every line of every tile (MobileNetV2
    at 224x224: its 1x1 convolutions over 7x7 and 14x14 ~30% slower inside
    the model than alone). Only for an A that is one parameter read along
    its last axis by a one-axis reduction (a 1x1 convolution's weight, a
    matmul's constant left operand) of ``gemm_prefetch_a_min_k`` to
    ``gemm_prefetch_a_max_k`` steps, of at least ``gemm_prefetch_a_min_bytes``,
    and of at most ``gemm_prefetch_a_max_columns`` columns in all
    (with the loops around the GEMM): where each row of A serves a few tiles (a wider product re-reads A from the
    cache, and activations as A were just written: there the prefetches
    only cost, BERT's and the MLPs' GEMMs 12-18% slower with them).
    Addresses past the last row or line are clamped to them (inside A;
    nothing is read either way)."""
    low, anchor, plan = em.low, em.anchor, em.plan
    rexts = [static_int(e) for e in em.rexts]
    target = em.nest.opt.target
    # the columns A meets in a call: the GEMM's own times the loops around
    # it (a convolution's output rows, a batch), none of which A uses
    dims = [static_int(d) for d in em.nest.shape]
    columns = (None if None in dims or not dims[em.ri]
               else math.prod(dims) // dims[em.ri])  # type: ignore[arg-type]
    if (plan.wide or rexts[0] is None or any(e != 1 for e in rexts[1:])
            or not target.gemm_prefetch_a_min_k <= rexts[0] <= target.gemm_prefetch_a_max_k
            or columns is None or columns > target.gemm_prefetch_a_max_columns):
        return None
    found: list[tuple[Tensor, tuple[PrimExpr, ...]]] = []

    def collect(tensor: Tensor, idx: tuple[PrimExpr, ...]) -> PrimExpr:
        found.append((tensor, idx))
        return FloatImm(0.0, tensor.dtype)

    def offset(row: int, k: int) -> int | None:  # A's flat element offset
        found.clear()
        values: dict[Var, PrimExpr] = {ax: i64(0) for ax in anchor.axes}
        values.update({ax.var: i64(0) for ax in anchor.raxes})
        values.update({anchor.axes[em.ri]: i64(row), anchor.raxes[0].var: i64(k)})
        low.emit_value(plan.a_expr, values, collect)
        if (len(found) != 1 or not found[0][0].is_placeholder
                or found[0][0].name not in em.nest.opt.constant_inputs):
            return None  # (A computed, of several operands, or not a weight: cached)
        dims = [static_int(d) for d in found[0][0].shape]
        idx = [static_int(simplify(i)) for i in found[0][1]]
        if None in dims or None in idx:
            return None
        flat = 0
        for i, d in zip(idx, dims):
            flat = flat * d + i
        return flat
    start = offset(0, 0)
    if start is None or offset(0, 1) != start + 1:
        return None  # A not read along its rows (a transposed weight)
    K = rexts[0]
    bits = int("".join(c for c in anchor.tensor.dtype if c.isdigit()) or 32)
    a = found[0][0]
    a_bits = int("".join(c for c in a.dtype if c.isdigit()) or 32)
    a_bytes = math.prod(static_int(d) or 0 for d in a.shape) * a_bits // 8
    if a_bytes < target.gemm_prefetch_a_min_bytes:
        return None
    step = max(1, 512 // bits)  # elements of a cache line
    # (the batch axes at the loops around the GEMM, as the tile's own reads)
    values = dict(zip(anchor.axes, em._anchor_values(None, i64(0))))
    values.update({ax.var: i64(0) for ax in anchor.raxes})
    values[anchor.axes[em.ri]] = BinaryOp(
        "min", index_add(row0, index_add(i64(mr), BinaryOp("%", k, i64(mr)))), index_add(em.M, i64(-1)))
    values[anchor.raxes[0].var] = BinaryOp(
        "min", index_mul(BinaryOp("//", k, i64(mr)), step), i64(K - 1))
    found.clear()
    low.emit_value(plan.a_expr, values, collect)
    tensor, idx = found[0]
    return AttrStmt(PREFETCH_ATTR, BufferLoad(low.buffers[id(tensor)], idx),
                    Evaluate(IntImm(0, "int32")))


def next_panel_prefetch(bp: Buffer, next_tile: PrimExpr, io: PrimExpr, k: PrimExpr, K: int,
                        width: int, first: PrimExpr | None = None, total: int = 0) -> Stmt:
    """A cache prefetch for reduction step ``k`` of row tile ``io``: line
    ``io * K + k`` of micro-panel ``next_tile`` of the packed B ``bp`` (``K``
    x ``width`` elements of 32 bits), clamped to its last line. Where each
    micro-panel of a constant B meets every row tile before the next one
    (see ``GemmEmitter._panel``), the next micro-panel comes into the cache
    over the first row tiles of this one, not all at once in a tile that
    then waits on it (``tir.PREFETCH_ATTR``). ``first``: where the lines
    start along the reduction (a block of it ``K`` long, ``GemmPlan.k_block``,
    ``k`` counted from its start), clamped to the last of ``total``."""
    lines = K * width // 16
    line = BinaryOp("min", index_add(index_mul(io, K), k), i64(lines - 1))
    flat = index_mul(line, 16)
    if first is not None:
        flat = BinaryOp("min", index_add(index_mul(first, width), flat),
                        i64(total * width - 16))
    return AttrStmt(PREFETCH_ATTR, BufferLoad(bp, (next_tile, BinaryOp("//", flat, i64(width)),
                                                   BinaryOp("%", flat, i64(width)))),
                    Evaluate(IntImm(0, "int32")))
