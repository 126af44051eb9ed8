"""The reference interpreter (phasec.interp) on hand-built modules of every phase."""

import numpy as np
import pytest

import phasec
from phasec import ir
from phasec.interp import InterpError, Interpreter, evaluate_expr, run
from phasec.ir import tir
from phasec.runtime.packed import register_func, remove_func

# ---------------------------------------------------------------------------
# Building helpers
# ---------------------------------------------------------------------------


def tensor(shape, dtype="float32"):
    return ir.TensorStructInfo(shape, dtype)


def op(name, *args, sinfo_args=(), **attrs):
    return ir.Call(ir.Op("relax." + name), args, attrs, sinfo_args)


def packed(name, *args):
    return ir.Call(ir.ExternFunc(name), args)


def seq(bindings, result, dataflow=False):
    block = (ir.DataflowBlock if dataflow else ir.BindingBlock)(bindings)
    return ir.SeqExpr([block] if bindings else [], result)


def func(params, bindings, result, ret=None, pure=True, attrs=None, dataflow=False):
    return ir.Function(params, seq(bindings, result, dataflow), ret, pure, attrs)


def B(var, value):
    return ir.VarBinding(var, value)


def V(name, sinfo=None):
    return ir.Var(name, sinfo)


def module(phase="ingestion", **funcs):
    return ir.IRModule(funcs, {"phase": phase})


def f32(*values):
    return np.array(values, dtype="float32")


@pytest.fixture
def packed_funcs():
    """Registers a few packed functions for the test, removed afterwards."""
    names = []

    def add(name, fn):
        register_func(name, fn, override=True)
        names.append(name)
        return name

    yield add
    for n in names:
        remove_func(n)


def vector_add_kernel():
    """C[i] = A[i] + B[i] over a symbolic length n."""
    n = tir.Var("n", "int64")
    A, Bf, C = (tir.Buffer(name, (n,), "float32") for name in "ABC")
    i = tir.Var("i", "int64")
    body = tir.For(i, 0, n, "serial", tir.BufferStore(C, A[i] + Bf[i], (i,)))
    return tir.PrimFunc([A, Bf, C], body)


def scale_kernel():
    """Out[i] = X[i] * k and Idx[i] = i, with k a scalar parameter (tir_vars)."""
    n = tir.Var("n", "int64")
    k = tir.Var("k", "int64")
    X = tir.Buffer("X", (n,), "float32")
    Out = tir.Buffer("Out", (n,), "float32")
    Idx = tir.Buffer("Idx", (n,), "int64")
    i = tir.Var("i", "int64")
    body = tir.For(i, 0, n, "serial", tir.SeqStmt([
        tir.BufferStore(Out, X[i] * tir.Cast("float32", k), (i,)),
        tir.BufferStore(Idx, i, (i,)),
    ]))
    return tir.PrimFunc([X, Out, Idx, k], body)


# ---------------------------------------------------------------------------
# Operators, constants, shapes, prim values, tuples
# ---------------------------------------------------------------------------


def test_operators_in_dataflow_block_and_constants():
    x, y = V("x", tensor((2, 3))), V("y", tensor((2, 3)))
    lv, lv1, gv = ir.DataflowVar("lv"), ir.DataflowVar("lv1"), V("gv")
    c = ir.Constant(np.full((2, 3), 0.5, "float32"))
    main = func([x, y], [B(lv, op("add", x, y)), B(lv1, op("multiply", lv, c)),
                         B(gv, op("sum", lv1, axis=(1,)))], gv, dataflow=True)
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.ones((2, 3), "float32")
    out = run(module(main=main), a, b)
    np.testing.assert_allclose(out, ((a + b) * 0.5).sum(axis=1))


