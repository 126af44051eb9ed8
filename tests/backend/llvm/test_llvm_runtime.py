"""The LLVM runtime of compiled kernels: errors that name the kernel, the
native-code cache, the thread pool and parallel runtimes under stress,
argument checks and their fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import CodegenError, compile_prim_funcs
from phasec.backend.llvm import cache_info, clear_cache, set_num_threads
from phasec.errors import PhasecError, VMError
from phasec.ir import tir as T

from helpers.paths import TESTS
from helpers.tir_build import RNG, binop, buf, loops, matmul_block, rand, store, var


# --------------------------------------------------------------------------
# Errors, cache, overhead sanity
# --------------------------------------------------------------------------


def _compile_error(f, match):
    with pytest.raises(CodegenError, match=match) as info:
        compile_prim_funcs({"bad_kernel": f}, use_cache=False)
    assert isinstance(info.value, PhasecError)
    assert "bad_kernel" in str(info.value)


def test_compile_errors_name_the_kernel():
    A, B = buf("A", (4,)), buf("B", (4,))
    ghost = var("ghost")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[ghost], i))),
                   "variable 'ghost' is used but not defined")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, T.Call("frobnicate", (A[i],)), i))),
                   "unknown intrinsic 'frobnicate'")
    D = buf("D", (4,), "float64")
    _compile_error(T.PrimFunc((A, D), loops([4], lambda i: store(D, binop("+", A[i], D[i]), i))),
                   "dtype mismatch in '\\+': float32 and float64")
    I = buf("I", (4,), "int32")
    _compile_error(T.PrimFunc((A, I), loops([4], lambda i: store(I, A[i], i))),
                   "cannot use a float32 value as the value stored into buffer 'I'")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[i, i], i))),
                   "buffer 'A' has 1 dimension")
    other = buf("other", (4,))
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, other[i], i))),
                   "buffer 'other' is used but is neither a parameter")
    m = var("m")
    _compile_error(T.PrimFunc((buf("Z", (binop("+", m, T.IntImm(1)),)),), T.Evaluate(T.IntImm(0))),
                   "cannot be bound at call time")
    _compile_error(T.PrimFunc((buf("Q", (4,), "bfloat16"),), T.Evaluate(T.IntImm(0))),
                   "unsupported dtype 'bfloat16'")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, T.Call("exp", (i,)), i))),
                   "intrinsic 'exp' needs a float argument")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[T.Cast("float32", i)], i))),
                   "float dtype")
    _compile_error(T.PrimFunc((A, A), T.Evaluate(T.IntImm(0))), "appears twice")
    with pytest.raises(CodegenError, match="expected a tir.PrimFunc"):
        compile_prim_funcs({"x": 3})


def test_call_errors_name_kernel_parameter_expected_and_actual():
    n = var("n")
    A, B = buf("A", (n, 4)), buf("B", (n, 4))
    s = var("s", "int32")
    k = compile_prim_funcs({"scale": T.PrimFunc((A, s, B), loops(
        [n, 4], lambda i, j: store(B, A[i, j] * T.Cast("float32", s), i, j)))})["scale"]
    a, b = rand((3, 4)), np.empty((3, 4), np.float32)
    cases = [
        ((a.astype(np.float64), 1, b), r"kernel 'scale': parameter 'A' expects a float32\(n, 4\) array, got dtype float64"),
        ((a, 1, np.empty((2, 4), np.float32)), r"parameter 'B'.*binds 'n' = 2, but dimension 0 of 'A' gave 'n' = 3"),
        ((rand((3, 5)), 1, b), r"parameter 'A'.*dimension 1 is 5, expected 4"),
        ((a, 1), r"takes 3 arguments \(A, s, B\), got 2"),
        ((a, 1.5, b), r"scalar parameter 's' expects a Python int"),
        ((a, 1, np.empty((4, 3), np.float32).T), "non C-contiguous"),
        ((a.tolist(), 1, b), "got list"),
        ((a, 1, rand((3,))), "got 1-d array"),
    ]
    ro = np.empty((3, 4), np.float32)
    ro.flags.writeable = False
    cases.append(((a, 1, ro), "read-only"))
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)
    cases.append(((raw, 1, b), "not aligned"))
    for args, pattern in cases:
        with pytest.raises(VMError, match=pattern):
            k(*args)
    k(a, 2, b)
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    lib = compile_prim_funcs({"scale": k.abi and matmul_block(2, 2, 2)})
    with pytest.raises(VMError, match="no kernel named 'nope'"):
        lib["nope"]
    assert "nope" not in lib


def test_cache_reuses_native_code_for_equal_modules():
    clear_cache()
    f1 = matmul_block(4, 4, 4)
    f2 = matmul_block(4, 4, 4)  # structurally equal, different objects
    lib1 = compile_prim_funcs({"mm": f1})
    lib2 = compile_prim_funcs({"mm": f2})
    assert lib1._native is lib2._native
    info = cache_info()
    assert info["hits"] == 1 and info["misses"] == 1
    lib3 = compile_prim_funcs({"mm": matmul_block(4, 4, 8)})
    assert lib3._native is not lib1._native
    a, b, c = rand((4, 4)), rand((4, 4)), np.empty((4, 4), np.float32)
    lib2["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


def test_thread_pool_stress_and_concurrent_callers(threads_always):
    import threading

    n = var("n")
    A, B = buf("A", (n, 8)), buf("B", (n, 8))
    i, j = var("i"), var("j")
    f = T.PrimFunc((A, B), T.For(i, 0, n, "parallel", T.For(
        j, 0, 8, "serial", store(B, A[i, j] * 2.0 + T.Cast("float32", i), i, j))))
    k = compile_prim_funcs({"k": f})["k"]
    set_num_threads(2)
    # Many back-to-back jobs of varying size: generation hand-off between jobs.
    for size in list(range(1, 40)) * 20:
        a = np.full((size, 8), 1.0, np.float32)
        b = np.empty_like(a)
        k(a, b)
        assert (b == 2.0 + np.arange(size, dtype=np.float32)[:, None]).all()
    # Callers in several Python threads (ctypes releases the GIL): the pool
    # takes one job at a time, the others run serially; all results correct.
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            a = rng.standard_normal((int(rng.integers(1, 300)), 8)).astype(np.float32)
            b = np.empty_like(a)
            k(a, b)
            if not np.allclose(b, a * 2 + np.arange(len(a))[:, None]):
                errors.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_pool_workers_keep_off_the_callers_cpu_without_touching_the_caller(threads_always):
    """A woken worker that finds itself on its caller's CPU restricts its own
    affinity (see irlib's pool.avoid_cpu); the calling thread's affinity and
    the results are unchanged, whatever CPU each call starts on."""
    import os

    before = os.sched_getaffinity(0)
    n = 64
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    acc = buf("acc", (16,))
    i, r, j, j2, j3 = (var(x) for x in ("i", "r", "j", "j2", "j3"))
    inner = T.Allocate(acc, T.SeqStmt([
        T.For(j, 0, 16, "vectorized", store(acc, A[i, j], j)),
        T.For(r, 0, 200, "serial", T.For(j2, 0, 16, "vectorized",
                                         store(acc, acc[j2] * 0.5 + 1.0, j2))),
        T.For(j3, 0, 16, "vectorized", store(B, acc[j3], i, j3))]))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), T.For(i, 0, n, "parallel", inner))})["k"]
    a = RNG.standard_normal((n, 16)).astype(np.float32)
    want = a.copy()
    for _ in range(200):  # x -> x/2 + 1, exactly in float32
        want = want * np.float32(0.5) + np.float32(1.0)
    for threads in (2, 1, 2):
        set_num_threads(threads)
        for _ in range(30):
            b = np.empty_like(a)
            k(a, b)
            np.testing.assert_array_equal(b, want)
    assert os.sched_getaffinity(0) == before


def test_out_of_memory_is_a_vm_error(threads_always):
    n = var("n")
    A = buf("A", (n,))
    i = var("i")
    z = T.IntImm(0)
    funcs = {}
    for name, shape in (("overflow", (n, n, n, n)), ("too_big", (n, n, n))):
        huge = buf("huge", shape)
        idx = (z,) * (len(shape) - 1)
        body = T.For(i, 0, n, "parallel", T.Allocate(huge, T.SeqStmt((
            store(huge, A[i], i, *idx), store(A, huge[(i, *idx)] + 1.0, i)))))
        funcs[name] = T.PrimFunc((A,), body)
    lib = compile_prim_funcs(funcs)
    for name in funcs:
        with pytest.raises(VMError, match=f"kernel '{name}' failed: out of memory"):
            lib[name](np.zeros(200_000, np.float32))


def test_spawn_parallel_runtime_in_subprocess():
    """The per-call pthread runtime (used where the futex pool is unavailable)."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, sys\n"
        "sys.path.insert(0, %r)\n"
        "from helpers.tir_build import tiled_matmul\n"
        "from phasec.backend.llvm import compile_prim_funcs, set_min_parallel_work, parallel_runtime_kind\n"
        "assert parallel_runtime_kind() == 'spawn'\n"
        "set_min_parallel_work(0)\n"
        "k = compile_prim_funcs({'t': tiled_matmul(32, 64, 64)})['t']\n"
        "a, b = np.random.rand(32, 64).astype('f4'), np.random.rand(64, 64).astype('f4')\n"
        "c = np.empty((32, 64), 'f4'); k(a, b, c)\n"
        "assert np.allclose(c, a @ b, rtol=1e-4)\n" % str(TESTS))
    env = dict(os.environ, PHASEC_PARALLEL_RUNTIME="spawn")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


