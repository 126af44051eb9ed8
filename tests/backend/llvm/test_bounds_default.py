"""Memory safety by default (issue 27 #3): every buffer access of a compiled
kernel is either proven in bounds at compile time (phasec.arith.inbounds) or
checked at run time; ``check_bounds=True`` / ``--check-bounds`` checks every
access, ``check_bounds=False`` / ``--unchecked`` none (trusted code only).

The prover's claims are checked against brute force: a random index over
random loops, guards and clamps is evaluated in plain Python for every
iteration and every small value of the symbolic dimension; "proven" must mean
"in bounds every time".
"""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import phasec
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.cli import main
from phasec.errors import BufferAccessError
from phasec.ir import tir
from phasec.pipeline import lower

#: the text of one bounds check in a kernel's LLVM IR (see bounds.BoundsChecker)
CHECK_SITE = "ptr @phasec_oob_site monotonic"


def _prim_funcs(text: str) -> dict:
    return dict(phasec.parse(text).prim_funcs())


def _checks(funcs: dict, check_bounds: bool | None) -> int:
    """How many run-time index checks the compiled kernels contain."""
    return compile_prim_funcs(funcs, check_bounds=check_bounds).llvm_ir.count(CHECK_SITE)


def _accesses(func) -> int:
    """The loads and stores of ``func``, counted by a plain walk of its body."""
    seen, stmts, exprs = set(), [func.body], []
    while stmts or exprs:
        node = stmts.pop() if stmts else exprs.pop()
        if isinstance(node, tir.Stmt):
            stmts.extend(c for c in tir.stmt_children(node) if c is not None)
            exprs.extend(tir.stmt_exprs(node))
        else:
            exprs.extend(tir.expr_children(node))
        if isinstance(node, (tir.BufferLoad, tir.BufferStore)):
            seen.add(id(node))
    return len(seen)


# -- the prover against brute force ------------------------------------------------

KERNEL = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer(({extent},), "float32")):
        n = T.int64()
        for i in range({e1}):
            for j in range({e2}):
                if {cond}:
                    A[{index}] = T.float32(1)
'''
ATOMS = ["i", "j", "n", "0", "1", "3", "7"]


@st.composite
def _expr(draw, depth: int = 0) -> str:
    if depth >= 2 or draw(st.booleans()):
        return draw(st.sampled_from(ATOMS))
    a, b = draw(_expr(depth + 1)), draw(_expr(depth + 1))
    k = draw(st.integers(1, 4))
    return draw(st.sampled_from([f"({a} + {b})", f"({a} - {b})", f"({a} * {k})",
                                 f"({a} // {k})", f"({a} % {k})", f"T.min({a}, {b})",
                                 f"T.max({a}, {b})"]))


@settings(max_examples=40)
@given(extent=st.sampled_from(["n", "8", "n"]), e1=st.sampled_from(["n", "4", "n // 2", "n - 2"]),
       e2=st.sampled_from(["1", "3", "n - i", "(n + 3) // 4"]),
       cond=st.one_of(st.just("True"), _expr().flatmap(
           lambda a: _expr().map(lambda b: f"{a} < {b}"))),
       index=_expr())
def test_proven_means_in_bounds_every_time(extent, e1, e2, cond, index):
    func = _prim_funcs(KERNEL.format(extent=extent, e1=e1, e2=e2, cond=cond, index=index))["f"]
    store = func.body
    while not hasattr(store, "indices"):  # the only store, under the loops and the if
        store = getattr(store, "body", None) or store.then_case
    proven = prove_accesses(func).proven(store, 0)
    T = types.SimpleNamespace(min=min, max=max)
    in_bounds = True
    for n in range(9):
        env = {"n": n, "T": T, "True": True}
        ext = eval(extent, env)
        for i in range(eval(e1, env)):
            for j in range(eval(e2, {**env, "i": i})):
                local = {**env, "i": i, "j": j}
                if eval(cond, local) and not 0 <= eval(index, local) < ext:
                    in_bounds = False
    assert in_bounds or not proven, (extent, e1, e2, cond, index)


GUARDED = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer(("n",), "float32"), I: T.Buffer((4,), "int64"),
          B: T.Buffer(("n",), "float32"), C: T.Buffer((8,), "float32"),
          D: T.Buffer((256,), "float32"), U: T.Buffer((4,), "uint8")):
        n = T.int64()
        for i in range(n):
            B[i] = A[n - 1 - i]
        for io in range((n + 7) // 8):
            for ii in range(8):
                if io * 8 + ii < n:
                    B[io * 8 + ii] = A[io * 8 + ii]
        for io in range(n // 8):
            for ii in range(8):
                B[io * 8 + ii] = A[io * 8 + ii]
        for r in range(n % 8):
            B[n // 8 * 8 + r] = A[n // 8 * 8 + r]
        for i in range(4):
            C[T.min(T.max(I[i], 0), 7)] = D[U[i]]
            C[I[i] % 8] = T.Select(i < n and i >= 0, A[i], T.float32(0))
            if n > 0:
                B[T.min(T.max(I[i], 0), n - 1)] = A[T.max(T.min(I[i], n - 1), 0)]
'''
UNPROVABLE = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32"),
          I: T.Buffer((4,), "int64"), C: T.Buffer((8,), "float32"), k: T.int64):
        n = T.int64()
        for i in range(n):
            B[i] = A[i + 1]
        for i in range(4):
            C[I[i]] = A[T.min(T.max(I[i], 0), n - 1)]
        for i in range(k):
            C[i] = T.float32(0)
        for i in range(4):
            if I[i] < 8 and I[i] >= 0:
                C[I[i]] = T.float32(1)
