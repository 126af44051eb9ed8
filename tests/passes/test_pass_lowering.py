"""The phase 1 -> 2 -> 3 passes: RemovePurityChecking, CallTIRRewrite and
VMBuiltinLower here, LegalizeOps in test_pass_legalize_ops.py and
StaticPlanBlockMemory in test_pass_static_plan.py.

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
    Call, ExternFunc, GlobalVar, Phase, TensorStructInfo, Tuple, Var, assert_structural_equal,
    structural_equal, structural_hash,
)
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.transform import PassContext, Sequential, get_pass

from phasec.passes.static_plan_block_memory import PlanStats, plan_stats

from helpers.lowering import (
    CHAIN, E2E_TEXT, FULL_PIPELINE, LOWERING_PASSES, MLP_TEXT, add_kernel, alloc_binding,
    assert_same_results, bindings, calls_of, inc_kernel, lowered, lowering_module, op_names,
    rand, run_pass,
)


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


