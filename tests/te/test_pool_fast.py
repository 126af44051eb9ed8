"""Max pooling over rows of at least a vector: te.fast_max plus a count of the
window's NaNs, and the padding in a copy of its own (te.schedules.pool_max_fast,
pool_window.padded_for_max); the borders the loop ranges decide are not tested per tap
(arith_bound.prove_bounded).

References are independent: numpy windows (np.max propagates NaN) and
onnxruntime's MaxPool.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec import parse
from phasec.pipeline import lower


def _out_size(n, k, s, lo, hi, d, ceil):
    span = n + lo + hi - d * (k - 1) - 1
    q = -(-span // s) if ceil else span // s
    if ceil and q * s >= n + lo:  # the last window must start inside (ONNX, PyTorch)
        q -= 1
    return q + 1


def _max_pool_ref(x, k, s, pads, dil, ceil):
    """NCHW max pooling with numpy: -inf borders, np.max over each window."""
    n, c, h, w = x.shape
    oh = _out_size(h, k[0], s[0], pads[0], pads[2], dil[0], ceil)
    ow = _out_size(w, k[1], s[1], pads[1], pads[3], dil[1], ceil)
    big = np.full((n, c, h + pads[0] + pads[2] + s[0] * 2 + k[0] * dil[0],
                   w + pads[1] + pads[3] + s[1] * 2 + k[1] * dil[1]), -np.inf, x.dtype)
    big[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x
    out = np.empty((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = big[:, :, i * s[0]:i * s[0] + dil[0] * (k[0] - 1) + 1:dil[0],
                      j * s[1]:j * s[1] + dil[1] * (k[1] - 1) + 1:dil[1]]
            out[:, :, i, j] = np.max(win, axis=(2, 3))
    return out


def _build(shape, out_shape, dtype="float32", layout="NCHW", **attrs):
    kw = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v!r}" for k, v in attrs.items())
    src = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({tuple(shape)}, "{dtype}")) -> R.Tensor({tuple(out_shape)}, "{dtype}"):
        y = R.nn.max_pool2d(x, {kw}, layout="{layout}")
        return y
"""
    mod = parse(src)
    return mod, phasec.VirtualMachine(phasec.build(mod))["main"]


