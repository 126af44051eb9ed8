"""What PyTorch's exporters compute from symbolic dimensions, against ONNX
Runtime: one build run at several sizes.

Slices bounded by symbolic dimensions:
``position_ids[:, :seq]`` of a table of 16 positions has ``T.min(seq, 16)``
rows; added to a tensor of ``seq`` rows, ONNX requires the two equal at run
time, which phasec checks there (``R.match_cast``) so that the sum keeps the
known shape ``(batch, seq)`` for everything after it. The TorchScript
exporter also tests shape values against -1 before an Expand (a dimension is
never negative: decided at import), multiplies run-time tensors by shape
values (computed at run time), and builds causal masks with Trilu on
``(seq, seq)`` (issue 28).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

F, I64 = TensorProto.FLOAT, TensorProto.INT64
INT64_MAX = np.iinfo(np.int64).max


def _model(nodes: list, inputs: list, outputs: list, inits: dict[str, np.ndarray]):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _both(model):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    main = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"]
    return sess, main


def _position_table_model():
    """y = x + table[:, :seq] (x of shape (batch, seq)), as BERT's embeddings."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Slice", ["table", "zero", "s", "one"], ["pos"]),
             helper.make_node("Add", ["x", "pos"], ["y"]),
             helper.make_node("Shape", ["y"], ["ys"])]
    inits = {"table": np.arange(16, dtype=np.float32).reshape(1, 16) * 10,
             "zero": np.array([0], np.int64), "one": np.array([1], np.int64)}
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq"])],
                  [helper.make_tensor_value_info("y", F, None),
                   helper.make_tensor_value_info("ys", I64, None)], inits)


def test_slice_of_a_table_to_a_symbolic_length_matches_ort_at_each_size():
    model = _position_table_model()
    mod = from_onnx(model)
    # the sum's shape stays known: the second output is the shape itself, not a run-time value
    assert "match_cast" in mod.script()
    sess, main = _both(model)
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 1), (2, 5), (3, 16)]:
        x = rng.standard_normal((batch, seq)).astype(np.float32)
        got = [np.asarray(v) for v in main(x)]
        for g, e in zip(got, sess.run(None, {"x": x})):
            assert (g.shape, g.dtype) == (e.shape, e.dtype)
            np.testing.assert_array_equal(g, e)


def test_slice_of_a_table_past_its_length_is_an_error_as_in_ort():
    sess, main = _both(_position_table_model())
    x = np.zeros((2, 20), np.float32)  # 20 positions of a table of 16
    with pytest.raises(Exception):
        sess.run(None, {"x": x})
    with pytest.raises(phasec.errors.PhasecError):
        main(x)


@pytest.mark.parametrize("end", [INT64_MAX, -1, 6])
def test_slice_from_a_symbolic_start(end):
    """x[n:end] along a static axis of 8, n a symbolic dimension of another input."""
    nodes = [helper.make_node("Shape", ["m"], ["n"], start=0, end=1),
             helper.make_node("Slice", ["x", "n", "e", "ax"], ["y"])]
    inits = {"e": np.array([end], np.int64), "ax": np.array([1], np.int64)}
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 8]),
                           helper.make_tensor_value_info("m", F, ["n", 1])],
                   [helper.make_tensor_value_info("y", F, None)], inits)
    sess, main = _both(model)
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    for n in (0, 3, 7, 9):
        m = np.zeros((n, 1), np.float32)
        (e,) = sess.run(None, {"x": x, "m": m})
        g = np.asarray(main(x, m))
        assert g.shape == e.shape, (n, g.shape, e.shape)
        np.testing.assert_array_equal(g, e)


