"""The integer GEMM's tiles on AMX (te/schedules/gemm_amx.py,
backend/llvm/amx.py): u8 x s8 -> int32 products against numpy's int64
product and ONNX Runtime's MatMulInteger bit for bit, over odd and prime
shapes (M = 1, K not a multiple of 4 nor of 64, the tails of the tiles in
every dimension, a symbolic batch), with AMX on (this host, when it has
AMX), off (``PHASEC_CPU_FEATURES=-amx-int8``), refused by the OS (a
process whose permission request fails), and a kernel cache filled by a
process with AMX then read by one without the permission."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.backend.llvm.amx import AMX_FUNCTION, amx_function
from phasec.backend.llvm.jit import host_target
from phasec.backend.llvm.runtime import compile_prim_funcs
from phasec.frontend.onnx import from_onnx
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.target.amx import amx_enabled, without_amx
from phasec.target.tuning import host_tuning
from phasec.te.schedules.gemm_amx import AMX_ATTR, AMX_SU_ATTR

#: whether this process runs the AMX path (the host has it and the OS granted it)
HOST_AMX = host_tuning().int8_amx and amx_enabled(host_target().features)


def _marks(funcs) -> int:
    n = 0
    keys = (AMX_ATTR, AMX_SU_ATTR)
    for func in funcs.values():
        stack = [func.body]
        while stack:
            st = stack.pop()
            n += type(st) is tir.AttrStmt and st.key in keys
            for f in type(st)._fields:
                v = getattr(st, f)
                stack.extend([v] if isinstance(v, tir.Stmt) else
                             [e for e in v if isinstance(e, tir.Stmt)] if isinstance(v, tuple)
                             else [])
    return n


def _matmul(shape_a: tuple, K: int, N: int, seed: int, signed_rows: bool = False):
    """uint8 activations x a constant int8 weight (+ an int32 bias: the
    fused, packed kernel); ``signed_rows``: the weight [M, K] is the left
    operand (the rows) and the activations [K, N] the right one."""
    rng = np.random.default_rng(seed)
    M = shape_a[-2]
    w = rng.integers(-128, 128, (M, K) if signed_rows else (K, N)).astype(np.int8)
    w[..., 0] = -128
    b = rng.integers(-1000, 1000, N).astype(np.int32)
    x = Var("x", TensorStructInfo((K, N) if signed_rows else shape_a, "uint8"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        ops = (Constant(w), x) if signed_rows else (x, Constant(w))
        y = bb.emit(call_op("relax.matmul", *ops, out_dtype="int32"))
        bb.emit_func_output(bb.emit(call_op("relax.add", y, Constant(b))))
    return bb.get(), w, b


def check_int8_matmul(M: int, K: int, N: int, expect_amx: bool, batch: int = 0,
                      signed_rows: bool = False) -> None:
    """Compiled u8 x s8 matmul + bias (or s8 x u8: ``signed_rows``) equal
    to numpy's int64 formula; the AMX mark present (and the microkernel
    called) exactly when expected."""
    shape = (M, K) if not batch else (tir.Var("n", "int64"), M, K)
    mod, w, b = _matmul(shape, K, N, M * 7919 + K * 31 + N, signed_rows)
    funcs = dict(lower(mod).prim_funcs())
    assert (_marks(funcs) > 0) == expect_amx, (M, K, N)
    ir = compile_prim_funcs(funcs).llvm_ir
    assert (f"call void @{AMX_FUNCTION}" in ir) == (expect_amx and HOST_AMX), (M, K, N)
    rng = np.random.default_rng(K)
    a_shape = (K, N) if signed_rows else (batch, M, K) if batch else (M, K)
    a = rng.integers(0, 256, a_shape).astype(np.uint8)
    a[..., 0, :] = 255
    got = phasec.VirtualMachine(phasec.build(mod))["main"](a)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    want = (w.astype(np.int64) @ a.astype(np.int64) if signed_rows
            else a.astype(np.int64) @ w.astype(np.int64)) + b
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


# M: whole 32-row tiles, a 16-row AMX tile, register tiles of the rest; K:
# multiples of 64, a tail of words after the AMX blocks, not a multiple of
# 4, under 64 (no AMX block: register tiles only); N: whole micro-panels and
# narrower columns (register tiles)
_SHAPES = [
    (64, 128, 64, True),
    (53, 131, 67, True),     # 32 + 16 + 5 rows, K = 2*64 + 3, 2 panels + 3 columns
    (37, 256, 97, True),
    (47, 257, 35, True),
    (17, 64, 32, True),      # 16 + 1 rows
    (33, 67, 40, True),
    (15, 128, 64, False),    # < 16 rows of a tile: register tiles only
    (61, 63, 64, False),     # K < 64 bytes: no AMX block
    (1, 300, 257, False),    # M = 1 (the matrix-vector path)
]


@pytest.mark.parametrize("M,K,N,amx", _SHAPES)
def test_int8_matmul_amx_against_numpy(M, K, N, amx):
    check_int8_matmul(M, K, N, amx and host_tuning().int8_amx)


@pytest.mark.parametrize("M,K,N,amx", [(64, 131, 96, True), (53, 67, 301, True),
                                       (15, 128, 64, False)])
def test_int8_matmul_signed_rows_against_numpy(M, K, N, amx):
    """int8 weight rows x uint8 columns (a QDQ convolution's GEMM): tdpbsud."""
    check_int8_matmul(M, K, N, amx and host_tuning().int8_amx, signed_rows=True)


def test_amx_mark_body_is_the_exact_sums():
    """The marked tiles' bodies (what a target without AMX runs) on the
    TIR interpreter: the same results as numpy's."""
    mod, w, b = _matmul((53, 131), 131, 67, 5)
    assert (_marks(dict(lower(mod).prim_funcs())) > 0) == host_tuning().int8_amx
    a = np.random.default_rng(6).integers(0, 256, (53, 131)).astype(np.uint8)
    got = phasec.VirtualMachine(phasec.build(mod, kernels="interp"))["main"](a)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ w.astype(np.int64) + b)


