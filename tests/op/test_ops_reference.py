"""Reference (numpy) implementations of every compute operator.

Each check compares the reference against plain numpy written independently
here, and checks that the result's shape and dtype agree with struct-info
inference for the same operands and attributes.
"""

import math

import numpy as np
import pytest

from phasec.ir import PrimValue, ShapeExpr, tir
from phasec.op import get_op, list_ops
from phasec.op.binary import BINARY_ARITH, COMPARISONS
from phasec.op.nn.activation import UNARY_ACTIVATIONS
from phasec.op.unary import UNARY as _UNARY

from helpers.op_coverage import (
    ATTENTION_TESTED, COMBINE_TESTED, DEVICE_GRAD_TESTED, EW_TESTED, EXT_TESTED, IMAGE_EXT_TESTED,
    IMAGE_QDQ_TESTED, INDEXING_TESTED, LAYOUT_TESTED, MORE_TESTED, NN_TESTED, SHAPE_TESTED,
    ONNX_OPS_TESTED, RNN_TESTED, SIGNAL_VISION_TESTED, SORTING_TESTED,
)
from helpers.op_reference import close, rand, run

#: the unary operators and the elementwise activations of relax.nn (nn/activation.py)
UNARY = {**_UNARY, **UNARY_ACTIVATIONS}


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BINARY_ARITH))
def test_binary_float32(name):
    a = rand(3, 1, 4, lo=0.5, hi=2.0)
    b = rand(2, 1, lo=0.5, hi=2.0)
    expected = {
        "add": a + b, "subtract": a - b, "multiply": a * b, "divide": a / b,
        "floor_divide": np.floor(a / b), "power": a ** b, "maximum": np.maximum(a, b),
        "minimum": np.minimum(a, b), "logical_and": ((a != 0) & (b != 0)).astype("float32"),
        "logical_or": ((a != 0) | (b != 0)).astype("float32"),
    }[name]
    out = run(name, a, b)
    assert out.dtype == np.float32
    close(out, expected)


def test_integer_division_semantics():
    a = np.array([7, -7, 7, -7, 0], "int32")
    b = np.array([2, 2, -2, -2, 3], "int32")
    np.testing.assert_array_equal(run("divide", a, b), [3, -3, -3, 3, 0])  # truncates
    np.testing.assert_array_equal(run("floor_divide", a, b), [3, -4, -4, 3, 0])
    assert run("divide", a, b).dtype == np.int32
    np.testing.assert_array_equal(run("power", np.array([2, 3, 2], "int32"),
                                      np.array([3, 2, -1], "int32")), [8, 9, 0])


def test_nan_propagation_in_maximum():
    a = np.array([np.nan, 1.0], "float32")
    b = np.array([0.0, np.nan], "float32")
    assert np.isnan(run("maximum", a, b)).all()


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparisons(name):
    a = rand(2, 3, dtype="int32", lo=-2, hi=2)
    b = rand(3, dtype="int32", lo=-2, hi=2)
    fn = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less,
          "less_equal": np.less_equal, "greater": np.greater,
          "greater_equal": np.greater_equal}[name]
    out = run(name, a, b)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, fn(a, b))


def _gelu(x):
    return np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32(name):
    x = rand(2, 5, lo=0.1, hi=3.0) * np.where(rand(2, 5) > 0, 1, -1).astype("float32")
    pos = np.abs(x) + np.float32(0.1)
    x64 = x.astype(np.float64)
    arg = pos if name in ("log", "sqrt", "rsqrt") else x
    pos64 = pos.astype(np.float64)
    expected = {
        "negative": -x64, "abs": np.abs(x64), "exp": np.exp(x64), "log": np.log(pos64),
        "sqrt": np.sqrt(pos64), "rsqrt": 1 / np.sqrt(pos64), "tanh": np.tanh(x64),
        "sigmoid": 1 / (1 + np.exp(-x64)),
        "erf": np.array([math.erf(v) for v in x64.ravel()]).reshape(x.shape),
        "floor": np.floor(x64), "ceil": np.ceil(x64), "round": np.round(x64),
        "logical_not": (x64 == 0).astype(np.float64), "nn.relu": np.maximum(x64, 0),
        "nn.gelu": _gelu(x64),
        "nn.gelu_tanh": 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3))),
        "nn.silu": x64 / (1 + np.exp(-x64)),
    }[name]
    out = run(name, arg)
    assert out.dtype == np.float32
    close(out, expected)


