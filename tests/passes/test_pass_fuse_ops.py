"""FuseOps: before/after examples, rules tables, results, legalization of every group."""

from __future__ import annotations


import numpy as np
import pytest

from phasec import verifier
from phasec.passes.fuse_ops import (
    DEFAULT_RULES, NO_EPILOGUE_RULES, TVM_RULES, FuseOps, FusionRules, get_fusion_rules,
    register_fusion_rules,
)
from phasec.errors import PassError, PhaseError
from phasec.interp import run
from phasec.interp.tir import eval_prim_expr, run_prim_func
from phasec.ir import (
    Call, Constant, DataflowBlock, Function, GlobalVar, IRModule, Op, ShapeStructInfo,
    TensorStructInfo, TupleGetItem, TupleStructInfo, Var, assert_structural_equal, structural_hash,
    tir,
)
from phasec.script.builder import BlockBuilder
from phasec.op.infer import collect_shape_vars
from phasec.op import call_op
from phasec.op.legalize import lower_fused
from phasec.op.registry import OpPattern as P
from phasec.script.parser import parse
from phasec.transform import PassConfigError, PassContext, Sequential, get_pass, parse_pipeline

HEADER = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
"""

N = 3  # the value of every symbolic dimension in the numeric checks


def module(body: str) -> IRModule:
    return parse(HEADER + body)


# ---------------------------------------------------------------------------
# Helpers: run the pass with every generic check, summarize groups
# ---------------------------------------------------------------------------

def _shape(sinfo, env):
    return tuple(int(eval_prim_expr(d, env)) for d in sinfo.shape)


def _random_value(sinfo, rng, env):
    if isinstance(sinfo, TensorStructInfo):
        shape = _shape(sinfo, env)
        if sinfo.dtype.startswith("int"):
            return rng.integers(0, 2, size=shape).astype(sinfo.dtype)
        if sinfo.dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(bool)
        return rng.uniform(0.5, 1.5, size=shape).astype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random_value(f, rng, env) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return tuple(int(eval_prim_expr(v, env)) for v in sinfo.values)
    raise AssertionError(f"no random value for {sinfo}")


def _inputs(func: Function, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    env = {v: N for p in func.params for v in collect_shape_vars(p.struct_info)}
    return [_random_value(p.struct_info, rng, env) for p in func.params]


def _assert_same(a, b) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
        return
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def fuse(mod: IRModule, entry: str = "main", **options) -> IRModule:
    """Run FuseOps and check what must hold for every input: the input is
    untouched, the output verifies, results are equal, a second run changes
    nothing, and the text form round-trips."""
    before = structural_hash(mod)
    out = FuseOps(**options)(mod)
    assert structural_hash(mod) == before, "FuseOps modified its input"
    verifier.verify(out)
    assert not verifier.check(out), verifier.check(out)  # no warnings either
    args = _inputs(mod[entry])
    _assert_same(run(mod, *args, entry=entry), run(out, *args, entry=entry))
    again = FuseOps(**options)(out)
    assert again is out, "FuseOps is not idempotent"
    assert_structural_equal(parse(out.script()), out)
    return out


def groups(mod: IRModule) -> dict[str, list[str]]:
    """Primitive function name -> the operators in it, in order."""
    out = {}
    for name, func in mod.relax_functions():
        if func.attrs.get("Primitive"):
            ops = []
            for block in func.body.blocks:
                for b in block.bindings:
                    if isinstance(b.value, Call):
                        ops.append(b.value.op.name.removeprefix("relax."))
            out[name] = ops
    return out


def calls(mod: IRModule, entry: str = "main") -> list[str]:
    """What each binding of ``entry`` computes: ``cls.name``, an operator, or a node kind."""
    out = []
    for block in mod[entry].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, Call) and isinstance(v.op, GlobalVar):
                out.append("cls." + v.op.name_hint)
            elif isinstance(v, Call) and isinstance(v.op, Op):
                out.append(v.op.name.removeprefix("relax."))
            else:
                out.append(type(v).__name__)
    return out


# ---------------------------------------------------------------------------
# The TVM tutorial's example program (pass infra tutorial), small shapes
# ---------------------------------------------------------------------------

TUTORIAL = """
    @R.function
    def main(x: R.Tensor((1, 1, 4, 4), "float32"), weight: R.Tensor((1, 1, 3, 3), "float32")):
        with R.dataflow():
            c = R.const([[[[0.5, 1.0], [1.5, 2.0]]]], "float32")
            conv = R.nn.conv2d(x, weight)
            y = R.add(c, c)
            y1 = R.multiply(y, R.const(2.0, "float32"))
            y2 = R.add(conv, y1)
            z = R.add(y2, c)
            z1 = R.add(y2, c)
            z2 = R.add(z, z1)
            R.output(z2)
        return z2
