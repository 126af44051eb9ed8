"""What the FuseOps tests share: modules written as TVMScript at phase
optimization, ``fuse`` (FuseOps with every check a pass must pass), the
groups and calls a fused module has, random inputs, and the MLP and softmax
programs."""

from __future__ import annotations

import numpy as np

from phasec import verifier
from phasec.passes.fuse_ops import FuseOps
from phasec.interp import run
from phasec.interp.tir import eval_prim_expr
from phasec.ir import (
    Call, Function, GlobalVar, IRModule, Op, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
    assert_structural_equal, structural_hash,
)
from phasec.arith.lattice import collect_shape_vars
from phasec.script.parser import parse

#: the start of every module these tests write
HEADER = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})
"""

N = 3  # the value of every symbolic dimension in the numeric checks


def module(body: str) -> IRModule:
    """Parse ``body`` (functions of a class) as a module at phase optimization."""
    return parse(HEADER + body)


def shape_of(sinfo, env):
    """A tensor struct info's shape, its dimensions evaluated in ``env``."""
    return tuple(int(eval_prim_expr(d, env)) for d in sinfo.shape)


def random_value(sinfo, rng, env):
    """A random value of struct info ``sinfo`` (tensors, tuples, shapes)."""
    if isinstance(sinfo, TensorStructInfo):
        shape = shape_of(sinfo, env)
        if sinfo.dtype.startswith("int"):
            return rng.integers(0, 2, size=shape).astype(sinfo.dtype)
        if sinfo.dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(bool)
        return rng.uniform(0.5, 1.5, size=shape).astype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, rng, env) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return tuple(int(eval_prim_expr(v, env)) for v in sinfo.values)
    raise AssertionError(f"no random value for {sinfo}")


def random_inputs(func: Function, seed: int = 0) -> list:
    """Random arguments for ``func``, every symbolic dimension N."""
    rng = np.random.default_rng(seed)
    env = {v: N for p in func.params for v in collect_shape_vars(p.struct_info)}
    return [random_value(p.struct_info, rng, env) for p in func.params]


def assert_same(a, b) -> None:
    """``a`` and ``b`` (arrays or nested tuples of them) are equal to rounding."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
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
    args = random_inputs(mod[entry])
    assert_same(run(mod, *args, entry=entry), run(out, *args, entry=entry))
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


#: matmul + add + relu with a symbolic batch
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


#: softmax written out: max, subtract, exp, sum, divide
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

