"""The creation, data-movement and statistics operators of issue 13
(phasec/op/creation.py, transform.py, statistics.py): inference against
TVM 0.27 (the same TVMScript parsed by TVM and by phasec, every binding's
struct info compared, symbolic shapes included), error cases, the numpy
references against independent loop formulas written here, and one module
compiled with phasec.build (LLVM kernels) and run on the VM against numpy
and against TVM 0.27's compiled output.

Legalization on the TIR interpreter is in test_legalize.py's table
(``EXT_LEGALIZE_CASES`` of helpers/legalize_cases/ext.py is appended to it).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import phasec
from phasec.ir import PrimValue, TensorStructInfo, Var, tir
from phasec.op import call_op

from helpers.against_tvm import bindings_phasec, bindings_tvm
from helpers.op_infer import S, raises, tv
from helpers.op_reference import rand, run

n = tir.Var("n")


# ---------------------------------------------------------------------------
# inference: TVM 0.27 and phasec read the same module
# ---------------------------------------------------------------------------

INFER_SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 5), dtype="float32"), y: R.Tensor(("n", 4), dtype="int32"),
             v: R.Tensor((4,), dtype="int64"), u: R.Tensor(dtype="float32", ndim=3)):
        n = T.int64()
        a = R.arange(0, 10, 3, dtype="int64")
        a1 = R.arange(10, 0, -3, dtype="int64")
        a2 = R.arange(1, R.prim_value(n), 2, dtype="int32")
        a3 = R.arange(R.prim_value(n), 20, 4, dtype="float32")
        b = R.full_like(x, R.const(2, "int32"), dtype="int64")
        b1 = R.full_like(y, R.const(1.5, "float32"))
        c = R.tile(x, repeats=[2, 1, 2])
        c1 = R.tile(y, repeats=[3])
        c2 = R.tile(u, repeats=[2, 2])
        d = R.repeat(y, repeats=2, axis=0)
        d1 = R.repeat(y, repeats=3)
        e = R.flip(y, axis=-1)
        f = R.tril(x, 1)
        g = R.triu(u, R.prim_value(-2))
        h = R.one_hot(v, R.prim_value(T.float32(1.0)), R.prim_value(T.float32(0.0)), depth=5, axis=0)
        h1 = R.one_hot(y, R.prim_value(3), R.prim_value(-1), depth=2, axis=-1)
        p = R.nn.pad(y, pad_width=[1, 2, 0, 3], pad_value=0.0, pad_mode="reflect")
        p1 = R.nn.pad(u, pad_width=[1, 1, 0, 0, 2, 2], pad_value=1.0, pad_mode="constant")
        ey = R.eye(3, 4, 1, dtype="int32")
        ey1 = R.eye(R.prim_value(n), 2, 0, dtype="float32")
        el = R.eye_like(x, -1, dtype="float16")
        am = R.argmax(y, axis=1, keepdims=False)
        am1 = R.argmin(y, axis=None, keepdims=True)
        am2 = R.argmax(u, axis=None, keepdims=False)
        am3 = R.argmin(u, axis=0, keepdims=True)
        va = R.variance(x, axis=[1], keepdims=True)
        sd = R.std(u, axis=[0, 2], keepdims=False)
        cs = R.cumsum(y, axis=0, dtype="int64", exclusive=False)
        cs1 = R.cumsum(y)
        cp = R.cumprod(u, axis=1, exclusive=True)
        return (a, a1, a2, a3, b, b1, c, c1, c2, d, d1, e, f, g, h, h1, p, p1, ey, ey1, el,
                am, am1, am2, am3, va, sd, cs, cs1, cp)
'''


@pytest.mark.parametrize("rows", [1, 6, 23])
def test_inference_matches_tvm(rows):
    env = {"n": rows}
    ours = bindings_phasec(INFER_SOURCE, env)
    theirs = bindings_tvm(INFER_SOURCE, env)
    assert set(ours) == set(theirs)
    differ = {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}
    assert not differ, differ


def test_inference_symbolic_and_errors():
    x, y = tv("x", (n, 4)), tv("y", (3, 5), "int32")
    assert S(call_op("tile", x, repeats=[2, 3])) == 'R.Tensor((n * 2, 12), dtype="float32")'
    assert S(call_op("repeat", x, repeats=2)) == 'R.Tensor((n * 8,), dtype="float32")'
    assert S(call_op("cumsum", x)) == 'R.Tensor((n * 4,), dtype="float32")'
    assert S(call_op("cumsum", y, axis=1, dtype="float64")) == 'R.Tensor((3, 5), dtype="float64")'
    assert S(call_op("argmax", tv("u", None, ndim=2), axis=1)) == 'R.Tensor(ndim=1, dtype="int64")'
    assert S(call_op("nn.pad", x, pad_width=[0, 1, 2, 3])) == 'R.Tensor((n + 1, 9), dtype="float32")'
    assert S(call_op("arange", PrimValue(tir.IntImm(0)), PrimValue(n), PrimValue(tir.IntImm(3)))) \
        == 'R.Tensor(((n + 2) // 3,), dtype="int64")'
    raises(["axis 2 is out of range"], call_op, "flip", x, axis=2)
    raises(["repeats must be non-negative"], call_op, "tile", x, repeats=[-1])
    raises(["at least 2 dimensions"], call_op, "tril", tv("v", (4,)), PrimValue(tir.IntImm(0)))
    raises(["needs a float tensor", "R.astype"], call_op, "variance", y)
    raises(["cannot accumulate in bool"], call_op, "cumsum", tv("b", (3,), "bool"))
    raises(["pad_width needs (before, after) for each of the 2 axes"], call_op, "nn.pad", x,
           pad_width=[1, 1])
    raises(["must be non-negative"], call_op, "nn.pad", x, pad_width=[0, 0, -1, 0])
    raises(["reflect padding of axis 0, which is empty"], call_op, "nn.pad",
           tv("z", (0, 3)), pad_width=[1, 0, 0, 0], pad_mode="reflect")
    raises(["expected one of 'constant', 'reflect', 'replicate', 'circular'"], call_op,
           "nn.pad", x, pad_width=[0, 0, 0, 0], pad_mode="edge")
    raises(["step must not be zero"], call_op, "arange", PrimValue(tir.IntImm(0)),
           PrimValue(tir.IntImm(3)), PrimValue(tir.IntImm(0)))
    raises(["same dtype"], call_op, "one_hot", tv("i", (3,), "int64"),
           PrimValue(tir.IntImm(1)), PrimValue(tir.FloatImm(0.0)), depth=3)
    raises(["needs integer indices"], call_op, "one_hot", x, PrimValue(tir.IntImm(1)),
           PrimValue(tir.IntImm(0)), depth=3)
    raises(["depth must be positive"], call_op, "one_hot", tv("i", (3,), "int64"),
           PrimValue(tir.IntImm(1)), PrimValue(tir.IntImm(0)), depth=0)
    raises(["scalar (R.prim_value) for k"], call_op, "tril", x, x)
    raises(["0-d tensor fill value"], call_op, "full_like", x, _prim(1))
    raises(["needs a 2-D tensor"], call_op, "eye_like", tv("v", (4,)), PrimValue(tir.IntImm(0)))


# ---------------------------------------------------------------------------
# references against independent formulas (explicit loops)
# ---------------------------------------------------------------------------

def _prim(v, dtype="int64"):
    return PrimValue(tir.IntImm(v, dtype) if "int" in dtype else tir.FloatImm(v, dtype))


def test_arange_eye_reference():
    out = run("arange", _prim(2), _prim(11), _prim(3), dtype="int32")
    assert out.tolist() == [2, 5, 8] and out.dtype == np.int32
    out = run("arange", _prim(1.0, "float32"), _prim(0.0, "float32"), _prim(-0.25, "float32"),
              dtype="float32")
    np.testing.assert_allclose(out, [1.0, 0.75, 0.5, 0.25])
    e = run("eye", _prim(3), _prim(5), _prim(2), dtype="int8")
    assert [(i, j) for i in range(3) for j in range(5) if e[i, j]] == [(0, 2), (1, 3), (2, 4)]
    e = run("eye_like", rand(4, 2), _prim(-1), dtype="void")
    assert [(i, j) for i in range(4) for j in range(2) if e[i, j]] == [(1, 0), (2, 1)]


def test_tri_one_hot_full_like_reference():
    x = rand(2, 3, 4)
    lo, up = run("tril", x, _prim(-1)), run("triu", x, _prim(1))
    for b, i, j in itertools.product(range(2), range(3), range(4)):
        assert lo[b, i, j] == (x[b, i, j] if j - i <= -1 else 0)
        assert up[b, i, j] == (x[b, i, j] if j - i >= 1 else 0)
    idx = np.array([[0, 3], [-1, 2]])
    oh = run("one_hot", idx, _prim(7), _prim(-7), depth=3, axis=1)
    for i, k, j in itertools.product(range(2), range(3), range(2)):
        assert oh[i, k, j] == (7 if idx[i, j] == k else -7)
    f = run("full_like", rand(2, 2), np.array(3, "int64"), dtype="void")
    assert f.dtype == np.float32 and (f == 3).all()


_Z = Var("z", TensorStructInfo((2, 3, 4), "float32"))


def _p(v):
    return PrimValue(tir.IntImm(v) if isinstance(v, int) else tir.FloatImm(v, "float32"))


def test_tri_k_defaults_to_zero_as_in_tvm():
    """R.tril(x) / R.triu(x) are R.tril(x, 0) / R.triu(x, 0), TVM 0.27's default."""
    from tvm.script import from_source

    from phasec.ir.structural import structural_equal

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32")):
        lo = R.tril(x)
        up = R.triu(x)
        return (lo, up)
