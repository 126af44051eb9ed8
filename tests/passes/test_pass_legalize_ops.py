"""LegalizeOps (phase 1 -> 2): every operator becomes a call_tir of a kernel
(deduplicated, named deterministically), fused functions one kernel each,
symbolic dims mapped to the caller; its errors and declaration."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import PassError, PhaseError
from phasec.backend.vm import VirtualMachine
from phasec.interp import run as interpret
from phasec.ir import (
    Call, Function, Phase, PrimValue, TensorStructInfo, Tuple, Var, assert_structural_equal,
    structural_equal, tir,
)
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.op.legalize import LEGALIZE, legalize_call
from phasec.transform import Sequential, get_pass

from phasec.passes.legalize_ops import LegalizeOpsError, kernel_base_name

from helpers.lowering import (
    E2E_TEXT, MLP_TEXT, assert_same_results, bindings, calls_of, op_names, rand, run_pass,
)


# ---------------------------------------------------------------------------
# LegalizeOps
# ---------------------------------------------------------------------------


def test_legalize_ops_lowers_every_operator_to_call_tir():
    mod = phasec.parse(MLP_TEXT)
    out = run_pass("LegalizeOps", mod)
    assert out.phase == Phase.LOWERING
    main = out["main"]
    assert op_names(main) == ["relax.call_tir"] * 4
    kernels = [b.value.args[0].name_hint for b in bindings(main)]
    assert kernels == ["matmul", "add", "relu", "softmax"]
    # each kernel is the PrimFunc legalize_call generates for the original call
    for before, name in zip(bindings(mod["main"]), kernels):
        assert isinstance(out[name], tir.PrimFunc)
        assert structural_equal(out[name], legalize_call(before.value))
    # the binding variables (and so every use of them) are kept
    assert [b.var for b in bindings(main)] == [b.var for b in bindings(mod["main"])]
    x, w, b = rand(5, 4), rand(4, 3), rand(3)
    assert_same_results(mod, out, x, w, b)


def test_legalize_ops_out_sinfo_and_args_of_call_tir():
    mod = phasec.parse(MLP_TEXT)
    out = run_pass("LegalizeOps", mod)
    first = bindings(out["main"])[0].value
    params = mod["main"].params
    assert isinstance(first.args[1], Tuple)
    assert list(first.args[1].fields) == [params[0], params[1]]
    n = params[0].struct_info.shape[0]
    (sinfo,) = first.sinfo_args
    assert sinfo.shape[0] is n and sinfo.dtype == "float32"
    assert len(first.args) == 2  # no tir_vars: n is bound by x's buffer


def test_legalize_ops_binds_output_only_dims_without_tir_vars():
    # As TVM 0.27's LegalizeOps: n of R.zeros(R.shape([n, 3])) is bound by the
    # kernel's output buffer; n of R.shape([n * 2]), which no buffer has as a
    # bare dimension, is a scalar parameter passed in the argument tuple as
    # R.prim_value(n), before the outputs. No call_tir has a tir_vars operand.
    mod = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")) -> R.Tuple(R.Tensor(("n", 3), "float32"), R.Tensor(("n * 2",), "float32")):
        n = T.int64()
        z = R.zeros(R.shape([n, 3]), "float32")
        gv = R.add(x, z)
        w = R.ones(R.shape([n * 2]), "float32")
        return (gv, w)
''')
    out = run_pass("LegalizeOps", mod)
    calls = [b.value for b in bindings(out["main"]) if isinstance(b.value, Call)]
    assert all(len(c.args) == 2 for c in calls)  # (kernel, argument tuple): no tir_vars
    zeros, ones = (next(c for c in calls if c.args[0].name_hint == k) for k in ("zeros", "ones"))
    assert zeros.args[1].fields == () and not any(isinstance(p, tir.Var)
                                                   for p in out["zeros"].params)
    (n,) = [f.value for f in ones.args[1].fields if isinstance(f, PrimValue)]
    assert n is mod["main"].params[0].struct_info.shape[0]
    scalar, buf = out["ones"].params
    assert isinstance(scalar, tir.Var) and isinstance(buf, tir.Buffer)
    x = rand(4, 3)
    lowered = run_pass("CallTIRRewrite", get_pass("RemovePurityChecking")(out))
    for m in (out, lowered):
        gv, w = interpret(m, x)
        np.testing.assert_array_equal(gv, x)
        np.testing.assert_array_equal(w, np.ones(8, "float32"))
    gv, w = VirtualMachine(phasec.build(mod))["main"](x[:2])  # the whole pipeline, native
    np.testing.assert_array_equal(np.asarray(gv), x[:2])
    np.testing.assert_array_equal(np.asarray(w), np.ones(4, "float32"))


def test_legalize_ops_deduplicates_kernels_and_names_them_deterministically():
    mod = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        a = R.add(x, x)
        b = R.add(a, x)
        c = R.add(b, a)
        d = R.add(y, y)
        return d
    @R.function
    def add(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x
''')
    out = run_pass("LegalizeOps", mod)
    names = [b.value.args[0].name_hint for b in bindings(out["main"])]
    # x + x (one buffer read twice) differs from a + x; a + x and b + a are one kernel;
    # the (8,) add is another; "add" itself is taken by a Relax function
    assert names == ["add1", "add2", "add2", "add3"]
    assert sorted(n for n, _ in out.prim_funcs()) == ["add1", "add2", "add3"]
    assert isinstance(out["add"], Function)
    again = run_pass("LegalizeOps", mod)
    assert_structural_equal(out, again)
    assert list(out.functions) == list(again.functions)


def test_legalize_ops_reuses_an_identical_existing_prim_func():
    mod = phasec.parse(MLP_TEXT)
    once = get_pass("LegalizeOps")(mod)
    # put the kernel for "relu" into a phase-1 module under another name
    relu = once["relu"]
    mod2 = mod.update({"my_relu": relu})
    out = run_pass("LegalizeOps", mod2)
    names = [b.value.args[0].name_hint for b in bindings(out["main"])]
    assert names[2] == "my_relu" and "relu" not in out


def test_legalize_ops_tuple_operands_and_results():
    mod = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")) -> R.Tensor((2, 8), "float32"):
        t = (x, y)
        c = R.concat(t, axis=1)
        s = R.split(c, 2, axis=1)
        a = s[0]
        d = R.concat((a, y), axis=1)
        return d
''')
    out = run_pass("LegalizeOps", mod)
    main = out["main"]
    calls = calls_of(main, "relax.call_tir")
    assert [c.value.args[0].name_hint for c in calls] == ["concat", "split", "concat"]  # same shapes: one kernel
    # a tuple-typed variable operand is passed field by field (bound to variables)
    assert all(isinstance(f, Var) for f in calls[0].value.args[1].fields)
    assert len(calls[0].value.args[1].fields) == 2
    assert isinstance(calls[1].value.sinfo_args[0], phasec.ir.TupleStructInfo)
    assert_same_results(mod, out, rand(2, 4), rand(2, 4))


def test_legalize_ops_constant_operands():
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(call_op("relax.add", x, phasec.ir.Constant(np.arange(3, dtype="float32"))))
        b = bb.emit(call_op("relax.multiply", a, phasec.ir.Constant(np.float32(2.0))))
        bb.emit_func_output(b)
    mod = bb.get().with_phase("optimization")
    out = run_pass("LegalizeOps", mod)
    first, second = (b.value for b in bindings(out["main"]))
    assert isinstance(first.args[1].fields[1], phasec.ir.Constant)
    assert len(second.args[1].fields) == 1  # the 0-d constant is folded into the kernel
    assert_same_results(mod, out, rand(3))


def test_legalize_ops_lowers_fused_functions_to_one_kernel_each():
    mod = phasec.parse(E2E_TEXT)
    fused = Sequential([get_pass(n) for n in ("LambdaLifting", "FuseOps", "ToNonDataflow")])(mod)
    primitives = [n for n, f in fused.relax_functions() if f.attrs.get("Primitive")]
    assert primitives, "FuseOps made no Primitive function"
    out = run_pass("LegalizeOps", fused)
    assert not any(f.attrs.get("Primitive") for _, f in out.relax_functions())
    calls = calls_of(out["main"], "relax.call_tir")
    assert len(calls) == len(primitives)
    # each fused group is one PrimFunc that keeps the group's name
    assert sorted(c.value.args[0].name_hint for c in calls) == sorted(primitives)
    assert sorted(n for n, _ in out.prim_funcs()) == sorted(primitives)
    x, w, b = rand(6, 8), rand(8, 16), rand(16)
    assert_same_results(mod, out, x, w, b)


FUSED_BY_HAND = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(private=True)
    def fused_add_zeros(s: R.Shape(["k"]), a: R.Tensor(("m", 3), "float32")) -> R.Tensor(("m", 3), "float32"):
        R.func_attr({"Primitive": True})
        k = T.int64()
        m = T.int64()
        z = R.zeros(R.shape([m, 3]), "float32")
        y = R.add(a, z)
        return y

    @R.function
    def main(x: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        n = T.int64()
        gv = cls.fused_add_zeros(R.shape([n]), x)
        gv1 = cls.fused_add_zeros(R.shape([n]), gv)
        return gv1
'''


def test_legalize_ops_maps_symbolic_dims_of_a_fused_function_to_the_caller():
    mod = phasec.parse(FUSED_BY_HAND)
    out = run_pass("LegalizeOps", mod)
    assert "fused_add_zeros" in out and isinstance(out["fused_add_zeros"], tir.PrimFunc)
    n = mod["main"].params[0].struct_info.shape[0]
    calls = calls_of(out["main"], "relax.call_tir")
    assert len(calls) == 2
    for c in calls:
        assert c.value.args[0].name_hint == "fused_add_zeros"
        assert c.value.sinfo_args[0].shape[0] is n  # the callee's m became the caller's n
    assert_same_results(mod, out, rand(5, 3))


def test_legalize_ops_stop_fusion_is_an_identity():
    mod = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        a = R.exp(x)
        b = R.stop_fusion(a)
        c = R.exp(b)
        return c
''')
    out = run_pass("LegalizeOps", mod)
    b = bindings(out["main"])[1]
    assert b.var.name_hint == "b" and b.value is bindings(out["main"])[0].var
    assert_same_results(mod, out, rand(3))


def test_legalize_ops_without_legalization_names_op_and_location(monkeypatch):
    monkeypatch.delitem(LEGALIZE, "relax.nn.relu")
    mod = phasec.parse(MLP_TEXT)
    with pytest.raises(PassError) as info:
        get_pass("LegalizeOps")(mod)
    message = str(info.value)
    assert "R.nn.relu" in message and "'main'" in message and "'lv2'" in message
    assert "no legalization" in message
    assert isinstance(info.value.__cause__, LegalizeOpsError)


def test_legalize_ops_rejects_a_primitive_function_used_as_a_value():
    text = FUSED_BY_HAND.replace("gv1 = cls.fused_add_zeros(R.shape([n]), gv)",
                                 "f = cls.fused_add_zeros\n        gv1 = gv")
    mod = phasec.parse(text)
    with pytest.raises(PassError, match="used as a value"):
        get_pass("LegalizeOps")(mod)


def test_legalize_ops_phase_and_declaration():
    info = get_pass("LegalizeOps").info
    assert info.phases == frozenset({Phase.OPTIMIZATION})
    assert info.transition_to == Phase.LOWERING and info.required == ("ToNonDataflow",)
    mod = phasec.parse(MLP_TEXT.replace('I.module_attrs({"phase": "optimization"})', ""))
    with pytest.raises(PhaseError, match="LambdaLifting"):
        get_pass("LegalizeOps")(mod)
    assert kernel_base_name("relax.nn.conv2d") == "conv2d"


def test_legalize_ops_in_a_sequential_runs_to_non_dataflow_first():
    mod = phasec.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a = R.exp(x)
            gv = R.nn.relu(a)
            R.output(gv)
        return gv
''')
    out = Sequential([get_pass("LambdaLifting"), get_pass("LegalizeOps")])(mod)
    assert out.phase == Phase.LOWERING
    assert not any(isinstance(b, phasec.ir.DataflowBlock) for b in out["main"].body.blocks)
    assert_same_results(mod, out, rand(3))


def test_legalize_ops_gives_a_one_field_tuple_result_a_tensor_call_tir():
    # TVM 0.27's call_tir gives a single output a tensor result (out_ty is a
    # list of tensor types), so a one-field tuple is built after the call
    mod = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32")):
        g = R.meshgrid((x,), indexing="ij")
        return g
''')
    out = run_pass("LegalizeOps", mod)
    call, tup = (b.value for b in bindings(out["main"]))
    assert isinstance(call, Call) and isinstance(call.struct_info, TensorStructInfo)
    assert isinstance(tup, Tuple) and tup.fields[0] is bindings(out["main"])[0].var
    x = rand(3)
    (g,) = interpret(out, x)
    np.testing.assert_array_equal(g, np.meshgrid(x, indexing="ij")[0])


FUSED_TWICE = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(private=True)
    def fused_a(a: R.Tensor(("m", 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor(("m", 3), "float32"):
        R.func_attr({"Primitive": True})
        m = T.int64()
        y = R.add(a, b)
        z = R.multiply(y, a)
        return z

    @R.function(private=True)
    def fused_b(c: R.Tensor(("k", 3), "float32"), d: R.Tensor((3,), "float32")) -> R.Tensor(("k", 3), "float32"):
        R.func_attr({"Primitive": True})
        k = T.int64()
        y = R.add(c, d)
        z = R.multiply(y, c)
        return z

    @R.function(private=True)
    def fused_c(c: R.Tensor(("k", 3), "float32"), d: R.Tensor((3,), "float32")) -> R.Tensor(("k", 3), "float32"):
        R.func_attr({"Primitive": True})
        k = T.int64()
        y = R.add(c, d)
        z = R.multiply(y, d)
        return z

    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), v: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")) -> R.Tensor(("n", 3), "float32"):
        n = T.int64()
        g1 = cls.fused_a(x, v)
        g2 = cls.fused_b(g1, w)
        g3 = cls.fused_c(g2, v)
        return g3
'''


def test_legalize_ops_lowers_structurally_equal_fused_functions_once(monkeypatch):
    import phasec.passes.legalize_ops as legalize_ops
    lowered = []
    real = legalize_ops.lower_fused

    def counting(func, **kwargs):
        lowered.append(func)
        return real(func, **kwargs)

    monkeypatch.setattr(legalize_ops, "lower_fused", counting)
    mod = phasec.parse(FUSED_TWICE)
    out = run_pass("LegalizeOps", mod)
    # fused_b is fused_a up to names: lowered once, its call uses fused_a's
    # kernel with its own arguments; fused_c (y * d, not y * c) is its own
    assert len(lowered) == 2
    calls = calls_of(out["main"], "relax.call_tir")
    assert [c.value.args[0].name_hint for c in calls] == ["fused_a", "fused_a", "fused_c"]
    x, v, w = rand(4, 3), rand(3), rand(3)
    g1 = (x + v) * x
    g2 = (g1 + w) * g1
    got = VirtualMachine(phasec.build(out))["main"](x, v, w)
    np.testing.assert_allclose(np.asarray(got), (g2 + v) * v, rtol=1e-5, atol=1e-6)
    assert_same_results(mod, out, x, v, w)
