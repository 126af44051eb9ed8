"""The optimization passes: ConvertToDataflow, CanonicalizeBindings,
FoldConstant, EliminateCommonSubexpr, DeadCodeElimination, ToNonDataflow.

Before/after cases live in tests/passes/cases/ (see helpers/pass_cases.py
for what each one checks: expected output, verification, input untouched,
same results under the reference interpreter, idempotence). This file adds TVM's
pass-infrastructure tutorial program, the passes' declarations and options,
edge cases and long programs.
"""

from __future__ import annotations

import numpy as np
import pytest

from phasec import verifier
from phasec import PhaseError, parse
from phasec.ir import (
    Call, Constant, DataflowBlock, DataflowVar, Function, IRModule, Phase, SeqExpr,
    TensorStructInfo, Var, VarBinding, structural_hash,
)
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.transform import PassConfigError, PassContext, Sequential, get_pass

from helpers.pass_cases import assert_same_results, case_names, check_pass, run_case

OPT_PASSES = ("ConvertToDataflow", "CanonicalizeBindings", "FoldConstant",
              "EliminateCommonSubexpr", "DeadCodeElimination", "ToNonDataflow")
PREFIXES = ("convert_to_dataflow_", "canonicalize_bindings_", "fold_constant_",
            "eliminate_common_subexpr_", "dead_code_elimination_", "to_non_dataflow_")


@pytest.mark.parametrize("name", [n for p in PREFIXES for n in case_names(p)])
def test_case(name):
    run_case(name)


# ---------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, opt_level, phases", [
    ("Normalize", 0, {Phase.INGESTION, Phase.OPTIMIZATION}),
    ("ConvertToDataflow", 1, {Phase.INGESTION, Phase.OPTIMIZATION}),
    ("LambdaLifting", 0, {Phase.INGESTION}),
    ("CanonicalizeBindings", 1, {Phase.OPTIMIZATION}),
    ("FoldConstant", 0, {Phase.OPTIMIZATION}),
    ("EliminateCommonSubexpr", 3, {Phase.OPTIMIZATION}),
    ("DeadCodeElimination", 1, {Phase.OPTIMIZATION}),
    ("ToNonDataflow", 0, {Phase.OPTIMIZATION}),
])
def test_declarations(name, opt_level, phases):
    info = get_pass(name).info
    assert info.name == name and info.opt_level == opt_level and info.phases == phases
    assert (info.transition_to is not None) == (name == "LambdaLifting")