'''
    ours = phasec.parse(src)
    assert structural_equal(ours, phasec.parse(from_source(src).script()))
    x = rand(3, 4)
    lo, up = phasec.VirtualMachine(phasec.build(ours))["main"](x)
    assert (lo == np.tril(x)).all() and (up == np.triu(x)).all()
    assert structural_equal(call_op("tril", _Z), call_op("tril", _Z, _p(0)))


def test_one_hot_with_float_prim_values_keeps_float32_in_the_interpreter():
    """The interpreter passes a float prim value as a Python float, which
    numpy reads as float64: one_hot's reference returned float64 where its
    struct info (and the compiled kernel) say float32 (a fuzzer finding)."""
    mod = phasec.parse('''
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor((2,), dtype="int32")) -> R.Tensor((2, 3), dtype="float32"):
        v = R.one_hot(y, R.prim_value(T.float32(1.0)), R.prim_value(T.float32(0.0)), depth=3)
        return v
''')
    y = np.array([2, 0], "int32")
    expect = np.eye(3, dtype="float32")[y]
    for out in (phasec.interp.run(mod, y), phasec.VirtualMachine(phasec.build(mod))["main"](y)):
        assert out.dtype == np.float32 and np.array_equal(out, expect)


def test_tile_repeat_flip_reference():
    x = rand(2, 3)
    t = run("tile", x, repeats=[2, 1, 3])
    assert t.shape == (2, 2, 9)
    for a, i, j in itertools.product(range(2), range(2), range(9)):
        assert t[a, i, j] == x[i % 2, j % 3]
    r = run("repeat", x, repeats=2, axis=1)
    for i, j in itertools.product(range(2), range(6)):
        assert r[i, j] == x[i, j // 2]
    flat = run("repeat", x, repeats=3)
    assert [flat[k] for k in range(18)] == [x.reshape(-1)[k // 3] for k in range(18)]
    f = run("flip", x, axis=0)
    assert (f[0] == x[1]).all() and (f[1] == x[0]).all()


def _pad_loop(x, width, mode, value):
    """Padding by definition: each output index maps back to an input index."""
    def src(i, size, before):
        o = i - before
        if mode == "replicate":
            return min(max(o, 0), size - 1)
        if mode == "circular":
            return o % size
        # reflect: bounce between the two edges until inside
        while o < 0 or o >= size:
            o = -o if o < 0 else 2 * (size - 1) - o
            if size == 1:
                return 0
        return o
    shape = [d + width[2 * k] + width[2 * k + 1] for k, d in enumerate(x.shape)]
    out = np.empty(shape, x.dtype)
    for idx in itertools.product(*map(range, shape)):
        if mode == "constant":
            o = [i - width[2 * k] for k, i in enumerate(idx)]
            inside = all(0 <= v < d for v, d in zip(o, x.shape))
            out[idx] = x[tuple(o)] if inside else value
        else:
            out[idx] = x[tuple(src(i, d, width[2 * k]) for k, (i, d) in enumerate(zip(idx, x.shape)))]
    return out


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("width", [(1, 2, 0, 3), (4, 0, 7, 5), (0, 0, 1, 0)])
def test_pad_reference(mode, width):
    x = rand(3, 4)
    out = run("nn.pad", x, pad_width=list(width), pad_mode=mode, pad_value=-1.5)
    np.testing.assert_array_equal(out, _pad_loop(x, width, mode, np.float32(-1.5)))
    one = rand(1, 2)  # reflect of a single element stays on it
    np.testing.assert_array_equal(run("nn.pad", one, pad_width=list(width), pad_mode=mode),
                                  _pad_loop(one, width, mode, np.float32(0)))


def test_statistics_reference():
    x = rand(3, 4, 5)
    x[1, 2, 3] = x[1, 0, 3] = x.max() + 1  # ties: the first one wins
    am = run("argmax", x, axis=1)
    for i, k in itertools.product(range(3), range(5)):
        col = [x[i, j, k] for j in range(4)]
        assert am[i, k] == col.index(max(col))
    am = run("argmin", x, axis=None, keepdims=True)
    flat = list(x.reshape(-1))
    assert am.shape == (1, 1, 1) and am.item() == flat.index(min(flat))
    y = x.copy()
    y[2, 1, 1] = np.nan
    assert run("argmax", y).item() == 2 * 20 + 1 * 5 + 1  # a NaN is the extreme
    va = run("variance", x, axis=[0, 2], keepdims=False)
    sd = run("std", x, axis=[0, 2], keepdims=True)
    for j in range(4):
        vals = [float(x[i, j, k]) for i in range(3) for k in range(5)]
        mu = sum(vals) / len(vals)
        var = sum((v - mu) ** 2 for v in vals) / len(vals)
        assert abs(va[j] - var) < 1e-5 and abs(sd[0, j, 0] - var ** 0.5) < 1e-5


def test_scan_reference():
    x = rand(3, 4, dtype="int32", lo=-5, hi=5)
    cs = run("cumsum", x, axis=1, exclusive=True)
    for i in range(3):
        acc = 0
        for j in range(4):
            assert cs[i, j] == acc
            acc += x[i, j]
    cp = run("cumprod", x, axis=0, dtype="int64")
    assert cp.dtype == np.int64
    for j in range(4):
        acc = 1
        for i in range(3):
            acc *= int(x[i, j])
            assert cp[i, j] == acc
    flat = run("cumsum", x)
    assert flat.shape == (12,) and flat[-1] == x.sum() and flat[4] == x.reshape(-1)[:5].sum()


# ---------------------------------------------------------------------------
# end to end: LLVM kernels on the VM, against numpy and TVM 0.27
# ---------------------------------------------------------------------------

E2E_SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 5), dtype="float32"), y: R.Tensor(("n", 4), dtype="int32"),
             v: R.Tensor((4,), dtype="int64")):
        n = T.int64()
        with R.dataflow():
            a = R.arange(1, R.prim_value(n), 2, dtype="int32")
            b = R.full_like(x, R.const(2.5, "float32"))
            c = R.tile(x, repeats=[2, 1, 2])
            d = R.repeat(y, repeats=2, axis=0)
            e = R.flip(y, axis=-1)
            f = R.tril(x, 1)
            g = R.triu(y, -1)
            h = R.one_hot(v, R.prim_value(T.float32(1.0)), R.prim_value(T.float32(0.0)), depth=5, axis=0)
            p1 = R.nn.pad(x, pad_width=[1, 2, 7, 3], pad_value=1.5, pad_mode="constant")
            p2 = R.nn.pad(x, pad_width=[0, 2, 4, 3], pad_value=0.0, pad_mode="reflect")
            p3 = R.nn.pad(y, pad_width=[2, 1, 5, 0], pad_value=0.0, pad_mode="replicate")
            p4 = R.nn.pad(y, pad_width=[2, 7, 1, 9], pad_value=0.0, pad_mode="circular")
            ey = R.eye(3, 4, 1, dtype="int32")
            am = R.argmax(x, axis=1, keepdims=True)
            an = R.argmin(y, axis=None, keepdims=False)
            va = R.variance(x, axis=[1], keepdims=False)
            sd = R.std(x, axis=None, keepdims=True)
            cs = R.cumsum(x, axis=1, dtype="float32", exclusive=True)
            cp = R.cumprod(y, axis=0, dtype="int64", exclusive=False)
            cf = R.cumsum(y)
            out = (a, b, c, d, e, f, g, h, p1, p2, p3, p4, ey, am, an, va, sd, cs, cp, cf)
            R.output(out)
        return out
'''