def test_pointer_entry_fallback_fast_math_and_opt_levels(monkeypatch):
    import phasec.backend.llvm.runtime as rt

    n = var("n")
    A, S = buf("A", (n,)), buf("S", (1,))
    i = var("i")
    zero = T.IntImm(0)
    f = T.PrimFunc((A, S), T.SeqStmt((store(S, 0.0, zero), T.For(
        i, 0, n, "serial", store(S, S[zero] + A[i] * A[i], zero)))))
    a = rand((1000,))
    expected = float((a.astype(np.float64) ** 2).sum())
    # Without the probed PyArrayObject layout the ctypes call passes data pointers.
    monkeypatch.setattr(rt, "array_data_offset", None)
    lib = compile_prim_funcs({"ss": f}, use_cache=False)
    assert lib["ss"].abi.obj_symbol is None
    s = np.zeros(1, np.float32)
    lib["ss"](a, s)
    assert s[0] == pytest.approx(expected, rel=1e-5)
    monkeypatch.undo()
    fast = compile_prim_funcs({"ss": f}, fast_math=True)
    assert "fadd fast" in fast.llvm_ir
    fast["ss"](a, s)
    assert s[0] == pytest.approx(expected, rel=1e-4)
    for level in (0, 2):
        compile_prim_funcs({"ss": f}, opt_level=level)["ss"](a, s)
        assert s[0] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(CodegenError, match="opt_level"):
        compile_prim_funcs({"ss": f}, opt_level=5)


