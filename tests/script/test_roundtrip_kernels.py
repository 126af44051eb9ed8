"""Every lowered kernel reads back from its text as the same kernel.

Two causes broke it on real models (16 of 149 kernels of five of them): a
``SeqStmt`` of one statement (its text is the bare statement) and one loop
variable bound by two sibling loops (its text has two loops of one name,
read back as two variables). Sequences are now flat by construction
(``tir.SeqStmt`` refuses a single statement, ``tir.seq`` builds one) and TE
lowering ends with ``te.stmt.bind_once``; the verifier's WF505 rejects a
variable bound twice.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.interp.tir import run_prim_func
from phasec.ir import IRModule, tir
from phasec.ir.structural import first_mismatch
from phasec.ir.tir_visitor import walk
from phasec.pipeline import lower
from phasec.te.stmt import bind_once
from phasec import verifier

I64 = "int64"


def i64(v: int) -> tir.IntImm:
    return tir.IntImm(v, I64)


def reads_back(func: tir.PrimFunc) -> str | None:
    """None when ``func``'s text parses back as ``func``, else where it differs."""
    mod = IRModule({"k": func})
    return first_mismatch(phasec.parse(mod.script(), "k.py"), mod)


# ---------------------------------------------------------------------------
# Sequences
# ---------------------------------------------------------------------------

def _store(buf: tir.Buffer, i: tir.PrimExpr, value: float) -> tir.BufferStore:
    return tir.BufferStore(buf, tir.FloatImm(value, "float32"), (i,))


def test_a_sequence_of_one_statement_is_refused() -> None:
    a = tir.Buffer("A", (i64(4),), "float32")
    s = _store(a, i64(0), 1.0)
    with pytest.raises(ValueError, match="tir.seq"):
        tir.SeqStmt((s,))
    with pytest.raises(ValueError, match="tir.seq"):  # one once flattened
        tir.SeqStmt((tir.SeqStmt(()), s))


def test_seq_flattens_and_gives_one_statement_bare() -> None:
    a = tir.Buffer("A", (i64(4),), "float32")
    s0, s1, s2 = (_store(a, i64(k), float(k)) for k in range(3))
    assert tir.seq([s0]) is s0
    assert tir.seq([tir.SeqStmt(()), s0]) is s0
    empty = tir.seq([])
    assert type(empty) is tir.SeqStmt and empty.stmts == ()
    nested = tir.seq([s0, tir.seq([s1, s2])])
    assert type(nested) is tir.SeqStmt and nested.stmts == (s0, s1, s2)


def test_a_loop_over_one_statement_reads_back() -> None:
    # the shape pool_window's phase copy built with one phase: For(j, SeqStmt((store,)))
    a = tir.Buffer("A", (i64(4),), "float32")
    j = tir.Var("j", I64)
    func = tir.PrimFunc((a,), tir.For(j, i64(0), i64(4), "serial", tir.seq([_store(a, j, 2.0)])))
    assert reads_back(func) is None


# ---------------------------------------------------------------------------
# A variable bound twice
# ---------------------------------------------------------------------------

def _twice_kernel(same_object: bool) -> tuple[tir.PrimFunc, tir.Var]:
    """B[j] = A[j] + 1 for j < 3, then B[j + 3] = A[j + 3] * 2 for j < 4, both
    loops over one Var (or the very same loop statement twice)."""
    a = tir.Buffer("A", (i64(7),), "float32")
    b = tir.Buffer("B", (i64(7),), "float32")
    j = tir.Var("j", I64)
    one = tir.FloatImm(1.0, "float32")
    first = tir.For(j, i64(0), i64(3), "serial",
                    tir.BufferStore(b, tir.BufferLoad(a, (j,)) + one, (j,)))
    if same_object:
        body = tir.SeqStmt((first, first))
    else:
        k = j + i64(3)
        second = tir.For(j, i64(0), i64(4), "vectorized", tir.BufferStore(
            b, tir.BufferLoad(a, (k,)) * tir.FloatImm(2.0, "float32"), (k,)))
        body = tir.SeqStmt((first, second))
    return tir.PrimFunc((a, b), body), j


@pytest.mark.parametrize("same_object", [False, True], ids=["sibling", "same-loop-twice"])
def test_a_variable_bound_twice_is_rebound(same_object: bool) -> None:
    func, j = _twice_kernel(same_object)
    codes = {d.code for d in verifier.check(IRModule({"k": func}))}
    assert codes == {"WF505"}
    assert reads_back(func) is not None  # the bug: two loops of one name are two variables
    fixed = tir.PrimFunc(func.params, bind_once(func.body), func.attrs)
    assert verifier.check(IRModule({"k": fixed})) == []
    assert reads_back(fixed) is None
    loops = fixed.body.stmts
    assert loops[0].loop_var is j and loops[1].loop_var is not j
    assert loops[1].loop_var.name == "j"
    # the same program: run by the reference interpreter against numpy
    x = np.arange(7, dtype=np.float32) - 2.5
    out = np.zeros(7, np.float32)
    run_prim_func(fixed, [x, out])
    want = x + 1 if same_object else np.concatenate([x[:3] + 1, x[3:] * 2])
    np.testing.assert_array_equal(out[:3], want[:3])
    np.testing.assert_array_equal(out[3:], np.zeros(4, np.float32) if same_object else want[3:])


