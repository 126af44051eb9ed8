"""The tensor-expression layer (phasec.te): building computes, lowering to
PrimFuncs (inlining, anchor + epilogue fusion, schedule hints), symbolic
shapes and error reporting. Kernels are checked with the TIR interpreter."""

import numpy as np
import pytest

from phasec.interp.tir import run_prim_func
from phasec import te
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

from helpers.te_checks import PACK_ALWAYS, RNG, loops, rand, relu, run, stores, top_level, walk


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
    # W (256 KiB) stays in L2: read in place (packed from 128 KB on the Xeon
    # profile). A W too big for that (here: a tuning that packs any W) is
    # packed into contiguous panels once per call.
    def packs(f):
        return [s for s in walk(f.body) if isinstance(s, T.Allocate)
                and s.buffer.name.startswith("mm_bpack")]
    assert bool(packs(func)) == (256 * 256 * 4 >= tuning.gemm_pack_min_bytes)
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
    allocs = {s.buffer.name: s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)}
    # (the sum of 16 exps in 16 partial lanes, a short sum's: its exp vectorized)
    assert set(allocs) == {"mx_local", "s_local", "s_part"}
    assert [int(allocs[n].shape[0].value) for n in ("mx_local", "s_local", "s_part")] == [1, 1, 16]
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




def _doubling_extern(A, store_through: bool):
    """te.extern writing 2*A[i, j] + j, with a store_through builder when asked."""
    def build(ins, out, store=None):
        (a,) = ins
        i, j = T.Var("i", "int64"), T.Var("j", "int64")
        value = a[i, j] * T.FloatImm(2.0) + T.Cast("float32", j)
        put = T.BufferStore(out, value, [i, j]) if store is None else store(value, (i, j))
        return T.For(i, 0, out.shape[0], "serial", T.For(j, 0, out.shape[1], "serial", put))
    return te.extern(A.shape, "float32", [A], build, name="C",
                     store_through=build if store_through else None)


@pytest.mark.parametrize("store_through,mirrored,hints,fused", [
    (True, False, True, True),     # its one consumer, at the same indices: fused
    (True, True, True, False),     # read at other indices: a buffer of its own
    (True, False, False, False),   # no schedule hints: the canonical form
    (False, False, True, False),   # no store_through builder
])
def test_extern_stores_through_its_elementwise_consumer(store_through, mirrored, hints, fused):
    """An extern with a store_through builder whose only consumer reads it at
    the consumer's own element (a bias and relu): the consumer's expression
    is applied to each value the extern stores, into the consumer's buffer,
    and the extern gets no buffer; any other reader keeps the extern's
    buffer and a nest for the consumer. The values are the same."""
    n = T.Var("n", "int64")
    A = te.placeholder((n, 5), "float32", "A")
    bias = te.placeholder((5,), "float32", "bias")
    C = _doubling_extern(A, store_through)
    D = te.compute((n, 5), lambda i, j: te.maximum(
        (C[i, 4 - j] if mirrored else C[i, j]) + bias[j], T.FloatImm(0.0)), name="D")
    f = te.create_prim_func([A, bias, D], schedule_hints=hints)
    allocated = {s.buffer.name for s in walk(f.body) if isinstance(s, T.Allocate)}
    assert ("C" not in allocated) == fused
    x, b = rand(3, 5), rand(5)
    c = 2 * x + np.arange(5, dtype="float32")
    want = np.maximum((c[:, ::-1] if mirrored else c) + b, 0)
    out = run(f, x, b, np.zeros((3, 5), "float32"))
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_an_extern_does_not_store_through_a_consumer_with_a_reduction_in_its_nest():
    """The consumer also reads a row sum, computed inside its own nest: the
    extern keeps its buffer (the sum's accumulator lives in that nest), and
    the values are those of numpy."""
    n = T.Var("n", "int64")
    A = te.placeholder((n, 5), "float32", "A")
    k = te.reduce_axis(5, "k")
    S = te.compute((n,), lambda i: te.sum(A[i, k.var], axis=[k]), name="S")
    C = _doubling_extern(A, True)
    D = te.compute((n, 5), lambda i, j: C[i, j] + S[i], name="D")
    f = te.create_prim_func([A, D])
    assert "C" in {s.buffer.name for s in walk(f.body) if isinstance(s, T.Allocate)}
    x = rand(4, 5)
    want = 2 * x + np.arange(5, dtype="float32") + x.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(run(f, x, np.zeros((4, 5), "float32")), want, rtol=1e-5)
