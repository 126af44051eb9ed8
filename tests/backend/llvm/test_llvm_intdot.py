"""T.dot4_u8s8 (the integer GEMM's 8-bit dot product): its reference
semantics against numpy, the instructions its vector variants become for a
target with and without VNNI, and PHASEC_CPU_FEATURES's parsing."""

from __future__ import annotations

import numpy as np
import pytest

import phasec

from phasec.backend.llvm.intdot import DOT4_FUNCTION, DOT4_VARIANTS, dot4_function
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.te.schedules.gemm_prepack import PACK_MARK, byte_words
from phasec.backend.llvm.jit import with_feature_override
from phasec.backend.llvm.objworker import compile_object
from phasec.errors import InputError
from phasec.ir.intrinsics import INTRINSIC_TABLE


def test_reference_semantics_against_numpy():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (200, 4)).astype(np.uint8)
    b = rng.integers(-128, 128, (200, 4)).astype(np.int8)
    a[0], b[0] = 255, -128
    dot = INTRINSIC_TABLE["dot4_u8s8"].on_bits(32)
    got = [dot(int(x), int(y)) for x, y in zip(a.view("<i4")[:, 0], b.view("<i4")[:, 0])]
    want = (a.astype(np.int64) * b.astype(np.int64)).sum(axis=1)
    np.testing.assert_array_equal(got, want)


def _kernel(features: str) -> str:
    """A 16-wide accumulator loop over k calling the helper, as a GEMM tile does."""
    helper, decls = dot4_function(features)
    loop = f"""
define void @k(ptr noalias %acc, ptr noalias %a, ptr noalias %b, i64 %K) {{
entry:
  br label %kl
kl:
  %k = phi i64 [0, %entry], [%k1, %jx]
  %ap = getelementptr i32, ptr %a, i64 %k
  %av = load i32, ptr %ap
  br label %jl
jl:
  %j = phi i64 [0, %kl], [%j1, %jl]
  %kb = mul i64 %k, 16
  %bi = add i64 %kb, %j
  %bp = getelementptr i32, ptr %b, i64 %bi
  %bv = load i32, ptr %bp
  %cp = getelementptr i32, ptr %acc, i64 %j
  %cv = load i32, ptr %cp
  %r = call i32 @{DOT4_FUNCTION}(i32 %cv, i32 %av, i32 %bv) {DOT4_VARIANTS}
  store i32 %r, ptr %cp
  %j1 = add i64 %j, 1
  %c = icmp ult i64 %j1, 16
  br i1 %c, label %jl, label %jx, !llvm.loop !0
jx:
  %k1 = add i64 %k, 1
  %c2 = icmp ult i64 %k1, %K
  br i1 %c2, label %kl, label %done
done:
  ret void
}}
!0 = distinct !{{!0, !1, !2}}
!1 = !{{!"llvm.loop.vectorize.enable", i1 true}}
!2 = !{{!"llvm.loop.unroll.disable"}}
"""
    return "\n".join([*decls.values(), helper, loop])


@pytest.mark.parametrize("features,kind", [
    ("+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512vnni", "vpdpbusd"),
    ("+avx2,+fma,+avx512f,+avx512bw,+avx512vl,-avx512vnni", "pmadd"),
    ("+sse2,+avx,+avx2,+fma,-avx512f", "pmadd"),
    ("+sse2,-avx,-avx2", "pmadd"),      # 4 lanes: SSE2's pmaddwd
    ("", "generic"),                    # no x86 feature named: generic IR
])
def test_vector_variant_instructions(features, kind):
    cpu = "x86-64-v4" if "+avx512f" in features else "x86-64"
    _, ir, _ = compile_object(_kernel(features), "x86_64-unknown-linux-gnu", cpu, features, 3)
    body = ir[ir.index("define void @k("):]
    body = body[:body.index("\n}\n")]
    assert ("vpdpbusd" in body) == (kind == "vpdpbusd")
    assert ("pmadd" in body) == (kind == "pmadd")
    assert f"@{DOT4_FUNCTION}.v" not in body  # the variant was inlined after vectorizing
    assert " x i32>" in body  # vectorized


