"""The integer GEMM (uint8 x int8 -> int32 through T.dot4_u8s8) behind ONNX
MatMulInteger: every signedness ONNX allows, zero points at their extremes,
odd and prime shapes, a constant and a run-time B, against ONNX Runtime and
numpy's int64 product; and the exact path of a CPU without VNNI
(``PHASEC_CPU_FEATURES``) in a process of its own."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

from helpers.cpu_features import run_without_vnni

_ONNX_TYPE = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}


def _range(dtype: str) -> tuple[int, int]:
    return (0, 256) if dtype == "uint8" else (-128, 128)


def _model(M: int, K: int, N: int, adt: str, bdt: str, za: int, zb: int, b: np.ndarray,
           const_b: bool) -> onnx.ModelProto:
    inits = [helper.make_tensor("za", _ONNX_TYPE[adt], [], [za]),
             helper.make_tensor("zb", _ONNX_TYPE[bdt], [], [zb])]
    inputs = [helper.make_tensor_value_info("a", _ONNX_TYPE[adt], [M, K])]
    if const_b:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", _ONNX_TYPE[bdt], [K, N]))
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])], "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.INT32, [M, N])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def check_matmul_integer(M: int, K: int, N: int, adt: str, bdt: str, za: int, zb: int,
                         const_b: bool) -> None:
    """phasec's MatMulInteger equals ORT's and numpy's int64 product exactly."""
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    a = rng.integers(*_range(adt), (M, K)).astype(adt)
    b = rng.integers(*_range(bdt), (K, N)).astype(bdt)
    a[0] = _range(adt)[1] - 1   # the extremes of both operands
    b[:, 0] = _range(bdt)[0]
    model = _model(M, K, N, adt, bdt, za, zb, b, const_b)
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)[0]
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    result = vm["main"](*feeds.values())
    out = np.asarray(result.numpy() if hasattr(result, "numpy") else result)
    exact = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, exact)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("M,K,N,adt,bdt,za,zb,const_b", [
    (7, 13, 5, "uint8", "int8", 255, -128, True),     # K not a multiple of 4
    (31, 67, 41, "uint8", "int8", 0, 127, True),      # primes, whole tiles and rests
    (1, 3, 1, "int8", "int8", 127, 127, False),       # s8 x s8: A shifted by 128
    (17, 64, 19, "int8", "uint8", -128, 0, True),     # u8 B shifted by -128
    (9, 37, 33, "uint8", "uint8", 0, 255, False),
    # matrix-vector products of a constant B: whole packed panels and the
    # columns past them, packed too (zero-padded)
    (1, 37, 557, "uint8", "int8", 131, -3, True),
    (2, 64, 300, "uint8", "int8", 0, 5, True),
])
def test_matmul_integer_exact(M, K, N, adt, bdt, za, zb, const_b):
    check_matmul_integer(M, K, N, adt, bdt, za, zb, const_b)


def test_matmul_integer_without_vnni():
    """The same products compiled as for a CPU without VNNI (the vpmaddwd
    sequence): a fresh process, since the target is chosen once per process."""
    run_without_vnni(__file__, "t.check_matmul_integer(23, 45, 37, 'uint8', 'int8', 3, -5, True); "
                               "t.check_matmul_integer(5, 130, 17, 'int8', 'uint8', 127, 255, False); "
                               "t.check_matmul_integer(1, 37, 557, 'uint8', 'int8', 131, -3, True)")
