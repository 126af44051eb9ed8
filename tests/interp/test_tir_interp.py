"""The exact TIR interpreter (phasec.interp.tir): node semantics, argument
binding and checking, errors, and deep programs."""

import numpy as np
import pytest

from phasec.errors import VMError
from phasec.interp.tir import TIRExecutionError, eval_prim_expr, run_prim_func
from phasec.ir import tir as T

i64 = lambda v: T.IntImm(v, "int64")  # noqa: E731
f32 = lambda v: T.FloatImm(v, "float32")  # noqa: E731


def binop(op, a, b):
    return T.BinaryOp(op, a, b)


def elementwise(fn, dtype="float32", out_dtype=None, n=4):
    """A 1-D kernel B[i] = fn(A[i]) over a static extent."""
    A = T.Buffer("A", (n,), dtype)
    B = T.Buffer("B", (n,), out_dtype or dtype)
    i = T.Var("i")
    return T.PrimFunc((A, B), T.For(i, 0, n, "serial", T.BufferStore(B, fn(A[i]), (i,))))


def run1(func, a, out_dtype=None):
    out = np.zeros(a.shape, out_dtype or a.dtype)
    run_prim_func(func, [a, out])
    return out


# ---------------------------------------------------------------------------
# scalar semantics
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (6, 3)])
def test_integer_division_semantics(a, b):
    x, y = T.Var("x"), T.Var("y")
    env = {x: a, y: b}
    assert eval_prim_expr(binop("//", x, y), env) == a // b       # floordiv
    assert eval_prim_expr(binop("%", x, y), env) == a % b         # floormod
    trunc = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    assert eval_prim_expr(binop("/", x, y), env) == trunc         # TIR Div truncates


def test_integer_division_by_zero_is_an_error():
    x = T.Var("x")
    with pytest.raises(TIRExecutionError, match="division by zero"):
        eval_prim_expr(binop("//", x, i64(0)), {x: 3})


def test_integers_wrap_to_their_dtype():
    x = T.Var("x", "int8")
    assert eval_prim_expr(binop("+", x, T.IntImm(100, "int8")), {x: 100}) == -56
    u = T.Var("u", "uint8")
    assert eval_prim_expr(binop("-", u, T.IntImm(1, "uint8")), {u: 0}) == 255
    assert eval_prim_expr(T.Cast("int8", T.IntImm(300, "int64"))) == 44


def test_float32_math_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(64).astype("float32")
    f = elementwise(lambda v: T.Call("exp", (binop("*", v, f32(0.3)),)) / (v * v + f32(1.0)), n=64)
    expected = np.exp(a * np.float32(0.3)) / (a * a + np.float32(1.0))
    assert expected.dtype == np.float32
    np.testing.assert_array_equal(run1(f, a), expected)


@pytest.mark.parametrize("name,ref", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("tanh", np.tanh),
    ("fabs", np.abs), ("floor", np.floor), ("ceil", np.ceil), ("round", np.rint),
    ("trunc", np.trunc), ("sin", np.sin), ("cos", np.cos), ("exp2", np.exp2),
    ("log2", np.log2), ("rsqrt", lambda x: np.float32(1) / np.sqrt(x)),
    ("sigmoid", lambda x: np.float32(1) / (np.float32(1) + np.exp(-x))),
])
def test_intrinsics(name, ref):
    a = np.array([0.5, 1.5, 2.5, 3.75], "float32")  # .5 cases check round-half-even
    f = elementwise(lambda v: T.Call(name, (v,)))
    np.testing.assert_array_equal(run1(f, a), ref(a).astype("float32"))


def test_erf_and_isnan():
    import math
    a = np.array([-1.0, 0.0, 0.3, np.nan], "float32")
    got = run1(elementwise(lambda v: T.Call("erf", (v,))), a)
    np.testing.assert_allclose(got[:3], [math.erf(float(v)) for v in a[:3]], rtol=1e-7)
    isnan = run1(elementwise(lambda v: T.Call("isnan", (v,)), out_dtype="bool"), a, "bool")
    assert isnan.tolist() == [False, False, False, True]


