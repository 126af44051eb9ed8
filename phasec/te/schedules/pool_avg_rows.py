"""A float 2-D average pooling in NCHW of static shape, rows first: the sum
over the window's rows along the channel's input rows laid end to end,
then over its columns, divided by a count known at build time.

The plain average (:mod:`pool_avg`) tests every tap against the border and
counts the taps inside per output element (Inception's 3x3/1 pad 1
poolings: 576x14x14 in ~130 us, most of it the count). The window is
separable, and so is its count: the taps inside are (rows inside) x
(columns inside), both static per output row and column. So, per channel:

* ``u[f] = sum over r0 of x_flat[f + (y0 + r0*dh)*W]`` for the output rows
  whose window rows all lie inside the input (one vector loop over their
  input rows laid end to end, the rows between the windows' tops computed
  too, as :mod:`pool_max_rows` does for the max); the other output rows
  one loop each over the rows inside;
* ``out[oy, ox] = (sum over r1 of u[oy's row, ox*sw + r1*dw - left]) /
  count``, the outputs whose windows reach into the left or right padding
  one by one over the taps inside.

``count`` is the taps inside the input (``count_include_pad`` False) or
inside the padded extent (True), at least 1, as :mod:`pool_avg`'s; the
sums are the same taps added in another order (rows, then columns).
"""

from __future__ import annotations

from phasec import arith
from phasec.ir.tir import Allocate, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import RowsFirst, balanced_tree, static_sizes
from phasec.te.schedules.workloads import PoolWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["takes", "schedule", "taps_counted"]


def takes(w: PoolWorkload) -> bool:
    """A float 2-D average pooling in NCHW of static shape."""
    if (w.kind != "avg" or w.rank != 2 or not w.canonical
            or not w.data.dtype.startswith("float")):
        return False
    return all(arith.const_int(d) is not None for d in (*w.data.shape, *w.out_shape))


def taps_counted(size: int, out: int, k: int, s: int, d: int, lo: int, hi: int,
                 include_pad: bool) -> list[int]:
    """Per output index along one axis: how many of its ``k`` taps the
    average counts (inside the input of ``size``, or inside its padded
    extent ``-lo .. size + hi`` with ``include_pad``)."""
    first, stop = (-lo, size + hi) if include_pad else (0, size)
    return [sum(first <= o * s - lo + r * d < stop for r in range(k)) for o in range(out)]


def _sum(values: list[PrimExpr], dtype: str) -> PrimExpr:
    return balanced_tree(values, lambda a, b: a + b) if values else te.const(0, dtype)