def test_api_forms_agree():
    x = V("x", tensor((3,)))
    y = V("y")
    mod = module(main=func([x], [B(y, op("exp", x))], y))
    a = f32(0, 1, 2)
    expected = np.exp(a)
    np.testing.assert_allclose(run(mod, a), expected)
    np.testing.assert_allclose(run(mod, a, entry="main"), expected)
    np.testing.assert_allclose(phasec.evaluate(mod, a), expected)
    np.testing.assert_allclose(phasec.interp.evaluate(mod, a), expected)
    np.testing.assert_allclose(Interpreter(mod)("main", a), expected)
    np.testing.assert_allclose(Interpreter(mod).call("main", a), expected)


def test_shape_expr_and_prim_value_use_symbolic_dims():
    n, m = tir.Var("n", "int64"), tir.Var("m", "int64")
    x = V("x", tensor((n, m)))
    s, p, q, r = V("s"), V("p"), V("q"), V("r")
    main = func([x], [
        B(s, ir.ShapeExpr([m, n * 2])),
        B(p, ir.PrimValue(n * m + 1)),
        B(q, op("reshape", x, ir.ShapeExpr([m, n]))),
        B(r, ir.Tuple([s, p, q, ir.PrimValue(tir.FloatImm(1.5, "float32"))])),
    ], r)
    a = np.arange(6, dtype="float32").reshape(2, 3)
    shape, prim, reshaped, flt = run(module(main=main), a)
    assert shape == (3, 4) and all(type(d) is int for d in shape)
    assert prim == 7 and type(prim) is int
    assert flt == 1.5 and type(flt) is float
    np.testing.assert_array_equal(reshaped, a.reshape(3, 2))


def test_tuples_and_tuple_get_item():
    x, y = V("x", tensor((2,))), V("y", tensor((2,)))
    t, a, b, nested, inner = V("t"), V("a"), V("b"), V("nested"), V("inner")
    main = func([x, y], [
        B(t, ir.Tuple([x, y])),
        B(a, ir.TupleGetItem(t, 1)),
        B(nested, ir.Tuple([t, ir.Tuple([])])),
        B(inner, ir.TupleGetItem(ir.TupleGetItem(nested, 0), 0)),
        B(b, op("subtract", a, inner)),
    ], ir.Tuple([b, nested]))
    out, nest = run(module(main=main), f32(1, 2), f32(10, 20))
    np.testing.assert_array_equal(out, [9, 18])
    assert isinstance(nest, tuple) and nest[1] == () and len(nest[0]) == 2


def test_tuple_index_out_of_range_is_clear():
    x = V("x", tensor((2,)))
    t, a = V("t"), V("a")
    main = func([x], [B(t, ir.Tuple([x])), B(a, ir.TupleGetItem(t, 3))], a)
    with pytest.raises(InterpError, match="index 3 out of range.*binding 'a'|binding 'a'.*index 3"):
        run(module(main=main), f32(1, 2))


# ---------------------------------------------------------------------------
# Argument checking and match_cast
# ---------------------------------------------------------------------------


def _identity_module(sinfo):
    x = V("x", sinfo)
    return module(main=func([x], [], x))


def test_wrong_argument_count():
    mod = _identity_module(tensor((2,)))
    with pytest.raises(InterpError, match="function 'main' takes 1 argument, got 2"):
        run(mod, f32(1, 2), f32(1, 2))


@pytest.mark.parametrize("value, reason", [
    (np.zeros(2, "float64"), "dtype is float64, expected float32"),
    (np.zeros((2, 1), "float32"), "ndim is 2, expected 1"),
    (np.zeros(3, "float32"), "dimension 0 is 3, expected 2"),
    ((1, 2), "not a tensor"),
])
def test_parameter_struct_info_is_checked(value, reason):
    mod = _identity_module(tensor((2,)))
    with pytest.raises(InterpError) as info:
        run(mod, value)
    msg = str(info.value)
    assert "function 'main', parameter 'x'" in msg
    assert 'R.Tensor((2,), dtype="float32")' in msg and reason in msg


def test_symbolic_dims_must_agree_across_parameters():
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((n, n)))
    mod = module(main=func([x, y], [], y))
    out = run(mod, f32(1, 2), np.zeros((2, 2), "float32"))
    assert out.shape == (2, 2)
    with pytest.raises(InterpError, match="parameter 'y'.*dimension 1 is 3, but n = 2"):
        run(mod, f32(1, 2), np.zeros((2, 3), "float32"))


