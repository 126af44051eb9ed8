"""Shape chains through the ONNX importer, against ONNX Runtime.

Exporters compute shapes with tensor operators: PyTorch and Paddle write
``Shape -> Gather(0-d index) -> Unsqueeze -> Concat -> Reshape``. The importer
evaluates these at import (on symbolic dimensions too), and a 0-d value must
stay 0-d there: made shape (1,), it breaks the ``Concat`` after it and, as a
graph output, silently has the wrong shape (issue 28).

The property draws random chains of Shape, Gather (scalar and 1-D indices),
Slice, Unsqueeze, Squeeze, Concat, Reshape, Expand and Add/Mul over random
input shapes, concrete or with a symbolic first dimension, and compares
phasec's outputs (shapes, dtypes and values) with ONNX Runtime's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _run_both(nodes: list, x: np.ndarray, in_dims: list, outputs: list[str],
              inits: dict[str, np.ndarray]) -> None:
    """Build the model, run it on ORT and on phasec; every output equal."""
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", F, in_dims)],
        [helper.make_tensor_value_info(n, F if n == "y" else I64, None) for n in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x)
    got = list(got) if len(outputs) > 1 else [got]
    for g, e, n in zip(got, expected, outputs):
        g = np.asarray(g)
        assert (g.shape, g.dtype) == (e.shape, e.dtype), (n, g.shape, e.shape, g.dtype, e.dtype)
        np.testing.assert_array_equal(g, e, err_msg=n)


# ---------------------------------------------------------------------------
# the cases of issue 28
# ---------------------------------------------------------------------------

def _node(op: str, ins: list[str], outs: list[str], **attrs) -> object:
    return helper.make_node(op, ins, outs, **attrs)


@pytest.mark.parametrize("dims", [[2, 3, 4], ["N", 3, 4]])
def test_gather_scalar_index_of_shape_is_0d(dims):
    x = np.zeros((2, 3, 4), np.float32)
    _run_both([_node("Shape", ["x"], ["s"]), _node("Gather", ["s", "i"], ["d"])], x, dims,
              ["d"], {"i": np.array(1, np.int64)})


@pytest.mark.parametrize("dims", [[2, 3, 4], ["N", 3, 4]])
def test_pytorch_reshape_chain(dims):
    """Shape -> Gather(0-d) -> Unsqueeze -> Concat -> Reshape, as PyTorch exports x.view(n, -1)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    nodes = [_node("Shape", ["x"], ["s"]), _node("Gather", ["s", "i"], ["n"]),
             _node("Unsqueeze", ["n", "ax"], ["nu"]),
             _node("Concat", ["nu", "minus1"], ["shape"], axis=0),
             _node("Reshape", ["x", "shape"], ["y"])]
    _run_both(nodes, x, dims, ["y"], {"i": np.array(0, np.int64), "ax": np.array([0], np.int64),
                                       "minus1": np.array([-1], np.int64)})


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_of_shape_keepdims(keepdims):
    x = np.zeros((2, 3, 4), np.float32)
    nodes = [_node("Shape", ["x"], ["s"]),
             _node("ReduceProd", ["s"], ["p"], keepdims=keepdims)]
    _run_both(nodes, x, [2, 3, 4], ["p"], {})


def test_squeeze_to_0d_and_arithmetic():
    x = np.zeros((2, 3, 4), np.float32)
    nodes = [_node("Shape", ["x"], ["s"]),
             _node("Slice", ["s", "one", "two"], ["s1"]),
             _node("Squeeze", ["s1", "zero"], ["d"]),
             _node("Mul", ["d", "k"], ["dk"]), _node("Add", ["dk", "s"], ["sum"])]
    _run_both(nodes, x, [2, 3, 4], ["d", "dk", "sum"],
              {"one": np.array([1], np.int64), "two": np.array([2], np.int64),
               "zero": np.array([0], np.int64), "k": np.array(5, np.int64)})


