"""The tensor-expression layer (phasec.te): building computes, lowering to
PrimFuncs (inlining, anchor + epilogue fusion, schedule hints), symbolic
shapes and error reporting. Kernels are checked with the TIR interpreter."""

import dataclasses

import numpy as np
import pytest

from phasec.interp.tir import run_prim_func
from phasec import te
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

#: the host's tuning, packing B whatever its size (so small tests take that path)
PACK_ALWAYS = dataclasses.replace(host_tuning(), gemm_pack_min_bytes=0)

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def relu(e):
    return T.BinaryOp("max", e, T.FloatImm(0.0))


def walk(stmt):
    """Every statement of a PrimFunc body, pre-order (iterative)."""
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        if s is None:
            continue
        out.append(s)
        if isinstance(s, T.SeqStmt):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, (T.For, T.Allocate, T.LetStmt)):
            stack.append(s.body)
        elif isinstance(s, T.IfThenElse):
            stack.extend([s.else_case, s.then_case])
        elif isinstance(s, T.Block):
            stack.extend([s.body, s.init])
    return out


def stores(func):
    return {s.buffer.name for s in walk(func.body) if isinstance(s, T.BufferStore)}


def loops(func):
    return [s for s in walk(func.body) if isinstance(s, T.For)]


def top_level(func):
    """Statements at the top of the body, under function-level Allocates."""
    body = func.body
    while isinstance(body, T.Allocate):
        body = body.body
    return list(body.stmts) if isinstance(body, T.SeqStmt) else [body]


def run(func, *arrays):
    run_prim_func(func, list(arrays))
    return arrays[-1]


# ---------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------

def test_compute_axes_are_int64_vars_named_after_the_lambda():
    A = te.placeholder((2, 3), "float32", "A")
    B = te.compute((2, 3), lambda row, col: A[row, col] + 1.0, name="B")
    assert [v.name for v in B.op.axes] == ["row", "col"]
    assert all(v.dtype == "int64" for v in B.op.axes)
    assert B.dtype == "float32" and B.ndim == 2 and B.op.inputs == (A,)
    C = te.compute((2, 3), lambda *i: A[i], name="C")
    assert [v.name for v in C.op.axes] == ["i0", "i1"]


def test_te_errors_are_clear():
    A = te.placeholder((2, 3), "float32", "A")
    with pytest.raises(te.TEError, match="has 2 dimension\\(s\\) but is indexed with 1"):
        A[0]
    k = te.reduce_axis(3)
    with pytest.raises(te.TEError, match="must be the whole body"):
        te.compute((2,), lambda i: te.sum(A[i, k], axis=[k]) + 1.0)
    with pytest.raises(te.TEError, match="reduce_axis"):
        te.sum(A[0, 0], axis=[T.IterVar(T.Var("s"), 3, "S")])
    with pytest.raises(te.TEError, match="integer expression"):
        A[0, T.FloatImm(1.0)]
    B = te.compute((2, 3), lambda i, j: A[i, j] * 2.0, name="B")
    with pytest.raises(te.TEError, match="placeholder A is used but not listed"):
        te.create_prim_func([B])
    with pytest.raises(te.TEError, match="no output"):
        te.create_prim_func([A])
    with pytest.raises(te.TEError, match="listed twice"):
        te.create_prim_func([A, B, B])
    with pytest.raises(te.TEError, match="unknown dtype"):
        te.placeholder((2,), "float128")


# ---------------------------------------------------------------------------
# inlining
# ---------------------------------------------------------------------------

def test_elementwise_chain_is_inlined_into_one_loop_nest():
    A = te.placeholder((4, 8), "float32", "A")
    b = te.placeholder((8,), "float32", "b")
    x1 = te.compute((4, 8), lambda i, j: A[i, j] + b[j], name="x1")
    x2 = te.compute((4, 8), lambda i, j: te.call("exp", x1[i, j]), name="x2")
    x3 = te.compute((4, 8), lambda i, j: x2[i, j] * x1[i, j], name="x3")
    func = te.create_prim_func([A, b, x3])
    assert stores(func) == {"x3"}                 # nothing else is written
    assert not any(isinstance(s, T.Allocate) for s in walk(func.body))
    assert len(top_level(func)) == 1 and isinstance(top_level(func)[0], T.For)
    # x1 is used twice: bound once with a LetStmt rather than recomputed
    assert [s.var.name for s in walk(func.body) if isinstance(s, T.LetStmt)][:1] == ["x1"]
    a, bb = rand(4, 8), rand(8)
    out = run(func, a, bb, np.zeros((4, 8), "float32"))
    np.testing.assert_allclose(out, np.exp(a + bb) * (a + bb), rtol=1e-6)


def test_inline_false_materializes_an_intermediate():
    A = te.placeholder((4,), "float32", "A")
    x1 = te.compute((4,), lambda i: A[i] * 2.0, name="x1", inline=False)
    k = te.reduce_axis(4, "k")
    x2 = te.compute((4,), lambda i: te.sum(x1[k] * A[i], axis=[k]), name="x2")
    func = te.create_prim_func([A, x2])
    assert isinstance(func.body, T.Allocate) and func.body.buffer.name == "x1"
    assert {"x1", "x2"} <= stores(func)
    a = rand(4)
    np.testing.assert_allclose(run(func, a, np.zeros(4, "float32")), (2 * a).sum() * a, rtol=1e-5)


def test_deep_inlined_chain_does_not_recurse():
    A = te.placeholder((3,), "float32", "A")
    t = A
    for k in range(3000):
        t = te.compute((3,), lambda i, t=t: t[i] + 0.001, name=f"c{k}")
    func = te.create_prim_func([A, t])
    a = rand(3)
    np.testing.assert_allclose(run(func, a, np.zeros(3, "float32")), a + 3.0, rtol=1e-4)


def test_diamond_graph_stays_linear():
    # x_{k+1} = x_k + x_k: naive inlining would build 2**60 nodes.
    A = te.placeholder((2,), "float32", "A")
    t = A
    for k in range(60):
        t = te.compute((2,), lambda i, t=t: t[i] + t[i], name=f"d{k}")
    func = te.create_prim_func([A, t])
    lets = [s for s in walk(func.body) if isinstance(s, T.LetStmt)]
    assert 55 <= len(lets) <= 61
    a = np.array([1.0, -2.0], "float32")
    np.testing.assert_array_equal(run(func, a, np.zeros(2, "float32")), a * 2.0 ** 60)


