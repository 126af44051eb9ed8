"""What the tests of the lowering passes (phase 1 -> 2 -> 3) share: running
one pass (its output verified, its input untouched), the bindings and
operator calls of a function, results before and after on the reference
interpreter, and phase-2 modules written in TVMScript with small kernels."""

from __future__ import annotations

import numpy as np

import phasec
from phasec import verifier
from phasec.interp import run as interpret
from phasec.ir import Call, Op, Var, structural_hash
from phasec.transform import Sequential, get_pass

#: the generator of rand
RNG = np.random.default_rng(7)
#: the passes from the lowering phase to the build phase, and the whole pipeline
LOWERING_PASSES = ("RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory")
FULL_PIPELINE = ("LambdaLifting", "ToNonDataflow", "LegalizeOps", *LOWERING_PASSES,
                 "VMBuiltinLower")


def rand(*shape, dtype="float32"):
    """Standard-normal values of ``shape``."""
    return RNG.standard_normal(shape).astype(dtype)


def bindings(func):
    """The bindings of ``func``'s blocks, in order."""
    return [b for block in func.body.blocks for b in block.bindings]


def op_names(func):
    """Names of the operators called by the bindings of ``func`` (in order)."""
    return [b.value.op.name for b in bindings(func)
            if isinstance(b.value, Call) and isinstance(b.value.op, Op)]


def calls_of(func, name):
    """The bindings of ``func`` calling the operator ``name``."""
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
    """``before`` and ``after`` give the same results on ``args`` (interpreter)."""
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


def inc_kernel(name, n, dtype="float32"):
    """A 1-D kernel ``B = A + 1`` of static length n, in TVMScript."""
    return f'''
    @T.prim_func(private=True)
    def {name}(A: T.Buffer((T.int64({n}),), "{dtype}"), B: T.Buffer((T.int64({n}),), "{dtype}")):
        for i in range(T.int64({n})):
            with T.block("B"):
                vi = T.axis.spatial(T.int64({n}), i)
                B[vi] = A[vi] + T.{dtype}(1)
'''


def add_kernel(name, n):
    """A 1-D kernel ``C = A + B`` of static length n, in TVMScript."""
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


# Programs several lowering tests run

#: a dataflow MLP with a symbolic batch, softmax last (phase ingestion)
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

#: a phase-optimization MLP without a dataflow block
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

#: the body of a lowering_module: five kernel calls, each reading the last
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

