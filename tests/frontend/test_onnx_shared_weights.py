"""Weights a model reads several times, and weights transformed at import:
each is held once by the executable, and the results equal ONNX Runtime's.

* one initializer read by several nodes (an unrolled recurrence's steps)
  becomes one Constant (the importer's), its transposed form one folded
  Constant (FoldConstant), its packed form one (PackConstantWeights);
* a large constant uint8 operand of MatMulInteger is shifted to int8 and
  summed at import, whatever the fold budget (DynamicQuantizeLSTM's weights
  dequantized at import: tests/frontend/test_onnx_packaged_fixes.py)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.op.fold import MAX_FOLD_ELEMENTS

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits, opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                             ir_version=8)


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _run(exe, args):
    res = phasec.VirtualMachine(exe)["main"](*args)
    return [np.asarray(r.numpy() if hasattr(r, "numpy") else r)
            for r in (res if isinstance(res, (tuple, list)) else [res])]


def _pool(exe):
    """The executable's tensor constants."""
    return [v for v in (exe.constants[i] for i in range(len(exe.constants)))
            if isinstance(v, np.ndarray)]


def test_a_weight_read_by_several_nodes_is_held_once():
    rng = np.random.default_rng(3)
    n, k = 401, 2617  # W over the fold budget: its transpose folds as a rearrangement
    assert n * k > MAX_FOLD_ELEMENTS
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    rows = {"x0": 2, "x1": 2, "x2": 2}  # (one product shape: one packing of W)
    nodes = [helper.make_node("Gemm", [x, "W", "B"], [f"y{i}"], transB=1)
             for i, x in enumerate(rows)]
    inputs = [helper.make_tensor_value_info(x, F, [m, k]) for x, m in rows.items()]
    outputs = [helper.make_tensor_value_info(f"y{i}", F, [m, n]) for i, m in
               enumerate(rows.values())]
    model = _model(nodes, inputs, outputs, {"W": w, "B": b})
    feeds = {x: rng.standard_normal((m, k)).astype(np.float32) for x, m in rows.items()}
    exe = phasec.build(from_onnx(model))
    for got, ref in zip(_run(exe, list(feeds.values())), _ort(model, feeds), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # three calls read W: one copy of it (in whatever layout), not three
    big = [a.nbytes for a in _pool(exe) if a.size >= w.size]
    assert len(big) == 1 and sum(big) < 2 * w.nbytes, big


def test_large_constant_integer_matmul_operand_is_shifted_at_import():
    rng = np.random.default_rng(4)
    k, n = 1031, 1021  # B over the fold budget
    assert k * n > MAX_FOLD_ELEMENTS
    a = rng.integers(0, 256, (4, k), dtype=np.uint8)
    bq = rng.integers(0, 256, (k, n), dtype=np.uint8)
    model = _model([helper.make_node("MatMulInteger", ["a", "B", "az", "bz"], ["y"])],
                   [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, k])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [4, n])],
                   {"B": bq, "az": np.asarray(np.uint8(117)), "bz": np.asarray(np.uint8(140))})
    exe = phasec.build(from_onnx(model))
    got = _run(exe, [a])[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, _ort(model, {"a": a})[0])
    # the uint8 weight is not kept to be shifted and summed on every call
    assert not [v for v in _pool(exe) if v.dtype == np.uint8 and v.size >= bq.size]