# ---------------------------------------------------------------------------
# anchor + epilogue, attached reductions
# ---------------------------------------------------------------------------

def _matmul_relu(M, K, N, batch=None):
    shape_a = (M, K) if batch is None else (batch, M, K)
    X = te.placeholder(shape_a, "float32", "X")
    W = te.placeholder((K, N), "float32", "W")
    bias = te.placeholder((N,), "float32", "bias")
    k = te.reduce_axis(K, "k")
    if batch is None:
        mm = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[k, j], axis=[k]), name="mm",
                        tag="matmul")
        out = te.compute((M, N), lambda i, j: relu(mm[i, j] + bias[j]), name="out")
    else:
        mm = te.compute((batch, M, N), lambda b, i, j: te.sum(X[b, i, k] * W[k, j], axis=[k]),
                        name="mm")
        out = te.compute((batch, M, N), lambda b, i, j: relu(mm[b, i, j] + bias[j]), name="out")
    return X, W, bias, out


@pytest.mark.parametrize("M,K,N,batch", [(8, 5, 12, None), (3, 4, 7, None), (6, 3, 200, None),
                                         (4, 3, 16, 2)])
@pytest.mark.parametrize("hints", [True, False])
def test_matmul_with_epilogue_is_one_nest(M, K, N, batch, hints):
    X, W, bias, out = _matmul_relu(M, K, N, batch)
    func = te.create_prim_func([X, W, bias, out], schedule_hints=hints)
    # mm is never materialized: the only buffers are local accumulators and
    # packed panels of W (the GEMM schedule handles remainder rows and
    # columns with nests of their own beside the main one)
    allocated = {s.buffer.name for s in walk(func.body) if isinstance(s, T.Allocate)}
    assert all(n.startswith(("mm_acc", "mm_bpack", "mm_local")) for n in allocated), allocated
    if not hints:
        assert not isinstance(func.body, T.Allocate) and len(top_level(func)) == 1
    assert "out" in stores(func) and "mm" not in stores(func)
    x = rand(*((M, K) if batch is None else (batch, M, K)))
    w, b = rand(K, N), rand(N)
    got = run(func, x, w, b, np.zeros(((M, N) if batch is None else (batch, M, N)), "float32"))
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)


def test_matmul_schedule_tiles_vectorizes_and_parallelizes():
    X, W, bias, out = _matmul_relu(64, 256, 256)
    func = te.create_prim_func([X, W, bias, out])
    kinds = [f.kind for f in loops(func)]
    assert "parallel" in kinds
    assert "unroll" in kinds and "vectorized" in kinds
    # the reduction loop sits between the tile loops and the register tile:
    # rows and vectors unrolled, one vectorized loop over one vector's lanes
    k_loop = next(f for f in loops(func) if f.loop_var.name == "k")
    inner = loops(T.PrimFunc((), k_loop))
    assert [f.kind for f in inner] == ["serial", "unroll", "unroll", "vectorized"]
    tuning = host_tuning()
    assert [f.extent.value for f in inner[1:]] == [tuning.gemm_rows, tuning.gemm_vectors,
                                                    tuning.lanes(32)]
    # W (256 KiB) stays in L2: read in place. A W too big for that (here: a
    # tuning that packs any W) is packed into contiguous panels once per call.
    def packs(f):
        return [s for s in walk(f.body) if isinstance(s, T.Allocate)
                and s.buffer.name.startswith("mm_bpack")]
    assert not packs(func)
    packing = te.ScheduleOptions(tuning=PACK_ALWAYS)
    assert len(packs(te.create_prim_func([X, W, bias, out], schedule_hints=packing))) == 1
    canon = te.create_prim_func([X, W, bias, out], schedule_hints=False)
    assert {f.kind for f in loops(canon)} == {"serial"}
    assert any(isinstance(s, T.Block) and s.init is not None for s in walk(canon.body))


def test_reduction_alone_accumulates_into_output():
    A = te.placeholder((5, 6), "float32", "A")
    k = te.reduce_axis(6, "k")
    S = te.compute((5,), lambda i: te.sum(A[i, k], axis=[k]), name="S")
    for hints in (True, False):
        func = te.create_prim_func([A, S], schedule_hints=hints)
        assert stores(func) == {"S"}
        a = rand(5, 6)
        np.testing.assert_allclose(run(func, a, np.zeros(5, "float32")), a.sum(1), rtol=1e-5)


def test_full_reduction_to_a_scalar():
    A = te.placeholder((3, 4), "int32", "A")
    k0, k1 = te.reduce_axis(3), te.reduce_axis(4)
    P = te.compute((), lambda: te.max(A[k0, k1], axis=[k0, k1]), name="P")
    func = te.create_prim_func([A, P])
    a = RNG.integers(-50, 50, (3, 4)).astype("int32")
    assert run(func, a, np.zeros((), "int32")) == a.max()


def test_row_reductions_are_computed_inside_the_row_loop():
    # softmax: the max and the sum are per row, attached under the row loop.
    n = T.Var("n")
    A = te.placeholder((n, 16), "float32", "A")
    k1, k2 = te.reduce_axis(16, "k"), te.reduce_axis(16, "k")
    mx = te.compute((n,), lambda i: te.max(A[i, k1], axis=[k1]), name="mx")
    e = te.compute((n, 16), lambda i, j: te.call("exp", A[i, j] - mx[i]), name="e")
    s = te.compute((n,), lambda i: te.sum(e[i, k2], axis=[k2]), name="s")
    out = te.compute((n, 16), lambda i, j: e[i, j] / s[i], name="out")
    func = te.create_prim_func([A, out])
    assert len(top_level(func)) == 1 and not isinstance(func.body, T.Allocate)
    allocs = [s for s in walk(func.body) if isinstance(s, T.Allocate)]
    assert {a.buffer.name for a in allocs} == {"mx_local", "s_local"}
    assert all(int(a.buffer.shape[0].value) == 1 for a in allocs)
    for rows in (1, 5):
        a = rand(rows, 16)
        got = run(func, a, np.zeros((rows, 16), "float32"))
        e_ = np.exp(a - a.max(1, keepdims=True))
        np.testing.assert_allclose(got, e_ / e_.sum(1, keepdims=True), rtol=1e-5)