def test_round_is_half_to_even_and_ints_stay_ints():
    np.testing.assert_array_equal(run("round", np.array([0.5, 1.5, 2.5, -0.5], "float32")),
                                  [0.0, 2.0, 2.0, -0.0])
    np.testing.assert_array_equal(run("abs", np.array([-3, 4], "int32")), [3, 4])
    np.testing.assert_array_equal(run("nn.relu", np.array([-3, 4], "int32")), [0, 4])
    np.testing.assert_array_equal(run("logical_not", np.array([True, False])), [False, True])


def test_stop_fusion_is_identity():
    x = rand(3)
    out = run("stop_fusion", x)
    np.testing.assert_array_equal(out, x)


# ---------------------------------------------------------------------------
# nn
# ---------------------------------------------------------------------------

def test_softmax_and_log_softmax():
    x = rand(2, 3, 4, lo=-5, hi=5)
    for axis in (-1, 1, 0):
        e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
        sm = e / e.sum(axis=axis, keepdims=True)
        out = run("nn.softmax", x, axis=axis)
        close(out, sm)
        close(run("nn.log_softmax", x, axis=axis), np.log(sm), 1e-4)
    big = np.array([1000.0, 1000.0], "float32")  # numerically stable
    close(run("nn.softmax", big), [0.5, 0.5])


def test_layer_norm():
    x = rand(2, 3, 4).astype("float32")
    g = rand(4)
    b = rand(4)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = x64.var(-1, keepdims=True)
    norm = (x64 - mean) / np.sqrt(var + 1e-5)
    close(run("nn.layer_norm", x, g, b, axes=[-1]), norm * g + b, 1e-4)
    close(run("nn.layer_norm", x, g, b, axes=[-1], center=False, scale=False), norm, 1e-4)
    g2 = rand(3, 4)
    mean2 = x64.mean((1, 2), keepdims=True)
    var2 = x64.var((1, 2), keepdims=True)
    close(run("nn.layer_norm", x, g2, g2, axes=[1, 2], epsilon=1e-3),
          (x64 - mean2) / np.sqrt(var2 + 1e-3) * g2 + g2, 1e-4)


def test_rms_norm():
    x = rand(2, 5)
    w = rand(5)
    x64 = x.astype(np.float64)
    expected = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w
    close(run("nn.rms_norm", x, w), expected, 1e-4)


def _conv2d_naive(x, w, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    acc = 0.0
                    for ic in range(cg):
                        for p in range(kh):
                            for q in range(kw):
                                acc += xp[b, g * cg + ic, i * stride[0] + p * dil[0],
                                          j * stride[1] + q * dil[1]] * w[oc, ic, p, q]
                    out[b, oc, i, j] = acc
    return out


@pytest.mark.parametrize("stride,pad,dil,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 1), (1, 2, 0, 1), (1, 1), 1),
    ((1, 1), (1, 1, 1, 1), (2, 2), 1),
    ((1, 2), (1, 0, 1, 0), (1, 1), 2),
])
def test_conv2d(stride, pad, dil, groups):
    x = rand(2, 4, 7, 6)
    w = rand(6, 4 // groups, 3, 2)
    out = run("nn.conv2d", x, w, strides=stride, padding=pad, dilation=dil, groups=groups)
    close(out, _conv2d_naive(x, w, stride, pad, dil, groups), 1e-4)


def test_conv2d_int8_out_dtype():
    x = rand(1, 2, 4, 4, dtype="int8", lo=-100, hi=100)
    w = rand(3, 2, 2, 2, dtype="int8", lo=-100, hi=100)
    out = run("nn.conv2d", x, w, out_dtype="int32")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, _conv2d_naive(x, w, (1, 1), (0,) * 4, (1, 1), 1).astype(np.int64))


