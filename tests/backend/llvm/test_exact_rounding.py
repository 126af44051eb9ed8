"""The float arithmetic that a rounding to an integer or a comparison decides is emitted
without fast-math flags (phasec/backend/llvm/exact.py): LLVM may not fuse it
into an FMA, which would move a coordinate computed exactly halfway (resize
2 -> 7 rows: ``(3 + 0.5) * (2 / 7) - 0.5`` is 0.5 as written, 0.5000000447
fused) across the rounding boundary. Results against numpy's float32
evaluation of the same formula, one operation at a time; the rest of the
kernel keeps contraction."""

from __future__ import annotations

import numpy as np

from phasec.backend.llvm import compile_prim_funcs
from phasec.backend.llvm.codegen import ModuleCodegen
from phasec.backend.llvm.exact import exact_arithmetic
from phasec.ir import tir as T

from helpers.tir_build import buf, loops, store, var

N = 512  # enough elements that LLVM does not fold the coordinates into constants
F32 = np.float32


def _coordinate(i: T.PrimExpr, ratio: tuple[int, int]) -> T.PrimExpr:
    """resize's ``(i + 0.5) * (in / out) - 0.5`` in float32."""
    def f(v: float) -> T.FloatImm:
        return T.FloatImm(float(v), "float32")

    scale = T.BinaryOp("/", f(ratio[0]), f(ratio[1]))
    return T.BinaryOp("-", T.BinaryOp("*", T.BinaryOp("+", T.Cast("float32", i), f(0.5)), scale),
                      f(0.5))


def _coordinate_np(ratio: tuple[int, int]) -> np.ndarray:
    i = np.arange(N, dtype=F32)
    return (i + F32(0.5)) * (F32(ratio[0]) / F32(ratio[1])) - F32(0.5)


def _kernels(ratio: tuple[int, int]) -> dict[str, T.PrimFunc]:
    """Four ways a coordinate reaches a decision: round-half-down's ``ceil(c - 0.5)`` cast
    to an index, a let-bound coordinate floored, the coordinate cast to int32 (truncated),
    and compared with one half; each beside a product-sum ``A * B + D`` that stays
    contracted."""
    out = {}
    for name in ("ceil", "let_floor", "cast", "compare"):
        R, C = buf("R", (N,), "int64"), buf("C", (N,))
        A, B, D = buf("A", (N,)), buf("B", (N,)), buf("D", (N,))
        c = var("c", "float32")

        def body(i, name=name, R=R, C=C, A=A, B=B, D=D, c=c):
            fused = store(C, T.BinaryOp("+", T.BinaryOp("*", A[i], B[i]), D[i]), i)
            coord = _coordinate(i, ratio)
            if name == "ceil":
                half = T.BinaryOp("-", coord, T.FloatImm(0.5, "float32"))
                idx = T.Cast("int64", T.Call("ceil", (half,), "float32"))
            elif name == "let_floor":
                idx = T.Cast("int64", T.Call("floor", (c,), "float32"))
            elif name == "cast":
                idx = T.Cast("int64", T.Cast("int32", coord))
            else:
                idx = T.Select(T.BinaryOp(">", coord, T.FloatImm(0.5, "float32")),
                               T.IntImm(1, "int64"), T.IntImm(0, "int64"))
            stmt = T.SeqStmt((store(R, idx, i), fused))
            return T.LetStmt(c, coord, stmt) if name == "let_floor" else stmt

        out[name] = T.PrimFunc((A, B, D, R, C), loops([N], body))
    return out


def _want(name: str, ratio: tuple[int, int]) -> np.ndarray:
    c = _coordinate_np(ratio)
    if name == "ceil":
        return np.ceil(c - F32(0.5)).astype(np.int64)
    if name == "let_floor":
        return np.floor(c).astype(np.int64)
    if name == "cast":
        return c.astype(np.int32).astype(np.int64)
    return (c > F32(0.5)).astype(np.int64)


def test_rounded_coordinates_are_computed_as_written():
    rng = np.random.default_rng(5)
    a, b, d = (rng.standard_normal(N).astype(F32) for _ in range(3))
    for ratio in ((2, 7), (13, 5), (13, 11), (3, 10), (5, 13)):
        funcs = _kernels(ratio)
        lib = compile_prim_funcs(funcs)
        for name in funcs:
            r, c = np.empty(N, np.int64), np.empty(N, F32)
            lib[name](a, b, d, r, c)
            np.testing.assert_array_equal(r, _want(name, ratio), err_msg=f"{name} {ratio}")
            np.testing.assert_allclose(c, a * b + d, rtol=1e-6, atol=1e-6)


def test_only_the_rounded_arithmetic_loses_the_contract_flag():
    for name, f in _kernels((2, 7)).items():
        # the coordinate's + - * (3 of them; the ratio's division is not contractible anyway),
        # and for ceil the subtraction of one half
        assert len(exact_arithmetic(f)) == (4 if name == "ceil" else 3), name
        gen = ModuleCodegen()
        gen.add_kernel(name, f)
        ir = gen.finish()
        arith = [ln for ln in ir.splitlines()
                 if any(f" = {op} " in ln for op in ("fadd", "fsub", "fmul"))]
        fused = [ln for ln in arith if " contract " in ln]
        assert len(fused) == 2, (name, arith)  # A * B + D
        assert len(arith) - len(fused) == len(exact_arithmetic(f)), (name, arith)


def test_remainders_decide_their_operands_as_roundings_do():
    """A float ``%``, ``//`` or ``fmod`` steps at each multiple of its divisor,
    as a rounding steps at each integer: its operands' ``+ - *`` lose the
    flag (the 3 of the coordinate), the product-sum beside it keeps it; the
    values are numpy's, one float32 operation at a time."""
    quarter = T.FloatImm(0.25, "float32")
    ops = {"%": (lambda c: T.BinaryOp("%", c, quarter), lambda c: np.mod(c, F32(0.25))),
           "//": (lambda c: T.BinaryOp("//", c, quarter),
                  lambda c: np.floor_divide(c, F32(0.25))),
           "fmod": (lambda c: T.Call("fmod", (c, quarter), "float32"),
                    lambda c: np.fmod(c, F32(0.25)))}
    rng = np.random.default_rng(7)
    a, b, d = (rng.standard_normal(N).astype(F32) for _ in range(3))
    for name, (make, reference) in ops.items():
        R, C, A, B, D = (buf(n, (N,)) for n in "RCABD")

        def body(i, make=make, R=R, C=C, A=A, B=B, D=D):
            fused = store(C, T.BinaryOp("+", T.BinaryOp("*", A[i], B[i]), D[i]), i)
            return T.SeqStmt((store(R, make(_coordinate(i, (2, 7))), i), fused))
        f = T.PrimFunc((A, B, D, R, C), loops([N], body))
        assert len(exact_arithmetic(f)) == 3, name
        r, c = np.empty(N, F32), np.empty(N, F32)
        compile_prim_funcs({"k": f})["k"](a, b, d, r, c)
        np.testing.assert_array_equal(r, reference(_coordinate_np((2, 7))), err_msg=name)