def test_reduction_over_a_leading_axis_gets_its_own_buffer():
    # x / sum(x, axis=0): attaching the sum under the row loop would recompute it per row.
    A = te.placeholder((4, 6), "float32", "A")
    k = te.reduce_axis(4, "k")
    s = te.compute((6,), lambda j: te.sum(A[k, j], axis=[k]), name="s")
    out = te.compute((4, 6), lambda i, j: A[i, j] / s[j], name="out")
    func = te.create_prim_func([A, out])
    assert isinstance(func.body, T.Allocate) and func.body.buffer.name == "s"
    # s is computed by its own loop nests (its accumulator's scope extends to
    # the end of the list), then out's row loop reads it
    nests = top_level(func)
    blocks = [{b.name for b in walk(n) if isinstance(b, T.Block)} for n in nests]
    assert blocks[-1] == {"out"} and all("out" not in b for b in blocks[:-1])
    assert len(nests) >= 2
    a = rand(4, 6)
    got = run(func, a, np.zeros((4, 6), "float32"))
    np.testing.assert_allclose(got, a / a.sum(0), rtol=1e-5)


def test_several_outputs_and_an_output_read_by_another():
    A = te.placeholder((3, 4), "float32", "A")
    k = te.reduce_axis(4, "k")
    s = te.compute((3,), lambda i: te.sum(A[i, k], axis=[k]), name="s")
    norm = te.compute((3, 4), lambda i, j: A[i, j] / s[i], name="norm")
    func = te.create_prim_func([A, s, norm])
    assert [p.name for p in func.params] == ["A", "s", "norm"]
    a = rand(3, 4)
    out_s, out_n = np.zeros(3, "float32"), np.zeros((3, 4), "float32")
    run_prim_func(func, [a, out_s, out_n])
    np.testing.assert_allclose(out_s, a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(out_n, a / a.sum(1, keepdims=True), rtol=1e-5)


# ---------------------------------------------------------------------------
# symbolic shapes and parameters
# ---------------------------------------------------------------------------

def test_symbolic_shapes_use_fresh_variables_and_scalar_params():
    n, m = T.Var("n"), T.Var("m")
    A = te.placeholder((n, 4), "float32", "A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    # m only appears in an output, inside an expression (2 * m): no buffer
    # binds it, so it becomes a scalar parameter.
    Z = te.compute((m * 2, 2), lambda i, j: T.FloatImm(1.0), name="Z")
    lowered = te.lower([A, B, Z])
    func = lowered.prim_func
    assert [type(p).__name__ for p in func.params] == ["Buffer", "Buffer", "Buffer", "Var"]
    assert func.params[3].name == "m" and func.params[3] is not m
    assert lowered.scalar_params == (m,)
    assert func.params[0].shape[0] is not n and func.params[0].shape[0] is func.params[1].shape[0]
    assert lowered.shape_vars[n] is func.params[0].shape[0]
    for rows, cols in ((2, 3), (5, 1)):
        a = rand(rows, 4)
        b, z = np.zeros((rows, 4), "float32"), np.zeros((2 * cols, 2), "float32")
        run_prim_func(func, [a, b, z, cols])
        np.testing.assert_array_equal(b, a * 2)
        np.testing.assert_array_equal(z, np.ones((2 * cols, 2)))


def test_a_bare_output_dimension_is_bound_by_the_output_buffer():
    # as TVM's create_prim_func: m is read from the output buffer's shape
    m = T.Var("m")
    Z = te.compute((m, 2), lambda i, j: T.FloatImm(1.0), name="Z")
    lowered = te.lower([Z])
    (buf,) = lowered.prim_func.params
    assert lowered.scalar_params == () and buf.shape[0] is lowered.shape_vars[m]
    for rows in (1, 4):
        z = np.zeros((rows, 2), "float32")
        run_prim_func(lowered.prim_func, [z])
        np.testing.assert_array_equal(z, np.ones((rows, 2)))


def test_parallel_and_vectorize_hints_depend_on_size():
    def kinds(shape):
        A = te.placeholder(shape, "float32", "A")
        B = te.compute(shape, lambda i, j: te.call("tanh", A[i, j]), name="B")
        return [f.kind for f in loops(te.create_prim_func([A, B]))]
    assert kinds((4, 8)) == ["serial", "vectorized"]
    assert kinds((512, 256)) == ["parallel", "vectorized"]
    assert kinds((1, 1 << 17))[:1] == ["serial"]      # extent-1 loops are skipped ...
    assert kinds((1, 1 << 17))[1] == "parallel"       # ... the next one is parallel
    n = T.Var("n")
    assert kinds((n, 8)) == ["serial", "vectorized"]
    assert kinds((n, 4096)) == ["parallel", "vectorized"]


def test_options_object_and_mapping():
    A = te.placeholder((512, 256), "float32", "A")
    B = te.compute((512, 256), lambda i, j: A[i, j] + 1.0, name="B")
    f = te.create_prim_func([A, B], schedule_hints={"parallel": False})
    assert [l.kind for l in loops(f)] == ["serial", "vectorized"]
    f = te.create_prim_func([A, B], schedule_hints=te.ScheduleOptions(vectorize=False))
    assert [l.kind for l in loops(f)] == ["parallel", "serial"]
    assert f.attrs["tirx.noalias"] is True


# ---------------------------------------------------------------------------
# random graphs: every schedule computes the same values as numpy
# ---------------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


def _graph_from_ops(ops, R, C):
    """Build a TE graph and its numpy mirror from a list of op codes."""
    A = te.placeholder((R, C), "float32", "A")
    Wt = te.placeholder((C, C), "float32", "W")
    a, w = rand(R, C), rand(C, C) * 0.3
    pool = [(A, a)]
    for k, (code, p, q) in enumerate(ops):
        t1, v1 = pool[p % len(pool)]
        t2, v2 = pool[q % len(pool)]
        name = f"t{k}"

        def load(t, i, j):  # broadcast (R,) / (C,) / (R, C) to (R, C)
            if t.ndim == 2:
                return t[i, j]
            return t[i] if t.shape[0].value == R and t.shape[0].value != C else t[j]

        def value(t, v):
            if v.ndim == 1:
                v = v[:, None] if t.shape[0].value == R and t.shape[0].value != C else v[None, :]
            return np.broadcast_to(v, (R, C))
        if code == 0:
            t = te.compute((R, C), lambda i, j: te.call("tanh", load(t1, i, j)), name=name)
            v = np.tanh(value(t1, v1))
        elif code == 1:
            t = te.compute((R, C), lambda i, j: load(t1, i, j) * load(t2, i, j) + 0.5, name=name)
            v = value(t1, v1) * value(t2, v2) + np.float32(0.5)
        elif code == 2 and t1.ndim == 2:
            kk = te.reduce_axis(C, "k")
            t = te.compute((R,), lambda i: te.sum(t1[i, kk], axis=[kk]), name=name)
            v = v1.sum(1)
        elif code == 3 and t1.ndim == 2:
            kk = te.reduce_axis(R, "k")
            t = te.compute((C,), lambda j: te.max(t1[kk, j], axis=[kk]), name=name)
            v = v1.max(0)
        elif code == 4 and t1.ndim == 2:
            kk = te.reduce_axis(C, "k")
            t = te.compute((R, C), lambda i, j: te.sum(t1[i, kk] * Wt[kk, j], axis=[kk]),
                           name=name)
            v = v1 @ w
        else:
            continue
        pool.append((t, v.astype("float32")))
    outs = [pool[-1]]
    if len(pool) > 2 and pool[-2][0] is not A:
        outs.insert(0, pool[-2])
    return A, Wt, a, w, outs


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9), st.integers(0, 9)),
                    min_size=1, max_size=7),
       R=st.sampled_from([1, 3, 4, 8]), C=st.sampled_from([2, 5, 8]))