def test_compound_dimension_is_checked_after_binding():
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n * 2,))), V("y", tensor((n,)))
    mod = module(main=func([y, x], [], x))  # y binds n, x checks 2n
    run(mod, f32(1), f32(1, 2))
    with pytest.raises(InterpError, match=r"expected \(n \* 2\) = 2"):
        run(mod, f32(1), f32(1, 2, 3))


def test_shape_tuple_prim_object_and_callable_params():
    n = tir.Var("n", "int64")
    s = V("s", ir.ShapeStructInfo([n, 2]))
    p = V("p", ir.PrimStructInfo("int64"))
    t = V("t", ir.TupleStructInfo([tensor((n,)), ir.ObjectStructInfo()]))
    r = V("r")
    mod = module(main=func([s, p, t], [B(r, ir.PrimValue(n))], r))
    assert run(mod, (5, 2), 3, (np.zeros(5, "float32"), "anything")) == 5
    with pytest.raises(InterpError, match="parameter 's'.*value 1 is 3, expected 2"):
        run(mod, (5, 3), 3, (np.zeros(5, "float32"), None))
    with pytest.raises(InterpError, match="parameter 'p'.*not an integer"):
        run(mod, (5, 2), 3.5, (np.zeros(5, "float32"), None))
    with pytest.raises(InterpError, match="parameter 't'.*field 0: dimension 0 is 4, but n = 5"):
        run(mod, (5, 2), 3, (np.zeros(4, "float32"), None))
    with pytest.raises(InterpError, match="parameter 't'.*has 1 fields, expected 2"):
        run(mod, (5, 2), 3, (np.zeros(5, "float32"),))
    f = V("f", ir.FuncStructInfo(None, ir.ObjectStructInfo()))
    with pytest.raises(InterpError, match="parameter 'f'.*not a function"):
        run(module(main=func([f], [], f)), 3)


def test_match_cast_binds_and_checks():
    x = V("x", tensor(None, "float32"))
    n = tir.Var("n", "int64")
    y, s = V("y", tensor((n, 2))), V("s")
    main = func([x], [ir.MatchCast(y, x, tensor((n, 2))), B(s, ir.ShapeExpr([n]))],
                ir.Tuple([y, s]))
    mod = module(main=main)
    out, shape = run(mod, np.zeros((4, 2), "float32"))
    assert shape == (4,)
    with pytest.raises(InterpError) as info:
        run(mod, np.zeros((4, 3), "float32"))
    msg = str(info.value)
    assert "function 'main', binding 'y'" in msg and "match_cast" in msg
    assert "dimension 1 is 3, expected 2" in msg


def test_unbound_symbolic_variable_is_clear():
    n = tir.Var("n", "int64")
    x, s = V("x", tensor((2,))), V("s")
    mod = module(main=func([x], [B(s, ir.ShapeExpr([n]))], s))
    with pytest.raises(InterpError, match="symbolic variable n is not bound"):
        run(mod, f32(1, 2))


# ---------------------------------------------------------------------------
# Control flow, functions, closures, recursion
# ---------------------------------------------------------------------------


def _abs_module(cond_from_prim=False):
    x = V("x", tensor((), "float32"))
    c, r, neg = V("c"), V("r"), V("neg")
    cond = (ir.PrimValue(tir.IntImm(1, "bool")) if cond_from_prim else c)
    then = seq([B(neg, op("negative", x))], neg)
    other = seq([], x)
    main = func([x], [B(c, op("less", x, ir.Constant(np.float32(0)))),
                      B(r, ir.If(cond, then, other))], r)
    return module(main=main)


def test_if_with_tensor_condition():
    mod = _abs_module()
    assert run(mod, np.float32(-3)) == 3
    assert run(mod, np.float32(4)) == 4


def test_if_with_prim_value_condition():
    assert run(_abs_module(cond_from_prim=True), np.float32(4)) == -4


