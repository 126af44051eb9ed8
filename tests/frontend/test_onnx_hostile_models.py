"""Damaged and hostile ONNX models found by the adversarial campaign of
issue 29: each is a clear ``FrontendError`` naming what and where, not an
exception from inside protobuf or numpy, nor a silently different model."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

import phasec
from phasec.backend.vm import VirtualMachine
from phasec.fileio import input_limit_scope, set_max_input_bytes
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx import from_onnx


def _model(nodes, inputs, outputs, inits=(), name="g"):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _relu(name: str = "g", node_name: str = "n"):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    return _model([h.make_node("Relu", ["x"], ["y"], name=node_name)], [x], [y], name=name)


@pytest.mark.parametrize("marker, where", [(b"GRAPHNAME", "graph.name"),
                                           (b"NODENAME", "graph.node[0].name")])
def test_a_name_that_is_not_utf8_is_named_by_its_field(tmp_path, marker, where):
    # ONNX is proto2: protobuf hands invalid UTF-8 back as bytes, which then
    # failed where first copied (a UnicodeDecodeError inside the validator)
    data = _relu("GRAPHNAME", "NODENAME").SerializeToString()
    data = data.replace(marker, marker[:3] + b"\xff" + marker[4:])
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    for source in (data, path, onnx.load_model_from_string(data)):
        field = where.replace("[", ".").replace("]", ".")
        with pytest.raises(FrontendError, match=rf"{field} is not valid UTF-8"):
            from_onnx(source)
    from_onnx(_relu("GRAPHNAME", "NODENAME"))  # the same model, undamaged


def test_an_unknown_declared_element_type_is_reported_by_number():
    m = _relu()
    m.graph.output[0].type.tensor_type.elem_type = 127  # (was: ValueError from protobuf)
    with pytest.raises(FrontendError, match=r"output 'y' is declared 127 but the node makes FLOAT"):
        from_onnx(m)


def _negative(name: str) -> T:
    t = T()
    t.name, t.data_type = name, T.FLOAT
    t.dims.extend([-1, 2])
    return t


def test_a_negative_dimension_in_an_initializer_is_refused():
    # numpy read it as a (0, 2) array: the model imported as another model
    x = h.make_tensor_value_info("x", T.FLOAT, [1])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    m = _model([h.make_node("Add", ["x", "w"], ["y"])], [x], [y], [_negative("w")])
    with pytest.raises(FrontendError, match=r"initializer 'w' has a negative dimension: \[-1, 2\]"):
        from_onnx(m)


def test_an_element_count_beyond_int64_is_refused_at_the_node():
    # (was: FoldConstant failed inside numpy, "iterator is too large")
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    pads = nh.from_array(np.array([0, 0, 1 << 62, 1 << 62], np.int64), "p")
    m = _model([h.make_node("Pad", ["x", "p"], ["y"], name="pad")], [x], [y], [pads])
    with pytest.raises(FrontendError, match=r"node 0 'pad' \(Pad.*\(4611686018427387906, "
                                            r"4611686018427387907\): more than 2\*\*63 elements"):
        from_onnx(m)
    pads = nh.from_array(np.array([0, 0, 1 << 30, 1 << 30], np.int64), "p")  # large, not too
    m = _model([h.make_node("Pad", ["x", "p"], ["y"], name="pad")], [x], [y], [pads])
    from_onnx(m)


def test_external_data_in_a_subgraph_is_not_read_from_the_working_directory(tmp_path, monkeypatch):
    # only the main graph's initializers are read, from beside the model
    # (read_model); elsewhere numpy_helper resolved the path against the cwd
    (tmp_path / "data.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    monkeypatch.chdir(tmp_path)
    w = T()
    w.name, w.data_type, w.data_location = "w", T.FLOAT, T.EXTERNAL
    w.dims.extend([2, 3])
    entry = w.external_data.add()
    entry.key, entry.value = "location", "data.bin"
    out = h.make_tensor_value_info("o", T.FLOAT, [2, 3])
    then = h.make_graph([h.make_node("Identity", ["w"], ["o"])], "then", [], [out], [w])
    other = h.make_graph([h.make_node("Relu", ["x"], ["o"])], "else", [], [out])
    c = h.make_tensor_value_info("c", T.BOOL, [])
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    m = _model([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], [c, x], [y])
    # (a branch that cannot be converted fails when taken, with the reason)
    text = from_onnx(m).script()
    assert "initializer 'w' keeps its values in external data" in text
    assert "5.0" not in text  # data.bin was not read


def _conv_with(attr) -> onnx.ModelProto:
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    w = nh.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    node = h.make_node("Conv", ["x", "w"], ["y"], name="conv")
    node.attribute.append(attr)
    return _model([node], [x], [y], [w])


def test_an_attribute_of_the_wrong_type_is_refused_even_when_it_holds_a_graph():
    # a graph attribute made the node skip onnx's checker: a TypeError in the converter
    graph = h.make_graph([], "body", [], [])
    with pytest.raises(FrontendError, match=r"node 0 'conv' \(Conv\), opset 17: attribute "
                                            r"'strides' must be of type INTS, not GRAPH"):
        from_onnx(_conv_with(h.make_attribute("strides", graph)))
    # the checks pass a well-typed attribute (numpy: a 1x1 all-ones kernel, stride 2)
    xs = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    exe = phasec.build(from_onnx(_conv_with(h.make_attribute("strides", [2, 2]))))
    np.testing.assert_array_equal(VirtualMachine(exe).invoke("main", xs), xs[:, :, ::2, ::2])


def test_control_flow_attributes_are_checked_too():
    out = h.make_tensor_value_info("o", T.FLOAT, [2])
    branch = h.make_graph([h.make_node("Constant", [], ["o"], value=nh.from_array(
        np.zeros(2, np.float32), "c"))], "b", [], [out])
    c = h.make_tensor_value_info("c", T.BOOL, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [2])
    node = h.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=branch)
    node.attribute.append(h.make_attribute("axis", 1))
    with pytest.raises(FrontendError,
                       match=r"node 0 'if' \(If\), opset 17: If has no attribute 'axis'"):
        from_onnx(_model([node], [c], [y]))
    node = h.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=[branch])
    with pytest.raises(FrontendError, match=r"'else_branch' must be of type GRAPH, not GRAPHS"):
        from_onnx(_model([node], [c], [y]))


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_a_kernel_shape_other_than_the_weights_is_refused(op):
    # ORT fails such a node when it runs; phasec ignored the attribute
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    w = nh.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    node = h.make_node(op, ["x", "w"], ["y"], name="c", kernel_shape=[1 << 40, 1])
    with pytest.raises(FrontendError, match=r"kernel_shape \[1099511627776, 1\] does not match "
                                            r"the weight's spatial shape \[1, 1\]"):
        from_onnx(_model([node], [x], [y], [w]))
    node = h.make_node(op, ["x", "w"], ["y"], name="c", kernel_shape=[1, 1])
    from_onnx(_model([node], [x], [y], [w]))


def _shared_external_data(tmp_path, copies: int, elements: int, sparse: bool = False) -> str:
    """A model of a few hundred bytes whose ``copies`` initializers all read the
    whole of one data file of ``elements`` float32 ones: ``y = x + copies``."""
    data = tmp_path / "w.bin"
    if sparse:  # (a sparse file of zeros: its size costs no disk)
        with open(data, "wb") as fh:
            fh.truncate(4 * elements)
    else:
        data.write_bytes(np.ones(elements, np.float32).tobytes())
    inits, nodes, prev = [], [], "x"
    for i in range(copies):
        w = T()
        w.name, w.data_type, w.data_location = f"w{i}", T.FLOAT, T.EXTERNAL
        w.dims.append(elements)
        entry = w.external_data.add()
        entry.key, entry.value = "location", "w.bin"
        inits.append(w)
        nodes.append(h.make_node("Add", [prev, w.name], [f"y{i}"]))
        prev = f"y{i}"
    x = h.make_tensor_value_info("x", T.FLOAT, [elements])
    y = h.make_tensor_value_info(prev, T.FLOAT, [elements])
    path = tmp_path / "m.onnx"
    path.write_bytes(_model(nodes, [x], [y], inits).SerializeToString())
    return str(path)


def test_external_data_named_many_times_is_refused_beyond_the_input_size_limit(tmp_path):
    # each read is within the limit, all six together are not: refused before
    # any is read (onnx read them into the protobuf, which crashed the process
    # when an allocation failed)
    path = _shared_external_data(tmp_path, copies=6, elements=1024)
    with input_limit_scope():
        set_max_input_bytes(20 << 10)
        with pytest.raises(FrontendError, match=r"external data of '.*m\.onnx' would take "
                                                r"24 KiB in all, more than the input size "
                                                r"limit \(20 KiB; --max-input-size"):
            from_onnx(path)
        set_max_input_bytes(24 << 10)  # (at the limit: read, and computed)
        x = np.arange(1024, dtype=np.float32)
        out = VirtualMachine(phasec.build(from_onnx(path)))["main"](x)
    np.testing.assert_array_equal(np.asarray(out), x + 6)


def test_external_data_beyond_the_address_space_left_is_refused(tmp_path):
    # 16 initializers naming one 64 MiB file (sparse) need 2 GiB while read;
    # under an address-space limit 1 GiB above what is mapped, refused cleanly
    path = _shared_external_data(tmp_path, copies=16, elements=16 << 20, sparse=True)
    code = (
        "import resource, onnx.external_data_helper\n"
        "from phasec.frontend.onnx import from_onnx\n"
        "from phasec.frontend.errors import FrontendError\n"
        "with open('/proc/self/status') as fh:\n"
        "    mapped = int(fh.read().split('VmSize:')[1].split()[0]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (mapped + (1 << 30), resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    from_onnx({path!r})\n"
        "except FrontendError as exc:\n"
        "    print(exc)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "would take 1 GiB, twice that while it is read: more than the memory available" \
        in run.stdout


@pytest.mark.parametrize("failure", [IndexError("list index out of range"),
                                     ZeroDivisionError("division by zero"),
                                     RecursionError("maximum recursion depth exceeded")])
def test_a_converter_that_fails_is_named_at_its_node(monkeypatch, failure):
    """An input a converter does not check (or a bug in it) is a FrontendError
    naming the node, its cause chained, not a traceback from inside the
    converter; the fuzzer still counts it as a crash ("internal error")."""
    from phasec.frontend.onnx import fuzz
    from phasec.frontend.onnx._registry import CONVERTERS, Converter

    def broken(ctx):
        raise failure

    monkeypatch.setitem(CONVERTERS, "Relu", Converter("Relu", broken))
    with pytest.raises(FrontendError, match=r"node 0 'n' \(Relu, opset 17\): internal error in "
                                            rf"its converter.*{type(failure).__name__}") as info:
        from_onnx(_relu())
    assert info.value.__cause__ is failure
    case = fuzz.Case(_relu(), {"x": np.ones((2, 3), np.float32)})
    assert fuzz.phasec_verdict(case).kind == "crash"
