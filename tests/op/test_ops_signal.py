"""signal.dft and signal.stft (phasec/op/signal.py): results on the
interpreter (the numpy reference) and compiled by LLVM, against the DFT
written out as a matrix product (an independent formula) and numpy.fft;
inference and its errors."""

from __future__ import annotations

import numpy as np

import phasec
from phasec.interp import run as interp_run
from phasec.ir import tir
from phasec.op import call_op

from helpers.op_infer import S, raises, tv

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 5, 3, 1), "float32"), z: R.Tensor((2, 5, 3, 2), "float32"),
             s: R.Tensor((2, 11, 1), "float32"), w: R.Tensor((4,), "float32"),
             sz: R.Tensor((1, 9, 2), "float32")):
        a = R.signal.dft(x, axis=1, n=5, inverse=False, onesided=False)
        b = R.signal.dft(x, axis=1, n=7, inverse=False, onesided=True)
        c = R.signal.dft(z, axis=2, n=2, inverse=True, onesided=False)
        d = R.signal.dft(z, axis=1, n=6, inverse=True, onesided=True)
        e = R.signal.dft(z, axis=0, n=3, inverse=False, onesided=False)
        f = R.signal.stft(s, w, frame_step=3, onesided=True)
        g = R.signal.stft(sz, w, frame_step=2, onesided=False)
        return (a, b, c, d, e, f, g)
'''


def _matrix(n: int, inverse: bool) -> np.ndarray:
    k = np.arange(n)
    sign = 1.0 if inverse else -1.0
    return np.exp(sign * 2j * np.pi * np.outer(k, k) / n) / (n if inverse else 1)


def _complex(x):
    return x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)


def _dft(x, axis, n, inverse=False, onesided=False):
    """The DFT as a matrix product along ``axis`` (cut or zero-padded to n)."""
    z = np.moveaxis(_complex(x.astype(np.float64)), axis, -1)
    z = np.concatenate([z, np.zeros(z.shape[:-1] + (max(0, n - z.shape[-1]),))], -1)[..., :n]
    if inverse and onesided:  # the full spectrum from its first half, conjugate-symmetric
        half = z[..., :n // 2 + 1].copy()
        half[..., 0] = half[..., 0].real
        full = np.zeros(z.shape[:-1] + (n,), complex)
        full[..., :n // 2 + 1] = half
        full[..., n // 2 + 1:] = np.conj(half[..., 1:(n + 1) // 2][..., ::-1])
        if n % 2 == 0:
            full[..., n // 2] = half[..., n // 2].real
        out = (full @ _matrix(n, True).T).real[..., None]
        return np.moveaxis(out, -2, axis)
    out = z @ _matrix(n, inverse).T
    if onesided:
        out = out[..., :n // 2 + 1]
    return np.moveaxis(np.stack([out.real, out.imag], -1), -2, axis)


def _stft(x, w, step, onesided):
    fl = len(w)
    z = _complex(x.astype(np.float64))
    frames = (z.shape[1] - fl) // step + 1
    spec = np.stack([(z[:, f * step:f * step + fl] * w) @ _matrix(fl, False).T
                     for f in range(frames)], 1)
    if onesided:
        spec = spec[..., :fl // 2 + 1]
    return np.stack([spec.real, spec.imag], -1)


def test_results_against_the_dft_matrix():
    rng = np.random.default_rng(0)
    x, z = (rng.standard_normal(s).astype("float32") for s in ((2, 5, 3, 1), (2, 5, 3, 2)))
    s, w, sz = (rng.standard_normal(s).astype("float32") for s in ((2, 11, 1), (4,), (1, 9, 2)))
    want = [_dft(x, 1, 5), _dft(x, 1, 7, onesided=True), _dft(z, 2, 2, inverse=True),
            _dft(z, 1, 6, inverse=True, onesided=True), _dft(z, 0, 3),
            _stft(s, w, 3, True), _stft(sz, w, 2, False)]
    # numpy.fft agrees with the matrix products (numpy's irfft ignores the
    # imaginary parts of bins 0 and n/2, as the conjugate-symmetric spectrum does)
    np.testing.assert_allclose(want[3][..., 0], np.fft.irfft(_complex(z.astype(np.float64)), n=6, axis=1),
                               atol=1e-9)
    np.testing.assert_allclose(want[1][..., 0] + 1j * want[1][..., 1],
                               np.fft.rfft(x[..., 0].astype(np.float64), n=7, axis=1), atol=1e-9)
    mod = phasec.parse(SOURCE)
    inputs = (x, z, s, w, sz)
    for got in (interp_run(mod, *inputs), phasec.VirtualMachine(phasec.build(mod))["main"](*inputs)):
        for g, e in zip(got, want):
            g = np.asarray(g)
            assert g.dtype == np.float32 and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_inference_and_errors():
    x = tv("x", (2, 5, 3, 1))
    assert S(call_op("signal.dft", x, axis=1, n=8, onesided=True)) == \
        'R.Tensor((2, 5, 3, 2), dtype="float32")'
    assert S(call_op("signal.dft", tv("z", (2, 5, 2)), axis=1, n=8, inverse=True,
                     onesided=True)) == 'R.Tensor((2, 8, 1), dtype="float32")'
    n = tir.Var("n")
    assert S(call_op("signal.dft", tv("s", (n, 5, 2)), axis=1, n=4)) == \
        'R.Tensor((n, 4, 2), dtype="float32")'
    raises(["axis 3 is out of range"], call_op, "signal.dft", x, axis=3, n=4)
    raises(["must be 1 or 2"], call_op, "signal.dft", tv("y", (2, 5, 3)), axis=1, n=4)
    raises(["n >= 1"], call_op, "signal.dft", x, axis=1, n=0)
    raises(["floating point"], call_op, "signal.dft", tv("i", (2, 5, 1), "int32"), axis=1, n=4)
    s, w = tv("s", (2, 11, 1)), tv("w", (4,))
    assert S(call_op("signal.stft", s, w, frame_step=3)) == \
        'R.Tensor((2, 3, 3, 2), dtype="float32")'
    raises(["frame_step >= 1"], call_op, "signal.stft", s, w, frame_step=0)
    raises(["frame length 12"], call_op, "signal.stft", s, tv("w", (12,)), frame_step=1)
    raises(["1-D window"], call_op, "signal.stft", s, tv("w", (2, 2)), frame_step=1)