def test_if_condition_must_be_scalar():
    x = V("x", tensor((2,), "bool"))
    r = V("r")
    main = func([x], [B(r, ir.If(x, seq([], x), seq([], x)))], r)
    with pytest.raises(InterpError, match="If condition must be a scalar"):
        run(module(main=main), np.array([True, False]))


def _factorial_global():
    """fact(n) = n <= 1 ? 1 : n * fact(n - 1), over an int64 scalar tensor."""
    n = V("n", tensor((), "int64"))
    one = ir.Constant(np.int64(1))
    c, r, m, rec, prod = V("c"), V("r"), V("m"), V("rec"), V("prod")
    then = seq([], one)
    other = seq([B(m, op("subtract", n, one)), B(rec, ir.Call(ir.GlobalVar("fact"), [m])),
                 B(prod, op("multiply", n, rec))], prod)
    return func([n], [B(c, op("less_equal", n, one)), B(r, ir.If(c, then, other))], r)


def test_global_recursion():
    mod = module(fact=_factorial_global())
    assert int(run(mod, np.int64(10), entry="fact")) == 3628800


def test_deep_recursion_does_not_hit_python_limit():
    # sum(n) = n <= 0 ? 0 : n + sum(n - 1), 5000 deep
    n = V("n", tensor((), "int64"))
    zero, one = ir.Constant(np.int64(0)), ir.Constant(np.int64(1))
    c, r, m, rec, s = V("c"), V("r"), V("m"), V("rec"), V("s")
    other = seq([B(m, op("subtract", n, one)), B(rec, ir.Call(ir.GlobalVar("sum"), [m])),
                 B(s, op("add", n, rec))], s)
    f = func([n], [B(c, op("less_equal", n, zero)), B(r, ir.If(c, seq([], zero), other))], r)
    assert int(run(module(sum=f), np.int64(5000), entry="sum")) == 5000 * 5001 // 2


def test_runaway_recursion_is_an_error_not_a_hang():
    # loop(x) = loop(x) + 1: never returns, and its call is not in tail
    # position (a tail call would reuse the frame and loop forever, like a
    # `while True`)
    x = V("x", tensor((), "int64"))
    r, s = V("r"), V("s")
    loop = func([x], [B(r, ir.Call(ir.GlobalVar("loop"), [x])),
                      B(s, op("add", r, ir.Constant(np.int64(1))))], s)
    with pytest.raises(InterpError, match="call depth exceeded 300 calling 'loop'") as err:
        run(module(loop=loop), np.int64(1), entry="loop", max_call_depth=300)
    assert "Interpreter(..., max_call_depth=N)" in str(err.value)


def test_mutual_recursion_between_globals():
    def parity(name, other, base):
        n = V("n", tensor((), "int64"))
        zero, one = ir.Constant(np.int64(0)), ir.Constant(np.int64(1))
        c, r, m, rec = V("c"), V("r"), V("m"), V("rec")
        rest = seq([B(m, op("subtract", n, one)), B(rec, ir.Call(ir.GlobalVar(other), [m]))], rec)
        return func([n], [B(c, op("equal", n, zero)),
                          B(r, ir.If(c, seq([], ir.Constant(np.bool_(base))), rest))], r)

    mod = module(even=parity("even", "odd", True), odd=parity("odd", "even", False))
    assert bool(run(mod, np.int64(7), entry="odd")) is True
    assert bool(run(mod, np.int64(7), entry="even")) is False


def test_nested_closure_captures_several_variables():
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((n,)))
    z = V("z", tensor((n,)))
    inner_sum, inner_out, s = V("t"), V("u"), V("s")
    # inner(z) = (z + x) * y, and returns also the captured symbolic n as a shape
    inner = func([z], [B(inner_sum, op("add", z, x)), B(inner_out, op("multiply", inner_sum, y)),
                       B(s, ir.ShapeExpr([n]))], ir.Tuple([inner_out, s]))
    f, r1, r2 = V("inner"), V("r1"), V("r2")
    main = func([x, y], [B(f, inner), B(r1, ir.Call(f, [y])), B(r2, ir.Call(f, [x]))],
                ir.Tuple([r1, r2]))
    (a, sa), (b, sb) = run(module(main=main), f32(1, 2), f32(3, 4))
    np.testing.assert_array_equal(a, [(3 + 1) * 3, (4 + 2) * 4])
    np.testing.assert_array_equal(b, [(1 + 1) * 3, (2 + 2) * 4])
    assert sa == sb == (2,)


