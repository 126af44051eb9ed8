"""The phase 1 -> 2 -> 3 passes: LegalizeOps, RemovePurityChecking,
CallTIRRewrite, StaticPlanBlockMemory and VMBuiltinLower.

Every pass is checked the same way: before/after examples (structural or
targeted), the output verified for its phase, the input left untouched
(structural hash), and the results equal under the reference interpreter
before and after. The end-to-end tests run the whole lowering pipeline,
compile with the VM code generator and compare with numpy, with a symbolic
batch dimension at two sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import verifier
from phasec import PassError, PhaseError, WellFormedError
from phasec.backend.vm import VirtualMachine, codegen
from phasec.interp import run as interpret
from phasec.ir import (
    Call, ExternFunc, Function, GlobalVar, Op, Phase, PrimValue, ShapeExpr, TensorStructInfo,
    Tuple, Var, assert_structural_equal, structural_equal, structural_hash, tir,
)
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.op.legalize import LEGALIZE, legalize_call
from phasec.runtime.packed import register_func, remove_func
from phasec.transform import PassContext, Sequential, get_pass

from phasec.passes.legalize_ops import LegalizeOpsError, kernel_base_name
from phasec.passes.static_plan_block_memory import (
    STORAGE_BYTES_ATTR, TENSOR_BYTES_ATTR, PlanStats, plan_stats,
)

RNG = np.random.default_rng(7)
LOWERING_PASSES = ("RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory")
FULL_PIPELINE = ("LambdaLifting", "ToNonDataflow", "LegalizeOps", *LOWERING_PASSES,
                 "VMBuiltinLower")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def op_names(func):
    """Names of the operators called by the bindings of ``func`` (in order)."""
    return [b.value.op.name for b in bindings(func)
            if isinstance(b.value, Call) and isinstance(b.value.op, Op)]


def calls_of(func, name):
    return [b for b in bindings(func) if isinstance(b.value, Call)
            and isinstance(b.value.op, Op) and b.value.op.name == name]


def run_pass(name, mod, **options):
    """Run one registered pass; check it verified its output and kept its input."""
    before = structural_hash(mod)
    after = get_pass(name, **options)(mod)
    assert structural_hash(mod) == before, f"{name} changed its input"
    verifier.verify(after, after.phase)
    return after


def assert_same_results(before, after, *args, rtol=1e-5, atol=1e-6):
    expected = interpret(before, *args)
    got = interpret(after, *args)
    _assert_close(got, expected, rtol, atol)
    return expected


def _assert_close(got, expected, rtol=1e-5, atol=1e-6):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _assert_close(g, e, rtol, atol)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def lowered(text):
    """Parse a TVMScript module and lower it to the end of phase 2 (before VMBuiltinLower)."""
    mod = phasec.parse(text)
    return Sequential([get_pass(n) for n in ("LambdaLifting", "ToNonDataflow", "LegalizeOps",
                                             *LOWERING_PASSES)])(mod)


@pytest.fixture
def packed():
    names = []

    def add(name, fn):
        register_func(name, fn, override=True)
        names.append(name)

    yield add
    for n in names:
        remove_func(n)


# A 1-D kernel ``B = A + 1`` of static length n, in TVMScript.
def inc_kernel(name, n, dtype="float32"):
    return f'''
    @T.prim_func(private=True)
    def {name}(A: T.Buffer((T.int64({n}),), "{dtype}"), B: T.Buffer((T.int64({n}),), "{dtype}")):
        for i in range(T.int64({n})):
            with T.block("B"):
                vi = T.axis.spatial(T.int64({n}), i)
                B[vi] = A[vi] + T.{dtype}(1)
'''


def add_kernel(name, n):
    return f'''
    @T.prim_func(private=True)
    def {name}(A: T.Buffer((T.int64({n}),), "float32"), B: T.Buffer((T.int64({n}),), "float32"), C: T.Buffer((T.int64({n}),), "float32")):
        for i in range(T.int64({n})):
            with T.block("C"):
                vi = T.axis.spatial(T.int64({n}), i)
                C[vi] = A[vi] + B[vi]
'''


def lowering_module(body, params="x: R.Tensor((16,), \"float32\")",
                    ret="R.Tensor((16,), \"float32\")", kernels=(), attrs='"relax.force_pure": True',
                    extra=""):
    """A phase-2 module: kernels plus ``main`` with the given body lines."""
    lines = "\n".join("        " + line for line in body.strip().splitlines())
    func_attrs = f"        R.func_attr({{{attrs}}})\n" if attrs else ""
    return phasec.parse(f'''
@I.ir_module
class Module:
    I.module_attrs({{"phase": "lowering"}})
{"".join(kernels)}
{extra}
    @R.function
    def main({params}) -> {ret}:
{func_attrs}{lines}
''')


def alloc_binding(func, var_name):
    """The value bound to ``var_name`` in ``func`` (top level), following
    aliases ``y = alloc`` (CallTIRRewrite binds each result to its allocation)."""
    by_var = {b.var: b.value for b in bindings(func)}
    for b in bindings(func):
        if b.var.name_hint == var_name:
            value = b.value
            while isinstance(value, Var) and value in by_var:
                value = by_var[value]
            return value
    raise KeyError(var_name)


# ---------------------------------------------------------------------------
# LegalizeOps
# ---------------------------------------------------------------------------

E2E_TEXT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((8, 16), "float32"),
             b: R.Tensor((16,), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            lv2 = R.nn.relu(lv1)
            lv3 = R.multiply(lv2, lv2)
            gv = R.nn.softmax(lv3, axis=-1)
            R.output(gv)
        return gv
'''


MLP_TEXT = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32"),
             b: R.Tensor((3,), "float32")) -> R.Tensor(("n", 3), "float32"):
        n = T.int64()
        lv = R.matmul(x, w)
        lv1 = R.add(lv, b)
        lv2 = R.nn.relu(lv1)
        gv = R.nn.softmax(lv2, axis=-1)
        return gv
'''


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


# ---------------------------------------------------------------------------
# RemovePurityChecking
# ---------------------------------------------------------------------------

PURITY_TEXT = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @R.function
    def add_to(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        z = R.call_pure_packed("test.lowering.add", x, y, sinfo_args=R.Tensor((3,), "float32"))
        return z

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c = R.make_closure(cls.add_to, (x,))
        y = R.invoke_pure_closure(c, (x,), sinfo_args=R.Tensor((3,), "float32"))
        return y

    @R.function(pure=False)
    def effect(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.call_packed("test.lowering.add", x, x, sinfo_args=R.Tensor((3,), "float32"))
        return y
'''


def test_remove_purity_checking(packed):
    packed("test.lowering.add", lambda a, b: a + b)
    mod = phasec.parse(PURITY_TEXT)
    out = run_pass("RemovePurityChecking", mod)
    assert out["main"].attrs.get("relax.force_pure") is True
    assert out["add_to"].attrs.get("relax.force_pure") is True
    assert out["main"].is_pure and out["add_to"].is_pure
    assert "relax.force_pure" not in out["effect"].attrs and not out["effect"].is_pure
    (z,) = bindings(out["add_to"])
    assert isinstance(z.value.op, ExternFunc) and z.value.op.global_symbol == "test.lowering.add"
    assert list(z.value.args) == list(bindings(mod["add_to"])[0].value.args[1:])
    assert structural_equal(z.value.sinfo_args, bindings(mod["add_to"])[0].value.sinfo_args)
    assert op_names(out["main"]) == ["relax.make_closure", "relax.invoke_closure"]
    assert out["effect"] is mod["effect"]
    # nothing of the build-phase purity rules is left
    codes = {d.code for d in verifier.check(out, Phase.BUILD)}
    assert not codes & {"PH301", "PH302"}
    assert_same_results(mod, out, rand(3))
    assert get_pass("RemovePurityChecking")(out) is out  # idempotent


# ---------------------------------------------------------------------------
# CallTIRRewrite
# ---------------------------------------------------------------------------

def test_call_tir_rewrite_before_after():
    kernel = add_kernel("add", 16)
    before = lowering_module('''
y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((16,), "float32"))
return y
''', kernels=[kernel])
    expected = lowering_module('''
alloc = R.builtin.alloc_tensor(R.shape([16]), dtype="float32", runtime_device_index=0)
_ = cls.add(x, x, alloc)
y = alloc
return y
''', kernels=[kernel])
    out = run_pass("CallTIRRewrite", before)
    assert_structural_equal(out, expected)
    assert_same_results(before, out, rand(16))


def test_call_tir_rewrite_tuple_outputs_and_scalar_tir_vars():
    mod = get_pass("LegalizeOps")(phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tuple(R.Tensor(("n", 2), "float32"), R.Tensor(("n", 2), "float32")):
        n = T.int64()
        z = R.zeros(R.shape([n, 4]), "float32")
        a = R.add(x, z)
        s = R.split(a, 2, axis=1)
        return s
'''))
    mod = get_pass("RemovePurityChecking")(mod)
    out = run_pass("CallTIRRewrite", mod)
    main = out["main"]
    assert "relax.call_tir" not in op_names(main)
    n = main.params[0].struct_info.shape[0]
    direct = [b.value for b in bindings(main) if isinstance(b.value, Call)
              and isinstance(b.value.op, GlobalVar)]
    assert [c.op.name_hint for c in direct] == ["zeros", "add", "split"]
    # zeros: no inputs, one output whose shape binds n (no scalar)
    zeros = direct[0]
    assert len(zeros.args) == 1 and zeros.args[0].struct_info.shape[0] is n
    # split: two allocations, bound as a tuple
    split_binding = [b for b in bindings(main) if b.var.name_hint == "s"][0]
    assert isinstance(split_binding.value, Tuple) and len(split_binding.value.fields) == 2
    assert list(direct[2].args[1:]) == list(split_binding.value.fields)
    assert len(calls_of(main, "relax.builtin.alloc_tensor")) == 4
    assert_same_results(mod, out, rand(3, 4))


def test_call_tir_rewrite_call_dps_packed(packed):
    def inc(x, out):
        out[...] = x + 1

    packed("test.lowering.inc", inc)
    mod = lowering_module('''
y = R.call_dps_packed("test.lowering.inc", (x,), out_sinfo=R.Tensor((16,), "float32"))
return y
''')
    out = run_pass("CallTIRRewrite", mod)
    alloc, call, alias = bindings(out["main"])
    assert alloc.value.op.name == "relax.builtin.alloc_tensor"
    assert isinstance(call.value.op, ExternFunc)
    assert list(call.value.args) == [out["main"].params[0], alloc.var]
    assert alias.value is alloc.var
    x = rand(16)
    assert_same_results(mod, out, x)
    built = get_pass("VMBuiltinLower")(get_pass("StaticPlanBlockMemory")(out))
    vm = VirtualMachine(codegen(built), kernels="interp")
    np.testing.assert_allclose(vm["main"](x), x + 1)


def test_call_tir_rewrite_requires_remove_purity_checking():
    assert get_pass("CallTIRRewrite").info.required == ("RemovePurityChecking",)
    kernel = inc_kernel("inc", 16)
    mod = lowering_module('''
y = R.call_tir(cls.inc, (x,), out_sinfo=R.Tensor((16,), "float32"))
return y
''', kernels=[kernel], attrs="")
    # called alone on a pure function, the direct kernel call breaks purity
    with pytest.raises(WellFormedError, match="WF202"):
        get_pass("CallTIRRewrite")(mod)
    out = Sequential([get_pass("CallTIRRewrite")])(mod)  # runs RemovePurityChecking first
    assert out["main"].attrs.get("relax.force_pure") is True


# ---------------------------------------------------------------------------
# StaticPlanBlockMemory
# ---------------------------------------------------------------------------

def storage_of(func, var_name):
    value = alloc_binding(func, var_name)
    assert value.op.name == "relax.memory.alloc_tensor", f"{var_name} was not planned"
    return value.args[0]


def storage_sizes(func):
    return {b.var: b.value.args[0].values[0].value
            for b in calls_of(func, "relax.memory.alloc_storage")}


CHAIN = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(a, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(b, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(c, d)
e = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(d, e)
return e
'''


def test_static_plan_reuses_storage_along_a_chain():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    assert len(sizes) == 2 and set(sizes.values()) == {64}  # ping-pong between two storages
    sa, sb, sc, sd = (storage_of(main, n) for n in "abcd")
    assert sa is sc and sb is sd and sa is not sb
    # e is returned: it escapes and keeps its own allocation
    assert alloc_binding(main, "e").op.name == "relax.builtin.alloc_tensor"
    stats = plan_stats(out)
    assert stats["main"] == PlanStats(tensor_bytes=4 * 64, storage_bytes=2 * 64)
    assert stats["total"].storage_bytes < stats["total"].tensor_bytes
    assert main.attrs[TENSOR_BYTES_ATTR] == 256 and main.attrs[STORAGE_BYTES_ATTR] == 128
    # kills after the last uses
    killed = [b.value.args[0] for b in calls_of(main, "relax.memory.kill_tensor")]
    assert {v.name_hint for v in killed} == set("abcd")
    assert len(calls_of(main, "relax.memory.kill_storage")) == 2
    x = rand(16)
    np.testing.assert_allclose(assert_same_results(mod, out, x), x + 5, rtol=1e-6)


def test_static_plan_lowers_peak_memory_on_the_vm():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    unplanned = get_pass("VMBuiltinLower")(mod)          # StaticPlanBlockMemory skipped
    planned = get_pass("VMBuiltinLower")(get_pass("StaticPlanBlockMemory")(mod))
    x = rand(16)
    peaks = []
    for built in (unplanned, planned):
        vm = VirtualMachine(codegen(built), kernels="interp")
        np.testing.assert_allclose(vm["main"](x), x + 5, rtol=1e-6)
        peaks.append(vm.peak_bytes)
    assert peaks[1] < peaks[0]
    assert peaks[0] == 5 * 64


def test_static_plan_keeps_live_tensors_apart():
    # a stays alive across b and c: nothing may overwrite it
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(a, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(b, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.add(a, c, d)
e = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(d, e)
return e
'''
    mod = lowering_module(body, kernels=[inc_kernel("inc", 16), add_kernel("add", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sa, sb, sc, sd = (storage_of(main, n) for n in "abcd")
    assert sa is not sb and sa is not sc and sb is not sc
    assert sd is sb  # b died when c was computed
    x = rand(16)
    np.testing.assert_allclose(assert_same_results(mod, out, x), (x + 1) + (x + 3) + 1,
                               rtol=1e-6)


def test_static_plan_best_fit():
    kernels = [inc_kernel("inc64", 64), inc_kernel("inc16", 16), inc_kernel("inc8", 8)]
    params = ('x64: R.Tensor((64,), "float32"), x16: R.Tensor((16,), "float32"), '
              'x8: R.Tensor((8,), "float32")')
    ret = ('R.Tuple(R.Tensor((64,), "float32"), R.Tensor((16,), "float32"), '
           'R.Tensor((8,), "float32"))')
    body = '''
p = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(x64, p)
q = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(x16, q)
u = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
v = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc64(p, u)
_ = cls.inc16(q, v)
w = R.builtin.alloc_tensor(R.shape([8]), dtype="float32")
_ = cls.inc8(x8, w)
o = R.builtin.alloc_tensor(R.shape([8]), dtype="float32")
_ = cls.inc8(w, o)
t = (u, v, o)
return t
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    sp, sq, sw = (storage_of(main, n) for n in "pqw")
    # when w (32 bytes) is allocated, p's 256-byte and q's 64-byte storages are
    # both free: best fit takes q's
    assert sw is sq and sp is not sq
    assert sizes == {sp: 256, sq: 64}
    # u, v, o escape through the returned tuple
    for name in "uvo":
        assert alloc_binding(main, name).op.name == "relax.builtin.alloc_tensor"
    assert plan_stats(out)["main"] == PlanStats(256 + 64 + 32, 256 + 64)
    assert_same_results(mod, out, rand(64), rand(16), rand(8))


def test_static_plan_grows_a_smaller_free_storage():
    kernels = [inc_kernel("inc64", 64), inc_kernel("inc16", 16)]
    params = 'x64: R.Tensor((64,), "float32"), x16: R.Tensor((16,), "float32")'
    ret = 'R.Tuple(R.Tensor((64,), "float32"), R.Tensor((16,), "float32"))'
    body = '''
q = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(x16, q)
r = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(q, r)
t = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(x64, t)
o1 = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(t, o1)
o2 = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(r, o2)
res = (o1, o2)
return res
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    sq, sr, st = (storage_of(main, n) for n in "qrt")
    assert st is sq and sizes[sq] == 256  # q's 64-byte storage grown to hold t
    assert sr is not sq and len(sizes) == 2
    assert plan_stats(out)["main"] == PlanStats(64 + 64 + 256, 256 + 64)
    assert_same_results(mod, out, rand(64), rand(16))


def test_static_plan_storage_is_shared_across_dtypes():
    kernels = [inc_kernel("inc_f", 16), inc_kernel("inc_i", 16, "int32")]
    params = 'x: R.Tensor((16,), "float32"), y: R.Tensor((16,), "int32")'
    ret = 'R.Tensor((16,), "int32")'
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc_f(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc_f(a, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="int32")
_ = cls.inc_i(y, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="int32")
_ = cls.inc_i(c, d)
return d
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    assert storage_of(main, "c") is storage_of(main, "a")
    y = RNG.integers(0, 9, 16).astype("int32")
    assert_same_results(mod, out, rand(16), y)


@pytest.mark.parametrize("escape", ["return", "tuple", "packed", "relax_call", "branch"])
def test_static_plan_does_not_reuse_escaping_tensors(escape, packed):
    packed("test.lowering.keep", lambda t: t)
    uses = {
        "return": ("return a", 'R.Tensor((16,), "float32")'),
        "tuple": ("t = (a, b)\nreturn t",
                  'R.Tuple(R.Tensor((16,), "float32"), R.Tensor((16,), "float32"))'),
        "packed": ('k = R.call_packed("test.lowering.keep", a, sinfo_args=R.Tensor((16,), "float32"))'
                   "\nreturn b", 'R.Tensor((16,), "float32")'),
        "relax_call": ("k = cls.identity(a)\nreturn b", 'R.Tensor((16,), "float32")'),
        "branch": ("cond = R.const(True, \"bool\")\nif cond:\n    r = a\nelse:\n    r = b\nreturn r",
                   'R.Tensor((16,), "float32")'),
    }
    tail, ret = uses[escape]
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, b)
''' + tail
    extra = '''
    @R.function
    def identity(t: R.Tensor((16,), "float32")) -> R.Tensor((16,), "float32"):
        return t
'''
    mod = lowering_module(body, ret=ret, kernels=[inc_kernel("inc", 16)], extra=extra)
    out = run_pass("StaticPlanBlockMemory", mod)
    assert alloc_binding(out["main"], "a").op.name == "relax.builtin.alloc_tensor"
    assert_same_results(mod, out, rand(16))


def test_static_plan_plans_inside_if_branches():
    body = '''
cond = R.const(True, "bool")
if cond:
    a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(x, a)
    b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(a, b)
    c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(b, c)
    r = c
else:
    r = x
return r
'''
    mod = lowering_module(body, kernels=[inc_kernel("inc", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    branch = [b for b in bindings(out["main"]) if isinstance(b.value, phasec.ir.If)][0].value
    inner = [b for block in branch.true_branch.blocks for b in block.bindings]
    names = [b.value.op.name for b in inner if isinstance(b.value, Call)
             and isinstance(b.value.op, Op)]
    assert names.count("relax.memory.alloc_storage") == 2
    assert names.count("relax.builtin.alloc_tensor") == 1  # c is the branch's result
    assert plan_stats(out)["main"] == PlanStats(128, 128)
    assert_same_results(mod, out, rand(16))


def test_static_plan_symbolic_shapes_reuse_equal_sizes_only():
    mod = lowered('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        a = R.tanh(x)
        b = R.tanh(a)
        c = R.tanh(b)
        d = R.sum(c, axis=[1])
        e = R.tanh(d)
        f = R.tanh(e)
        g = R.expand_dims(f, axis=[1])
        h = R.add(c, g)
        return h
''')
    main = mod["main"]
    n = main.params[0].struct_info.shape[0]
    sizes = [b.value.args[0].values[0] for b in calls_of(main, "relax.memory.alloc_storage")]
    assert all(phasec.arith.prove_equal(s, n * 16) or phasec.arith.prove_equal(s, n * 4)
               for s in sizes)
    # a and b (n*16 bytes) take two storages and c reuses a's (a died when b was
    # computed); d, e, f, g (n*4 bytes) never take a storage of another size
    assert storage_of(main, "c") is storage_of(main, "a")
    assert storage_of(main, "e") is not storage_of(main, "a")
    assert storage_of(main, "f") is storage_of(main, "d")
    assert alloc_binding(main, "h").op.name == "relax.builtin.alloc_tensor"  # returned
    assert plan_stats(mod)["main"] == PlanStats()  # statistics count constant shapes only
    built = run_pass("VMBuiltinLower", mod)
    vm = VirtualMachine(codegen(built), kernels="interp")
    for rows in (2, 5):
        x = rand(rows, 4)
        c = np.tanh(np.tanh(np.tanh(x)))
        expected = c + np.tanh(np.tanh(c.sum(axis=1)))[:, None]
        np.testing.assert_allclose(vm["main"](x), expected, rtol=1e-5)


def test_static_plan_needs_no_kills_in_pure_functions():
    # a pure function (no force_pure) whose allocations only feed call_tir: planned, no kills
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
b = R.call_tir(cls.inc, (a,), out_sinfo=R.Tensor((16,), "float32"))
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
d = R.call_tir(cls.inc, (c,), out_sinfo=R.Tensor((16,), "float32"))
return d
'''
    pure = lowering_module(body, kernels=[inc_kernel("inc", 16)], attrs="")
    out = run_pass("StaticPlanBlockMemory", pure)
    assert storage_of(out["main"], "a") is storage_of(out["main"], "c")
    assert not any(n.startswith("relax.memory.kill") for n in op_names(out["main"]))


def test_static_plan_is_idempotent_and_declared():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    once = get_pass("StaticPlanBlockMemory")(mod)
    assert get_pass("StaticPlanBlockMemory")(once) is once
    assert get_pass("StaticPlanBlockMemory").info.phases == frozenset({Phase.LOWERING})


# ---------------------------------------------------------------------------
# VMBuiltinLower
# ---------------------------------------------------------------------------

def test_vm_builtin_lower_maps_memory_builtins():
    mod = get_pass("StaticPlanBlockMemory")(lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)]))
    out = run_pass("VMBuiltinLower", mod)
    assert out.phase == Phase.BUILD
    verifier.verify(out, Phase.BUILD)
    before, after = op_names(mod["main"]), op_names(out["main"])
    mapping = {"relax.memory.alloc_storage": "relax.vm.alloc_storage",
               "relax.memory.alloc_tensor": "relax.vm.alloc_tensor",
               "relax.memory.kill_tensor": "relax.vm.kill_object",
               "relax.memory.kill_storage": "relax.vm.kill_object"}
    # builtin.alloc_tensor becomes two bindings: storage then tensor
    expected = []
    for name in before:
        if name == "relax.builtin.alloc_tensor":
            expected += ["relax.vm.alloc_storage", "relax.vm.alloc_tensor"]
        else:
            expected.append(mapping.get(name, name))
    assert after == expected
    e_alloc = alloc_binding(out["main"], "e")
    storage = alloc_binding(out["main"], "e_storage")
    assert e_alloc.args[0].name_hint == "e_storage"
    assert storage.args[0].values[0].value == 64
    # the plan statistics survive into the build phase
    assert plan_stats(out)["main"] == PlanStats(256, 128)
    x = rand(16)
    assert_same_results(mod, out, x)
    for kernels in ("interp", "llvm"):
        vm = VirtualMachine(codegen(out), kernels=kernels)
        np.testing.assert_allclose(vm["main"](x), x + 5, rtol=1e-6)


def test_vm_builtin_lower_symbolic_allocation_size():
    mod = lowered('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        a = R.exp(x)
        return a
''')
    out = run_pass("VMBuiltinLower", mod)
    storage = calls_of(out["main"], "relax.vm.alloc_storage")[0].value
    (size,) = storage.args[0].values
    n = mod["main"].params[0].struct_info.shape[0]
    assert phasec.arith.prove_equal(size, n * 16)
    vm = VirtualMachine(codegen(out), kernels="interp")
    x = rand(3, 4)
    np.testing.assert_allclose(vm["main"](x), np.exp(x), rtol=1e-6)


def test_vm_builtin_lower_rejects_what_it_cannot_lower():
    info = get_pass("VMBuiltinLower").info
    assert info.required == LOWERING_PASSES and info.transition_to == Phase.BUILD
    kernel = inc_kernel("inc", 16)
    left = lowering_module('''
y = R.call_tir(cls.inc, (x,), out_sinfo=R.Tensor((16,), "float32"))
return y
''', kernels=[kernel])
    with pytest.raises(PassError, match="run CallTIRRewrite") as info_:
        get_pass("VMBuiltinLower")(left)
    assert "'main'" in str(info_.value) and "'y'" in str(info_.value)
    pure = lowering_module("return x", attrs="")
    with pytest.raises(PassError, match="RemovePurityChecking"):
        get_pass("VMBuiltinLower")(pure)
    # in a Sequential the required passes run first and all is well
    out = Sequential([get_pass("VMBuiltinLower")])(left)
    verifier.verify(out, Phase.BUILD)


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------



def numpy_e2e(x, w, b):
    h = np.maximum(x @ w + b, 0)
    h = h * h
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
def test_end_to_end_pipeline_on_the_vm(fuse):
    mod = phasec.parse(E2E_TEXT)
    names = list(FULL_PIPELINE)
    if fuse:
        names.insert(1, "FuseOps")
    pipeline = Sequential([get_pass(n) for n in names])
    assert pipeline.validate(Phase.INGESTION) == Phase.BUILD
    before = structural_hash(mod)
    built = pipeline(mod)
    assert structural_hash(mod) == before
    assert built.phase == Phase.BUILD
    verifier.verify(built, Phase.BUILD)
    exe = codegen(built)
    w, b = rand(8, 16), rand(16)
    for kernels in ("llvm", "interp"):
        vm = VirtualMachine(exe, kernels=kernels)
        for batch in (1, 5):  # the symbolic batch dimension at two sizes
            x = rand(batch, 8)
            np.testing.assert_allclose(vm["main"](x, w, b), numpy_e2e(x, w, b),
                                       rtol=1e-5, atol=1e-6)
    x = rand(3, 8)
    np.testing.assert_allclose(interpret(built, x, w, b), numpy_e2e(x, w, b), rtol=1e-5,
                               atol=1e-6)


def test_end_to_end_static_shapes_plan_memory():
    mod = phasec.parse(E2E_TEXT.replace('"n"', "4").replace("n = T.int64()", ""))
    built = Sequential([get_pass(n) for n in FULL_PIPELINE])(mod)
    stats = plan_stats(built)["total"]
    assert 0 < stats.storage_bytes < stats.tensor_bytes
    x, w, b = rand(4, 8), rand(8, 16), rand(16)
    vm = VirtualMachine(codegen(built))
    np.testing.assert_allclose(vm["main"](x, w, b), numpy_e2e(x, w, b), rtol=1e-5, atol=1e-6)


def test_lowering_passes_handle_long_programs():
    n = 1500  # well past Python's recursion limit
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        v = x
        for i in range(n):
            v = bb.emit(call_op("relax.nn.relu" if i % 2 else "relax.negative", v))
        bb.emit_func_output(v)
    mod = bb.get().with_phase("optimization")
    with PassContext(verify="transitions"):
        built = Sequential([get_pass(p) for p in ("LegalizeOps", *LOWERING_PASSES,
                                                  "VMBuiltinLower")])(mod)
    assert len(list(built.prim_funcs())) == 2
    assert len(calls_of(built["main"], "relax.vm.alloc_storage")) == 3  # two planned + result
    assert plan_stats(built)["main"].storage_bytes == 32
    vm = VirtualMachine(codegen(built))  # native kernels: 3000 calls
    x0 = np.array([1, -2, 3, -4], dtype="float32")
    expected = x0
    for i in range(n):
        expected = np.maximum(expected, 0) if i % 2 else -expected
    np.testing.assert_allclose(vm["main"](x0), expected)


def test_phase_ordering_of_the_lowering_passes():
    mod = phasec.parse(MLP_TEXT)
    for name in ("RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
                 "VMBuiltinLower"):
        with pytest.raises(PhaseError, match="LegalizeOps"):
            get_pass(name)(mod)
    bad = Sequential([get_pass("LegalizeOps"), get_pass("VMBuiltinLower"),
                      get_pass("CallTIRRewrite")])
    with pytest.raises(PhaseError, match="position 3"):
        bad(mod)


def test_every_lowering_stage_round_trips_through_text_and_json():
    mod = phasec.parse(E2E_TEXT)
    for name in FULL_PIPELINE:
        mod = get_pass(name)(mod)
        assert_structural_equal(phasec.parse(mod.script()), mod)
        assert_structural_equal(phasec.from_json(phasec.to_json(mod)), mod)


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
