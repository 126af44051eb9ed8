"""image.resize2d, quantize and dequantize (phasec/op/image/resize.py, qdq.py):
inference (TVM 0.27's results, symbolic and error cases), the references
against loop formulas (helpers/nn_loops.py), ONNX Runtime's Resize and TVM 0.27's own
compiled output."""

import math

import numpy as np
import pytest

from phasec.ir import ShapeExpr, tir
from phasec.op import call_op

from helpers.against_tvm import run_tvm, run_tvm_many
from helpers.nn_loops import bilinear_half_pixel
from helpers.op_infer import S, raises, tv
from helpers.op_reference import close, rand, run

n = tir.Var("n")


# ---------------------------------------------------------------------------
# resize2d
# ---------------------------------------------------------------------------

def test_resize2d_infer():
    assert S(call_op("image.resize2d", tv("x", (n, 3, 5, 7)), (8, n))) == \
        'R.Tensor((n, 3, 8, n), dtype="float32")'
    assert S(call_op("image.resize2d", tv("x", (1, 5, 7, 3)), (4, 9), layout="NHWC",
                     out_dtype="float16")) == 'R.Tensor((1, 4, 9, 3), dtype="float16")'
    assert S(call_op("image.resize2d", tv("x", ndim=4), (4, 9))) == \
        'R.Tensor(ndim=4, dtype="float32")'
    raises(["2 entries"], call_op, "image.resize2d", tv("x", (1, 3, 5, 7)), (4, 9, 2))
    raises(["4-D tensor"], call_op, "image.resize2d", tv("x", (3, 5, 7)), (4, 9))
    raises(["expected one of 'nearest_neighbor', 'linear', 'cubic'"], call_op, "image.resize2d",
           tv("x", (1, 3, 5, 7)), (4, 9), method="bilinear")
    raises(["coordinate_transformation_mode"], call_op, "image.resize2d", tv("x", (1, 3, 5, 7)),
           (4, 9), coordinate_transformation_mode="half")
    raises(["roi needs 1 or 4"], call_op, "image.resize2d", tv("x", (1, 3, 5, 7)), (4, 9),
           roi=(0.0, 1.0))
    raises(["layout 'NCHW4c'"], call_op, "image.resize2d", tv("x", (1, 3, 5, 7)), (4, 9),
           layout="NCHW4c")
    assert isinstance(call_op("image.resize2d", tv("x", (1, 3, 5, 7)), (4, 9)).args[1], ShapeExpr)


def test_resize2d_reference_against_formulas():
    x = rand(2, 3, 5, 7)
    close(run("image.resize2d", x, ShapeExpr([8, 3])), bilinear_half_pixel(x, 8, 3), 1e-5)
    near = run("image.resize2d", x, ShapeExpr([10, 4]), method="nearest_neighbor",
               coordinate_transformation_mode="asymmetric", rounding_method="floor")
    rows = [math.floor(i * 5 / 10) for i in range(10)]
    cols = [min(math.floor(j * 7 / 4), 6) for j in range(4)]
    np.testing.assert_array_equal(near, x[:, :, rows][:, :, :, cols])
    xi = rand(1, 1, 2, 2, dtype="int32", lo=0, hi=100)
    up = run("image.resize2d", xi, ShapeExpr([3, 3]), coordinate_transformation_mode="align_corners")
    assert up.dtype == np.int32
    np.testing.assert_array_equal(up[0, 0, 1, 1], int(xi.mean()))  # centre: the mean, truncated
    nhwc = run("image.resize2d", np.ascontiguousarray(x.transpose(0, 2, 3, 1)), ShapeExpr([8, 3]),
               layout="NHWC")
    close(nhwc, bilinear_half_pixel(x, 8, 3).transpose(0, 2, 3, 1), 1e-5)


