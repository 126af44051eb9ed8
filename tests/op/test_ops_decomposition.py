"""det (phasec/op/decomposition.py): the compiled kernel against
numpy.linalg.det on batches, matrices that need pivoting, singular ones,
1 x 1 and float64; the inference's errors. (test_legalize.py runs the
kernel on the TIR interpreter; the ONNX Det conformance cases use it too.)"""

from __future__ import annotations

import numpy as np

import phasec
from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op
from phasec.script.builder import BlockBuilder

from helpers.op_infer import raises


def _run(data: np.ndarray) -> np.ndarray:
    x = Var("x", TensorStructInfo(data.shape, str(data.dtype)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(call_op("det", x)))
    return np.asarray(phasec.VirtualMachine(phasec.build(bb.get()))["main"](data))


def test_det_against_numpy():
    rng = np.random.default_rng(31)
    batch = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    batch[0, 0, 0, 0] = 0.0            # the first pivot needs a row swap
    batch[0, 1, 3] = batch[0, 1, 1] * 2  # singular: two proportional rows
    batch[1, 2] = np.triu(batch[1, 2])  # triangular: the product of the diagonal
    got = _run(batch)
    assert got.shape == (2, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, np.linalg.det(batch.astype(np.float64)), rtol=1e-4,
                               atol=1e-5)
    order = [2, 0, 3, 1]
    perm = np.eye(4, dtype=np.float64)[order] * 3.0  # only swaps: exactly sign * 3^4
    inversions = sum(order[i] > order[j] for i in range(4) for j in range(i + 1, 4))
    assert _run(perm) == (-1) ** inversions * 81.0
    one = np.array([[[-2.5]], [[4.0]]], np.float32)
    np.testing.assert_array_equal(_run(one), [-2.5, 4.0])
    zeros = np.zeros((3, 3), np.float32)
    assert _run(zeros) == 0.0


def test_det_inference_errors():
    raises(["square matrices", "3 x 4"], call_op, "det",
           Var("a", TensorStructInfo((2, 3, 4), "float32")))
    raises(["float32 or float64", "int32"], call_op, "det",
           Var("b", TensorStructInfo((3, 3), "int32")))
    raises(["matrices", "ndim 1"], call_op, "det", Var("c", TensorStructInfo((3,), "float32")))
