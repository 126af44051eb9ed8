"""Converters of ONNX's signal operators: DFT, STFT, MelWeightMatrix.

DFT and STFT become ``R.signal.dft`` / ``R.signal.stft`` (compiled direct
sums, :mod:`phasec.op.signal`). Their lengths and steps decide shapes, so
they must be known at import (constants, initializers, or graph inputs the
backend binds). MelWeightMatrix's inputs are all such scalars: its matrix is
computed at import, a constant of the graph.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._dtypes import onnx_dtype
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_tensor import norm_axis

__all__: list[str] = []


def _positive(ctx: NodeContext, i: int, what: str) -> int:
    v = ctx.const_scalar(i, what)
    if not float(v).is_integer() or int(v) < 1:
        raise Unsupported(f"{what} must be a positive integer, got {v}")
    return int(v)


@converter("DFT", since=17)
def _dft(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    ndim = ctx.ndim(x)
    if ctx.opset >= 20:
        axis = int(ctx.const_scalar(2, "axis")) if ctx.has(2) else -2
    else:
        axis = ctx.attr("axis", 1)
    axis = norm_axis(ctx, axis, ndim)
    if axis == ndim - 1:
        raise Unsupported("axis is the last axis (it holds the real and imaginary parts)")
    inverse = ctx.attr("inverse", 0) == 1
    onesided = ctx.attr("onesided", 0) == 1
    length = ctx.shape(x)[axis]
    if ctx.has(1):
        n = _positive(ctx, 1, "dft_length")
    elif not isinstance(length, int):
        raise Unsupported(f"a DFT along a symbolic axis ({length}) without dft_length")
    else:
        n = 2 * (length - 1) if inverse and onesided else length
        if n < 1:
            raise Unsupported(f"a DFT of length {n}")
    last = ctx.shape(x)[-1]
    if last not in (1, 2):
        raise Unsupported(f"the last axis holds (real[, imaginary]) and must be 1 or 2, got "
                          f"{last}")
    if onesided and not inverse and last == 2:
        # ONNX: a one-sided forward DFT is of a real signal
        raise Unsupported("onesided=1 with a complex input")
    return ctx.emit("signal.dft", x, axis=axis, n=n, inverse=inverse, onesided=onesided)


@converter("STFT", since=17)
def _stft(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.static_shape(x, "STFT's signal")
    if len(dims) != 3 or dims[2] not in (1, 2):
        raise Unsupported(f"a signal of shape {tuple(dims)} (ONNX: [batch, length, 1 or 2])")
    step = _positive(ctx, 1, "frame_step")
    dtype = ctx.dtype(x)
    window = ctx.optional(2)
    if window is not None:
        (wlen,) = ctx.static_shape(window, "STFT's window")
        if ctx.has(3) and _positive(ctx, 3, "frame_length") != wlen:
            raise Unsupported(f"frame_length {ctx.const_scalar(3)} differs from the window's "
                              f"{wlen} samples")
    else:
        wlen = _positive(ctx, 3, "frame_length") if ctx.has(3) else dims[1]
        window = np.ones(wlen, dtype)
    if wlen > dims[1]:
        raise Unsupported(f"frames of {wlen} samples in a signal of {dims[1]}")
    onesided = ctx.attr("onesided", 1) == 1
    if onesided and dims[2] == 2:
        raise Unsupported("onesided=1 with a complex signal")
    return ctx.emit("signal.stft", x, window, frame_step=step, onesided=onesided)


def mel_weight_matrix(bins: int, dft_length: int, rate: int, lower: float, upper: float,
                      dtype: str) -> np.ndarray:
    """ONNX MelWeightMatrix: ``[dft_length // 2 + 1, bins]`` triangular filters.

    As the ONNX definition computes them: ``bins + 2`` points spaced by
    ``(mel(upper) - mel(lower)) / (bins + 2)`` from ``mel(lower)`` (so the
    last point is short of ``upper``), each turned back into Hz and into a
    whole DFT bin ``floor((dft_length + 1) * hz / rate)``; filter ``m``
    rises linearly from point ``m`` to 1 at point ``m + 1`` and falls to 0
    at point ``m + 2``. Bins past the spectrogram are left out."""
    spectrogram = dft_length // 2 + 1
    mel_lo = 2595.0 * np.log10(1.0 + lower / 700.0)
    mel_hi = 2595.0 * np.log10(1.0 + upper / 700.0)
    mels = mel_lo + np.arange(bins + 2) * ((mel_hi - mel_lo) / (bins + 2))
    hz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    points = np.floor((dft_length + 1) * hz / rate).astype(np.int64)
    out = np.zeros((spectrogram, bins), np.float64)

    def put(k: int, m: int, v: float) -> None:
        if 0 <= k < spectrogram:
            out[k, m] = v
    for m in range(bins):
        lo, mid, hi = (int(p) for p in points[m:m + 3])
        if mid == lo:
            put(mid, m, 1.0)
        for k in range(lo, mid + 1 if mid > lo else lo):
            put(k, m, (k - lo) / (mid - lo))
        for k in range(mid, hi):
            put(k, m, (hi - k) / (hi - mid))
    return out.astype(dtype)


@converter("MelWeightMatrix", since=17)
def _mel(ctx: NodeContext) -> Value:
    bins = _positive(ctx, 0, "num_mel_bins")
    dft_length = _positive(ctx, 1, "dft_length")
    rate = _positive(ctx, 2, "sample_rate")
    lower = float(ctx.const_scalar(3, "lower_edge_hertz"))
    upper = float(ctx.const_scalar(4, "upper_edge_hertz"))
    if not 0.0 <= lower < upper:
        raise Unsupported(f"mel edges {lower} .. {upper} Hz (need 0 <= lower < upper)")
    dtype = onnx_dtype(ctx.attr("output_datatype", 1))
    return mel_weight_matrix(bins, dft_length, rate, lower, upper, dtype)