"""


def test_tutorial_fuse_opt_level_0_puts_each_operator_alone():
    out = fuse(module(TUTORIAL), fuse_opt_level=0)
    assert calls(out) == ["Constant", "cls.fused_conv2d", "cls.fused_add", "cls.fused_multiply",
                          "cls.fused_add1", "cls.fused_add2", "cls.fused_add3", "cls.fused_add4"]
    assert all(len(ops) == 1 for ops in groups(out).values())
    expected = module("""
    @R.function(private=True)
    def fused_multiply(y: R.Tensor((1, 1, 2, 2), "float32")) -> R.Tensor((1, 1, 2, 2), "float32"):
        R.func_attr({"Primitive": True})
        with R.dataflow():
            y1 = R.multiply(y, R.const(2.0, "float32"))
            R.output(y1)
        return y1
""")
    assert_structural_equal(out["fused_multiply"], expected["fused_multiply"])


def test_tutorial_fuse_opt_level_2_is_one_kernel():
    out = fuse(module(TUTORIAL), fuse_opt_level=2)
    expected = module("""
    @R.function(private=True)
    def fused_conv2d_add_multiply_add_add_add_add(x: R.Tensor((1, 1, 4, 4), "float32"),
            weight: R.Tensor((1, 1, 3, 3), "float32"), c: R.Tensor((1, 1, 2, 2), "float32")
            ) -> R.Tensor((1, 1, 2, 2), "float32"):
        R.func_attr({"Primitive": True})
        with R.dataflow():
            conv = R.nn.conv2d(x, weight)
            y = R.add(c, c)
            y1 = R.multiply(y, R.const(2.0, "float32"))
            y2 = R.add(conv, y1)
            z = R.add(y2, c)
            z1 = R.add(y2, c)
            z2 = R.add(z, z1)
            R.output(z2)
        return z2

    @R.function
    def main(x: R.Tensor((1, 1, 4, 4), "float32"), weight: R.Tensor((1, 1, 3, 3), "float32")
             ) -> R.Tensor((1, 1, 2, 2), "float32"):
        with R.dataflow():
            c = R.const([[[[0.5, 1.0], [1.5, 2.0]]]], "float32")
            z2 = cls.fused_conv2d_add_multiply_add_add_add_add(x, weight, c)
            R.output(z2)
        return z2
""")
    assert_structural_equal(out, expected)


def test_an_inline_constant_used_twice_is_one_parameter():
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((2, 2), "float32"))
    c = Constant(np.full((2, 2), 0.5, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(call_op("relax.add", c, c), "y")
            gv = bb.emit_output(call_op("relax.multiply", y, x), "gv")
        bb.emit_func_output(gv)
    out = fuse(bb.get().with_phase(1), fuse_opt_level=2)
    assert [p.name_hint for p in out["fused_add_multiply"].params] == ["const", "x"]
    assert out["main"].body.blocks[0].bindings[0].value.args[0] is c


def test_fuse_opt_level_default_follows_the_pass_context():
    mod = module(TUTORIAL)
    with PassContext(opt_level=0):
        assert len(groups(FuseOps()(mod))) == 7
    with PassContext(opt_level=2):
        assert len(groups(FuseOps()(mod))) == 1


# ---------------------------------------------------------------------------
# Before/after examples
# ---------------------------------------------------------------------------

MLP = """
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 8), "float32"),
             b: R.Tensor((8,), "float32")):
        n = T.int64()
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
"""


def test_matmul_add_relu_is_one_group():
    out = fuse(module(MLP), fuse_opt_level=2)
    expected = module("""
    @R.function(private=True)
    def fused_matmul_add_relu(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 8), "float32"),
                              b: R.Tensor((8,), "float32")) -> R.Tensor(("n", 8), "float32"):
        R.func_attr({"Primitive": True})
        n = T.int64()
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 8), "float32"),
             b: R.Tensor((8,), "float32")) -> R.Tensor(("n", 8), "float32"):
        n = T.int64()
        with R.dataflow():
            gv = cls.fused_matmul_add_relu(x, w, b)
            R.output(gv)
        return gv
