"""Nearest-neighbour coordinates exactly halfway between two pixels, through
the relax operators themselves (image.resize2d / resize3d written in
TVMScript, ONNX RoiAlign's sample points): against TVM 0.27's own compiled
output and ONNX's reference evaluator. With 2 -> 7 rows resize's ``(x +
0.5) * (2 / 7) - 0.5`` is exactly 0.5 for row 3 computed as written; fused
into one FMA it was 0.5000000447 and round-half-down took input row 1 (512
of 3,584 values wrong per resize2d on main). phasec/backend/llvm/exact.py
keeps such arithmetic unfused."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.frontend.onnx import from_onnx

COORDS = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
          "tf_half_pixel_for_nn")
ROUNDS = ("round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: rows in -> rows out: odd and prime ratios (512 columns: no coordinate folded to a constant)
SIZES = ((2, 7), (3, 10), (5, 13))


def _source() -> str:
    lines, outs = [], []
    for k, (_, rows) in enumerate(SIZES):
        for c in COORDS:
            for r in ROUNDS:
                lines.append(
                    f'        y{len(outs)} = R.image.resize2d(x{k}, R.shape([{rows}, 512]), '
                    'roi=[0.0, 0.0, 0.0, 0.0], layout="NCHW", method="nearest_neighbor", '
                    f'coordinate_transformation_mode="{c}", rounding_method="{r}", '
                    'cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0, '
                    'out_dtype="void")')
                outs.append(f"y{len(outs)}")
            lines.append(
                f'        y{len(outs)} = R.image.resize3d(v{k}, R.shape([{rows}, 3, 256]), '
                'layout="NCDHW", method="nearest_neighbor", '
                f'coordinate_transformation_mode="{c}", rounding_method="round_prefer_floor")')
            outs.append(f"y{len(outs)}")
    params = [f'x{k}: R.Tensor((1, 1, {h}, 4), "float32")' for k, (h, _) in enumerate(SIZES)]
    params += [f'v{k}: R.Tensor((1, 1, {h}, 2, 4), "float32")' for k, (h, _) in enumerate(SIZES)]
    return ("@I.ir_module\nclass Module:\n    @R.function\n    def main("
            + ", ".join(params) + "):\n" + "\n".join(lines)
            + f"\n        return ({', '.join(outs)})\n")


def test_nearest_resize_halfway_rows_match_tvm():
    import tvm
    from tvm import relax

    src = _source()
    args = ([np.arange(h * 4, dtype=np.float32).reshape(1, 1, h, 4) for h, _ in SIZES]
            + [np.arange(h * 8, dtype=np.float32).reshape(1, 1, h, 2, 4) for h, _ in SIZES])
    vm = relax.VirtualMachine(tvm.compile(tvm.script.from_source(src), target="llvm"), tvm.cpu())
    want = [r.numpy() for r in vm["main"](*[tvm.runtime.tensor(a) for a in args])]
    got = phasec.VirtualMachine(phasec.build(phasec.parse(src)))["main"](*args)
    assert len(got) == len(want) == len(SIZES) * len(COORDS) * (len(ROUNDS) + 1)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=src.splitlines()[4 + k])


def test_roi_align_max_samples_where_onnx_does():
    """Boxes at thirds and sevenths, scale 1/16: each sample point
    ``start + p * bin + (i + 0.5) * bin / grid`` is computed as written (as
    ONNX's reference and ONNX Runtime compute it), so the bilinear taps and
    weights, and the max over them, are theirs exactly (on main the fused
    points differed by up to 2e-7)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 13, 11)).astype(np.float32)
    rois = np.array([[16 / 3, 16 / 7, 160 / 3, 150 / 7], [1, 1, 100, 90], [0.5, 2.5, 77, 33],
                     [48 / 7, 0, 112, 176 / 3]], np.float32)
    for ctm in ("half_pixel", "output_half_pixel"):
        for ratio in (0, 2, 3):
            node = helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], mode="max",
                                    output_height=7, output_width=5, sampling_ratio=ratio,
                                    spatial_scale=1 / 16, coordinate_transformation_mode=ctm)
            graph = helper.make_graph(
                [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                              helper.make_tensor_value_info("r", TensorProto.FLOAT, rois.shape)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                [numpy_helper.from_array(np.zeros(4, np.int64), "i")])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
            want = ReferenceEvaluator(model).run(None, {"x": x, "r": rois})[0]
            got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x, rois)
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{ctm} {ratio}")
