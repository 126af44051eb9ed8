"""A 2-D max pooling computed in the same kernel as the convolution (and
its elementwise epilogue) that produces its input, from a ring of the
producer's rows: the producer's whole output is never written.

A CNN's stem (SqueezeNet's 3 -> 64 3x3/2 + ReLU then a 3x3/2 max pool,
ResNet-50's 7x7/2 + BN + ReLU then 3x3/2 pad 1) writes 3.2 MB that the pool
reads back from L3 (bench/README.md, "SqueezeNet's stem"): writing those
lines is most of what the convolution costs more inside the model than
alone. Here the producer is lowered as usual (:func:`phasec.te.lowering.lower`:
its staging nests, then one root nest over its batch and output rows), and
its row body is run inside the pool's loop over output rows: before output
row ``oy`` the producer rows its window needs and no earlier row computed
are computed into a ring of ``R`` rows (row ``y`` at ``y % R``, ``R`` the
window's height rounded up to a power of two, every channel: 64 x 4 x 111
floats, in L2), then the row is pooled from the ring at once, as
:mod:`.pool_max_rows` pools one row (the max over the window's rows into a
buffer of one row, then over its columns). The output rows are split in
bands run in parallel (``TargetTuning.stem_pool_bands``; by default as many
as the threads set when the model is built: one on one thread), each with
its own ring; a band's first window recomputes the rows it
shares with the previous band's last.

Each pooled value is the same max (:func:`pool_window.nan_propagating_max`,
NaN when a tap is NaN, padding taps left out) of the same producer values
as the two kernels compute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec import arith
from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, AttrStmt, BinaryOp, Buffer, BufferLoad, BufferStore, For, IfThenElse, PrimExpr,
    Stmt, Var,
)
from phasec.ir.tir_visitor import StmtExprMutator, walk
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.options import ScheduleOptions
from phasec.te.schedules.pool_window import RowsFirst, max_pool_row, static_sizes
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["takes", "schedule", "use_lowering"]

#: the attribute of the GEMM tiles' prefetches of the lines they write
#: (pointless for a ring kept in the cache: left out)
_PREFETCH_WRITE = "phasec.prefetch_write"


#: how a TE graph is lowered (:func:`phasec.te.lowering.lower`, which imports
#: this table: :mod:`phasec.te` hands it over, :func:`use_lowering`)
_LOWER: list[Callable[..., Any]] = []


def use_lowering(lower: Callable[..., Any]) -> None:
    """Lower producers with ``lower`` (:func:`phasec.te.lowering.lower`)."""
    _LOWER[:] = [lower]


def takes(w: PoolWorkload) -> bool:
    """A float 2-D max pooling in NCHW of static shape whose input is
    computed (not a placeholder) from a reduction: a convolution and its
    epilogue fused with it."""
    if (w.kind != "max" or w.rank != 2 or not w.canonical or w.data.is_placeholder
            or not w.data.dtype.startswith("float")
            or any(arith.const_int(d) is None for d in (*w.data.shape, *w.out_shape))):
        return False
    return any(getattr(t.op, "is_reduction", False) for t in _graph(w.data))


def _graph(out: Tensor) -> list[Tensor]:
    """Every tensor ``out`` is computed from, ``out`` included."""
    seen: dict[int, Tensor] = {}
    stack = [out]
    while stack:
        t = stack.pop()
        if id(t) not in seen:
            seen[id(t)] = t
            stack.extend(getattr(t.op, "inputs", ()))
    return list(seen.values())


class _Producer:
    """The producer lowered on its own, split into what runs before its rows
    (``prologue``, under ``allocs``) and one output row's body (``row``,
    over the variables ``b`` and ``y``)."""

    def __init__(self, func: tir.PrimFunc, inputs: list[Tensor]) -> None:
        self.params = list(func.params[:len(inputs)])
        self.out: Buffer = func.params[len(inputs)]
        body, self.allocs = func.body, []
        while isinstance(body, Allocate):
            self.allocs.append(body.buffer)
            body = body.body
        stmts = list(body.stmts) if isinstance(body, tir.SeqStmt) else [body]
        self.prologue, root = stmts[:-1], stmts[-1]
        n, _, rows, _ = (arith.const_int(d) for d in self.out.shape)
        self.row: Stmt | None = None
        if (isinstance(root, For) and isinstance(root.body, For)
                and arith.const_int(root.min) == 0 and arith.const_int(root.extent) == n
                and arith.const_int(root.body.min) == 0
                and arith.const_int(root.body.extent) == rows):
            self.b, self.y = root.loop_var, root.body.loop_var
            if self._rows_alone(root.body.body, stmts[:-1]):
                self.row = root.body.body

    def _rows_alone(self, row: Stmt, prologue: list[Stmt]) -> bool:
        """Whether the body of output row ``y`` writes only row ``y`` of the
        output (``[b, :, y, :]``) and buffers it allocates itself, and nothing
        else touches the output: its rows may run in any order, any number
        of times, each into its own place."""
        local = {id(n.buffer) for n in walk(row) if isinstance(n, Allocate)}
        axes = {id(a.var): value for n in walk(row) if isinstance(n, tir.Block)
                for a, value in zip(n.iter_vars, n.iter_values)}

        def at(index: PrimExpr) -> PrimExpr:
            return axes.get(id(index), index)
        for n in walk(row):
            if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is self.out:
                if at(n.indices[0]) is not self.b or at(n.indices[2]) is not self.y:
                    return False
            elif isinstance(n, tir.BufferRegion) and n.buffer is self.out:
                (b0, b1), (y0, y1) = n.region[0], n.region[2]
                if (at(b0) is not self.b or at(y0) is not self.y
                        or arith.const_int(b1) != 1 or arith.const_int(y1) != 1):
                    return False
            elif isinstance(n, BufferStore) and id(n.buffer) not in local:
                return False
        return not any(getattr(n, "buffer", None) is self.out
                       for s in prologue for n in walk(s))


class _ToRing(StmtExprMutator):
    """The producer's row body over the ring: its parameters replaced by the
    kernel's buffers, output row ``y`` stored at ring row ``y % R``, its
    write prefetches left out, ``b`` and ``y`` replaced."""

    def __init__(self, p: _Producer, bufs: list[Buffer], ring: Buffer,
                 vmap: dict[int, PrimExpr]) -> None:
        self.p, self.ring, self.vmap = p, ring, vmap
        self.bufs = {id(a): b for a, b in zip(p.params, bufs)}

    def visit_var_(self, v: Var) -> PrimExpr:
        return self.vmap.get(id(v), v)

    def _place(self, buf: Buffer, idx: tuple[PrimExpr, ...]
               ) -> tuple[Buffer, tuple[PrimExpr, ...]]:
        if buf is self.p.out:
            depth = self.ring.shape[2]
            return self.ring, (i64(0), idx[1], BinaryOp("%", idx[2], depth), idx[3])
        return self.bufs.get(id(buf), buf), idx

    def visit_buffer_region_(self, n: tir.BufferRegion) -> tir.BufferRegion:
        if n.buffer is self.p.out:
            (_, one), ch, (y, _), x = n.region
            depth = self.ring.shape[2]
            return tir.BufferRegion(self.ring, ((i64(0), one), ch,
                                                (BinaryOp("%", y, depth), i64(1)), x))
        buf = self.bufs.get(id(n.buffer), n.buffer)
        return n if buf is n.buffer else tir.BufferRegion(buf, n.region)

    def visit_buffer_load_(self, n: BufferLoad) -> PrimExpr:
        buf, idx = self._place(n.buffer, n.indices)
        return n if buf is n.buffer else BufferLoad(buf, idx)

    def visit_buffer_store_(self, n: BufferStore) -> Stmt:
        buf, idx = self._place(n.buffer, n.indices)
        return n if buf is n.buffer else BufferStore(buf, n.value, idx)

    def visit_attr_stmt_(self, n: AttrStmt) -> Stmt:
        return n.body if n.key == _PREFETCH_WRITE else n


def _pow2_at_least(k: int) -> int:
    return 1 << max(0, k - 1).bit_length()


def schedule(w: PoolWorkload) -> Tensor | None:
    """The max pooling ``w`` with its producer in one kernel, or None when it
    is not taken (:func:`takes`; or the producer, lowered, is not one nest
    over its batch and output rows whose rows are independent)."""
    if not takes(w) or not _LOWER:
        return None
    inputs = [t for t in _graph(w.data) if t.is_placeholder]
    lowered = _LOWER[0]([*inputs, w.data], ScheduleOptions())
    if lowered.prim_func.params[len(inputs) + 1:]:
        return None  # scalar parameters (none for static shapes)
    producer = _Producer(lowered.prim_func, inputs)
    if producer.row is None:
        return None
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left = w.padding[0], w.padding[1]
    span = (KH - 1) * dh + 1
    depth = _pow2_at_least(span)
    pitch = max(left + W, (OW - 1) * sw + (KW - 1) * dw + 1)
    lowest = te.min_value(dt)
    inside = RowsFirst.of(w)
    work = n * (c * H * W * 30 + c * OH * (W * KH + OW * KW))
    target = tuning.host_tuning()
    want = target.stem_pool_bands or tuning.build_threads()
    bands = max(1, min(OH, want)) if work >= target.parallel_min_work else 1
    per_band = -(-OH // bands)

    def window_rows(oy: int) -> list[int]:
        return [r for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H]

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        b, band = Var("b", "int64"), Var("band", "int64")
        i, ch = Var("i", "int64"), Var("ch", "int64")
        ring = Buffer(w.name + "_ring", (i64(1), i64(c), i64(depth), i64(W)), dt)
        v = Buffer(w.name + "_rows", (i64(pitch),), dt)
        oy = band * i64(per_band) + i

        def ring_load(r: PrimExpr, col: PrimExpr) -> PrimExpr:
            return BufferLoad(ring, (i64(0), ch, BinaryOp("%", r, i64(depth)), col))

        def after(q: PrimExpr) -> PrimExpr:
            """One past the last producer row output row ``q``'s window reads."""
            return BinaryOp("min", i64(H), q * sh + i64((KH - 1) * dh - top + 1))

        # the producer rows output row oy needs that no earlier row of its band computed
        # the rows of output row oy's window past those the row before computed (a band's
        # first row: its whole window); min(i, 1) * H, affine in an atom, keeps it provable
        start = BinaryOp("max", BinaryOp("max", i64(0), oy * sh - i64(top)),
                         after(oy - i64(1)) + BinaryOp("min", i, i64(1)) * i64(H) - i64(H))
        y = Var("y", "int64")
        row = _ToRing(producer, bufs, ring, {id(producer.b): b, id(producer.y): y}
                      ).visit(producer.row)
        rows_stmt = For(y, start, after(oy) - start, "serial", row)

        def pooled(q: PrimExpr, rows: list[PrimExpr]) -> Stmt:
            """Output row ``q`` of every channel from the ring rows ``rows``."""
            return For(ch, i64(0), i64(c), "serial", seq(max_pool_row(
                w, rows, v, ring_load, lambda ox, value: BufferStore(out, value, (b, ch, q, ox)))))

        inner = (pooled(oy, [oy * sh + i64(r0 * dh - top) for r0 in range(KH)])
                 if inside.stop > inside.first else None)
        pool_stmt = _edge(oy, [(k, pooled(i64(k), [i64(r) for r in window_rows(k)]))
                               for k in inside.border], inner)
        pads = [BufferStore(v, lowest, (i64(k),)) for k in (*range(left), *range(left + W, pitch))]
        per_row = IfThenElse(BinaryOp("<", oy, i64(OH)), seq([rows_stmt, pool_stmt]))
        body = seq([*pads, For(i, i64(0), i64(per_band), "serial", per_row)])
        nest = For(b, i64(0), i64(n), "serial", For(
            band, i64(0), i64(bands), "parallel" if bands > 1 else "serial",
            Allocate(ring, Allocate(v, body))))
        stmt: Stmt = seq([*(_ToRing(producer, bufs, ring, {}).visit(s)
                            for s in producer.prologue), nest])
        for buf in reversed(producer.allocs):
            stmt = Allocate(buf, stmt)
        return stmt
    return te.extern(tuple(w.out_shape), dt, inputs, build, name=w.name)


def _edge(oy: PrimExpr, edges: list[tuple[int, Stmt]], inner: Stmt | None) -> Stmt:
    """``inner`` for the output rows whose windows lie inside the input, the
    statement of each edge row ``k`` for ``oy == k``."""
    stmt: Stmt | None = inner
    for k, s in reversed(edges):
        stmt = IfThenElse(BinaryOp("==", oy, i64(k)), s, stmt)
    assert stmt is not None
    return stmt