def test_random_graphs_match_numpy(ops, R, C):
    A, Wt, a, w, outs = _graph_from_ops(ops, R, C)
    if all(t is A for t, _ in outs):
        return
    for hints in (True, False):
        func = te.create_prim_func([A, Wt] + [t for t, _ in outs], schedule_hints=hints)
        results = [np.zeros(v.shape, "float32") for _, v in outs]
        run_prim_func(func, [a, w] + results)
        for got, (_, exp) in zip(results, outs):
            np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# reductions into independent lanes (partial accumulators), on the TIR
# interpreter and on LLVM
# ---------------------------------------------------------------------------

def lane_buffers(func):
    """Partial-accumulator buffers (``<stage>_part``) allocated in the kernel."""
    return [s.buffer for s in walk(func.body)
            if isinstance(s, T.Allocate) and s.buffer.name.endswith("_part")]


def run_both(func, inputs, out_shape, dtype="float32"):
    """The kernel's output on the TIR interpreter and on LLVM."""
    from phasec.backend.llvm import compile_prim_funcs

    interp = np.zeros(out_shape, dtype)
    run_prim_func(func, [*inputs, interp])
    native = np.zeros(out_shape, dtype)
    compile_prim_funcs({"k": func})["k"](*inputs, native)
    return interp, native


def row_reduction(reducer, R, K, dtype="float32"):
    A = te.placeholder((R, K), dtype, "A")
    k = te.reduce_axis(K, "k")
    S = te.compute((R,), lambda i: reducer(A[i, k], axis=[k]), name="S")
    return A, S