def _pool_naive(x, k, s, pad, dil, ceil_mode, mode, include_pad):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pad

    def size(dim, kk, ss, dd, p0, p1):
        num = dim + p0 + p1 - dd * (kk - 1) - 1 + (ss - 1 if ceil_mode else 0)
        raw = num // ss + 1
        # TVM 0.27 (and PyTorch): with ceil_mode no window starts past the input
        return raw - 1 if ceil_mode and (raw - 1) * ss >= dim + p0 else raw

    oh, ow = size(h, k[0], s[0], dil[0], pt, pb), size(w, k[1], s[1], dil[1], pl, pr)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            vals, count = [], 0
            for p in range(k[0]):
                for q in range(k[1]):
                    r, cc = i * s[0] - pt + p * dil[0], j * s[1] - pl + q * dil[1]
                    inside = 0 <= r < h and 0 <= cc < w
                    padded = -pt <= r < h + pb and -pl <= cc < w + pr
                    if inside:
                        vals.append(x[:, :, r, cc].astype(np.float64))
                    if inside or (include_pad and padded):
                        count += 1
            if mode == "max":
                out[:, :, i, j] = np.max(vals, axis=0) if vals else -np.inf
            else:
                out[:, :, i, j] = (np.sum(vals, axis=0) if vals else 0) / max(count, 1)
    return out


@pytest.mark.parametrize("k,s,pad,dil,ceil_mode,include_pad", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, True),
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True, False),
    ((3, 2), (2, 3), (1, 0, 2, 1), (1, 1), True, True),
    ((2, 2), (1, 1), (0, 0, 0, 0), (2, 2), False, False),
])
def test_pools(k, s, pad, dil, ceil_mode, include_pad):
    x = rand(2, 3, 7, 7)
    kw = dict(pool_size=k, strides=s, padding=pad, dilation=dil, ceil_mode=ceil_mode,
              count_include_pad=include_pad)
    close(run("nn.max_pool2d", x, **kw), _pool_naive(x, k, s, pad, dil, ceil_mode, "max", include_pad))
    close(run("nn.avg_pool2d", x, **kw), _pool_naive(x, k, s, pad, dil, ceil_mode, "avg", include_pad))


def test_pool2d_nhwc_and_packed_layouts():
    x = rand(2, 8, 7, 6)
    kw = dict(pool_size=(3, 2), strides=(2, 2), padding=(1, 0, 1, 1), ceil_mode=True)
    for mode in ("max", "avg"):
        want = _pool_naive(x, (3, 2), (2, 2), (1, 0, 1, 1), (1, 1), True, mode, False)
        got = run(f"nn.{mode}_pool2d", np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
                  layout="NHWC", **kw)
        close(got, want.transpose(0, 2, 3, 1))
        # NCHW4c in (channels split 2 x 4, the block last), NCHW out
        packed = np.ascontiguousarray(x.reshape(2, 2, 4, 7, 6).transpose(0, 1, 3, 4, 2))
        close(run(f"nn.{mode}_pool2d", packed, layout="NCHW4c", out_layout="NCHW", **kw), want)


# ---------------------------------------------------------------------------
# matmul and reductions
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                   ((2, 1, 3, 4), (5, 4, 2)), ((6, 3, 4), (4, 2))])
def test_matmul(sa, sb):
    a, b = rand(*sa), rand(*sb)
    out = run("matmul", a, b)
    close(out, np.matmul(a.astype(np.float64), b.astype(np.float64)), 1e-4)
    assert out.dtype == np.float32


def test_matmul_out_dtype_accumulates_in_it():
    a = np.full((2, 64), 100, "int8")
    b = np.full((64, 3), 100, "int8")
    out = run("matmul", a, b, out_dtype="int32")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.full((2, 3), 640000))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), ((1,), False),
                                           ((0, -1), True), ((), False)])
