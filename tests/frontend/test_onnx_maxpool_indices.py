"""ONNX MaxPool's Indices output (phasec/frontend/onnx/ops_nn.py over
R.nn.onnx_max_pool_indices): row- and column-major storage orders, pads,
strides, dilations, ceil_mode, 1-D to 3-D windows, ties; and MaxUnpool
putting the maxima back; against ONNX Runtime."""

from __future__ import annotations

import numpy as np
from onnx import helper

from helpers.onnx_run import run_both

_CASES = [  # (input, attributes)
    ("x", dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 1], storage_order=1)),
    ("x", dict(kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1], ceil_mode=1)),
    ("x", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER", storage_order=0)),
    ("t", dict(kernel_shape=[2, 2], pads=[0, 1, 1, 0])),  # ties: the first maximum
    ("v", dict(kernel_shape=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1], strides=[1, 2, 2])),
    ("w", dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
]


def test_max_pool_indices_against_onnxruntime():
    rng = np.random.default_rng(21)
    feeds = {"x": rng.standard_normal((2, 3, 7, 6)).astype(np.float32),
             "t": rng.integers(0, 3, (1, 2, 5, 5)).astype(np.float32),
             "v": rng.standard_normal((1, 2, 3, 5, 4)).astype(np.float32),
             "w": rng.standard_normal((3, 2, 9)).astype(np.float32)}
    nodes, outs = [], {}
    for k, (src, attrs) in enumerate(_CASES):
        nodes.append(helper.make_node("MaxPool", [src], [f"y{k}", f"i{k}"], **attrs))
        outs[f"y{k}"], outs[f"i{k}"] = "float32", "int64"
    got, want = run_both(nodes, feeds, outs, opset=12)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (k // 2, _CASES[k // 2])
        np.testing.assert_array_equal(g, w, err_msg=str(_CASES[k // 2]))


def test_max_unpool_inverts_max_pool_against_onnxruntime():
    # MaxPool's values and indices into MaxUnpool: the maxima back in place, zeros elsewhere
    rng = np.random.default_rng(22)
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 4, 6, 4)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 3], strides=[2, 3],
                              pads=[0, 1, 0, 0]),
             helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 3],
                              strides=[2, 3], pads=[0, 1, 0, 0]),
             helper.make_node("MaxPool", ["v"], ["q", "j"], kernel_shape=[2, 2, 2],
                              strides=[2, 2, 2]),
             helper.make_node("MaxUnpool", ["q", "j"], ["z"], kernel_shape=[2, 2, 2],
                              strides=[2, 2, 2])]
    got, want = run_both(nodes, {"x": x, "v": v}, {"y": "float32", "z": "float32"}, opset=12)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)