def test_bind_once_keeps_a_kernel_without_rebinding() -> None:
    a = tir.Buffer("A", (i64(4),), "float32")
    i, j = tir.Var("i", I64), tir.Var("j", I64)
    body = tir.seq([tir.For(i, i64(0), i64(2), "serial", _store(a, i, 1.0)),
                    tir.For(j, i64(2), i64(2), "serial", _store(a, j, 2.0))])
    assert bind_once(body) is body


def test_bind_once_renames_inside_a_renamed_loop_too() -> None:
    # the second i-loop holds a j-loop that a first j-loop bound already
    a = tir.Buffer("A", (i64(2), i64(2)), "float32")
    i, j = tir.Var("i", I64), tir.Var("j", I64)
    put = tir.BufferStore(a, tir.FloatImm(1.0, "float32"), (i, j))
    inner = tir.For(j, i64(0), i64(2), "serial", put)
    body = tir.seq([tir.For(j, i64(0), i64(2), "serial",
                            tir.BufferStore(a, tir.FloatImm(0.0, "float32"), (j, j))),
                    tir.For(i, i64(0), i64(2), "serial", inner),
                    tir.For(i, i64(0), i64(2), "serial", inner)])
    func = tir.PrimFunc((a,), bind_once(body))
    assert verifier.check(IRModule({"k": func})) == []
    assert reads_back(func) is None
    bound = [n.loop_var for n in walk(func.body) if isinstance(n, tir.For)]
    assert len(bound) == 5 and len({id(v) for v in bound}) == 5


# ---------------------------------------------------------------------------
# Real kernels: the depthwise convolutions of MobileNetV2 and EfficientNet-B0
# ---------------------------------------------------------------------------

# (channels, size, kernel, stride): the kernels that did not read back
DEPTHWISE = [(16, 112, 3, 1), (48, 112, 3, 2), (96, 56, 3, 1), (96, 28, 3, 1), (192, 14, 3, 1),
             (144, 56, 5, 2), (240, 28, 5, 1), (672, 14, 5, 2), (1152, 7, 5, 1)]


def _depthwise_model() -> onnx.ModelProto:
    """One branch per shape: depthwise Conv + bias, then Clip(0, 6) or x * sigmoid(x)."""
    rng = np.random.default_rng(0)
    nodes, inputs, outputs, inits = [], [], [], []
    for n, (c, size, k, s) in enumerate(DEPTHWISE):
        x, w, b, y, out = f"x{n}", f"w{n}", f"b{n}", f"y{n}", f"out{n}"
        inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, size, size]))
        inits.append(numpy_helper.from_array(rng.standard_normal((c, 1, k, k), np.float32), w))
        inits.append(numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), b))
        nodes.append(helper.make_node("Conv", [x, w, b], [y], group=c, kernel_shape=[k, k],
                                      strides=[s, s], pads=[k // 2] * 4))
        if n % 2:
            nodes.append(helper.make_node("Sigmoid", [y], [f"g{n}"]))
            nodes.append(helper.make_node("Mul", [y, f"g{n}"], [out]))
        else:
            lo, hi = f"lo{n}", f"hi{n}"
            inits.append(numpy_helper.from_array(np.array(0, np.float32), lo))
            inits.append(numpy_helper.from_array(np.array(6, np.float32), hi))
            nodes.append(helper.make_node("Clip", [y, lo, hi], [out]))
        o = (size + 2 * (k // 2) - k) // s + 1
        outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, c, o, o]))
    graph = helper.make_graph(nodes, "depthwise", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_depthwise_kernels_of_mobile_networks_read_back() -> None:
    mod = lower(from_onnx(_depthwise_model()))
    kernels = {str(k): f for k, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}
    assert len(kernels) >= len(DEPTHWISE)
    bad = {name: where for name, f in kernels.items() if (where := reads_back(f)) is not None}
    assert bad == {}


def test_a_buffer_allocated_twice_is_reallocated() -> None:
    a = tir.Buffer("A", (i64(4),), "float32")
    t = tir.Buffer("t", (i64(4),), "float32")
    i, j = tir.Var("i", I64), tir.Var("j", I64)
    copy = tir.For(j, i64(0), i64(4), "serial",
                   tir.BufferStore(a, tir.BufferLoad(t, (j,)), (j,)))
    fill = tir.For(i, i64(0), i64(4), "serial", _store(t, i, 3.0))
    body = tir.seq([tir.Allocate(t, tir.seq([fill, copy])), tir.Allocate(t, fill)])
    func = tir.PrimFunc((a,), body)
    assert {d.code for d in verifier.check(IRModule({"k": func}))} == {"WF505"}
    assert reads_back(func) is not None  # two ``t = T.alloc_buffer`` are two buffers
    fixed = tir.PrimFunc((a,), bind_once(body))
    assert verifier.check(IRModule({"k": fixed})) == []
    assert reads_back(fixed) is None
    first, second = fixed.body.stmts
    assert first.buffer is t and second.buffer is not t and second.buffer.name == "t"
    out = np.zeros(4, np.float32)
    run_prim_func(fixed, [out])
    np.testing.assert_array_equal(out, np.full(4, 3.0, np.float32))
