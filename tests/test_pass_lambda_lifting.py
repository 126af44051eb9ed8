"""LambdaLifting: nested functions become private module functions (0 -> 1).

Before/after cases live in tests/pass_cases/lambda_lifting_*.py; this file
adds the interpreter checks that need chosen inputs (recursion), a function
returned as a value, symbolic shapes (IR built by hand: the parser does not
let a nested function see its parent's symbolic variables), naming and the
phase transition.
"""

from __future__ import annotations

import numpy as np
import pytest

import verifier
from phasec import PhaseError, parse
from phasec.interp import Closure, run
from phasec.ir import (
    BindingBlock, Call, Constant, FuncStructInfo, Function, IRModule, Phase, SeqExpr,
    ShapeExpr, TensorStructInfo, Var, VarBinding, structural_equal, tir,
)
from phasec.ir.builder import normalize_function
from phasec.ir.op import call_op
from phasec.ir.infer import collect_shape_vars
from phasec.transform import PassContext, get_pass

from pass_cases.harness import case_names, check_pass, load_case, run_case


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


def symbolic_module() -> IRModule:
    """main(x: (n,)) with nested f(y: (2,)) using main's n only in its body,
    g(z: (n,)) whose parameter mentions main's n, and h capturing x: (n,)
    and using n in its body."""
    n = tir.Var("n")
    tn = TensorStructInfo((n,), "float32")
    x, y, z = Var("x", tn), Var("y", TensorStructInfo((2,), "float32")), Var("z", tn)
    zeros, w = Var("zeros", tn), Var("w", tn)
    f = Function([y], SeqExpr([BindingBlock([
        VarBinding(zeros, call_op("zeros", ShapeExpr([n]), dtype="float32")),
        VarBinding(w, call_op("add", zeros, zeros))])], w))
    u = Var("u", tn)
    g = Function([z], SeqExpr([BindingBlock([VarBinding(u, call_op("multiply", z, z))])], u))
    hz, hy = Var("hz", tn), Var("hy", TensorStructInfo((2,), "float32"))
    h = Function([hy], SeqExpr([BindingBlock([
        VarBinding(hz, call_op("reshape", x, ShapeExpr([n])))])], hz))
    fv, gv, hv = Var("f", f.struct_info), Var("g", g.struct_info), Var("h", h.struct_info)
    r1, r2, r3, r4 = (Var(f"r{i}", tn) for i in range(1, 5))
    one2 = Constant(np.ones(2, "float32"))
    main = Function([x], SeqExpr([BindingBlock([
        VarBinding(fv, f), VarBinding(gv, g), VarBinding(hv, h),
        VarBinding(r1, Call(fv, [one2])),
        VarBinding(r2, Call(gv, [r1])),
        VarBinding(r3, Call(hv, [one2])),
        VarBinding(r4, call_op("add", r2, r3))])], r4), attrs={"global_symbol": "main"})
    return IRModule({"main": normalize_function(main)})


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
