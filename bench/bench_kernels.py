"""Benchmark the LLVM kernel compiler against numpy in the same process.

    python bench/bench_kernels.py            # full run (about half a minute)
    python bench/bench_kernels.py --quick    # fewer repetitions, no plain matmul

Prints: per-call overhead of a compiled kernel (microseconds), 512x512x512
float32 matmul in GFLOP/s (plain triple loop with a Block init; cache-tiled
with a parallel outer loop and a vectorized inner loop; register-tiled,
parallel, vectorized) against numpy's matmul, elementwise math against
numpy, thread-pool dispatch cost and compile times. Figures are best-of-N
wall-clock times; on a shared machine they vary between runs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from phasec.backend.llvm import (  # noqa: E402
    compile_prim_funcs, get_num_threads, parallel_runtime_kind, set_min_parallel_work,
    set_num_threads,
)
from phasec.ir import tir as T  # noqa: E402
from phasec.arith.inbounds import prove_accesses  # noqa: E402


def best_of(fn: Callable[[], object], reps: int) -> float:
    fn()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def per_call(fn: Callable[[], object], n: int) -> float:
    """Mean seconds per call over n calls (best of 5 batches)."""
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def store(b: T.Buffer, value, *idx) -> T.BufferStore:
    return T.BufferStore(b, T.as_prim_expr(value, b.dtype), tuple(idx))


# -- kernels -----------------------------------------------------------------


def add_kernel(shape) -> T.PrimFunc:
    A, B, C = (T.Buffer(n, shape) for n in "ABC")
    i = T.Var("i")
    return T.PrimFunc((A, B, C), T.For(i, 0, shape[0], "serial", store(C, A[i] + B[i], i)))


def matmul_plain(M: int, N: int, K: int) -> T.PrimFunc:
    A, B, C = T.Buffer("A", (M, K)), T.Buffer("B", (K, N)), T.Buffer("C", (M, N))
    i, j, k, vi, vj, vk = (T.Var(n) for n in ("i", "j", "k", "vi", "vj", "vk"))
    block = T.Block("C", (T.IterVar(vi, M), T.IterVar(vj, N), T.IterVar(vk, K, "R")), (i, j, k),
                    body=store(C, C[vi, vj] + A[vi, vk] * B[vk, vj], vi, vj),
                    init=store(C, 0.0, vi, vj))
    return T.PrimFunc((A, B, C), T.For(i, 0, M, "serial", T.For(j, 0, N, "serial", T.For(
        k, 0, K, "serial", block))))


def matmul_cache_tiled(M: int, N: int, K: int, ti: int = 8, tk: int = 32) -> T.PrimFunc:
    """Rows in parallel tiles; k in tiles of tk; whole rows of C as the
    vectorized inner loop (C row and a B panel stay in cache)."""
    A, B, C = T.Buffer("A", (M, K)), T.Buffer("B", (K, N)), T.Buffer("C", (M, N))
    io, ii, ko, kk, j, z = (T.Var(n) for n in ("io", "ii", "ko", "kk", "j", "z"))
    i, k = io * ti + ii, ko * tk + kk
    zero = T.For(ii, 0, ti, "serial", T.For(z, 0, N, "vectorized", store(C, 0.0, io * ti + ii, z)))
    update = T.For(ko, 0, K // tk, "serial", T.For(ii, 0, ti, "serial", T.For(kk, 0, tk, "serial", T.For(
        j, 0, N, "vectorized", store(C, C[i, j] + A[i, k] * B[k, j], i, j)))))
    return T.PrimFunc((A, B, C), T.For(io, 0, M // ti, "parallel", T.SeqStmt((zero, update))))


def matmul_register_tiled(M: int, N: int, K: int, mr: int = 8, nr: int = 32) -> T.PrimFunc:
    """An mr x nr tile of C per (io, jo): k outermost inside the tile, rows
    unrolled, columns vectorized, so LLVM keeps the tile in vector registers."""
    A, B, C = T.Buffer("A", (M, K)), T.Buffer("B", (K, N)), T.Buffer("C", (M, N))
    io, jo, ii, jj, k, ii2, jj2 = (T.Var(n) for n in ("io", "jo", "ii", "jj", "k", "ii2", "jj2"))
    i, j = io * mr + ii, jo * nr + jj
    zero = T.For(ii2, 0, mr, "unroll", T.For(jj2, 0, nr, "vectorized", store(
        C, 0.0, io * mr + ii2, jo * nr + jj2)))
    update = T.For(k, 0, K, "serial", T.For(ii, 0, mr, "unroll", T.For(jj, 0, nr, "vectorized", store(
        C, C[i, j] + A[i, k] * B[k, j], i, j))))
    return T.PrimFunc((A, B, C), T.For(io, 0, M // mr, "parallel", T.For(
        jo, 0, N // nr, "serial", T.SeqStmt((zero, update)))))


def unary_kernel(name: str) -> T.PrimFunc:
    n = T.Var("n")
    X, Y = T.Buffer("X", (n,)), T.Buffer("Y", (n,))
    i = T.Var("i")
    return T.PrimFunc((X, Y), T.For(i, 0, n, "serial", store(Y, T.Call(name, (X[i],)), i)))


def gather_kernel() -> T.PrimFunc:
    """``Y[i] = X[I[i]]``: an index read from data, which no compiler can prove
    in bounds (the case bounds checks cost most)."""
    n = T.Var("n")
    X, Y, I = T.Buffer("X", (n,)), T.Buffer("Y", (n,)), T.Buffer("I", (n,), "int64")
    i = T.Var("i")
    return T.PrimFunc((X, I, Y), T.For(i, 0, n, "serial", store(Y, X[I[i]], i)))


def gelu_kernel() -> T.PrimFunc:
    n = T.Var("n")
    X, Y = T.Buffer("X", (n,)), T.Buffer("Y", (n,))
    i = T.Var("i")
    x = X[i]
    g = x * 0.5 * (T.Call("erf", (x * 0.7071067811865476,)) + 1.0)
    return T.PrimFunc((X, Y), T.For(i, 0, n, "serial", store(Y, g, i)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps = 5 if args.quick else 20
    print(f"phasec kernel benchmark: {os.cpu_count()} cpu(s), thread runtime "
          f"{parallel_runtime_kind()}, numpy {np.__version__}")

    # -- per-call overhead ------------------------------------------------
    n = T.Var("n")
    A, B, C = (T.Buffer(x, (n,)) for x in "ABC")
    i = T.Var("i")
    dyn = T.PrimFunc((A, B, C), T.For(i, 0, n, "serial", store(C, A[i] + B[i], i)))
    lib = compile_prim_funcs({"static": add_kernel((4,)), "symbolic": dyn})
    a, b, c = (np.ones(4, np.float32) for _ in range(3))
    calls = 20_000 if args.quick else 100_000
    ks, kd = lib["static"], lib["symbolic"]
    t_static = per_call(lambda: ks(a, b, c), calls)
    t_dyn = per_call(lambda: kd(a, b, c), calls)
    t_np = per_call(lambda: np.add(a, b, out=c), calls)
    t_loop = per_call(lambda: None, calls)
    print("\nper-call overhead (3 float32[4] arrays, Python loop overhead "
          f"{t_loop * 1e6:.2f} us subtracted)")
    print(f"  static shapes     {(t_static - t_loop) * 1e6:6.2f} us")
    print(f"  symbolic shape n  {(t_dyn - t_loop) * 1e6:6.2f} us")
    print(f"  numpy.add(out=)   {(t_np - t_loop) * 1e6:6.2f} us")

    # -- matmul --------------------------------------------------------------
    M = N = K = 512
    flops = 2.0 * M * N * K
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.empty((M, N), np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    t0 = time.perf_counter()
    mlib = compile_prim_funcs({"plain": matmul_plain(M, N, K),
                               "tiled": matmul_cache_tiled(M, N, K),
                               "regtile": matmul_register_tiled(M, N, K)}, use_cache=False)
    t_compile = time.perf_counter() - t0
    print(f"\nmatmul {M}x{N}x{K} float32 (module of 3 kernels compiled in {t_compile:.2f} s)")
    t = best_of(lambda: np.matmul(a, b, out=c), reps)
    print(f"  {'numpy.matmul':44s} {t * 1e3:8.2f} ms {flops / t / 1e9:7.1f} GFLOP/s")
    rows = [("cache-tiled, parallel+vectorized", "tiled"),
            ("register-tiled, parallel+vectorized", "regtile")]
    if not args.quick:
        rows.insert(0, ("plain triple loop, Block init", "plain"))
    threads = get_num_threads()
    for label, name in rows:
        kern = mlib[name]
        for nt in ([1] if name == "plain" else sorted({1, threads})):
            set_num_threads(nt)
            t = best_of(lambda: kern(a, b, c), 1 if name == "plain" else reps)
            err = np.abs(c - ref).max()
            print(f"  {label + f' [{nt} thr]':44s} {t * 1e3:8.2f} ms {flops / t / 1e9:7.1f} GFLOP/s"
                  f"  (max err {err:.1e})")
        set_num_threads(threads)

    # -- elementwise math ------------------------------------------------------
    size = 1 << 20
    x = rng.standard_normal(size, dtype=np.float32)
    y = np.empty_like(x)
    names = ["exp", "tanh", "sigmoid", "erf", "log"]
    vlib = compile_prim_funcs({**{nm: unary_kernel(nm) for nm in names}, "gelu": gelu_kernel()})
    slib = compile_prim_funcs({nm: unary_kernel(nm) for nm in names}, vector_math=False)
    xp = np.abs(x) + np.float32(0.1)
    refs = {"exp": lambda: np.exp(x, out=y), "tanh": lambda: np.tanh(x, out=y),
            "sigmoid": lambda: np.divide(1, 1 + np.exp(-x), out=y),
            "log": lambda: np.log(xp, out=y), "erf": None,
            "gelu": lambda: np.multiply(x * 0.5, np.tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)) + 1,
                                        out=y)}
    print(f"\nelementwise float32, {size} elements (ms; numpy gelu uses the tanh form)")
    print(f"  {'op':8s} {'phasec':>9s} {'libm':>9s} {'numpy':>9s}")
    for nm in names + ["gelu"]:
        arg = xp if nm == "log" else x
        tv = best_of(lambda: vlib[nm](arg, y), reps)
        ts = best_of(lambda: slib[nm](arg, y), reps) if nm in slib else math.nan
        tn = best_of(refs[nm], reps) if refs[nm] else math.nan
        print(f"  {nm:8s} {tv * 1e3:9.3f} {ts * 1e3:9.3f} {tn * 1e3:9.3f}")

    # -- bounds checks: none / the default (unless proven) / all -----------------
    print("\nbounds checks (ms, 1 thread): check_bounds=False (none) / None (the default: "
          "accesses not proven in bounds) / True (all); accesses proven/total")
    set_num_threads(1)
    checked = {"tiled": matmul_cache_tiled(M, N, K), "exp": unary_kernel("exp"), "add": dyn,
               "gather": gather_kernel()}
    libs = {mode: compile_prim_funcs(checked, check_bounds=mode) for mode in (False, None, True)}
    a1, b1 = (rng.standard_normal(size, dtype=np.float32) for _ in range(2))
    perm = rng.permutation(size).astype(np.int64)
    cases = [("matmul cache-tiled 512^3", "tiled", (a, b, c)),
             (f"exp, {size} elements", "exp", (x, y)),
             (f"add, {size} elements (symbolic n)", "add", (a1, b1, y)),
             (f"gather X[I[i]], {size} elements", "gather", (x, perm, y))]
    print(f"  {'':36s} {'none':>8s} {'default':>8s} {'all':>8s}  {'proven':>6s}")
    for label, key, call_args in cases:
        # none, default, all, then none and default again: the first runs after
        # an LLVM compilation can be slow on a shared machine; best of both
        times = {mode: best_of(lambda: libs[mode][key](*call_args), reps)
                 for mode in (False, None, True)}
        for mode in (False, None):
            times[mode] = min(times[mode], best_of(lambda: libs[mode][key](*call_args), reps))
        proven, unproven = prove_accesses(checked[key]).counts()
        print(f"  {label:36s} {times[False] * 1e3:8.3f} {times[None] * 1e3:8.3f} "
              f"{times[True] * 1e3:8.3f}  {proven:>3d}/{proven + unproven:<3d}"
              f"  (default x{times[None] / times[False]:.2f}, all x{times[True] / times[False]:.2f})")
    set_num_threads(threads)

    # -- thread pool dispatch ------------------------------------------------
    n = T.Var("n")
    X = T.Buffer("X", (n,))
    par = T.PrimFunc((X,), T.For(i, 0, n, "parallel", store(X, X[i] + 1.0, i)))
    ser = T.PrimFunc((X,), T.For(i, 0, n, "serial", store(X, X[i] + 1.0, i)))
    plib = compile_prim_funcs({"par": par, "ser": ser})
    small = np.zeros(64, np.float32)
    set_min_parallel_work(0)
    t_par = per_call(lambda: plib["par"](small), calls // 10)
    t_ser = per_call(lambda: plib["ser"](small), calls // 10)
    set_min_parallel_work(32768)
    print(f"\nparallel-loop dispatch on {threads} threads: "
          f"{(t_par - t_ser) * 1e6:.2f} us per call over a serial loop")


if __name__ == "__main__":
    main()