@pytest.mark.parametrize("K,lanes", [(100, 16), (64, 16), (300, 32), (128, 16), (256, 32)])
def test_sum_over_contiguous_axis_uses_lanes_and_a_tail(K, lanes):
    A, S = row_reduction(te.sum, 3, K)
    func = te.create_prim_func([A, S])
    (part,) = lane_buffers(func)
    assert int(part.shape[0].value) == lanes
    fors = loops(func)
    # the lane loop of the main part is vectorized, ...
    assert any(f.kind == "vectorized" and int(f.extent.value) == lanes for f in fors)
    # ... the main loop runs K // lanes times and the serial tail K % lanes times
    assert any(f.kind == "serial" and int(f.extent.value) == K // lanes for f in fors)
    tails = [f for f in fors if f.kind == "serial" and int(f.extent.value) == K % lanes]
    assert bool(tails) == bool(K % lanes)
    a = rand(3, K)
    for got in run_both(func, [a], (3,)):
        np.testing.assert_allclose(got, a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


def test_tail_elements_are_all_counted():
    # Ones everywhere except one distinctive value per position: a dropped
    # or doubled element (main part or tail) shows as an exact mismatch.
    A, S = row_reduction(te.sum, 100, 100)
    func = te.create_prim_func([A, S])
    a = np.ones((100, 100), "float32")
    a[np.arange(100), np.arange(100)] = 1000.0   # row r: the big value at position r
    for got in run_both(func, [a], (100,)):
        np.testing.assert_array_equal(got, np.full(100, 1099.0, "float32"))


def test_product_reduction_with_lanes():
    A, S = row_reduction(te.prod, 4, 100)
    func = te.create_prim_func([A, S])
    assert [int(b.shape[0].value) for b in lane_buffers(func)] == [16]
    a = (1.0 + 0.02 * rand(4, 100)).astype("float32")
    a[1, 97] = 0.0  # in the tail: the product is exactly 0
    expected = a.astype(np.float64).prod(1)
    for got in run_both(func, [a], (4,)):
        np.testing.assert_allclose(got, expected, rtol=1e-5)
        assert got[1] == 0.0


def test_two_reduction_axes_split_the_innermost_one():
    A = te.placeholder((4, 3, 100), "float32", "A")
    k0, k1 = te.reduce_axis(3, "k0"), te.reduce_axis(100, "k1")
    S = te.compute((4,), lambda i: te.sum(A[i, k0, k1], axis=[k0, k1]), name="S")
    func = te.create_prim_func([A, S])
    assert len(lane_buffers(func)) == 1
    a = rand(4, 3, 100)
    for got in run_both(func, [a], (4,)):
        np.testing.assert_allclose(got, a.astype(np.float64).sum((1, 2)), rtol=1e-5, atol=1e-5)
    # A sum whose inner axis is strided in memory keeps the plain loop.
    k = te.reduce_axis(100, "k")
    B = te.placeholder((100, 5), "float32", "B")
    C = te.compute((5,), lambda j: te.sum(B[k, j], axis=[k]), name="C")
    func = te.create_prim_func([B, C])
    assert lane_buffers(func) == []
    b = rand(100, 5)
    for got in run_both(func, [b], (5,)):
        np.testing.assert_allclose(got, b.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reducer,np_fn", [(te.max, np.max), (te.min, np.min)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_min_reductions_stay_exact(reducer, np_fn, dtype):
    # Order-independent: no lanes (LLVM vectorizes them itself), exact results.
    A, S = row_reduction(reducer, 5, 100, dtype)
    func = te.create_prim_func([A, S])
    assert lane_buffers(func) == []
    a = (rand(5, 100) * 100).astype(dtype)
    a[2, 99] = 1e4 if reducer is te.max else -1e4  # the extreme in the last element
    for got in run_both(func, [a], (5,), dtype):
        np.testing.assert_array_equal(got, np_fn(a, axis=1))


@pytest.mark.parametrize("R,K", [(5, 127), (3, 131), (2, 64), (4, 1000), (7, 13)])
def test_fast_max_uses_lanes_and_equals_max_on_finite_and_infinite_values(R, K):
    # te.fast_max (softmax's row maximum): the CPU's max instruction, in
    # partial lanes from 64 elements on; the maximum wherever it is (first
    # element, vector body, tail), infinities included.
    A, S = row_reduction(te.fast_max, R, K)
    func = te.create_prim_func([A, S])
    assert bool(lane_buffers(func)) == (K >= 64)
    a = rand(R, K) * 100
    a[0, K - 1] = 1e4                # in the tail (or the last lane)
    a[1, 0] = 1e4                    # the first element
    a[R - 1, :] = -np.inf            # a row of -inf: -inf (the init value)
    if R > 3:
        a[2, K // 2] = np.inf
    for got in run_both(func, [a], (R,)):
        np.testing.assert_array_equal(got, a.max(1))


def test_fast_max_with_a_symbolic_extent_and_on_integers():
    n = T.Var("n")
    An, Sn = row_reduction(te.fast_max, 3, n)
    func = te.create_prim_func([An, Sn])
    assert lane_buffers(func) == []     # no lanes for an unknown extent
    a = rand(3, 71)
    for got in run_both(func, [a], (3,)):
        np.testing.assert_array_equal(got, a.max(1))
    Ai, Si = row_reduction(te.fast_max, 4, 97, "int32")
    func = te.create_prim_func([Ai, Si])
    ai = (rand(4, 97) * 1000).astype("int32")
    for got in run_both(func, [ai], (4,), "int32"):
        np.testing.assert_array_equal(got, ai.max(1))


def test_lanes_only_with_hints_and_a_static_float_extent():
    A, S = row_reduction(te.sum, 3, 100)
    assert lane_buffers(te.create_prim_func([A, S], schedule_hints=False)) == []
    assert lane_buffers(te.create_prim_func(
        [A, S], schedule_hints=te.ScheduleOptions(vectorize=False))) == []
    Ai, Si = row_reduction(te.sum, 3, 100, "int32")   # integer sums are exact in any order
    assert lane_buffers(te.create_prim_func([Ai, Si])) == []
    n = T.Var("n")
    An, Sn = row_reduction(te.sum, 3, n)                # symbolic extent
    func = te.create_prim_func([An, Sn])
    assert lane_buffers(func) == []
    a = rand(3, 70)
    out = np.zeros(3, "float32")
    run_prim_func(func, [a, out])
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-5, atol=1e-5)


def test_extern_stage_reads_materialized_inputs_and_feeds_computes():
    """te.extern: a hand-written scan between two computes, one kernel; its
    computed input gets a buffer, its consumer reads its buffer."""
    n = T.Var("n", "int64")
    A = te.placeholder((n, 4), "float32", "A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * T.FloatImm(2.0), name="B")

    def scan(ins, out):
        (b,) = ins
        i, k = T.Var("i", "int64"), T.Var("k", "int64")
        first = T.BufferStore(out, b[i, k], [i, k])
        rest = T.BufferStore(out, out[i, k - 1] + b[i, k], [i, k])
        body = T.IfThenElse(T.BinaryOp("==", k, T.IntImm(0)), first, rest)
        return T.For(i, 0, out.shape[0], "serial", T.For(k, 0, out.shape[1], "serial", body))

    C = te.extern((n, 4), "float32", [B], scan, name="C")
    D = te.compute((n, 4), lambda i, j: C[i, j] + T.FloatImm(1.0), name="D")
    for hints in (True, False):
        f = te.create_prim_func([A, D], schedule_hints=hints)
        x = rand(3, 4)
        out = np.zeros((3, 4), "float32")
        run_prim_func(f, [x, out])
        expected = np.array([[sum(2 * x[r, :c + 1]) + 1 for c in range(4)] for r in range(3)])
        np.testing.assert_allclose(out, expected, rtol=1e-5)
    with pytest.raises(te.TEError, match="must return a TIR statement"):
        te.create_prim_func([A, te.extern((n, 4), "float32", [A], lambda ins, out: None)])


# ---------------------------------------------------------------------------
# the blocked, packed GEMM schedule (compiled with LLVM, checked against numpy)
# ---------------------------------------------------------------------------

def _gemm(M, K, N, *, epilogue="bias_relu", transposed=False, batch=None, dtype="float32"):
    """A tagged matmul (as legalize builds it) with an epilogue; returns the
    tensors and a numpy function computing the same in float64."""
    lead = () if batch is None else (batch,)
    X = te.placeholder(lead + (M, K), dtype, "X")
    W = te.placeholder(lead + ((N, K) if transposed else (K, N)), dtype, "W")
    bias = te.placeholder((N,), dtype, "bias")
    R = te.placeholder(lead + (M, N), dtype, "R")
    k = te.reduce_axis(K, "k")

    def mm_body(*idx):
        b, (i, j) = idx[:-2], idx[-2:]
        w = W[b + (j, k)] if transposed else W[b + (k, j)]
        return te.sum(X[b + (i, k)] * w, axis=[k])
    mm = te.compute(lead + (M, N), mm_body, name="mm", tag="matmul")
    one = T.FloatImm(1.0, dtype)
    half = T.FloatImm(0.5, dtype)

    def gelu(v):
        inner = T.BinaryOp("*", T.FloatImm(0.7978845608, dtype),
                           v + T.FloatImm(0.044715, dtype) * v * v * v)
        return half * v * (one + te.call("tanh", inner))
    if epilogue == "none":
        out, ins = mm, [X, W]
    elif epilogue == "bias_relu":
        out = te.compute(mm.shape, lambda *i: T.BinaryOp("max", mm[i] + bias[i[-1]],
                                                          T.FloatImm(0.0, dtype)), name="out")
        ins = [X, W, bias]
    else:  # gelu(mm + bias) + residual
        out = te.compute(mm.shape, lambda *i: gelu(mm[i] + bias[i[-1]]) + R[i], name="out")
        ins = [X, W, bias, R]

    def reference(x, w, b=None, r=None):
        w = np.swapaxes(w, -1, -2) if transposed else w
        y = x.astype("float64") @ w.astype("float64")
        if epilogue == "bias_relu":
            y = np.maximum(y + b, 0)
        elif epilogue == "gelu_res":
            z = y + b
            y = 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3))) + r
        return y
    return ins, out, reference


def _check_gemm(funcs, cases):
    from phasec.backend.llvm import compile_prim_funcs
    lib = compile_prim_funcs(funcs)
    for name, arrays, out_shape, dtype, reference in cases:
        got = np.zeros(out_shape, dtype)
        lib[name](*arrays, got)
        want = reference(*arrays)
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(initial=1.0),
                                   err_msg=name)