def schedule(w: PoolWorkload) -> Tensor | None:
    """The average pooling ``w``, rows then columns, or None when it is not taken."""
    if not takes(w):
        return None
    dt = w.data.dtype
    n, c, H, W, OH, OW = static_sizes(w)
    (sh, sw), (dh, dw), (KH, KW) = w.strides, w.dilation, w.pool_size
    top, left, bottom, right = w.padding
    rows_in = taps_counted(H, OH, KH, sh, dh, top, bottom, w.count_include_pad)
    cols_in = taps_counted(W, OW, KW, sw, dw, left, right, w.count_include_pad)
    inside = RowsFirst.of(w)
    first, stop, y0, span, border, lo, hi = (
        inside.first, inside.stop, inside.y0, inside.span, inside.border, inside.lo, inside.hi)

    # the inner rows' columns in one flat loop (RowsFirst.flat_margins): u's
    # rows between zeros that loop reads for the edge columns
    margins = inside.flat_margins(w)
    margin_lo, margin_hi = margins or (0, 0)

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x = bufs[0]
        b, ch = Var("b", "int64"), Var("ch", "int64")
        u = Buffer(w.name + "_rows", (i64(max(1, margin_lo + span * W + margin_hi)),), dt)
        vb = Buffer(w.name + "_edge_rows", (i64(max(1, len(border)) * W),), dt)

        def flat(g: PrimExpr) -> PrimExpr:
            return BufferLoad(x, (b, ch, g // i64(W), g % i64(W)))
        stmts: list[Stmt] = []
        f = Var("f", "int64")
        if span:
            stmts.append(For(f, i64(0), i64(span * W), "vectorized", BufferStore(
                u, _sum([flat(f + i64((y0 + r0 * dh) * W)) for r0 in range(KH)], dt),
                (f + i64(margin_lo) if margin_lo else f,))))
            zero = te.const(0, dt)
            stmts += [BufferStore(u, zero, (i64(k),)) for k in range(margin_lo)]
            stmts += [BufferStore(u, zero, (i64(margin_lo + span * W + k),))
                      for k in range(margin_hi)]
        for k, oy in enumerate(border):
            rows = [r for r in (oy * sh - top + r0 * dh for r0 in range(KH)) if 0 <= r < H]
            j = Var("j", "int64")
            stmts.append(For(j, i64(0), i64(W), "vectorized", BufferStore(
                vb, _sum([BufferLoad(x, (b, ch, i64(r), j)) for r in rows], dt),
                (i64(k * W) + j,))))

        def store(oy: PrimExpr, ox: PrimExpr, total: PrimExpr, count: int,
                  flat: bool = False) -> Stmt:
            idx = w.out_layout.index_from_canonical((b, ch, oy, ox))
            return BufferStore(out, divided(total, max(1, count), dt) if flat
                               else total / te.const(max(1, count), dt), idx)

        def columns(src: Buffer, base: PrimExpr, oy: PrimExpr, rows: int,
                    inner: bool = True) -> list[Stmt]:
            ox = Var("ox", "int64")
            row: list[Stmt] = []
            if inner and hi > lo:
                total = _sum([BufferLoad(src, (base + (ox + lo) * sw + (r1 * dw - left),))
                              for r1 in range(KW)], dt)
                # the inner columns' taps all lie inside: KW of them counted
                row.append(For(ox, i64(0), i64(hi - lo), "vectorized",
                               store(oy, ox + lo, total, rows * KW)))
            for col in (*range(lo), *range(hi, OW)):
                taps = [t for t in (col * sw - left + r1 * dw for r1 in range(KW)) if 0 <= t < W]
                row.append(store(oy, i64(col), _sum([BufferLoad(src, (base + t,)) for t in taps],
                                                    dt), rows * cols_in[col]))
            return row
        if margins:
            g = Var("g", "int64")
            total = _sum([BufferLoad(u, (g + i64(r1 * dw),)) for r1 in range(KW)], dt)
            o = g + i64(first * W)
            stmts.append(For(g, i64(0), i64((stop - first) * W), "vectorized", store(
                o // i64(W), o % i64(W), total, KH * KW, flat=True)))
            q = Var("q", "int64")
            stmts.append(For(q, i64(0), i64(stop - first), "serial",
                             seq(columns(u, q * i64(W) + i64(margin_lo), q + first, KH, False))))
        elif span:
            q = Var("q", "int64")
            stmts.append(For(q, i64(0), i64(stop - first), "serial",
                             seq(columns(u, q * (sh * W), q + first, KH))))
        for k, oy in enumerate(border):
            stmts += columns(vb, i64(k * W), i64(oy), rows_in[oy])
        work = n * c * (span * W * KH + OH * OW * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial",
            Allocate(u, Allocate(vb, seq(stmts)))))
    return te.extern(tuple(w.out_shape), dt, [w.data], build, name=w.name)


#: odd counts up to this divide through a float64 reciprocal (see :func:`divided`)
RECIPROCAL_MAX_COUNT = 1 << 20


def divided(total: PrimExpr, count: int, dtype: str) -> PrimExpr:
    """``total / count`` rounded as float32 division rounds it, for a count
    known at build time (the flat loop over the inner rows' columns; the
    other loops, shorter or strided, keep the division: ShuffleNet's 3x3/2
    pools were 3 us slower in all this way).

    A 16-lane ``vdivps`` bounds the flat loops of the average (Inception
    v2's 3x3/1 pools); a multiplication by ``float32(1/count)`` is faster
    but not ``/`` in the last bit. For an odd count ``d > 1`` (9, 25, 49:
    the whole windows) the sum goes to float64, is multiplied by
    ``float64(1/d)`` and rounded back: ``x/d`` is never a float32 rounding
    midpoint (``d`` times a 25-bit odd significand needs more than 24
    bits), so it lies at least ``2**-25/d`` (relative) from every midpoint,
    where the float64 product is within ``2**-52`` of it: both round to the
    same float32, for every float32 ``x`` (subnormal results and the
    flush-to-zero of :mod:`phasec.backend.llvm.fpenv` alike: tininess after
    rounding on x86; infinities, NaNs and signed zeros pass through the
    product unchanged). Checked over all 2**32 floats for 3, 9, 25 and 49
    against numpy's float32 division (bench/README.md). Even counts keep
    the division (a power of two has an exact reciprocal already; the
    quotient by 6 or 12 may be a midpoint)."""
    if dtype == "float32" and count % 2 == 1 and 1 < count <= RECIPROCAL_MAX_COUNT:
        return te.cast(te.cast(total, "float64") * te.const(1.0 / count, "float64"), dtype)
    return total / te.const(count, dtype)