""")
    assert_structural_equal(out, expected)


def test_lifted_functions_have_fresh_symbolic_variables():
    mod = module(MLP)
    out = fuse(mod, fuse_opt_level=2)
    main_syms = set(collect_shape_vars(out["main"].params[0].struct_info))
    fused = out["fused_matmul_add_relu"]
    fused_syms = {v for p in fused.params for v in collect_shape_vars(p.struct_info)}
    assert len(main_syms) == 1 and len(fused_syms) == 1
    assert not main_syms & fused_syms
    assert [v.name for v in fused_syms] == ["n"]


def test_matmul_add_relu_at_level_0():
    out = fuse(module(MLP), fuse_opt_level=0)
    assert calls(out) == ["cls.fused_matmul", "cls.fused_add", "cls.fused_relu"]


def test_diamond_after_an_elementwise_op_fuses_whole():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.add(a, R.const(1.0, "float32"))
            c = R.multiply(a, R.const(2.0, "float32"))
            gv = R.add(b, c)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_exp_add_multiply_add": ["exp", "add", "multiply", "add"]}


def test_producer_with_consumers_in_two_groups_stays_alone():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            s = R.sum(a, axis=[1])
            m = R.max(a, axis=[1])
            gv = R.add(s, m)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    # exp feeds two reductions: inlining it into one would leave the other
    # reading a tensor that no longer exists. Each group has one anchor.
    assert calls(out) == ["cls.fused_exp", "cls.fused_sum", "cls.fused_max_add"]


def test_producer_used_after_the_block_is_not_fused_into_its_consumer():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            gv = R.negative(a)
            R.output(a, gv)
        return (a, gv)
"""), fuse_opt_level=2)
    assert calls(out)[:2] == ["cls.fused_exp", "cls.fused_negative"]


def test_producer_used_by_a_non_operator_is_a_boundary():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            t = (a, x)
            b = R.negative(a)
            gv = (t, b)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_exp", "Tuple", "cls.fused_negative", "Tuple"]


def test_reduction_takes_its_elementwise_producers():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.multiply(a, R.const(2.0, "float32"))
            gv = R.sum(b, axis=[1])
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_exp_multiply_sum": ["exp", "multiply", "sum"]}


def test_injective_producer_is_not_inlined_into_a_reduction():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.permute_dims(x, axes=[1, 0])
            b = R.exp(a)
            gv = R.sum(b, axis=[1])
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_permute_dims", "cls.fused_exp_sum"]


SOFTMAX = """
    @R.function
    def main(x: R.Tensor(("n", 8), "float32")):
        n = T.int64()
        with R.dataflow():
            m = R.max(x, axis=[1], keepdims=True)
            d = R.subtract(x, m)
            e = R.exp(d)
            s = R.sum(e, axis=[1], keepdims=True)
            gv = R.divide(e, s)
            R.output(gv)
        return gv
"""


