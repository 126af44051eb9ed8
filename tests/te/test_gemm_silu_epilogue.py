"""A convolution's SiLU epilogue in the GEMM register tile, which the code
generator emits as one quotient ``x / (1 + exp(-x))``
(``phasec.siluf``), against a float64 numpy formula: odd and prime channel
counts and positions (the tile's remainder rows and columns), a symbolic
batch; and with a residual added after the SiLU, where the product stays
(a multiply-add with the residual)."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder

RNG = np.random.default_rng(41)


def _module(xs, w: np.ndarray, bias: np.ndarray, residual: bool):
    x = Var("x", TensorStructInfo(xs, "float32"))
    params = [x]
    if residual:
        params.append(Var("r", TensorStructInfo((xs[0], w.shape[0], xs[2], xs[3]), "float32")))
    bb = BlockBuilder()
    with bb.function("main", params):
        y = bb.emit(call_op("relax.add", bb.emit(call_op("relax.nn.conv2d", x, Constant(w))),
                            Constant(bias)))
        y = bb.emit(call_op("relax.multiply", y, bb.emit(call_op("relax.sigmoid", y))))
        if residual:
            y = bb.emit(call_op("relax.add", y, params[-1]))
        bb.emit_func_output(y)
    return bb.get()


@pytest.mark.parametrize("xs,out_ch,residual", [
    ((1, 13, 17, 29), 37, False),   # primes: remainder rows and columns of the tile
    ((1, 16, 9, 32), 96, True),     # whole vectors, a residual added after the SiLU
])
def test_silu_epilogue_matches_the_formula(xs, out_ch, residual):
    c = xs[1]
    w = (RNG.standard_normal((out_ch, c, 1, 1)) * 2 / np.sqrt(c)).astype(np.float32)
    bias = RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32)
    mod = _module(xs, w, bias, residual)
    lib = compile_prim_funcs(dict(lower(mod).prim_funcs()))
    # (SiLU + residual: the product is a multiply-add with the residual instead)
    assert ("@phasec.siluf" in lib.llvm_ir) != residual
    x = (RNG.standard_normal(xs) * 3).astype(np.float32)
    args = [x]
    pre = np.einsum("oc,bchw->bohw", w[:, :, 0, 0].astype(np.float64), x) + bias
    want = pre / (1 + np.exp(-pre))
    if residual:
        r = RNG.standard_normal(want.shape).astype(np.float32)
        args.append(r)
        want = want + r
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](*args))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_silu_epilogue_with_a_symbolic_batch():
    n = tir.Var("n", "int64")
    w = (RNG.standard_normal((23, 7, 1, 1)) / np.sqrt(7)).astype(np.float32)
    bias = RNG.standard_normal((1, 23, 1, 1)).astype(np.float32)
    vm = phasec.VirtualMachine(phasec.build(_module((n, 7, 5, 19), w, bias, False)))
    for batch in (1, 3):
        x = (RNG.standard_normal((batch, 7, 5, 19)) * 3).astype(np.float32)
        pre = np.einsum("oc,bchw->bohw", w[:, :, 0, 0].astype(np.float64), x) + bias
        np.testing.assert_allclose(np.asarray(vm["main"](x)), pre / (1 + np.exp(-pre)),
                                   rtol=1e-5, atol=1e-5)