def _expected(x, y, v):
    pw = lambda w: [(w[0], w[1]), (w[2], w[3])]  # noqa: E731
    oh = np.array([[1.0 if v[j] == k else 0.0 for j in range(4)] for k in range(5)], "float32")
    excl = np.concatenate([np.zeros((3, 1), "float32"), np.cumsum(x, 1)[:, :-1]], 1)
    return [np.arange(1, y.shape[0], 2), np.full((3, 5), 2.5, "float32"), np.tile(x, [2, 1, 2]),
            np.repeat(y, 2, 0), y[:, ::-1], np.tril(x, 1), np.triu(y, -1), oh,
            np.pad(x, pw([1, 2, 7, 3]), constant_values=1.5), np.pad(x, pw([0, 2, 4, 3]), "reflect"),
            np.pad(y, pw([2, 1, 5, 0]), "edge"), np.pad(y, pw([2, 7, 1, 9]), "wrap"),
            np.eye(3, 4, 1), np.argmax(x, 1)[:, None], np.argmin(y), np.var(x, 1),
            np.std(x).reshape(1, 1), excl, np.cumprod(y, 0), np.cumsum(y)]


@pytest.fixture(scope="module")
def e2e_vm():
    return phasec.VirtualMachine(phasec.build(phasec.parse(E2E_SOURCE)))