def test_reduction_epilogue_default_and_tvm_rules():
    out = fuse(module(SOFTMAX), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_max", "cls.fused_subtract_exp_sum_divide"]
    out = fuse(module(SOFTMAX), fuse_opt_level=2, rules=TVM_RULES)
    assert calls(out) == ["cls.fused_max", "cls.fused_subtract_exp", "cls.fused_sum",
                          "cls.fused_divide"]


def test_anchor_takes_its_epilogue_before_a_reduction_takes_its_input():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.matmul(x, w)
            b = R.nn.relu(a)
            gv = R.sum(b, axis=[1])
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_matmul_relu", "cls.fused_sum"]


def test_anchor_epilogue_through_a_diamond():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.matmul(x, w)
            b = R.exp(a)
            c = R.negative(a)
            gv = R.add(b, c)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_matmul_exp_negative_add": ["matmul", "exp", "negative", "add"]}


def test_no_producer_is_inlined_into_a_matmul_and_no_two_anchors_share_a_group():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.matmul(a, w)
            c = R.matmul(b, w)
            R.output(c)
        return c
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_exp", "cls.fused_matmul", "cls.fused_matmul1"]


def test_injective_chain_through_reshape_and_permute():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((2, 3, 4), "float32"), y: R.Tensor((4, 6), "float32")):
        with R.dataflow():
            a = R.reshape(x, R.shape([6, 4]))
            b = R.permute_dims(a, axes=[1, 0])
            c = R.add(b, y)
            d = R.nn.relu(c)
            gv = R.reshape(d, R.shape([24]))
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_reshape_permute_dims_add_relu_reshape":
                           ["reshape", "permute_dims", "add", "nn.relu", "reshape"]}


def test_injective_producer_joins_an_anchor_epilogue_as_a_side_input():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32"),
             b: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.matmul(x, w)
            bt = R.permute_dims(b, axes=[1, 0])
            gv = R.add(a, bt)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_matmul_permute_dims_add": ["matmul", "permute_dims", "add"]}


def test_stop_fusion_blocks_fusion_and_stays_in_the_caller():
    mod = module("""
    @R.function
    def main(x: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.stop_fusion(a)
            gv = R.negative(b)
            R.output(gv)
        return gv
""")
    out = fuse(mod, fuse_opt_level=2)
    assert calls(out) == ["cls.fused_exp", "stop_fusion", "cls.fused_negative"]
    without = parse(mod.script(syntax="legacy").replace("R.stop_fusion(a)", "R.abs(a)"))
    assert calls(fuse(without, fuse_opt_level=2)) == ["cls.fused_exp_abs_negative"]


def test_opaque_operators_are_alone():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.nn.softmax(a, axis=1)
            gv = R.negative(b)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_exp", "cls.fused_softmax", "cls.fused_negative"]


def test_split_fuses_with_its_fields_when_all_uses_are_in_the_group():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            s = R.split(x, 2, axis=1)
            a = s[0]
            b = s[1]
            gv = R.add(a, b)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_split_add"]
    inner = out["fused_split_add"].body.blocks[0].bindings
    assert [type(b.value) for b in inner] == [Call, TupleGetItem, TupleGetItem, Call]


def test_split_used_by_two_groups_returns_its_tuple():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4, 8), "float32")):
        with R.dataflow():
            s = R.split(x, 2, axis=1)
            a = s[0]
            b = s[1]
            c = R.sum(a, axis=[1])
            d = R.max(b, axis=[1])
            gv = (c, d)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert calls(out) == ["cls.fused_split", "TupleGetItem", "TupleGetItem", "cls.fused_sum",
                          "cls.fused_max", "Tuple"]
    assert isinstance(out["fused_split"].ret_struct_info, TupleStructInfo)


def test_concat_of_an_inline_tuple_fuses_its_producers():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.negative(y)
            gv = R.concat((a, b), axis=0)
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    assert groups(out) == {"fused_exp_negative_concat": ["exp", "negative", "concat"]}


def test_symbolic_variable_not_defined_by_the_parameters_gets_a_shape_parameter():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.reshape(x, R.shape([n * 4]))
            b = R.stop_fusion(a)
            c = R.exp(b)
            gv = R.reshape(c, R.shape([n, 4]))
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    fused = out["fused_exp_reshape"]
    # (n * 4,) does not define n: a leading R.Shape parameter does.
    assert isinstance(fused.params[0].struct_info, ShapeStructInfo)
    assert [v.name for v in fused.params[0].struct_info.values] == ["n"]
    call = out["main"].body.blocks[0].bindings[2].value
    assert call.args[0].values[0] is out["main"].params[0].struct_info.shape[0]


def test_constants_scalars_stay_inside_tensors_become_parameters():
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.add(x, R.const([1.0, 2.0, 3.0, 4.0], "float32"))
            gv = R.multiply(a, R.const(3.0, "float32"))
            R.output(gv)
        return gv