'''


def test_what_may_go_out_of_bounds_is_not_proven():
    """A[i + 1] reaches n; the clamp to n - 1 is -1 when n is 0; C[I[i]] is
    data-dependent; C[i] runs up to a scalar parameter k, which the caller
    chooses; a guard that reads memory is not trusted (the memory may change
    between the test and the access). B[i] and the reads of I are proven."""
    proofs = prove_accesses(_prim_funcs(UNPROVABLE)["f"])
    unproven = sorted((n.buffer.name, str(n.indices[0])) for n in proofs.unproven())
    assert [name for name, _ in unproven] == ["A", "A", "C", "C", "C"], unproven
    assert proofs.counts() == (6, 5)


# -- the default pipeline's kernels: everything proven ----------------------------------

MODELS = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3, 16, 16), dtype="float32"),
             w: R.Tensor((8, 3, 3, 3), dtype="float32"),
             a: R.Tensor(("m", "k"), dtype="float32"), b: R.Tensor(("k", 24), dtype="float32")):
        with R.dataflow():
            y = R.nn.relu(R.nn.conv2d(x, w, padding=[1, 1, 1, 1], strides=[2, 2]))
            c = R.add(R.matmul(a, b), R.const(1.0, "float32"))
            e = R.multiply(R.exp(c), c)
            R.output(y, e)
        return (y, e)
'''


def test_gemm_conv_and_elementwise_kernels_are_proven_and_unchecked():
    """Conv (im2col with padding guards, symbolic batch), GEMM (tiles over
    m // 8 and a remainder loop over m % 8) and elementwise kernels: no
    access is left to a run-time check, and the results are numpy's."""
    mod = phasec.parse(MODELS)
    funcs = dict(lower(mod).prim_funcs())
    assert {"conv2d", "matmul", "exp"} <= {k for name in funcs for k in
                                          ("conv2d", "matmul", "exp") if k in name}
    for name, func in funcs.items():
        proven, unproven = prove_accesses(func).counts()
        assert (proven, unproven) == (_accesses(func), 0), name
    exe = phasec.build(mod)
    assert exe.kernels("llvm") and exe.check_bounds is None
    assert compile_prim_funcs(funcs).llvm_ir.count(CHECK_SITE) == 0  # (cached: exe's build)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 16, 16), "float32"), rng.standard_normal((8, 3, 3, 3), "float32")
    a, b = rng.standard_normal((13, 5), "float32"), rng.standard_normal((5, 24), "float32")
    y, e = phasec.VirtualMachine(exe)["main"](x, w, a, b)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 8, 8, 8), "float64")
    for r in range(3):
        for s in range(3):
            patch = xp[:, :, r:r + 16:2, s:s + 16:2]
            conv += np.einsum("bchw,oc->bohw", patch, w[:, :, r, s])
    np.testing.assert_allclose(np.asarray(y), np.maximum(conv, 0), rtol=1e-4, atol=1e-4)
    c = a.astype("float64") @ b + 1
    np.testing.assert_allclose(np.asarray(e), np.exp(c) * c, rtol=1e-4, atol=1e-4)


# -- data-dependent indices: checked by default ------------------------------------------

