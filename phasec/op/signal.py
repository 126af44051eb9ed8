"""Discrete Fourier transforms (ONNX's ``DFT`` and ``STFT``; TVM 0.27 has
none): ``signal.dft`` and ``signal.stft``.

Complex values are stored as ONNX stores them: a last axis of 2 (real,
imaginary), or of 1 for a real signal.

* ``signal.dft(data, axis, n, inverse=False, onesided=False)``: the DFT of
  length ``n`` along ``axis`` (not the last). The signal is cut or padded
  with zeros to ``n``. Forward: ``X[k] = sum_t x[t] e^(-2 pi i k t / n)``,
  ``n // 2 + 1`` bins when ``onesided``. Inverse: ``x[t] = 1/n sum_k X[k]
  e^(+2 pi i k t / n)``; inverse and onesided together is the inverse of a
  one-sided spectrum (numpy's ``irfft``): the first ``n // 2 + 1`` bins are
  read, the others are their conjugates, the result is real (last axis 1).
* ``signal.stft(data, window, frame_step, onesided=True)``: ``data`` is
  ``[batch, length, 1 or 2]``, ``window`` ``[frame_length]``; frame ``f``
  is ``data[:, f * frame_step : f * frame_step + frame_length]`` times the
  window, and its DFT of length ``frame_length``. Output ``[batch, frames,
  bins, 2]``, ``frames = (length - frame_length) // frame_step + 1``.

The kernels are direct sums (no FFT): every term in float64 with the angle
``2 pi ((k t) mod n) / n`` from exact integers, so a float32 result is the
correctly rounded transform for the sizes models use (speech front ends:
frames of 256 to 2048 samples); cost O(n^2) per transform.
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, IntImm, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_bool, as_int, attrs_of, define, err, tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _const, _out, _tensor, legalizes
from phasec.op.draw import declares_draw

__all__: list[str] = []

F64 = "float64"


def _i64(v: int) -> IntImm:
    return IntImm(int(v), "int64")


def _check_complex(call, data: TensorStructInfo, what: str = "data") -> None:
    if data.dtype != "void" and not data.dtype.startswith("float"):
        raise err(call, f"{call.op.name.removeprefix('relax.')} computes in floating point, but "
                        f"the {what} is {data.dtype}")
    if data.shape is not None:
        last = arith.const_int(data.shape[-1]) if data.shape else None
        if not data.shape or (last is not None and last not in (1, 2)):
            raise err(call, f"the {what}'s last axis holds (real[, imaginary]) and must be 1 or "
                            f"2, but the shape is {tuple(map(str, data.shape))}")


# ---------------------------------------------------------------------------
# dft
# ---------------------------------------------------------------------------

def _dft_bins(n: int, inverse: bool, onesided: bool) -> int:
    return n // 2 + 1 if onesided and not inverse else n


def _infer_dft(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    n, axis = a["n"], a["axis"]
    if n < 1:
        raise err(call, f"dft needs a length n >= 1, got {n}")
    _check_complex(call, data)
    if data.ndim != -1 and not 0 <= axis < data.ndim - 1:
        raise err(call, f"dft axis {axis} is out of range for a {data.ndim}-D signal (the last "
                        f"axis holds the real and imaginary parts)")
    last = 1 if a["inverse"] and a["onesided"] else 2
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, data.ndim)
    shape = list(data.shape)
    shape[axis] = _i64(_dft_bins(n, a["inverse"], a["onesided"]))
    shape[-1] = _i64(last)
    return tensor_sinfo(shape, data.dtype)


def _as_complex(x: np.ndarray) -> np.ndarray:
    return x[..., 0].astype(np.complex128) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)


def _dft_ref(data, axis, n, inverse=False, onesided=False):
    x = np.asarray(data)
    z = _as_complex(x)
    if inverse and onesided:
        out = np.fft.irfft(z, n=n, axis=axis)[..., None]
    else:
        out = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
        if onesided:
            out = np.take(out, np.arange(n // 2 + 1), axis=axis)
        out = np.stack([out.real, out.imag], axis=-1)
    return out.astype(x.dtype)


define("signal.dft", ("data",), _infer_dft,
       attrs={"axis": (1, as_int), "n": (1, as_int), "inverse": (False, as_bool),
              "onesided": (False, as_bool)},
       reference=_dft_ref, pattern=OpPattern.OPAQUE,
       doc="The discrete Fourier transform of length n along an axis (ONNX's DFT).")


def _angle(k: PrimExpr, t: PrimExpr, n: int) -> PrimExpr:
    """2 pi ((k t) mod n) / n in float64, from exact integers."""
    km = BinaryOp("%", BinaryOp("*", k, t), _i64(n))
    return BinaryOp("*", Cast(F64, km), _const(2.0 * math.pi / n, F64))


def _parts(x, idx: list[PrimExpr], complex_in: bool) -> tuple[PrimExpr, PrimExpr]:
    """(real, imaginary) of ``x[idx]`` in float64."""
    re = Cast(F64, x[(*idx, _i64(0))])
    im = Cast(F64, x[(*idx, _i64(1))]) if complex_in else _const(0.0, F64)
    return re, im


def _finish(acc, out, scale: float):
    return te.compute(out.shape, lambda *i: Cast(out.dtype, BinaryOp(
        "*", acc[i], _const(scale, F64))) if scale != 1.0 else Cast(out.dtype, acc[i]),
        name="T_dft")


@legalizes("signal.dft")
def _dft_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    axis, n, inverse, onesided = a["axis"], a["n"], a["inverse"], a["onesided"]
    complex_in = arith.const_int(x.shape[-1]) == 2
    length = x.shape[axis]
    sign = -1.0 if inverse else 1.0
    if inverse and onesided:
        # irfft: bin k of the full spectrum is X[k] for k <= n/2, else conj(X[n - k])
        r = te.reduce_axis(n, "rk")
        half = _i64(n // 2)

        def real_sum(*i):
            k = r.var
            mirrored = BinaryOp(">", k, half)
            j = Select(mirrored, BinaryOp("-", _i64(n), k), k)
            inside = BinaryOp("<", j, length)
            idx = list(i[:-1])
            idx[axis] = te.clamp_index(j, length)
            re, im = _parts(x, idx, complex_in)
            im = Select(mirrored, BinaryOp("-", _const(0.0, F64), im), im)
            th = _angle(k, i[axis], n)
            term = BinaryOp("-", BinaryOp("*", re, te.call("cos", th)),
                            BinaryOp("*", im, te.call("sin", th)))
            return te.sum(Select(inside, term, _const(0.0, F64)), axis=[r])
        acc = te.compute(out.shape, real_sum, name="T_dft_sum")
        return _finish(acc, out, 1.0 / n)
    m = arith.simplify(BinaryOp("min", length, _i64(n)))
    r = te.reduce_axis(m, "rt")

    def total(*i):
        t = r.var
        idx = list(i[:-1])
        idx[axis] = t
        re, im = _parts(x, idx, complex_in)
        th = _angle(i[axis], t, n)
        c, s = te.call("cos", th), te.call("sin", th)
        # forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin)
        real = BinaryOp("+", BinaryOp("*", re, c), BinaryOp("*", _const(sign, F64),
                                                             BinaryOp("*", im, s)))
        imag = BinaryOp("-", BinaryOp("*", im, c), BinaryOp("*", _const(sign, F64),
                                                            BinaryOp("*", re, s)))
        return te.sum(Select(BinaryOp("==", i[-1], _i64(0)), real, imag), axis=[r])
    acc = te.compute(out.shape, total, name="T_dft_sum")
    return _finish(acc, out, 1.0 / n if inverse else 1.0)


def _draw_dft(ctx):
    rank = len(ctx.shape)
    axis = ctx.integers(0, rank - 2)
    n = ctx.integers(1, 6)
    inverse = ctx.choose([False, True])
    onesided = ctx.choose([False, True])
    # |X[k]| <= n * max|x| * sqrt(2)
    bound = 2.0 * max(n, ctx.shape[axis]) * ctx.mag
    ctx.result_in(-bound, bound)
    return (ctx.x,), {"axis": axis, "n": n, "inverse": inverse, "onesided": onesided}


declares_draw("signal.dft", ranks=(2, 3, 4), build=_draw_dft, fits=lambda s: s[-1] in (1, 2),
              shape=lambda pick: (pick([1, 2]), pick([3, 4, 5]), pick([1, 2])), out="same")


# ---------------------------------------------------------------------------
# stft
# ---------------------------------------------------------------------------

def _frames(length: int, frame_length: int, step: int) -> int:
    return (length - frame_length) // step + 1


def _infer_stft(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    window = tensor_arg(call, 1, ctx, "window")
    a = attrs_of(call)
    step = a["frame_step"]
    if step < 1:
        raise err(call, f"stft needs a frame_step >= 1, got {step}")
    _check_complex(call, data)
    if data.ndim not in (-1, 3):
        raise err(call, f"stft expects a [batch, length, 1 or 2] signal, but it has ndim "
                        f"{data.ndim}")
    if window.ndim not in (-1, 1):
        raise err(call, f"stft expects a 1-D window, but it has ndim {window.ndim}")
    if window.dtype not in ("void", data.dtype):
        raise err(call, f"stft's window is {window.dtype} but the signal is {data.dtype}")
    if data.shape is None or window.shape is None:
        return TensorStructInfo(None, data.dtype, 4)
    fl = arith.const_int(window.shape[0])
    length = arith.const_int(data.shape[1])
    if fl is None or length is None:
        raise err(call, "stft needs a static signal length and frame length")
    if fl < 1 or fl > length:
        raise err(call, f"stft's frame length {fl} must be between 1 and the signal length "
                        f"{length}")
    bins = fl // 2 + 1 if a["onesided"] else fl
    return tensor_sinfo((data.shape[0], _i64(_frames(length, fl, step)), _i64(bins), _i64(2)),
                        data.dtype)


def _stft_ref(data, window, frame_step, onesided=True):
    x = np.asarray(data)
    w = np.asarray(window).astype(np.complex128)
    fl = w.shape[0]
    z = _as_complex(x)
    frames = _frames(z.shape[1], fl, frame_step)
    spec = np.stack([np.fft.fft(z[:, f * frame_step:f * frame_step + fl] * w, axis=-1)
                     for f in range(frames)], axis=1)
    if onesided:
        spec = spec[..., :fl // 2 + 1]
    return np.stack([spec.real, spec.imag], axis=-1).astype(x.dtype)


define("signal.stft", ("data", "window"), _infer_stft,
       attrs={"frame_step": (1, as_int), "onesided": (True, as_bool)},
       reference=_stft_ref, pattern=OpPattern.OPAQUE,
       doc="The short-time Fourier transform of windowed frames (ONNX's STFT).")


@legalizes("signal.stft")
def _stft_te(call, inputs):
    x = _tensor(inputs, 0, call)
    w = _tensor(inputs, 1, call)
    out = _out(call)
    step = attrs_of(call)["frame_step"]
    fl = arith.const_int(w.shape[0])
    complex_in = arith.const_int(x.shape[-1]) == 2
    r = te.reduce_axis(fl, "rt")

    def total(b, f, k, c):
        t = r.var
        pos = BinaryOp("+", BinaryOp("*", f, _i64(step)), t)
        re, im = _parts(x, [b, pos], complex_in)
        wt = Cast(F64, w[t])
        th = _angle(k, t, fl)
        cos, sin = te.call("cos", th), te.call("sin", th)
        real = BinaryOp("+", BinaryOp("*", re, cos), BinaryOp("*", im, sin))
        imag = BinaryOp("-", BinaryOp("*", im, cos), BinaryOp("*", re, sin))
        return te.sum(BinaryOp("*", wt, Select(BinaryOp("==", c, _i64(0)), real, imag)),
                      axis=[r])
    acc = te.compute(out.shape, total, name="T_stft_sum")
    return te.compute(out.shape, lambda *i: Cast(out.dtype, acc[i]), name="T_stft")


def _draw_stft(ctx):
    length = ctx.shape[1]
    fl = ctx.integers(1, length)
    window = ctx.const((fl,), -1.0, 1.0, ctx.dtype)
    ctx.result_in(-2.0 * fl * ctx.mag, 2.0 * fl * ctx.mag)
    return (ctx.x, window), {"frame_step": ctx.integers(1, 3),
                             "onesided": ctx.choose([True, False])}


declares_draw("signal.stft", ranks=(3,), build=_draw_stft, fits=lambda s: s[-1] in (1, 2),
              shape=lambda pick: (pick([1, 2]), pick([4, 6, 7]), pick([1, 2])), out="same")