def test_reductions(axis, keepdims):
    x = rand(2, 3, 4, lo=0.5, hi=1.5)
    x64 = x.astype(np.float64)
    np_axis = None if axis is None else tuple(a % 3 for a in axis)
    for name, fn in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
                     ("prod", np.prod)):
        out = run(name, x, axis=axis, keepdims=keepdims)
        assert out.dtype == np.float32
        close(out, fn(x64, axis=np_axis, keepdims=keepdims), 1e-5)


def test_integer_reductions():
    x = np.array([[-3, 4], [5, 7]], "int32")
    np.testing.assert_array_equal(run("sum", x, axis=[1]), [1, 12])
    np.testing.assert_array_equal(run("mean", x, axis=[1]), [0, 6])  # truncates
    np.testing.assert_array_equal(run("mean", np.array([-3, -4], "int32")), -3)
    assert run("sum", x).dtype == np.int32


# ---------------------------------------------------------------------------
# manipulation and creation
# ---------------------------------------------------------------------------

def test_shape_manipulation():
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(run("reshape", x, ShapeExpr([4, -1])), x.reshape(4, 6))
    np.testing.assert_array_equal(run("flatten", x), x.reshape(-1))
    np.testing.assert_array_equal(run("permute_dims", x), x.transpose())
    np.testing.assert_array_equal(run("permute_dims", x, axes=[1, -1, 0]), x.transpose(1, 2, 0))
    np.testing.assert_array_equal(run("expand_dims", x, axis=[0, -1]), x[None, ..., None])
    y = rand(1, 3, 1)
    np.testing.assert_array_equal(run("squeeze", y), y.reshape(3))
    np.testing.assert_array_equal(run("squeeze", y, axis=[-1]), y.reshape(1, 3))
    np.testing.assert_array_equal(run("broadcast_to", rand(3, 1), ShapeExpr([2, 3, 4])).shape,
                                  (2, 3, 4))
    z = rand(3, 1)
    np.testing.assert_array_equal(run("broadcast_to", z, ShapeExpr([2, 3, 4])),
                                  np.broadcast_to(z, (2, 3, 4)))


def test_concat_split():
    a, b = rand(2, 3), rand(2, 5)
    np.testing.assert_array_equal(run("concat", [a, b], axis=1), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(run("concat", [a, a], axis=-2), np.concatenate([a, a], 0))
    np.testing.assert_array_equal(run("concat", [a, b], axis=None),
                                  np.concatenate([a.ravel(), b.ravel()]))
    x = rand(6, 4)
    parts = run("split", x, indices_or_sections=3)
    for got, want in zip(parts, np.split(x, 3)):
        np.testing.assert_array_equal(got, want)
    parts = run("split", x, indices_or_sections=[1, 3], axis=1)
    for got, want in zip(parts, np.split(x, [1, 3], axis=1)):
        np.testing.assert_array_equal(got, want)
    parts = run("split", x, indices_or_sections=[2, 9])  # clipped to the dimension
    assert [p.shape[0] for p in parts] == [2, 4, 0]
    # uneven sections: ceil(10 / 4) = 3 rows each, the last the rest (TVM 0.27)
    y = rand(10, 2)
    parts = run("split", y, indices_or_sections=4)
    for got, want in zip(parts, (y[0:3], y[3:6], y[6:9], y[9:10])):
        np.testing.assert_array_equal(got, want)
    # decreasing and negative split points are clamped into [0, dim] (TVM, not numpy)
    parts = run("split", y, indices_or_sections=[3, 1, 12])
    for got, want in zip(parts, (y[0:3], y[3:3], y[1:10], y[10:10])):
        np.testing.assert_array_equal(got, want)
    parts = run("split", y, indices_or_sections=[-2, 4])
    for got, want in zip(parts, (y[0:0], y[0:4], y[4:10])):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run("split", y, indices_or_sections=1), y)