SCATTER = '''
@I.ir_module
class Module:
    @T.prim_func
    def scatter(A: T.Buffer((4,), "int64"), V: T.Buffer((4,), "float32"),
                B: T.Buffer((8,), "float32")):
        for i in range(4):
            B[A[i]] = V[i]

    @R.function
    def main(a: R.Tensor((4,), dtype="int64"),
             v: R.Tensor((4,), dtype="float32")) -> R.Tensor((8,), dtype="float32"):
        cls = Module
        b = R.call_tir(cls.scatter, (a, v), out_sinfo=R.Tensor((8,), dtype="float32"))
        return b
'''


def test_a_data_dependent_store_is_checked_by_default():
    exe = phasec.build(phasec.parse(SCATTER))
    assert exe.check_bounds is None
    vm = phasec.VirtualMachine(exe)["main"]
    out = np.asarray(vm(np.array([7, 0, 2, 5], "int64"), np.array([1, 2, 3, 4], "float32")))
    np.testing.assert_array_equal(out[[7, 0, 2, 5]], [1, 2, 3, 4])
    with pytest.raises(BufferAccessError) as info:
        vm(np.array([0, 8, 1, 2], "int64"), np.ones(4, "float32"))
    err = info.value
    assert (err.kernel, err.buffer, err.index, err.extent, err.write) == ("scatter", "B", 8, 8, True)
    funcs = _prim_funcs(SCATTER)
    # B[A[i]] is the only unproven access (A[i] and V[i] run over range(4))
    assert (_checks(funcs, None), _checks(funcs, True), _checks(funcs, False)) == (1, 3, 0)


def test_a_wild_write_in_the_default_build_is_an_error_not_a_crash(tmp_path):
    """10**12 past the end: without a check, a write far outside the process's
    memory (a crash at best). In a subprocess, so a regression cannot take the
    test run down."""
    src = tmp_path / "scatter.py"
    src.write_text(SCATTER)
    code = ("import numpy as np, phasec\n"
            f"exe = phasec.build(phasec.parse(open({str(src)!r}).read()))\n"
            "try:\n"
            "    phasec.VirtualMachine(exe)['main'](np.array([0, 10**12, 1, 2], 'int64'), "
            "np.ones(4, 'float32'))\n"
            "except phasec.errors.BufferAccessError as e:\n"
            "    print('caught', e.buffer, e.index, e.extent)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"caught B {10**12} 8"


def test_cli_default_unchecked_and_check_bounds(tmp_path, capsys):
    """``run`` checks by default; ``build --unchecked`` records the opt-out,
    but running the file without ``--unchecked`` still checks."""
    src = tmp_path / "bug.py"
    src.write_text(SCATTER)
    bad = tmp_path / "bad.npz"
    np.savez(bad, a=np.array([0, 9, 1, 2], "int64"), v=np.ones(4, "float32"))
    good = tmp_path / "good.npz"
    np.savez(good, a=np.array([3, 1, 4, 0], "int64"), v=np.ones(4, "float32"))
    assert main(["run", str(src), "--inputs", str(bad), "-q"]) == 1
    assert "out-of-bounds write to buffer 'B': index 9" in capsys.readouterr().err
    exe = tmp_path / "trusted.pvm"
    assert main(["build", str(src), "-o", str(exe), "--unchecked"]) == 0
    assert main(["run", str(exe), "--inputs", str(bad), "-q"]) == 1
    assert "out-of-bounds write to buffer 'B': index 9" in capsys.readouterr().err
    assert main(["run", str(exe), "--inputs", str(good), "-q", "--unchecked"]) == 0
    with pytest.raises(SystemExit):  # one or the other
        main(["run", str(src), "--unchecked", "--check-bounds"])
    capsys.readouterr()


NARROW = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((64,), "float32"), B: T.Buffer((8, 8), "float32"),
          C: T.Buffer((64,), "float32")):
        for i in range(T.int32(8)):
            for j in range(T.int32(8)):
                B[i, j] = A[i * T.int32(8) + j]
        for i in range(T.int32(8)):
            C[i * T.int32(1000000000) - i * T.int32(1000000000) + i] = A[0]
'''


def test_int32_index_arithmetic_is_taken_as_written_only_where_it_cannot_wrap():
    """i * 8 + j over 8 x 8 stays far inside int32: proven. i * 10**9 exceeds
    int32 for i >= 3 (the machine value wraps): that index is checked."""
    proofs = prove_accesses(_prim_funcs(NARROW)["f"])
    assert [n.buffer.name for n in proofs.unproven()] == ["C"]
    assert proofs.counts() == (3, 1)