def test_unrelated_symbolic_dimensions_still_broadcast():
    """batch against seq: either may be 1 at run time, so no check is added."""
    model = _model([helper.make_node("Add", ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info("a", F, ["p", 1]),
                    helper.make_tensor_value_info("b", F, ["q"])],
                   [helper.make_tensor_value_info("y", F, None)], {})
    assert "match_cast" not in from_onnx(model).script()
    sess, main = _both(model)
    for p, q in [(1, 4), (3, 1), (3, 3)]:
        a = np.arange(p, dtype=np.float32).reshape(p, 1)
        b = np.arange(q, dtype=np.float32) * 10
        (e,) = sess.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(np.asarray(main(a, b)), e)


def _sizes_run(model, make_inputs, sizes):
    sess, main = _both(model)
    for size in sizes:
        feeds = make_inputs(size)
        got = main(*feeds.values())
        got = [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]
        for g, e in zip(got, sess.run(None, feeds)):
            assert (g.shape, g.dtype) == (e.shape, e.dtype), (size, g.shape, e.shape)
            np.testing.assert_array_equal(g, e, err_msg=f"at {size}")


def test_expand_to_a_shape_tested_against_minus_one():
    """TorchScript's ``expand(batch, seq)``: Where(Equal(shape, -1), 1, shape)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Equal", ["s", "minus1"], ["keep"]),
             helper.make_node("Where", ["keep", "ones", "s"], ["target"]),
             helper.make_node("Expand", ["row", "target"], ["y"])]
    inits = {"minus1": np.array([-1, -1], np.int64), "ones": np.array([1, 1], np.int64),
             "row": np.arange(1, dtype=np.int64).reshape(1, 1) + 7}
    model = _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq"])],
                   [helper.make_tensor_value_info("y", I64, None)], inits)
    _sizes_run(model, lambda n: {"x": np.zeros((n, n + 2), np.float32)}, [1, 4])


def test_run_time_tensor_times_a_shape_value():
    """A mask times the sequence length (a 0-d shape value), and the length added."""
    nodes = [helper.make_node("Shape", ["m"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"]),
             helper.make_node("Mul", ["m", "seq"], ["y"]),
             helper.make_node("Add", ["seq", "m"], ["z"])]
    model = _model(nodes, [helper.make_tensor_value_info("m", I64, ["batch", "seq"])],
                   [helper.make_tensor_value_info("y", I64, None),
                    helper.make_tensor_value_info("z", I64, None)],
                   {"one": np.array(1, np.int64)})
    rng = np.random.default_rng(1)
    _sizes_run(model, lambda n: {"m": rng.integers(0, 2, (2, n)).astype(np.int64)}, [1, 3, 6])


@pytest.mark.parametrize("upper,k", [(0, 0), (1, 1), (0, -1)])
def test_trilu_of_symbolic_rows_and_columns(upper, k):
    """A causal mask: Trilu of a (seq, seq) tensor, seq symbolic."""
    nodes = [helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq", "seq"])],
                   [helper.make_tensor_value_info("y", F, None)], {"k": np.array(k, np.int64)})
    rng = np.random.default_rng(2)
    _sizes_run(model, lambda n: {"x": rng.standard_normal((2, n, n)).astype(np.float32)},
               [1, 5])


def test_a_length_cast_to_float_is_computed_at_run_time():
    """x / sqrt(float(seq)) and a comparison of positions with the length:
    operators import does not evaluate on shape values run on them at run time."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"]),
             helper.make_node("Cast", ["seq"], ["seqf"], to=F),
             helper.make_node("Sqrt", ["seqf"], ["root"]),
             helper.make_node("Div", ["x", "root"], ["y"]),
             helper.make_node("Less", ["pos", "seq"], ["z"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq"])],
                   [helper.make_tensor_value_info("y", F, None),
                    helper.make_tensor_value_info("z", TensorProto.BOOL, None)],
                   {"one": np.array(1, np.int64), "pos": np.arange(6, dtype=np.int64)})
    rng = np.random.default_rng(3)
    _sizes_run(model, lambda n: {"x": rng.standard_normal((2, n)).astype(np.float32)},
               [1, 4, 9])