def _operands(ins, M, K, N, dtype="float32", batch=None):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    arrays = []
    for t in ins:
        shape = tuple(int(d.value) if isinstance(d, T.IntImm) else {"n": M}.get(d.name, M)
                      for d in t.shape)
        arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


GEMM_SHAPES = [(1, 7, 13), (7, 13, 1), (13, 97, 7), (97, 13, 257), (257, 7, 97), (2, 257, 33),
               (9, 3, 40), (17, 64, 96), (64, 300, 739), (1, 9, 4100), (2, 5, 2053),
               # matrix-vector products whose K takes the 4-row unrolled update
               (1, 64, 13), (2, 124, 37), (1, 8, 4100)]


@pytest.mark.parametrize("tuning_name", ["host", "host packing", "avx2", "generic"])
def test_gemm_schedule_matches_numpy_on_odd_and_prime_shapes(tuning_name):
    from phasec.target import tuning as tn
    tuning = {"host": tn.host_tuning(), "host packing": PACK_ALWAYS,
              "avx2": dataclasses.replace(tn.avx2_tuning(), gemm_pack_min_bytes=0),
              "generic": tn.generic_tuning()}[tuning_name]
    opts = te.ScheduleOptions(tuning=tuning)
    shapes = GEMM_SHAPES if tuning_name.startswith("host") else GEMM_SHAPES[2:6]
    funcs, cases = {}, []
    for n, (M, K, N) in enumerate(shapes):
        for epilogue in ("none", "bias_relu", "gelu_res"):
            ins, out, ref = _gemm(M, K, N, epilogue=epilogue)
            name = f"g{n}_{epilogue}"
            funcs[name] = te.create_prim_func(ins + [out], schedule_hints=opts)
            cases.append((name, _operands(ins, M, K, N), (M, N), "float32", ref))
    _check_gemm(funcs, cases)