@pytest.mark.parametrize("method,mode,rounding,size", [
    ("linear", "half_pixel", "", (8, 3)),
    ("linear", "align_corners", "", (4, 11)),
    ("linear", "asymmetric", "", (3, 9)),
    ("nearest_neighbor", "asymmetric", "floor", (9, 4)),
    ("nearest_neighbor", "half_pixel", "round_prefer_ceil", (7, 13)),
    ("nearest_neighbor", "align_corners", "round_prefer_floor", (4, 5)),
    ("cubic", "half_pixel", "", (8, 9)),
    ("cubic", "pytorch_half_pixel", "", (3, 1)),
])
def test_resize2d_against_onnxruntime(method, mode, rounding, size):
    x = rand(1, 2, 5, 7)
    ours = run("image.resize2d", x, ShapeExpr(list(size)), method=method,
               coordinate_transformation_mode=mode, rounding_method=rounding)
    onnx_mode = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}[method]
    extra = {"nearest_mode": rounding} if method == "nearest_neighbor" else {}
    sizes = np.array([1, 2, *size], "int64")
    import onnx
    from onnx import TensorProto, helper

    import onnxruntime
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=onnx_mode,
                            coordinate_transformation_mode=mode, cubic_coeff_a=-0.75, **extra)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
        initializer=[helper.make_tensor("sizes", TensorProto.INT64, [4], sizes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    ort = onnxruntime.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    close(ours, ort, 1e-5)


@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize2d_against_tvm(method):
    x = rand(1, 2, 5, 7)
    modes = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
             "tf_half_pixel_for_nn", "tf_crop_and_resize"]
    cases = [(size, dict(roi=(0.1, 0.2, 0.9, 0.7), method=method,
                         coordinate_transformation_mode=mode,
                         rounding_method="" if method == "nearest_neighbor" else "round",
                         cubic_exclude=1, extrapolation_value=-3.0))
             # each mode at one of the two sizes, both sizes for each method: TVM
             # takes ~1.5 s to compile one cubic resize
             for mode, size in zip(modes, [(8, 3), (4, 13)] * 3)]
    import tvm

    theirs = run_tvm_many([lambda nn, a, size=size, kw=kw: tvm.relax.op.image.resize2d(a, size, **kw)
                           for size, kw in cases], [x])  # one TVM compile for all
    for (size, kw), want in zip(cases, theirs, strict=True):
        close(run("image.resize2d", x, ShapeExpr(list(size)), **kw), want, 1e-5)


# ---------------------------------------------------------------------------
# quantize / dequantize
# ---------------------------------------------------------------------------

def test_qdq_infer():
    x = tv("x", (n, 3, 4))
    s, z = tv("s", (), "float32"), tv("z", (), "int8")
    assert S(call_op("quantize", x, s, z)) == 'R.Tensor((n, 3, 4), dtype="int8")'
    assert S(call_op("quantize", x, tv("s", (3,)), tv("z", (3,), "int32"), axis=1,
                     out_dtype="uint8")) == 'R.Tensor((n, 3, 4), dtype="uint8")'
    assert S(call_op("dequantize", tv("q", (n, 3, 4), "int8"), s, z, out_dtype="float16")) == \
        'R.Tensor((n, 3, 4), dtype="float16")'
    raises(["supports out_dtype int8"], call_op, "quantize", x, s, z, out_dtype="int32")
    raises(["supports out_dtype float16, float32"], call_op, "dequantize", x, s, z,
           out_dtype="int8")
    raises(["takes float16, float32 data"], call_op, "quantize", tv("q", (2,), "int8"), s, z)
    raises(["scale must be float16 or float32"], call_op, "quantize", x, tv("s", (), "int32"), z)
    raises(["zero_point must be one of"], call_op, "quantize", x, s, tv("z", (), "float32"))
    raises(["axis 3 is out of range"], call_op, "quantize", x, s, z, axis=3)
    raises(["scale has 4 entries", "3 on axis 1"], call_op, "quantize", x, tv("s", (4,)), z,
           axis=1)
    raises(["scalar or 1-D"], call_op, "quantize", x, tv("s", (3, 4)), z, axis=1)


def test_quantize_reference():
    x = np.array([[0.5, 1.5, -2.5, 300.0], [-300.0, 2.49, 0.0, -0.5]], "float32")
    s, z = np.array([1.0, 0.5], "float32"), np.array([0, 3], "int32")
    out = run("quantize", x, s, z, axis=0)
    expected = [[0, 2, -2, 127], [-128, 3 + 5, 3, 2]]  # half to even; clipped to int8
    np.testing.assert_array_equal(out, expected)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -1.5], "float32")
    args = [ties, np.array(1.0, "float32"), np.array(0, "int8")]
    np.testing.assert_array_equal(run("quantize", *args),
                                  run_tvm(lambda nn, a, b, c: __import__("tvm").relax.op.quantize(
                                      a, b, c), args))
    u = run("quantize", x, np.array([2.0], "float32"), np.array([10], "uint8"), out_dtype="uint8")
    np.testing.assert_array_equal(u, np.clip(np.round(x / 2.0) + 10, 0, 255).astype("uint8"))


def test_dequantize_reference():
    q = np.array([[-128, 0, 127], [5, -5, 1]], "int8")
    s, z = np.array([0.5, 0.25, 2.0], "float32"), np.array([1, -1, 0], "int8")
    out = run("dequantize", q, s, z, axis=1)
    expected = [[(v - zz) * ss for v, ss, zz in zip(row, s, z)] for row in q.astype(int)]
    close(out, np.array(expected))
    big = run("dequantize", np.array([30000], "int16"), np.array(4.0, "float32"),
              np.array(0, "int16"), out_dtype="float16")
    assert big.dtype == np.float16 and float(big[0]) == 65504.0
    args = [q, s, z]
    close(out, run_tvm(lambda nn, a, b, c: __import__("tvm").relax.op.dequantize(a, b, c, axis=1),
                       args))
