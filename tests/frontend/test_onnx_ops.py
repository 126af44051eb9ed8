"""Per-operator tests of the ONNX importer: one small model per case, built
with onnx.helper, imported, compiled through the default pipeline
(phasec.build) and run on the VM, against ONNX Runtime on the same model and
inputs. The cases aim at the converters' own logic: decompositions (Gemm,
BatchNormalization, LRN, Pad, Tile, GatherElements/GatherND, CumSum,
ArgMax, LayerNormalization...), attribute handling (auto_pad, ceil_mode,
negative steps and axes, legacy opsets) and dtypes. The ONNX conformance
suite (test_onnx_backend.py) adds its ~1,300 cases with expected outputs.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

F = TensorProto.FLOAT
_NP_TO_ONNX = {np.dtype(k): v for k, v in [
    ("float32", F), ("float64", TensorProto.DOUBLE), ("float16", TensorProto.FLOAT16),
    ("int64", TensorProto.INT64), ("int32", TensorProto.INT32), ("int8", TensorProto.INT8),
    ("uint8", TensorProto.UINT8), ("bool", TensorProto.BOOL)]}


def _rand(*shape, dtype="float32", seed=0, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(int(lo), int(hi) + 1, shape).astype(dtype)


def check(nodes, inputs, outputs, inits=None, opset=17, out_types=None, rtol=1e-5, atol=1e-5,
          shapes=None, expected=None):
    """Import, compile and run on the VM; compare every output with ONNX Runtime
    (or with ``expected``, numpy formulas, where ONNX Runtime lacks the opset)."""
    if not isinstance(nodes, list):
        nodes = [nodes]
    inits = inits or {}
    out_types = out_types or {}
    vis = [helper.make_tensor_value_info(n, _NP_TO_ONNX[a.dtype], a.shape)
           for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, out_types.get(n, F), None) for n in outputs]
    graph = helper.make_graph(nodes, "case", vis, outs,
                              initializer=[numpy_helper.from_array(np.asarray(v), k)
                                           for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    if expected is None:
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        expected = sess.run(None, inputs)
    mod = from_onnx(model, shapes=shapes)
    got = phasec.VirtualMachine(phasec.build(mod))["main"](*inputs.values())
    got = list(got) if len(outputs) > 1 else [got]
    for g, e, n in zip(got, expected, outputs):
        g = np.asarray(g)
        assert g.shape == e.shape and g.dtype == e.dtype, (n, g.shape, e.shape, g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=n)
    return mod


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"])
def test_binary_broadcasting(op):
    a = _rand(2, 3, 4, lo=0.5, hi=2.0)
    b = _rand(3, 1, seed=1, lo=0.5, hi=2.0)
    check(node(op, ["a", "b"]), {"a": a, "b": b}, ["y"])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_div_and_mod_of_negative_values(dtype, fmod):
    a = np.array([-7, -6, -1, 0, 1, 5, 7, 9], dtype)
    b = np.array([2, -4, 3, 5, -3, 5, -2, 4], dtype)
    check([node("Div", ["a", "b"], ["q"]), node("Mod", ["a", "b"], ["r"], fmod=fmod)],
          {"a": a, "b": b}, ["q", "r"], out_types={"q": _NP_TO_ONNX[np.dtype(dtype)],
                                                   "r": _NP_TO_ONNX[np.dtype(dtype)]})


def test_float_mod_both_conventions():
    a = _rand(20, seed=3, lo=-10, hi=10)
    b = _rand(20, seed=4, lo=0.5, hi=3) * np.where(np.arange(20) % 2, 1, -1).astype(np.float32)
    check([node("Mod", ["a", "b"], ["r0"], fmod=0), node("Mod", ["a", "b"], ["r1"], fmod=1)],
          {"a": a, "b": b}, ["r0", "r1"], atol=1e-4, opset=28)  # float fmod=0: opset 28


@pytest.mark.parametrize("op,attrs", [
    ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.5}), ("HardSigmoid", {}),
    ("HardSwish", {}), ("Softplus", {}), ("Softsign", {}), ("Mish", {}),
    ("ThresholdedRelu", {"alpha": 0.3}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}),
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("Erf", {}), ("Tanh", {}),
    ("Reciprocal", {}), ("Sign", {}), ("Shrink", {"bias": 0.2, "lambd": 0.7}), ("Abs", {}),
    ("Neg", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}),
])
def test_unary_and_activations(op, attrs):
    x = _rand(3, 17, seed=2, lo=-4, hi=4)
    x[0, :3] = [0.5, -0.5, 2.5]  # rounding ties to even
    opset = {"Gelu": 20, "Mish": 18}.get(op, 17)
    check(node(op, ["x"], **attrs), {"x": x}, ["y"], opset=opset, atol=1e-5, rtol=1e-4)


def test_softplus_is_stable_for_large_inputs():
    x = np.array([-100.0, -20.0, 0.0, 20.0, 80.0, 100.0], np.float32)
    check(node("Softplus", ["x"]), {"x": x}, ["y"], rtol=1e-6)


def test_prelu_per_channel_and_legacy_opset6():
    x = _rand(2, 3, 4, 5)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    check(node("PRelu", ["x", "s"]), {"x": x}, ["y"], inits={"s": slope.reshape(3, 1, 1)})
    # ONNX Runtime has no PRelu-6 kernel: the opset-6 per-channel slope by formula
    s = slope.reshape(3, 1, 1)
    check(node("PRelu", ["x", "s"]), {"x": x}, ["y"], inits={"s": slope}, opset=6,
          expected=[np.where(x < 0, x * s, x)])


def test_legacy_broadcast_attribute_opset6():
    a, b = _rand(2, 3, 4, 5), _rand(3, 4, seed=1)
    # ONNX Runtime has no Add-6 kernel: b aligned with a at axis 1, by formula
    check(node("Add", ["a", "b"], broadcast=1, axis=1), {"a": a, "b": b}, ["y"], opset=6,
          expected=[a + b[:, :, None]])


def test_isnan_isinf_and_where():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0, 0.0], np.float32)
    check([node("IsNaN", ["x"], ["n"]), node("IsInf", ["x"], ["i"]),
           node("IsInf", ["x"], ["p"], detect_negative=0),
           node("Where", ["n", "x", "z"], ["w"])],
          {"x": x}, ["n", "i", "p", "w"], inits={"z": np.float32(0)},
          out_types={"n": TensorProto.BOOL, "i": TensorProto.BOOL, "p": TensorProto.BOOL})


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_clip_with_and_without_bounds(dtype):
    x = _rand(4, 5, dtype=dtype, lo=0 if dtype == "uint8" else -10, hi=20)
    lo, hi = np.asarray(2, dtype), np.asarray(9, dtype)
    t = _NP_TO_ONNX[np.dtype(dtype)]
    check([node("Clip", ["x", "lo", "hi"], ["a"]), node("Clip", ["x", "", "hi"], ["b"]),
           node("Clip", ["x"], ["c"])], {"x": x}, ["a", "b", "c"],
          inits={"lo": lo, "hi": hi}, out_types={"a": t, "b": t, "c": t})


def test_clip_attributes_opset6():
    x = _rand(10, lo=-3, hi=3)
    check(node("Clip", ["x"], min=-1.0, max=0.5), {"x": x}, ["y"], opset=6)


@pytest.mark.parametrize("src,dst", [("float32", TensorProto.INT32), ("float32", TensorProto.BOOL),
                                     ("int64", F), ("float32", TensorProto.FLOAT16),
                                     ("uint8", TensorProto.INT8)])
def test_cast(src, dst):
    x = _rand(3, 4, dtype=src, lo=0 if src == "uint8" else -5, hi=200 if src == "uint8" else 5)
    if src == "float32":
        x[0, :3] = [0.0, -0.0, 2.7]
    check(node("Cast", ["x"], to=dst), {"x": x}, ["y"], out_types={"y": dst})


def test_variadic_sum_mean_max_with_broadcast():
    a, b, c = _rand(2, 3), _rand(3, seed=1), _rand(2, 1, seed=2)
    check([node("Sum", ["a", "b", "c"], ["s"]), node("Mean", ["a", "b", "c"], ["m"]),
           node("Max", ["a", "b", "c"], ["x"])], {"a": a, "b": b, "c": c}, ["s", "m", "x"])


# ---------------------------------------------------------------------------
# nn
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [
    {"pads": [1, 2, 0, 1], "strides": [2, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 3]},
    {"pads": [2, 1, 2, 1], "dilations": [2, 3]},
    {"auto_pad": "VALID", "group": 2},
])
def test_conv2d_padding_modes_groups_and_bias(attrs):
    x = _rand(1, 4, 9, 8)
    groups = attrs.get("group", 1)
    w = _rand(6, 4 // groups, 3, 2, seed=1)
    b = _rand(6, seed=2)
    check(node("Conv", ["x", "w", "b"], **attrs), {"x": x}, ["y"], inits={"w": w, "b": b},
          atol=1e-4)


def test_conv1d_and_conv3d():
    x1, w1 = _rand(2, 3, 11), _rand(4, 3, 3, seed=1)
    check(node("Conv", ["x", "w"], pads=[1, 1], strides=[2]), {"x": x1}, ["y"], inits={"w": w1},
          atol=1e-4)
    x3, w3 = _rand(1, 2, 4, 5, 6), _rand(3, 2, 2, 2, 3, seed=1)
    check(node("Conv", ["x", "w"], pads=[0, 1, 1, 1, 0, 1]), {"x": x3}, ["y"], inits={"w": w3},
          atol=1e-4)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "pads": [1, 0, 0, 1]},
    {"strides": [2, 3], "output_padding": [1, 2]},
    {"strides": [2, 2], "output_shape": [10, 9]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"group": 2, "dilations": [2, 1]},
])
def test_conv_transpose(attrs):
    x = _rand(1, 4, 4, 4)
    w = _rand(4, 3 if "group" not in attrs else 1, 3, 3, seed=1)
    check(node("ConvTranspose", ["x", "w", "b"], **attrs), {"x": x}, ["y"],
          inits={"w": w, "b": _rand(3 if "group" not in attrs else 2, seed=3)}, atol=1e-4)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 1]},
])
def test_pooling_padding_and_ceil_mode(op, attrs):
    x = _rand(1, 2, 7, 8)
    if op == "AveragePool":
        attrs = dict(attrs, count_include_pad=1 if "pads" in attrs else 0)
    check(node(op, ["x"], **attrs), {"x": x}, ["y"])


def test_maxpool_on_int8_and_global_pools():
    x = _rand(1, 3, 5, 5, dtype="int8", lo=-100, hi=100)
    check(node("MaxPool", ["x"], kernel_shape=[2, 2]), {"x": x}, ["y"],
          out_types={"y": TensorProto.INT8})
    f = _rand(2, 3, 4, 5)
    check([node("GlobalAveragePool", ["f"], ["a"]), node("GlobalMaxPool", ["f"], ["m"]),
           node("LpPool", ["f"], ["l"], kernel_shape=[2, 2], p=2),
           node("GlobalLpPool", ["f"], ["g"], p=3)], {"f": f}, ["a", "m", "l", "g"], rtol=1e-4)


def test_batch_norm_folds_into_scale_and_shift():
    x = _rand(2, 3, 4, 4)
    params = {"s": _rand(3, seed=1), "b": _rand(3, seed=2), "m": _rand(3, seed=3),
              "v": _rand(3, seed=4, lo=0.5, hi=2)}
    mod = check(node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3), {"x": x},
                ["y"], inits=params, atol=1e-5)
    ops = [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
           if hasattr(b.value, "op") and hasattr(b.value.op, "name")]
    assert ops == ["relax.multiply", "relax.add"]  # statistics folded at import


def test_normalizations():
    x = _rand(2, 4, 3, 5)
    check(node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-4), {"x": x}, ["y"],
          inits={"s": _rand(4, seed=1), "b": _rand(4, seed=2)}, atol=1e-4)
    check(node("GroupNormalization", ["x", "s", "b"], num_groups=2), {"x": x}, ["y"],
          inits={"s": _rand(4, seed=1), "b": _rand(4, seed=2)}, opset=21, atol=1e-4)
    check(node("LRN", ["x"], size=3, alpha=1e-2, beta=0.75, bias=2.0), {"x": x}, ["y"])
    check(node("LpNormalization", ["x"], axis=1, p=1), {"x": x}, ["y"])
    check(node("MeanVarianceNormalization", ["x"]), {"x": x}, ["y"], atol=1e-4)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm_op_and_decomposition_with_statistics(axis):
    x = _rand(2, 3, 4)
    dims = x.shape[axis % 3:]
    inits = {"s": _rand(*dims, seed=1), "b": _rand(*dims, seed=2)}
    check(node("LayerNormalization", ["x", "s", "b"], axis=axis, epsilon=1e-3), {"x": x}, ["y"],
          inits=inits, atol=1e-4)
    check(node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=axis), {"x": x},
          ["y", "mean", "inv"], inits={"s": inits["s"]}, atol=1e-4)


@pytest.mark.parametrize("attrs", [{}, {"transA": 1, "alpha": 0.5}, {"transB": 1, "beta": 2.0}])
def test_gemm(attrs):
    a = _rand(4, 3) if not attrs.get("transA") else _rand(3, 4)
    b = _rand(3, 5, seed=1) if not attrs.get("transB") else _rand(5, 3, seed=1)
    check(node("Gemm", ["a", "b", "c"], **attrs), {"a": a}, ["y"],
          inits={"b": b, "c": _rand(5, seed=2)}, atol=1e-5)


def test_matmul_batched_and_vector():
    check(node("MatMul", ["a", "b"]), {"a": _rand(2, 1, 3, 4), "b": _rand(5, 4, 2, seed=1)},
          ["y"])
    check(node("MatMul", ["a", "b"]), {"a": _rand(4), "b": _rand(3, 4, 2, seed=1)}, ["y"])


@pytest.mark.parametrize("opset,axis", [(11, 1), (13, 1), (13, -1)])
def test_softmax_family_axis_semantics(opset, axis):
    x = _rand(2, 3, 4)
    check([node("Softmax", ["x"], ["s"], axis=axis), node("LogSoftmax", ["x"], ["l"], axis=axis),
           node("Hardmax", ["x"], ["h"], axis=axis)], {"x": x}, ["s", "l", "h"], opset=opset)


def test_dropout_is_identity_with_mask():
    x = _rand(3, 4)
    check(node("Dropout", ["x"], ["y", "m"]), {"x": x}, ["y", "m"],
          out_types={"m": TensorProto.BOOL})


@pytest.mark.parametrize("mode,coord", [("nearest", "asymmetric"), ("linear", "half_pixel"),
                                        ("linear", "align_corners"), ("cubic", "half_pixel")])
def test_resize(mode, coord):
    x = _rand(1, 2, 4, 5)
    check(node("Resize", ["x", "", "", "sizes"], mode=mode, coordinate_transformation_mode=coord),
          {"x": x}, ["y"], inits={"sizes": np.array([1, 2, 7, 10], np.int64)}, atol=1e-5)


def test_quantize_dequantize_per_tensor_and_axis():
    x = _rand(2, 3, 4, lo=-3, hi=3)
    check([node("QuantizeLinear", ["x", "s", "z"], ["q"]),
           node("DequantizeLinear", ["q", "s", "z"], ["d"]),
           node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], axis=1)],
          {"x": x}, ["q", "d", "qc"],
          inits={"s": np.float32(0.05), "z": np.uint8(128), "sc": np.array([0.1, 0.02, 0.05],
                 np.float32), "zc": np.array([0, -5, 3], np.int8)},
          out_types={"q": TensorProto.UINT8, "qc": TensorProto.INT8})


def test_losses():
    x = _rand(4, 5, 3)
    t = np.array([[0, 4, 2], [1, 1, 3], [2, 0, 4], [3, 2, 1]], np.int64)
    w = _rand(5, seed=1, lo=0.2, hi=1.0)
    check([node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["n"], reduction="mean",
                ignore_index=2),
           node("SoftmaxCrossEntropyLoss", ["x", "t"], ["s", "lp"], reduction="sum")],
          {"x": x, "t": t}, ["n", "s", "lp"], inits={"w": w}, atol=1e-5)


# ---------------------------------------------------------------------------
# shapes, indexing, creation
# ---------------------------------------------------------------------------

def test_reshape_zero_and_minus_one_flatten_transpose():
    x = _rand(2, 3, 4)
    check([node("Reshape", ["x", "s"], ["r"]), node("Flatten", ["x"], ["f"], axis=-1),
           node("Transpose", ["x"], ["t"], perm=[2, 0, 1]), node("Transpose", ["x"], ["u"])],
          {"x": x}, ["r", "f", "t", "u"], inits={"s": np.array([0, -1], np.int64)})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, -3], [100, -1], [0, 2], [1, 1]),
    ([-1], [-1000], [1], [-1]),
    ([4, 0], [0, 5], [2, 0], [-2, 2]),
    ([0], [9223372036854775807], [-1], [3]),
])
def test_slice(starts, ends, axes, steps):
    x = _rand(3, 4, 5)
    inits = {"st": np.array(starts, np.int64), "en": np.array(ends, np.int64),
             "ax": np.array(axes, np.int64), "sp": np.array(steps, np.int64)}
    check(node("Slice", ["x", "st", "en", "ax", "sp"]), {"x": x}, ["y"], inits=inits)


def test_split_equal_uneven_and_by_sizes():
    x = _rand(7, 4)
    check(node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3), {"x": x}, ["a", "b", "c"],
          opset=18)
    check(node("Split", ["x", "s"], ["a", "b"], axis=0), {"x": x}, ["a", "b"],
          inits={"s": np.array([2, 5], np.int64)})
    check(node("Split", ["x"], ["a", "b"], axis=1), {"x": x}, ["a", "b"])


def test_concat_squeeze_unsqueeze_expand_tile():
    x, y = _rand(2, 1, 3), _rand(2, 4, 3, seed=1)
    check([node("Concat", ["x", "y"], ["c"], axis=-2),
           node("Squeeze", ["x", "ax1"], ["s"]), node("Unsqueeze", ["x", "ax"], ["u"]),
           node("Expand", ["x", "shape"], ["e"]), node("Tile", ["x", "reps"], ["t"])],
          {"x": x, "y": y}, ["c", "s", "u", "e", "t"],
          inits={"ax1": np.array([1], np.int64), "ax": np.array([0, -1], np.int64),
                 "shape": np.array([3, 1, 4, 1], np.int64), "reps": np.array([2, 3, 1], np.int64)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_gather_elements_argmax(axis):
    x = _rand(3, 4, 5)
    idx = np.array([[0, -1], [2, 1]], np.int64)
    rng = np.random.default_rng(axis + 5)
    el = rng.integers(-x.shape[axis], x.shape[axis], size=(3, 4, 5)).astype(np.int64)
    check([node("Gather", ["x", "i"], ["g"], axis=axis),
           node("GatherElements", ["x", "e"], ["ge"], axis=axis),
           node("ArgMax", ["x"], ["am"], axis=axis, keepdims=0),
           node("ArgMin", ["x"], ["an"], axis=axis, select_last_index=1)],
          {"x": x, "i": idx, "e": el}, ["g", "ge", "am", "an"],
          out_types={"am": TensorProto.INT64, "an": TensorProto.INT64})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims):
    x = _rand(2, 3, 4)
    idx = np.array([[[1, 2], [0, -1]], [[2, 3], [1, 0]]], np.int64)
    if batch_dims == 0:
        idx = np.array([[[1, 2], [0, 1]], [[1, 0], [0, -1]]], np.int64)
    check(node("GatherND", ["x", "i"], batch_dims=batch_dims), {"x": x, "i": idx}, ["y"])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_and_negative_pads(mode):
    x = _rand(2, 3, 4)
    pads = np.array([0, 2, 1, 1, -1, 3] if mode != "reflect" else [0, 2, 1, 1, 0, 3], np.int64)
    inputs = ["x", "p", "v"] if mode == "constant" else ["x", "p"]
    opset = 19 if mode == "wrap" else 17
    check(node("Pad", inputs, mode=mode), {"x": x}, ["y"],
          inits={"p": pads, "v": np.float32(1.5)}, opset=opset)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions(keepdims):
    x = _rand(3, 4, 5, lo=0.1, hi=2)
    ax = {"axes": np.array([0, 2], np.int64)}
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
    check([node(op, ["x", "axes"], [op], keepdims=keepdims) for op in ops], {"x": x}, ops,
          inits=ax, opset=18, rtol=1e-4)


def test_reduce_log_sum_exp_of_minus_infinity_and_bool_max():
    x = np.array([[-np.inf, -np.inf], [1.0, 2.0]], np.float32)
    b = np.array([[True, False], [False, False]])
    check([node("ReduceLogSumExp", ["x", "ax"], ["l"]), node("ReduceMax", ["b", "ax"], ["m"])],
          {"x": x, "b": b}, ["l", "m"], inits={"ax": np.array([1], np.int64)}, opset=20,
          out_types={"m": TensorProto.BOOL})


def test_cumsum_onehot_trilu_eyelike_range():
    x = _rand(3, 4)
    check([node("CumSum", ["x", "a1"], ["c"]), node("CumSum", ["x", "a0"], ["r"], exclusive=1,
                                                    reverse=1),
           node("Trilu", ["x", "k"], ["t"], upper=0), node("EyeLike", ["x"], ["e"], k=1),
           node("Range", ["s", "l", "d"], ["rg"]),
           node("OneHot", ["i", "depth", "vals"], ["oh"], axis=0)],
          {"x": x, "i": np.array([0, 2, -1], np.int64)}, ["c", "r", "t", "e", "rg", "oh"],
          inits={"a1": np.int64(1), "a0": np.int64(0), "k": np.int64(1),
                 "s": np.float32(1), "l": np.float32(4), "d": np.float32(0.5), "depth":
                 np.int64(4), "vals": np.array([0.0, 3.0], np.float32)})


def test_depth_to_space_and_back():
    x = _rand(1, 8, 2, 3)
    check([node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="DCR"),
           node("DepthToSpace", ["x"], ["c"], blocksize=2, mode="CRD"),
           node("SpaceToDepth", ["d"], ["s"], blocksize=2)], {"x": x}, ["d", "c", "s"])


def test_constant_of_shape_small_is_folded_large_is_a_full():
    x = _rand(2, 3)
    mod = check([node("ConstantOfShape", ["small"], ["a"],
                      value=numpy_helper.from_array(np.array([2.5], np.float32))),
                 node("ConstantOfShape", ["big"], ["b"],
                      value=numpy_helper.from_array(np.array([0.5], np.float32))),
                 node("Add", ["x", "a"], ["y"]), node("ReduceSum", ["b"], ["z"], keepdims=0)],
                {"x": x}, ["y", "z"],
                inits={"small": np.array([2, 3], np.int64), "big": np.array([300, 300], np.int64)})
    ops = [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
           if hasattr(b.value, "op") and hasattr(b.value.op, "name")]
    assert ops == ["relax.full", "relax.add", "relax.sum"]


def test_symbolic_dims_through_shape_arithmetic():
    # a transformer-style head split: (b, s, 8) -> (b, s, 2, 4) with b, s symbolic
    nodes = [node("Shape", ["x"], ["sh"]),
             node("Slice", ["sh", "z", "two"], ["bs"]),
             node("Div", ["hidden", "heads"], ["hd"]),
             node("Concat", ["bs", "heads", "hd"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["r"]),
             node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])]
    inits = {"z": np.array([0], np.int64), "two": np.array([2], np.int64),
             "hidden": np.array([8], np.int64), "heads": np.array([2], np.int64)}
    x = _rand(3, 5, 8)
    mod = check(nodes, {"x": x}, ["y"], inits=inits, shapes={"x": ("batch", "seq", 8)})
    ops = [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
           if hasattr(b.value, "op") and hasattr(b.value.op, "name")]
    assert ops == ["relax.reshape", "relax.permute_dims"]


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
    # diagonals (a repeated index): batched, a trace, feeding a contraction
    ("...ii->...i", [(3, 5, 5)]),
    ("ii", [(7, 7)]),
    ("iji,jk->ik", [(3, 4, 3), (4, 2)]),
])
def test_einsum(eq, shapes):
    inputs = {f"x{i}": _rand(*s, seed=i) for i, s in enumerate(shapes)}
    check(node("Einsum", list(inputs), equation=eq), inputs, ["y"], opset=12, atol=1e-5)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank", [3, 4])
def test_rotary_embedding(interleaved, rank):
    # (B, H, S, D) = (2, 4, 3, 8), or 3-D (B, S, H*D) with num_heads
    x = _rand(2, 4, 3, 8) if rank == 4 else _rand(2, 3, 32)
    attrs = {} if rank == 4 else {"num_heads": 4}
    cos, sin = _rand(10, 4, seed=1), _rand(10, 4, seed=2)
    pos = np.array([[0, 3, 5], [1, 2, 9]], np.int64)
    check(node("RotaryEmbedding", ["x", "cos", "sin", "pos"], interleaved=interleaved, **attrs),
          {"x": x, "pos": pos}, ["y"], inits={"cos": cos, "sin": sin}, opset=23)


def test_center_crop_pad_and_windows():
    x = _rand(5, 4, 3)
    check([node("CenterCropPad", ["x", "shape"], ["c"]),
           node("HannWindow", ["n"], ["h"]), node("HammingWindow", ["n"], ["m"], periodic=0),
           node("BlackmanWindow", ["n"], ["b"])],
          {"x": x}, ["c", "h", "m", "b"], inits={"shape": np.array([2, 7, 3], np.int64),
                                                "n": np.int64(10)}, opset=18, atol=1e-6)


def test_dynamic_quantize_and_matmul_integer():
    x = _rand(3, 4, lo=-2, hi=3)
    a = _rand(3, 4, dtype="uint8", lo=0, hi=255)
    b = _rand(4, 2, dtype="uint8", lo=0, hi=255, seed=1)
    check([node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
           node("MatMulInteger", ["a", "b", "az", "bz"], ["m"])],
          {"x": x, "a": a, "b": b}, ["q", "s", "z", "m"],
          inits={"az": np.uint8(12), "bz": np.uint8(200)},
          out_types={"q": TensorProto.UINT8, "z": TensorProto.UINT8, "m": TensorProto.INT32})


def test_batch_norm_training_mode_statistics():
    x = _rand(3, 2, 4, 5)
    params = {"s": _rand(2, seed=1), "b": _rand(2, seed=2), "m": _rand(2, seed=3),
              "v": _rand(2, seed=4, lo=0.5, hi=2)}
    check(node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
               training_mode=1, momentum=0.8), {"x": x}, ["y", "rm", "rv"], inits=params,
          opset=15, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_and_nd(reduction):
    x = _rand(3, 4)
    idx = np.array([[1, 0, 2, 3], [0, 2, 1, 1]], np.int64)
    upd = _rand(2, 4, seed=1)
    nd_idx = np.array([[0, 1], [2, 3]], np.int64)
    check([node("ScatterElements", ["x", "i", "u"], ["e"], axis=1, reduction=reduction),
           node("ScatterND", ["x", "j", "v"], ["n"], reduction=reduction)],
          {"x": x, "i": idx, "u": upd}, ["e", "n"],
          inits={"j": nd_idx, "v": np.array([5.0, -1.0], np.float32)}, opset=18)


def test_cumprod_reverse_exclusive():
    x = _rand(3, 4, lo=0.5, hi=1.5)
    check([node("CumProd", ["x", "a"], ["p"], reverse=1), node("CumProd", ["x", "a"], ["q"],
                                                               exclusive=1)],
          {"x": x}, ["p", "q"], inits={"a": np.int64(1)}, opset=26)


def test_compress_reverse_sequence_and_empty_reductions():
    x = _rand(4, 3)
    empty = np.zeros((0, 3), np.float32)
    check([node("Compress", ["x", "c"], ["k"], axis=0), node("Compress", ["x", "c"], ["f"]),
           node("ReverseSequence", ["x", "lens"], ["r"], batch_axis=1, time_axis=0),
           node("ReduceMax", ["e", "ax"], ["m"], keepdims=1),
           node("ReduceSum", ["e", "ax"], ["s"], keepdims=0)],
          {"x": x, "e": empty}, ["k", "f", "r", "m", "s"],
          inits={"c": np.array([True, False, True]), "lens": np.array([4, 1, 2], np.int64),
                 "ax": np.array([0], np.int64)}, opset=18)


def test_swiglu_and_causal_conv_with_state_by_formula():
    a, b = _rand(2, 6), _rand(2, 6, seed=1)
    sig = 1 / (1 + np.exp(-1.5 * a))
    check(node("SwiGLU", ["a", "b"], alpha=1.5), {"a": a, "b": b}, ["y"], opset=28,
          expected=[a * sig * b], atol=1e-6)
    x, w, bias, past = _rand(2, 3, 5), _rand(3, 1, 3, seed=1), _rand(3, seed=2), _rand(2, 3, 2,
                                                                                       seed=3)
    full = np.concatenate([past, x], axis=2)
    conv = np.stack([sum(full[:, :, i:i + 5] * w[None, :, 0, i:i + 1] for i in range(3))])[0]
    conv = conv + bias[None, :, None]
    check(node("CausalConvWithState", ["x", "w", "b", "p"], ["y", "s"], activation="silu"),
          {"x": x, "p": past}, ["y", "s"], inits={"w": w, "b": bias}, opset=27,
          expected=[conv / (1 + np.exp(-conv)), full[:, :, 5:]], atol=1e-5)


@pytest.mark.parametrize("op", ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                                "Asinh", "Acosh", "Atanh"])
def test_trigonometry(op):
    lo, hi = {"Acosh": (1.0, 3.0), "Asin": (-0.9, 0.9), "Acos": (-0.9, 0.9),
              "Atanh": (-0.9, 0.9)}.get(op, (-1.5, 1.5))
    check(node(op, ["x"]), {"x": _rand(3, 7, lo=lo, hi=hi)}, ["y"], rtol=1e-5, atol=1e-6)


def test_bitwise_and_shifts():
    a = _rand(4, 5, dtype="int32", lo=-1000, hi=1000)
    b = _rand(5, dtype="int32", lo=-1000, hi=1000, seed=1)
    u = _rand(6, dtype="uint8", lo=0, hi=255)
    s = np.array([0, 1, 2, 3, 7, 1], np.uint8)
    t = _NP_TO_ONNX
    check([node("BitwiseAnd", ["a", "b"], ["n"]), node("BitwiseOr", ["a", "b"], ["o"]),
           node("BitwiseXor", ["a", "b"], ["x"]), node("BitwiseNot", ["u"], ["nu"]),
           node("BitShift", ["u", "s"], ["l"], direction="LEFT"),
           node("BitShift", ["u", "s"], ["r"], direction="RIGHT")],
          {"a": a, "b": b, "u": u, "s": s}, ["n", "o", "x", "nu", "l", "r"], opset=18,
          out_types={"n": t[np.dtype("int32")], "o": t[np.dtype("int32")],
                     "x": t[np.dtype("int32")], "nu": t[np.dtype("uint8")],
                     "l": t[np.dtype("uint8")], "r": t[np.dtype("uint8")]})


def test_topk_nonzero_unique():
    x = np.random.default_rng(3).permutation(24).astype(np.float32).reshape(4, 6)
    z = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    u = np.array([2.0, 1.0, 2.0, 5.0, 1.0], np.float32)
    i64 = TensorProto.INT64
    check([node("TopK", ["x", "k"], ["v", "i"], axis=1),
           node("TopK", ["x", "k"], ["sv", "si"], axis=0, largest=0),
           node("NonZero", ["z"], ["nz"]),
           node("Unique", ["u"], ["uy", "ui", "uinv", "uc"], sorted=1)],
          {"x": x, "z": z, "u": u}, ["v", "i", "sv", "si", "nz", "uy", "ui", "uinv", "uc"],
          inits={"k": np.array([3], np.int64)},
          out_types={"i": i64, "si": i64, "nz": i64, "ui": i64, "uinv": i64, "uc": i64})


# ---------------------------------------------------------------------------
# the budget of evaluation at import (phasec.op.fold)
# ---------------------------------------------------------------------------

def test_values_past_the_import_budget_are_computed_at_run_time(monkeypatch):
    # what Range, EyeLike, Trilu, OneHot, the windows and ArgMax compute at
    # import stays within phasec.op.fold's budget; past it (5 elements
    # here), it is a run-time computation with the same results
    import phasec.op.fold

    monkeypatch.setattr(phasec.op.fold, "MAX_FOLD_ELEMENTS", 5)
    x = _rand(3, 4)
    w = _rand(2, 7, seed=1)
    mod = check([node("Range", ["s", "l", "d"], ["rg"]), node("EyeLike", ["x"], ["e"], k=1),
                 node("Trilu", ["x", "k"], ["t"], upper=0),
                 node("OneHot", ["i", "depth", "vals"], ["oh"], axis=0),
                 node("HannWindow", ["n"], ["h"]), node("BlackmanWindow", ["n"], ["b"]),
                 node("ArgMax", ["w"], ["am"], axis=1), node("Hardmax", ["w"], ["hm"])],
                {"x": x, "i": np.array([0, 2, -1], np.int64), "w": w},
                ["rg", "e", "t", "oh", "h", "b", "am", "hm"],
                inits={"s": np.float32(1), "l": np.float32(6), "d": np.float32(0.5),
                       "k": np.int64(1), "depth": np.int64(6),
                       "vals": np.array([0.0, 3.0], np.float32), "n": np.int64(10)},
                out_types={"am": TensorProto.INT64}, opset=18, atol=1e-6)
    ops = {b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
           if hasattr(b.value, "op") and hasattr(b.value.op, "name")}
    assert {"relax.arange", "relax.eye_like", "relax.tril"} <= ops


def test_symbolic_shape_values_past_the_import_budget_are_unsupported():
    # an Expand of a shape value to 10^10 elements: refused before it is made
    graph = helper.make_graph(
        [node("Shape", ["x"], ["s"]), node("Expand", ["s", "to"], ["e"])], "case",
        [helper.make_tensor_value_info("x", F, ["n"])],
        [helper.make_tensor_value_info("e", TensorProto.INT64, None)],
        initializer=[numpy_helper.from_array(np.array([10**10], np.int64), "to")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(phasec.frontend.UnsupportedModelError, match="budget"):
        from_onnx(model)


def test_a_huge_range_is_not_computed_at_import():
    # 10^12 elements: an R.arange in the module, not an array made at import
    graph = helper.make_graph(
        [node("Range", ["s", "l", "d"], ["rg"])], "case", [],
        [helper.make_tensor_value_info("rg", TensorProto.INT64, None)],
        initializer=[numpy_helper.from_array(np.array(v, np.int64), k)
                     for k, v in (("s", 0), ("l", 10**12), ("d", 1))])
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    calls = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if hasattr(b.value, "op")]
    assert [c.op.name for c in calls] == ["relax.arange"]
    assert [d.value for d in calls[0].struct_info.shape] == [10**12]


def test_bitcast_bit_for_bit():
    # (ONNX Runtime gives the same bits where it implements the BitCast.) NaN payloads and -0.0 included; a BitCast of a computed value feeding
    # integer work and cast back; an input that is a strided numpy view
    T = TensorProto
    nodes = [node("BitCast", ["x"], ["i"], to=T.INT32), node("Add", ["x", "x"], ["x2"]),
             node("BitCast", ["x2"], ["i2"], to=T.INT32),
             node("BitwiseAnd", ["i2", "m"], ["masked"]),
             node("BitCast", ["masked"], ["f"], to=T.FLOAT),
             node("BitCast", ["d"], ["l"], to=T.INT64), node("BitCast", ["u"], ["s"], to=T.INT16),
             node("BitCast", ["b"], ["b8"], to=T.UINT8)]
    x = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)[:, ::2]
    x[0, :2] = [-0.0, np.uint32(0x7FC12345).view(np.float32)]
    feeds = {"x": x, "m": np.array(-2 ** 23, np.int32),
             "d": np.array([-0.0, np.inf, 1e-310, np.uint64(0xFFF8000000000123).view(np.float64)]),
             "u": np.array([0, 1, 32768, 65535], np.uint16), "b": np.array([True, False])}
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, t, None) for o, t in
         (("i", T.INT32), ("i2", T.INT32), ("f", T.FLOAT), ("l", T.INT64), ("s", T.INT16),
          ("b8", T.UINT8))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 12
    # numpy's view is the definition (ONNX Runtime lacks some of these BitCasts)
    x2 = (x + x).view(np.int32)
    want = [x.view(np.int32), x2, (x2 & feeds["m"]).view(np.float32),
            feeds["d"].view(np.int64), feeds["u"].view(np.int16), feeds["b"].view(np.uint8)]
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*feeds.values())
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8),
                                      np.ascontiguousarray(w).view(np.uint8))