def test_gemm_schedule_structure_per_shape():
    tuning = host_tuning()
    mr, nr = tuning.gemm_rows, tuning.gemm_cols(32)
    # enough rows: W packed, full tiles, plus remainder rows and columns
    ins, out, _ = _gemm(3 * mr + 1, 40, 2 * nr + 3)
    func = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    packs = [b for b in names if b.name.startswith("mm_bpack")]
    accs = sorted(tuple(int(d.value) for d in b.shape) for b in names
                  if b.name.startswith("mm_acc"))
    assert len(packs) == 1 and tuple(int(d.value) for d in packs[0].shape)[1:] == (40, nr)
    # full tiles and the remainder row; the 3 remainder columns join the last
    # micro-panel in one tile of nr + 3 columns and half the rows (its
    # accumulators stay within the full tile's), then the last row
    M = 3 * mr + 1
    assert accs == sorted([(mr, nr), (1, nr), (mr // 2, nr + 3), (M % (mr // 2), nr + 3)])
    # a matrix-vector product: no packing, one wide accumulator row
    ins, out, _ = _gemm(1, 64, 1000)
    func = te.create_prim_func(ins + [out])
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    assert not [b for b in names if b.name.startswith("mm_bpack")]
    assert {int(b.shape[1].value) for b in names} == {min(1000, tuning.gemv_acc_bytes // 4)}
    # rows longer than the accumulator budget: strips of it, then the rest
    cols = tuning.gemv_acc_bytes // 4
    ins, out, _ = _gemm(1, 8, cols + 5)
    func = te.create_prim_func(ins + [out])
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    assert sorted(int(b.shape[1].value) for b in names) == [5, cols]


def test_gemm_schedule_symbolic_rows_batch_transposed_and_float64():
    n = T.Var("n")
    funcs, cases = {}, []
    ins, out, ref = _gemm(n, 24, 70, epilogue="gelu_res")
    funcs["sym"] = te.create_prim_func(ins + [out])
    funcs["sym_packed"] = te.create_prim_func(
        ins + [out], schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
    ins_b, out_b, ref_b = _gemm(13, 7, 33, epilogue="bias_relu", batch=3)
    funcs["batch"] = te.create_prim_func(ins_b + [out_b])
    ins_t, out_t, ref_t = _gemm(19, 31, 45, epilogue="bias_relu", transposed=True)
    funcs["transposed"] = te.create_prim_func(ins_t + [out_t])
    ins_d, out_d, ref_d = _gemm(11, 29, 37, epilogue="gelu_res", dtype="float64")
    funcs["f64"] = te.create_prim_func(ins_d + [out_d])
    for rows in (1, 2, 7, 8, 9, 97):
        for name in ("sym", "sym_packed"):
            cases.append((name, _operands(ins, rows, 24, 70), (rows, 70), "float32", ref))
    arrays = _operands(ins_b, 13, 7, 33)
    cases.append(("batch", arrays, (3, 13, 33), "float32", ref_b))
    cases.append(("transposed", _operands(ins_t, 19, 31, 45), (19, 45), "float32", ref_t))
    cases.append(("f64", _operands(ins_d, 11, 29, 37, "float64"), (11, 37), "float64", ref_d))
    _check_gemm(funcs, cases)
    # the interpreter (the reference semantics of TIR) agrees on the symbolic kernel
    x = _operands(ins, 9, 24, 70)
    got = run(funcs["sym"], *x, np.zeros((9, 70), "float32"))
    np.testing.assert_allclose(got, ref(*x), rtol=1e-4, atol=1e-4)


def _conv_nchw(n, c, h, w, o, kh, kw, groups=1):
    """conv2d (NCHW/OIHW, stride 1, no padding) + bias + relu as legalize builds it."""
    X = te.placeholder((n, c, h, w), "float32", "X")
    cg = c // groups
    W = te.placeholder((o, cg, kh, kw), "float32", "W")
    bias = te.placeholder((o,), "float32", "bias")
    rc, ry, rx = te.reduce_axis(cg, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    og = o // groups

    def body(b, oc, y, x):
        ch = rc.var if groups == 1 else (oc // og) * cg + rc.var
        return te.sum(X[b, ch, y + ry.var, x + rx.var] * W[oc, rc.var, ry.var, rx.var],
                      axis=[rc, ry, rx])
    conv = te.compute((n, o, h - kh + 1, w - kw + 1), body, name="conv", tag="conv2d")
    out = te.compute(conv.shape, lambda b, oc, y, x: relu(conv[b, oc, y, x] + bias[oc]),
                     name="out")
    return [X, W, bias], out


def _conv_reference(x, w, b, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for oc in range(o):
        g = oc // og
        for dy in range(kh):
            for dx in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, dy:dy + out.shape[2], dx:dx + out.shape[3]]
                out[:, oc] += np.einsum("nchw,c->nhw", patch.astype("float64"), w[oc, :, dy, dx])
    return np.maximum(out + b[None, :, None, None], 0)


def test_conv2d_takes_the_gemm_schedule_and_grouped_conv_keeps_its_own():
    from phasec.backend.llvm import compile_prim_funcs
    rng = np.random.default_rng(3)
    funcs, cases = {}, []
    for name, (n, c, h, w, o, kh, kw, groups) in {
            "conv": (2, 5, 11, 70, 19, 3, 3, 1), "conv1x1": (1, 7, 4, 77, 33, 1, 1, 1),
            "grouped": (1, 6, 9, 10, 9, 3, 2, 3), "depthwise": (1, 8, 7, 40, 8, 3, 3, 8)}.items():
        ins, out = _conv_nchw(n, c, h, w, o, kh, kw, groups)
        func = te.create_prim_func(ins + [out],
                                   schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
        packed = [s for s in walk(func.body) if isinstance(s, T.Allocate)
                  and s.buffer.name.startswith("conv_bpack")]
        accs = [s for s in walk(func.body) if isinstance(s, T.Allocate)
                and s.buffer.name.startswith("conv_acc")]
        if groups == 1:   # output channels x positions register tiles
            assert accs and all(1 <= int(a.buffer.shape[0].value) <= host_tuning().gemm_rows
                                for a in accs)
            assert packed or o < 2 * host_tuning().gemm_rows
        else:             # the input channel depends on the output channel: no GEMM split
            assert not packed
        funcs[name] = func
        arrays = [rng.standard_normal((n, c, h, w)).astype("float32"),
                  rng.standard_normal((o, c // groups, kh, kw)).astype("float32"),
                  rng.standard_normal(o).astype("float32")]
        cases.append((name, arrays, (n, o, h - kh + 1, w - kw + 1), "float32",
                      lambda x, wt, b, g=groups: _conv_reference(x, wt, b, g)))
    _check_gemm(funcs, cases)


def _acc_shapes(func, prefix="conv_acc"):
    return sorted({tuple(int(d.value) for d in s.buffer.shape) for s in walk(func.body)
                   if isinstance(s, T.Allocate) and s.buffer.name.startswith(prefix)})


@pytest.mark.parametrize("tuning_name", ["avx512", "avx2"])
def test_conv2d_gemm_tiles_on_odd_prime_and_wide_tail_widths(tuning_name):
    """Output widths that are no multiple of the register tile: the columns
    left over become vectors of powers of two plus 1-3 columns (7, 13, 29,
    61), joined with the last micro-panel into one wider tile of fewer rows
    when that stays within four registers a row (56 = 32 + 24 -> one 56-wide
    tile); a symbolic height is a batch loop. Checked against numpy."""
    from phasec.target import tuning as tn
    tuning = {"avx512": tn.avx512_tuning(), "avx2": tn.avx2_tuning()}[tuning_name]
    opts = te.ScheduleOptions(tuning=tuning)
    lanes, mr, nr = tuning.lanes(32), tuning.gemm_rows, tuning.gemm_cols(32)
    rng = np.random.default_rng(5)
    funcs, cases = {}, []
    h = T.Var("h")
    for name, (c, height, width, o, k) in {
            "w7": (3, 6, 9, 19, 3), "w13": (4, 5, 15, 9, 3), "w28": (5, 4, 30, 16, 3),
            "w29": (2, 4, 31, 11, 3), "w56": (3, 3, 58, 17, 3), "w61": (2, 3, 63, 8, 3),
            "w37_1x1": (5, 2, 37, 13, 1), "sym_h": (3, h, 58, 10, 3)}.items():
        ins, out = _conv_nchw(1, c, height, width, o, k, k)
        funcs[name] = te.create_prim_func(ins + [out], schedule_hints=opts)
        for hh in ((5, 3) if name == "sym_h" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, width)).astype("float32"),
                      rng.standard_normal((o, c, k, k)).astype("float32"),
                      rng.standard_normal(o).astype("float32")]
            cases.append((name, arrays, (1, o, hh - k + 1, width - k + 1), "float32",
                          lambda x, wt, b: _conv_reference(x, wt, b, 1)))
    _check_gemm(funcs, cases)
    # the TIR interpreter (the reference semantics of the kernels) agrees
    for name, arrays, out_shape, _, reference in cases:
        if name in ("w7", "w13", "w56", "sym_h"):
            got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
            np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4,
                                       err_msg=name)
    # 56 columns: the 24 (avx512; 8 on avx2) past the last whole micro-panel
    # are no whole vectors, and 56 columns are four registers a row on avx512
    # (3 x 16 + 8): one tile of all 56 columns, half the rows
    accs = _acc_shapes(funcs["w56"])
    if tuning_name == "avx512":
        assert accs == sorted({(mr // 2, 56), (17 % (mr // 2), 56)})
        # 61 = 3 x 16 + 8 + 4 + 1: five registers a row, too many to join:
        # a 32-column micro-panel, then 29 = 16 + 8 + 4 + 1 in four rows
        assert _acc_shapes(funcs["w61"]) == sorted([(mr, nr), (mr // 2, 29)])
    else:  # avx2: 56 = 3 micro-panels of 16, then 8 = a whole vector
        assert accs == sorted({(mr, nr), (17 % mr, nr), (mr, 8), (17 % mr, 8)})
    assert all(w % lanes == 0 or w > lanes for _, w in _acc_shapes(funcs["w28"]))


def test_grouped_conv2d_takes_the_gemm_when_groups_hold_whole_row_tiles(monkeypatch):
    """A grouped convolution reads its input channel as (oc // og) * cg + rc:
    every register tile's output channels are in one group (tiles of the
    plan's rows, at most og, then each group's last rows in a smaller tile
    when they do not divide og: 3 = 2 + 1) and it reads the input at its
    first row; a depthwise one (og = 1) keeps the old schedule. Against
    numpy (LLVM) and the TIR interpreter; a symbolic height too."""
    from phasec.te.schedules import gemm as gemm_module
    plan = gemm_module.plan_gemm
    rng = np.random.default_rng(11)
    h = T.Var("h")
    funcs, cases = {}, []
    for name, (c, height, w, o, groups, gemm) in {
            "og16": (12, 5, 23, 32, 2, True), "og4": (8, 4, 19, 16, 4, True),
            "og2": (6, 4, 13, 6, 3, True), "og3": (6, 4, 13, 9, 3, True),
            "depthwise": (8, 4, 21, 8, 8, False), "og8_sym": (4, h, 37, 16, 2, True)}.items():
        ins, out = _conv_nchw(1, c, height, w, o, 3, 3, groups)
        plans = []
        monkeypatch.setattr(gemm_module, "plan_gemm",
                            lambda nest, anchor: plans.append(plan(nest, anchor)) or plans[-1])
        funcs[name] = te.create_prim_func(ins + [out])
        taken = [p for p in plans if p is not None]
        og = o // groups
        if gemm:   # one plan, B read per group of rows
            rows = host_tuning().gemm_rows
            while rows > og:
                rows //= 2
            assert len(taken) == 1 and taken[0].row_group == og and taken[0].rows == rows
        else:
            assert not taken, name
        for hh in ((6, 3) if name == "og8_sym" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, w)).astype("float32"),
                      rng.standard_normal((o, c // groups, 3, 3)).astype("float32"),
                      rng.standard_normal(o).astype("float32")]
            cases.append((name, arrays, (1, o, hh - 2, w - 2), "float32",
                          lambda x, wt, b, g=groups: _conv_reference(x, wt, b, g)))
    _check_gemm(funcs, cases)
    for name, arrays, out_shape, _, reference in cases:
        if name in ("og16", "og2", "og3", "og8_sym"):
            got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
            np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4,
                                       err_msg=name)


def test_strided_conv2d_packs_its_gathered_input_columns():
    """A stride-2 convolution reads every other input column: its panels,
    the last narrower one too, are packed (gathered once per output row)
    so the register tiles load whole vectors; values against numpy on LLVM
    and the interpreter, odd and prime sizes, a symbolic height."""
    rng = np.random.default_rng(13)
    h = T.Var("h")
    funcs, cases = {}, []
    for name, (c, height, w, o, k, s) in {
            "s2_3x3": (5, 9, 75, 11, 3, 2), "s2_1x1": (7, 6, 29, 16, 1, 2),
            "s3_narrow": (4, 7, 23, 9, 3, 3), "s2_sym": (3, h, 41, 8, 3, 2)}.items():
        X = te.placeholder((1, c, height, w), "float32", "X")
        W = te.placeholder((o, c, k, k), "float32", "W")
        rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
        oh = (height - k) // s + 1
        ow = (w - k) // s + 1
        conv = te.compute((1, o, oh, ow), lambda b, q, y, x: te.sum(
            X[b, rc.var, y * s + ry.var, x * s + rx.var] * W[q, rc.var, ry.var, rx.var],
            axis=[rc, ry, rx]), name="conv", tag="conv2d")
        out = te.compute(conv.shape, lambda b, q, y, x: relu(conv[b, q, y, x]), name="out")
        func = te.create_prim_func([X, W, out])
        packs = [a for a in walk(func.body) if isinstance(a, T.Allocate)
                 and a.buffer.name.startswith("conv_bpack")]
        assert packs, name
        funcs[name] = func

        def reference(x, wt, s=s, k=k):
            hh, ww = x.shape[2], x.shape[3]
            y = np.zeros((1, wt.shape[0], (hh - k) // s + 1, (ww - k) // s + 1))
            for dy in range(k):
                for dx in range(k):
                    patch = x[0, :, dy:dy + s * (y.shape[2] - 1) + 1:s,
                              dx:dx + s * (y.shape[3] - 1) + 1:s].astype("float64")
                    y[0] += np.einsum("chw,qc->qhw", patch, wt[:, :, dy, dx])
            return np.maximum(y, 0)
        for hh in ((9, 4) if name == "s2_sym" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, w)).astype("float32"),
                      rng.standard_normal((o, c, k, k)).astype("float32")]
            cases.append((name, arrays, reference(*arrays).shape, "float32", reference))
    _check_gemm(funcs, cases)
    for name, arrays, out_shape, _, reference in cases[:2]:
        got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
        np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4, err_msg=name)


def test_host_tuning_follows_the_cpu_flags_and_the_width_cap(monkeypatch):
    from phasec.target import tuning as tn
    cases = [({"avx512f", "avx2", "fma"}, "avx512", 512), ({"avx2", "fma"}, "avx2", 256),
             ({"sse2"}, "generic", 128), (set(), "generic", 128)]
    try:
        for flags, name, bits in cases:
            monkeypatch.setattr(tn, "_cpu_flags", lambda flags=flags: flags)
            monkeypatch.delenv("PHASEC_VECTOR_BITS", raising=False)
            tn.host_tuning.cache_clear()
            t = tn.host_tuning()
            assert (t.name, t.vector_bits, t.lanes(32), t.lanes(64)) == (name, bits, bits // 32,
                                                                         bits // 64)
        monkeypatch.setattr(tn, "_cpu_flags", lambda: {"avx512f"})
        for cap, bits in (("256", 256), ("128", 128), ("1024", 512), ("wide", 512)):
            monkeypatch.setenv("PHASEC_VECTOR_BITS", cap)
            tn.host_tuning.cache_clear()
            assert tn.host_tuning().vector_bits == bits
    finally:
        tn.host_tuning.cache_clear()


def test_gemm_schedule_on_empty_extents():
    # no rows, no reduction (the sum is its init, 0: the epilogue sees bias only), no columns
    n = T.Var("n")
    funcs, cases = {}, []
    for name, (M, K, N) in {"m0": (0, 5, 7), "k0": (40, 0, 40), "n0": (5, 3, 0)}.items():
        ins, out, ref = _gemm(M, K, N)
        funcs[name] = te.create_prim_func(ins + [out])
        cases.append((name, _operands(ins, M, K, N), (M, N), "float32", ref))
    ins, out, ref = _gemm(n, 5, 40)
    funcs["sym"] = te.create_prim_func(ins + [out],
                                       schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
    for rows in (0, 1, 3):
        cases.append(("sym", _operands(ins, rows, 5, 40), (rows, 40), "float32", ref))
    _check_gemm(funcs, cases)