def test_local_recursive_function():
    # def main(x): def fact(k): ... fact(k - 1) ...; return fact(x)
    k = V("k", tensor((), "int64"))
    one = ir.Constant(np.int64(1))
    fact = V("fact")
    c, r, m, rec, prod = V("c"), V("r"), V("m"), V("rec"), V("prod")
    other = seq([B(m, op("subtract", k, one)), B(rec, ir.Call(fact, [m])),
                 B(prod, op("multiply", k, rec))], prod)
    inner = func([k], [B(c, op("less_equal", k, one)), B(r, ir.If(c, seq([], one), other))], r)
    x, out = V("x", tensor((), "int64")), V("out")
    main = func([x], [B(fact, inner), B(out, ir.Call(fact, [x]))], out)
    assert int(run(module(main=main), np.int64(6))) == 720


def test_closure_returned_as_value_and_called_later():
    # make_adder(x) returns a function capturing x; main applies it
    x = V("x", tensor((2,)))
    z, s, adder = V("z", tensor((2,))), V("s"), V("adder")
    make_adder = func([x], [B(adder, func([z], [B(s, op("add", z, x))], s))], adder)
    a, fn, out = V("a", tensor((2,))), V("fn"), V("out")
    main = func([a], [B(fn, ir.Call(ir.GlobalVar("make_adder"), [a])),
                      B(out, ir.Call(fn, [a]))], out)
    mod = module(main=main, make_adder=make_adder)
    np.testing.assert_array_equal(run(mod, f32(1, 2)), [2, 4])
    closure = run(mod, f32(5, 6), entry="make_adder")
    np.testing.assert_array_equal(closure(f32(1, 1)), [6, 7])  # callable from Python


def test_global_function_as_value():
    x = V("x", tensor((2,)))
    d = V("d")
    double = func([x], [B(d, op("add", x, x))], d)
    g = V("g", ir.FuncStructInfo(None, ir.ObjectStructInfo()))
    a, r = V("a", tensor((2,))), V("r")
    apply_ = func([g, a], [B(r, ir.Call(g, [a]))], r)
    b, fn, out = V("b", tensor((2,))), V("fn"), V("out")
    main = func([b], [B(fn, ir.GlobalVar("double")),
                      B(out, ir.Call(ir.GlobalVar("apply"), [fn, b]))], out)
    mod = module(main=main, double=double, apply=apply_)
    np.testing.assert_array_equal(run(mod, f32(1, 2)), [2, 4])


def test_make_closure_and_invoke_closure_pass_captured_last():
    # lifted(x, c0, c1) = (x - c0) * c1 (captured parameters last, as TVM)
    x, c0, c1 = V("x", tensor((2,))), V("c0", tensor((2,))), V("c1", tensor((2,)))
    d, m = V("d"), V("m")
    lifted = func([x, c0, c1], [B(d, op("subtract", x, c0)), B(m, op("multiply", d, c1))], m)
    a, b = V("a", tensor((2,))), V("b", tensor((2,)))
    clo, r1, r2 = V("clo"), V("r1"), V("r2")
    main = func([a, b], [
        B(clo, op("make_closure", ir.GlobalVar("lifted"), ir.Tuple([a, b]))),
        B(r1, op("invoke_closure", clo, ir.Tuple([b]), sinfo_args=(tensor((2,)),))),
        B(r2, op("invoke_pure_closure", clo, ir.Tuple([a]), sinfo_args=(tensor((2,)),))),
    ], ir.Tuple([r1, r2]), pure=False)
    mod = module("optimization", main=main, lifted=lifted)
    r1v, r2v = run(mod, f32(1, 2), f32(10, 20))
    np.testing.assert_array_equal(r1v, [(10 - 1) * 10, (20 - 2) * 20])
    np.testing.assert_array_equal(r2v, [0, 0])