def _with_specials(x, rng):
    """NaNs and infinities here and there, corners and borders included."""
    x = x.copy()
    flat = x.reshape(-1)
    n = flat.size
    spots = rng.choice(n, size=max(n // 97, 4), replace=False)
    flat[spots[0::3]] = np.nan
    flat[spots[1::3]] = np.inf
    flat[spots[2::3]] = -np.inf
    x[..., 0, 0] = np.nan
    x[..., -1, -1] = np.nan
    x[..., 0, -1] = -0.0
    return x


CASES = [
    # (shape, pool, strides, padding, dilation, ceil_mode)
    ((1, 3, 55, 55), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),   # SqueezeNet
    ((1, 2, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),  # ResNet-50
    ((2, 3, 41, 38), (3, 3), (2, 2), (0, 2, 1, 0), (1, 1), False),   # uneven padding
    ((1, 2, 40, 43), (3, 2), (1, 2), (1, 0, 1, 1), (2, 1), True),    # dilation, ceil
    ((1, 3, 34, 34), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),   # stride 1
    ((1, 2, 33, 65), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),    # ceil, odd sizes
    ((1, 5, 7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),     # narrow, stride 1
    ((1, 3, 14, 14), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),   # narrow, padded copy
    ((2, 3, 9, 11), (3, 3), (2, 2), (0, 0, 1, 1), (1, 1), False),    # Inception's padding
    ((1, 3, 27, 27), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),   # narrow: te.max
    ((1, 2, 7, 83), (3, 3), (1, 4), (1, 1, 1, 1), (1, 1), False),    # stride 4: fast path
    # ceil_mode windows that reach past the padding
    ((1, 2, 7, 8), (2, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
    ((1, 2, 35, 40), (2, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
    ((1, 2, 36, 41), (3, 3), (2, 3), (0, 1, 0, 1), (2, 1), True),
]


@pytest.mark.parametrize("shape,k,s,pads,dil,ceil", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_matches_numpy_with_nans_and_infs(shape, k, s, pads, dil, ceil, dtype):
    rng = np.random.default_rng(3)
    x = _with_specials(rng.standard_normal(shape).astype(dtype), rng)
    want = _max_pool_ref(x, k, s, pads, dil, ceil)
    _, f = _build(shape, want.shape, dtype, pool_size=k, strides=s, padding=pads,
                  dilation=dil, ceil_mode=ceil)
    got = np.asarray(f(x))
    np.testing.assert_array_equal(got, want)  # NaN where numpy has NaN, bit-equal elsewhere
    assert np.isnan(want).any()  # the case does exercise the NaN count


def test_fast_path_is_taken_where_rows_first_is_not():
    # strided, static: rows first, then columns, whatever the width
    wide, _ = _build((1, 2, 40, 40), (1, 2, 20, 20), pool_size=(3, 3), strides=(2, 2),
                     padding=(1, 1, 1, 1))
    text = lower(wide).script()
    assert "T_max_pool2d_rows" in text and "_nans" not in text
    assert "T.min(" not in text and "T.Select(v_" not in text
    narrow, _ = _build((1, 2, 27, 27), (1, 2, 13, 13), pool_size=(3, 3), strides=(2, 2))
    text = lower(narrow).script()
    assert "_nans" not in text and "pad_temp" not in text
    # no padding: the window is always inside, so no test and no clamp remain
    # (the selects left are the max's and its NaN's, test_pool_rows.py)
    assert "T.Select(v_" not in text and "T.min(" not in text
    # narrow and strided with padding: rows first, then columns, the padding
    # left out of the rows' max and in the columns' buffer (test_pool_rows.py)
    padded, _ = _build((1, 2, 14, 14), (1, 2, 7, 7), pool_size=(3, 3), strides=(2, 2),
                       padding=(1, 1, 1, 1))
    text = lower(padded).script()
    assert "T_max_pool2d_rows" in text and "_nans" not in text and "T.min(" not in text
    # stride 1 along the rows, static: rows first, then columns, too
    stride1, _ = _build((1, 2, 7, 40), (1, 2, 7, 40), pool_size=(3, 3), strides=(1, 1),
                        padding=(1, 1, 1, 1))
    text = lower(stride1).script()
    assert "T_max_pool2d_rows" in text and "_nans" not in text
    # a stride past 3 along rows of a vector or more: the fast path, the taps
    # reading the padded copy (no border test, no clamped index)
    stride4, _ = _build((1, 2, 7, 80), (1, 2, 7, 20), pool_size=(3, 3), strides=(1, 4),
                        padding=(1, 1, 1, 1))
    text = lower(stride4).script()
    assert "_nans" in text and "pad_temp" in text
    assert "T.min(" not in text and "T.Select(v_" not in text


def test_nhwc_wide_rows_match_numpy():
    rng = np.random.default_rng(5)
    x = _with_specials(rng.standard_normal((1, 3, 37, 40)).astype(np.float32), rng)
    want = _max_pool_ref(x, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    _, f = _build(nhwc.shape, want.transpose(0, 2, 3, 1).shape, layout="NHWC",
                  pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    np.testing.assert_array_equal(np.asarray(f(nhwc)), want.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("shape,pads", [((1, 8, 112, 112), 1), ((1, 8, 55, 55), 0),
                                         ((1, 4, 109, 109), 0)])
def test_max_pool_matches_onnxruntime(shape, pads):
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[pads] * 4)
    g = helper.make_graph([node], "p",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    from phasec.frontend.onnx import from_onnx

    got = np.asarray(phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x))
    np.testing.assert_array_equal(got, want)
