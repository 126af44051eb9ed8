"""Narrow types held in wider dtypes (phasec/op/narrow.py's
R.round_to_format; phasec/frontend/onnx/ops_narrow.py): the rounding against
ml_dtypes (an independent implementation of every format) on the
interpreter and compiled; ONNX casts through bfloat16, float8 and int4
against ONNX Runtime; the backend's conversion of ml_dtypes inputs and
outputs; an operator computing on a narrow type is refused."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
import phasec.frontend.onnx.backend as backend
from phasec.frontend.errors import UnsupportedModelError
from phasec.frontend.onnx import from_onnx
from phasec.op import get_op
from phasec.op.narrow import FORMATS

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 464.0, 465.0, -465.0, 3.4e38, 6.5, 7.0, 0.26,
            1e-9, -3e-5, 57344.0, 61440.0]


def _values():
    rng = np.random.default_rng(0)
    scale = 10.0 ** rng.integers(-10, 8, 400)
    return np.concatenate([rng.standard_normal(400) * scale, SPECIALS]).astype(np.float32)


def _ml(x, fmt, saturate):
    t = getattr(ml_dtypes, fmt)
    if saturate:  # ONNX's saturate: clip to the largest finite value first
        big = float(ml_dtypes.finfo(t).max)
        x = np.where(np.isnan(x), x, np.clip(x, -big, big))
    return x.astype(t).astype(np.float32)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert ((got == want) | (np.isnan(got) & np.isnan(want))).all()


def test_round_to_format_against_ml_dtypes():
    x = _values()
    ref = get_op("relax.round_to_format").reference
    combos = [(f, s) for f in sorted(FORMATS) for s in (False, True)]
    for fmt, sat in combos:
        _same(ref(x, fmt, sat), _ml(x, fmt, sat))
    lines = "\n".join(f'        r{k} = R.round_to_format(x, format="{f}", saturate={s})'
                      for k, (f, s) in enumerate(combos))
    mod = phasec.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({len(x)},), "float32")):
{lines}
        return ({", ".join(f"r{k}" for k in range(len(combos)))},)
''')
    got = phasec.VirtualMachine(phasec.build(mod))["main"](x)
    for g, (fmt, sat) in zip(got, combos):
        _same(g, ref(x, fmt, sat))
        np.testing.assert_array_equal(np.signbit(np.asarray(g)), np.signbit(ref(x, fmt, sat)))


def test_casts_against_onnxruntime():
    x = _values()[:, None]
    ints = np.arange(-20, 20, dtype=np.float32)[:, None] + 0.5
    casts = [(TensorProto.BFLOAT16, 1), (TensorProto.FLOAT8E4M3FN, 1),
             (TensorProto.FLOAT8E4M3FN, 0), (TensorProto.FLOAT8E5M2, 1),
             (TensorProto.FLOAT8E5M2, 0), (TensorProto.FLOAT8E4M3FNUZ, 1),
             (TensorProto.FLOAT8E5M2FNUZ, 1)]
    nodes, outs = [], []
    for k, (to, sat) in enumerate(casts):
        attrs = {"saturate": sat} if to != TensorProto.BFLOAT16 else {}
        nodes += [helper.make_node("Cast", ["x"], [f"n{k}"], to=to, **attrs),
                  helper.make_node("Cast", [f"n{k}"], [f"y{k}"], to=TensorProto.FLOAT)]
        outs.append(f"y{k}")
    nodes += [helper.make_node("Cast", ["i"], ["i4"], to=TensorProto.INT4),
              helper.make_node("Cast", ["i4"], ["y_int4"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["i"], ["u4"], to=TensorProto.UINT4),
              helper.make_node("Cast", ["u4"], ["y_uint4"], to=TensorProto.INT32)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                     helper.make_tensor_value_info("i", TensorProto.FLOAT, ints.shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
        + [helper.make_tensor_value_info("y_int4", TensorProto.FLOAT, None),
           helper.make_tensor_value_info("y_uint4", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x, "i": ints})
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x, ints)
    # float8_e5m2 without saturation: past the largest value ONNX Runtime
    # gives NaN, the ONNX reference (ml_dtypes) and phasec infinity
    k = casts.index((TensorProto.FLOAT8E5M2, 0))
    _same(got[k], _ml(x, "float8_e5m2", False))
    for g, w in zip(got[:k] + got[k + 1:], want[:k] + want[k + 1:]):
        _same(g, w)


def test_backend_converts_ml_dtypes_inputs_and_outputs():
    cast = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E5M2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E5M2, [1, 3])])
    x = np.array([[1.3, -70000.0, np.nan]], ml_dtypes.bfloat16)
    (y,) = backend.run_model(helper.make_model(
        cast, opset_imports=[helper.make_opsetid("", 21)]), [x])
    assert y.dtype == ml_dtypes.float8_e5m2
    _same(y.astype(np.float32), _ml(x.astype(np.float32), "float8_e5m2", True))  # saturate=1
    # bfloat16 operands: computed in float32, the result rounded to bfloat16
    add = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [4]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4])])
    a = np.array([1.0, 3.0e38, -2.5, 0.1], ml_dtypes.bfloat16)
    b = np.array([2.0 ** -9, 3.0e38, 1.0, 0.2], ml_dtypes.bfloat16)
    (y,) = backend.run_model(helper.make_model(add, opset_imports=[helper.make_opsetid("", 21)]),
                             [a, b])
    assert y.dtype == ml_dtypes.bfloat16
    with np.errstate(over="ignore"):  # 3e38 + 3e38: infinity in bfloat16 too
        want = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))
    # other narrow formats are for casts and data movement only
    pad = helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [4])],
        initializer=[helper.make_tensor("p", TensorProto.INT64, [2], [1, 1])])
    model = helper.make_model(pad, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(UnsupportedModelError, match="computes on float8_e4m3fn values"):
        from_onnx(model)


def test_bfloat16_result_of_a_data_dependent_shape():
    # Unique on bfloat16 values: its shape is matched to a symbolic one
    # first, then the (exact) float32 values are rounded to bfloat16
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], sorted=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [7])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, None),
         helper.make_tensor_value_info("idx", TensorProto.INT64, None),
         helper.make_tensor_value_info("inv", TensorProto.INT64, None),
         helper.make_tensor_value_info("cnt", TensorProto.INT64, None)])
    x = np.array([2.5, -1.0, 2.5, 3.0e38, -1.0, 0.1, 7.0], ml_dtypes.bfloat16)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])  # (bf16 Unique)
    got = backend.run_model(model, [x])
    want = np.unique(x.astype(np.float32), return_index=True, return_inverse=True,
                     return_counts=True)
    assert got[0].dtype == ml_dtypes.bfloat16
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).astype(w.dtype), w)


def test_casts_to_float8_e8m0_against_the_onnx_definition():
    # onnx.numpy_helper.to_float8e8m0 reads float32's exponent and fraction
    # bits (an independent, bit-level formulation) for every round_mode
    from onnx.numpy_helper import to_float8e8m0

    tiny = np.float32(2.0 ** -126)
    x = np.concatenate([_values(), [tiny, tiny / 2, tiny * 0.75, tiny / 2 * 1.0000001, 1.5,
                                    -1.5, 3.0, 2.0 ** 127, 2.0 ** 127 * 1.5, 3.4e38, 1e-45,
                                    -0.0]]).astype(np.float32)[:, None]
    combos = [(m, s) for m in ("up", "down", "nearest") for s in (1, 0)]
    nodes = []
    for k, (mode, sat) in enumerate(combos):
        nodes += [helper.make_node("Cast", ["x"], [f"e{k}"], to=TensorProto.FLOAT8E8M0,
                                   round_mode=mode, saturate=sat),
                  helper.make_node("Cast", [f"e{k}"], [f"y{k}"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None)
         for k in range(len(combos))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x)
    for g, (mode, sat) in zip(got, combos):
        _same(g, to_float8e8m0(x, saturate=bool(sat), round_mode=mode).astype(np.float32))