def test_parallel_loop_with_offset_and_int32_loop_var(threads_always):
    n = var("n")
    A = buf("A", (n,), "int32")
    i = var("i", "int32")
    lo = T.IntImm(3, "int32")
    ext = binop("-", T.Cast("int32", n), T.IntImm(5, "int32"))
    f = T.PrimFunc((A,), T.For(i, lo, ext, "parallel", store(A, binop("*", i, i), i)))
    k = compile_prim_funcs({"k": f})["k"]
    a = np.full(1000, -1, np.int32)
    k(a)
    ref = np.full(1000, -1, np.int32)
    ref[3:998] = np.arange(3, 998) ** 2
    np.testing.assert_array_equal(a, ref)


def test_bool_scalar_parameter():
    flag = var("flag", "bool")
    A = buf("A", (4,))
    k = compile_prim_funcs({"k": T.PrimFunc((flag, A), loops([4], lambda i: store(
        A, T.Select(flag, T.FloatImm(1.0), T.FloatImm(2.0)), i)))})["k"]
    a = np.zeros(4, np.float32)
    for value, expected in ((True, 1.0), (np.False_, 2.0), (1, 1.0)):
        k(value, a)
        assert (a == expected).all()
    with pytest.raises(VMError, match="scalar parameter 'flag'"):
        k(1.5, a)