def test_strided_slice_and_take():
    x = rand(10, 6)
    np.testing.assert_array_equal(
        run("strided_slice", x, axes=[0, 1], begin=[1, 4], end=[8, 0], strides=[3, -2]),
        x[1:8:3, 4:0:-2])
    np.testing.assert_array_equal(run("strided_slice", x, axes=[-1], begin=[-3], end=[100]),
                                  x[:, -3:100])
    np.testing.assert_array_equal(run("strided_slice", x, axes=[0], begin=[9], end=[-11],
                                      strides=[-1]), x[::-1])
    idx = np.array([[0, 5], [2, 2]], "int64")
    np.testing.assert_array_equal(run("take", x, idx, axis=0), x[idx])
    np.testing.assert_array_equal(run("take", x, np.array([1, 0], "int32"), axis=-1), x[:, [1, 0]])
    np.testing.assert_array_equal(run("take", x, idx), x.ravel()[idx])
    # a scalar index (R.prim_value): the axis goes away, as x[3] / x[:, 2]
    three = PrimValue(tir.IntImm(3, "int64"))
    np.testing.assert_array_equal(run("take", x, three, axis=0), x[3])
    np.testing.assert_array_equal(run("take", x, PrimValue(tir.IntImm(-1, "int32")), axis=1),
                                  x[:, -1])


def test_astype_where_clip():
    x = rand(2, 3, lo=-3, hi=3)
    out = run("astype", x, dtype="int32")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, x.astype("int32"))
    cond = rand(2, 1, dtype="bool")
    y = rand(3)
    np.testing.assert_array_equal(run("where", cond, x, y), np.where(cond, x, y))
    np.testing.assert_array_equal(run("clip", x, min=-1, max=1.5), np.clip(x, -1, 1.5))
    xi = np.array([-5, 3, 9], "int32")
    np.testing.assert_array_equal(run("clip", xi, min=0, max=6), [0, 3, 6])


def test_creation():
    np.testing.assert_array_equal(run("zeros", ShapeExpr([2, 3]), dtype="int32"),
                                  np.zeros((2, 3), "int32"))
    np.testing.assert_array_equal(run("ones", ShapeExpr([4])), np.ones(4, "float32"))
    out = run("full", ShapeExpr([2, 2]), np.array(2.5, "float32"))
    np.testing.assert_array_equal(out, np.full((2, 2), 2.5, "float32"))
    out = run("full", ShapeExpr([3]), PrimValue(tir.IntImm(7, "int32")), dtype="float32")
    np.testing.assert_array_equal(out, np.full(3, 7.0, "float32"))
    out = run("full", ShapeExpr([2]), PrimValue(tir.IntImm(7, "int32")))  # dtype from the fill
    np.testing.assert_array_equal(out, np.full(2, 7, "int32"))
    assert get_op("relax.full").reference((2,), 1.5).dtype == np.float32
    x = rand(2, 3)
    np.testing.assert_array_equal(run("zeros_like", x), np.zeros_like(x))
    out = run("ones_like", x, dtype="int64")
    np.testing.assert_array_equal(out, np.ones((2, 3), "int64"))


def test_every_compute_op_is_covered_here():
    tested = set(BINARY_ARITH) | set(COMPARISONS) | set(UNARY) | {
        "stop_fusion", "nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.rms_norm",
        "nn.conv2d", "nn.max_pool2d", "nn.avg_pool2d", "matmul", "sum", "mean", "max", "min",
        "prod", "reshape", "flatten", "permute_dims", "expand_dims", "squeeze", "broadcast_to",
        "concat", "split", "strided_slice", "take", "astype", "where", "clip", "zeros", "ones",
        "full", "zeros_like", "ones_like"}
    tested |= NN_TESTED | ATTENTION_TESTED | IMAGE_QDQ_TESTED | EXT_TESTED | INDEXING_TESTED
    tested |= SHAPE_TESTED | EW_TESTED | SORTING_TESTED | COMBINE_TESTED | MORE_TESTED
    tested |= LAYOUT_TESTED | IMAGE_EXT_TESTED | DEVICE_GRAD_TESTED | RNN_TESTED
    tested |= SIGNAL_VISION_TESTED | ONNX_OPS_TESTED
    compute = {o.name.removeprefix("relax.") for o in list_ops() if o.category == "compute"}
    assert compute == tested
