"""ONNX integer ``Div`` and ``Mod`` against ONNX Runtime: equal results for
non-zero divisors (negative operands, truncating Div and ``fmod=1``,
flooring ``fmod=0``, signed and unsigned types), and a divisor input holding
0 at run time fails both -- ORT with "Integer division by zero", phasec
with a DivisionByZeroError, and ``phasec run`` with exit 1 and one line,
no traceback (never a quotient or remainder of 0)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import phasec
from phasec.cli import main
from phasec.errors import DivisionByZeroError
from phasec.frontend.onnx import from_onnx


def _model(dtype: str) -> onnx.ModelProto:
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]),
             helper.make_node("Mod", ["a", "b"], ["r0"], fmod=0),
             helper.make_node("Mod", ["a", "b"], ["r1"], fmod=1)]
    graph = helper.make_graph(
        nodes, "intdiv", [helper.make_tensor_value_info(n, t, ["n"]) for n in "ab"],
        [helper.make_tensor_value_info(n, t, ["n"]) for n in ("q", "r0", "r1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ort(model: onnx.ModelProto, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"a": a, "b": b})


def _operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    if info.min < 0:  # (not INT_MIN / -1: undefined in C++, ORT's kernel may trap)
        a = [7, -7, 7, -7, 0, info.min, info.max, -1, 5, info.min + 1]
        b = [2, 2, -2, -2, -3, 3, -1, info.max, info.min, -1]
    else:
        a = [7, 0, info.max, 5, 1]
        b = [2, 3, 1, info.max, 2]
    return np.array(a, dtype), np.array(b, dtype)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
def test_div_and_mod_match_onnx_runtime_and_a_zero_divisor_fails_both(dtype):
    model = _model(dtype)
    a, b = _operands(dtype)
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    for got, want in zip(vm["main"](a, b), _ort(model, a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    b[2] = 0
    with pytest.raises(Exception, match="by zero"):  # ORT's own exception type
        _ort(model, a, b)
    with pytest.raises(DivisionByZeroError, match="integer division by zero in kernel"):
        vm["main"](a, b)


@pytest.mark.parametrize("fmod", [None, 0, 1])
def test_phasec_run_of_a_zero_divisor_is_one_line_and_exit_1(tmp_path, capsys, fmod):
    t = onnx.TensorProto.INT32
    node = (helper.make_node("Div", ["a", "b"], ["y"]) if fmod is None
            else helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, [4]) for n in "ab"],
                              [helper.make_tensor_value_info("y", t, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    a, b = np.array([7, -7, 3, 1], "int32"), np.array([2, 0, -2, 1], "int32")
    np.savez(tmp_path / "in.npz", a=a, b=b)
    with pytest.raises(Exception, match="by zero"):
        _ort(model, a, b)
    code = main(["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"), "-q"])
    out, err = capsys.readouterr()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "phasec run: error: integer division by zero in kernel 'fused_"), err
    assert "Traceback" not in out + err
