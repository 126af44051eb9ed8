"""ONNX Resize beyond TVM's resize2d (phasec/frontend/onnx/ops_image.py over
R.image.onnx_resize): antialiased downscales by non-integer factors, scales
that do not give whole sizes, half_pixel_symmetric, tf_crop_and_resize with
a roi over permuted axes, keep_aspect_ratio_policy, non-spatial axes, 3-D
and 5-D tensors, integer data; all in one graph, against ONNX Runtime."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.frontend.onnx import from_onnx

from helpers.onnx_run import run_both

#: (attributes, the input, roi, scales, sizes) of each Resize node
_CASES = [
    (dict(mode="linear", antialias=1), "x", None, [1, 1, 0.7, 0.45], None),
    (dict(mode="cubic", antialias=1, cubic_coeff_a=-0.5), "x", None, None, [2, 3, 5, 3]),
    (dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), "x", None,
     [1, 1, 1.7, 0.8], None),
    (dict(mode="nearest", nearest_mode="floor"), "x", None, [1, 1, 0.6, 1.3], None),
    (dict(mode="nearest", nearest_mode="round_prefer_ceil",
          coordinate_transformation_mode="asymmetric"), "x", None, [1, 1, 0.6, 2.5], None),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", axes=[3, 2],
          extrapolation_value=-3.0), "x", "roi", None, [4, 6]),
    # (with sizes: for scales that do not give whole sizes, ONNX Runtime's align_corners
    # divides by the rounded output length, the ONNX definition by scale * input length;
    # phasec follows the definition, as the conformance suite checks)
    (dict(mode="cubic", coordinate_transformation_mode="align_corners", exclude_outside=1),
     "x", None, None, [2, 3, 5, 10]),
    (dict(mode="nearest", keep_aspect_ratio_policy="not_smaller", axes=[2, 3]), "x", None,
     None, [4, 4]),
    (dict(mode="linear", keep_aspect_ratio_policy="not_larger", axes=[2, 3]), "x", None,
     None, [4, 4]),
    (dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), "t", None,
     [1.5, 1, 0.5], None),  # the first axis of a 3-D tensor
    (dict(mode="linear", antialias=1, coordinate_transformation_mode="asymmetric"), "v", None,
     [1, 1, 0.5, 0.75, 1.0], None),
]


def test_resize_against_onnxruntime():
    rng = np.random.default_rng(11)
    feeds = {"x": rng.standard_normal((2, 3, 9, 7)).astype(np.float32),
             "t": rng.standard_normal((4, 3, 5)).astype(np.float32),
             "v": rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)}
    inits = {"roi": np.array([0.1, -0.2, 1.2, 0.8], np.float32)}
    nodes, outs = [], {}
    for k, (attrs, src, roi, scales, sizes) in enumerate(_CASES):
        ins = [src, roi or ""]
        if scales is not None:
            inits[f"sc{k}"] = np.array(scales, np.float32)
            ins.append(f"sc{k}")
        else:
            inits[f"sz{k}"] = np.array(sizes, np.int64)
            ins += ["", f"sz{k}"]
        nodes.append(helper.make_node("Resize", ins, [f"y{k}"], **attrs))
        outs[f"y{k}"] = "float32"
    got, want = run_both(nodes, feeds, outs, inits=inits, opset=19)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (k, _CASES[k][0])
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-5, err_msg=str(_CASES[k][0]))


def test_integer_resize_rounds_to_nearest():
    # uint8 data interpolated in float32, rounded and saturated: against ONNX's reference
    # evaluator (ONNX Runtime 1.2x fails on uint8 linear/cubic: a tensor type mismatch)
    x = np.random.default_rng(12).integers(0, 256, (1, 1, 6, 7)).astype(np.uint8)
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=1),
             helper.make_node("Resize", ["x", "", "s2"], ["z"], mode="cubic")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                         x.shape)],
                              [helper.make_tensor_value_info(n, TensorProto.UINT8, None)
                               for n in "yz"],
                              [numpy_helper.from_array(np.array([1, 1, 0.6, 0.7], np.float32), "s"),
                               numpy_helper.from_array(np.array([1, 1, 1.5, 1.3], np.float32),
                                                       "s2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x)
    for g, w in zip(got, want):
        assert g.dtype == np.uint8 and g.shape == w.shape
        assert np.abs(np.asarray(g).astype(int) - w.astype(int)).max() <= 1


def test_nearest_coordinates_exactly_halfway_stay_halfway():
    """2 -> 7 rows by sizes: ONNX puts output row 3 at input row (3 + 0.5) /
    3.5 - 0.5 = 0.5 exactly, which round_prefer_floor takes down. resize2d's
    ``(x + 0.5) * (2 / 7) - 0.5`` with the product and the subtraction fused
    into one FMA gives 0.5000000447 (row 1): so such ratios go to
    onnx_resize. 512 columns keep LLVM from folding the coordinates into
    constants (a small kernel of 8 columns passed by luck); 2 -> 8 rows (exact
    ratios) stay resize2d, with the same values."""
    x = np.arange(2 * 2 * 2 * 2, dtype=np.float32).reshape(2, 2, 2, 2)
    for sizes, op in (([2, 2, 7, 512], "onnx_resize"), ([2, 2, 8, 512], "resize2d")):
        node = helper.make_node("Resize", ["x", "", "", "s"], ["y"], mode="nearest")
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.array(sizes, np.int64), "s")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        mod = from_onnx(model)
        assert f"image.{op}" in mod.script()
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        got = phasec.VirtualMachine(phasec.build(mod))["main"](x)
        np.testing.assert_array_equal(got, want)
