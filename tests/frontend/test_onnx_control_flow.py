"""ONNX control flow (If, Loop, Scan) through every phase, against ONNX Runtime.

Each model is built with ``onnx.helper``, checked by onnx's checker, run by
ONNX Runtime, imported by phasec (If -> Relax If, Loop/Scan -> a recursive
local function), compiled by the default pipeline with the verifier after
every pass, and run on the VM; outputs must equal ORT's in shape, dtype and
value. The onnx BackendTest's control-flow cases run in test_onnx_backend.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec.frontend.errors import UnsupportedModelError
from phasec.frontend.onnx import from_onnx
from phasec.ir import Phase
from phasec.transform import PassContext, PassInstrument

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def model_of(nodes, inputs, outputs, opset=17):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


class PhaseTrace(PassInstrument):
    """The phase of each verified pass result."""

    def __init__(self):
        self.verified: list[tuple[str, Phase]] = []

    def run_after_verify(self, mod, info, seconds, stage):
        if stage == "output":
            self.verified.append((info.name, mod.phase))


def check_against_ort(model, feeds_list, trace=None):
    """Compile once (verifying after every pass), run each feed on the VM and on ORT."""
    mod = from_onnx(model)
    with PassContext(verify="each"):
        exe = phasec.build(mod, instruments=[trace] if trace else [])
    vm = phasec.VirtualMachine(exe)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        expected = sess.run(None, feeds)
        got = vm["main"](*feeds.values())
        got = list(got) if len(expected) > 1 else [got]
        for g, e in zip(got, expected):
            g = np.asarray(g)
            assert (g.shape, g.dtype) == (e.shape, e.dtype)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return mod


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def test_if_branches_capture_outer_values_and_join_shapes():
    # then: x + x (shape 3, uses the outer x); else: concat(x, y) (shape 6): the
    # join leaves the first output's length unknown, matched at run time
    then_g = branch("then", [helper.make_node("Add", ["x", "x"], ["t"]),
                             helper.make_node("Mul", ["t", "y"], ["t2"])],
                    [vi("t", F, [3]), vi("t2", F, [3])])
    else_g = branch("else", [helper.make_node("Concat", ["x", "y"], ["e"], axis=0),
                             helper.make_node("Sub", ["x", "y"], ["e2"])],
                    [vi("e", F, [6]), vi("e2", F, [3])])
    model = model_of(
        [helper.make_node("Relu", ["x0"], ["x"]),
         helper.make_node("If", ["c"], ["o", "o2"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Neg", ["o"], ["z"]), helper.make_node("Exp", ["o2"], ["z2"])],
        [vi("x0", F, [3]), vi("y", F, [3]), vi("c", B, [])],
        [vi("z", F, ["n"]), vi("z2", F, [3])])
    x = np.array([1, -2, 3], np.float32)
    y = np.array([0.5, 2, -1], np.float32)
    mod = check_against_ort(model, [{"x0": x, "y": y, "c": np.array(flag)}
                                    for flag in (True, False)])
    text = mod.script()
    assert "if c:" in text and "R.match_cast" in text


def test_if_with_a_known_condition_converts_only_the_branch_taken():
    then_g = branch("then", [helper.make_node("Neg", ["x"], ["t"])], [vi("t", F, [2])])
    else_g = branch("else", [helper.make_node("Unknown", ["x"], ["e"])], [vi("e", F, [2])])
    cond = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", B, [], [True]))
    graph = helper.make_graph(
        [cond, helper.make_node("If", ["c"], ["o"], then_branch=then_g, else_branch=else_g)],
        "g", [vi("x", F, [2])], [vi("o", F, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = from_onnx(model)
    x = np.array([1.5, -2], np.float32)
    np.testing.assert_array_equal(phasec.VirtualMachine(phasec.build(mod))["main"](x), -x)
    assert "if " not in mod.script()


def loop_model(with_m=True, with_cond=True):
    """Loop: v += x each iteration, stop when sum(v) >= lim (if cond is given)
    or after M iterations; scan output v*v; an If inside the body."""
    inner_then = branch("it", [helper.make_node("Mul", ["v_out", "two"], ["w"])], [vi("w", F, [3])])
    inner_else = branch("ie", [helper.make_node("Identity", ["v_out"], ["w2"])], [vi("w2", F, [3])])
    body = helper.make_graph([
        helper.make_node("Add", ["v_in", "x"], ["v_out"]),
        helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "lim"], ["cond_out"]),
        helper.make_node("Greater", ["s", "zero"], ["pos"]),
        helper.make_node("If", ["pos"], ["w_out"], then_branch=inner_then, else_branch=inner_else),
        helper.make_node("Mul", ["w_out", "v_out"], ["sq"]),
    ], "body", [vi("i", I64, []), vi("cin", B, []), vi("v_in", F, [3])],
        [vi("cond_out", B, []), vi("v_out", F, [3]), vi("sq", F, [3])])
    consts = [helper.make_node("Constant", [], ["two"], value=helper.make_tensor("t", F, [], [2.0])),
              helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", F, [], [0.0]))]
    loop = helper.make_node("Loop", ["M" if with_m else "", "c" if with_cond else "", "v0"],
                            ["vf", "sqs"], body=body)
    inputs = ([vi("M", I64, [])] if with_m else []) + ([vi("c", B, [])] if with_cond else [])
    return model_of(consts + [loop], inputs + [vi("v0", F, [3]), vi("x", F, [3]), vi("lim", F, [])],
                    [vi("vf", F, [3]), vi("sqs", F, ["n", 3])])


def test_loop_with_trip_count_condition_and_scan_output_through_every_phase():
    trace = PhaseTrace()
    x = np.array([1, -0.5, 2], np.float32)
    feeds = [{"M": np.array(m, np.int64), "c": np.array(True), "v0": np.ones(3, np.float32),
              "x": x, "lim": np.array(lim, np.float32)}
             for m, lim in ((5, 100.0), (10, 8.0), (0, 1.0))]
    mod = check_against_ort(loop_model(), feeds, trace)
    assert "_loop(" in mod.script()
    phases = {phase for _, phase in trace.verified}
    assert phases == {Phase.INGESTION, Phase.OPTIMIZATION, Phase.LOWERING, Phase.BUILD}
    names = [name for name, _ in trace.verified]
    assert "LambdaLifting" in names and "VMBuiltinLower" in names


@pytest.mark.parametrize("with_m,with_cond", [(True, False), (False, True)])
def test_loop_with_only_a_trip_count_or_only_a_condition(with_m, with_cond):
    x = np.array([1, 0.5, 2], np.float32)
    feed = {"v0": np.zeros(3, np.float32), "x": x, "lim": np.array(9.0, np.float32)}
    if with_m:
        feed = {"M": np.array(4, np.int64), **feed}
    if with_cond:
        feed = {"c": np.array(True), **feed}
    check_against_ort(loop_model(with_m, with_cond), [feed])


def test_loop_carried_value_that_grows():
    # v = concat(v, [i]): the carried shape changes, so its parameter gets a
    # symbolic length and the result is matched after the call
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Unsqueeze", ["fi", "ax"], ["fi1"]),
        helper.make_node("Concat", ["v_in", "fi1"], ["v_out"], axis=0),
        helper.make_node("Identity", ["cin"], ["cond_out"]),
    ], "body", [vi("i", I64, []), vi("cin", B, []), vi("v_in", F, ["k"])],
        [vi("cond_out", B, []), vi("v_out", F, ["k2"])],
        initializer=[onnx.numpy_helper.from_array(np.array([0], np.int64), "ax")])
    model = model_of([helper.make_node("Loop", ["M", "", "v0"], ["vf"], body=body)],
                     [vi("M", I64, []), vi("v0", F, [2])], [vi("vf", F, ["n"])])
    v0 = np.array([7, 8], np.float32)
    check_against_ort(model, [{"M": np.array(m, np.int64), "v0": v0} for m in (0, 3)])


def test_scan_states_directions_and_axes():
    body = helper.make_graph([
        helper.make_node("Add", ["s_in", "a"], ["s_out"]),
        helper.make_node("Mul", ["p_in", "b"], ["p_out"]),
        helper.make_node("Sub", ["s_out", "p_out"], ["d"]),
        helper.make_node("Neg", ["s_out"], ["ns"]),
    ], "body", [vi("s_in", F, [2]), vi("p_in", F, [2]), vi("a", F, [2]), vi("b", F, [2])],
        [vi("s_out", F, [2]), vi("p_out", F, [2]), vi("d", F, [2]), vi("ns", F, [2])])
    scan = helper.make_node("Scan", ["s0", "p0", "A", "B"], ["sf", "pf", "D", "NS"], body=body,
                            num_scan_inputs=2, scan_input_axes=[0, 1],
                            scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                            scan_output_directions=[0, 1])
    model = model_of([scan], [vi("s0", F, [2]), vi("p0", F, [2]), vi("A", F, [4, 2]),
                              vi("B", F, [2, 4])],
                     [vi("sf", F, [2]), vi("pf", F, [2]), vi("D", F, [2, 4]), vi("NS", F, [4, 2])])
    rng = np.random.default_rng(0)
    feed = {"s0": rng.standard_normal(2), "p0": rng.standard_normal(2),
            "A": rng.standard_normal((4, 2)), "B": rng.standard_normal((2, 4))}
    mod = check_against_ort(model, [{k: v.astype(np.float32) for k, v in feed.items()}])
    # the trip count is known at import: the stacked outputs have static shapes
    assert mod["main"].ret_struct_info.fields[3].shape[0].value == 4


def test_branches_of_different_rank_are_reported_unsupported():
    then_g = branch("then", [helper.make_node("Identity", ["x"], ["t"])], [vi("t", F, [2])])
    else_g = branch("else", [helper.make_node("Unsqueeze", ["x", "ax"], ["e"])],
                    [vi("e", F, [1, 2])])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("a", I64, [1], [0])),
         helper.make_node("If", ["c"], ["o"], then_branch=then_g, else_branch=else_g)],
        "g", [vi("x", F, [2]), vi("c", B, [])], [vi("o", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match="no known rank"):
        from_onnx(model)


def test_unsupported_node_inside_a_body_is_named():
    body = helper.make_graph([helper.make_node("Identity", ["cin"], ["cond_out"]),
                              helper.make_node("NoSuchOp", ["v_in"], ["v_out"])],
                             "the_body", [vi("i", I64, []), vi("cin", B, []), vi("v_in", F, [2])],
                             [vi("cond_out", B, []), vi("v_out", F, [2])])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "v0"], ["vf"], body=body)],
                              "g", [vi("M", I64, []), vi("v0", F, [2])], [vi("vf", F, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match="subgraph 'the_body'.*NoSuchOp"):
        from_onnx(model)



def test_scan_opset8_scans_each_batch_element():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "a"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "a"], ["y"])],
                             "body", [vi("s_in", F, [2]), vi("a", F, [2])],
                             [vi("s_out", F, [2]), vi("y", F, [2])])
    scan = helper.make_node("Scan", ["", "s0", "X"], ["sf", "Y"], body=body, num_scan_inputs=1,
                            directions=[1])
    model = model_of([scan], [vi("s0", F, [3, 2]), vi("X", F, [3, 4, 2])],
                     [vi("sf", F, [3, 2]), vi("Y", F, [3, 4, 2])], opset=8)
    rng = np.random.default_rng(1)
    check_against_ort(model, [{"s0": rng.standard_normal((3, 2)).astype(np.float32),
                               "X": rng.standard_normal((3, 4, 2)).astype(np.float32)}])


def _window_loop(declared):
    """Loop: w = x[i : i + width] (a Slice with run-time bounds: its length
    is known only at run time, inside the body), scan outputs w and w * w;
    where the shapes are declared ([1]) y += w, else y stays (phasec cannot
    broadcast y's length against w's: a dimension known only at run time)."""
    width = 1 if declared else 2
    shape = [width] if declared else ["len"]
    body = helper.make_graph([
        helper.make_node("Add", ["i", "width"], ["end"]),
        helper.make_node("Unsqueeze", ["i", "ax"], ["start1"]),
        helper.make_node("Unsqueeze", ["end", "ax"], ["end1"]),
        helper.make_node("Slice", ["x", "start1", "end1"], ["w"]),
        helper.make_node("Add", ["y_in", "w"], ["y_out"]) if declared
        else helper.make_node("Identity", ["y_in"], ["y_out"]),
        helper.make_node("Identity", ["cin"], ["cond_out"]),
        helper.make_node("Mul", ["w", "w"], ["ws2"]),
    ], "body", [vi("i", I64, []), vi("cin", B, []), vi("y_in", F, [1])],
        [vi("cond_out", B, []), vi("y_out", F, [1]), vi("w", F, shape), vi("ws2", F, shape)],
        initializer=[onnx.numpy_helper.from_array(np.array([0], np.int64), "ax"),
                     onnx.numpy_helper.from_array(np.array(width, np.int64), "width")])
    return model_of([helper.make_node("Loop", ["M", "", "y0"], ["yf", "ws", "wss"], body=body)],
                    [vi("M", I64, []), vi("y0", F, [1]), vi("x", F, [9])],
                    [vi("yf", F, ["a"]), vi("ws", F, ["b", "c"]), vi("wss", F, ["d", "e"])])


def test_loop_scan_output_whose_shape_is_known_at_run_time_only():
    # ONNX's loop11: declared static shapes are matched at the body's
    # outputs (checked at run time); without them the scan outputs' element
    # shape is unknown outside the body and the stacked result takes the
    # first iteration's, later ones checked against it
    x = np.arange(9, dtype=np.float32) * 1.5
    feeds = [{"M": np.array(m, np.int64), "y0": np.array([-2], np.float32), "x": x}
             for m in (4, 1)]
    check_against_ort(_window_loop(True), feeds + [{**feeds[0], "M": np.array(0, np.int64)}])
    mod = check_against_ort(_window_loop(False), feeds)
    assert "R.Tensor(dtype=\"float32\", ndim=2)" in mod.script()