def test_int8_matmul_amx_symbolic_batch():
    check_int8_matmul(40, 200, 64, host_tuning().int8_amx, batch=3)


def test_int8_matmul_amx_symbolic_rows():
    """M symbolic: whole AMX tiles, then the last rows one at a time."""
    mod, w, b = _matmul((tir.Var("m", "int64"), 195), 195, 64, 9)
    assert (_marks(dict(lower(mod).prim_funcs())) > 0) == host_tuning().int8_amx
    vm = phasec.VirtualMachine(phasec.build(mod))
    for m in (1, 31, 32, 77):
        a = np.random.default_rng(m).integers(0, 256, (m, 195)).astype(np.uint8)
        got = vm["main"](a)
        got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
        np.testing.assert_array_equal(got, a.astype(np.int64) @ w.astype(np.int64) + b)


def check_saved(path: str) -> None:
    """Run the executable ``path`` (saved by the test below) against numpy."""
    mod, w, b = _matmul((53, 131), 131, 67, 11)
    a = np.random.default_rng(12).integers(0, 256, (53, 131)).astype(np.uint8)
    got = phasec.VirtualMachine(phasec.Executable.load(path))["main"](a)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ w.astype(np.int64) + b)


def test_executable_with_amx_tiles_runs_without_amx(tmp_path):
    """An executable built here (its kernels' TIR marked for AMX) loaded by
    a process compiling without AMX: the marks' bodies, the same results."""
    mod, _, _ = _matmul((53, 131), 131, 67, 11)
    exe = phasec.build(mod)
    assert (_marks(exe.prim_funcs) > 0) == host_tuning().int8_amx
    path = str(tmp_path / "mm.phx")
    exe.save(path)
    check_saved(path)
    _fresh(f"import test_gemm_amx as t; t.check_saved({path!r}); "
           "from phasec.backend.llvm.jit import host_target; "
           "assert not t.amx_enabled(host_target().features)",
           {"PHASEC_CPU_FEATURES": "-amx-int8"})


