"""What the tensor-expression tests share: a lowered PrimFunc's statements
(``walk``, ``stores``, ``loops``, ``top_level``), running it on the TIR
interpreter, random inputs, a relu epilogue, and a tuning that always packs
the GEMM's operands."""

from __future__ import annotations

import dataclasses

import numpy as np

from phasec.interp.tir import run_prim_func
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

#: the host's tuning, packing B whatever its size (so small tests take that path)
PACK_ALWAYS = dataclasses.replace(host_tuning(), gemm_pack_min_bytes=0)

RNG = np.random.default_rng(7)


def rand(*shape):
    """Standard-normal float32 values of ``shape``."""
    return RNG.standard_normal(shape).astype("float32")


def relu(e):
    """``max(e, 0.0)``."""
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
    """Names of the buffers ``func`` stores to."""
    return {s.buffer.name for s in walk(func.body) if isinstance(s, T.BufferStore)}


def loops(func):
    """Every loop of ``func``, pre-order."""
    return [s for s in walk(func.body) if isinstance(s, T.For)]


def top_level(func):
    """Statements at the top of the body, under function-level Allocates."""
    body = func.body
    while isinstance(body, T.Allocate):
        body = body.body
    return list(body.stmts) if isinstance(body, T.SeqStmt) else [body]


def run(func, *arrays):
    """Run ``func`` on the TIR interpreter; its last argument (the output)."""
    run_prim_func(func, list(arrays))
    return arrays[-1]


def check_llvm_and_interp(func, inputs, want, tol=1e-4):
    """``func`` on LLVM and on the TIR interpreter, its output (the last
    argument, zeros of ``want``'s shape) against ``want``."""
    from phasec.backend.llvm import compile_prim_funcs

    got = np.zeros(want.shape, want.dtype)
    compile_prim_funcs({"k": func})["k"](*inputs, got)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    interp = run(func, *inputs, np.zeros(want.shape, want.dtype))
    np.testing.assert_allclose(interp, want, rtol=tol, atol=tol)