def test_invoke_closure_with_wrong_arity():
    x, c0 = V("x", tensor((2,))), V("c0", tensor((2,)))
    lifted = func([x, c0], [], x)
    a, clo, r = V("a", tensor((2,))), V("clo"), V("r")
    main = func([a], [B(clo, op("make_closure", ir.GlobalVar("lifted"), ir.Tuple([a]))),
                      B(r, op("invoke_closure", clo, ir.Tuple([a, a])))], r, pure=False)
    with pytest.raises(InterpError, match="'lifted' takes 1 argument, got 2"):
        run(module(main=main, lifted=lifted), f32(1, 2))


# ---------------------------------------------------------------------------
# Packed functions
# ---------------------------------------------------------------------------


def test_call_packed_and_call_pure_packed(packed_funcs):
    packed_funcs("test.interp.scale", lambda x, k: x * k)
    packed_funcs("test.interp.count", lambda *args: len(args))
    x, a, b = V("x", tensor((2,))), V("a"), V("b")
    main = func([x], [
        B(a, packed("test.interp.scale", x, ir.PrimValue(3))),
        B(b, op("call_pure_packed", ir.ExternFunc("test.interp.count"), a, x, ir.StringImm("s"),
                sinfo_args=(ir.PrimStructInfo("int64"),))),
    ], ir.Tuple([a, b]), pure=False)
    out, count = run(module(main=main), f32(1, 2))
    np.testing.assert_array_equal(out, [3, 6])
    assert count == 3


def test_packed_function_receives_and_calls_a_closure(packed_funcs):
    packed_funcs("test.interp.twice", lambda f, x: f(f(x)))
    z, s = V("z", tensor((2,))), V("s")
    x, inc, r = V("x", tensor((2,))), V("inc"), V("r")
    one = ir.Constant(np.ones(2, "float32"))
    main = func([x], [B(inc, func([z], [B(s, op("add", z, one))], s)),
                      B(r, packed("test.interp.twice", inc, x))], r, pure=False)
    np.testing.assert_array_equal(run(module(main=main), f32(1, 2)), [3, 4])


def test_packed_scalar_results_become_tensors(packed_funcs):
    packed_funcs("test.interp.sum", lambda x: x.sum())  # numpy returns a numpy scalar
    x, r = V("x", tensor((3,))), V("r")
    out = run(module(main=func([x], [B(r, packed("test.interp.sum", x))], r, pure=False)),
              f32(1, 2, 3))
    assert isinstance(out, np.ndarray) and out.shape == () and out == 6


def test_unknown_packed_function_is_clear():
    x, r = V("x", tensor((2,))), V("r")
    mod = module(main=func([x], [B(r, packed("test.interp.nope", x))], r, pure=False))
    with pytest.raises(InterpError, match="binding 'r'.*no packed function named 'test.interp.nope'"):
        run(mod, f32(1, 2))


def test_packed_function_exception_is_wrapped(packed_funcs):
    def boom(x):
        raise ValueError("bad input")

    packed_funcs("test.interp.boom", boom)
    x, r = V("x", tensor((2,))), V("r")
    mod = module(main=func([x], [B(r, packed("test.interp.boom", x))], r, pure=False))
    with pytest.raises(InterpError, match="'test.interp.boom' raised ValueError: bad input") as info:
        run(mod, f32(1, 2))
    assert isinstance(info.value.__cause__, ValueError)


