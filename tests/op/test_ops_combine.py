"""stack, meshgrid, outer, einsum, collapse_sum_like/to (manipulate/, linear_algebra.py),
nn.batch_flatten, nn.pixel_shuffle (nn/pad.py), slice_scatter (manipulate/) and
dynamic_strided_slice (index.py): inference against TVM 0.27 reading the
same module, errors, references against loops written here, legalization
cases for test_legalize.py, and one module on the VM (LLVM kernels) against
numpy and TVM 0.27's compiled output."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import phasec
from phasec.ir import PrimValue, ShapeExpr, Tuple, tir
from phasec.op import call_op

from helpers.against_tvm import dataflow_bindings, flat_leaves, norm_phasec, norm_tvm
from helpers.op_infer import raises, tv
from helpers.op_reference import rand, run


SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 6), dtype="float32"), y: R.Tensor((4, 6), dtype="float32"),
             v: R.Tensor((6,), dtype="float32"), w: R.Tensor((3,), dtype="float32"),
             img: R.Tensor((2, 8, 2, 3), dtype="float32"), s: R.Tensor(("n", 2), dtype="float32"),
             b: R.Tensor((2,), dtype="int64")):
        n = T.int64()
        with R.dataflow():
            st = R.stack((x, x, x), axis=1)
            st1 = R.stack((y, y), axis=-1)
            o = R.outer(v, w)
            bf = R.nn.batch_flatten(img)
            ps = R.nn.pixel_shuffle(img, upscale_factor=2)
            mg = R.meshgrid((v, w), indexing="ij")
            cs = R.collapse_sum_like(y, v)
            ct = R.collapse_sum_to(y, R.shape([4, 1]))
            sc = R.slice_scatter(x, s, 1, 5, 2, axis=1)
            e0 = R.einsum((y, v), subscripts="ij,j->i")
            e1 = R.einsum((x, y), subscripts="ij,kj->ik")
            e2 = R.einsum((y,), subscripts="ij->ji")
            e3 = R.einsum((img, img), subscripts="...ij,...kj->...ik")
            ds = R.dynamic_strided_slice(y, b, R.const([4, -1], "int64"), R.const([2, -2], "int64"))
            out = (st, st1, o, bf, ps, mg, cs, ct, sc, e0, e1, e2, e3, ds)
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
    x, v = tv("x", (4, 6)), tv("v", (6,))
    raises(["stack needs tensors of one shape"], call_op, "stack", Tuple([x, tv("z", (4, 5))]))
    raises(["axis 3 is out of range"], call_op, "stack", Tuple([x, x]), axis=3)
    raises(["outer needs 1-D tensors"], call_op, "outer", x, v)
    raises(["one dtype"], call_op, "outer", v, tv("i", (2,), "int32"))
    raises(["at least 2 dimensions"], call_op, "nn.batch_flatten", v)
    raises(["not divisible by upscale_factor**2 = 4"], call_op, "nn.pixel_shuffle",
           tv("im", (1, 6, 2, 2)), upscale_factor=2)
    raises(["meshgrid needs 1-D tensors"], call_op, "meshgrid", Tuple([x]))
    raises(["does not broadcast to the data's"], call_op, "collapse_sum_to", x, ShapeExpr([5]))
    raises(["has 4 elements but src has 2"], call_op, "slice_scatter", x, tv("s", (4, 2)),
           *[PrimValue(tir.IntImm(k)) for k in (0, 4, 1)], axis=1)
    raises(["step must be positive"], call_op, "slice_scatter", x, tv("s", (4, 2)),
           *[PrimValue(tir.IntImm(k)) for k in (0, 4, 0)], axis=1)
    raises(["name 2 operands, but 1 was given"], call_op, "einsum", Tuple([x]),
           subscripts="ij,jk")
    raises(["label 'j' has sizes 6 and 4"], call_op, "einsum", Tuple([x, x]),
           subscripts="ij,jk->ik")
    raises(["has 3 labels but its operand has 2 axes"], call_op, "einsum", Tuple([x]),
           subscripts="ijk")
    raises(["begin has 3 entries for a tensor of ndim 2"], call_op, "dynamic_strided_slice", x,
           tv("b", (3,), "int64"), tv("e", (2,), "int64"), tv("s", (2,), "int64"))


# ---------------------------------------------------------------------------
# references against loops
# ---------------------------------------------------------------------------

def test_references():
    a, b = rand(2, 3), rand(2, 3)
    st = run("stack", [a, b], axis=1)
    assert all(st[i, k, j] == (a, b)[k][i, j] for i, k, j in itertools.product(range(2), range(2),
                                                                                range(3)))
    v, w = rand(3), rand(2)
    o = run("outer", v, w)
    assert all(o[i, j] == v[i] * w[j] for i in range(3) for j in range(2))
    gx, gy = run("meshgrid", [v, w], indexing="xy")
    assert gx.shape == (2, 3) and all(gx[j, i] == v[i] and gy[j, i] == w[j]
                                      for i in range(3) for j in range(2))
    img = rand(1, 8, 2, 3)
    ps = run("nn.pixel_shuffle", img, upscale_factor=2)
    for c, h, w_ in itertools.product(range(2), range(4), range(6)):
        assert ps[0, c, h, w_] == img[0, c * 4 + (h % 2) * 2 + w_ % 2, h // 2, w_ // 2]
    bf = run("nn.batch_flatten", img)
    assert bf.shape == (1, 48) and (bf[0] == img.reshape(-1)).all()
    big = rand(3, 4)
    cs = run("collapse_sum_to", big, ShapeExpr([1, 4]))
    assert np.allclose(cs[0], [sum(big[i, j] for i in range(3)) for j in range(4)])
    cs = run("collapse_sum_like", big, rand(3, 1))
    assert np.allclose(cs[:, 0], [sum(big[i]) for i in range(3)])
    src = rand(3, 2)
    sc = run("slice_scatter", big, src, PrimValue(tir.IntImm(1)), PrimValue(tir.IntImm(4)),
             PrimValue(tir.IntImm(2)), axis=1)
    for i, j in itertools.product(range(3), range(4)):
        assert sc[i, j] == (src[i, (j - 1) // 2] if j in (1, 3) else big[i, j])
    m, n_ = rand(2, 3), rand(4, 3)
    e = run("einsum", [m, n_], subscripts="ij,kj->ik")
    assert np.allclose(e, [[sum(m[i, j] * n_[k, j] for j in range(3)) for k in range(4)]
                           for i in range(2)])
    sq = rand(3, 3)
    assert np.allclose(run("einsum", [sq], subscripts="ii->i"), [sq[i, i] for i in range(3)])
    assert np.allclose(run("einsum", [sq], subscripts="ii"), sum(sq[i, i] for i in range(3)))
    ds = run("dynamic_strided_slice", big, np.array([2, 0]), np.array([-9, 9]),
             np.array([-1, 3]))
    assert ds.tolist() == [[big[i, j] for j in (0, 3)] for i in (2, 1, 0)]


# ---------------------------------------------------------------------------
# compiled: VM against numpy and TVM 0.27
# ---------------------------------------------------------------------------

def _inputs(rows, seed):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    return f(rows, 6), f(4, 6), f(6), f(3), f(2, 8, 2, 3), f(rows, 2), np.array([3, 5])


def _numpy(x, y, v, w, img, s, b):
    sc = x.copy()
    sc[:, 1:5:2] = s
    return [np.stack([x, x, x], 1), np.stack([y, y], -1), np.outer(v, w), img.reshape(2, -1),
            img.reshape(2, 2, 2, 2, 2, 3).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 4, 6),
            *np.meshgrid(v, w, indexing="ij"), y.sum(0), y.sum(1, keepdims=True), sc, y @ v,
            x @ y.T, y.T, img @ img.swapaxes(-1, -2), y[3:4:2, 5:-1:-2]]


@pytest.fixture(scope="module")
def vm():
    return phasec.VirtualMachine(phasec.build(phasec.parse(SOURCE)))


@pytest.mark.parametrize("rows", [5, 1])
def test_compiled_matches_numpy(vm, rows):
    args = _inputs(rows, rows)
    got = flat_leaves(vm["main"](*args))
    for k, (g, e) in enumerate(zip(got, _numpy(*args))):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5, err_msg=str(k))


def test_compiled_matches_tvm(vm):
    import tvm
    from tvm import relax
    from tvm.script import from_source

    args = _inputs(5, 7)
    # TVM 0.27's legalization of nn.pixel_shuffle calls a topi function its wheel lacks
    src = "\n".join(line for line in SOURCE.splitlines() if "R.nn.pixel_shuffle" not in line)
    src = src.replace("bf, ps, mg", "bf, mg")
    tvm_vm = relax.VirtualMachine(tvm.compile(from_source(src), target="llvm"), tvm.cpu())
    theirs = [t.numpy() for t in flat_leaves(tvm_vm["main"](*[tvm.runtime.tensor(a) for a in args]))]
    ours = flat_leaves(vm["main"](*args))
    del ours[4]  # pixel_shuffle
    assert len(ours) == len(theirs)
    for k, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(np.asarray(o), t, rtol=1e-5, atol=1e-5, err_msg=str(k))
