"""PackConstantWeights: a matmul's constant weights are packed once per build
(the kernel no longer packs them on every call), with the same results as
the reference interpreter (numpy) on odd, prime and symbolic shapes; a
kernel also called with non-constant weights keeps its packing form."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.interp import run as interpret
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.te.schedules.gemm import PACK_MARK, PREPACK_ATTR
from phasec.target.tuning import host_tuning
from phasec.script.builder import BlockBuilder
from phasec.op import call_op
from phasec.pipeline import lower

from phasec.passes.pack_constant_weights import pack_weight

RNG = np.random.default_rng(16)


def _mlp(rows, k: int, n: int, *, variable_weight: bool = False):
    """relu(x @ W + b) with W, b constants (and, with ``variable_weight``, a
    second product x @ w of the same shapes whose weight is a parameter)."""
    x = Var("x", TensorStructInfo((rows, k), "float32"))
    params = [x]
    if variable_weight:
        params.append(Var("w", TensorStructInfo((k, n), "float32")))
    weight = (RNG.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    bias = RNG.standard_normal(n).astype(np.float32)
    bb = BlockBuilder()
    with bb.function("main", params):
        y = bb.emit(call_op("relax.matmul", x, Constant(weight)))
        y = bb.emit(call_op("relax.nn.relu", bb.emit(call_op("relax.add", y, Constant(bias)))))
        if variable_weight:
            y = bb.emit(call_op("relax.add", y, bb.emit(call_op("relax.matmul", x, params[1]))))
        bb.emit_func_output(y)
    return bb.get()


def _stmts(func: tir.PrimFunc) -> list:
    out, stack = [], [func.body]
    while stack:
        s = stack.pop()
        out.append(s)
        for f in type(s)._fields:
            v = getattr(s, f)
            if isinstance(v, tir.Stmt):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, tir.Stmt))
    return out


def _run(mod, *args):
    vm = phasec.VirtualMachine(phasec.build(mod))
    return np.asarray(vm["main"](*args))


def _check(mod, *args) -> None:
    want = np.asarray(interpret(mod, *args), dtype=np.float64)
    got = _run(mod, *args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_pack_weight_layout() -> None:
    w = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    p = pack_weight(w, 3)  # 3 micro-panels, the last one column short
    assert p.shape == (3, 5, 3)
    for t in range(3):
        for k in range(5):
            for c in range(3):
                col = t * 3 + c
                assert p[t, k, c] == (w[k, col] if col < 7 else 0)


def test_prime_shapes_pack_once_and_match_the_interpreter() -> None:
    # 37 rows (4 row tiles of 8 and 5 more), K and N prime: the last 13
    # columns are narrower than a micro-panel and read the weight directly
    mod = _mlp(37, 521, 557)
    low = lower(mod)
    kernels = dict(low.prim_funcs())
    assert any(name.endswith("_prepacked") for name in kernels), sorted(kernels)
    for name, func in kernels.items():
        assert not any(type(s) is tir.AttrStmt and s.key == PACK_MARK for s in _stmts(func)), name
        assert PREPACK_ATTR not in func.attrs
    packed = [f for n, f in kernels.items() if n.endswith("_prepacked")][0]
    # the remainder columns still read the weight: the packed copy comes after it
    shapes = [tuple(int(d.value) for d in p.shape) for p in packed.params]
    (three,) = [sh for sh in shapes if len(sh) == 3]
    width = three[2]
    assert (521, 557) in shapes and three == (-(-557 // width), 521, width)
    assert shapes.index(three) == shapes.index((521, 557)) + 1
    _check(mod, RNG.standard_normal((37, 521)).astype(np.float32))


def test_whole_micro_panels_replace_the_weight() -> None:
    mod = _mlp(16, 1024, 1024)
    kernels = dict(lower(mod).prim_funcs())
    (packed,) = [f for n, f in kernels.items() if n.endswith("_prepacked")]
    assert len(kernels) == 1  # the packing kernel nothing calls any more is gone
    shapes = [tuple(int(d.value) for d in p.shape) for p in packed.params]
    assert (1024, 1024) not in shapes
    _check(mod, RNG.standard_normal((16, 1024)).astype(np.float32))


def test_symbolic_rows() -> None:
    n = tir.Var("n", "int64")
    mod = _mlp(n, 521, 557)
    assert any(name.endswith("_prepacked") for name, _ in lower(mod).prim_funcs())
    vm = phasec.VirtualMachine(phasec.build(mod))
    for rows in (1, 5, 8, 37):
        x = RNG.standard_normal((rows, 521)).astype(np.float32)
        want = np.asarray(interpret(mod, x), dtype=np.float64)
        np.testing.assert_allclose(np.asarray(vm["main"](x)), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())


def test_a_kernel_also_called_with_variable_weights_stays() -> None:
    mod = _mlp(37, 521, 557, variable_weight=True)
    names = sorted(name for name, _ in lower(mod).prim_funcs())
    assert any(n.endswith("_prepacked") for n in names)
    assert any(PACK_MARK in repr(f) for _, f in lower(mod).prim_funcs())  # the original
    x = RNG.standard_normal((37, 521)).astype(np.float32)
    w = RNG.standard_normal((521, 557)).astype(np.float32)
    _check(mod, x, w)


@pytest.mark.parametrize("opt_level", [1, 2])
def test_same_values_with_and_without_the_pass(opt_level: int) -> None:
    mod = _mlp(24, 521, 557)
    x = RNG.standard_normal((24, 521)).astype(np.float32)
    names = [n for n, _ in lower(mod, opt_level=opt_level).prim_funcs()]
    assert any(n.endswith("_prepacked") for n in names) == (opt_level >= 2)
    vm = phasec.VirtualMachine(phasec.build(mod, opt_level=opt_level))
    want = np.asarray(interpret(mod, x), dtype=np.float64)
    np.testing.assert_allclose(np.asarray(vm["main"](x)), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


def _misaligned(a: np.ndarray, skew: int) -> np.ndarray:
    """A copy of ``a`` whose data starts ``skew`` bytes past a 64-byte boundary."""
    raw = np.empty(a.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + skew
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % 64 == skew
    return out


@pytest.mark.parametrize("skew", [4, 16, 32, 48])
def test_constants_are_cache_line_aligned_whatever_their_source(skew: int) -> None:
    # Kernels stream constant weights with 64-byte vector loads: a constant's
    # data starts on a cache line, whatever the array it was made from.
    for a in (RNG.standard_normal((1021, 37)).astype(np.float32),   # prime shape
              RNG.integers(-9, 9, (3, 5, 7)).astype(">i4"),          # big-endian
              RNG.standard_normal((13, 11)).T,                        # a transposed view
              np.array(2.5, np.float64), np.arange(3, dtype=np.int8)):
        src = _misaligned(np.ascontiguousarray(a), skew) if a.flags.c_contiguous else a
        data = Constant(src).data
        assert data.ctypes.data % 64 == 0 and data.flags.c_contiguous
        assert not data.flags.writeable and data.dtype.isnative
        np.testing.assert_array_equal(data, a)
    # the executable hands kernels the aligned arrays (a batch-1 product of
    # prime sizes: its weight read directly, not packed), same results
    mod = _mlp(1, 1021, 37)
    exe = phasec.build(mod)
    big = [c for c in exe.constants if isinstance(c, np.ndarray) and c.size > 1]
    assert big and all(c.ctypes.data % 64 == 0 for c in big)
    _check(mod, RNG.standard_normal((1, 1021)).astype(np.float32))


# A matrix-vector product (1 or 2 rows) whose weight is a constant streams it
# from micro-panels packed once per build (TargetTuning.gemv_cols columns),
# one sequential stream per panel into register accumulators.
def _kernels(mod, **kw) -> dict[str, tir.PrimFunc]:
    return dict(lower(mod, **kw).prim_funcs())


@pytest.mark.parametrize("rows,k,n", [(1, 521, 557), (2, 37, 300), (1, 1024, 1024), (1, 7, 513)])
def test_matrix_vector_products_read_constant_weights_packed(rows, k, n) -> None:
    # prime and odd sizes: whole panels plus columns past the last one (packed
    # too, as a zero-padded micro-panel: the weight itself is no longer read),
    # two rows (narrower panels)
    mod = _mlp(rows, k, n)
    kernels = _kernels(mod)
    (packed,) = [f for name, f in kernels.items() if name.endswith("_prepacked")]
    three = [tuple(int(d.value) for d in p.shape) for p in packed.params if len(p.shape) == 3]
    width = host_tuning().gemv_cols(rows, 32)
    assert three == [(-(-n // width), k, width)]   # the last one zero-padded
    assert (k, n) not in [tuple(int(d.value) for d in p.shape) for p in packed.params]
    assert not any(PACK_MARK in repr(f) for f in kernels.values())   # nothing packs per call
    _check(mod, RNG.standard_normal((rows, k)).astype(np.float32))


def test_matrix_vector_products_of_variable_or_narrow_weights_read_rows() -> None:
    # a weight that is a parameter (beside a product of the same shapes with
    # a constant weight, which is packed), a weight narrower than one panel,
    # and opt_level 1 (no PackConstantWeights): rows of B, nothing packed per call
    x = RNG.standard_normal((1, 521)).astype(np.float32)
    for mod, kw, args in ((_mlp(1, 521, 557, variable_weight=True), {},
                           (x, RNG.standard_normal((521, 557)).astype(np.float32))),
                          (_mlp(1, 521, 100), {}, (x,)),
                          (_mlp(1, 521, 557), {"opt_level": 1}, (x,))):
        kernels = _kernels(mod, **kw)
        assert not any(PACK_MARK in repr(f) for f in kernels.values()), sorted(kernels)
        if kw:
            vm = phasec.VirtualMachine(phasec.build(mod, **kw))
            want = np.asarray(interpret(mod, *args), dtype=np.float64)
            np.testing.assert_allclose(np.asarray(vm["main"](*args)), want, rtol=1e-4,
                                       atol=1e-4 * np.abs(want).max())
        else:
            _check(mod, *args)


@pytest.mark.parametrize("op,wshape,xshape", [
    ("MatMul", [1024, 768], [256, 1024]),       # the GEMM's packed micro-panels
    ("Conv", [64, 64, 3, 3], [1, 64, 20, 20]),  # a Winograd convolution's transform
    # on 7x7, Winograd pays only with the transform done once: LegalizeOps
    # must see the variable's constant too (the weight is not a parameter)
    ("Conv", [64, 64, 3, 3], [1, 64, 7, 7]),
])
def test_a_weight_bound_to_a_variable_is_packed_and_its_binding_dropped(op, wshape, xshape):
    # ConstantOfShape weights (ONNX's test models) fold into constants that
    # stay bound to variables: they are packed like inline ones, and the
    # unpacked constant is not carried beside the packed one
    from onnx import TensorProto, helper, numpy_helper

    from phasec.frontend.onnx import from_onnx
    value = 0.01
    nodes = [helper.make_node("ConstantOfShape", ["wshape"], ["w"], value=helper.make_tensor(
                 "v", TensorProto.FLOAT, [1], [value])),
             helper.make_node(op, ["x", "w"], ["y"], **({"pads": [1, 1, 1, 1]} if op == "Conv"
                                                        else {}))]
    out_shape = [xshape[0], wshape[1]] if op == "MatMul" else xshape
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.array(wshape, np.int64), "wshape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    exe = phasec.build(from_onnx(model))
    assert [n for n in exe.prim_funcs if n.endswith("_prepacked")]
    shapes = [tuple(c.shape) for c in exe.constants if isinstance(c, np.ndarray)]
    assert tuple(wshape) not in shapes, shapes
    x = RNG.standard_normal(xshape).astype(np.float32)
    got = np.asarray(phasec.VirtualMachine(exe)["main"](x))
    w = np.full(wshape, value, np.float64)
    if op == "MatMul":
        want = x.astype(np.float64) @ w
    else:  # each output: value x the sum of the 3x3 window over every channel
        xp = np.pad(x.astype(np.float64).sum(axis=1), [(0, 0), (1, 1), (1, 1)])
        window = sum(xp[:, r:r + xshape[2], s:s + xshape[3]] for r in range(3) for s in range(3))
        want = np.repeat((value * window)[:, None], wshape[0], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
