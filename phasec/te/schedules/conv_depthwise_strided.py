"""A depthwise NCHW conv2d strided along its rows' axis (MobileNet's and
EfficientNet's downsampling 3x3 / 5x5 stride 2), over its input split into
stride phases.

Vectorized along an output row, each tap of the direct convolution reads
the input row with a stride of ``sw``: LLVM makes that load a gather, or an
interleaved load with a gap, which forces a scalar remainder half as long
as the row. Summing over every input column and keeping every ``sw``-th
(the previous form here) did ``sw`` times the work. Instead the input is
de-interleaved once, per channel, into its ``sh x sw`` phases laid flat
(:class:`pool_window.PhaseGeometry`, zeros for the padding): tap ``(r0,
r1)`` of output ``p = y*V + x`` reads phase ``((r0*dh) % sh, (r1*dw) % sw)``
at ``p + (r0*dh)//sh * V + (r1*dw)//sw``, contiguous in ``p``, so the sum
runs over whole vectors of the flat plane whatever the row's width; only
the ``V - OW`` columns past each row (``(KW-1)*dw // sw``: one for a 3x3
stride 2) are computed and dropped. Each kept output is the same sum, in
the same tap order, as the direct convolution's. The copy and the sums are
one hand-written nest per channel, the phases in a buffer of their own
that stays in the cache between the two (all channels' phases as one
tensor went out to memory and back: 144x56x56 3x3/2 112 -> 104 us). The
epilogue (bias, activation) reads the flat plane's rows, contiguous.

A 3x3 (or narrower) window whose strided output row spans at most half a
vector of input (``2*OW*sw <= lanes``: at 16 lanes MobileNet's 8x8 and
smaller images) keeps the wide form: the row sums over every input column of a padded copy,
one vector a row, and every ``sw``-th column is kept in a buffer of its own.
There the phases' copy costs more than the products it saves (measured per
kernel against ORT, bench/README.md).
"""

from __future__ import annotations

from phasec import arith
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.ir.tir import Allocate, Buffer, BufferLoad, BufferStore, For, PrimExpr, Stmt, Var
from phasec.te.schedules.pool_window import PhaseGeometry, padded_input
from phasec.te.stmt import seq
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d) over its input's
    stride phases, or wide then decimated (see the module docstring); None
    unless it is depthwise (one input and one output channel per group),
    strided along the rows' axis, with static sizes."""
    data, weight = w.data, w.weight
    if w.data_layout.name != "NCHW" or w.kernel_layout.name != "OIHW" \
            or w.out_layout.name != "NCHW":
        return None
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape, *w.out_shape)]
    if any(d is None for d in dims):
        return None
    n, c, H, W, O, CG, KH, KW, _, _, OH, OW = dims
    sh, sw = w.strides
    if not (w.groups == c == O and CG == 1 and sw > 1 and OW >= 2):
        return None
    lanes = tuning.host_tuning().lanes(int(data.dtype[5:]))
    if (KW - 1) * w.dilation[1] <= 2 and 2 * OW * sw <= lanes:
        return _wide(w, n, c, OH, OW, KH, KW)
    return _phased(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)


def _phased(w: ConvWorkload, n: int, c: int, hw: tuple[int, int], out_hw: tuple[int, int],
            window: tuple[int, int], lanes: int) -> Tensor:
    (sh, sw), (dh, dw), dt = w.strides, w.dilation, w.data.dtype
    KH, KW = window
    geo = PhaseGeometry.of(hw, out_hw, window, (sh, sw), (dh, dw),
                           (w.padding[0], w.padding[1]), lanes)
    V, columns, length = geo.V, geo.columns, geo.length

    def build(bufs: list[Buffer], out: Buffer) -> Stmt:
        x, weight = bufs
        b, ch, p = Var("b", "int64"), Var("ch", "int64"), Var("p", "int64")
        # one channel's phases at a time, in a buffer of its own (see the
        # module docstring)
        phases = Buffer("stride_phases", (i64(sh * sw * length),), dt)
        stmts = geo.copy(x, b, ch, te.const(0, dt), lambda f, q: (phases, f * length + q),
                         lanes)
        terms: list[PrimExpr] = []
        for r0 in range(KH):      # the direct convolution's tap order
            for r1 in range(KW):
                y_tap, x_tap = r0 * dh, r1 * dw
                at = ((y_tap % sh) * sw + x_tap % sw) * length \
                    + (y_tap // sh) * V + x_tap // sw
                terms.append(BufferLoad(phases, (p + i64(at),))
                             * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1))))
        acc = terms[0]
        for term in terms[1:]:
            acc = acc + term
        stmts.append(For(p, i64(0), i64(columns), "vectorized", BufferStore(out, acc, (b, ch, p))))
        work = n * c * (sh * sw * length + columns * KH * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial", Allocate(phases, seq(stmts))))
    flat = te.extern((i64(n), i64(c), i64(columns)), dt, [w.data, w.weight], build,
                     name="T_conv2d_flat")
    # inlined: the epilogue (bias, activation) reads the flat plane's rows,
    # contiguous, with no copy between
    return te.compute(w.out_shape, lambda b, ch, y, x: flat[b, ch, y * V + x], name="T_conv2d")


def _wide(w: ConvWorkload, n: int, c: int, OH: int, OW: int, KH: int, KW: int) -> Tensor:
    (sh, sw), (dh, dw), weight = w.strides, w.dilation, w.weight
    top, left = w.padding[0], w.padding[1]
    columns = OW * sw
    # the padded copy reaches the last column the extra columns' taps read
    # (input coordinates, exclusive), and the last row the kept rows' taps read
    reach = [(OH - 1) * sh + (KH - 1) * dh - top + 1, columns + (KW - 1) * dw - left]
    zero = te.const(0, w.data.dtype)
    padded = padded_input(w.data, w.padding, 2, zero, reach)
    if padded is None:  # no padding: pad anyway on the right for the extra columns
        padded = padded_input(w.data, [0, 0, 0, 1], 2, zero, reach)
    ry, rx = te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    wide = te.compute(
        (i64(n), i64(c), i64(OH), i64(columns)),
        lambda b, ch, y, x: te.sum(
            padded[b, ch, y * sh + ry.var * dh, x + rx.var * dw] * weight[ch, 0, ry.var, rx.var],
            axis=[ry, rx]),
        name="T_conv2d_wide", tag="conv2d")
    # kept columns in a buffer of their own: read every sw-th element, the
    # epilogue's loads would be a gather or half scalar (a SiLU's exp too)
    return te.compute(w.out_shape, lambda b, ch, y, x: wide[b, ch, y, x * sw], name="T_conv2d",
                      inline=False, attrs={OWN_NEST: True})