"""), fuse_opt_level=2)
    fused = out["fused_add_multiply"]
    assert [p.name_hint for p in fused.params] == ["x", "const"]
    inner = fused.body.blocks[0].bindings
    assert isinstance(inner[1].value.args[1], Constant)


def test_only_dataflow_blocks_of_non_primitive_functions_are_fused():
    mod = module("""
    @R.function(private=True)
    def already(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"Primitive": True})
        with R.dataflow():
            a = R.exp(x)
            gv = R.negative(a)
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        a = R.exp(x)
        b = R.negative(a)
        with R.dataflow():
            c = R.exp(b)
            gv = R.negative(c)
            R.output(gv)
        d = cls.already(gv)
        return d
""")
    out = fuse(mod, fuse_opt_level=2)
    assert out["already"] is mod["already"]
    assert calls(out) == ["exp", "negative", "cls.fused_exp_negative", "cls.already"]


def test_names_never_collide_with_existing_functions():
    mod = module("""
    @R.function(private=True)
    def fused_exp(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.stop_fusion(a)
            c = R.exp(b)
            gv = cls.fused_exp(c)
            R.output(gv)
        return gv
""")
    out = fuse(mod, fuse_opt_level=2)
    assert calls(out) == ["cls.fused_exp1", "stop_fusion", "cls.fused_exp2", "cls.fused_exp"]
    assert out["fused_exp"] is mod["fused_exp"]


def test_several_functions_and_blocks_and_if_branches():
    mod = module("""
    @R.function
    def helper(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            gv = R.negative(a)
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")):
        with R.dataflow():
            a = R.exp(x)
            gv = R.sqrt(a)
            R.output(gv)
        if flag:
            with R.dataflow():
                b = R.negative(gv)
                c = R.abs(b)
                R.output(c)
            r = c
        else:
            r = gv
        return r
""")
    out = fuse(mod, fuse_opt_level=2)
    assert sorted(groups(out)) == ["fused_exp_negative", "fused_exp_sqrt", "fused_negative_abs"]


def test_max_fused_ops_bounds_group_size():
    rules = FusionRules(pairs=DEFAULT_RULES.pairs, max_fused_ops=2, name="pairs_of_two")
    out = fuse(module("""
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.negative(a)
            c = R.abs(b)
            gv = R.sqrt(c)
            R.output(gv)
        return gv
"""), fuse_opt_level=2, rules=rules)
    assert calls(out) == ["cls.fused_exp_negative", "cls.fused_abs_sqrt"]


# ---------------------------------------------------------------------------
# Replaceable rules
# ---------------------------------------------------------------------------

def test_custom_rules_forbidding_the_epilogue():
    no_epi = DEFAULT_RULES.forbid((P.OUT_ELEMWISE_FUSABLE, P.ELEMWISE),
                                  (P.OUT_ELEMWISE_FUSABLE, P.BROADCAST), name="test_no_epi")
    mod = module(MLP)
    out = fuse(mod, fuse_opt_level=2, rules=no_epi)
    assert calls(out) == ["cls.fused_matmul", "cls.fused_add_relu"]
    # The same table through the PassContext config, for a whole pipeline.
    with PassContext(config={"FuseOps.rules": no_epi}):
        assert calls(FuseOps(fuse_opt_level=2)(mod)) == calls(out)
        # an explicit option wins over the config
        assert calls(FuseOps(fuse_opt_level=2, rules="default")(mod)) == \
            ["cls.fused_matmul_add_relu"]
    # The built-in named table does the same for anchors.
    assert calls(FuseOps(fuse_opt_level=2, rules="no_epilogue")(mod)) == calls(out)
    assert get_fusion_rules("no_epilogue") is NO_EPILOGUE_RULES


def test_per_operator_pattern_override():
    keep_matmul_alone = DEFAULT_RULES.with_op_patterns({"R.matmul": P.OPAQUE}, name="t_alone")
    out = fuse(module(MLP), fuse_opt_level=2, rules=keep_matmul_alone)
    assert calls(out) == ["cls.fused_matmul", "cls.fused_add_relu"]


def test_named_rules_in_a_textual_pipeline():
    rules = register_fusion_rules(TVM_RULES.forbid((P.OUT_ELEMWISE_FUSABLE, P.ELEMWISE),
                                                   name="t_textual"))
    seq = parse_pipeline("FuseOps{fuse_opt_level=2,rules=t_textual}")
    assert seq.spec() == "FuseOps{fuse_opt_level=2,rules=t_textual}"
    assert FuseOps(fuse_opt_level=2, rules=rules).spec() == seq.spec()
    out = seq(module(MLP))
    assert calls(out) == ["cls.fused_matmul_add", "cls.fused_relu"]
    assert get_pass("FuseOps").info.opt_level == 0


def test_rules_describe_the_default_table():
    text = DEFAULT_RULES.describe()
    assert "OUT_ELEMWISE_FUSABLE -> ELEMWISE, BROADCAST" in text
    assert "INJECTIVE -> ELEMWISE, BROADCAST, INJECTIVE" in text
    assert "ELEMWISE -> ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE" in text


def test_bad_configuration_is_a_clear_error():
    with pytest.raises(PassConfigError, match="fuse_opt_level"):
        FuseOps(fuse_opt_level=-2)
    with pytest.raises(PassConfigError, match="unknown fusion rules 'nope'.*default"):
        FuseOps(rules="nope")
    with pytest.raises(PassConfigError, match="OPAQUE, which never fuses"):
        FusionRules(pairs={(P.OPAQUE, P.ELEMWISE)})
    with pytest.raises(PassConfigError, match="not a pattern kind"):
        FusionRules(pairs={("ELEMWISE", "SOMETHING")})
    with pytest.raises(PassConfigError, match="max_fused_ops"):
        FusionRules(max_fused_ops=0)
    with pytest.raises(PassConfigError, match="already registered"):
        register_fusion_rules(FusionRules(name="default"))
    with PassContext(config={"FuseOps.rules": 42}):
        with pytest.raises(PassError, match="FuseOps.rules.*must be a FusionRules"):
            FuseOps()(module(MLP))
    with pytest.raises(PassConfigError, match="no option"):
        parse_pipeline("FuseOps{level=2}")


def test_phase_is_checked():
    with pytest.raises(PhaseError, match="FuseOps"):
        FuseOps()(module(MLP).with_phase(0))


def test_names_of_long_groups_are_shortened():
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for _ in range(30):
                v = bb.emit(call_op("relax.negative", v))
            gv = bb.emit_output(call_op("relax.exp", v))
        bb.emit_func_output(gv)
    out = fuse(bb.get().with_phase(1), fuse_opt_level=2)
    (name,) = groups(out)
    assert len(name) <= 64 and name.startswith("fused_negative_negative")
    assert name.endswith("_more")


# ---------------------------------------------------------------------------
# Scale
# ---------------------------------------------------------------------------

def test_linear_time_on_a_10k_binding_chain():
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((tir.Var("n"), 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for i in range(9999):
                v = bb.emit(call_op("relax.exp" if i % 2 else "relax.negative", v))
            gv = bb.emit_output(call_op("relax.exp", v))
        bb.emit_func_output(gv)
    mod = bb.get().with_phase(1)
    with PassContext(verify="off"):
        out = FuseOps(fuse_opt_level=2)(mod)  # iterative: no RecursionError (speed: bench/)
    sizes = sorted(len(ops) for ops in groups(out).values())
    assert sum(sizes) == 10000 and max(sizes) == 256  # bounded by max_fused_ops
    assert len(out["main"].body.blocks[0].bindings) == len(sizes)
    verifier.verify(out)


# ---------------------------------------------------------------------------
# Each group legalizes to ONE PrimFunc computing the same values
# ---------------------------------------------------------------------------

LEGALIZE_CASES = [MLP, SOFTMAX, """
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), g: R.Tensor((8,), "float32")):
        n = T.int64()
        with R.dataflow():
            m = R.mean(x, axis=[1], keepdims=True)
            d = R.subtract(x, m)
            sq = R.multiply(d, d)
            v = R.mean(sq, axis=[1], keepdims=True)
            e = R.add(v, R.const(1e-5, "float32"))
            r = R.rsqrt(e)
            y = R.multiply(d, r)
            gv = R.multiply(y, g)
            R.output(gv)
        return gv
