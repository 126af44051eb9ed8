"""ONNX DFT, STFT and MelWeightMatrix (phasec/frontend/onnx/ops_signal.py):
one graph of their variants compiled once, against ONNX Runtime and
numpy.fft; what the converters refuse."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from phasec.frontend.errors import UnsupportedModelError
from phasec.frontend.onnx import from_onnx

from helpers.onnx_run import run_both

I64 = np.int64


def _scalar(name, v, dtype=I64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.array(v, dtype), name))


def _spectrum(y):
    return y[..., 0] + 1j * y[..., 1]


def test_signal_operators_against_onnxruntime_and_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 12, 1)).astype(np.float32)
    z = rng.standard_normal((2, 7, 3, 2)).astype(np.float32)
    nodes = [
        _scalar("n16", 16), _scalar("ax1", 1), _scalar("n6", 6), _scalar("ax_2", -2),
        _scalar("step", 4), _scalar("fl", 8),
        helper.make_node("DFT", ["x", "", "ax1"], ["fwd"]),
        helper.make_node("DFT", ["x", "n16", "ax1"], ["rfft"], onesided=1),
        helper.make_node("DFT", ["z", "n6", "ax_2"], ["ifft"], inverse=1),
        helper.make_node("DFT", ["z", "", "ax1"], ["zfwd"]),
        helper.make_node("HannWindow", ["fl"], ["win"]),
        helper.make_node("STFT", ["x", "step", "win"], ["spec"]),
        helper.make_node("STFT", ["x", "step", "", "fl"], ["spec_rect"], onesided=0),
        helper.make_node("MelWeightMatrix", ["fl", "n16", "rate", "lo", "hi"], ["mel"]),
    ]
    inits = {"rate": np.array(8000, I64), "lo": np.array(100.0, np.float32),
             "hi": np.array(3500.0, np.float32)}
    outs = ["fwd", "rfft", "ifft", "zfwd", "spec", "spec_rect", "mel"]
    got, want = run_both(nodes, {"x": x, "z": z}, {o: "float32" for o in outs}, inits=inits,
                         opset=20)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        # ONNX Runtime's float32 FFT rounds to about 1e-6 of the magnitude
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()))
    x64, z64 = x[..., 0].astype(np.float64), _spectrum(z.astype(np.float64))
    exact = [np.fft.fft(x64, axis=1), np.fft.rfft(x64, n=16, axis=1),
             np.fft.ifft(z64, n=6, axis=2), np.fft.fft(z64, axis=1)]
    for g, w in zip(got, exact):
        np.testing.assert_allclose(_spectrum(g), w, rtol=1e-5, atol=1e-5)
    hann = np.sin(np.pi * np.arange(8) / 8) ** 2
    frames = [np.fft.rfft(x64[:, f * 4:f * 4 + 8] * hann, axis=1) for f in range(2)]
    np.testing.assert_allclose(_spectrum(got[4]), np.stack(frames, 1), rtol=1e-5, atol=1e-5)


def test_what_the_converters_refuse():
    def model(node, shape, scalars=None):
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=[numpy_helper.from_array(np.array(v, I64), k)
                         for k, v in (scalars or {}).items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match="frames of 8 samples in a signal of 4"):
        from_onnx(model(helper.make_node("STFT", ["x", "s", "", "l"], ["y"]), [2, 4, 1],
                        {"s": 1, "l": 8}))
    with pytest.raises(UnsupportedModelError, match="symbolic axis"):
        from_onnx(model(helper.make_node("DFT", ["x"], ["y"], axis=1), [2, "n", 2]))
