"""Fused groups lowered to one PrimFunc (phasec.op.legalize.lower_fused): one
loop nest per chain, anchors with their epilogues, costly producers computed
once, tuple outputs, constants; run on the TIR interpreter against numpy."""

import numpy as np

from phasec.interp.tir import run_prim_func
from phasec.ir import (
    Constant, DataflowBlock, Function, SeqExpr, TensorStructInfo, Tuple, TupleGetItem, Var,
    VarBinding, tir,
)
from phasec.op import call_op, get_op
from phasec.op.legalize import legalize_fused

from helpers.legalize import fused, nests, rand, run_fused, tvar, walk

N = tir.Var("n")


# ---------------------------------------------------------------------------
# fused groups
# ---------------------------------------------------------------------------


def test_elementwise_chain_is_one_nest_writing_only_the_output():
    x, y = tvar("x", (N, 8)), tvar("y", (8,))
    func = fused([x, y], lambda bb: call_op("tanh", bb.emit(call_op("multiply", bb.emit(
        call_op("exp", bb.emit(call_op("add", x, y)))), x))))
    prim = legalize_fused(func)
    assert len(nests(prim)) == 1 and isinstance(prim.body, tir.For)
    assert not any(isinstance(s, tir.Allocate) for s in walk(prim.body))
    written = {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.BufferStore)}
    assert written == {prim.params[-1].name}
    for rows in (1, 6):
        xa, ya = rand((rows, 8)), rand((8,))
        (out,), _ = run_fused(func, {x: xa, y: ya}, [(rows, 8)])
        np.testing.assert_allclose(out, np.tanh(np.exp(xa + ya) * xa), rtol=1e-5)


def test_matmul_add_relu_is_one_kernel():
    x, w, b = tvar("x", (N, 16)), tvar("w", (16, 32)), tvar("b", (32,))
    func = fused([x, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("matmul", x, w)), b))))
    prim = legalize_fused(func)
    # the GEMM's nests (its whole row tiles, then the rows left over of the
    # symbolic n: one nest or two, as the target's tiles make them) and no
    # intermediate for the matmul's result: the only kernel-level buffer is
    # the GEMM schedule's packed panel of w
    assert 1 <= len(nests(prim)) <= 2
    top, body = [], prim.body
    while isinstance(body, tir.Allocate):
        top.append(body.buffer.name)
        body = body.body
    assert all(n.startswith("T_matmul_bpack") for n in top), top
    for rows in (3, 8):
        arrays = {x: rand((rows, 16)), w: rand((16, 32)), b: rand((32,))}
        (out,), _ = run_fused(func, arrays, [(rows, 32)])
        np.testing.assert_allclose(out, np.maximum(arrays[x] @ arrays[w] + arrays[b], 0),
                                   rtol=1e-5, atol=1e-5)


def test_layer_norm_gelu_is_one_kernel():
    x, g, b = tvar("x", (4, 32)), tvar("g", (32,)), tvar("b", (32,))
    func = fused([x, g, b], lambda bb: call_op("nn.gelu", bb.emit(
        call_op("nn.layer_norm", x, g, b, axes=(-1,)))))
    prim = legalize_fused(func)
    assert len(nests(prim)) == 1 and not isinstance(prim.body, tir.Allocate)
    arrays = {x: rand((4, 32)), g: rand((32,)), b: rand((32,))}
    (out,), _ = run_fused(func, arrays, [(4, 32)])
    ln = get_op("relax.nn.layer_norm").reference(arrays[x], arrays[g], arrays[b], axes=(-1,))
    np.testing.assert_allclose(out, get_op("relax.nn.gelu").reference(ln), rtol=1e-5, atol=1e-6)


def test_softmax_like_chain_is_one_kernel():
    x = tvar("x", (3, 10))
    func = fused([x], lambda bb: call_op("divide", e := bb.emit(call_op("exp", x)), bb.emit(
        call_op("sum", e, axis=(-1,), keepdims=True))))
    prim = legalize_fused(func)
    assert len(nests(prim)) == 1 and not isinstance(prim.body, tir.Allocate)
    xa = rand((3, 10))
    (out,), _ = run_fused(func, {x: xa}, [(3, 10)])
    np.testing.assert_allclose(out, np.exp(xa) / np.exp(xa).sum(-1, keepdims=True), rtol=1e-5)