def test_float_floordiv_floormod_min_max_pow():
    a = np.array([-7.5, 7.5, -1.0, 2.0], "float32")
    b = np.float32(2.0)
    cases = [("//", np.floor_divide), ("%", np.remainder), ("min", np.minimum),
             ("max", np.maximum), ("pow", np.power)]
    for op, ref in cases:
        got = run1(elementwise(lambda v: binop(op, v, f32(2.0))), a)
        np.testing.assert_array_equal(got, ref(a, b))
    nan = np.array([np.nan, 1, 2, 3], "float32")
    assert np.isnan(run1(elementwise(lambda v: binop("max", v, f32(0.0))), nan)[0])


def test_casts():
    a = np.array([-2.7, -0.5, 0.0, 3.9], "float32")
    got = run1(elementwise(lambda v: T.Cast("int32", v), out_dtype="int32"), a, "int32")
    assert got.tolist() == a.astype("int32").tolist()  # truncation toward zero
    got = run1(elementwise(lambda v: T.Cast("bool", v), out_dtype="bool"), a, "bool")
    assert got.tolist() == [True, True, False, True]
    x = T.Var("x")
    assert eval_prim_expr(T.Cast("float32", x), {x: 3}) == np.float32(3.0)


def test_comparisons_and_logic():
    x, y = T.Var("x"), T.Var("y")
    e = T.BinaryOp("or", binop("<", x, y), T.Not(binop("==", x, i64(3))))
    assert eval_prim_expr(e, {x: 3, y: 1}) is False
    assert eval_prim_expr(e, {x: 0, y: 1}) is True
    assert eval_prim_expr(binop(">=", x, y), {x: 2, y: 2}) is True


def test_select_and_logic_are_lazy():
    # The untaken operand reads out of bounds: it must never be evaluated.
    A = T.Buffer("A", (4,), "float32")
    B = T.Buffer("B", (4,), "float32")
    i = T.Var("i")
    guarded = T.Select(binop(">", i, i64(0)), A[binop("-", i, i64(1))], f32(0.0))
    cond = T.BinaryOp("and", binop("<", i, i64(3)), binop(">", A[binop("+", i, i64(1))], f32(0.0)))
    body = T.BufferStore(B, T.Select(cond, guarded, f32(-1.0)), (i,))
    func = T.PrimFunc((A, B), T.For(i, 0, 4, "serial", body))
    a = np.array([1, 2, -3, 4], "float32")
    out = np.zeros(4, "float32")
    run_prim_func(func, [a, out])
    assert out.tolist() == [0.0, -1.0, 2.0, -1.0]


# ---------------------------------------------------------------------------
# statements
# ---------------------------------------------------------------------------

def test_block_init_runs_at_first_reduce_iteration():
    # C[i] = sum_j A[i, j] with the init inside the block (TVM form), and a
    # reduce axis bound to k + 0 so the init condition is "bound value == 0".
    A = T.Buffer("A", (3, 4), "float32")
    C = T.Buffer("C", (3,), "float32")
    i, k = T.Var("i"), T.Var("k")
    vi, vk = T.Var("vi"), T.Var("vk")
    block = T.Block("C", (T.IterVar(vi, i64(3), "S"), T.IterVar(vk, i64(4), "R")), (i, k),
                    T.BufferStore(C, binop("+", C[vi], A[vi, vk]), (vi,)),
                    init=T.BufferStore(C, f32(0.0), (vi,)))
    func = T.PrimFunc((A, C), T.For(i, 0, 3, "parallel", T.For(k, 0, 4, "serial", block)))
    a = np.arange(12, dtype="float32").reshape(3, 4)
    c = np.full(3, 99.0, "float32")  # garbage: the init must overwrite it
    run_prim_func(func, [a, c])
    np.testing.assert_array_equal(c, a.sum(1))


def test_block_binding_out_of_range_is_an_error():
    B = T.Buffer("B", (4,), "float32")
    i, vi = T.Var("i"), T.Var("vi")
    block = T.Block("B", (T.IterVar(vi, i64(2), "S"),), (i,), T.BufferStore(B, f32(1.0), (vi,)))
    func = T.PrimFunc((B,), T.For(i, 0, 4, "serial", block))
    with pytest.raises(TIRExecutionError, match="block B: axis vi is bound to 2"):
        run_prim_func(func, [np.zeros(4, "float32")])