def test_feature_override():
    assert with_feature_override("+avx2,+avx512vnni,+fma", "-avx512vnni") == \
        "+avx2,+fma,-avx512vnni"
    assert with_feature_override("+avx2", "") == "+avx2"
    assert with_feature_override("+avx2,-fma", "+avx2") == "-fma,+avx2"
    with pytest.raises(InputError, match="PHASEC_CPU_FEATURES"):
        with_feature_override("+avx2", "avx512vnni")
    with pytest.raises(InputError, match="does not have"):
        with_feature_override("+avx2,-avx512vnni", "+avx512vnni")


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
@pytest.mark.parametrize("adt,bdt", [("uint8", "int8"), ("int8", "uint8")])
def test_int8_matmul_kernel(kernels, adt, bdt):
    """R.matmul of one uint8 and one int8 operand into int32 (the T.dot4_u8s8
    sums), run by the TIR interpreter and compiled, against numpy int64: a
    batched operand, K not a multiple of 4, the extremes of both dtypes."""
    src = f"""
from phasec.script import relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 5, 7), "{adt}"), w: R.Tensor((7, 3), "{bdt}")
             ) -> R.Tensor((2, 5, 3), "int32"):
        y = R.matmul(x, w, out_dtype="int32")
        return y
"""
    vm = phasec.VirtualMachine(phasec.build(phasec.parse(src), kernels=kernels))
    rng = np.random.default_rng(1)
    info_a, info_b = np.iinfo(adt), np.iinfo(bdt)
    x = rng.integers(info_a.min, info_a.max + 1, (2, 5, 7)).astype(adt)
    w = rng.integers(info_b.min, info_b.max + 1, (7, 3)).astype(bdt)
    x[0, 0], w[:, 0] = info_a.max, info_b.min
    got = vm["main"](x, w)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))


def test_byte_words_against_numpy():
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, (7, 5)).astype(np.int8)
    words = byte_words(w)
    padded = np.zeros((8, 5), np.int8)
    padded[:7] = w
    want = padded.reshape(2, 4, 5).transpose(0, 2, 1).copy().view("<i4")[:, :, 0]
    assert words.dtype == np.int32
    np.testing.assert_array_equal(words, want)


@pytest.mark.parametrize("rows,k,n", [(37, 61, 97), (1, 130, 64)])
def test_constant_int8_weights_are_packed_once_per_build(rows, k, n):
    """uint8 x constant int8 (+ a bias: a fused kernel, whose constant
    parameters the schedule sees): the weight's words are packed into
    micro-panels at build time (no packing nest is left), results exact."""
    rng = np.random.default_rng(rows)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    bias = rng.integers(-1000, 1000, n).astype(np.int32)
    x = Var("x", TensorStructInfo((rows, k), "uint8"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.matmul", x, Constant(w), out_dtype="int32"))
        bb.emit_func_output(bb.emit(call_op("relax.add", y, Constant(bias))))
    mod = bb.get()
    kernels = dict(lower(mod).prim_funcs())
    assert any(name.endswith("_prepacked") for name in kernels), sorted(kernels)
    for name, func in kernels.items():
        stack = [func.body]
        while stack:
            st = stack.pop()
            assert not (type(st) is tir.AttrStmt and st.key == PACK_MARK), name
            for f in type(st)._fields:
                v = getattr(st, f)
                stack.extend([v] if isinstance(v, tir.Stmt) else
                             [e for e in v if isinstance(e, tir.Stmt)] if isinstance(v, tuple)
                             else [])
    packed = [f for name, f in kernels.items() if name.endswith("_prepacked")][0]
    assert any(p.dtype == "int32" and len(p.shape) == 3 and int(p.shape[1].value) == -(-k // 4)
               for p in packed.params)
    a = rng.integers(0, 256, (rows, k)).astype(np.uint8)
    got = phasec.VirtualMachine(phasec.build(mod))["main"](a)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ w.astype(np.int64) + bias)
