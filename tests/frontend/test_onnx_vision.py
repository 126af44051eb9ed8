"""ONNX RoiAlign and NonMaxSuppression (phasec/frontend/onnx/ops_vision.py
over R.vision.onnx_roi_align / onnx_nms): random cases of each attribute
combination, compiled through the default pipeline, against ONNX Runtime
(equal selected rows; RoiAlign within float32 rounding) and against the
operators' numpy references on the interpreter; a batch index out of range
is an error, never a read outside the data."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import phasec
from phasec.errors import PhasecError
from phasec.op import get_op

from helpers.onnx_run import run_both


def _boxes(rng, b, n, center):
    if center:  # centre x, centre y, width, height
        return np.concatenate([rng.uniform(0, 10, (b, n, 2)), rng.uniform(0.5, 4, (b, n, 2))],
                              -1).astype(np.float32)
    # two opposite corners, in either order
    return rng.uniform(0, 10, (b, n, 4)).astype(np.float32)


def test_nms_against_onnxruntime():
    rng = np.random.default_rng(3)
    for center in (0, 1):
        boxes = _boxes(rng, 2, 12, center)
        scores = rng.choice([0.1, 0.3, 0.5, 0.7, 0.9], (2, 3, 12)).astype(np.float32)  # ties
        nodes = [
            helper.make_node("NonMaxSuppression", ["b", "s", "m", "iou", "thr"], ["y0"],
                             center_point_box=center),
            helper.make_node("NonMaxSuppression", ["b", "s", "m2", "iou2"], ["y1"],
                             center_point_box=center),
            helper.make_node("NonMaxSuppression", ["b", "s"], ["y2"], center_point_box=center),
        ]
        inits = {"m": np.array([4], np.int64), "iou": np.array([0.2], np.float32),
                 "thr": np.array([0.3], np.float32), "m2": np.array([100], np.int64),
                 "iou2": np.array([0.5], np.float32)}
        got, want = run_both(nodes, {"b": boxes, "s": scores},
                             {"y0": "int64", "y1": "int64", "y2": "int64"}, inits=inits)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.int64
            np.testing.assert_array_equal(g, w)
        assert got[2].shape == (0, 3)  # max_output_boxes_per_class defaults to 0
        assert 0 < len(got[0]) < len(got[1])


@pytest.mark.parametrize("mode,ctm,ratio", [("avg", "half_pixel", 0), ("max", "half_pixel", 2),
                                            ("avg", "output_half_pixel", 2),
                                            ("max", "output_half_pixel", 0)])
def test_roi_align_against_onnxruntime(mode, ctm, ratio):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    # rois inside, across the border, reversed and outside the map
    rois = np.array([[0, 0, 20, 16], [3, 2, 9, 7.5], [-4, -2, 5, 6], [8, 6, 2, 1],
                     [30, 30, 40, 40], [1.2, 1.7, 1.9, 2.1]], np.float32)
    idx = np.array([0, 1, 1, 0, 1, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], mode=mode,
                            coordinate_transformation_mode=ctm, output_height=3,
                            output_width=2, sampling_ratio=ratio, spatial_scale=0.5)
    got, want = run_both([node], {"x": x}, {"y": "float32"}, inits={"r": rois, "i": idx})
    assert got[0].shape == want[0].shape == (6, 3, 3, 2)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    ref = get_op("relax.vision.onnx_roi_align").reference(
        x, rois, idx, output_height=3, output_width=2, sampling_ratio=ratio,
        spatial_scale=0.5, mode=mode, half_pixel=ctm == "half_pixel")
    np.testing.assert_allclose(ref, want[0], rtol=1e-5, atol=1e-5)


def test_bad_batch_index_is_an_error():
    mod = phasec.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 4), "float32"), r: R.Tensor((1, 4), "float32"),
             i: R.Tensor((1,), "int64")):
        return R.vision.onnx_roi_align(x, r, i, output_height=2, output_width=2)
''')
    vm = phasec.VirtualMachine(phasec.build(mod))
    x, r = np.ones((1, 2, 4, 4), np.float32), np.array([[0, 0, 2, 2]], np.float32)
    np.testing.assert_allclose(vm["main"](x, r, np.array([0])), np.ones((1, 2, 2, 2)))
    with pytest.raises(PhasecError, match="index"):
        vm["main"](x, r, np.array([5]))