def test_let_allocate_if_evaluate_and_loop_kinds():
    A = T.Buffer("A", (6,), "float32")
    B = T.Buffer("B", (6,), "float32")
    tmp = T.Buffer("tmp", (6,), "float32")
    i, j = T.Var("i"), T.Var("j")
    t = T.Var("t", "float32")
    fill = T.For(i, 0, 6, "vectorized",
                 T.LetStmt(t, binop("*", A[i], f32(2.0)), T.BufferStore(tmp, t, (i,))))
    copy = T.For(j, 0, 6, "unroll", T.SeqStmt([
        T.Evaluate(i64(0)),
        T.IfThenElse(binop("<", j, i64(3)), T.BufferStore(B, tmp[j], (j,)),
                     T.BufferStore(B, binop("+", tmp[j], f32(1.0)), (j,)))]))
    func = T.PrimFunc((A, B), T.Allocate(tmp, T.SeqStmt([fill, copy])))
    a = np.arange(6, dtype="float32")
    out = np.zeros(6, "float32")
    run_prim_func(func, [a, out])
    assert out.tolist() == [0, 2, 4, 7, 9, 11]


def test_allocated_float_buffers_start_as_nan():
    B = T.Buffer("B", (2,), "float32")
    tmp = T.Buffer("tmp", (2,), "float32")
    i = T.Var("i")
    func = T.PrimFunc((B,), T.Allocate(tmp, T.For(i, 0, 2, "serial",
                                                  T.BufferStore(B, tmp[i], (i,)))))
    out = np.zeros(2, "float32")
    run_prim_func(func, [out])
    assert np.isnan(out).all()


def test_loop_with_nonzero_min():
    B = T.Buffer("B", (5,), "int64")
    i = T.Var("i")
    func = T.PrimFunc((B,), T.For(i, 2, 3, "serial", T.BufferStore(B, binop("*", i, i), (i,))))
    out = np.zeros(5, "int64")
    run_prim_func(func, [out])
    assert out.tolist() == [0, 0, 4, 9, 16]


# ---------------------------------------------------------------------------
# parameters: symbolic shapes, scalars, checks
# ---------------------------------------------------------------------------

def _copy_plus_n():
    """B[i, j] = A[i, j] + n over A: (n, m) with a scalar param s for 2*n."""
    n, m, s = T.Var("n"), T.Var("m"), T.Var("s")
    A = T.Buffer("A", (n, m), "float32")
    B = T.Buffer("B", (n, m), "float32")
    C = T.Buffer("C", (s,), "int64")
    i, j = T.Var("i"), T.Var("j")
    body = T.SeqStmt([
        T.For(i, 0, n, "serial", T.For(j, 0, m, "serial", T.BufferStore(
            B, binop("+", A[i, j], T.Cast("float32", n)), (i, j)))),
        T.For(i, 0, s, "serial", T.BufferStore(C, binop("*", i, m), (i,)))])
    return T.PrimFunc((A, B, C, s), body)


@pytest.mark.parametrize("shape", [(2, 3), (5, 1)])
def test_symbolic_dims_are_bound_from_arrays(shape):
    func = _copy_plus_n()
    a = np.ones(shape, "float32")
    b = np.zeros(shape, "float32")
    c = np.zeros(4, "int64")
    run_prim_func(func, [a, b, c, 4])
    np.testing.assert_array_equal(b, a + shape[0])
    assert c.tolist() == [k * shape[1] for k in range(4)]


def test_argument_errors_are_clear():
    func = _copy_plus_n()
    a = np.ones((2, 3), "float32")
    with pytest.raises(VMError, match="takes 4 argument"):
        run_prim_func(func, [a])
    with pytest.raises(VMError, match="buffer B\\) has shape \\(3, 3\\).*dimension 0 must be 2"):
        run_prim_func(func, [a, np.zeros((3, 3), "float32"), np.zeros(4, "int64"), 4])
    with pytest.raises(VMError, match="dtype float64, expected float32"):
        run_prim_func(func, [a.astype("float64"), np.zeros((2, 3), "float32"),
                             np.zeros(4, "int64"), 4])
    with pytest.raises(VMError, match="expected 2 dimension"):
        run_prim_func(func, [a.ravel(), np.zeros((2, 3), "float32"), np.zeros(4, "int64"), 4])
    with pytest.raises(VMError, match="must be a numpy array"):
        run_prim_func(func, [[1.0], np.zeros((2, 3), "float32"), np.zeros(4, "int64"), 4])
    with pytest.raises(VMError, match="must be an integer scalar"):
        run_prim_func(func, [a, np.zeros((2, 3), "float32"), np.zeros(4, "int64"), "4"])
    with pytest.raises(VMError, match="dimension 0 must be 5"):  # scalar param checked too
        run_prim_func(func, [a, np.zeros((2, 3), "float32"), np.zeros(4, "int64"), 5])


