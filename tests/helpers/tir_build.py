"""TIR written by hand for the LLVM code generator's tests: shorthands for
variables, buffers, loop nests and stores; elementwise and matmul kernels;
random arrays of every dtype."""

from __future__ import annotations

import numpy as np

from phasec.ir import tir as T

#: the generator of rand, for tests drawing their own arrays too
RNG = np.random.default_rng(0)


def var(name: str, dtype: str = "int64") -> T.Var:
    """A TIR variable (int64 unless said)."""
    return T.Var(name, dtype)


def buf(name: str, shape, dtype: str = "float32") -> T.Buffer:
    """A buffer of ``shape`` (float32 unless said)."""
    return T.Buffer(name, tuple(shape), dtype)


def loops(extents, body_fn, kinds=None):
    """Nested serial loops over ``extents``; ``body_fn(*loop_vars)`` gives the body."""
    vs = [var(f"i{k}") for k in range(len(extents))]
    stmt = body_fn(*vs)
    kinds = kinds or ["serial"] * len(extents)
    for v, e, kind in reversed(list(zip(vs, extents, kinds))):
        stmt = T.For(v, 0, e, kind, stmt)
    return stmt


def store(b: T.Buffer, value, *idx) -> T.BufferStore:
    """``b[idx] = value``, a Python number taking the buffer's dtype."""
    return T.BufferStore(b, T.as_prim_expr(value, b.dtype), tuple(idx))


def binop(op, a, b):
    """``a op b`` for an operator by its name ("+", "floordiv", ...)."""
    return T.BinaryOp(op, a, b)


def rand(shape, dtype="float32"):
    """Random floats (standard normal), bools, or integers in [-50, 50)."""
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)


def elementwise(n, fn, in_dtype="float32", out_dtype=None, nin=1):
    """``Y[i] = fn(X0[i], ...)`` over ``nin`` inputs of length ``n``."""
    ins = [buf(f"X{k}", (n,), in_dtype) for k in range(nin)]
    out = buf("Y", (n,), out_dtype or in_dtype)
    body = loops([n], lambda i: store(out, fn(*[x[i] for x in ins]), i))
    return T.PrimFunc((*ins, out), body)


def matmul_block(M, N, K, dtype="float32"):
    """C = A @ B as one reduction block (its init zeroing C) in three loops."""
    A, B, C = buf("A", (M, K), dtype), buf("B", (K, N), dtype), buf("C", (M, N), dtype)
    i, j, k = var("i"), var("j"), var("k")
    vi, vj, vk = var("vi"), var("vj"), var("vk")
    block = T.Block("C", (T.IterVar(vi, M), T.IterVar(vj, N), T.IterVar(vk, K, "R")), (i, j, k),
                    body=store(C, C[vi, vj] + A[vi, vk] * B[vk, vj], vi, vj),
                    init=store(C, 0.0, vi, vj))
    return T.PrimFunc((A, B, C), T.For(i, 0, M, "serial", T.For(j, 0, N, "serial",
                                                                T.For(k, 0, K, "serial", block))))


def tiled_matmul(M, N, K, tile_i=8, tile_k=64, tile_j=64):
    """C = A @ B: parallel over row tiles, vectorized inner j loop, k tiled."""
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    io, ii, ko, kk, jo, jj, z = (var(n) for n in ("io", "ii", "ko", "kk", "jo", "jj", "z"))
    i = io * tile_i + ii
    k = ko * tile_k + kk
    j = jo * tile_j + jj
    zero = T.For(ii, 0, tile_i, "serial", T.For(z, 0, N, "vectorized", store(C, 0.0, io * tile_i + ii, z)))
    update = T.For(ko, 0, K // tile_k, "serial", T.For(jo, 0, N // tile_j, "serial", T.For(
        ii, 0, tile_i, "serial", T.For(kk, 0, tile_k, "serial", T.For(
            jj, 0, tile_j, "vectorized", store(C, C[i, j] + A[i, k] * B[k, j], i, j))))))
    body = T.For(io, 0, M // tile_i, "parallel", T.SeqStmt((zero, update)))
    return T.PrimFunc((A, B, C), body)

