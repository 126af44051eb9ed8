"""The recurrent layers (phasec/op/nn/rnn.py: nn.lstm, nn.gru, nn.rnn):
inference (shapes, symbolic dims, the errors), the numpy reference against
the ONNX equations written out independently (helpers/rnn_loops.py), the
lowered kernel (the TIR time loop, run on the TIR interpreter) against both,
with concrete and symbolic lengths, and the TVMScript round trip of the
attributes."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call
from phasec.script.builder import BlockBuilder

from helpers.legalize import check_call
from helpers.op_infer import S, raises, tv
from helpers.rnn_loops import TAKES_ALPHA, TAKES_BETA, recurrent

t, n = tir.Var("t"), tir.Var("n")
RNG = np.random.default_rng(7)
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def _operands(cell, T, N, I, H, d, lens):
    """Variables and random values for every operand (``lens``: seq_lens or None)."""
    g = GATES[cell]
    shapes = {"x": (T, N, I), "w": (d, g * H, I), "r": (d, g * H, H), "b": (d, 2 * g * H),
              "h0": (d, N, H)}
    if cell == "lstm":
        shapes.update({"c0": (d, N, H), "p": (d, 3 * H)})
    values = {k: RNG.uniform(-1.5, 1.5, s).astype("float32") for k, s in shapes.items()}
    if lens is not None:
        values["lens"] = np.asarray(lens, "int32")
    return values


def _onnx_kwargs(cell, values, attrs):
    """The same call in the ONNX terms of helpers/rnn_loops.recurrent."""
    kw = {"B": values["b"], "initial_h": values["h0"], "seq_lens": values.get("lens")}
    if cell == "lstm":
        kw.update(initial_c=values["c0"], P=values["p"])
    onnx_attrs = {k: v for k, v in attrs.items() if k != "activation_alpha"
                  and k != "activation_beta"}
    # one alpha / beta per activation here; ONNX lists only those that take one
    names = [a.lower() for a in attrs.get("activations", ())]
    for key, takes in (("activation_alpha", TAKES_ALPHA), ("activation_beta", TAKES_BETA)):
        if key in attrs:
            onnx_attrs[key] = [v for nm, v in zip(names, attrs[key]) if nm in takes]
    return kw, onnx_attrs


# ---------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------

def test_infer_shapes_and_symbolic_dims():
    x, w, r, b = tv("x", (t, n, 5)), tv("w", (2, 12, 5)), tv("r", (2, 12, 3)), tv("b", (2, 24))
    h0, c0, p = tv("h", (2, n, 3)), tv("c", (2, n, 3)), tv("p", (2, 9))
    assert S(call_op("nn.lstm", x, w, r, b, h0, c0, p, direction="bidirectional")) == (
        'R.Tuple(R.Tensor((t, 2, n, 3), dtype="float32"), R.Tensor((2, n, 3), dtype="float32"), '
        'R.Tensor((2, n, 3), dtype="float32"))')
    assert S(call_op("nn.gru", x, tv("w", (1, 6, 5)), tv("r", (1, 6, 2)), tv("b", (1, 12)),
                     tv("h", (1, n, 2)), tv("l", (n,), "int32"))) == (
        'R.Tuple(R.Tensor((t, 1, n, 2), dtype="float32"), R.Tensor((1, n, 2), dtype="float32"))')
    assert S(call_op("nn.rnn", tv("x", ndim=3), tv("w", (1, 2, 5)), tv("r", (1, 2, 2)),
                     tv("b", (1, 4)), tv("h", (1, n, 2)))) == (
        'R.Tuple(R.Tensor(ndim=4, dtype="float32"), R.Tensor(ndim=3, dtype="float32"))')


def test_infer_errors():
    x, h = tv("x", (4, 2, 5)), tv("h", (1, 2, 3))
    w, r, b = tv("w", (1, 3, 5)), tv("r", (1, 3, 3)), tv("b", (1, 6))
    raises(["weight must have shape (1, 9, 5)", "hidden size 3", "dim 1 is 3"], call_op, "nn.gru",
           x, w, r, b, h)
    raises(["weight must have shape (2, 3, 5)", "bidirectional"], call_op, "nn.rnn",
           x, w, r, b, h, direction="bidirectional")
    raises(["initial_h must have shape (1, 2, 3)", "dim 1 is 4"], call_op, "nn.rnn",
           x, w, r, b, tv("h", (1, 4, 3)))
    raises(["dtype float64 but the data has dtype float32"], call_op, "nn.rnn",
           x, tv("w", (1, 3, 5), "float64"), r, b, h)
    raises(["float tensors", "int32"], call_op, "nn.rnn", tv("x", (4, 2, 5), "int32"),
           *(tv(v.name_hint, v.struct_info.shape, "int32") for v in (w, r, b, h)))
    raises(["seq_lens must hold integers"], call_op, "nn.rnn", x, w, r, b, h, tv("l", (2,)))
    raises(["seq_lens has 3 entries but the batch size is 2"], call_op, "nn.rnn",
           x, w, r, b, h, tv("l", (3,), "int32"))
    raises(["needs 1 activations"], call_op, "nn.rnn", x, w, r, b, h,
           activations=["Tanh", "Relu"])
    raises(["one value per activation"], call_op, "nn.rnn", x, w, r, b, h,
           activations=["Tanh"], activation_alpha=[1.0, 2.0])
    raises(["clip must be positive"], call_op, "nn.rnn", x, w, r, b, h, clip=0.0)
    raises(["takes 5 operands", "optional seq_lens", "got 7"], call_op, "nn.rnn",
           x, w, r, b, h, tv("l", (2,), "int32"), tv("z", (2,), "int32"))
    raises(["unknown activation 'Swish'"], call_op, "nn.rnn", x, w, r, b, h,
           activations=["Swish"])
    raises(["expected one of 'forward'"], call_op, "nn.rnn", x, w, r, b, h, direction="back")


# ---------------------------------------------------------------------------
# the reference and the kernel, against the independent equations
# ---------------------------------------------------------------------------

VARIANTS = [
    ("lstm", {}, None),
    ("lstm", {"direction": "bidirectional", "clip": 0.7}, [3, 0]),
    ("lstm", {"direction": "reverse", "input_forget": True,
              "activations": ("HardSigmoid", "Elu", "ScaledTanh"),
              "activation_alpha": (0.3, 0.9, 1.4), "activation_beta": (0.6, 0.0, 0.8)}, [1, 3]),
    ("lstm", {"direction": "bidirectional",  # different activations: one loop copy each
              "activations": ("Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Softsign", "Relu")},
     [2, 3]),
    ("gru", {"direction": "bidirectional"}, [2, 3]),
    ("gru", {"linear_before_reset": True, "direction": "reverse", "clip": 0.9}, [3, 1]),
    ("gru", {"activations": ("Sigmoid", "LeakyRelu"), "activation_alpha": (0.0, 0.2)}, None),
    ("rnn", {"activations": ("Softplus",)}, [0, 2]),
    ("rnn", {"direction": "bidirectional",
             "activations": ("Affine", "ThresholdedRelu"),
             "activation_alpha": (0.5, 0.1), "activation_beta": (0.2, 0.0)}, None),
]


@pytest.mark.parametrize("cell, attrs, lens", VARIANTS)
def test_reference_and_kernel_against_the_equations(cell, attrs, lens):
    T, N, I, H = 3, 2, 2, 2
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    values = _operands(cell, T, N, I, H, d, lens)
    kw, onnx_attrs = _onnx_kwargs(cell, values, attrs)
    expected = recurrent(cell.upper(), values["x"], values["w"], values["r"], **kw, **onnx_attrs)
    ref = get_op(f"relax.nn.{cell}").reference(*values.values(), **attrs)
    for a, e in zip(ref, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    variables = {tv(k, v.shape, str(v.dtype)): v for k, v in values.items()}
    call = call_op(f"nn.{cell}", *variables, **attrs)
    check_call(call, variables)  # the lowered kernel against the reference


@pytest.mark.parametrize("cell, attrs", [
    ("lstm", {"direction": "bidirectional"}),
    ("gru", {"linear_before_reset": False}),
    ("gru", {"linear_before_reset": True, "direction": "reverse"}),
])
def test_kernel_sums_products_in_vector_lanes(cell, attrs):
    """H = 11: the recurrence products in a vector of partial sums and a
    tail of 3 (a hidden size under a vector sums them one by one)."""
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    values = _operands(cell, 3, 2, 2, 11, d, [3, 2])
    kw, onnx_attrs = _onnx_kwargs(cell, values, attrs)
    expected = recurrent(cell.upper(), values["x"], values["w"], values["r"], **kw, **onnx_attrs)
    variables = {tv(k, v.shape, str(v.dtype)): v for k, v in values.items()}
    call = call_op(f"nn.{cell}", *variables, **attrs)
    check_call(call, variables, hints=(True,), rtol=1e-5, atol=1e-5)
    ref = get_op(f"relax.nn.{cell}").reference(*values.values(), **attrs)
    for a, e in zip(ref, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_kernel_with_symbolic_length_and_batch():
    """One lowering for every (T, N): the time loop's extent is symbolic."""
    values = _operands("lstm", 4, 3, 2, 2, 2, [4, 1, 0])
    shapes = {"x": (t, n, 2), "h0": (2, n, 2), "c0": (2, n, 2), "lens": (n,)}
    variables = {tv(k, shapes.get(k, v.shape), str(v.dtype)): v for k, v in values.items()}
    call = call_op("nn.lstm", *variables, direction="bidirectional")
    low = check_call(call, variables, hints=(True,), dims={t: 4, n: 3})
    x_buffer = low.prim_func.params[0]
    assert all(isinstance(d, tir.Var) for d in x_buffer.shape[:2])  # not specialized