def test_end_to_end_llvm_vm(e2e_vm):
    rng = np.random.default_rng(5)
    for rows in (6, 1, 3):
        x = rng.standard_normal((3, 5)).astype("float32")
        y = rng.integers(-3, 4, (rows, 4)).astype("int32")
        v = np.array([0, 4, -1, 7])
        got = e2e_vm["main"](x, y, v)
        for k, (g, e) in enumerate(zip(got, _expected(x, y, v))):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6, err_msg=str(k))


def test_end_to_end_matches_tvm(e2e_vm):
    """TVM 0.27 compiles the same module (its own legalizations) and agrees."""
    import tvm
    from tvm import relax
    from tvm.script import from_source

    exe = tvm.compile(from_source(E2E_SOURCE), target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 5)).astype("float32")
    y = rng.integers(-3, 4, (6, 4)).astype("int32")
    v = np.array([0, 4, 1, 3])  # in range: TVM's one_hot of -1 / 7 is its own business
    theirs = vm["main"](*[tvm.runtime.tensor(a) for a in (x, y, v)])
    ours = e2e_vm["main"](x, y, v)
    for k, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(np.asarray(o), t.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=str(k))


# ---------------------------------------------------------------------------
# reductions of bool tensors (issue 13: "prod/sum/max/min on bool")
# ---------------------------------------------------------------------------

BOOL_REDUCE = '''
@I.ir_module
class Module:
    @R.function
    def main(b: R.Tensor(("n", 5), dtype="bool")):
        n = T.int64()
        with R.dataflow():
            out = (R.sum(b, axis=[1]), R.prod(b, axis=[1], keepdims=True), R.max(b, axis=[0]),
                   R.min(b), R.sum(b))
            R.output(out)
        return out
'''


def test_bool_reductions_are_any_and_all():
    mod = phasec.parse(BOOL_REDUCE)
    assert [f.dtype for f in mod["main"].ret_struct_info.fields] == ["bool"] * 5
    vm = phasec.VirtualMachine(phasec.build(mod))
    b = np.zeros((300, 5), bool)
    b[7, :] = True
    b[:, 2] = True  # column 2 all true, row 7 all true, 256 + trues in column 2
    for run_ in (lambda: vm["main"](b), lambda: phasec.interp.run(mod, b)):
        s, p, mx, mn, total = (np.asarray(v) for v in run_())
        assert s.tolist() == [any(row) for row in b.tolist()]
        assert p[:, 0].tolist() == [all(row) for row in b.tolist()]
        assert mx.tolist() == [any(b[:, j]) for j in range(5)]
        assert mn.item() is False and total.item() is True
