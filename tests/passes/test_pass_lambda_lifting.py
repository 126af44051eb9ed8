"""LambdaLifting: nested functions become private module functions (0 -> 1).

Before/after cases live in tests/passes/cases/lambda_lifting_*.py; this file
adds the interpreter checks that need chosen inputs (recursion), a function
returned as a value, symbolic shapes (nested functions using their parent's
symbolic variables), naming and the phase transition.
"""

from __future__ import annotations

import numpy as np
import pytest

from phasec import verifier
from phasec import PhaseError, parse
from phasec.interp import Closure, run
from phasec.ir import (
    BindingBlock, Call, FuncStructInfo, Function, IRModule, Phase, SeqExpr, TensorStructInfo,
    Var, VarBinding, structural_equal,
)
from phasec.op import call_op
from phasec.arith.lattice import collect_shape_vars
from phasec.transform import PassContext, get_pass

from helpers.pass_cases import case_names, check_pass, load_case, run_case


def lift(mod: IRModule) -> IRModule:
    return get_pass("LambdaLifting")(mod)


@pytest.mark.parametrize("name", case_names("lambda_lifting_"))
def test_case(name):
    out = run_case(name)
    assert out.phase == Phase.OPTIMIZATION
    before = parse(load_case(name).before)
    for fname, func in out.relax_functions():
        if fname not in before.functions:  # lifted: private
            assert "global_symbol" not in func.attrs, fname


def i64(v: int) -> np.ndarray:
    return np.array(v, "int64")


def test_mutual_recursion_runs_the_same():
    before = parse(load_case("lambda_lifting_mutual_recursion").before)
    after = lift(before)
    for n in range(7):
        want = run(before, i64(n), i64(1))
        got = run(after, i64(n), i64(1))
        assert bool(want) == bool(got) == (n % 2 == 0)


def test_self_recursion_runs_the_same():
    before = parse(load_case("lambda_lifting_self_recursion").before)
    after = lift(before)
    for n, step, want in [(5, 1, 120), (5, 2, 6), (0, 1, 1), (7, 3, 6)]:
        assert int(run(before, i64(n), i64(step))) == want
        assert int(run(after, i64(n), i64(step))) == want


RETURNED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), s: R.Tensor((3,), "float32")) -> R.Callable((R.Tensor((2, 3), "float32"),), R.Tensor((2, 3), "float32")):
        @R.function
        def scale(y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            a = R.multiply(y, s)
            b = R.add(a, x)
            return b
        return scale
"""


def test_function_returned_as_a_value():
    before = parse(RETURNED)
    after = check_pass(get_pass("LambdaLifting"), before, """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), s: R.Tensor((3,), "float32")) -> R.Callable((R.Tensor((2, 3), "float32"),), R.Tensor((2, 3), "float32")):
        scale = R.make_closure(cls.main_scale, (x, s))
        return scale

    @R.function(private=True)
    def main_scale(y: R.Tensor((2, 3), "float32"), x: R.Tensor((2, 3), "float32"), s: R.Tensor((3,), "float32")) -> R.Tensor((2, 3), "float32"):
        a = R.multiply(y, s)
        b = R.add(a, x)
        return b
""")
    rng = np.random.default_rng(0)
    x, s, y = (rng.standard_normal(shape).astype("float32") for shape in [(2, 3), (3,), (2, 3)])
    f_before, f_after = run(before, x, s), run(after, x, s)
    assert isinstance(f_before, Closure) and isinstance(f_after, Closure)
    np.testing.assert_allclose(f_after(y), f_before(y), rtol=1e-6)
    np.testing.assert_allclose(f_after(y), y * s + x, rtol=1e-6)


def test_closure_struct_info_is_the_nested_functions_signature():
    before = parse(RETURNED)
    after = lift(before)
    closure = after["main"].body.blocks[0].bindings[0].var
    assert isinstance(closure.struct_info, FuncStructInfo)
    assert structural_equal(closure.struct_info, before["main"].ret_struct_info)


SYMBOLIC = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        @R.function
        def f(y: R.Tensor((2,), "float32")):
            zeros = R.zeros(R.shape([n]), dtype="float32")
            w = R.add(zeros, zeros)
            return w
        @R.function
        def g(z: R.Tensor((n,), "float32")):
            u = R.multiply(z, z)
            return u
        @R.function
        def h(hy: R.Tensor((2,), "float32")):
            hz = R.reshape(x, R.shape([n]))
            return hz
        r1 = f(R.const([1.0, 1.0], "float32"))
        r2 = g(r1)
        r3 = h(R.const([1.0, 1.0], "float32"))
        r4 = R.add(r2, r3)
        return r4
"""


def symbolic_module() -> IRModule:
    """main(x: (n,)) with nested f(y: (2,)) using main's n only in its body,
    g(z: (n,)) whose parameter mentions main's n, and h capturing x: (n,)
    and using n in its body."""
    mod = parse(SYMBOLIC)
    main = mod["main"]
    n = main.params[0].struct_info.shape[0]
    g = main.body.blocks[0].bindings[1].value
    assert g.params[0].struct_info.shape[0] is n  # main's n, as written
    return mod