@pytest.mark.parametrize("name", OPT_PASSES[1:])
def test_optimization_passes_reject_ingestion(name):
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
""")
    with pytest.raises(PhaseError, match=f"{name} expects phase optimization.*run LambdaLifting"):
        get_pass(name)(mod)


def test_options_are_validated():
    assert get_pass("FoldConstant").max_elements == 1 << 20
    assert get_pass("ConvertToDataflow").min_size == 2
    with pytest.raises(PassConfigError, match="max_elements"):
        get_pass("FoldConstant", max_elements=-1)
    with pytest.raises(PassConfigError, match="min_size"):
        get_pass("ConvertToDataflow", min_size=0)
    with pytest.raises(PassConfigError, match="no option 'size'"):
        get_pass("FoldConstant", size=3)


# ---------------------------------------------------------------------------
# TVM's "How to Use TVM Pass Infra" example program, in Relax
# ---------------------------------------------------------------------------

def tutorial_module() -> IRModule:
    """The tutorial's ``example()`` (smaller shapes, same structure)::

        conv = conv2d(x, weight)
        y = add(c, c); y = multiply(y, 2); y = add(conv, y)
        z = add(y, c); z1 = add(y, c); z2 = add(z, z1)
    """
    shape = (1, 4, 8, 8)
    c = Constant(np.linspace(-1, 1, int(np.prod(shape)), dtype="float32").reshape(shape))
    x = Var("x", TensorStructInfo((1, 4, 10, 10), "float32"))
    weight = Var("weight", TensorStructInfo((4, 4, 3, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, weight]):
        conv = bb.emit(call_op("nn.conv2d", x, weight), "conv")
        y = bb.emit(call_op("add", c, c), "y")
        y1 = bb.emit(call_op("multiply", y, Constant(np.array(2, "float32"))), "y1")
        y2 = bb.emit(call_op("add", conv, y1), "y2")
        z = bb.emit(call_op("add", y2, c), "z")
        z1 = bb.emit(call_op("add", y2, c), "z1")
        z2 = bb.emit(call_op("add", z, z1), "z2")
        bb.emit_func_output(z2)
    return bb.get().with_phase(Phase.OPTIMIZATION)


def _bindings(mod: IRModule) -> dict[str, object]:
    return {b.var.name_hint: b.value for block in mod["main"].body.blocks
            for b in block.bindings}


def test_tutorial_fold_constant_folds_the_constant_additions():
    mod = tutorial_module()
    out = check_pass(get_pass("FoldConstant"), mod, idempotent=True)
    values = _bindings(out)
    c = _bindings(mod)["y"].args[0].data
    assert isinstance(values["y"], Constant) and isinstance(values["y1"], Constant)
    np.testing.assert_array_equal(values["y1"].data, (c + c) * 2)
    assert values["y1"].data.dtype == np.float32
    for name in ("conv", "y2", "z", "z1", "z2"):  # they depend on x or weight
        assert isinstance(values[name], Call)
    # With DeadCodeElimination the first folded constant disappears.
    out2 = check_pass(Sequential([get_pass("FoldConstant"), get_pass("DeadCodeElimination")]), mod)
    assert "y" not in _bindings(out2) and "y1" in _bindings(out2)


def test_tutorial_cse_runs_at_opt_level_3_only():
    mod = tutorial_module()
    seq = Sequential([get_pass("FoldConstant"), get_pass("EliminateCommonSubexpr")])
    at3 = check_pass(seq, mod, opt_level=3)
    at2 = check_pass(seq, mod, opt_level=2)
    assert "z1" not in _bindings(at3)  # merged into z
    z2 = _bindings(at3)["z2"]
    assert z2.args[0] is z2.args[1]   # add(z, z)
    assert "z1" in _bindings(at2)     # EliminateCommonSubexpr skipped at opt_level 2
    assert isinstance(_bindings(at2)["y1"], Constant)  # FoldConstant ran at both
    assert_same_results(at3, at2)


def test_tutorial_sequential_plan_skips_cse_below_3():
    seq = Sequential([get_pass("FoldConstant"), get_pass("EliminateCommonSubexpr")])
    with PassContext(opt_level=2):
        steps = seq.plan(Phase.OPTIMIZATION)
    assert [s.runs for s in steps] == [True, False]
    assert "opt_level 3" in steps[1].skip_reason


# ---------------------------------------------------------------------------
# Edge cases
# ---------------------------------------------------------------------------

def test_fold_constant_leaves_failing_operators_to_run_time():
    mod = parse("""
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((1,), "float32")) -> R.Tensor((1,), "float32"):
        c = R.const([1.0, 2.0, 3.0], "float32")
        bad = R.take(c, R.const([5], "int64"), axis=0)
        r = R.add(x, bad)
        return r