""", """
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.reshape(x, R.shape([n * 4]))
            b = R.stop_fusion(a)
            c = R.exp(b)
            d = R.reshape(c, R.shape([n, 4]))
            s = R.split(d, 2, axis=1)
            p = s[0]
            q = s[1]
            gv = R.concat((p, R.negative(q)), axis=1)
            R.output(gv)
        return gv
""", """
    @R.function
    def main(x: R.Tensor((1, 2, 6, 6), "float32"), w: R.Tensor((3, 2, 3, 3), "float32"),
             b: R.Tensor((1, 3, 1, 1), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w)
            d = R.add(c, b)
            e = R.nn.relu(d)
            p = R.nn.max_pool2d(e, pool_size=[2, 2], strides=[2, 2])
            gv = R.sum(p, axis=[2, 3])
            R.output(gv)
        return gv
""", """
    @R.function
    def main(t: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")),
             idx: R.Tensor((4,), "int64")):
        with R.dataflow():
            a = R.concat(t, axis=0)
            b = R.take(a, idx, axis=0)
            gv = R.exp(b)
            R.output(gv)
        return gv
"""]


def _tir_args(lowered, func: Function, values: list, env: dict) -> list:
    by_param = {p: v for p, v in zip(func.params, values)}
    args = []
    for a in lowered.args:
        if isinstance(a, Var):
            args.append(by_param[a])
        elif isinstance(a, TupleGetItem):
            args.append(by_param[a.tuple_value][a.index])
        else:
            args.append(np.asarray(a.data))
    return args


def _sym_env(func: Function, values: list) -> dict:
    """Bind the function's symbolic variables from concrete argument shapes."""
    env: dict = {}
    stack = list(zip((p.struct_info for p in func.params), values))
    while stack:
        sinfo, value = stack.pop()
        if isinstance(sinfo, TupleStructInfo):
            stack.extend(zip(sinfo.fields, value))
            continue
        dims = sinfo.shape if isinstance(sinfo, TensorStructInfo) else sinfo.values
        concrete = value.shape if isinstance(sinfo, TensorStructInfo) else value
        for d, c in zip(dims, concrete):
            if isinstance(d, tir.Var):
                env[d] = int(c)
    return env


@pytest.mark.parametrize("case", range(len(LEGALIZE_CASES)))
@pytest.mark.parametrize("level", [0, 2])
def test_every_group_legalizes_to_one_prim_func_with_the_same_result(case, level):
    out = fuse(module(LEGALIZE_CASES[case]), fuse_opt_level=level)
    primitives = [(n, f) for n, f in out.relax_functions() if f.attrs.get("Primitive")]
    assert primitives
    for name, func in primitives:
        values = _inputs(func, seed=len(name))
        expected = run(out, *values, entry=name)
        lowered = lower_fused(func)
        env = _sym_env(func, values)
        outs_sinfo = lowered.out_sinfo.fields if isinstance(lowered.out_sinfo, TupleStructInfo) \
            else (lowered.out_sinfo,)
        outputs = [np.zeros(_shape(s, env), s.dtype) for s in outs_sinfo]
        scalars = [int(eval_prim_expr(v, env)) for v in lowered.tir_vars]
        run_prim_func(lowered.prim_func, _tir_args(lowered, func, values, env) + scalars + outputs)
        got = tuple(outputs) if isinstance(lowered.out_sinfo, TupleStructInfo) else outputs[0]
        _assert_same(expected, got)


def test_fused_module_lowers_end_to_end_with_legalize_ops():
    mod = module(LEGALIZE_CASES[3])
    lowered = Sequential([FuseOps(fuse_opt_level=2), get_pass("LegalizeOps")])(mod)
    args = _inputs(mod["main"])
    _assert_same(run(mod, *args), run(lowered, *args))
    kernels = sorted(n for n, _ in lowered.prim_funcs())
    assert kernels == ["fused_exp_reshape_split_negative_concat", "fused_reshape"]


def test_dataflow_block_type_is_kept():
    out = fuse(module(MLP), fuse_opt_level=2)
    assert all(isinstance(b, DataflowBlock) for b in out["main"].body.blocks)
