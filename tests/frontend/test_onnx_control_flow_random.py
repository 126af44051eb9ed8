"""Random ONNX control flow against ONNX Runtime.

The property draws a Loop (trip count and condition each given or left
out, how the body computes its condition, one or two carried values, a scan
output or none, an If inside the body or not) followed by an If on a graph
input whose branches use the loop's results, over random shapes; phasec
compiles it once (verifying after every pass) and must equal ORT on random
inputs, trip counts and conditions.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.transform import PassContext

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
UNARY = ("Tanh", "Neg", "Sigmoid", "Abs")
BINARY = ("Add", "Mul", "Sub")


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value, dtype=F):
    return helper.make_node("Constant", [], [name],
                            value=helper.make_tensor(name + "_v", dtype, [], [value]))


@st.composite
def loop_models(draw):
    shape = draw(st.sampled_from([[3], [2, 3]]))
    with_m, with_cond = draw(st.sampled_from([(True, True), (True, False), (False, True)]))
    carried = draw(st.integers(1, 2))
    scan = draw(st.booleans())
    inner_if = draw(st.booleans())
    # without M, only a count bounds the loop (ORT would run an unbounded one forever)
    stop = draw(st.sampled_from(["sum", "same", "count"] if with_m else ["count"]))
    nodes, k = [], [0]

    def fresh():
        k[0] += 1
        return f"t{k[0]}"

    def chain(src):
        for _ in range(draw(st.integers(1, 3))):
            out = fresh()
            if draw(st.booleans()):
                nodes.append(helper.make_node(draw(st.sampled_from(UNARY)), [src], [out]))
            else:
                nodes.append(helper.make_node(draw(st.sampled_from(BINARY)), [src, "x"], [out]))
            src = out
        return src

    outs = []
    for j in range(carried):
        outs.append(chain(f"v{j}_in"))
    if inner_if:  # the first carried value goes through a data-dependent If
        nodes.append(helper.make_node("ReduceSum", [outs[0]], ["isum"], keepdims=0))
        nodes.append(helper.make_node("Greater", ["isum", "zero"], ["pos"]))
        then_g = helper.make_graph([helper.make_node("Neg", [outs[0]], ["neg"])], "then", [],
                                   [vi("neg", F, shape)])
        else_g = helper.make_graph([helper.make_node("Mul", [outs[0], "x"], ["mul"])], "else",
                                   [], [vi("mul", F, shape)])
        nodes.append(helper.make_node("If", ["pos"], ["picked"], then_branch=then_g,
                                      else_branch=else_g))
        outs[0] = "picked"
    if stop == "sum":
        nodes += [helper.make_node("ReduceSum", [outs[0]], ["s"], keepdims=0),
                  helper.make_node("Less", ["s", "lim"], ["cond_out"])]
    elif stop == "same":
        nodes.append(helper.make_node("Identity", ["cin"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Less", ["i", "kmax"], ["cond_out"]))
    body_outs = [vi("cond_out", B, [])] + [vi(o, F, shape) for o in outs]
    if scan:
        nodes.append(helper.make_node("Mul", [outs[-1], outs[-1]], ["sq"]))
        body_outs.append(vi("sq", F, shape))
    body = helper.make_graph(
        [const("zero", 0.0), helper.make_node("Constant", [], ["kmax"], value=helper.make_tensor(
            "kmax_v", I64, [], [3]))] + nodes, "body",
        [vi("i", I64, []), vi("cin", B, [])] + [vi(f"v{j}_in", F, shape) for j in range(carried)],
        body_outs)
    loop_outs = [f"vf{j}" for j in range(carried)] + (["sqs"] if scan else [])
    loop = helper.make_node("Loop", ["M" if with_m else "", "c" if with_cond else "",
                                     *[f"v{j}" for j in range(carried)]], loop_outs, body=body)
    then_g = helper.make_graph([helper.make_node("Add", ["vf0", "x"], ["r1"])], "then2", [],
                               [vi("r1", F, shape)])
    else_g = helper.make_graph([helper.make_node("Sub", [f"vf{carried - 1}", "x"], ["r2"])],
                               "else2", [], [vi("r2", F, shape)])
    final = helper.make_node("If", ["c2"], ["r"], then_branch=then_g, else_branch=else_g)
    inputs = ([vi("M", I64, [])] if with_m else []) + ([vi("c", B, [])] if with_cond else [])
    inputs += [vi(f"v{j}", F, shape) for j in range(carried)]
    inputs += [vi("x", F, shape), vi("lim", F, []), vi("c2", B, [])]
    outputs = [vi("r", F, shape)] + ([vi("sqs", F, ["n", *shape])] if scan else [])
    graph = helper.make_graph([loop, final], "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model, shape


@settings(max_examples=8)
@given(loop_models(), st.integers(0, 2**31 - 1))
def test_random_loops_and_ifs_equal_onnxruntime(drawn, seed):
    model, shape = drawn
    with PassContext(verify="each"):
        vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    names = [i.name for i in model.graph.input]
    for _ in range(3):
        feeds = {"M": np.array(rng.integers(0, 5), np.int64), "c": np.array(rng.random() < 0.8),
                 "x": rng.uniform(-1, 1, shape).astype(np.float32),
                 "lim": np.array(rng.uniform(-2, 4), np.float32),
                 "c2": np.array(rng.random() < 0.5)}
        for j in range(2):
            feeds[f"v{j}"] = rng.uniform(-1, 1, shape).astype(np.float32)
        feeds = {n: feeds[n] for n in names}
        expected = sess.run(None, feeds)
        got = vm["main"](*feeds.values())
        got = list(got) if len(expected) > 1 else [got]
        for g, e in zip(got, expected):
            g = np.asarray(g)
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
