"""Legalization cases of image.resize3d, image.onnx_resize, image.affine_grid, image.grid_sample,
binary operators with a scalar operand, stop_lift_params and
multinomial_from_uniform (tests/op/test_ops_image_ext.py)."""

from __future__ import annotations

import numpy as np

from phasec.ir import Constant, PrimValue, ShapeExpr, TensorStructInfo, Var, tir
from phasec.op import call_op

_X5 = Var("ri_x", TensorStructInfo((1, 2, 3, 4, 5), "float32"))
_T = Var("ri_t", TensorStructInfo((2, 2, 3), "float32"))
IMAGE_EXT_LEGALIZE_CASES = [
    ("resize3d-linear", lambda: call_op("image.resize3d", _X5, ShapeExpr([2, 6, 3]))),
    ("resize3d-nearest-ndhwc", lambda: call_op(
        "image.resize3d", _X5, ShapeExpr([4, 2, 3]), layout="NDHWC", method="nearest_neighbor",
        coordinate_transformation_mode="asymmetric", rounding_method="floor")),
    ("resize3d-crop", lambda: call_op(
        "image.resize3d", _X5, ShapeExpr([3, 3, 3]), coordinate_transformation_mode="tf_crop_and_resize",
        roi=(0.1, -0.2, 0.0, 0.9, 1.3, 1.0), extrapolation_value=-1.0)),
    ("onnx_resize-antialias-cubic", lambda: call_op(
        "image.onnx_resize", _X5, ShapeExpr([1, 2, 2, 5, 3]), scales=(1.0, 1.0, 0.7, 1.3, 0.6),
        mode="cubic", antialias=True, exclude_outside=True)),
    ("onnx_resize-nearest-symmetric", lambda: call_op(
        "image.onnx_resize", _X5, ShapeExpr([1, 3, 3, 2, 5]), scales=(1.0, 1.5, 1.2, 0.5, 1.0),
        coordinate_transformation_mode="half_pixel_symmetric", nearest_mode="ceil")),
    ("onnx_resize-crop", lambda: call_op(
        "image.onnx_resize", _X5, ShapeExpr([1, 2, 4, 3, 2]), scales=(1.0, 1.0, 1.3, 0.8, 0.5),
        mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
        roi=(0.0, 0.0, 0.2, -0.1, 0.0, 1.0, 1.0, 0.9, 1.2, 1.0), extrapolation_value=2.5)),
    ("affine_grid", lambda: call_op("image.affine_grid", _T, ShapeExpr([3, 4]))),
    ("affine_grid-centres", lambda: call_op("image.affine_grid", _T, ShapeExpr([3, 4]),
                                            align_corners=False)),
]

_G = Var("ri_g", TensorStructInfo((2, 2, 3, 2), "float32"))
_D = Var("ri_d", TensorStructInfo((2, 3, 4, 5), "float32"))
IMAGE_EXT_LEGALIZE_CASES += [
    # binary operators with a scalar (R.prim_value) operand, TVM 0.27's spelling
    ("multiply-prim", lambda: call_op("multiply", _T, PrimValue(tir.FloatImm(-1.5, "float32")))),
    ("less-prim-lhs", lambda: call_op("less", PrimValue(tir.FloatImm(0.25, "float32")), _T)),
    ("stop_lift_params", lambda: call_op("builtin.stop_lift_params", _T)),
    ("multinomial_from_uniform", lambda: call_op(
        "multinomial_from_uniform", Var("mp", TensorStructInfo((3, 5), "float32")),
        Var("mu", TensorStructInfo((4, 1), "float32")),
        Constant(np.array([[0], [2], [-1], [1]], "int64")), dtype="int32"))] + [
    (f"grid_sample-{m}-{p}-{a}", lambda m=m, p=p, a=a: call_op(
        "image.grid_sample", _D, _G, method=m, padding_mode=p, align_corners=a))
    for m, p, a in (("bilinear", "zeros", False), ("nearest", "border", True),
                    ("bicubic", "reflection", False), ("bilinear", "reflection", True))]