def test_out_of_bounds_access_is_an_error():
    f = elementwise(lambda v: v)
    body = f.body
    A, B = f.params
    i = body.loop_var
    bad = T.PrimFunc((A, B), T.For(i, 0, 4, "serial",
                                   T.BufferStore(B, A[binop("-", i, i64(1))], (i,))))
    with pytest.raises(TIRExecutionError, match=r"out-of-bounds access A\[-1\]"):
        run_prim_func(bad, [np.zeros(4, "float32"), np.zeros(4, "float32")])


def test_unbound_variable_and_unknown_buffer():
    B = T.Buffer("B", (1,), "int64")
    ghost = T.Buffer("ghost", (1,), "int64")
    v = T.Var("v")
    with pytest.raises(TIRExecutionError, match="variable v is used but not bound"):
        run_prim_func(T.PrimFunc((B,), T.BufferStore(B, v, (i64(0),))), [np.zeros(1, "int64")])
    with pytest.raises(TIRExecutionError, match="buffer ghost"):
        run_prim_func(T.PrimFunc((B,), T.BufferStore(B, ghost[i64(0)], (i64(0),))),
                      [np.zeros(1, "int64")])


def test_read_only_output_is_an_error():
    out = np.zeros(4, "float32")
    out.setflags(write=False)
    with pytest.raises(TIRExecutionError, match="cannot write buffer B"):
        run_prim_func(elementwise(lambda v: v), [np.zeros(4, "float32"), out])


# ---------------------------------------------------------------------------
# size: deep expressions and long statement lists stay iterative
# ---------------------------------------------------------------------------

def test_deep_expression_and_let_chain_do_not_recurse():
    depth = 5000
    A = T.Buffer("A", (1,), "float32")
    B = T.Buffer("B", (1,), "float32")
    e = A[i64(0)]
    for _ in range(depth):
        e = binop("+", e, f32(1.0))
    vars_ = [T.Var(f"t{k}", "float32") for k in range(depth)]
    stmt = T.BufferStore(B, binop("+", e, vars_[-1]), (i64(0),))
    for k in range(depth - 1, -1, -1):
        stmt = T.LetStmt(vars_[k], f32(1.0) if k == 0 else binop("+", vars_[k - 1], f32(1.0)),
                         stmt)
    out = np.zeros(1, "float32")
    run_prim_func(T.PrimFunc((A, B), stmt), [np.zeros(1, "float32"), out])
    assert out[0] == 2 * depth


def test_long_statement_sequence():
    B = T.Buffer("B", (1,), "int64")
    stmts = [T.BufferStore(B, binop("+", B[i64(0)], i64(1)), (i64(0),)) for _ in range(20000)]
    out = np.zeros(1, "int64")
    run_prim_func(T.PrimFunc((B,), T.SeqStmt(stmts)), [out])
    assert out[0] == 20000


def test_an_out_of_range_index_names_the_kernel_the_module_calls():
    import phasec
    from phasec import interp
    from phasec.errors import PhasecError

    mod = phasec.parse('''
@I.ir_module
class M:
    @T.prim_func
    def pick(A: T.Buffer((4,), "float32"), I: T.Buffer((2,), "int64"), B: T.Buffer((2,), "float32")):
        for i in range(2):
            B[i] = A[I[i]]

    @R.function
    def main(a: R.Tensor((4,), "float32"), idx: R.Tensor((2,), "int64")) -> R.Tensor((2,), "float32"):
        cls = M
        b = R.call_tir(cls.pick, (a, idx), out_sinfo=R.Tensor((2,), "float32"))
        return b
''')
    a = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(interp.run(mod, a, np.array([3, 0])), [3.0, 0.0])
    with pytest.raises(PhasecError, match=r"out-of-bounds access A\[9\] \(shape \(4,\)\) in PrimFunc pick"):
        interp.run(mod, a, np.array([1, 9]))