def test_symbolic_shape_values_as_outputs():
    """Shape values holding a symbolic dimension, as graph outputs: computed at
    run time from the input's shape, 0-d ones 0-d; one build runs at two sizes."""
    nodes = [_node("Shape", ["x"], ["s"]), _node("Gather", ["s", "i"], ["n"]),
             _node("Mul", ["n", "s"], ["ns"]), _node("Unsqueeze", ["ns", "ax"], ["ns2"])]
    inits = {"i": np.array(0, np.int64), "ax": np.array([0], np.int64)}
    for n in (2, 5):
        _run_both(nodes, np.zeros((n, 3), np.float32), ["N", 3], ["s", "n", "ns2"], inits)


# ---------------------------------------------------------------------------
# the property
# ---------------------------------------------------------------------------

@dataclass
class _Chain:
    """A graph under construction; ``values`` maps each int64 shape value's
    name to its value for the drawn input shape (what ORT computes)."""
    dims: list[int]
    nodes: list = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def const(self, value) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = np.asarray(value, np.int64)
        return name

    def add(self, op: str, ins: list[str], value: np.ndarray, **attrs) -> str:
        name = f"v{len(self.nodes)}"
        self.nodes.append(_node(op, ins, [name], **attrs))
        self.values[name] = np.asarray(value, np.int64)
        return name


def _pick(draw, chain: _Chain, ok) -> str | None:
    names = [n for n, v in chain.values.items() if ok(v)]
    return draw(st.sampled_from(names)) if names else None


def _step(draw, c: _Chain) -> None:
    """One shape operator on the values so far (skipped when none fits)."""
    op = draw(st.sampled_from(["Gather0", "Gather1", "Slice", "Unsqueeze", "Squeeze", "Concat",
                               "Reshape", "Expand", "Add", "Mul"]))
    is1d = lambda v: v.ndim == 1 and v.size > 0  # noqa: E731
    if op in ("Gather0", "Gather1"):
        a = _pick(draw, c, is1d)
        if a is None:
            return
        n = c.values[a].size
        idx = (draw(st.integers(-n, n - 1)) if op == "Gather0" else
               draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3)))
        idx = np.asarray(idx, np.int64)
        c.add("Gather", [a, c.const(idx)], c.values[a][idx], axis=0)
    elif op == "Slice":
        a = _pick(draw, c, is1d)
        if a is None:
            return
        v = c.values[a]
        start = draw(st.integers(-v.size, v.size - 1))
        end = draw(st.integers(-v.size, v.size + 1))
        step = draw(st.sampled_from([1, 1, 2, -1]))
        out = v[start:end:step]
        if out.size == 0:
            return
        c.add("Slice", [a, c.const([start]), c.const([end]), c.const([0]), c.const([step])], out)
    elif op == "Unsqueeze":
        a = _pick(draw, c, lambda v: v.ndim <= 1)
        if a is None:
            return
        v = c.values[a]
        axis = draw(st.integers(-(v.ndim + 1), v.ndim))
        c.add("Unsqueeze", [a, c.const([axis])], np.expand_dims(v, axis))
    elif op == "Squeeze":
        a = _pick(draw, c, lambda v: 1 in v.shape)
        if a is None:
            return
        v = c.values[a]
        axis = draw(st.sampled_from([i for i, d in enumerate(v.shape) if d == 1]))
        c.add("Squeeze", [a, c.const([axis])], np.squeeze(v, axis))
    elif op == "Concat":
        parts = draw(st.lists(st.sampled_from([n for n, v in c.values.items() if v.ndim == 1]
                                              or ["-"]), min_size=1, max_size=3))
        if parts[0] == "-":
            return
        c.add("Concat", parts, np.concatenate([c.values[p] for p in parts]), axis=0)
    elif op == "Reshape":
        a = _pick(draw, c, lambda v: v.size == 1 or v.ndim == 1)
        if a is None:
            return
        v = c.values[a]
        target = draw(st.sampled_from([[-1], [1, -1]] + ([[]] if v.size == 1 else [])))
        c.add("Reshape", [a, c.const(target)], v.reshape(target))
    elif op == "Expand":
        a = _pick(draw, c, lambda v: v.ndim == 0)
        if a is None:
            return
        k = draw(st.integers(1, 3))
        c.add("Expand", [a, c.const([k])], np.broadcast_to(c.values[a], (k,)))
    else:  # Add / Mul with a constant or another value broadcastable to it
        a = _pick(draw, c, lambda v: True)
        va = c.values[a]
        others = [n for n, v in c.values.items()
                  if v.ndim <= 1 and (v.ndim == 0 or va.ndim == 0 or v.shape == va.shape)]
        b = (draw(st.sampled_from(others)) if others and draw(st.booleans())
             else c.const(draw(st.integers(1, 3))))
        vb = c.values.get(b, c.inits.get(b))
        c.add(op, [a, b], va + vb if op == "Add" else va * vb)