def test_call_dps_packed_allocates_outputs(packed_funcs):
    def dps(x, out0, out1):
        out0[...] = x + 1
        out1[...] = x.shape[0]

    packed_funcs("test.interp.dps", dps)
    n = tir.Var("n", "int64")
    x, r = V("x", tensor((n,))), V("r")
    call = op("call_dps_packed", ir.ExternFunc("test.interp.dps"), ir.Tuple([x]),
              sinfo_args=(ir.TupleStructInfo([tensor((n,)), tensor((n,), "int32")]),))
    a, b = run(module("lowering", main=func([x], [B(r, call)], r)), f32(1, 2, 3))
    np.testing.assert_array_equal(a, [2, 3, 4])
    assert b.dtype == np.int32 and list(b) == [3, 3, 3]


# ---------------------------------------------------------------------------
# PrimFuncs: call_tir, direct calls, memory builtins
# ---------------------------------------------------------------------------


def test_call_tir_with_symbolic_output_shape():
    n = tir.Var("n", "int64")
    x, y, r = V("x", tensor((n,))), V("y", tensor((n,))), V("r")
    call = op("call_tir", ir.GlobalVar("vadd"), ir.Tuple([x, y]), sinfo_args=(tensor((n,)),))
    mod = module("lowering", main=func([x, y], [B(r, call)], r), vadd=vector_add_kernel())
    np.testing.assert_array_equal(run(mod, f32(1, 2, 3), f32(4, 5, 6)), [5, 7, 9])


def test_call_tir_with_tuple_output_and_tir_vars():
    n = tir.Var("n", "int64")
    x, r = V("x", tensor((n,))), V("r")
    call = op("call_tir", ir.GlobalVar("scale"), ir.Tuple([x]), ir.ShapeExpr([n + 1]),
              sinfo_args=(ir.TupleStructInfo([tensor((n,)), tensor((n,), "int64")]),))
    mod = module("lowering", main=func([x], [B(r, call)], r), scale=scale_kernel())
    out, idx = run(mod, f32(1, 2, 3))
    np.testing.assert_array_equal(out, [4, 8, 12])
    np.testing.assert_array_equal(idx, [0, 1, 2])


def test_kernel_failure_names_kernel():
    x, r = V("x", tensor((3,))), V("r")
    call = op("call_tir", ir.GlobalVar("vadd"), ir.Tuple([x]), sinfo_args=(tensor((3,)),))
    mod = module("lowering", main=func([x], [B(r, call)], r), vadd=vector_add_kernel())
    with pytest.raises(InterpError, match="'vadd' takes 3 arguments"):
        run(mod, f32(1, 2, 3))


def test_build_phase_form_with_vm_builtins_and_direct_kernel_call():
    # phase 3: explicit storage, a tensor view, a direct DPS kernel call, kill
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((n,)))
    st, out, call_res, k1, k2 = V("st"), V("out", tensor((n,))), V("_"), V("_1"), V("t")
    main = func([x, y], [
        B(st, op("vm.alloc_storage", ir.ShapeExpr([n * 4 + 64]), dtype="uint8")),
        B(out, op("vm.alloc_tensor", st, ir.PrimValue(64), ir.ShapeExpr([n]), dtype="float32")),
        B(call_res, ir.Call(ir.GlobalVar("vadd"), [x, y, out])),
        B(k1, op("vm.kill_object", st)),
        B(k2, op("builtin.alloc_tensor", ir.ShapeExpr([n, 2]), dtype="int32")),
    ], ir.Tuple([out, call_res, k2]), pure=False)
    mod = module("build", main=main, vadd=vector_add_kernel())
    res, unit, empty = run(mod, f32(1, 2), f32(3, 4))
    np.testing.assert_array_equal(res, [4, 6])
    assert unit == () and empty.shape == (2, 2) and empty.dtype == np.int32


def test_memory_builtins_of_the_lowering_phase():
    x = V("x", tensor((4,)))
    st, t, r, k = V("st"), V("t", tensor((4,))), V("r"), V("k")
    main = func([x], [
        B(st, op("memory.alloc_storage", ir.ShapeExpr([16]), virtual_device_index=0,
                 storage_scope="global", dtype="float32")),
        B(t, op("memory.alloc_tensor", st, ir.PrimValue(0), ir.ShapeExpr([4]), dtype="float32")),
        B(r, ir.Call(ir.GlobalVar("vadd"), [x, x, t])),
        B(k, op("memory.kill_storage", st)),
    ], t, pure=False)
    mod = module("lowering", main=main, vadd=vector_add_kernel())
    np.testing.assert_array_equal(run(mod, f32(1, 2, 3, 4)), [2, 4, 6, 8])


