"""A conv2d one column wide (``K x 1`` over ``N x 1``, tf2onnx's 1-D
convolution) computed in its row form (``te.schedules.conv_column``: the
same tensors read with H and W swapped, the GEMM over the rows, written
back). The values against numpy's reference convolution on LLVM and on the
TIR interpreter, with bias and relu fused, for padding, strides, dilation,
groups, a channels-last layout, prime sizes and a symbolic batch and
length; and that the GEMM runs over the rows (not one element at a time)."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused

from helpers.legalize import check_depthwise, fused, tvar, walk

RNG = np.random.default_rng(31)


def _bias_shape(o, attrs):
    return (1, 1, 1, o) if attrs.get("data_layout") == "NHWC" else (1, o, 1, 1)


def _conv_bias_relu(xs, ws, o, **attrs):
    d, w, b = tvar("d", xs), tvar("w", ws), tvar("b", _bias_shape(o, attrs))
    return lower_fused(fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, w, **attrs)), b)))))


def _want(x, w, b, attrs):
    return np.maximum(get_op("relax.nn.conv2d").reference(x, w, **attrs) + b, 0)


CASES = {  # (data shape, weight shape, attrs)
    "9x1_pad4": ((1, 5, 37, 1), (7, 5, 9, 1), {"padding": (4, 0, 4, 0)}),
    "stride2_dilation2_uneven": ((2, 3, 29, 1), (4, 3, 3, 1),
                                 {"padding": (2, 0, 1, 0), "strides": (2, 1),
                                  "dilation": (2, 1)}),
    "groups": ((1, 6, 17, 1), (9, 2, 5, 1), {"padding": (2, 0, 2, 0), "groups": 3}),
    "nhwc": ((1, 23, 1, 3), (4, 3, 3, 1), {"padding": (1, 0, 1, 0), "data_layout": "NHWC"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_column_conv_matches_numpy(name):
    xs, ws, attrs = CASES[name]
    low = _conv_bias_relu(xs, ws, ws[0], **attrs)
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal(ws).astype("float32")
    b = RNG.standard_normal(_bias_shape(ws[0], attrs)).astype("float32")
    check_depthwise(low.prim_func, x, w, b, _want(x, w, b, attrs), name in ("9x1_pad4", "groups"))


def test_the_rows_run_in_the_gemm_tiles():
    """16 -> 16 channels over 64 rows: register tiles of vectors along the
    rows (a vectorized loop over the length), not a scalar per element."""
    low = _conv_bias_relu((1, 16, 64, 1), (16, 16, 3, 1), 16, padding=(1, 0, 1, 0))
    assert any(isinstance(s, tir.Allocate) and s.buffer.name.endswith("_acc")
               for s in walk(low.prim_func.body))


def test_symbolic_batch_and_length():
    n, h = tir.Var("n"), tir.Var("h")
    low = _conv_bias_relu((n, 4, h, 1), (5, 4, 3, 1), 5, padding=(1, 0, 1, 0))
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch, length in ((1, 7), (2, 41)):
        x = RNG.standard_normal((batch, 4, length, 1)).astype("float32")
        w = RNG.standard_normal((5, 4, 3, 1)).astype("float32")
        b = RNG.standard_normal((1, 5, 1, 1)).astype("float32")
        want = _want(x, w, b, {"padding": (1, 0, 1, 0)})
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
