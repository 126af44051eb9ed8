"""FuseOps's replaceable rules tables (custom, per-operator, named in a
textual pipeline), its configuration errors, its linear time on long chains,
and every group legalized to one PrimFunc computing the same values."""

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
    DataflowBlock, Function, TensorStructInfo, TupleGetItem, TupleStructInfo, Var, tir,
)
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.op.legalize import lower_fused
from phasec.op.registry import OpPattern as P
from phasec.transform import PassConfigError, PassContext, Sequential, get_pass, parse_pipeline

from helpers.fusion import (
    MLP, SOFTMAX, assert_same, calls, fuse, groups, module, random_inputs, shape_of,
)


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
        values = random_inputs(func, seed=len(name))
        expected = run(out, *values, entry=name)
        lowered = lower_fused(func)
        env = _sym_env(func, values)
        outs_sinfo = lowered.out_sinfo.fields if isinstance(lowered.out_sinfo, TupleStructInfo) \
            else (lowered.out_sinfo,)
        outputs = [np.zeros(shape_of(s, env), s.dtype) for s in outs_sinfo]
        scalars = [int(eval_prim_expr(v, env)) for v in lowered.tir_vars]
        run_prim_func(lowered.prim_func, _tir_args(lowered, func, values, env) + scalars + outputs)
        got = tuple(outputs) if isinstance(lowered.out_sinfo, TupleStructInfo) else outputs[0]
        assert_same(expected, got)


def test_fused_module_lowers_end_to_end_with_legalize_ops():
    mod = module(LEGALIZE_CASES[3])
    lowered = Sequential([FuseOps(fuse_opt_level=2), get_pass("LegalizeOps")])(mod)
    args = random_inputs(mod["main"])
    assert_same(run(mod, *args), run(lowered, *args))
    kernels = sorted(n for n, _ in lowered.prim_funcs())
    assert kernels == ["fused_exp_reshape_split_negative_concat", "fused_reshape"]


def test_dataflow_block_type_is_kept():
    out = fuse(module(MLP), fuse_opt_level=2)
    assert all(isinstance(b, DataflowBlock) for b in out["main"].body.blocks)