def test_native_argument_checks_and_their_fallbacks(monkeypatch):
    """Entries that check their arrays natively (KernelABI.checked): every
    refusal gives the Python diagnosis; valid arrays the native check does
    not take (subclasses, a dtype equal to but not the canonical object) run
    as views; without the probed layout the checks are in Python."""
    import phasec.backend.llvm.runtime as rt

    n, s = var("n"), var("s")
    A, B, Z = buf("A", (n, 3)), buf("B", (n, 3)), buf("Z", ())
    f = T.PrimFunc((A, s, B, Z), T.SeqStmt((
        loops([n, 3], lambda i, j: store(B, A[i, j] * T.Cast("float32", s), i, j)),
        store(Z, Z[()] + 1.0))))
    m = var("m")
    C = buf("C", (m,))
    g = T.PrimFunc((m, C), loops([m], lambda i: store(C, 2.0, i)))  # m bound by a scalar

    class Sub(np.ndarray):
        pass

    for layout in (rt.array_layout, None):
        monkeypatch.setattr(rt, "array_layout", layout)
        lib = compile_prim_funcs({"f": f, "g": g}, use_cache=False)
        k, k2 = lib["f"], lib["g"]
        assert k.abi.checked == (layout is not None) == k2.abi.checked
        a, b, z = rand((4, 3)), np.empty((4, 3), np.float32), np.zeros((), np.float32)
        k(a, 2, b, z)
        np.testing.assert_allclose(b, a * 2, rtol=1e-6)
        assert z == 1.0
        # valid, though not what the native check takes: a subclass output and
        # a non-canonical float32 dtype object
        odd = np.dtype(np.float32, metadata={"tag": 1})
        assert odd == np.float32 and odd is not np.dtype(np.float32)
        out = np.zeros((4, 3), np.float32).view(Sub)
        k(a.view(odd), 3, out, z)
        np.testing.assert_allclose(np.asarray(out), a * 3, rtol=1e-6)
        assert z == 2.0
        for bad, pattern in [
            ((a, 2, b, None), "parameter 'Z' expects a float32\\(\\) array, got NoneType"),
            ((a, 2, b, 7), "got int"),
            ((a, 2, b, np.zeros(1, np.float32)), "got 1-d array"),
            ((a, 2, rand((5, 3)), z), "binds 'n' = 5, but dimension 0 of 'A' gave 'n' = 4"),
            ((a, 2, b, np.zeros((), np.float64)), "got dtype float64"),
        ]:
            with pytest.raises(VMError, match=pattern):
                k(*bad)
        c = np.zeros(5, np.float32)
        k2(5, c)
        assert (c == 2).all()
        with pytest.raises(VMError, match="scalar parameter 'm'"):
            k2(4, c)
    # a composite dimension outside natively_checked_dim keeps the Python checks
    monkeypatch.undo()
    p = var("p")
    D = buf("D", (p,))
    E = buf("E", (T.Select(binop("<", p, T.IntImm(3)), T.IntImm(3), p),))
    h = T.PrimFunc((D, E), loops([p], lambda i: store(D, 1.0, i)))
    assert not compile_prim_funcs({"h": h}, use_cache=False)["h"].abi.checked


def _c(v: int) -> T.IntImm:
    return T.IntImm(v)