def test_conv2d_bias_relu_fused():
    d, w, b = tvar("d", (1, 3, 6, 6)), tvar("w", (4, 3, 3, 3)), tvar("b", (1, 4, 1, 1))
    func = fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, w, padding=1)), b))))
    arrays = {d: rand((1, 3, 6, 6)), w: rand((4, 3, 3, 3)), b: rand((1, 4, 1, 1))}
    (out,), low = run_fused(func, arrays, [(1, 4, 6, 6)])
    conv = get_op("relax.nn.conv2d").reference(arrays[d], arrays[w], padding=(1, 1, 1, 1))
    np.testing.assert_allclose(out, np.maximum(conv + arrays[b], 0), rtol=1e-5, atol=1e-5)
    # output rows of 6, narrower than a vector: the padded input laid out flat
    # (pad_flat), the conv over whole padded rows, then the epilogue drops the
    # padding columns (wider rows: the conv and its epilogue share one nest,
    # test_conv_narrow.py)
    assert len(nests(low.prim_func)) == 3


def test_transposed_matmul_operand_is_staged_for_a_contiguous_inner_loop():
    x, w = tvar("x", (8, 16)), tvar("w", (32, 16))
    func = fused([x, w], lambda bb: call_op("matmul", x, bb.emit(call_op("permute_dims", w))))
    hinted = legalize_fused(func)
    assert isinstance(hinted.body, tir.Allocate) and hinted.body.buffer.name == "T_permute_dims"
    assert any(isinstance(s, tir.For) and s.kind == "vectorized" for s in walk(hinted.body))
    canonical = legalize_fused(func, schedule_hints=False)
    assert not isinstance(canonical.body, tir.Allocate)      # plain inlining without hints
    arrays = {x: rand((8, 16)), w: rand((32, 16))}
    for prim in (hinted, canonical):
        out = np.zeros((8, 32), "float32")
        run_prim_func(prim, [arrays[x], arrays[w], out])
        np.testing.assert_allclose(out, arrays[x] @ arrays[w].T, rtol=1e-5, atol=1e-5)


def test_costly_producer_reused_by_a_matmul_is_computed_once():
    # gelu(x)[i, k] is read for every j: inlining would recompute it N times.
    x, w = tvar("x", (4, 8)), tvar("w", (8, 16))
    func = fused([x, w], lambda bb: call_op("matmul", bb.emit(call_op("nn.gelu", x)), w))
    prim = legalize_fused(func)
    assert isinstance(prim.body, tir.Allocate) and prim.body.buffer.name == "T_gelu"
    arrays = {x: rand((4, 8)), w: rand((8, 16))}
    (out,), _ = run_fused(func, arrays, [(4, 16)])
    gelu = get_op("relax.nn.gelu").reference(arrays[x])
    np.testing.assert_allclose(out, gelu @ arrays[w], rtol=1e-5, atol=1e-5)


def test_fused_tuple_outputs_constants_and_passthrough():
    x = tvar("x", (2, 4))
    bias = Constant(np.arange(4, dtype="float32"))
    half = Constant(np.array(0.5, "float32"))

    def build(bb):
        lv = bb.emit(call_op("add", x, bias))
        parts = bb.emit(call_op("split", lv, indices_or_sections=2, axis=1))
        first = bb.emit(call_op("multiply", bb.emit(TupleGetItem(parts, 0)), half))
        return Tuple([first, x, lv])
    func = fused([x], build)
    xa = rand((2, 4))
    outs, low = run_fused(func, {x: xa}, [(2, 2), (2, 4), (2, 4)])
    assert low.args == (x, bias)                 # non-scalar constants are extra inputs
    np.testing.assert_allclose(outs[0], (xa + np.arange(4))[:, :2] * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(outs[1], xa)
    np.testing.assert_allclose(outs[2], xa + np.arange(4), rtol=1e-6)


def test_fused_function_built_by_hand_with_plain_bindings():
    x = tvar("x", (3,))
    lv = Var("lv", TensorStructInfo((3,), "float32"))
    call = call_op("exp", x)
    body = SeqExpr([DataflowBlock([VarBinding(lv, call)])], lv)
    func = Function([x], body, attrs={"Primitive": True})
    xa = rand((3,))
    (out,), _ = run_fused(func, {x: xa}, [(3,)])
    np.testing.assert_allclose(out, np.exp(xa), rtol=1e-6)
