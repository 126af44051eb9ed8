"""The ONNX frontend's importer: the module it builds (phase, verification,
spans, names, constants, parameters, symbolic dimensions) and its errors.
Numbers are checked against ONNX Runtime; per-operator tests live in
test_onnx_ops.py, whole models in test_onnx_models.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec import verifier
from phasec.frontend import FrontendError, UnsupportedModelError
from phasec.frontend.onnx import from_onnx, from_onnx_with_params, supported_ops
from phasec.ir import Call, Phase, TensorStructInfo, tir


def _model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _bindings(mod):
    return [b for block in mod["main"].body.blocks for b in block.bindings]


def _ops(mod):
    return [b.value.op.name for b in _bindings(mod) if isinstance(b.value, Call)]


def _mlp():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    b = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["h2"], name="bias"),
             helper.make_node("Relu", ["h2"], ["y"], name="act")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w, b])


def test_import_phasec_does_not_import_onnx():
    code = ("import sys, phasec, phasec.frontend, phasec.frontend.onnx; "
            "assert 'onnx' not in sys.modules, 'onnx imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_is_verified_ingestion_with_spans_and_names():
    mod = from_onnx(_mlp())
    assert mod.phase is Phase.INGESTION
    assert verifier.check(mod) == []
    main = mod["main"]
    (x,) = main.params
    assert x.name_hint == "x"
    batch, four = x.struct_info.shape
    assert isinstance(batch, tir.Var) and batch.name == "batch" and four.value == 4
    binds = _bindings(mod)
    assert [b.var.name_hint for b in binds if isinstance(b.value, Call)] == ["h", "h2", "y"]
    spans = [str(b.var.span) for b in binds if isinstance(b.value, Call)]
    assert spans == ["g.onnx node 'mm' (MatMul):1:1", "g.onnx node 'bias' (Add):2:1",
                     "g.onnx node 'act' (Relu):3:1"]
    # weights are constants
    assert _ops(mod) == ["relax.matmul", "relax.add", "relax.nn.relu"]


@pytest.mark.parametrize("batch", [1, 5])
def test_symbolic_batch_runs_against_onnxruntime(batch):
    model = _mlp()
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    np.testing.assert_allclose(vm["main"](x), _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_keep_params_in_input():
    mod, params = from_onnx_with_params(_mlp(), keep_params_in_input=True)
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x", "w", "b"]
    assert main.attrs["num_input"] == 1
    assert list(params) == ["w", "b"] and params["w"].shape == (4, 3)
    assert verifier.check(mod) == []
    x = np.ones((2, 4), np.float32)
    vm = phasec.VirtualMachine(phasec.build(mod))
    np.testing.assert_allclose(vm["main"](x, *params.values()), _ort(_mlp(), {"x": x})[0],
                               rtol=1e-6)


def test_shapes_argument_overrides_declared_shapes():
    mod = from_onnx(_mlp(), shapes={"x": (7, 4)})
    assert [d.value for d in mod["main"].params[0].struct_info.shape] == [7, 4]
    with pytest.raises(FrontendError, match="'nope'.*not graph inputs.*'x'"):
        from_onnx(_mlp(), shapes={"nope": (1,)})


def test_shape_chain_folds_at_import_with_symbolic_dims():
    # x: (n, 6) -> Shape -> Gather(0) -> Unsqueeze -> Concat([n, 2, 3]) -> Reshape
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Mul", ["r", "two"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "rest"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mod = from_onnx(model)
    assert _ops(mod) == ["relax.reshape", "relax.multiply"]
    sinfo = _bindings(mod)[-1].var.struct_info
    assert isinstance(sinfo, TensorStructInfo) and sinfo.shape[0].name == "n"
    vm = phasec.VirtualMachine(phasec.build(mod))
    for n in (1, 4):
        x = np.arange(n * 6, dtype=np.float32).reshape(n, 6)
        np.testing.assert_array_equal(vm["main"](x), _ort(model, {"x": x})[0])


def test_unsupported_nodes_are_listed_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Bernoulli", ["a"], ["b"], name="bern"),
             helper.make_node("Resize", ["b", "", "scales"], ["c"], name="rs", mode="nearest",
                              coordinate_transformation_mode="tf_crop_and_resize"),
             helper.make_node("MyOp", ["x"], ["d"], name="custom", domain="com.example"),
             helper.make_node("Relu", ["b"], ["e"], name="after_unsupported")]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 1, 2, 2])],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "cde"],
                   [scales], name="bad")
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(model)
    err = info.value
    assert [(n.name, n.op_type, n.opset) for n in err.nodes] == [
        ("bern", "Bernoulli", 17), ("custom", "com.example:MyOp", 1)]
    assert "node 1 'bern' (Bernoulli, opset 17): operator not supported" in str(err)
    # the Resize after Bernoulli is not converted (its input is unknown); alone it is reported
    nodes2 = [helper.make_node("Resize", ["x", "", "s"], ["c"], name="rs", mode="nearest")]
    model2 = _model(nodes2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
                             helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                    [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)], [])
    with pytest.raises(UnsupportedModelError, match="'rs' \\(Resize, opset 17\\): "
                                                   ".*must be known at import time"):
        from_onnx(model2)
    assert isinstance(err, phasec.errors.InputError)


def test_bad_files_are_clear_errors(tmp_path):
    from phasec.errors import InputError

    with pytest.raises(InputError, match="missing.onnx': no such file"):
        from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(InputError, match="it is a directory"):
        from_onnx(tmp_path)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07this is not a protobuf\xff\xff")
    with pytest.raises(FrontendError, match="junk.onnx"):
        from_onnx(junk)


def test_undefined_tensor_is_a_clear_error():
    nodes = [helper.make_node("Relu", ["nowhere"], ["y"], name="r")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(FrontendError, match="node 0 'r' \\(Relu\\): input 'nowhere' is not a graph input"):
        from_onnx(model)


def test_supported_ops_cover_the_issue_list():
    needed = {"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Tanh",
              "Softmax", "LayerNormalization", "Gelu", "Reshape", "Transpose", "Gather",
              "Unsqueeze", "Squeeze", "Concat", "Slice", "Split", "Shape", "ConstantOfShape",
              "Cast", "Where", "Expand", "ReduceMean", "ReduceSum", "Range", "Equal", "Not",
              "Conv", "BatchNormalization", "LRN", "MaxPool", "AveragePool",
              "GlobalAveragePool", "Dropout", "Relu", "Sum", "Flatten", "Pad"}
    assert needed <= set(supported_ops())


def test_old_opset_semantics_are_reported_per_operator():
    # Cast's "to" was a string before opset 6; Relu has not changed since opset 1
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["y"], name="cast", to="INT32")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [2])], opset=5)
    with pytest.raises(UnsupportedModelError, match="'cast' \\(Cast, opset 5\\): opset 5 "
                                                   "semantics not supported"):
        from_onnx(model)
    relu_only = _model(nodes[:1], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])], opset=1)
    assert _ops(from_onnx(relu_only)) == ["relax.nn.relu"]


def test_an_input_of_an_unsupported_dtype_is_named_as_an_input():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["z"], ["y"])], "g",
        [helper.make_tensor_value_info("z", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])])
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(helper.make_model(graph))
    text = str(info.value)
    assert "has 1 unsupported graph input:" in text and "unsupported node" not in text
    assert "\n  graph input 'z' has element type COMPLEX64, which phasec does not compute with" \
        in text and "graph input," not in text