@pytest.mark.parametrize("expr, value", [
    (lambda p, q: binop("*", p, q), lambda p, q: p * q),
    (lambda p, q: binop("-", binop("+", p, _c(5)), q), lambda p, q: p + 5 - q),
    (lambda p, q: binop("//", binop("-", p, _c(7)), _c(3)), lambda p, q: (p - 7) // 3),
    (lambda p, q: binop("%", binop("-", p, _c(7)), _c(3)), lambda p, q: (p - 7) % 3),
    (lambda p, q: binop("max", binop("min", p, q), _c(2)), lambda p, q: max(min(p, q), 2)),
    (lambda p, q: binop("*", binop("*", p, q), _c(1 << 40)), lambda p, q: p * q << 40),
])
def test_composite_dimensions_checked_natively(expr, value):
    """A composite dimension (``batch * seq``) is checked by the native entry
    with Python's exact integers as the reference: floor division, overflow
    (wrapping to an array's size must not pass) and the message of a
    mismatch all as the Python checks give them."""
    p, q = var("p"), var("q")
    A, B = buf("A", (p, q)), buf("Z", (expr(p, q),))
    f = T.PrimFunc((A, B), loops([p, q], lambda i, j: store(A, 1.0, i, j)))
    k = compile_prim_funcs({"f": f}, use_cache=False)["f"]
    assert k.abi.checked
    for pv, qv in [(0, 0), (1, 5), (4, 3), (9, 2)]:  # (overflow: the next test)
        want = value(pv, qv)
        a = np.empty((pv, qv), np.float32)
        if 0 <= want < 1 << 20:
            k(a, np.empty(want, np.float32))
            assert (a == 1.0).all()
        for got in {0, 1, abs(want) % 97 + 1} - {want}:
            with pytest.raises(VMError, match=r"dimension 0 must be .* = " + str(want)):
                k(a, np.empty(got, np.float32))


def test_composite_dimension_overflow_is_a_mismatch():
    """2**62 * 4 wraps to 0 in int64: an empty array must still be refused."""
    s = var("s")
    E = buf("E", (binop("*", s, _c(4)),))
    f = T.PrimFunc((s, E), T.Evaluate(_c(0)))
    k = compile_prim_funcs({"f": f}, use_cache=False)["f"]
    assert k.abi.checked
    k(0, np.empty(0, np.float32))
    with pytest.raises(VMError, match=r"must be \(s \* 4\) = 18446744073709551616"):
        k(1 << 62, np.empty(0, np.float32))


def test_parallel_loops_in_many_small_chunks(threads_always):
    from phasec.backend.llvm.jit import set_parallel_chunk_work

    n = var("n")
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    i, j = var("i"), var("j")
    f = T.PrimFunc((A, B), T.For(i, 0, n, "parallel", T.For(
        j, 0, 16, "serial", store(B, A[i, j] + T.Cast("float32", i), i, j))))
    k = compile_prim_funcs({"k": f})["k"]
    set_num_threads(2)
    from phasec.backend.llvm.irlib import CHUNK_WORK

    default = set_parallel_chunk_work(1)     # as many chunks as allowed: 32 per thread
    try:
        assert default == CHUNK_WORK
        for chunk_work in (1, 100, 1 << 40):  # 64 chunks, a few, the minimum (4 per thread)
            set_parallel_chunk_work(chunk_work)
            for rows in (1, 3, 64, 65, 1000, 5000):
                a = rand((rows, 16))
                b = np.full_like(a, np.nan)
                k(a, b)
                np.testing.assert_array_equal(b, a + np.arange(rows, dtype=np.float32)[:, None])
        assert set_parallel_chunk_work(0) == 1 << 40   # clamped to 1
    finally:
        set_parallel_chunk_work(default)


def test_fast_entry_runs_refuses_and_explains_like_a_call():
    """A checked kernel of buffers only has a builtin entry
    (Kernel.native_call, what the VM calls): 0 and numpy's result for good
    arrays; for anything else a non-zero code and nothing run, and
    ``failed`` then does what the call does (runs valid arrays the native
    check does not take, explains the rest with the same message)."""
    from phasec.backend.llvm.abi import RC_BAD_ARGUMENTS
    from phasec.errors import DivisionByZeroError

    n = var("n")
    A, B, Q = buf("A", (n, 3), "int32"), buf("B", (n, 3), "int32"), buf("Q", (n, 3), "int32")
    lib = compile_prim_funcs({"div": T.PrimFunc((A, B, Q), loops(
        [n, 3], lambda i, j: store(Q, binop("//", A[i, j], B[i, j]), i, j)))}, use_cache=False)
    k = lib["div"]
    assert k.abi.checked and k.native_call is not None
    a = RNG.integers(-50, 50, (5, 3)).astype(np.int32)
    b = RNG.integers(1, 7, (5, 3)).astype(np.int32) * RNG.choice([-1, 1], (5, 3)).astype(np.int32)
    q = np.zeros((5, 3), np.int32)
    assert k.native_call(a, b, q) == 0
    np.testing.assert_array_equal(q, a // b)

    class Sub(np.ndarray):
        pass

    out = np.zeros((5, 3), np.int32).view(Sub)
    rc = k.native_call(a, b, out)
    assert rc == RC_BAD_ARGUMENTS and not np.asarray(out).any()  # refused, nothing ran
    k.failed(rc, (a, b, out))
    np.testing.assert_array_equal(np.asarray(out), a // b)
    for bad in [(a, b), (a, b, q, q), (a, b, None), (a, b, q.astype(np.int64)),
                (a, b, np.zeros((4, 3), np.int32)), (a, b, np.zeros((3, 5), np.int32).T)]:
        rc = k.native_call(*bad)
        assert rc == RC_BAD_ARGUMENTS
        with pytest.raises(VMError) as direct:
            k(*bad)
        with pytest.raises(VMError) as after:
            k.failed(rc, bad)
        assert str(after.value) == str(direct.value)
    zero = b.copy()
    zero[2, 1] = 0
    rc = k.native_call(a, zero, q)
    assert rc not in (0, RC_BAD_ARGUMENTS)
    with pytest.raises(DivisionByZeroError, match="div"):
        k.failed(rc, (a, zero, q))
    # a kernel with a scalar parameter has no builtin entry (ctypes converts scalars)
    s = var("s", "int32")
    C = buf("C", (4,), "int32")
    scaled = compile_prim_funcs({"scaled": T.PrimFunc((C, s), loops(
        [4], lambda i: store(C, s, i)))}, use_cache=False)["scaled"]
    assert scaled.native_call is None
