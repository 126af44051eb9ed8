"""image.onnx_resize (phasec/op/image/onnx_resize.py): its numpy reference
against ONNX's own reference evaluator (an independent implementation of
ONNX's Resize), attribute by attribute; its kernel against that reference
on LLVM; the inference's errors. (test_legalize.py runs its legalization on
the TIR interpreter; tests/frontend/test_onnx_resize.py compares the ONNX
converter with ONNX Runtime.)"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.script.builder import BlockBuilder
from phasec.ir import ShapeExpr, TensorStructInfo, Var
from phasec.op import call_op, get_op

from helpers.op_infer import raises

REF = get_op("relax.image.onnx_resize").reference

# (attributes, input shape, scales): the output sizes are ONNX's floor(in * scale)
CASES = [
    (dict(mode="linear", antialias=True), (1, 2, 7, 9), (1, 1, 0.45, 0.7)),
    (dict(mode="cubic", antialias=True, cubic_coeff_a=-0.5), (2, 1, 8, 5), (1, 1, 0.3, 0.9)),
    (dict(mode="cubic", exclude_outside=True, coordinate_transformation_mode="align_corners"),
     (1, 1, 5, 6), (1, 1, 1.3, 0.7)),
    (dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), (3, 4, 5),
     (1, 1.6, 0.7)),
    (dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="asymmetric"),
     (4, 5), (0.6, 2.2)),
    (dict(mode="nearest", nearest_mode="round_prefer_ceil"), (2, 3, 4), (1.5, 1, 0.5)),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
          extrapolation_value=7.0, roi=(0.0, 0.2, -0.3, 1.0, 0.9, 1.1)), (2, 5, 6), (1, 1.5, 0.8)),
    (dict(mode="cubic", coordinate_transformation_mode="pytorch_half_pixel"), (1, 6), (1, 0.5)),
]


def _onnx_reference(x, scales, attrs):
    a = {k: int(v) if isinstance(v, bool) else v for k, v in attrs.items() if k != "roi"}
    roi = attrs.get("roi")
    node = helper.make_node("Resize", ["x", "roi" if roi else "", "s"], ["y"], **a)
    inits = [numpy_helper.from_array(np.array(scales, np.float32), "s")]
    if roi:
        inits.append(numpy_helper.from_array(np.array(roi, np.float32), "roi"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_reference_matches_onnx(k):
    attrs, shape, scales = CASES[k]
    x = np.random.default_rng(k).standard_normal(shape).astype(np.float32)
    size = [int(np.floor(d * np.float32(s))) for d, s in zip(shape, scales)]
    want = _onnx_reference(x, scales, attrs)
    got = REF(x, size, scales=tuple(float(np.float32(s)) for s in scales), **attrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_kernel_matches_reference_on_llvm():
    attrs, shape, scales = CASES[1]
    x = Var("x", TensorStructInfo(shape, "float32"))
    size = [int(np.floor(d * s)) for d, s in zip(shape, scales)]
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(call_op("image.onnx_resize", x, ShapeExpr(size),
                                            scales=scales, **attrs)))
    data = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    got = phasec.VirtualMachine(phasec.build(bb.get()))["main"](data)
    np.testing.assert_allclose(got, _onnx_reference(data, scales, attrs), rtol=1e-5, atol=1e-5)


def test_inference_errors():
    x = Var("x", TensorStructInfo((1, 2, 3, 4), "float32"))
    full = ShapeExpr([1, 2, 3, 4])
    raises(["one scale per axis"], call_op, "image.onnx_resize", x, full, scales=(1.0, 1.0))
    raises(["one entry per axis"], call_op, "image.onnx_resize", x, ShapeExpr([1, 2, 3]),
           scales=(1.0,) * 4)
    raises(["finite and above 0"], call_op, "image.onnx_resize", x, full,
           scales=(1.0, 1.0, 0.0, 1.0))
    raises(["linear and cubic modes only"], call_op, "image.onnx_resize", x, full,
           scales=(1.0,) * 4, antialias=True, mode="nearest")
