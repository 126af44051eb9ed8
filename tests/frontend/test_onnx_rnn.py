"""ONNX LSTM, GRU and RNN (phasec/frontend/onnx/ops_rnn.py over R.nn.lstm /
gru / rnn): each variant of the attributes and optional inputs, compiled
through the default pipeline and run on the VM, against ONNX Runtime on the
same model and against the ONNX equations written out in numpy
(helpers/rnn_loops.py). The variants of one operator are nodes of one graph
(one compilation each); ONNX Runtime refuses ``layout=1``, so its model
holds the time-major twin of such a node between Transposes. A symbolic sequence length
and batch size compile once and run at two sizes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.errors import PhasecError
from phasec.frontend.errors import UnsupportedModelError
from phasec.frontend.onnx import from_onnx

from helpers.rnn_loops import recurrent

F, I32 = TensorProto.FLOAT, TensorProto.INT32
T, N, IN, H = 4, 3, 2, 3
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: batch entry lengths: a full one, an empty one, a short one
LENS = np.array([4, 0, 2], np.int32)


def _rand(rng, *shape, scale=1.0):
    return rng.uniform(-scale, scale, shape).astype(np.float32)


class _Graph:
    """Nodes of one operator sharing the data ``X`` and the lengths ``L``;
    weights are initializers, initial states graph inputs."""

    def __init__(self, op: str, seed: int = 0, hidden: int = H) -> None:
        self.op, self.rng, self.hid = op, np.random.default_rng(seed), hidden
        self.feed = {"X": _rand(self.rng, T, N, IN, scale=2.0), "L": LENS}
        self.nodes = [helper.make_node("Transpose", ["X"], ["Xb"], perm=[1, 0, 2])]
        self.inits: dict[str, np.ndarray] = {}
        self.outputs: list[str] = []
        self.cases: list[tuple[list[str], list[np.ndarray]]] = []

    def add(self, k: int, attrs: dict, optional=(), outputs=("Y", "Yh", "Yc")):
        """Node ``k`` with ``optional`` inputs among B, L, H0, C0, P; its
        expected outputs from numpy."""
        op, g, hid = self.op, GATES[self.op], self.hid
        d = 2 if attrs.get("direction") == "bidirectional" else 1
        batch_major = attrs.get("layout", 0) == 1
        w, r = _rand(self.rng, d, g * hid, IN), _rand(self.rng, d, g * hid, hid)
        self.inits.update({f"W{k}": w, f"R{k}": r})
        given = {"X": self.feed["X"], "W": w, "R": r}
        names = ["Xb" if batch_major else "X", f"W{k}", f"R{k}"]
        state_shape = (N, d, hid) if batch_major else (d, N, hid)
        for opt, shape in (("B", (d, 2 * g * hid)), ("L", None), ("H0", state_shape),
                           ("C0", state_shape), ("P", (d, 3 * hid))):
            if opt in ("C0", "P") and op != "LSTM":
                continue
            if opt not in optional:
                names.append("")
                continue
            if opt == "L":
                names.append("L")
                given["seq_lens"] = LENS
                continue
            value = _rand(self.rng, *shape)
            name = f"{opt}{k}"
            (self.feed if opt in ("H0", "C0") else self.inits)[name] = value
            names.append(name)
            given[{"B": "B", "H0": "initial_h", "C0": "initial_c", "P": "P"}[opt]] = value
        while names[-1] == "":
            names.pop()
        outs = [f"{o}{k}" if o else "" for o in outputs[:3 if op == "LSTM" else 2]]
        self.nodes.append(helper.make_node(op, names, outs, hidden_size=hid, **attrs))
        x = given.pop("X").transpose(1, 0, 2) if batch_major else given.pop("X")
        expected = recurrent(op, x, given.pop("W"), given.pop("R"), **given, **attrs)
        kept = [(o, e) for o, e in zip(outs, expected) if o]
        self.outputs += [o for o, _ in kept]
        self.cases.append(([o for o, _ in kept], [e for _, e in kept]))

    def model(self, for_ort: bool = False, dims=None):
        nodes = [_time_major(n) if for_ort else [n] for n in self.nodes]
        nodes = [n for group in nodes for n in group]
        inputs = [helper.make_tensor_value_info(n, I32 if n == "L" else F,
                                                (dims or {}).get(n, v.shape))
                  for n, v in self.feed.items()]
        outs = [helper.make_tensor_value_info(o, F, None) for o in self.outputs]
        graph = helper.make_graph(nodes, self.op, inputs, outs, initializer=[
            numpy_helper.from_array(v, n) for n, v in self.inits.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])

    def check(self, rtol: float = 2e-5, atol: float = 2e-5) -> None:
        model = self.model()
        got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*self.feed.values())
        got = dict(zip(self.outputs, got))
        sess = ort.InferenceSession(self.model(for_ort=True).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        ort_out = dict(zip(self.outputs, sess.run(None, self.feed)))
        for outs, expected in self.cases:
            for name, e in zip(outs, expected):
                np.testing.assert_allclose(got[name], e, rtol=rtol, atol=atol, err_msg=name)
                np.testing.assert_allclose(got[name], ort_out[name], rtol=rtol, atol=atol,
                                           err_msg=f"{name} vs ONNX Runtime")


def _time_major(node):
    """``node`` as ONNX Runtime runs it: a ``layout=1`` node (which ONNX
    Runtime refuses) as its time-major twin between Transposes."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.pop("layout", 0) != 1:
        return [node]
    attrs = {k: v.decode() if isinstance(v, bytes) else
             [x.decode() if isinstance(x, bytes) else x for x in v] if isinstance(v, list) else v
             for k, v in attrs.items()}
    pre, ins = [], list(node.input)
    ins[0] = "X"
    for k in (5, 6):  # initial_h, initial_c: (N, D, H) -> (D, N, H)
        if k < len(ins) and ins[k]:
            pre.append(helper.make_node("Transpose", [ins[k]], [ins[k] + "_tm"], perm=[1, 0, 2]))
            ins[k] += "_tm"
    post, outs = [], []
    for k, o in enumerate(node.output):
        outs.append(o + "_tm" if o else "")
        if o:
            perm = [2, 0, 1, 3] if k == 0 else [1, 0, 2]
            post.append(helper.make_node("Transpose", [o + "_tm"], [o], perm=perm))
    return [*pre, helper.make_node(node.op_type, ins, outs, **attrs), *post]


