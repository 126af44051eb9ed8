"""ONNX GridSample, AffineGrid, Col2Im and DeformConv
(phasec/frontend/onnx/ops_image.py): 2-D and 3-D grids, each mode and
padding, compiled in one graph; Col2Im with strides, dilations and pads;
DeformConv with groups, offset groups, a mask and a bias; against ONNX
Runtime."""

from __future__ import annotations

import numpy as np
from onnx import helper

from helpers.onnx_run import run_both


def test_grid_sample_against_onnxruntime():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = rng.uniform(-1.3, 1.3, (2, 4, 3, 2)).astype(np.float32)
    v = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    g3 = rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)
    combos = [("linear", "zeros", 0), ("nearest", "border", 1), ("cubic", "reflection", 0),
              ("cubic", "border", 1), ("linear", "reflection", 1)]
    nodes = [helper.make_node("GridSample", ["x", "g"], [f"y{k}"], mode=m, padding_mode=p,
                              align_corners=a) for k, (m, p, a) in enumerate(combos)]
    nodes += [helper.make_node("GridSample", ["v", "g3"], ["z0"], mode="linear",
                               padding_mode="border"),
              helper.make_node("GridSample", ["v", "g3"], ["z1"], mode="nearest",
                               align_corners=1)]
    outs = {f"y{k}": "float32" for k in range(len(combos))} | {"z0": "float32", "z1": "float32"}
    got, want = run_both(nodes, {"x": x, "g": g, "v": v, "g3": g3}, outs, opset=20)
    for gt, w in zip(got, want):
        assert gt.shape == w.shape
        np.testing.assert_allclose(gt, w, rtol=1e-5, atol=1e-5)


def test_affine_grid_against_onnxruntime():
    rng = np.random.default_rng(6)
    t2 = rng.standard_normal((2, 2, 3)).astype(np.float32)
    t3 = rng.standard_normal((1, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("AffineGrid", ["t2", "s2"], ["a"]),
             helper.make_node("AffineGrid", ["t2", "s2"], ["b"], align_corners=1),
             helper.make_node("AffineGrid", ["t3", "s3"], ["c"], align_corners=1)]
    inits = {"s2": np.array([2, 3, 4, 5], np.int64), "s3": np.array([1, 1, 3, 2, 4], np.int64)}
    got, want = run_both(nodes, {"t2": t2, "t3": t3}, {"a": "float32", "b": "float32",
                                                       "c": "float32"}, inits=inits, opset=20)
    for gt, w in zip(got, want):
        assert gt.shape == w.shape
        # (R.image.affine_grid steps by TVM's (2 - 1e-7) / (s - 1) with align_corners)
        np.testing.assert_allclose(gt, w, rtol=1e-5, atol=1e-6)


def test_col2im_against_onnxruntime():
    # strides, dilations and pads together (overlapping blocks, blocks reaching into the
    # padding), and a 1-D image
    rng = np.random.default_rng(7)
    image, block = np.array([7, 6], np.int64), np.array([2, 3], np.int64)
    # blocks per dim: (7 + 1 + 2 - 2*1 - 1) // 2 + 1 = 4, (6 + 2 + 0 - 1*2 - 1) // 1 + 1 = 6
    x = rng.standard_normal((2, 3 * 6, 4 * 6)).astype(np.float32)
    v = rng.standard_normal((1, 2 * 3, 5)).astype(np.float32)
    nodes = [helper.make_node("Col2Im", ["x", "im", "bl"], ["y"], strides=[2, 1],
                              dilations=[2, 1], pads=[1, 2, 2, 0]),
             helper.make_node("Col2Im", ["v", "im1", "bl1"], ["z"], strides=[2], pads=[1, 1])]
    inits = {"im": image, "bl": block, "im1": np.array([10], np.int64),
             "bl1": np.array([3], np.int64)}
    got, want = run_both(nodes, {"x": x, "v": v}, {"y": "float32", "z": "float32"},
                         inits=inits, opset=18)
    for gt, w in zip(got, want):
        assert gt.shape == w.shape
        np.testing.assert_allclose(gt, w, rtol=1e-5, atol=1e-6)


def test_col2im_shape_mismatch_is_a_clear_error():
    import pytest
    from onnx import TensorProto, numpy_helper

    from phasec.frontend.errors import FrontendError
    from phasec.frontend.onnx import from_onnx

    graph = helper.make_graph(
        [helper.make_node("Col2Im", ["x", "im", "bl"], ["y"], name="c2i")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([3, 3], np.int64), "im"),
         numpy_helper.from_array(np.array([2, 2], np.int64), "bl")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(FrontendError, match="'c2i'.*5 blocks, but the image holds 4"):
        from_onnx(model)


def test_deform_conv_against_onnxruntime():
    # two convolution groups, two offset groups, strides, dilations, pads, a mask and a bias;
    # offsets of a few pixels, so that some taps sample outside the image (zeros)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    # output: (7 + 2 - 2*2 - 1) // 2 + 1 = 3 rows, (6 + 1 + 0 - 1 - 1) // 1 + 1 = 6 columns
    off = rng.uniform(-2.5, 2.5, (2, 2 * 2 * 6, 3, 6)).astype(np.float32)
    mask = rng.uniform(0, 1, (2, 2 * 6, 3, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"], group=2,
                              offset_group=2, strides=[2, 1], dilations=[2, 1],
                              pads=[1, 1, 1, 0]),
             helper.make_node("DeformConv", ["x", "w1", "off1"], ["z"])]
    w1 = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)
    off1 = rng.uniform(-1, 1, (2, 8, 6, 5)).astype(np.float32)
    got, want = run_both(nodes, {"x": x, "w": w, "off": off, "b": b, "mask": mask, "w1": w1,
                                 "off1": off1}, {"y": "float32", "z": "float32"}, opset=19)
    for gt, wt in zip(got, want):
        assert gt.shape == wt.shape
        np.testing.assert_allclose(gt, wt, rtol=1e-4, atol=1e-4)
