"""The command line on ONNX models: ``phasec import`` (TVMScript or JSON,
written atomically), and ``phasec run`` / ``phasec build`` / ``phasec opt``
taking a ``.onnx`` file as they take a module file, with ``--inputs`` by ONNX
input name. Results are checked against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.cli import main
from phasec.frontend.onnx import from_onnx


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def model_file(tmp_path):
    """y = relu(x @ w + b) with x: (batch, 4), named like a Caffe2 export ('gpu_0/data')."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
    b = numpy_helper.from_array(np.array([0.1, -0.2, 0.3], np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["gpu_0/data", "w", "b"], ["h"], name="fc"),
         helper.make_node("Relu", ["h"], ["prob"], name="act")], "tiny",
        [helper.make_tensor_value_info("gpu_0/data", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 3])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "tiny.onnx"
    onnx.save(model, path)
    return path


def test_import_prints_tvmscript_that_parses_back(capsys, model_file):
    code, out, err = run_cli(capsys, "import", model_file)
    assert code == 0, err
    assert "def main(gpu_0_data: R.Tensor((\"batch\", 4)" in out
    phasec.assert_structural_equal(phasec.parse(out), from_onnx(model_file))


def test_import_prints_what_tvm_reads_and_the_legacy_spelling_on_request(capsys, model_file):
    import tvm

    code, out, err = run_cli(capsys, "import", model_file)
    assert code == 0, err
    tvm.script.from_source(out)  # TVM 0.27 reads phasec's default spelling
    code, legacy, err = run_cli(capsys, "import", model_file, "--syntax", "legacy")
    assert code == 0, err
    assert "import tir as T" in legacy and "import tirx as T" in out
    phasec.assert_structural_equal(phasec.parse(legacy), phasec.parse(out))


def test_import_writes_json_and_tvmscript_files(capsys, model_file, tmp_path):
    for name in ("m.json", "m.py"):
        out_path = tmp_path / name
        code, out, err = run_cli(capsys, "import", model_file, "-o", out_path,
                                 "--shape", "gpu_0/data=7,4")
        assert code == 0, err
        assert out == "" and f"wrote {out_path}" in err
        mod = phasec.load(out_path)
        assert [int(d.value) for d in mod["main"].params[0].struct_info.shape] == [7, 4]


def test_import_errors_leave_the_previous_file(capsys, tmp_path, model_file):
    out_path = tmp_path / "keep.py"
    out_path.write_text("previous")
    bad = helper.make_model(helper.make_graph(
        [helper.make_node("Bernoulli", ["x"], ["y"], name="b1"),
         helper.make_node("Bernoulli", ["x"], ["z"], name="b2")], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    bad_path = tmp_path / "bad.onnx"
    onnx.save(bad, bad_path)
    code, out, err = run_cli(capsys, "import", bad_path, "-o", out_path)
    assert code == 2
    assert "2 unsupported nodes" in err and "'b1' (Bernoulli, opset 17)" in err and "Traceback" not in err
    assert out_path.read_text() == "previous"
    code, _, err = run_cli(capsys, "import", model_file, "--shape", "gpu_0/data=1,x y")
    assert code == 2 and "dimension 'x y'" in err
    code, _, err = run_cli(capsys, "import", tmp_path / "none.onnx")
    assert code == 2 and "no such file" in err


def test_run_onnx_model_with_inputs_by_onnx_name(capsys, tmp_path, model_file):
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    npz = tmp_path / "in.npz"
    np.savez(npz, **{"gpu_0/data": x})
    code, out, err = run_cli(capsys, "run", model_file, "--inputs", npz, "-q")
    assert code == 0, out + err
    assert "gpu_0_data: float32[5, 4]" in out and out.rstrip().endswith("PASS")
    # random inputs: the symbolic batch dimension from --dim
    code, out, _ = run_cli(capsys, "run", model_file, "--dim", "batch=3", "-q")
    assert code == 0 and "float32[3, 4]" in out


def test_build_onnx_model_then_run_the_executable(capsys, tmp_path, model_file):
    exe_path = tmp_path / "tiny.pvm"
    code, out, err = run_cli(capsys, "build", model_file, "-o", exe_path)
    assert code == 0, err
    vm = phasec.VirtualMachine(phasec.Executable.load(exe_path))
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    sess = ort.InferenceSession(onnx.load(model_file).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(vm["main"](x), sess.run(None, {"gpu_0/data": x})[0], rtol=1e-6)


def test_opt_reads_onnx_models(capsys, model_file):
    code, out, err = run_cli(capsys, "opt", model_file, "--passes", "LambdaLifting,FoldConstant")
    assert code == 0, err
    assert 'I.module_attrs({"phase": "optimization"})' in out