def test_alloc_tensor_out_of_storage_bounds():
    st, t = V("st"), V("t")
    main = func([], [
        B(st, op("vm.alloc_storage", ir.ShapeExpr([8]), dtype="uint8")),
        B(t, op("vm.alloc_tensor", st, ir.PrimValue(4), ir.ShapeExpr([4]), dtype="float32")),
    ], t, pure=False)
    with pytest.raises(InterpError, match="16 bytes at offset 4 does not fit in storage of 8"):
        run(module("build", main=main))


def test_entry_can_be_a_prim_func():
    a, b, c = f32(1, 2), f32(3, 4), np.zeros(2, "float32")
    assert run(module("lowering", vadd=vector_add_kernel()), a, b, c, entry="vadd") == ()
    np.testing.assert_array_equal(c, [4, 6])


# ---------------------------------------------------------------------------
# Errors, sizes, helpers
# ---------------------------------------------------------------------------


def test_unknown_entry_lists_functions():
    mod = _identity_module(tensor((2,)))
    with pytest.raises(InterpError, match="no function 'mian'; its Relax functions: main"):
        run(mod, f32(1, 2), entry="mian")


def test_operator_failure_names_operator_and_binding():
    x, y, r = V("x", tensor((2,))), V("y", tensor((3,))), V("r")
    mod = module(main=func([x, y], [B(r, op("add", x, y))], r))
    with pytest.raises(InterpError) as info:
        run(mod, f32(1, 2), f32(1, 2, 3))
    msg = str(info.value)
    assert "function 'main', binding 'r'" in msg and "'relax.add' failed" in msg


def test_use_before_definition():
    x, ghost, r = V("x", tensor((2,))), V("ghost"), V("r")
    mod = module(main=func([x], [B(r, op("add", x, ghost))], r))
    with pytest.raises(InterpError, match="'ghost' is used before it is defined"):
        run(mod, f32(1, 2))


def test_long_program_is_iterative():
    x = V("x", tensor((2,)))
    bindings, prev = [], x
    for i in range(100_000):
        v = V(f"v{i}")
        bindings.append(B(v, prev))
        prev = v
    mod = module(main=func([x], bindings, prev))
    np.testing.assert_array_equal(run(mod, f32(1, 2)), [1, 2])


def test_evaluate_expr_folds_a_constant_call():
    a = ir.Constant(f32(1, 2))
    b = ir.Constant(f32(3, 4))
    np.testing.assert_array_equal(evaluate_expr(op("add", a, b)), [4, 6])
    x = V("x")
    np.testing.assert_array_equal(evaluate_expr(op("multiply", x, a), bindings={x: f32(2, 2)}),
                                  [2, 4])


def test_results_are_numpy_not_numpy_scalars():
    x, r = V("x", tensor((), "float32")), V("r")
    out = run(module(main=func([x], [B(r, op("add", x, x))], r)), np.float32(1.5))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out == 3


# ---------------------------------------------------------------------------
# A module written in TVMScript (ingestion phase: nested functions, dataflow)
# ---------------------------------------------------------------------------

SCRIPT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def inner(z: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            s = R.add(z, x)
            t = R.multiply(s, y)
            return t

        a = inner(y)
        with R.dataflow():
            b = R.maximum(a, R.const(10.0, "float32"))
            gv = R.subtract(b, x)
            R.output(gv)
        return gv
'''


def test_tvmscript_module_with_closure_and_dataflow():
    mod = phasec.parse(SCRIPT)
    x, y = f32(1, 2, 3), f32(1, 2, 4)
    expected = np.maximum((y + x) * y, 10) - x
    np.testing.assert_allclose(run(mod, x, y), expected)