def test_lstm_variants():
    g = _Graph("LSTM")
    g.add(0, {})
    g.add(1, {"direction": "reverse"}, optional=("B", "L", "H0", "C0", "P"))
    g.add(2, {"direction": "bidirectional", "clip": 0.6,
              "activations": ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "ScaledTanh", "Elu"],
              "activation_alpha": [0.3, 1.2, 0.8], "activation_beta": [0.4, 0.7]},
          optional=("B", "L"))
    g.add(3, {"input_forget": 1}, optional=("H0", "P"), outputs=("", "Yh", ""))
    g.add(4, {"direction": "bidirectional", "layout": 1}, optional=("B", "L", "H0", "C0"))
    g.check()


def test_gru_variants():
    g = _Graph("GRU", seed=1)
    g.add(0, {})
    g.add(1, {"direction": "reverse", "linear_before_reset": 1}, optional=("B", "L", "H0"))
    g.add(2, {"direction": "bidirectional", "clip": 0.8,
              "activations": ["Sigmoid", "Relu", "HardSigmoid", "LeakyRelu"],
              "activation_alpha": [0.25, 0.6, 0.1], "activation_beta": [0.3]},
          optional=("B", "L"), outputs=("Y", ""))
    g.add(3, {"layout": 1, "linear_before_reset": 1}, optional=("B", "L", "H0"))
    g.check()


