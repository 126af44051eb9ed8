"""TIR -> LLVM kernel compiler: results compared with numpy.

Kernels are built by hand from phasec.ir.tir nodes. Several kernels share
one compile_prim_funcs call (one LLVM module) to keep the file fast.
Intrinsics and operators are in test_llvm_intrinsics.py; errors, the cache
and the parallel runtime in test_llvm_runtime.py.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.backend.llvm import set_num_threads
from phasec.backend.llvm.codegen import ModuleCodegen
from phasec.errors import VMError
from phasec.ir import tir as T

from helpers.tir_build import binop, buf, loops, matmul_block, rand, store, tiled_matmul, var


# --------------------------------------------------------------------------
# Elementwise, broadcast, reductions
# --------------------------------------------------------------------------


def test_elementwise_and_broadcast_in_one_module():
    m, n = 7, 33
    A, B, bias, C = buf("A", (m, n)), buf("B", (m, n)), buf("bias", (n,)), buf("C", (m, n))
    add = T.PrimFunc((A, B, C), loops([m, n], lambda i, j: store(C, A[i, j] * B[i, j] + 1.5, i, j)))
    A2, C2 = buf("A", (m, n)), buf("C", (m, n))
    bcast = T.PrimFunc((A2, bias, C2), loops([m, n], lambda i, j: store(C2, A2[i, j] + bias[j], i, j)))
    lib = compile_prim_funcs({"add": add, "bcast": bcast})
    assert set(lib) == {"add", "bcast"} and len(lib) == 2
    a, b, bb = rand((m, n)), rand((m, n)), rand((n,))
    c = np.empty((m, n), np.float32)
    lib["add"](a, b, c)
    np.testing.assert_allclose(c, a * b + 1.5, rtol=1e-6, atol=1e-6)  # (FMA: exact product)
    lib["bcast"](a, bb, c)
    np.testing.assert_allclose(c, a + bb, rtol=1e-6)


def test_reduction_with_block_init():
    m, n = 5, 37
    A, S = buf("A", (m, n)), buf("S", (m,))
    i, k = var("i"), var("k")
    vi, vk = var("vi"), var("vk")
    block = T.Block("sum", (T.IterVar(vi, m, "S"), T.IterVar(vk, n, "R")), (i, k),
                    body=store(S, S[vi] + A[vi, vk], vi), init=store(S, 0.0, vi))
    f = T.PrimFunc((A, S), T.For(i, 0, m, "serial", T.For(k, 0, n, "serial", block)))
    a = rand((m, n))
    s = np.full((m,), 123.0, np.float32)  # garbage: init must reset it
    compile_prim_funcs({"rsum": f})["rsum"](a, s)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5)


def test_block_init_without_reduce_axes_runs_every_time():
    n = 8
    A, B = buf("A", (n,)), buf("B", (n,))
    i, vi = var("i"), var("vi")
    block = T.Block("b", (T.IterVar(vi, n, "S"),), (i,), body=store(B, B[vi] + A[vi], vi),
                    init=store(B, 1.0, vi))
    f = T.PrimFunc((A, B), T.For(i, 0, n, "serial", block))
    a, b = rand((n,)), np.zeros(n, np.float32)
    compile_prim_funcs({"k": f})["k"](a, b)
    np.testing.assert_allclose(b, a + 1.0, rtol=1e-6)


def test_matmul_plain_and_tiled_parallel_vectorized(threads_always):
    M, N, K = 48, 128, 64
    lib = compile_prim_funcs({"plain": matmul_block(M, N, K), "tiled": tiled_matmul(M, N, K)})
    a, b = rand((M, K)), rand((K, N))
    c1, c2 = np.empty((M, N), np.float32), np.empty((M, N), np.float32)
    lib["plain"](a, b, c1)
    lib["tiled"](a, b, c2)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c1, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c2, ref, rtol=1e-4, atol=1e-4)
    # The vectorized loop really became SIMD code and the parallel loop was outlined.
    assert "x float>" in lib.optimized_ir
    assert "llvm.loop.vectorize.enable" in lib.llvm_ir
    assert ".par1" in lib.llvm_ir


def test_conv2d_with_padding_guard():
    # NCHW conv, 3x3 kernel, padding 1: the padded read is a lazy Select.
    N_, C_, H, W, O, R = 2, 3, 9, 8, 4, 3
    X, Wt, Y = buf("X", (N_, C_, H, W)), buf("W", (O, C_, R, R)), buf("Y", (N_, O, H, W))
    n, o, h, w, c, r, s = (var(x) for x in "nohwcrs")
    hh, ww = h + r - 1, w + s - 1
    inb = binop("and", binop("and", binop(">=", hh, T.IntImm(0)), binop("<", hh, T.IntImm(H))),
                binop("and", binop(">=", ww, T.IntImm(0)), binop("<", ww, T.IntImm(W))))
    padded = T.Select(inb, X[n, c, hh, ww], T.FloatImm(0.0))
    acc = store(Y, Y[n, o, h, w] + padded * Wt[o, c, r, s], n, o, h, w)
    inner = T.For(c, 0, C_, "serial", T.For(r, 0, R, "serial", T.For(s, 0, R, "serial", acc)))
    body = T.For(n, 0, N_, "serial", T.For(o, 0, O, "parallel", T.For(h, 0, H, "serial", T.For(
        w, 0, W, "serial", T.SeqStmt((store(Y, 0.0, n, o, h, w), inner))))))
    lib = compile_prim_funcs({"conv": T.PrimFunc((X, Wt, Y), body)})
    x, wt = rand((N_, C_, H, W)), rand((O, C_, R, R))
    y = np.empty((N_, O, H, W), np.float32)
    lib["conv"](x, wt, y)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    ref = np.zeros((N_, O, H, W))
    for rr in range(R):
        for ss in range(R):
            ref += np.einsum("nchw,oc->nohw", xp[:, :, rr:rr + H, ss:ss + W], wt[:, :, rr, ss])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_lazy_select_does_not_read_out_of_bounds():
    # B[i] = A[i - 1000000] if i > 100 else 0: the load would fault if evaluated.
    n = 16
    A, B = buf("A", (n,)), buf("B", (n,))
    i = var("i")
    far = binop("-", i, T.IntImm(1 << 40))
    body = T.For(i, 0, n, "serial", store(B, T.Select(binop(">", i, T.IntImm(100)), A[far],
                                                      T.FloatImm(2.0)), i))
    # and also through a short-circuit "and"
    C = buf("C", (n,), "bool")
    cond = binop("and", binop(">", i, T.IntImm(100)), binop(">", A[far], T.FloatImm(0.0)))
    body2 = T.For(i, 0, n, "serial", store(C, cond, i))
    lib = compile_prim_funcs({"sel": T.PrimFunc((A, B), body),
                              "sc": T.PrimFunc((A, C), body2)})
    b = np.empty(n, np.float32)
    lib["sel"](rand((n,)), b)
    assert (b == 2.0).all()
    c = np.ones(n, bool)
    lib["sc"](rand((n,)), c)
    assert not c.any()


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


def test_allocate_let_if_and_unroll():
    n = 64
    A, B = buf("A", (n,)), buf("B", (n,))
    i, j = var("i"), var("j")
    small, big = buf("tmp", (n,)), buf("big", (8192,))  # alloca / heap
    x = var("x", "float32")
    fill = T.For(i, 0, n, "unroll", store(small, A[i] * 2.0, i))
    fill_big = T.For(j, 0, 8192, "serial", store(big, T.Cast("float32", j), j))
    body = T.For(i, 0, n, "serial", T.LetStmt(x, small[i] + big[i * 100], T.IfThenElse(
        binop(">", x, T.FloatImm(0.0)), store(B, x, i), store(B, -x, i))))
    f = T.PrimFunc((A, B), T.Allocate(small, T.Allocate(big, T.SeqStmt((fill, fill_big, body)))))
    lib = compile_prim_funcs({"k": f})
    a = rand((n,))
    b = np.empty(n, np.float32)
    lib["k"](a, b)
    np.testing.assert_allclose(b, np.abs(a * 2 + np.arange(n) * 100), rtol=1e-6)
    assert "@phasec_rt_alloc" in lib.llvm_ir and "llvm.loop.unroll.full" in lib.llvm_ir


def test_symbolic_allocate_and_if_without_else():
    n = var("n")
    A, B = buf("A", (n,)), buf("B", (n,))
    tmp = buf("tmp", (n,))
    i, j = var("i"), var("j")
    body = T.Allocate(tmp, T.SeqStmt((
        T.For(i, 0, n, "serial", store(tmp, A[i] + 1.0, i)),
        T.For(j, 0, n, "serial", T.SeqStmt((store(B, 0.0, j), T.IfThenElse(
            binop("==", binop("%", j, T.IntImm(2)), T.IntImm(0)), store(B, tmp[j], j))))),
        T.Evaluate(T.IntImm(0)))))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})["k"]
    for size in (5, 1000):
        a = rand((size,))
        b = np.empty(size, np.float32)
        k(a, b)
        ref = np.where(np.arange(size) % 2 == 0, a + 1, 0)
        np.testing.assert_allclose(b, ref, rtol=1e-6)


def test_zero_size_arrays():
    n = var("n")
    A, B = buf("A", (n, 3)), buf("B", (n, 3))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), loops([n, 3], lambda i, j: store(
        B, A[i, j] + 1.0, i, j)))})["k"]
    k(np.empty((0, 3), np.float32), np.empty((0, 3), np.float32))


def test_kernels_parsed_from_tvmscript():
    from phasec.script.parser import parse

    mod = parse(
        "from tvm.script import ir as I, tir as T\n"
        "@I.ir_module\n"
        "class Module:\n"
        "    @T.prim_func\n"
        "    def rsum(var_A: T.handle, var_S: T.handle):\n"
        "        n = T.int64()\n"
        "        A = T.match_buffer(var_A, (n, T.int64(16)))\n"
        "        S = T.match_buffer(var_S, (n,))\n"
        "        for i, k in T.grid(n, T.int64(16)):\n"
        "            with T.block(\"S\"):\n"
        "                vi, vk = T.axis.remap(\"SR\", [i, k])\n"
        "                with T.init():\n"
        "                    S[vi] = T.float32(0)\n"
        "                S[vi] = S[vi] + T.exp(A[vi, vk])\n")
    k = compile_prim_funcs(dict(mod.prim_funcs()))["rsum"]
    for rows in (3, 40):
        a, s = rand((rows, 16)), np.full(rows, 7.0, np.float32)
        k(a, s)
        np.testing.assert_allclose(s, np.exp(a).sum(axis=1), rtol=1e-5)


def test_symbolic_shapes_two_sizes_and_scalar_params():
    m, n = var("m"), var("n")
    alpha = var("alpha", "float32")
    off = var("off", "int32")
    A, B = buf("A", (m, n)), buf("B", (m, n))
    body = loops([m, n], lambda i, j: store(B, A[i, j] * alpha + T.Cast("float32", off), i, j))
    k = compile_prim_funcs({"k": T.PrimFunc((A, alpha, off, B), body)})["k"]
    for shape in ((3, 4), (17, 65)):
        a = rand(shape)
        b = np.empty(shape, np.float32)
        k(a, 2.5, 3, b)
        np.testing.assert_allclose(b, a * 2.5 + 3, rtol=1e-5, atol=1e-6)
    k(a, np.float32(1.0), np.int64(0), b)  # numpy scalars accepted
    np.testing.assert_allclose(b, a, rtol=1e-6)


def test_composite_and_param_bound_dims():
    n = var("n")
    A, B = buf("A", (n,)), buf("B", (binop("*", n, T.IntImm(2)),))
    i = var("i")
    body = T.For(i, 0, binop("*", n, T.IntImm(2)), "serial",
                 store(B, A[binop("//", i, T.IntImm(2))], i))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})["k"]
    a = rand((5,))
    b = np.empty(10, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, np.repeat(a, 2))
    with pytest.raises(VMError, match=r"dimension 0 must be \(n \* 2\) = 10"):
        k(a, np.empty(9, np.float32))
    # a dimension given by a scalar parameter
    s = var("s")
    C = buf("C", (s,))
    k2 = compile_prim_funcs({"k2": T.PrimFunc((s, C), loops([s], lambda i: store(C, 1.0, i)))})["k2"]
    c = np.zeros(4, np.float32)
    k2(4, c)
    assert (c == 1).all()
    with pytest.raises(VMError, match="scalar parameter 's'"):
        k2(3, c)


def test_parallel_loop_matches_serial(threads_always):
    n, m = 257, 300
    A, S = buf("A", (n, m)), buf("S", (n,))
    funcs = {}
    for kind in ("serial", "parallel"):
        i, j, acc = var("i"), var("j"), buf("acc", (1,))
        body = T.For(i, 0, n, kind, T.Allocate(acc, T.SeqStmt((
            store(acc, 0.0, T.IntImm(0)),
            T.For(j, 0, m, "serial", store(acc, acc[T.IntImm(0)] + A[i, j] * A[i, j], T.IntImm(0))),
            store(S, acc[T.IntImm(0)], i)))))
        funcs[kind] = T.PrimFunc((A, S), body)
    lib = compile_prim_funcs(funcs)
    a = rand((n, m))
    s1, s2 = np.empty(n, np.float32), np.empty(n, np.float32)
    lib["serial"](a, s1)
    for threads in (2, 3, 1):
        set_num_threads(threads)
        s2[:] = 0
        lib["parallel"](a, s2)
        np.testing.assert_array_equal(s1, s2)
    assert s1.sum() == s2.sum()


def test_parallel_captures_outer_values_and_nested_parallel(threads_always):
    n = var("n")
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    x = var("x", "float32")
    i, j = var("i"), var("j")
    inner = T.For(j, 0, 16, "parallel", store(B, A[i, j] + x, i, j))  # nested: runs serially
    body = T.LetStmt(x, T.FloatImm(0.5), T.For(i, 0, n, "parallel", inner))
    lib = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})
    for size in (1, 2, 100):
        a = rand((size, 16))
        b = np.empty_like(a)
        lib["k"](a, b)
        np.testing.assert_allclose(b, a + 0.5, rtol=1e-6)


def test_deep_expression_has_no_recursion_limit():
    def deep(depth):
        X, Y = buf("X", (8,)), buf("Y", (8,))
        i = var("i")
        e = X[i]
        for _ in range(depth):
            e = binop("+", e, T.FloatImm(1.0))
        return T.PrimFunc((X, Y), T.For(i, 0, 8, "serial", store(Y, e, i)))

    # Code generation alone on a very deep tree (LLVM's own passes are
    # superlinear on such chains, so the run below uses a smaller one at O1).
    gen = ModuleCodegen()
    gen.add_kernel("deep", deep(20000))
    assert gen.finish().count("fadd") == 20000
    depth = 1500
    x, y = np.zeros(8, np.float32), np.empty(8, np.float32)
    compile_prim_funcs({"deep": deep(depth)}, opt_level=1)["deep"](x, y)
    assert (y == depth).all()


def test_kernels_prefer_the_vector_width_of_the_target_tuning():
    # LLVM's own tuning for some AVX-512 CPUs prefers 256-bit vectors; the
    # schedules' register tiles are sized for the tuning's width
    from phasec.target.tuning import host_tuning
    A, B = T.Buffer("A", (64,)), T.Buffer("B", (64,))
    i = T.Var("i")
    f = T.PrimFunc((A, B), T.For(i, 0, 64, "vectorized", T.BufferStore(B, A[i] * 2.0, (i,))))
    lib = compile_prim_funcs({"double_it": f})
    assert f'"prefer-vector-width"="{host_tuning().vector_bits}"' in lib.llvm_ir
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    lib["double_it"](a, b)
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize("width", [32, 37])
def test_rows_of_a_few_vectors_stay_the_vectorized_loop(width):
    # x[c, y, :] * s[c] over rows of 2-4 vectors: LLVM fully unrolled such a
    # row first and then vectorized the loop over y, through gathers and
    # scatters of stride `width` (a squeeze-excite's scaling: 10x slower)
    C, H = 5, 7
    X, S, Y = T.Buffer("X", (C, H, width)), T.Buffer("S", (C,)), T.Buffer("Y", (C, H, width))
    c, y, x = T.Var("c"), T.Var("y"), T.Var("x")
    body = T.For(c, 0, C, "serial", T.For(y, 0, H, "serial", T.For(
        x, 0, width, "vectorized", T.BufferStore(Y, X[c, y, x] * S[c], (c, y, x)))))
    lib = compile_prim_funcs({"scale": T.PrimFunc((X, S, Y), body)})
    assert "gather" not in lib.optimized_ir and "scatter" not in lib.optimized_ir
    a, s = rand((C, H, width)), rand((C,))
    out = np.zeros((C, H, width), "float32")
    lib["scale"](a, s, out)
    np.testing.assert_array_equal(out, a * s[:, None, None])


@pytest.mark.parametrize("width", [5, 7, 8, 14])
def test_rows_of_part_of_a_vector_are_one_masked_full_vector(width):
    # a 7- or 14-wide output row (a conv epilogue over 7x7 / 14x14 images):
    # LLVM's cost model alone took 4 lanes and a scalar remainder
    from phasec.target.tuning import host_tuning
    C, H = 3, 5
    X, S, Y = T.Buffer("X", (C, H, width)), T.Buffer("S", (C,)), T.Buffer("Y", (C, H, width))
    c, y, x = T.Var("c"), T.Var("y"), T.Var("x")
    v = X[c, y, x] + S[c]
    body = T.For(c, 0, C, "serial", T.For(y, 0, H, "serial", T.For(
        x, 0, width, "vectorized", T.BufferStore(Y, v * T.Call("sigmoid", (v,)), (c, y, x)))))
    lib = compile_prim_funcs({"silu": T.PrimFunc((X, S, Y), body)})
    lanes = host_tuning().vector_bits // 32
    # (a row of several vectors, 14 wide at 8 lanes, is left to LLVM, and so
    # is a row of whole 4-lane vectors)
    masked = width < lanes and width % 4 != 0
    assert ("llvm.loop.vectorize.predicate.enable" in lib.llvm_ir) == masked
    assert not masked or f"<{lanes} x float>" in lib.optimized_ir
    a, s = rand((C, H, width)), rand((C,))
    out = np.full((C, H, width), np.nan, "float32")
    lib["silu"](a, s, out)
    ref = (a + s[:, None, None]).astype(np.float64)
    np.testing.assert_allclose(out, ref / (1 + np.exp(-ref)), rtol=2e-6, atol=1e-7)


def test_a_strided_row_of_part_of_a_vector_is_not_masked():
    # columns read at stride 2, as a max pool's: a masked full-width vector
    # of them is a masked gather (a 256x27x27 3x3/2 pool: 31 -> 119 us)
    C, W, OW = 3, 27, 13
    X, Y = T.Buffer("X", (C, W)), T.Buffer("Y", (C, OW))
    c, x = T.Var("c"), T.Var("x")
    m = X[c, x * 2] + X[c, x * 2 + 1]
    body = T.For(c, 0, C, "serial", T.For(x, 0, OW, "vectorized",
                                          T.BufferStore(Y, m, (c, x))))
    lib = compile_prim_funcs({"pairs": T.PrimFunc((X, Y), body)})
    assert "llvm.loop.vectorize.predicate.enable" not in lib.llvm_ir
    a = rand((C, W))
    out = np.zeros((C, OW), "float32")
    lib["pairs"](a, out)
    np.testing.assert_array_equal(out, a[:, 0:26:2] + a[:, 1:27:2])


def test_gather_and_scatter_kernels_build_without_llvm_warnings(tmp_path) -> None:
    """A short vectorized loop LLVM cannot vectorize (an address read from
    data) is left to LLVM's unroller: forced to stay a loop, LLVM would print
    "loop not vectorized" warnings on stderr at every build."""
    import subprocess
    import sys

    src = tmp_path / "gather.py"
    src.write_text('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 5), "float32"), j: R.Tensor((4, 2), "int64")):
        b = R.gather_elements(x, j, axis=1)
        c = R.scatter_elements(x, j, b, axis=1)
        t = R.take(x, R.const([1, 3], "int64"), axis=1)
        return (b, c, t)
''')
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    done = subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "g.pvm")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not vectorized" not in done.stderr and "warning" not in done.stderr, done.stderr


def test_reduction_tree_folds_and_gemm_tiles_build_without_llvm_warnings(tmp_path) -> None:
    """layer_norm's partial sums end in a tree fold (part[l] += part[l + 2])
    that LLVM does not vectorize as a 2-iteration loop; kept as a loop it
    printed "loop not vectorized" at every build. A matmul with a 2-column
    remainder tile is built too."""
    import subprocess
    import sys

    src = tmp_path / "ln.py"
    src.write_text('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 256), "float32"), g: R.Tensor((256,), "float32"),
             w: R.Tensor((256, 34), "float32")):
        y = R.nn.layer_norm(x, g, g, axes=[-1])
        z = R.nn.relu(R.matmul(y, w))
        return z
''')
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    done = subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "ln.pvm")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not vectorized" not in done.stderr and "warning" not in done.stderr, done.stderr


def _loop_hints(ir: str) -> list[str]:
    """The properties of each loop's metadata in ``ir``, in loop order."""
    import re

    nodes = dict(re.findall(r"^(![0-9]+) = (.*)$", ir, re.M))
    props = []
    for ref in re.findall(r"!llvm\.loop (![0-9]+)", ir):
        props.append(" ".join(nodes[m] for m in re.findall(r"![0-9]+", nodes[ref])
                              if m != ref))
    return props