@st.composite
def _chains(draw):
    rank = draw(st.integers(1, 4))
    dims = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    c = _Chain(dims)
    c.nodes.append(_node("Shape", ["x"], ["s"]))
    c.values["s"] = np.asarray(dims, np.int64)
    for _ in range(draw(st.integers(1, 6))):
        _step(draw, c)
    # a run-time use: x reshaped to (k, -1) by a 0-d value of the chain dividing its size
    size = int(np.prod(dims))
    k = _pick(draw, c, lambda v: v.ndim == 0 and v > 0 and size % int(v) == 0)
    if k is None:
        k = c.add("Gather", ["s", c.const(0)], dims[0], axis=0)
    k1 = c.add("Unsqueeze", [k, c.const([0])], c.values[k].reshape(1))
    shape = c.add("Concat", [k1, c.const([-1])], [int(c.values[k]), -1], axis=0)
    c.nodes.append(_node("Reshape", ["x", shape], ["y"]))
    shown = draw(st.lists(st.sampled_from(sorted(c.values)), max_size=3, unique=True))
    return c, shown


@settings(max_examples=25)
@given(_chains())
def test_shape_chains_match_ort_concrete(case):
    c, shown = case
    x = np.arange(int(np.prod(c.dims)), dtype=np.float32).reshape(c.dims)
    _run_both(c.nodes, x, c.dims, ["y", *shown], c.inits)


@settings(max_examples=25)
@given(_chains())
def test_shape_chains_match_ort_symbolic(case):
    """The same chains with a symbolic first dimension, compiled once for it."""
    c, shown = case
    x = np.arange(int(np.prod(c.dims)), dtype=np.float32).reshape(c.dims)
    _run_both(c.nodes, x, ["N", *c.dims[1:]], ["y", *shown], c.inits)


# ---------------------------------------------------------------------------
# Range over symbolic bounds (transformers' position ids)
# ---------------------------------------------------------------------------

def test_range_with_symbolic_bounds_runs_at_several_sizes():
    """``Range(0, N, 1)``, ``Range(1, N, 2)`` and ``Range(N, 0, -1)`` with N a
    symbolic dimension become ``R.arange``: one build, equal to ORT at each size."""
    nodes = [_node("Shape", ["x"], ["s"]), _node("Gather", ["s", "zero"], ["n"]),
             _node("Range", ["zero", "n", "one"], ["r"]),
             _node("Range", ["one", "n", "two"], ["r2"]),
             _node("Range", ["n", "zero", "minus1"], ["r3"]),
             _node("Cast", ["r"], ["rf"], to=F), _node("Unsqueeze", ["rf", "ax"], ["rfu"]),
             _node("Add", ["x", "rfu"], ["y"])]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64),
             "two": np.array(2, np.int64), "minus1": np.array(-1, np.int64),
             "ax": np.array([1], np.int64)}
    outputs = [("r", I64), ("r2", I64), ("r3", I64), ("y", F)]
    graph = helper.make_graph(
        nodes, "range", [helper.make_tensor_value_info("x", F, ["N", 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    main = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"]
    for n in (1, 4, 7):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        for g, e, (name, _) in zip(main(x), sess.run(None, {"x": x}), outputs):
            g = np.asarray(g)
            assert (g.shape, g.dtype) == (e.shape, e.dtype), (n, name, g.shape, e.shape)
            np.testing.assert_array_equal(g, e, err_msg=f"{name} at N={n}")
