"""abi.walk and kernel_abi's memo against a field-by-field reference walk,
on the kernels of a small model (convolution, bias, relu, max pool, softmax)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from phasec.backend.llvm import abi
from phasec.frontend.onnx import from_onnx
from phasec.ir import tir
from phasec.ir.node import Node
from phasec.pipeline import build


def _reference_walk(root: Node) -> list[Node]:
    """Pre-order, each object once: every field's value tested (the walk
    abi.walk replaced; independent of the node classes' annotations)."""
    seen: set[int] = set()
    order: list[Node] = []
    stack: list[Any] = [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        kids: list[Any] = []
        for f in type(n)._fields:
            v = getattr(n, f)
            if isinstance(v, Node):
                kids.append(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, Node):
                        kids.append(x)
                    elif isinstance(x, tuple):
                        kids.extend(y for y in x if isinstance(y, Node))
        stack.extend(reversed(kids))
    return order


def _model() -> Any:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Softmax", ["p"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def kernels() -> dict[str, Any]:
    funcs = build(from_onnx(_model()), 2, kernels="none").prim_funcs
    assert funcs
    return funcs


def test_walk_finds_the_reference_walks_nodes_in_its_order(kernels):
    for func in kernels.values():
        ref = _reference_walk(func.body)
        got = abi.walk(func.body)
        assert len(got) == len(ref) and all(a is b for a, b in zip(got, ref))
        assert abi.body_walk(func) == got
        for p in func.params:
            assert abi.walk(p) == _reference_walk(p)


def test_kernel_abi_remembered_gives_each_symbol_its_own_entries(kernels):
    name, func = next(iter(kernels.items()))
    a = abi.kernel_abi(name, func, "s1", True, True)
    b = abi.kernel_abi(name, func, "s2", True, True)
    assert a.params == b.params and a.dim_vars == b.dim_vars and a.checked == b.checked
    assert a.ptr_symbol == "s1.entry_ptr" and b.ptr_symbol == "s2.entry_ptr"
    assert a.obj_symbol == "s1.entry_obj" and b.obj_symbol == "s2.entry_obj"
    # the buffers' order is the reference walk's
    expected = {id(n): n.name for n in [*func.params, *_reference_walk(func.body)]
                if isinstance(n, tir.Buffer)}
    assert list(a.buffers) == list(expected.values())
    # without an object entry: the other flags are not taken from the memo
    c = abi.kernel_abi(name, func, "s3", False, True)
    assert c.obj_symbol is None and not c.checked and c.fast_symbol is None
