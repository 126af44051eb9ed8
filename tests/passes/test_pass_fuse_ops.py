"""FuseOps: before/after examples on the TVM tutorial's program and on every
fusion rule; the rules tables and the legalization of every group are in
test_pass_fuse_rules.py."""

from __future__ import annotations

import numpy as np

from phasec.passes.fuse_ops import DEFAULT_RULES, TVM_RULES, FuseOps, FusionRules
from phasec.ir import (
    Call, Constant, ShapeStructInfo, TensorStructInfo, TupleGetItem, TupleStructInfo, Var,
    assert_structural_equal,
)
from phasec.script.builder import BlockBuilder
from phasec.arith.lattice import collect_shape_vars
from phasec.op import call_op
from phasec.script.parser import parse
from phasec.transform import PassContext

from helpers.fusion import MLP, SOFTMAX, calls, fuse, groups, module


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


