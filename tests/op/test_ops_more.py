"""hamming_window, size (create.py, base.py), bucketize (search.py),
index_tensor and reverse_sequence (manipulate/): inference against TVM 0.27, references against
formulas and loops written here, hostile indices for index_tensor (the same
IndexOutOfRangeError on the interpreter and both VM kernel backends), and
the compiled module against numpy and TVM 0.27's output."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import phasec
from phasec.errors import IndexOutOfRangeError
from phasec.ir import PrimValue, Tuple, tir
from phasec.op import call_op

from helpers.against_tvm import dataflow_bindings, flat_leaves, norm_phasec, norm_tvm
from helpers.op_infer import raises, tv
from helpers.op_reference import rand, run


SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 6), dtype="float32"), bd: R.Tensor((4,), dtype="float32"),
             i: R.Tensor((2, 3), dtype="int64"), j: R.Tensor((3,), dtype="int64")):
        n = T.int64()
        with R.dataflow():
            hw = R.hamming_window(8, 1, R.prim_value(T.float32(0.54)), R.prim_value(T.float32(0.46)), dtype="float32")
            hw1 = R.hamming_window(5, 0, R.prim_value(T.float32(0.5)), R.prim_value(T.float32(0.5)), dtype="float64")
            sz = R.size(x)
            bk = R.bucketize(x, bd, out_int32=False, right=False)
            bk1 = R.bucketize(x, bd, out_int32=True, right=True)
            it = R.index_tensor(x, (i, j))
            it1 = R.index_tensor(x, (i,))
            out = (hw, hw1, sz, bk, bk1, it, it1)
            R.output(out)
        return out
'''


def test_inference_matches_tvm():
    from tvm.script import from_source

    env = {"n": 5}
    ours = {b.var.name_hint: norm_phasec(b.var.struct_info, env)
            for b in dataflow_bindings(phasec.parse(SOURCE))}
    theirs = {b.var.name: norm_tvm(b.var.ty, env)
              for b in dataflow_bindings(from_source(SOURCE))}
    assert ours == theirs


def test_inference_errors():
    x = tv("x", (4, 6))
    pv = lambda v: PrimValue(tir.IntImm(v) if isinstance(v, int) else tir.FloatImm(v))  # noqa
    raises(["window_size must be positive"], call_op, "hamming_window", pv(0), pv(1), pv(0.5),
           pv(0.5))
    raises(["needs a float dtype"], call_op, "hamming_window", pv(4), pv(1), pv(0.5), pv(0.5),
           dtype="int32")
    raises(["needs 1-D boundaries"], call_op, "bucketize", x, x)
    raises(["boundaries have dtype int32"], call_op, "bucketize", x, tv("b", (3,), "int32"))
    raises(["needs integer index tensors"], call_op, "index_tensor", x, Tuple([x]))
    raises(["3 index tensors for data of rank 2"], call_op, "index_tensor", x,
           Tuple([tv("a", (2,), "int64")] * 3))
    raises(["cannot broadcast"], call_op, "index_tensor", x,
           Tuple([tv("a", (2,), "int64"), tv("b", (3,), "int64")]))


def test_references():
    pv = lambda v: PrimValue(tir.IntImm(v) if isinstance(v, int) else tir.FloatImm(v, "float64"))  # noqa
    w = run("hamming_window", pv(6), pv(0), pv(0.54), pv(0.46), dtype="float64")
    assert np.allclose(w, [0.54 - 0.46 * math.cos(2 * math.pi * k / 5) for k in range(6)])
    w = run("hamming_window", pv(6), pv(1), pv(0.54), pv(0.46), dtype="float64")
    assert np.allclose(w, [0.54 - 0.46 * math.cos(2 * math.pi * k / 6) for k in range(6)])
    assert run("hamming_window", pv(1), pv(0), pv(0.5), pv(0.5)).tolist() == [1.0]
    assert run("size", rand(3, 4, 2)).item() == 24
    x = np.array([[-1.0, 0.0, 0.5], [1.0, 2.5, 9.0]], "float32")
    bd = np.array([0.0, 1.0, 2.5], "float32")
    left = run("bucketize", x, bd)
    right = run("bucketize", x, bd, right=True, out_int32=True)
    for r, c in itertools.product(range(2), range(3)):
        v = x[r, c]
        assert left[r, c] == sum(1 for b in bd if b < v)
        assert right[r, c] == sum(1 for b in bd if b <= v)
    assert left.dtype == np.int64 and right.dtype == np.int32
    d = rand(4, 5)
    rows, cols = np.array([[0], [-1]]), np.array([1, 4, -5])
    out = run("index_tensor", d, [rows, cols])
    for p, q in itertools.product(range(2), range(3)):
        assert out[p, q] == d[rows[p, 0] % 4, cols[q] % 5]
    out = run("index_tensor", d, [np.array([3, 0])])
    assert (out[0] == d[3]).all() and (out[1] == d[0]).all()


@pytest.fixture(scope="module")
def compiled():
    mod = phasec.parse(SOURCE)
    return mod, phasec.build(mod)


def _inputs(rows, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6)).astype("float32")
    bd = np.array([-1.0, -0.25, 0.5, 1.5], "float32")
    return x, bd, np.array([[0, 1, 2], [-1, 0, 1]]), np.array([5, -6, 0])


def _numpy(x, bd, i, j):
    k = np.arange(8)
    return [0.54 - 0.46 * np.cos(2 * np.pi * k / 8), 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(5) / 4),
            np.array(x.size), np.searchsorted(bd, x, side="left"),
            np.searchsorted(bd, x, side="right"), x[i, j], x[i]]


def test_compiled_matches_numpy(compiled):
    _, exe = compiled
    vm = phasec.VirtualMachine(exe)
    args = _inputs(3, 1)
    args = (args[0], args[1], np.array([[0, 1, 2], [-1, 0, 1]]), np.array([5, -6, 0]))
    for k, (g, e) in enumerate(zip(flat_leaves(vm["main"](*args)), _numpy(*args))):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6, atol=1e-6, err_msg=str(k))


@pytest.mark.parametrize("bad, extent", [(3, 3), (-4, 3), (2_000_000_000, 3)])
def test_index_tensor_hostile_indices(compiled, bad, extent):
    mod, exe = compiled
    x, bd, i, j = _inputs(3, 2)
    i = i.copy()
    i[1, 1] = bad
    outcomes = []
    runners = [lambda: phasec.interp.run(mod, x, bd, i, j)]
    runners += [lambda k=k: phasec.VirtualMachine(exe, kernels=k)["main"](x, bd, i, j)
                for k in ("llvm", "interp")]
    for go in runners:
        with pytest.raises(phasec.PhasecError) as info:
            go()
        exc = info.value
        err = exc if isinstance(exc, IndexOutOfRangeError) else exc.__cause__
        assert isinstance(err, IndexOutOfRangeError), exc
        outcomes.append((err.value, err.extent))
    assert outcomes == [(bad, extent)] * 3


def test_compiled_matches_tvm(compiled):
    import tvm
    from tvm import relax
    from tvm.script import from_source

    _, exe = compiled
    args = _inputs(4, 3)
    args = (args[0], args[1], np.array([[0, 1, 2], [3, 0, 1]]), np.array([5, 1, 0]))
    tvm_vm = relax.VirtualMachine(tvm.compile(from_source(SOURCE), target="llvm"), tvm.cpu())
    theirs = [t.numpy() for t in flat_leaves(tvm_vm["main"](*[tvm.runtime.tensor(a) for a in args]))]
    ours = flat_leaves(phasec.VirtualMachine(exe)["main"](*args))
    for k, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(np.asarray(o), t, rtol=1e-5, atol=1e-6, err_msg=str(k))


# ---------------------------------------------------------------------------
# reverse_sequence
# ---------------------------------------------------------------------------

REVERSE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4, 2), dtype="float32"), l: R.Tensor((4,), dtype="int64"),
             l2: R.Tensor((3,), dtype="int32")):
        with R.dataflow():
            a = R.reverse_sequence(x, l, seq_axis=0, batch_axis=1)
            b = R.reverse_sequence(x, l2, seq_axis=1, batch_axis=0)
            out = (a, b)
            R.output(out)
        return out
'''


def _reverse_loop(x, lens, seq, bat):
    out = x.copy()
    for idx in itertools.product(*map(range, x.shape)):
        n = int(lens[idx[bat]])
        if idx[seq] < n:
            src = list(idx)
            src[seq] = n - 1 - idx[seq]
            out[idx] = x[tuple(src)]
    return out


def test_reverse_sequence_reference_vm_and_tvm():
    import tvm
    from tvm import relax
    from tvm.script import from_source

    ours_inf = {b.var.name_hint: norm_phasec(b.var.struct_info, {})
                for b in dataflow_bindings(phasec.parse(REVERSE))}
    theirs_inf = {b.var.name: norm_tvm(b.var.ty, {})
                  for b in dataflow_bindings(from_source(REVERSE))}
    assert ours_inf == theirs_inf
    x = np.arange(24, dtype="float32").reshape(3, 4, 2)
    l, l2 = np.array([1, 3, 2, 0]), np.array([4, 2, 1], "int32")
    expected = [_reverse_loop(x, l, 0, 1), _reverse_loop(x, l2, 1, 0)]
    mod = phasec.parse(REVERSE)
    ref = phasec.interp.run(mod, x, l, l2)
    got = phasec.VirtualMachine(phasec.build(mod))["main"](x, l, l2)
    vm = relax.VirtualMachine(tvm.compile(from_source(REVERSE), target="llvm"), tvm.cpu())
    theirs = vm["main"](*[tvm.runtime.tensor(a) for a in (x, l, l2)])
    for e, r, g, t in zip(expected, ref, got, theirs):
        np.testing.assert_array_equal(r, e)
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(t.numpy(), e)


@pytest.mark.parametrize("kernels", ["llvm", "interp"])
def test_reverse_sequence_length_past_the_axis_is_an_error(kernels):
    mod = phasec.parse(REVERSE)
    x = np.zeros((3, 4, 2), "float32")
    l, l2 = np.array([1, 3, 2, 0]), np.array([4, 9, 1], "int32")  # 9 > 4
    with pytest.raises(IndexOutOfRangeError) as info:
        phasec.VirtualMachine(phasec.build(mod), kernels=kernels)["main"](x, l, l2)
    assert (info.value.value, info.value.extent) == (8, 4)
    with pytest.raises(phasec.PhasecError) as info:
        phasec.interp.run(mod, x, l, l2)
    cause = info.value.__cause__
    assert isinstance(cause, IndexOutOfRangeError) and (cause.value, cause.extent) == (8, 4)
    raises(["one length per batch entry"], call_op, "reverse_sequence", tv("d", (3, 4)),
           tv("s", (4,), "int64"))
    raises(["seq_axis and batch_axis are both axis 0"], call_op, "reverse_sequence",
           tv("d", (3, 4)), tv("s", (3,), "int64"), seq_axis=0)
