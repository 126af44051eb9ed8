"""The mean of a 4-D float tensor over its last two axes (a global average
pooling), built and run whole: its values against numpy on odd and prime
sizes, with and without keepdims, float32 and float64, after a fused
producer (relu; squeeze-excite's SiLU), over a symbolic size and other
axes. (The kernel's one reduce axis over both: test_reduce_narrow_rows.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.script.builder import BlockBuilder

RNG = np.random.default_rng(1329)


def _module(shape, dtype: str, axis, keepdims: bool, relu: bool = False):
    x = Var("x", TensorStructInfo(shape, dtype))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.relu", x)) if relu else x
        bb.emit_func_output(bb.emit(call_op("relax.mean", y, axis=axis, keepdims=keepdims)))
    return bb.get()


@pytest.mark.parametrize("shape,dtype,axis,keepdims,relu", [
    ((1, 37, 13, 13), "float32", [2, 3], True, False),     # SqueezeNet's 1000 x 13 x 13
    ((2, 5, 7, 11), "float32", [-1, -2], False, True),     # after relu (fused: the sum)
    ((3, 17, 1, 19), "float64", [3, 2], True, False),
    ((1, 3, 23, 2), "float32", [2, 3], False, False),
])
def test_spatial_mean(shape, dtype, axis, keepdims, relu):
    mod = _module(shape, dtype, axis, keepdims, relu)
    x = RNG.standard_normal(shape).astype(dtype)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    want = np.mean(np.maximum(x, 0) if relu else x, axis=(2, 3), keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=8 * eps, atol=8 * eps * np.abs(x).max())


def test_a_symbolic_spatial_size_and_other_axes():
    n = tir.Var("n", "int64")
    x = RNG.standard_normal((2, 3, 7, 5)).astype(np.float32)
    for mod, axes in ((_module((2, 3, n, 5), "float32", [2, 3], False), (2, 3)),
                      (_module((2, 3, 7, 5), "float32", [1, 2], False), (1, 2))):
        vm = phasec.VirtualMachine(phasec.build(mod))
        np.testing.assert_allclose(np.asarray(vm["main"](x)), x.mean(axis=axes), rtol=1e-6,
                                   atol=1e-6)


def test_squeeze_excite_mean_of_a_fused_silu():
    """x * mean(s) with s = x * sigmoid(x): the mean's input is computed in
    the kernel that sums it, and stays inlined there."""
    x = Var("x", TensorStructInfo((1, 13, 6, 5), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        s = bb.emit(call_op("relax.multiply", x, bb.emit(call_op("relax.sigmoid", x))))
        m = bb.emit(call_op("relax.mean", s, axis=[2, 3], keepdims=True))
        bb.emit_func_output(bb.emit(call_op("relax.multiply", s, m)))
    mod = bb.get()
    xa = RNG.standard_normal((1, 13, 6, 5)).astype(np.float32)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](xa))
    s = xa / (1 + np.exp(-xa.astype(np.float64)))
    np.testing.assert_allclose(got, s * s.mean(axis=(2, 3), keepdims=True), rtol=1e-5,
                               atol=1e-6)