def test_rnn_variants():
    g = _Graph("RNN", seed=2)
    g.add(0, {})
    g.add(1, {"direction": "reverse", "activations": ["Relu"]}, optional=("B", "L", "H0"))
    g.add(2, {"direction": "bidirectional", "clip": 1.5, "activations": ["Affine", "Softplus"],
              "activation_alpha": [0.5], "activation_beta": [0.1]}, optional=("B", "L"))
    g.add(3, {"direction": "bidirectional", "activations": ["ThresholdedRelu", "Softsign"],
              "activation_alpha": [0.2], "layout": 1}, optional=("H0",))
    g.check()


def test_symbolic_sequence_length_and_batch():
    """Compiled once with T and N symbolic; run at two sizes (lengths at run time)."""
    hid = 10  # over a vector: the recurrence sums in vector lanes, then a tail
    g = _Graph("LSTM", seed=3, hidden=hid)
    g.add(0, {"direction": "bidirectional"}, optional=("B", "L", "H0", "C0", "P"))
    dims = {"X": ("T", "N", IN), "L": ("N",), "H00": (2, "N", hid), "C00": (2, "N", hid)}
    model = g.model(dims=dims)
    mod = from_onnx(model)
    text = mod.script()
    assert "R.nn.lstm" in text and '"T"' not in text  # symbolic dims, not names
    vm = phasec.VirtualMachine(phasec.build(mod))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    for t, n in ((5, 2), (2, 4)):
        feed = {"X": _rand(rng, t, n, IN), "L": rng.integers(0, t + 1, n).astype(np.int32),
                "H00": _rand(rng, 2, n, hid), "C00": _rand(rng, 2, n, hid)}
        got = vm["main"](*feed.values())
        for a, b in zip(got, sess.run(None, feed)):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_float16_computes_in_float32():
    rng = np.random.default_rng(5)
    x, w, r = _rand(rng, T, N, IN), _rand(rng, 1, 3 * H, IN), _rand(rng, 1, 3 * H, H)
    node = helper.make_node("GRU", ["X", "W", "R"], ["Y", "Yh"], hidden_size=H)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT16, x.shape)], [helper.make_tensor_value_info(
            o, TensorProto.FLOAT16, None) for o in ("Y", "Yh")], initializer=[
        numpy_helper.from_array(w.astype(np.float16), "W"),
        numpy_helper.from_array(r.astype(np.float16), "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    mod = from_onnx(model)
    assert "float32" in mod.script()
    got = phasec.VirtualMachine(phasec.build(mod))["main"](x.astype(np.float16))
    expected = recurrent("GRU", *(v.astype(np.float16) for v in (x, w, r)), dtype="float16")
    for a, e in zip(got, expected):
        assert a.dtype == np.float16
        np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), atol=3e-3)


@pytest.mark.parametrize("attrs, message", [
    ({"direction": "sideways"}, "direction must be one of"),
    ({"activations": ["Tanh", "Tanh"]}, "needs 1 activations"),
    ({"layout": 2}, "layout must be 0 or 1"),
    ({"hidden_size": 5}, "hidden_size=5"),
])
def test_invalid_attributes_are_frontend_errors(attrs, message):
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], **{"hidden_size": H, **attrs})
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", F, (T, N, IN))],
                              [helper.make_tensor_value_info("Y", F, None)], initializer=[
        numpy_helper.from_array(np.zeros((1, H, IN), np.float32), "W"),
        numpy_helper.from_array(np.zeros((1, H, H), np.float32), "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    with pytest.raises(PhasecError, match=message):
        from_onnx(model)


def test_unknown_activation_is_reported_unsupported():
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=H, activations=["Swish"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", F, (T, N, IN))],
                              [helper.make_tensor_value_info("Y", F, None)], initializer=[
        numpy_helper.from_array(np.zeros((1, H, IN), np.float32), "W"),
        numpy_helper.from_array(np.zeros((1, H, H), np.float32), "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    with pytest.raises(UnsupportedModelError, match="activation 'Swish'"):
        from_onnx(model)