def _matmul_integer_model(M: int, K: int, N: int, za: int, zb: int, w: np.ndarray):
    inits = [helper.make_tensor("za", TensorProto.UINT8, [], [za]),
             helper.make_tensor("zb", TensorProto.INT8, [], [zb]), numpy_helper.from_array(w, "b")]
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [M, N])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("M,K,N,za,zb", [(71, 193, 83, 255, -128), (96, 1024, 128, 128, 0),
                                         (19, 130, 33, 0, 127)])
def test_matmul_integer_amx_against_ort(M, K, N, za, zb):
    """ONNX MatMulInteger (zero points corrected by row and column sums
    around the integer GEMM) equal to ORT's int32 results bit for bit."""
    rng = np.random.default_rng(M)
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    a[0], w[:, 0] = 255, -128
    model = _matmul_integer_model(M, K, N, za, zb, w)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"a": a})[0]
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](a)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, (a.astype(np.int64) - za) @ (w.astype(np.int64) - zb))


def test_microkernel_ir_and_features():
    text, decls = amx_function(f"{AMX_FUNCTION}u8s8.r32")
    assert text.count("tdpbusd(") == 4 and "llvm.x86.ldtilecfg" in decls
    assert amx_function(f"{AMX_FUNCTION}u8s8.r16")[0].count("tdpbusd(") == 2
    assert amx_function(f"{AMX_FUNCTION}s8u8.r16")[0].count("tdpbsud(") == 2
    for bad in ("u8s8.r8", "u8u8.r16", "u8s8.r", "u8s8"):
        with pytest.raises(ValueError):
            amx_function(AMX_FUNCTION + bad)
    assert amx_enabled("+avx2,+amx-tile,+amx-int8") and not amx_enabled("+amx-tile,-amx-int8")
    assert without_amx("+avx2,+amx-tile,+amx-int8,+amx-bf16") == \
        "+avx2,-amx-tile,-amx-int8,-amx-bf16"


def _fresh(statements: str, env: dict[str, str] | None = None) -> None:
    """``statements`` in a fresh process (the target is chosen once per
    process), with this module imported as ``t`` after them."""
    folder = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.dirname(folder)
    code = (f"import sys; sys.path[:0] = sys.argv[1:]; {statements}")
    done = subprocess.run([sys.executable, "-c", code, folder, tests],
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


_CHECKS = ("t.check_int8_matmul(53, 131, 67, {amx}); t.check_int8_matmul(17, 64, 32, {amx}); "
           "t.check_int8_matmul(40, 200, 64, {amx}, batch=2); "
           "t.check_int8_matmul(53, 67, 301, {amx}, signed_rows=True)")
_NO_AMX = ("import test_gemm_amx as t; from phasec.target.tuning import host_tuning; "
           "from phasec.backend.llvm.jit import host_target; "
           "assert not host_tuning().int8_amx and not t.amx_enabled(host_target().features); "
           + _CHECKS.format(amx=False))
#: a process whose permission request is refused (before anything asks)
_REFUSED = "import phasec.target.amx as amx; amx._request = lambda: -22; " + _NO_AMX


def test_amx_turned_off_by_feature_override():
    """``PHASEC_CPU_FEATURES=-amx-int8``: the register tiles of vpdpbusd."""
    _fresh(_NO_AMX, {"PHASEC_CPU_FEATURES": "-amx-int8"})


def test_amx_permission_refused_falls_back(tmp_path):
    """The OS refuses the tile data: no AMX kernel is built or run (an AMX
    instruction would kill the process), even with a kernel cache that a
    process with the permission filled with AMX kernels of the same
    programs (their keys hold the features)."""
    env = {"PHASEC_CACHE_DIR": str(tmp_path)}
    _fresh("import test_gemm_amx as t; " + _CHECKS.format(amx="t.host_tuning().int8_amx"), env)
    _fresh(_REFUSED, env)