""")
    out = check_pass(get_pass("FoldConstant"), mod, results=False)
    assert isinstance(_bindings(out)["bad"], Call)


def test_fold_constant_size_limit():
    mod = tutorial_module()
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant", max_elements=255)(mod)
    assert isinstance(_bindings(out)["y"], Call)  # 256 elements > 255
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant", max_elements=256)(mod)
    assert isinstance(_bindings(out)["y"], Constant)


def test_dce_entry_functions_and_modules_without_entries():
    mod = parse("""
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(private=True)
    def a(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = cls.b(x)
        return y

    @R.function(private=True)
    def b(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x

    @R.function(private=True)
    def c(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
""")
    # No function has a global_symbol: nothing can be called from outside,
    # so there is nothing to be reachable from; everything stays.
    assert set(check_pass(get_pass("DeadCodeElimination"), mod, results=False)) == {"a", "b", "c"}
    out = check_pass(get_pass("DeadCodeElimination", entry_functions=("a",)), mod, results=False)
    assert set(out) == {"a", "b"}


def test_convert_to_dataflow_keeps_outputs_used_by_nested_functions():
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        a = R.exp(x)
        b = R.add(a, x)
        @R.function
        def f(y: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            z = R.add(y, a)
            return z
        r = f(b)
        return r
""")
    out = check_pass(get_pass("ConvertToDataflow"), mod, idempotent=True)
    block = out["main"].body.blocks[0]
    assert type(block) is DataflowBlock
    assert [type(b.var) for b in block.bindings] == [Var, Var]  # a: used by f, b: by r
    # And the whole ingestion-to-optimization pipeline stays well-formed.
    lifted = check_pass(get_pass("LambdaLifting"), out)
    verifier.verify(lifted)


# ---------------------------------------------------------------------------
# Long programs: iterative, linear passes
# ---------------------------------------------------------------------------

def long_module(n: int) -> IRModule:
    """A dataflow block of n bindings: duplicated calls, rebindings, dead code."""
    t4 = TensorStructInfo((4,), "float32")
    x = Var("x", t4)
    bindings, prev = [], x
    c = Constant(np.full(4, 0.5, "float32"))
    const = Var("c0", t4)
    bindings.append(VarBinding(const, call_op("add", c, c)))
    for i in range(n):
        kind = i % 4
        v = DataflowVar(f"v{i}", t4)
        if kind == 0:
            value = call_op("multiply", prev, const)
        elif kind == 1:
            value = call_op("multiply", bindings[-1].value.args[0], const)  # duplicate
        elif kind == 2:
            value = bindings[-1].var  # rebinding
        else:
            dead = DataflowVar(f"dead{i}", t4)
            bindings.append(VarBinding(dead, call_op("exp", prev)))
            value = call_op("add", prev, x)
        bindings.append(VarBinding(v, value))
        prev = v
    out = Var("out", t4)
    bindings.append(VarBinding(out, prev))
    main = Function([x], SeqExpr([DataflowBlock(bindings)], out), attrs={"global_symbol": "main"})
    return IRModule({"main": main}).with_phase(Phase.OPTIMIZATION)


def test_long_program_through_every_pass():
    mod = long_module(10_000)
    h = structural_hash(mod)
    passes = Sequential([get_pass(name) for name in
                         ("FoldConstant", "EliminateCommonSubexpr", "CanonicalizeBindings",
                          "DeadCodeElimination", "ToNonDataflow", "ConvertToDataflow")])
    with PassContext(opt_level=3, verify="off"):
        out = passes(mod)
    assert structural_hash(mod) == h
    n_bindings = sum(len(b.bindings) for b in out["main"].body.blocks)
    assert n_bindings == 5_000 + 1  # one multiply per pair, one add per pair, the constant
    arg = np.linspace(0, 1, 4, dtype="float32")
    assert_same_results(mod, out, args=[arg])


def test_a_big_weight_transposed_every_call_folds_once_and_no_more():
    """A tied LM head: matmul(x, permute_dims(W)) with W past the fold budget.
    The transpose folds (a copy of W, transposed as numpy transposes it), but a
    chain of rearrangements copies one weight at most twice."""
    import phasec

    rng = np.random.default_rng(0)
    w = rng.standard_normal((1031, 1024)).astype("float32")  # > 2**20 elements
    x = Var("x", TensorStructInfo((2, 1024), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        wt = bb.emit(call_op("permute_dims", Constant(w)), "wt")
        w2 = bb.emit(call_op("permute_dims", wt), "w2")
        w3 = bb.emit(call_op("reshape", w2, (1024 * 1031,)), "w3")
        y = bb.emit(call_op("matmul", x, wt), "y")
        s = bb.emit(call_op("sum", w3), "s")
        out = bb.emit(call_op("add", y, s), "out")
        bb.emit_func_output(out)
    mod = bb.get().with_phase(Phase.OPTIMIZATION)
    folded = get_pass("FoldConstant")(mod)
    calls = {b.var.name_hint: b.value for blk in folded["main"].body.blocks for b in blk.bindings}
    assert isinstance(calls["wt"], Constant) and isinstance(calls["w2"], Constant)
    np.testing.assert_array_equal(calls["wt"].data, w.T)
    np.testing.assert_array_equal(calls["w2"].data, w)
    assert isinstance(calls["w3"], Call)  # a third copy of W stays a run-time reshape
    xv = rng.standard_normal((2, 1024)).astype("float32")
    got = phasec.VirtualMachine(phasec.build(folded))["main"](xv)
    np.testing.assert_allclose(np.asarray(got), xv @ w.T + w.sum(), rtol=1e-4, atol=1e-2)
