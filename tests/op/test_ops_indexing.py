"""The data-indexed operators of phasec/op/manipulate/gather_scatter.py (gather_elements,
gather_nd, scatter_elements, scatter_nd, index_put): inference against TVM
0.27 reading the same module, references against loop formulas written
here, hostile indices (out of range in either direction, huge, negative
from the end) on the reference interpreter and on both kernel backends of
the VM, and compiled results against TVM 0.27's for in-range indices.

Legalization on the TIR interpreter is in test_legalize.py's table
(``INDEXING_LEGALIZE_CASES`` of helpers/legalize_cases/indexing.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import phasec
from phasec.errors import IndexOutOfRangeError
from phasec.ir import Tuple
from phasec.op import call_op

from helpers.against_tvm import bindings_phasec, bindings_tvm
from helpers.hostile_indices import CALLS, HOSTILE
from helpers.op_infer import raises, tv
from helpers.op_reference import rand, run


INFER_SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 5), dtype="float32"), i: R.Tensor(("n", 3), dtype="int64"),
             u: R.Tensor(("n", 3), dtype="float32"), g: R.Tensor((2, 1), dtype="int64"),
             g3: R.Tensor((4, 2, 1), dtype="int64"), v: R.Tensor((4, 6, 5), dtype="float32"),
             su: R.Tensor((2, 5), dtype="float32"), a: R.Tensor((2,), dtype="int64"),
             b: R.Tensor((3, 1), dtype="int64"), w: R.Tensor((3, 2), dtype="float32")):
        n = T.int64()
        ge = R.gather_elements(x, i, axis=1)
        gn = R.gather_nd(x, g, batch_dims=0)
        gb = R.gather_nd(v, g3, batch_dims=1)
        se = R.scatter_elements(x, i, u, axis=1, reduction="add")
        sn = R.scatter_nd(x, g, su, reduction="update")
        ip = R.index_put(x, (b, a), w, accumulate=True)
        return (ge, gn, gb, se, sn, ip)
'''


@pytest.mark.parametrize("rows", [1, 4])
def test_inference_matches_tvm(rows):
    env = {"n": rows}
    ours, theirs = bindings_phasec(INFER_SOURCE, env), bindings_tvm(INFER_SOURCE, env)
    assert ours == theirs


def test_inference_errors():
    x, i = tv("x", (4, 5)), tv("i", (4, 3), "int64")
    raises(["needs integer indices"], call_op, "gather_elements", x, x)
    raises(["indices of the data's rank (2), got rank 1"], call_op, "gather_elements", x,
           tv("j", (3,), "int64"))
    raises(["axis 2 is out of range"], call_op, "gather_elements", x, i, axis=2)
    raises(["exceed the data's rank 2"], call_op, "gather_nd", x, tv("g", (2, 3), "int64"))
    raises(["batch dimensions of data and indices differ"], call_op, "gather_nd", x,
           tv("g", (3, 1), "int64"), batch_dims=1)
    raises(["updates shaped like the indices"], call_op, "scatter_elements", x, i,
           tv("u", (4, 2)))
    raises(["has dtype float16 but the data has dtype float32"], call_op, "scatter_elements",
           x, i, tv("u", (4, 3), "float16"))
    raises(["expected one of 'update', 'add', 'mul', 'max', 'min'"], call_op, "scatter_nd", x,
           tv("g", (2, 1), "int64"), tv("u", (2, 5)), reduction="mean")
    raises(["updates of shape indices.shape[:-1] + data.shape[1:]"], call_op, "scatter_nd", x,
           tv("g", (2, 1), "int64"), tv("u", (2, 4)))
    raises(["one index tensor per dimension of the data (2), got 3"], call_op, "index_put", x,
           Tuple([tv("a", (2,), "int64")] * 3), tv("w", (2,)))
    raises(["needs int64 indices"], call_op, "gather_nd", x, tv("g", (2, 1), "int32"))
    raises(["at least one index tensor"], call_op, "index_put", x, Tuple([]), tv("w", (2,)))
    raises(["needs integer index tensors"], call_op, "index_put", x, Tuple([x, x]), tv("w", (2,)))
    raises(["cannot broadcast"], call_op, "index_put", x,
           Tuple([tv("a", (2,), "int64"), tv("b", (3,), "int64")]), tv("w", (2,)))


# ---------------------------------------------------------------------------
# references against loops
# ---------------------------------------------------------------------------

def test_gather_references():
    x = rand(3, 4)
    idx = np.array([[0, -1, 3], [2, 2, 0], [-4, 1, 1]])
    out = run("gather_elements", x, idx, axis=1)
    for r, c in itertools.product(range(3), range(3)):
        assert out[r, c] == x[r, idx[r, c] % 4]
    v = rand(2, 3, 4)
    g = np.array([[[1, 3]], [[-1, 0]]])  # batch 2, one position, 2 indexed axes
    out = run("gather_nd", v, g, batch_dims=1)
    assert out.shape == (2, 1)
    for bt in range(2):
        assert out[bt, 0] == v[bt, g[bt, 0, 0] % 3, g[bt, 0, 1] % 4]
    out = run("gather_nd", v, np.array([[0], [1], [-1]]))
    assert out.shape == (3, 3, 4) and (out[2] == v[1]).all()


def test_gather_elements_with_indices_shorter_than_the_data():
    """ONNX GatherElements lets indices be shorter than the data on the other
    axes too (out[r, c] = x[r, idx[r, c]] for the rows idx has). The reference
    used numpy's take_along_axis, which wants those axes to broadcast, and
    failed on such calls (a fuzzer finding); the kernel was right."""
    x = rand(3, 2)
    idx = np.array([[1], [0]])
    out = run("gather_elements", x, idx, axis=1)
    assert out.shape == (2, 1)
    assert out[0, 0] == x[0, 1] and out[1, 0] == x[1, 0]
    out = run("gather_elements", x, np.array([[2, -1]]), axis=0)
    assert out[0, 0] == x[2, 0] and out[0, 1] == x[2, 1]
    mod = phasec.parse('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 2), dtype="float32")):
        r = R.gather_elements(x, R.const([[1], [0]], "int64"), axis=1)
        return r
''')
    expect = np.array([[x[0, 1]], [x[1, 0]]], "float32")
    assert np.array_equal(phasec.interp.run(mod, x), expect)
    assert np.array_equal(phasec.VirtualMachine(phasec.build(mod))["main"](x), expect)


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "mean", "max", "min"])
def test_scatter_elements_reference(reduction):
    x = rand(3, 4)
    idx = np.array([[1, 1, -1], [0, 3, 0], [2, 2, 2]])
    upd = rand(3, 3)
    out = run("scatter_elements", x, idx, upd, axis=1, reduction=reduction)
    expect = x.copy()
    for r, c in itertools.product(range(3), range(3)):  # row-major order
        t = (r, idx[r, c] % 4)
        old, new = expect[t], upd[r, c]
        expect[t] = {"update": new, "add": old + new, "mul": old * new, "mean": (old + new) / 2,
                     "max": max(old, new), "min": min(old, new)}[reduction]
    np.testing.assert_allclose(out, expect, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["update", "add", "max"])
def test_scatter_nd_and_index_put_reference(reduction):
    x = rand(4, 3)
    idx = np.array([[2], [-1], [2]])
    upd = rand(3, 3)
    out = run("scatter_nd", x, idx, upd, reduction=reduction)
    expect = x.copy()
    for p in range(3):
        for c in range(3):
            t = (idx[p, 0] % 4, c)
            old, new = expect[t], upd[p, c]
            expect[t] = {"update": new, "add": old + new, "max": max(old, new)}[reduction]
    np.testing.assert_allclose(out, expect, rtol=1e-6)
    rows, cols = np.array([[0], [3]]), np.array([1, -1, 1])  # broadcast to (2, 3)
    vals = rand(3)  # broadcast to (2, 3) too
    for acc in (False, True):
        out = run("index_put", x, [rows, cols], vals, accumulate=acc)
        expect = x.copy()
        for r, c in itertools.product(range(2), range(3)):
            t = (rows[r, 0], cols[c] % 3)
            expect[t] = expect[t] + vals[c] if acc else vals[c]
        np.testing.assert_allclose(out, expect, rtol=1e-6)


# ---------------------------------------------------------------------------
# hostile indices: the same IndexOutOfRangeError everywhere
# ---------------------------------------------------------------------------


def _inputs(dtype):
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal((4, 5)).astype("float32"),
            "i": rng.integers(0, 5, (4, 3)).astype(dtype),
            "u": rng.standard_normal((4, 3)).astype("float32"),
            "g": np.array([[1, 2], [3, 4]], dtype), "gu": np.array([1.0, 2.0], "float32"),
            "a": np.array([0, 3], dtype), "g64": np.array([[1, 2], [3, 4]], "int64")}


@pytest.fixture(scope="module")
def executables():
    cache = {}

    def get(name, dtype):
        key = (name, dtype)
        if key not in cache:
            mod = phasec.parse(HOSTILE.format(dtype=dtype, call=CALLS[name][0]))
            cache[key] = (mod, phasec.build(mod))
        return cache[key]
    return get


def _outcomes(mod, exe, args):
    results = []
    runners = [lambda: phasec.interp.run(mod, *args)]
    runners += [lambda k=k: phasec.VirtualMachine(exe, kernels=k)["main"](*args)
                for k in ("llvm", "interp")]
    for go in runners:
        try:
            results.append(("ok", np.asarray(go())))
        except IndexOutOfRangeError as exc:
            results.append(("error", (exc.value, exc.extent)))
        except phasec.PhasecError as exc:  # the reference interpreter wraps its errors
            cause = exc.__cause__ or exc.__context__
            assert isinstance(cause, IndexOutOfRangeError), exc
            results.append(("error", (cause.value, cause.extent)))
    return results


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bad", ["past_end", "before_start", "huge"])
def test_hostile_indices_are_errors_everywhere(executables, name, dtype, bad):
    mod, exe = executables(name, dtype)
    _, operand, extent = CALLS[name]
    args = _inputs(dtype)
    arr = args[operand].copy()
    if extent is None:  # gather_nd / scatter_nd: the first indexed axis has extent 4
        extent, pos = 4, (1, 0)
        if name == "gather_nd":
            operand, arr = "g64", args["g64"].copy()
    else:
        pos = (1, 1) if arr.ndim == 2 else (1,)
    value = {"past_end": extent, "before_start": -extent - 1,
             "huge": 2_000_000_000}[bad]
    arr[pos] = value
    args[operand] = arr
    outcomes = _outcomes(mod, exe, list(args.values()))
    assert outcomes == [("error", (value, extent))] * 3, outcomes


@pytest.mark.parametrize("name", sorted(CALLS))
def test_negative_indices_count_from_the_end_everywhere(executables, name):
    mod, exe = executables(name, "int64")
    args = _inputs("int64")
    _, operand, _ = CALLS[name]
    neg = args[operand].copy()
    extent = 4 if name in ("gather_nd", "scatter_nd", "index_put") else 5
    if name in ("gather_nd", "scatter_nd"):
        neg[:, 0] -= extent
    else:
        neg -= extent
    positive = list(args.values())
    args[operand] = neg
    expected = np.asarray(phasec.interp.run(mod, *positive))
    if name == "index_put":  # (a, a) indexes axes of extents 4 and 5: numpy's own indexing
        expected = args["x"].copy()
        expected[neg, neg] = 1.0
    for kind, value in _outcomes(mod, exe, list(args.values())):
        assert kind == "ok"
        np.testing.assert_allclose(value, expected, rtol=1e-6)


# ---------------------------------------------------------------------------
# compiled, against TVM 0.27 (in-range indices)
# ---------------------------------------------------------------------------

def test_compiled_matches_tvm(executables):
    import tvm
    from tvm import relax
    from tvm.script import from_source

    args = _inputs("int64")
    for name in sorted(CALLS):
        src = HOSTILE.format(dtype="int64", call=CALLS[name][0])
        vm = relax.VirtualMachine(tvm.compile(from_source(src), target="llvm"), tvm.cpu())
        theirs = vm["main"](*[tvm.runtime.tensor(a) for a in args.values()]).numpy()
        _, exe = executables(name, "int64")
        ours = phasec.VirtualMachine(exe)["main"](*args.values())
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-6, err_msg=name)