def test_loops_around_a_large_packing_copy_stay_loops():
    # A 3x3 nest around a 32-wide strided gather from a parameter (a
    # convolution's packing of input columns) is not unrolled: LLVM would make
    # 9 copies of the gather, slow to compile and no faster. The copy out of a
    # small local tile is left to LLVM: only unrolled can a tile stay in registers.
    X, Y, Z = buf("X", (3, 70)), buf("Y", (3, 3, 32)), buf("Z", (2, 32))
    pack, tile = buf("pack", (3, 3, 32)), buf("tile", (2, 32))
    r, s, c, i, j = var("r"), var("s"), var("c"), var("i"), var("j")
    gather = T.For(r, 0, 3, "serial", T.For(s, 0, 3, "serial", T.For(
        c, 0, 32, "vectorized", store(pack, X[r, binop("+", binop("*", c, T.as_prim_expr(2, "int64")), s)], r, s, c))))
    scale = loops([3, 3, 32], lambda a, b, d: store(Y, pack[a, b, d] * 2.0, a, b, d))
    fill = loops([2, 32], lambda a, b: store(tile, X[a, b] + 1.0, a, b))
    write_back = T.For(i, 0, 2, "serial", T.For(j, 0, 32, "vectorized", store(Z, tile[i, j], i, j)))
    body = T.Allocate(pack, T.Allocate(tile, T.SeqStmt((gather, scale, fill, write_back))))
    lib = compile_prim_funcs({"k": T.PrimFunc((X, Y, Z), body)})
    x = rand((3, 70))
    y, z = np.empty((3, 3, 32), np.float32), np.empty((2, 32), np.float32)
    lib["k"](x, y, z)
    ref = np.stack([np.stack([x[a, s0:s0 + 64:2] for s0 in range(3)]) for a in range(3)])
    np.testing.assert_array_equal(y, ref * 2.0)
    np.testing.assert_array_equal(z, x[:2, :32] + 1.0)
    kept = [p for p in _loop_hints(lib.llvm_ir) if p == '!{!"llvm.loop.unroll.disable"}']
    assert len(kept) == 2  # the r and s loops of the gather, not the tile's i
