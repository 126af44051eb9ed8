"""QuantizeLinear / DequantizeLinear to and from the narrow types phasec holds
in wider dtypes (phasec/frontend/onnx/ops_quant.py): int4/uint4, int2/uint2
(opset 25) and the float8s against ONNX Runtime, float4 (which ONNX Runtime does not quantize) against the
formula with ml_dtypes' rounding; per tensor, per axis and blocked on odd
shapes, with halfway cases and saturation."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx import from_onnx

_TYPES = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int2": TensorProto.INT2,
          "uint2": TensorProto.UINT2, "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
          "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ, "float8_e5m2": TensorProto.FLOAT8E5M2,
          "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ, "float4_e2m1fn": TensorProto.FLOAT4E2M1}


def _chain(k, x_shape, scale, zp, fmt, attrs):
    """Input ``x{k}`` -> QuantizeLinear(fmt) -> (Cast to float: the quantized
    values, DequantizeLinear: back to float32): (nodes, inits, input, outputs)."""
    inits = [numpy_helper.from_array(scale, f"s{k}")]
    ins = [f"x{k}", f"s{k}"]
    if zp is not None:
        inits.append(helper.make_tensor(f"z{k}", _TYPES[fmt], zp.shape, zp.ravel().tolist()))
        ins.append(f"z{k}")
    else:
        attrs = {**attrs, "output_dtype": _TYPES[fmt]}
    dq_attrs = {a: v for a, v in attrs.items() if a in ("axis", "block_size")}
    nodes = [helper.make_node("QuantizeLinear", ins, [f"q{k}"], **attrs),
             helper.make_node("Cast", [f"q{k}"], [f"qf{k}"], to=TensorProto.FLOAT),
             helper.make_node("DequantizeLinear", [f"q{k}", *ins[1:]], [f"d{k}"], **dq_attrs)]
    return (nodes, inits, helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, x_shape),
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in
             (f"qf{k}", f"d{k}")])


def _model(chains, opset):
    """One model of several chains (one build for them all)."""
    graph = helper.make_graph(
        [n for c in chains for n in c[0]], "g", [c[2] for c in chains],
        [o for c in chains for o in c[3]], initializer=[i for c in chains for i in c[1]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11 if opset >= 25 else 10
    return model


def _phasec(model, xs):
    return [np.asarray(v) for v in phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*xs)]


def _ort(model, xs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{k}": x for k, x in enumerate(xs)})


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert ((g == w) | (np.isnan(g) & np.isnan(w))).all(), (g, w)


def _params(fmt, shape, axis, block, rng, with_zp):
    """A scale and zero point per tensor (axis None), per axis or blocked."""
    if axis is None:
        pshape: tuple[int, ...] = ()
    elif block:
        pshape = tuple(-(-d // block) if i == axis else d for i, d in enumerate(shape))
    else:
        pshape = (shape[axis],)
    scale = rng.choice([0.5, 0.25, 2.0, 1.5, 3.0], pshape).astype(np.float32)
    if not with_zp:
        return scale, None
    if fmt.startswith("float"):
        return scale, np.zeros(pshape, np.float32)
    bits = int(fmt[-1])
    lo = -(1 << (bits - 1)) if fmt.startswith("int") else 0
    return scale, rng.integers(lo, lo + (1 << bits), pshape).astype(np.float32)


def _layouts():
    return [((5, 3), None, 0), ((3, 7, 2), 1, 0), ((2, 5, 3), -1, 0), ((7, 4), 0, 3),
            ((3, 5, 2), 1, 2)]


def _layout_attrs(axis, block):
    return {} if axis is None else {"axis": axis, **({"block_size": block} if block else {})}


def test_narrow_integers_against_onnxruntime():
    rng = np.random.default_rng(0)
    chains, xs = [], []
    for f, fmt in enumerate(("int4", "uint4", "int2", "uint2")):
        for shape, axis, block in _layouts()[f % 2::2][:2] + _layouts()[2:3]:
            # halfway cases (k + 0.5) and values far past the range
            x = rng.integers(-12, 12, shape) + rng.choice([0.0, 0.5, -0.5, 0.3], shape)
            xs.append(np.where(rng.random(shape) < 0.1, rng.uniform(-1e3, 1e3, shape),
                               x).astype(np.float32))
            scale, zp = _params(fmt, shape, axis, block, rng, with_zp=block != 2)
            chains.append(_chain(len(chains), shape, scale, zp, fmt, _layout_attrs(axis, block)))
    model = _model(chains, 25)  # (int2 and uint2 from opset 25 on)
    _same(_phasec(model, xs), _ort(model, xs))


def test_float8_against_onnxruntime():
    rng = np.random.default_rng(1)
    chains, xs = [], []
    for f, fmt in enumerate(("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                             "float8_e5m2fnuz")):
        for k in (f, f + 1, f + 3):  # (each layout, each with and without saturation)
            shape, axis, block = _layouts()[k % 5]
            x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(np.float32)
            x.ravel()[:3] = [np.nan, 1e9, -1e9]
            scale, zp = _params(fmt, shape, axis, block, rng, with_zp=k % 2 == 0)
            xs.append(x)
            chains.append(_chain(len(chains), shape, scale, zp, fmt,
                                 {"saturate": k % 2, **_layout_attrs(axis, block)}))
    model = _model(chains, 21)
    _same(_phasec(model, xs), _ort(model, xs))


def test_float4_against_the_formula():
    rng = np.random.default_rng(2)
    chains, xs, want = [], [], []
    for shape, axis, block in _layouts():
        x = (rng.standard_normal(shape) * 6).astype(np.float32)
        scale, zp = _params("float4_e2m1fn", shape, axis, block, rng, with_zp=True)
        if axis is None:
            s = scale
        elif block:
            s = np.repeat(scale, block, axis=axis).take(range(shape[axis]), axis=axis)
        else:
            s = scale.reshape([-1 if i == axis % len(shape) else 1 for i in range(len(shape))])
        q = (x / s).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)  # saturates
        xs.append(x)
        want += [q, (q * s).astype(np.float32)]
        chains.append(_chain(len(chains), shape, scale, zp, "float4_e2m1fn",
                             _layout_attrs(axis, block)))
    _same(_phasec(_model(chains, 23), xs), want)


def test_mismatched_or_nonzero_zero_points_are_refused():
    x = np.ones((2, 3), np.float32)
    bad = _model([_chain(0, (2, 3), np.float32(2), np.array([1.0], np.float32),
                         "float8_e4m3fn", {})], 21)
    with pytest.raises(FrontendError, match="float8_e4m3fn zero point must be 0"):
        from_onnx(bad)
    # an int8 zero point with output_dtype int4 (ONNX's type inference refuses it)
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], output_dtype=TensorProto.INT4),
         helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.float32(2), "s"),
                     numpy_helper.from_array(np.int8(0), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(FrontendError, match="output_dtype INT4 does not match"):
        from_onnx(model)
