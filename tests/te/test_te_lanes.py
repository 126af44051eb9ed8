"""Reductions into independent lanes (partial accumulators) and te.fast_max:
lowered by phasec.te, checked on the TIR interpreter and on LLVM against
numpy, tails and symbolic extents included."""

import numpy as np
import pytest

from phasec.interp.tir import run_prim_func
from phasec import te
from phasec.ir import tir as T

from helpers.te_checks import loops, rand, walk


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


@pytest.mark.parametrize("K,lanes", [(100, 16), (64, 16), (300, 32), (128, 16), (256, 32),
                                     (49, 16), (17, 16)])  # short sums: the narrowest lanes
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


@pytest.mark.parametrize("rows,cols,lanes", [(17, 19, 16), (5, 37, 16), (32, 32, 32),
                                             (100, 7, None)])
def test_short_rows_of_a_long_sum_share_the_lanes(rows, cols, lanes):
    # a global average pooling's sum over H x W: rows shorter than the 64
    # elements a single axis needs, but enough elements in all; lanes when
    # a row holds at least one lane loop (not 7), every row adding into them
    A = te.placeholder((3, rows, cols), "float32", "A")
    k0, k1 = te.reduce_axis(rows, "k0"), te.reduce_axis(cols, "k1")
    S = te.compute((3,), lambda i: te.sum(A[i, k0, k1], axis=[k0, k1]), name="S")
    func = te.create_prim_func([A, S])
    assert [int(b.shape[0].value) for b in lane_buffers(func)] == ([lanes] if lanes else [])
    a = rand(3, rows, cols)
    for got in run_both(func, [a], (3,)):
        np.testing.assert_allclose(got, a.astype(np.float64).sum((1, 2)), rtol=1e-5, atol=1e-5)


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


@pytest.mark.parametrize("reducer,np_fn", [(te.max, np.max), (te.min, np.min)])
@pytest.mark.parametrize("K", [508, 100, 64, 37])
def test_max_min_around_a_call_use_lanes_and_an_overlapping_last_vector(reducer, np_fn, K):
    # a call in the reduced value (magika's tanh GELU before its global max
    # pool) keeps LLVM from vectorizing the reduction: lanes, and for the
    # tail the row's last whole vector again (max and min are idempotent),
    # no scalar loop; NaN still propagates, the extreme found anywhere
    A = te.placeholder((3, K), "float32", "A")
    k = te.reduce_axis(K, "k")
    S = te.compute((3,), lambda i: reducer(A[i, k] + te.call("tanh", A[i, k]), axis=[k]),
                   name="S")
    func = te.create_prim_func([A, S])
    (part,) = lane_buffers(func)
    lanes = int(part.shape[0].value)
    fors = loops(func)
    assert not [f for f in fors if f.kind == "serial" and int(f.extent.value) == K % lanes
                and K % lanes]
    assert sum(f.kind == "vectorized" and int(f.extent.value) == lanes for f in fors) \
        == 2 + (K % lanes > 0)  # init, body, the overlapping last vector
    a = rand(3, K) * 6 - 3  # (3 rows: no loop of K % lanes but a tail's)
    a[0, K - 1] = 40.0 if reducer is te.max else -40.0  # in the last vector
    a[1, 0] = 40.0 if reducer is te.max else -40.0      # the first element
    a[2, K // 3] = np.nan
    want = np_fn(a + np.tanh(a.astype(np.float64)), axis=1)  # (increasing)
    for got in run_both(func, [a], (3,)):
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
        assert np.isnan(got[2]) and not np.isnan(got[[0, 1]]).any()


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