def test_script_round_trip_and_build():
    """The attributes print and parse back; the call compiles through every
    phase (verified) and runs on the VM as its reference says."""
    src = '''
from phasec.script import ir as I, relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("t", 2, 3), "float32"), w: R.Tensor((1, 6, 3), "float32"),
             r: R.Tensor((1, 6, 2), "float32"), b: R.Tensor((1, 12), "float32"),
             h: R.Tensor((1, 2, 2), "float32")):
        y = R.nn.gru(x, w, r, b, h, direction="reverse", activations=("HardSigmoid", "Softsign"),
                     activation_alpha=(0.25, 0.0), activation_beta=(0.5, 0.0), clip=2.0,
                     linear_before_reset=True)
        return y
'''
    mod = phasec.parse(src)
    text = mod.script()
    assert 'activations=("HardSigmoid", "Softsign")' in text
    assert phasec.structural_equal(phasec.parse(text), mod)
    vm = phasec.VirtualMachine(phasec.build(mod))
    args = [RNG.uniform(-1, 1, s).astype("float32") for s in
            [(5, 2, 3), (1, 6, 3), (1, 6, 2), (1, 12), (1, 2, 2)]]
    expected = recurrent("GRU", *args[:3], B=args[3], initial_h=args[4], direction="reverse",
                         activations=["HardSigmoid", "Softsign"], activation_alpha=[0.25],
                         activation_beta=[0.5], clip=2.0, linear_before_reset=1)
    for a, e in zip(vm["main"](*args), expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# the input projection hoisted out of the time loop (a W over HOIST_MIN_BYTES)
# ---------------------------------------------------------------------------

def _hoisted(low) -> bool:
    return "rnn_xp" in str(low.prim_func)


@pytest.mark.parametrize("cell, attrs, lens", VARIANTS)
def test_hoisted_input_projection_against_the_equations(cell, attrs, lens, monkeypatch):
    """Every variant with the projection of all steps computed before the
    time loop (the threshold lowered to 0): reverse directions and entries
    shorter than T read it at their own positions. T = 5, N = 3, I = 7
    (not a multiple of a vector: the tail), H = 3."""
    monkeypatch.setattr("phasec.op.nn._rnn_loop.HOIST_MIN_BYTES", 0)
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    lens = None if lens is None else [*lens, 5]
    values = _operands(cell, 5, 3, 7, 3, d, None if lens is None else lens[-3:])
    kw, onnx_attrs = _onnx_kwargs(cell, values, attrs)
    expected = recurrent(cell.upper(), values["x"], values["w"], values["r"], **kw, **onnx_attrs)
    variables = {tv(k, v.shape, str(v.dtype)): v for k, v in values.items()}
    low = check_call(call_op(f"nn.{cell}", *variables, **attrs), variables, hints=(True,),
                     rtol=1e-5, atol=1e-5)
    assert _hoisted(low)
    ref = get_op(f"relax.nn.{cell}").reference(*values.values(), **attrs)
    for a, e in zip(ref, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_hoisted_projection_with_symbolic_length_and_batch(monkeypatch):
    monkeypatch.setattr("phasec.op.nn._rnn_loop.HOIST_MIN_BYTES", 0)
    values = _operands("gru", 4, 3, 5, 2, 2, [4, 1, 0])
    shapes = {"x": (t, n, 5), "h0": (2, n, 2), "lens": (n,)}
    variables = {tv(k, shapes.get(k, v.shape), str(v.dtype)): v for k, v in values.items()}
    low = check_call(call_op("nn.gru", *variables, direction="bidirectional"), variables,
                     hints=(True,), dims={t: 4, n: 3})
    assert _hoisted(low)


@pytest.mark.parametrize("cell, attrs, hid, inp", [
    ("lstm", {"direction": "bidirectional"}, 37, 113),   # W: 4 * 37 * 113 * 4 B = 67 KB
    ("gru", {"linear_before_reset": True, "direction": "reverse"}, 31, 179),
    ("rnn", {}, 131, 127),
])
def test_large_weight_hoists_and_runs_compiled(cell, attrs, hid, inp):
    """At the default threshold a W over 64 KB is hoisted and a small one
    is not; the compiled kernel (LLVM, on the VM) against the equations,
    with a symbolic T run at a prime length."""
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    values = _operands(cell, 7, 3, inp, hid, d, [7, 2, 0])
    values = {k: (v / np.float32(np.sqrt(inp)) if k in ("x", "w", "r") else v)
              for k, v in values.items()}
    shapes = {"x": (t, 3, inp)}
    variables = {tv(k, shapes.get(k, v.shape), str(v.dtype)): v for k, v in values.items()}
    call = call_op(f"nn.{cell}", *variables, **attrs)
    assert _hoisted(lower_call(call, True))
    small = _operands(cell, 2, 1, 3, 2, d, None)
    small_vars = [tv(k, v.shape, str(v.dtype)) for k, v in small.items()]
    assert not _hoisted(lower_call(call_op(f"nn.{cell}", *small_vars, **attrs), True))
    bb = BlockBuilder()
    with bb.function("main", list(variables)):
        out = bb.emit(call)
        bb.emit_func_output(out)
    vm = phasec.VirtualMachine(phasec.build(bb.get()))
    kw, onnx_attrs = _onnx_kwargs(cell, values, attrs)
    expected = recurrent(cell.upper(), values["x"], values["w"], values["r"], **kw, **onnx_attrs)
    for a, e in zip(vm["main"](*values.values()), expected, strict=True):
        np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a), e,
                                   rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------
# constant weights read transposed in panels, made once per build
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("cell, attrs, hid, inp", [
    ("lstm", {"direction": "bidirectional"}, 37, 29),     # 148 gate rows: a last partial panel
    ("gru", {"linear_before_reset": True}, 70, 5),         # h~'s rows 140..209 across panels
    ("gru", {"direction": "reverse"}, 33, 8),
    ("rnn", {}, 3, 130),
])
def test_constant_weights_are_transposed_once_per_build(cell, attrs, hid, inp):
    """W and R constants: the kernel reads both transposed in panels made by
    PackConstantWeights (one transform after the other), no transposing
    nest is left in it, and the VM's results are the equations'."""
    from phasec.ir import Constant, TensorStructInfo, Var
    from phasec.pipeline import lower
    from phasec.te.schedules.transposed_weights import INPUT_MARK, RECURRENCE_MARK
    from helpers.legalize import walk

    d = 2 if attrs.get("direction") == "bidirectional" else 1
    values = _operands(cell, 6, 2, inp, hid, d, None)
    values = {k: (v / np.float32(np.sqrt(max(inp, hid))) if k in ("x", "w", "r") else v)
              for k, v in values.items()}
    x = Var("x", TensorStructInfo(values["x"].shape, "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit(call_op(f"relax.nn.{cell}", x, *[Constant(v) for k, v in values.items()
                                                             if k != "x"], **attrs))
            y = bb.emit_output(out)
        bb.emit_func_output(y)
    mod = bb.get()
    kernels = dict(lower(mod).prim_funcs())
    (name,) = [k for k in kernels if cell in k]
    assert name.endswith("_prepacked_prepacked"), sorted(kernels)
    assert not any(type(s) is tir.AttrStmt and s.key in (INPUT_MARK, RECURRENCE_MARK)
                   for s in walk(kernels[name].body))
    vm = phasec.VirtualMachine(phasec.build(mod))
    kw, onnx_attrs = _onnx_kwargs(cell, values, attrs)
    expected = recurrent(cell.upper(), values["x"], values["w"], values["r"], **kw, **onnx_attrs)
    for a, e in zip(vm["main"](values["x"]), expected, strict=True):
        np.testing.assert_allclose(np.asarray(a), e, rtol=1e-4, atol=1e-5)
