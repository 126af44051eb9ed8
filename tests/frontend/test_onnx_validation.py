"""The ONNX importer refuses what ONNX Runtime refuses, naming the node.

Each malformed model is first shown to be refused by ONNX Runtime (the
reference), then by phasec with a FrontendError (exit status 2 from the
CLI), never with "internal error", a traceback or a wrong result. Values
that decide shapes (NaN, Inf, zero, negative) and out-of-range class
targets are clear errors too.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import phasec
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx import from_onnx


def _model(nodes, inputs, outputs, inits=(), opset=21, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    *(helper.make_opsetid(d, v)
                                                      for d, v in extra_opsets)])
    model.ir_version = 10
    return model


def _vi(name, shape, t=TP.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _ort_refuses(model, feeds):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), opts,
                             providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:  # noqa: BLE001 - ORT's own exception types
        return True
    return False


def _run(model, feeds):
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    inits = {t.name for t in model.graph.initializer}
    return vm["main"](*[feeds[vi.name] for vi in model.graph.input if vi.name not in inits])


X = _vi("x", [2, 3])
FX = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
X4 = _vi("x", [1, 4, 2, 2])
FX4 = {"x": np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)}
relu = helper.make_node("Relu", ["x"], ["y"], name="r")

#: name -> (model, feeds, what phasec's message says)
def _attention(d, **attrs):
    qkv = [_vi(n, [1, 2, 3, d]) for n in "qkv"]
    return _model([helper.make_node("Attention", ["q", "k", "v"], ["y"], name="a", **attrs)],
                  qkv, [_vi("y", None)], opset=23)


def _qkv(d):
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((1, 2, 3, d)).astype(np.float32) for n in "qkv"}


def test_an_attention_scale_of_nan_is_the_default_one_as_in_onnxruntime():
    # (ORT reads NaN as "not given": 1/sqrt(head size))
    model, feeds = _attention(4, scale=float("nan")), _qkv(4)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.asarray(_run(model, feeds)), ref, rtol=1e-5, atol=1e-6)


def _ir_version(version):
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [X], [_vi("y", [2, 3])])
    model.ir_version = version
    return model


STRUCTURAL = {
    # (onnx's checker context raised TypeError beyond a C int)
    "ir_version beyond 32 bits": (_ir_version(1 << 31), FX,
                                  "ir_version 2147483648 is not an IR version"),
    "ir_version of 41 bits": (_ir_version(1 << 40), FX,
                              "ir_version 1099511627776 is not an IR version"),
    "node output defined twice": (
        _model([relu, helper.make_node("Neg", ["x"], ["y"], name="n")], [X], [_vi("y", [2, 3])]),
        FX, r"node 1 'n' \(Neg\): output 'y' is already defined by node 0"),
    "node output redefines an input": (
        _model([helper.make_node("Relu", ["x"], ["x"], name="r")], [X], [X]),
        FX, "output 'x' is already defined by a graph input"),
    "node output redefines an initializer": (
        _model([helper.make_node("Relu", ["x"], ["w"], name="r"),
                helper.make_node("Add", ["x", "w"], ["y"])], [X], [_vi("y", [2, 3])],
               [_init("w", np.ones((2, 3), np.float32))]),
        FX, "output 'w' is already defined by an initializer"),
    "graph input declared twice": (
        _model([relu], [X, X], [_vi("y", [2, 3])]), FX, "graph input 'x' is declared twice"),
    "two nodes of one name": (
        _model([relu, helper.make_node("Neg", ["y"], ["z"], name="r")], [X], [_vi("z", [2, 3])]),
        FX, r"node 1 'r' \(Neg\): node 0 has the same name"),
    "opset 99": (_model([relu], [X], [_vi("y", [2, 3])], opset=99), FX,
                 "opset 99 of domain 'ai.onnx' does not exist"),
    "ai.onnx.ml opset 99": (_model([relu], [X], [_vi("y", [2, 3])],
                                   extra_opsets=[("ai.onnx.ml", 99)]), FX,
                            "opset 99 of domain 'ai.onnx.ml'"),
    "no outputs": (_model([relu], [X], []), FX, "the graph has no outputs"),
    "input never produced": (
        _model([helper.make_node("Add", ["x", "zz"], ["y"], name="a")], [X], [_vi("y", [2, 3])]),
        FX, r"node 0 'a' \(Add\): input 'zz' is not a graph input"),
    "cycle": (
        _model([helper.make_node("Add", ["x", "b"], ["a"], name="p"),
                helper.make_node("Relu", ["a"], ["b"], name="q")], [X], [_vi("a", [2, 3])]),
        FX, "cycle"),
    "operator not in the opset": (
        _model([helper.make_node("Gelu", ["x"], ["y"], name="g")], [X], [_vi("y", [2, 3])],
               opset=13), FX, r"node 0 'g' \(Gelu\), opset 13: No Op registered"),
    "unknown attribute": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r", foo=1)], [X],
               [_vi("y", [2, 3])]), FX, "Unrecognized attribute: foo"),
    "attribute of the wrong type": (
        _model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=1.5)], [X],
               [_vi("y", [2, 3])]), FX, "Mismatched attribute type"),
    "declared output type wrong": (
        _model([relu], [X], [_vi("y", [2, 3], TP.INT64)]), FX,
        "output 'y' is declared INT64 but the node makes FLOAT"),
    # onnx's whole-graph shape inference crashed (SIGSEGV) on this one
    "reduction axis beyond a scalar, then EyeLike": (
        _model([helper.make_node("ReduceLogSum", ["x", "a"], ["r"], name="rl", keepdims=2),
                helper.make_node("EyeLike", ["r"], ["y"], name="e", dtype=1)],
               [_vi("x", [])], [_vi("y", None)], [_init("a", np.array([5], np.int64))]),
        {"x": np.array(1.0, np.float32)}, r"node 0 'rl' \(ReduceLogSum\).*axis must be in"),
    "split sizes negative": (
        _model([helper.make_node("Split", ["x", "s"], ["a", "b"], name="sp", axis=1)], [X],
               [_vi("a", None), _vi("b", None)], [_init("s", np.array([-1, 4], np.int64))]),
        FX, r"node 0 'sp' \(Split"),
    "split sizes not the axis": (
        _model([helper.make_node("Split", ["x", "s"], ["a", "b"], name="sp", axis=1)], [X],
               [_vi("a", None), _vi("b", None)], [_init("s", np.array([1, 1], np.int64))]),
        FX, r"node 0 'sp' \(Split"),
    "TopK k beyond the axis": (
        _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="t", axis=1)], [X],
               [_vi("v", None), _vi("i", None, TP.INT64)], [_init("k", np.array([5], np.int64))]),
        FX, r"node 0 't' \(TopK"),
    "TopK k negative": (
        _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="t", axis=1)], [X],
               [_vi("v", None), _vi("i", None, TP.INT64)],
               [_init("k", np.array([-1], np.int64))]),
        FX, "k=-1 is out of range"),
    "DepthToSpace blocksize 0": (
        _model([helper.make_node("DepthToSpace", ["x"], ["y"], name="d", blocksize=0)], [X4],
               [_vi("y", None)]), FX4, r"node 0 'd' \(DepthToSpace\).*Blocksize must be positive"),
    "SpaceToDepth blocksize 0": (
        _model([helper.make_node("SpaceToDepth", ["x"], ["y"], name="d", blocksize=0)], [X4],
               [_vi("y", None)]), FX4, r"node 0 'd' \(SpaceToDepth\)"),
    "SpaceToDepth blocksize not dividing": (
        _model([helper.make_node("SpaceToDepth", ["x"], ["y"], name="d", blocksize=3)], [X4],
               [_vi("y", None)]), FX4, "the height 2 is not a multiple of the blocksize 3"),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_violations_are_refused_like_onnxruntime(name):
    model, feeds, message = STRUCTURAL[name]
    assert _ort_refuses(model, feeds), "ONNX Runtime accepts it: no longer a reference case"
    with pytest.raises(FrontendError, match=message):
        from_onnx(model)


def _scalar_inits(**values):
    return [_init(k, np.asarray(v, np.float32)) for k, v in values.items()]


def _range(start, limit, delta):
    return _model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                  [_vi("y", None)], _scalar_inits(s=start, l=limit, d=delta))


def _resize(scales):
    return _model([helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs")], [X4],
                  [_vi("y", None)], [_init("sc", np.array(scales, np.float32))])


def _upsample(scales):
    return _model([helper.make_node("Upsample", ["x", "sc"], ["y"], name="up")], [X4],
                  [_vi("y", None)], [_init("sc", np.array(scales, np.float32))], opset=9)


def _window(op, n):
    return _model([helper.make_node(op, ["n"], ["y"], name="w")], [], [_vi("y", None)],
                  [_init("n", np.array(n, np.int64))])


def _nll(target, op="NegativeLogLikelihoodLoss", **attrs):
    return _model([helper.make_node(op, ["x", "t"], ["y"], name="loss", **attrs)],
                  [_vi("x", [3, 4])], [_vi("y", None)], [_init("t", np.array(target, np.int64))])


X34 = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
NAN, INF = float("nan"), float("inf")

#: name -> (model, feeds, what phasec's message says)
SHAPE_VALUES = {
    "Range limit NaN": (_range(0, NAN, 1), {}, "must be finite"),
    "Range start Inf": (_range(-INF, 1, 1), {}, "must be finite"),
    "Range delta NaN": (_range(0, 1, NAN), {}, "must be finite"),
    "Range delta 0": (_range(0, 10, 0), {}, "delta 0"),
    "Range too long": (_range(0, 1e30, 1e-30), {}, "more than a tensor can hold"),
    "Resize scale NaN": (_resize([1, 1, NAN, 2]), FX4, "finite number above 0"),
    "Resize scale Inf": (_resize([1, 1, INF, 2]), FX4, "finite number above 0"),
    "Resize scale 0": (_resize([1, 1, 0, 2]), FX4, "finite number above 0"),
    "Resize scale negative": (_resize([1, 1, -1, 2]), FX4, "finite number above 0"),
    "Upsample scale NaN": (_upsample([1, 1, NAN, 2]), FX4, "finite and at least 1"),
    "Upsample scale 0": (_upsample([1, 1, 0, 2]), FX4, "finite and at least 1"),
    "HannWindow 0": (_window("HannWindow", 0), {}, "HannWindow"),
    "HammingWindow -1": (_window("HammingWindow", -1), {}, "HammingWindow"),
    "BlackmanWindow 0": (_window("BlackmanWindow", 0), {}, "BlackmanWindow"),
    "NLL target beyond the classes": (_nll([0, 5, 1]), X34, "target 5 is not a class index"),
    "NLL target -100 without ignore_index": (_nll([0, -100, 1]), X34,
                                             "target -100 is not a class index"),
    "SoftmaxCrossEntropy target beyond": (_nll([0, 4, 1], "SoftmaxCrossEntropyLoss"), X34,
                                          "target 4 is not a class index"),
    "OneHot depth 0": (
        _model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh")],
               [_vi("i", [2], TP.INT64)], [_vi("y", None)],
               [_init("d", np.array([0], np.int64)), _init("v", np.array([0, 1], np.float32))]),
        {"i": np.array([0, 1], np.int64)}, "depth 0: must be a positive number"),
    "ConstantOfShape beyond int64 bytes": (
        _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="c")], [],
               [_vi("y", None)], [_init("s", np.array([1 << 31, 1 << 31], np.int64))]),
        {}, "more elements than a tensor can hold"),
    "Gather from an empty axis": (
        _model([helper.make_node("Gather", ["x", "i"], ["y"], name="g")], [_vi("x", [0, 2])],
               [_vi("y", None)], [_init("i", np.array([0], np.int64))]),
        {"x": np.zeros((0, 2), np.float32)}, "index 0 is out of range for axis 0 of extent 0"),
    "integer Div by a zero constant": (
        _model([helper.make_node("Div", ["x", "z"], ["y"], name="dv")], [_vi("x", [2], TP.INT32)],
               [_vi("y", None, TP.INT32)], [_init("z", np.array([1, 0], np.int32))]),
        {"x": np.array([3, 4], np.int32)}, "integer Div by zero"),
    "LRN even size": (
        _model([helper.make_node("LRN", ["x"], ["y"], name="l", size=2)], [X4], [_vi("y", None)]),
        FX4, "size must be odd"),
    "GlobalMaxPool over an empty axis": (
        _model([helper.make_node("GlobalMaxPool", ["x"], ["y"], name="p")], [_vi("x", [1, 2, 0])],
               [_vi("y", None)]), {"x": np.zeros((1, 2, 0), np.float32)}, "only N may be 0"),
    "GroupNormalization groups not dividing": (
        _model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                                 num_groups=3)], [X4], [_vi("y", None)],
               [_init("s", np.ones(3, np.float32)), _init("b", np.zeros(3, np.float32))]),
        FX4, "does not divide the 4 channels"),
    "LayerNormalization over an empty axis": (
        _model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln")],
               [_vi("x", [3, 0])], [_vi("y", None)], [_init("s", np.ones(0, np.float32))]),
        {"x": np.zeros((3, 0), np.float32)}, "are empty"),
    "ConstantOfShape of a 0-d shape": (
        _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="c")], [],
               [_vi("y", None)], [_init("s", np.array(2, np.int64))]),
        {}, "the shape must be a 1-D tensor"),
    "Attention scale below 0": (
        _attention(4, scale=-1.0), _qkv(4), r"\(Attention, opset 23\): scale -1.0: must be "
                                             r"greater than 0"),
    "Attention of head size 0": (_attention(0), _qkv(0), "the head size is 0"),
    "ConstantOfShape of an empty value": (
        _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="c",
                                 value=numpy_helper.from_array(np.zeros(0, np.float32)))], [],
               [_vi("y", None)], [_init("s", np.array([2], np.int64))]),
        {}, r"value attribute must be a one-element tensor, not one of shape \(0,\)"),
    "ConstantOfShape of a two-element value": (
        _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="c",
                                 value=numpy_helper.from_array(np.ones(2, np.float32)))], [],
               [_vi("y", None)], [_init("s", np.array([2], np.int64))]),
        {}, r"value attribute must be a one-element tensor, not one of shape \(2,\)"),
    "Slice starts 0-d": (
        _model([helper.make_node("Slice", ["x", "b", "e"], ["y"], name="sl")], [X],
               [_vi("y", None)], [_init("b", np.array(0, np.int64)),
                                  _init("e", np.array(1, np.int64))]),
        FX, "starts must be a 1-D tensor"),
    "GatherElements index beyond the axis": (
        _model([helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge")], [X],
               [_vi("y", None)], [_init("i", np.array([[0, 3, 1]], np.int64))]),
        FX, "index 3 is out of range for axis 0 of extent 2"),
    "Cast with saturate to int": (
        _model([helper.make_node("Cast", ["x"], ["y"], name="c", to=TP.INT32, saturate=0)], [X],
               [_vi("y", None, TP.INT32)]), FX, "saturate=0 is only for casts to float 8"),
    "Mod with fmod 2": (
        _model([helper.make_node("Mod", ["x", "x"], ["y"], name="m", fmod=2)], [X],
               [_vi("y", None)]), FX, "fmod=2: must be 0 or 1"),
    "Pad constant_value of 4 elements": (
        _model([helper.make_node("Pad", ["x", "p", "v"], ["y"], name="pd")], [X],
               [_vi("y", None)], [_init("p", np.zeros(4, np.int64)),
                                  _init("v", np.zeros(4, np.float32))]),
        FX, "constant_value must be one element"),
    "MaxPool window beyond the input": (
        _model([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3])],
               [_vi("x", [2, 2, 1])], [_vi("y", None)]),
        {"x": np.ones((2, 2, 1), np.float32)}, "larger than the padded input"),
}


@pytest.mark.parametrize("name", sorted(SHAPE_VALUES))
def test_bad_shape_values_are_clear_errors(name):
    model, feeds, message = SHAPE_VALUES[name]
    assert _ort_refuses(model, feeds)
    with pytest.raises(FrontendError, match=message):
        _run(model, feeds)


def test_run_time_loss_target_out_of_range_is_an_error_not_nan():
    model = _model([helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="l")],
                   [_vi("x", [3, 4]), _vi("t", [3], TP.INT64)], [_vi("y", None)])
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    x = X34["x"]
    bad = np.array([0, 7, 1], np.int64)
    assert _ort_refuses(model, {"x": x, "t": bad})
    with pytest.raises(phasec.errors.PhasecError, match="index 7 is out of range"):
        vm["main"](x, bad)
    # a negative target in [-C, 0) counts from the end, as in ONNX Runtime
    good = np.array([0, -1, 2], np.int64)
    ref = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"x": x, "t": good})
    np.testing.assert_allclose(vm["main"](x, good), ref[0], rtol=1e-6)


def test_accepted_like_onnxruntime():
    """What ORT accepts stays accepted: nodes out of order, an unused
    unknown domain (of any version), TopK with k=0 (empty outputs), ReduceMax of an empty
    tensor, 0/1 attributes holding other values (read as ORT reads each), a Constant
    with two value attributes (the first counts), a pooling window one
    larger than the input (empty output); results equal to ORT's."""
    cases = [
        _model([helper.make_node("Neg", ["t"], ["y"]), helper.make_node("Relu", ["x"], ["t"])],
               [X], [_vi("y", [2, 3])]),
        _model([relu], [X], [_vi("y", [2, 3])], extra_opsets=[("org.example", 1)]),
        # (of a version beyond a C int: onnx's checker context raised TypeError)
        _model([relu], [X], [_vi("y", [2, 3])], extra_opsets=[("org.example", 1 << 40)]),
        _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)], [X],
               [_vi("v", None), _vi("i", None, TP.INT64)], [_init("k", np.array([0], np.int64))]),
        _model([helper.make_node("ReduceMax", ["x"], ["y"], keepdims=0)], [_vi("x", [0])],
               [_vi("y", None)]),
        _model([helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=2)], [X],
               [_vi("y", None)], [_init("a", np.array([1], np.int64))]),
    ]
    cases += [
        _model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=2)], [X],
               [_vi("v", None), _vi("i", None, TP.INT64)], [_init("k", np.array([2], np.int64))]),
        _model([helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0], value_float=3.0),
                helper.make_node("Add", ["x", "c"], ["y"])], [_vi("x", [2])], [_vi("y", None)]),
        _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2])], [_vi("x", [2, 2, 1])],
               [_vi("y", None)]),
    ]
    cases.append(_model([helper.make_node("ArgMax", ["x"], ["y"], axis=0, select_last_index=4)],
                        [X], [_vi("y", None, TP.INT64)]))
    feeds = [FX, FX, FX, FX, {"x": np.zeros((0,), np.float32)}, FX, FX,
             {"x": np.ones(2, np.float32)}, {"x": np.ones((2, 2, 1), np.float32)},
             # ties, no NaN (which index a NaN gives ONNX leaves open): ORT reads
             # select_last_index=4 as true, the last of the tied indices
             {"x": np.array([[3, 1, 2], [3, 1, 0]], np.float32)}]
    for model, f in zip(cases, feeds):
        ref = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, f)
        out = _run(model, f)
        outs = list(out) if len(ref) > 1 else [out]
        for a, r in zip(outs, ref):
            a = np.asarray(a)
            assert a.shape == r.shape and a.dtype == r.dtype
            np.testing.assert_allclose(a, r)


def test_cli_refuses_an_invalid_model_with_status_2(tmp_path):
    path = tmp_path / "dup.onnx"
    model, _, _ = STRUCTURAL["node output defined twice"]
    onnx.save(model, str(path))
    proc = subprocess.run([sys.executable, "-m", "phasec", "import", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "node 1 'n' (Neg): output 'y' is already defined by node 0" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