def test_symbolic_variables_are_not_shared_between_functions():
    before = symbolic_module()
    verifier.verify(before)
    after = check_pass(get_pass("LambdaLifting"), before)
    assert verifier.check(after) == []  # no WF007 (shared symbolic variable), no warning
    main_vars = {id(v) for p in after["main"].params for v in collect_shape_vars(p.struct_info)}
    for name in ("main_f", "main_g", "main_h"):
        func = after[name]
        own = {id(v) for p in func.params for v in collect_shape_vars(p.struct_info)}
        assert own and not own & main_vars, name
    # f uses n only in its body: n is captured as an R.Prim(value=n) parameter.
    f = after["main_f"]
    assert [p.name_hint for p in f.params] == ["y", "n_value"]
    make = after["main"].body.blocks[0].bindings[0].value
    assert make.op.name == "relax.make_closure"
    assert [type(a).__name__ for a in make.args[1].fields] == ["PrimValue"]
    # g's parameter defines its own n: no capture, a direct call.
    assert len(after["main_g"].params) == 1
    # h's captured x: (n,) defines n in main_h: nothing more to capture.
    assert [p.name_hint for p in after["main_h"].params] == ["hy", "x"]
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(run(after, x), run(before, x))


NESTED_SAME_SHAPE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", 4), "float32")) -> R.Tensor(("m", 4), "float32"):
        m = T.int64()
        @R.function
        def inner(y: R.Tensor((m, 4), "float32")) -> R.Tensor((m, 4), "float32"):
            s = R.exp(y)
            return s
        z = inner(x)
        t = R.add(z, x)
        return t
"""


def test_nested_function_with_the_enclosing_symbolic_shape():
    before = parse(NESTED_SAME_SHAPE)
    verifier.verify(before)
    after = check_pass(get_pass("LambdaLifting"), before, """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor(("m", 4), "float32")) -> R.Tensor(("m", 4), "float32"):
        m = T.int64()
        z: R.Tensor((m, 4), "float32") = cls.main_inner(x)
        t: R.Tensor((m, 4), "float32") = R.add(z, x)
        return t

    @R.function(private=True)
    def main_inner(y: R.Tensor(("m", 4), "float32")) -> R.Tensor(("m", 4), "float32"):
        m = T.int64()
        s: R.Tensor((m, 4), "float32") = R.exp(y)
        return s
""")
    assert verifier.check(after) == []
    # the lifted function has its own m
    m_main = after["main"].params[0].struct_info.shape[0]
    assert after["main_inner"].params[0].struct_info.shape[0] is not m_main
    for rows in (1, 3):
        x = np.linspace(-1, 1, rows * 4, dtype="float32").reshape(rows, 4)
        want = run(before, x)
        np.testing.assert_array_equal(run(after, x), want)
        np.testing.assert_allclose(want, np.exp(x) + x, rtol=1e-6)


def test_names_are_deterministic():
    text = load_case("lambda_lifting_captures").before
    first = lift(parse(text)).script()
    assert lift(parse(text)).script() == first
    # The order of the module's functions does not matter either.
    mod = parse(text)
    reordered = mod.with_functions(dict(reversed(list(mod.functions.items()))))
    assert structural_equal(lift(reordered), lift(mod))


def test_transition_and_phase_errors():
    info = get_pass("LambdaLifting").info
    assert info.phases == {Phase.INGESTION} and info.transition_to == Phase.OPTIMIZATION
    assert info.opt_level == 0
    mod = parse(RETURNED)
    after = lift(mod)
    with pytest.raises(PhaseError, match="LambdaLifting expects phase ingestion"):
        lift(after)
    # A module without nested functions only changes phase.
    plain = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
""")
    out = lift(plain)
    assert out.phase == Phase.OPTIMIZATION and structural_equal(out["main"], plain["main"])


def test_long_function_with_closures():
    # 20k bindings around a closure: iterative over bindings, linear.
    t4 = TensorStructInfo((4,), "float32")
    x, a = Var("x", t4), Var("a", t4)
    b = Var("b", t4)
    inner = Function([a], SeqExpr([BindingBlock([VarBinding(b, call_op("add", a, x))])], b))
    fv = Var("f", inner.struct_info)
    bindings, prev = [VarBinding(fv, inner)], x
    for i in range(20_000):
        v = Var(f"v{i}", t4)
        value = Call(fv, [prev]) if i % 1000 == 0 else call_op("multiply", prev, x)
        bindings.append(VarBinding(v, value))
        prev = v
    main = Function([x], SeqExpr([BindingBlock(bindings)], prev), attrs={"global_symbol": "main"})
    mod = IRModule({"main": main})
    with PassContext(verify="off"):
        out = lift(mod)
    assert out.phase == Phase.OPTIMIZATION and "main_f" in out
    arg = np.ones(4, "float32")
    np.testing.assert_array_equal(run(out, arg), run(mod, arg))
