"""The neural-network operators of phasec/op/nn/ and nn_{pool,conv}.py:
struct-info inference (TVM 0.27's results, symbolic and error cases), the
numpy references against independent formulas with explicit loops
(helpers/nn_loops.py), and against ONNX Runtime one-node models as a second reference.

Legalization (TIR interpreter, symbolic shapes) is in test_legalize.py's
tables; the end-to-end LLVM + VM run is test_ops_nn_e2e.py.
"""

import math

import numpy as np
import pytest

from phasec.ir import TensorStructInfo, tir
from phasec.interp.tir import eval_prim_expr
from phasec.op import call_op, get_op

from helpers.nn_loops import (
    adaptive_loops, channel_stats, conv_loops, conv_transpose_loops, pack_channels, pool_loops,
)
from helpers.op_infer import S, raises, tv
from helpers.op_reference import close, rand, run

n = tir.Var("n")
m = tir.Var("m")


# ---------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------

def test_activations_infer():
    x = tv("x", (n, 4))
    for name in ("nn.leakyrelu", "nn.selu", "nn.softplus"):
        assert S(call_op(name, x)) == 'R.Tensor((n, 4), dtype="float32")'
        raises(["float"], call_op, name, tv("xi", (2,), "int32"))
    assert S(call_op("nn.prelu", x, tv("a", (4,)), axis=-1)) == 'R.Tensor((n, 4), dtype="float32")'
    assert S(call_op("nn.prelu", x, tv("a", (1,)), axis=1)) == 'R.Tensor((n, 4), dtype="float32")'
    raises(["axis 2 is out of range"], call_op, "nn.prelu", x, tv("a", (4,)), axis=2)
    raises(["3 entries", "4 channels"], call_op, "nn.prelu", x, tv("a", (3,)))
    raises(["must be 1-D"], call_op, "nn.prelu", x, tv("a", (1, 4)))
    raises(["float"], call_op, "nn.prelu", tv("xi", (2, 4), "int32"), tv("a", (4,), "int32"))
    raises(["non-zero beta"], call_op, "nn.softplus", x, beta=0.0)


def test_batch_norm_infer():
    vec = lambda k: tv("p", (k,))  # noqa: E731
    call = call_op("nn.batch_norm", tv("x", (n, m, 4)), vec(m), vec(m), vec(m), vec(m), axis=1)
    assert S(call) == ('R.Tuple(R.Tensor((n, m, 4), dtype="float32"), '
                       'R.Tensor((m,), dtype="float32"), R.Tensor((m,), dtype="float32"))')
    # lengths that cannot be proven equal: ranks only (as TVM)
    call = call_op("nn.batch_norm", tv("x", (n, m, 4)), *[vec(4)] * 4, axis=1)
    assert S(call) == ('R.Tuple(R.Tensor(ndim=3, dtype="float32"), '
                       'R.Tensor(ndim=1, dtype="float32"), R.Tensor(ndim=1, dtype="float32"))')
    call = call_op("nn.batch_norm", tv("x", (2, 3, 4)), *[vec(4)] * 4, axis=-1)
    assert S(call).startswith('R.Tuple(R.Tensor((2, 3, 4), dtype="float32"), R.Tensor((4,)')
    raises(["length 4", "length 3"], call_op, "nn.batch_norm", tv("x", (2, 3, 4)),
           *[vec(4)] * 4, axis=1)
    raises(["float"], call_op, "nn.batch_norm", tv("x", (2, 3), "int32"),
           *[tv("p", (3,), "int32")] * 4, axis=1)
    raises(["dtype float16"], call_op, "nn.batch_norm", tv("x", (2, 3)), vec(3), vec(3), vec(3),
           tv("p", (3,), "float16"), axis=1)
    raises(["out of range"], call_op, "nn.batch_norm", tv("x", (2, 3)), *[vec(3)] * 4, axis=2)
    raises(["momentum"], call_op, "nn.batch_norm", tv("x", (2, 3)), *[vec(3)] * 4, axis=1,
           momentum=1.5)
    raises(["requires the attribute 'axis'"], call_op, "nn.batch_norm", tv("x", (2, 3)),
           *[vec(3)] * 4)


def test_group_and_instance_norm_infer():
    x = tv("x", (n, 6, 4))
    g, b = tv("g", (6,)), tv("b", (6,))
    call = call_op("nn.group_norm", x, g, b, num_groups=3, channel_axis=1, axes=[2])
    assert S(call) == 'R.Tensor((n, 6, 4), dtype="float32")'
    raises(["not divisible by num_groups=4"], call_op, "nn.group_norm", x, g, b, num_groups=4,
           channel_axis=1, axes=[2])
    raises(["must not be one of axes"], call_op, "nn.group_norm", x, g, b, num_groups=3,
           channel_axis=1, axes=[1])
    raises(["num_groups must be positive"], call_op, "nn.group_norm", x, g, b, num_groups=0,
           channel_axis=1, axes=[2])
    call = call_op("nn.instance_norm", x, g, b, channel_axis=-2, axes=[2])
    assert S(call) == 'R.Tensor((n, 6, 4), dtype="float32")'
    raises(["length 5", "length 6"], call_op, "nn.instance_norm", x, tv("g", (5,)),
           tv("b", (5,)), channel_axis=1, axes=[2])
    raises(["float"], call_op, "nn.instance_norm", tv("x", (2, 3), "int32"),
           tv("g", (3,), "int32"), tv("b", (3,), "int32"), channel_axis=1, axes=[0])


def test_dropout_infer():
    call = call_op("nn.dropout", tv("x", (n, 3), "int32"))
    assert S(call) == ('R.Tuple(R.Tensor((n, 3), dtype="int32"), '
                       'R.Tensor((n, 3), dtype="int32"))')
    raises(["rate must be in [0, 1]"], call_op, "nn.dropout", tv("x", (2,)), rate=1.5)


def test_pool_1d_3d_infer():
    # TVM 0.27: max_pool1d((1, 1, 5), 2, 2, 1, ceil_mode) -> 3 (the 4th window
    # would start in the trailing padding)
    assert S(call_op("nn.max_pool1d", tv("x", (1, 1, 5)), pool_size=2, strides=2, padding=1,
                     ceil_mode=True)) == 'R.Tensor((1, 1, 3), dtype="float32")'
    # symbolic: avg_pool1d((1, 4, n), 3, 2, 1, ceil_mode) -> n // 2 + 1 (as TVM)
    assert S(call_op("nn.avg_pool1d", tv("x", (1, 4, n)), pool_size=3, strides=2, padding=1,
                     ceil_mode=True)) == 'R.Tensor((1, 4, n // 2 + 1), dtype="float32")'
    # ceil_mode whose last window depends on n (TVM: T.if_then_else): integer
    # arithmetic that agrees with TVM's static results for every n
    sym = call_op("nn.max_pool1d", tv("x", (1, 1, n)), pool_size=2, strides=2, padding=1,
                  ceil_mode=True).struct_info.shape[2]
    for size, tvm_size in ((4, 3), (5, 3), (6, 4), (1, 1)):
        assert eval_prim_expr(sym, {n: size}) == tvm_size
    # TVM 0.27: max_pool3d((1, 4, n, 5, 6), 2, layout="NDHWC") -> (1, 3, n - 1, 4, 6)
    assert S(call_op("nn.max_pool3d", tv("x", (1, 4, n, 5, 6)), pool_size=2,
                     layout="NDHWC")) == 'R.Tensor((1, 3, n - 1, 4, 6), dtype="float32")'
    assert S(call_op("nn.avg_pool3d", tv("x", (1, 2, 4, 4, 4)), pool_size=2, strides=2,
                     layout="NCDHW", out_layout="NDHWC")) == \
        'R.Tensor((1, 2, 2, 2, 2), dtype="float32")'
    assert call_op("nn.avg_pool3d", tv("x", (1, 2, 4, 4, 4)), padding=(1, 2, 3)).attrs[
        "padding"] == (1, 2, 3, 1, 2, 3)
    raises(["padding needs 1, 3 or 6"], call_op, "nn.avg_pool3d", tv("x", (1, 2, 4, 4, 4)),
           padding=(1, 2))
    raises(["1-D pooling expects a 4-D tensor (NCW4c)"], call_op, "nn.max_pool1d",
           tv("x", (1, 2, 4)), layout="NCW4c")
    raises(["'NCW4' is not a layout"], call_op, "nn.max_pool1d", tv("x", (1, 2, 4)),
           layout="NCW4")
    raises(["expects a 3-D tensor"], call_op, "nn.max_pool1d", tv("x", (1, 2, 4, 4)))
    raises(["non-positive"], call_op, "nn.max_pool1d", tv("x", (1, 2, 2)), pool_size=3)
    raises(["pool_size must be positive"], call_op, "nn.max_pool1d", tv("x", (1, 2, 2)),
           pool_size=0)
    raises(["bool"], call_op, "nn.max_pool1d", tv("x", (1, 2, 2), "bool"))
    assert S(call_op("nn.max_pool1d", tv("x", ndim=3))) == 'R.Tensor(ndim=3, dtype="float32")'


def test_adaptive_pool_infer():
    assert S(call_op("nn.adaptive_avg_pool2d", tv("x", (1, 1, n, 5)), output_size=(2, 3))) == \
        'R.Tensor((1, 1, 2, 3), dtype="float32")'
    assert S(call_op("nn.adaptive_avg_pool2d", tv("x", (1, 1, n, 5)))) == \
        'R.Tensor((1, 1, n, 5), dtype="float32")'
    # TVM 0.27: adaptive_avg_pool3d((1, 4, n, 5, 6), (2, 2, 2), layout="NDHWC") -> (1, 2, 2, 2, 6)
    assert S(call_op("nn.adaptive_avg_pool3d", tv("x", (1, 4, n, 5, 6)), output_size=2,
                     layout="NDHWC")) == 'R.Tensor((1, 2, 2, 2, 6), dtype="float32")'
    assert S(call_op("nn.adaptive_avg_pool1d", tv("x", (1, 4, n)), output_size=1,
                     out_layout="NWC")) == 'R.Tensor((1, 1, 4), dtype="float32")'
    raises(["expected 1 or 2 integers"], call_op, "nn.adaptive_avg_pool2d", tv("x", (1, 1, 4, 4)),
           output_size=(1, 2, 3))
    raises(["must be positive"], call_op, "nn.adaptive_avg_pool1d", tv("x", (1, 1, 4)),
           output_size=0)


def test_conv_1d_3d_infer():
    # TVM 0.27: conv1d((n, 4, m), (6, 2, 3), strides=2, padding=1, groups=2) -> (n, 6, (m-1)//2+1)
    assert S(call_op("nn.conv1d", tv("x", (n, 4, m)), tv("w", (6, 2, 3)), strides=2, padding=1,
                     groups=2)) == 'R.Tensor((n, 6, (m - 1) // 2 + 1), dtype="float32")'
    # TVM 0.27: conv1d((n, m, 4), (3, 4, 6), NWC / WIO) -> (n, m - 2, 6)
    assert S(call_op("nn.conv1d", tv("x", (n, m, 4)), tv("w", (3, 4, 6)), data_layout="NWC",
                     kernel_layout="WIO")) == 'R.Tensor((n, m - 2, 6), dtype="float32")'
    # TVM 0.27: conv3d((1, 5, 6, 7, 4), (8, 4, 3, 3, 3), NDHWC -> NCDHW) -> (1, 8, 3, 4, 5)
    assert S(call_op("nn.conv3d", tv("x", (1, 5, 6, 7, 4)), tv("w", (8, 4, 3, 3, 3)),
                     data_layout="NDHWC", out_layout="NCDHW")) == \
        'R.Tensor((1, 8, 3, 4, 5), dtype="float32")'
    assert S(call_op("nn.conv1d", tv("x", (1, 4, 5), "int8"), tv("w", (2, 4, 3), "int8"),
                     out_dtype="int32")) == 'R.Tensor((1, 2, 3), dtype="int32")'
    raises(["4 input channels", "3 x groups(1)"], call_op, "nn.conv1d", tv("x", (1, 4, 5)),
           tv("w", (6, 3, 3)))
    raises(["5 output channels are not divisible by groups=2"], call_op, "nn.conv1d",
           tv("x", (1, 4, 5)), tv("w", (5, 2, 3)), groups=2)
    # a packed layout (TVM's sub-layouts) has one more dimension
    raises(["expects a 4-D data tensor (NCW4c), but it has ndim 3"], call_op, "nn.conv1d",
           tv("x", (1, 4, 5)), tv("w", (6, 4, 3)), data_layout="NCW4c")
    raises(["'NCW4' is not a layout"], call_op, "nn.conv1d", tv("x", (1, 4, 5)),
           tv("w", (6, 4, 3)), data_layout="NCW4")
    raises(["kernel_layout 'OIHW'"], call_op, "nn.conv1d", tv("x", (1, 4, 5)),
           tv("w", (6, 4, 3)), kernel_layout="OIHW")
    raises(["same datatype"], call_op, "nn.conv1d", tv("x", (1, 4, 5)),
           tv("w", (6, 4, 3), "float16"))
    raises(["non-positive"], call_op, "nn.conv3d", tv("x", (1, 1, 2, 2, 2)),
           tv("w", (1, 1, 3, 3, 3)))
    raises(["groups must be positive"], call_op, "nn.conv1d", tv("x", (1, 4, 5)),
           tv("w", (6, 4, 3)), groups=0)
    assert S(call_op("nn.conv3d", tv("x", ndim=5), tv("w", (1, 1, 1, 1, 1)))) == \
        'R.Tensor(ndim=5, dtype="float32")'


def test_conv_transpose_infer():
    # TVM 0.27: conv2d_transpose((1, 4, 3, 4), (4, 2, 2, 3), strides=(2, 1), padding=1,
    # groups=2, dilation=(1, 2)) -> (1, 4, 4, 6)
    assert S(call_op("nn.conv2d_transpose", tv("x", (1, 4, 3, 4)), tv("w", (4, 2, 2, 3)),
                     strides=(2, 1), padding=1, groups=2, dilation=(1, 2))) == \
        'R.Tensor((1, 4, 4, 6), dtype="float32")'
    assert S(call_op("nn.conv1d_transpose", tv("x", (n, 4, m)), tv("w", (4, 3, 3)), strides=2,
                     padding=(1, 0), output_padding=1)) == \
        'R.Tensor((n, 3, m * 2 + 1), dtype="float32")'
    assert S(call_op("nn.conv3d_transpose", tv("x", (1, 2, 3, 4, 2)), tv("w", (2, 2, 2, 2, 2)),
                     data_layout="NDHWC", kernel_layout="IODHW")) == \
        'R.Tensor((1, 3, 4, 5, 2), dtype="float32")'
    raises(["output_padding (2,) must be less than the strides (2,)"], call_op,
           "nn.conv1d_transpose", tv("x", (1, 4, 5)), tv("w", (4, 3, 3)), strides=2,
           output_padding=2)
    raises(["4 channels", "input channels are 3"], call_op, "nn.conv1d_transpose",
           tv("x", (1, 4, 5)), tv("w", (3, 3, 3)))
    raises(["3 input channels are not divisible by groups=2"], call_op, "nn.conv1d_transpose",
           tv("x", (1, 3, 5)), tv("w", (3, 3, 3)), groups=2)
    raises(["non-positive"], call_op, "nn.conv1d_transpose", tv("x", (1, 4, 1)),
           tv("w", (4, 3, 1)), padding=1)
    assert S(call_op("nn.conv2d_transpose", tv("x", (1, 4, 5, 5)), tv("w", (3, 4, 3, 3)),
                     kernel_layout="OIHW")) == 'R.Tensor((1, 3, 7, 7), dtype="float32")'
    raises(["kernel_layout 'OIHW4x' is not a layout", "permutation of 'IOHW'"], call_op,
           "nn.conv2d_transpose", tv("x", (1, 4, 5, 5)), tv("w", (4, 3, 3, 3)),
           kernel_layout="OIHW4x")
    raises(["expects a 5-D weight tensor (OIHW4o)"], call_op, "nn.conv2d_transpose",
           tv("x", (1, 4, 5, 5)), tv("w", (4, 3, 3, 3)), kernel_layout="OIHW4o")
    assert S(call_op("nn.conv2d_transpose", tv("x", ndim=4), tv("w", (4, 3, 3, 3)))) == \
        'R.Tensor(ndim=4, dtype="float32")'


# ---------------------------------------------------------------------------
# references against independent formulas
# ---------------------------------------------------------------------------

def test_activation_references():
    x = rand(3, 4, lo=-3, hi=3)
    xs = [float(v) for v in x.ravel()]
    alpha = 0.2
    close(run("nn.leakyrelu", x, alpha=alpha),
          np.array([v if v > 0 else alpha * v for v in xs]).reshape(x.shape))
    a, s = 1.6732632423543772, 1.0507009873554805
    close(run("nn.selu", x), np.array([s * v if v > 0 else s * a * (math.exp(v) - 1)
                                       for v in xs]).reshape(x.shape))
    beta, thr = 1.5, 2.0
    close(run("nn.softplus", x, beta=beta, threshold=thr),
          np.array([v if beta * v > thr else math.log(1 + math.exp(beta * v)) / beta
                    for v in xs]).reshape(x.shape))
    slope = rand(4)
    expected = np.array([[x[i, j] if x[i, j] > 0 else slope[j] * x[i, j] for j in range(4)]
                         for i in range(3)])
    close(run("nn.prelu", x, slope, axis=1), expected)
    close(run("nn.prelu", x, slope[:1], axis=0), np.where(x > 0, x, slope[0] * x))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("axis", [1, -1])
def test_batch_norm_reference(training, axis):
    x = rand(2, 3, 4)
    c = x.shape[axis]
    gamma, beta, mm = rand(c), rand(c), rand(c)
    mv = rand(c, lo=0.5, hi=2.0)
    out, new_mm, new_mv = run("nn.batch_norm", x, gamma, beta, mm, mv, axis=axis,
                              training=training, momentum=0.3, epsilon=1e-3)
    mean, var = channel_stats(x, axis) if training else (mm, mv)
    shape = [1, 1, 1]
    shape[axis] = c
    r = lambda v: np.asarray(v, np.float64).reshape(shape)  # noqa: E731
    close(out, (x - r(mean)) / np.sqrt(r(var) + 1e-3) * r(gamma) + r(beta), 1e-4)
    if training:
        close(new_mm, 0.7 * mm + 0.3 * mean)
        close(new_mv, 0.7 * mv + 0.3 * var)
    else:
        np.testing.assert_array_equal(new_mm, mm)
        np.testing.assert_array_equal(new_mv, mv)
    plain, _, _ = run("nn.batch_norm", x, gamma, beta, mm, mv, axis=axis, training=training,
                      center=False, scale=False, epsilon=1e-3)
    close(plain, (x - r(mean)) / np.sqrt(r(var) + 1e-3), 1e-4)


def test_group_and_instance_norm_references():
    x = rand(2, 6, 5)
    g, b = rand(6), rand(6)
    expected = np.zeros(x.shape)
    for i in range(2):
        for grp in range(3):
            block = x[i, 2 * grp:2 * grp + 2].astype(np.float64)
            mu = block.sum() / block.size
            var = ((block - mu) ** 2).sum() / block.size
            for c in range(2 * grp, 2 * grp + 2):
                expected[i, c] = (x[i, c] - mu) / math.sqrt(var + 1e-5) * g[c] + b[c]
    close(run("nn.group_norm", x, g, b, num_groups=3, channel_axis=1, axes=[2]), expected, 1e-4)
    normalized = np.zeros(x.shape)
    for i in range(2):
        for c in range(6):
            row = x[i, c].astype(np.float64)
            mu = row.sum() / row.size
            var = ((row - mu) ** 2).sum() / row.size
            normalized[i, c] = (row - mu) / math.sqrt(var + 0.01)
    close(run("nn.instance_norm", x, g, b, channel_axis=1, axes=[2], epsilon=0.01),
          normalized * g[None, :, None] + b[None, :, None], 1e-4)
    # channels last, without the gamma scale
    xl = np.ascontiguousarray(np.moveaxis(x, 1, 2))
    out = run("nn.instance_norm", xl, g, b, channel_axis=2, axes=[1], epsilon=0.01, scale=False)
    close(out, np.moveaxis(normalized + b[None, :, None], 1, 2), 1e-4)


def test_dropout_reference():
    x = rand(2, 3)
    out, mask = run("nn.dropout", x, rate=0.3)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones((2, 3), "float32"))


POOL_CASES = [
    (1, dict(pool_size=(2,), strides=(2,), padding=(0, 0)), False, False),
    (1, dict(pool_size=(3,), strides=(2,), padding=(1, 1)), False, True),
    (1, dict(pool_size=(2,), strides=(2,), padding=(1, 1)), True, False),
    (1, dict(pool_size=(3,), strides=(3,), padding=(1, 2), dilation=(2,)), True, True),
    (3, dict(pool_size=(2, 2, 2), strides=(1, 1, 1), padding=(0,) * 6), False, False),
    (3, dict(pool_size=(3, 2, 2), strides=(2, 1, 2), padding=(1, 0, 1, 1, 1, 0)), False, True),
    (3, dict(pool_size=(2, 2, 2), strides=(2, 2, 2), padding=(0,) * 6), True, False),
]


@pytest.mark.parametrize("rank,kw,ceil_mode,include_pad", POOL_CASES)
def test_pool_references(rank, kw, ceil_mode, include_pad):
    x = rand(*((2, 3, 7) if rank == 1 else (1, 2, 5, 4, 5)))
    dil = kw.get("dilation", (1,) * rank)
    attrs = dict(kw, ceil_mode=ceil_mode, count_include_pad=include_pad)
    for kind in ("max", "avg"):
        expected = pool_loops(x, kind, kw["pool_size"], kw["strides"], kw["padding"], dil,
                               ceil_mode, include_pad)
        close(run(f"nn.{kind}_pool{rank}d", x, **attrs), expected)


def test_pool_layouts_and_integers():
    x = rand(2, 3, 7)
    nwc = np.ascontiguousarray(x.transpose(0, 2, 1))
    expected = pool_loops(x, "avg", (3,), (2,), (1, 1), (1,), False, False)
    close(run("nn.avg_pool1d", nwc, pool_size=3, strides=2, padding=1, layout="NWC"),
          expected.transpose(0, 2, 1))
    close(run("nn.avg_pool1d", nwc, pool_size=3, strides=2, padding=1, layout="NWC",
              out_layout="NCW"), expected)
    xi = rand(1, 2, 6, dtype="int32", lo=-20, hi=20)
    out = run("nn.avg_pool1d", xi, pool_size=4, strides=2, padding=1)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(
        out, np.floor(pool_loops(xi, "avg", (4,), (2,), (1, 1), (1,), False, False)))
    np.testing.assert_array_equal(run("nn.max_pool1d", xi, pool_size=3, padding=1),
                                  pool_loops(xi, "max", (3,), (1,), (1, 1), (1,), False, False))


@pytest.mark.parametrize("rank,shape,sizes", [
    (1, (2, 3, 7), (3,)), (1, (1, 2, 5), (5,)), (1, (1, 2, 4), (7,)),
    (2, (1, 3, 7, 5), (3, 2)), (2, (2, 2, 6, 6), (1, 1)),
    (3, (1, 2, 5, 4, 3), (2, 3, 2)),
])
def test_adaptive_pool_references(rank, shape, sizes):
    x = rand(*shape)
    close(run(f"nn.adaptive_avg_pool{rank}d", x, output_size=sizes), adaptive_loops(x, sizes))


def test_adaptive_pool_default_size_and_layout():
    x = rand(1, 5, 4, 3)  # NHWC
    out = run("nn.adaptive_avg_pool2d", x, output_size=(2, 2), layout="NHWC")
    expected = adaptive_loops(x.transpose(0, 3, 1, 2), (2, 2)).transpose(0, 2, 3, 1)
    close(out, expected)
    np.testing.assert_allclose(run("nn.adaptive_avg_pool2d", x, layout="NHWC"), x, rtol=1e-6)


@pytest.mark.parametrize("s,pad,dil,groups", [
    ((1,), (0, 0), (1,), 1), ((2,), (1, 2), (1,), 1), ((1,), (2, 1), (2,), 2), ((3,), (1, 1), (1,), 4),
])
def test_conv1d_reference(s, pad, dil, groups):
    x = rand(2, 4, 9)
    w = rand(8, 4 // groups, 3)
    out = run("nn.conv1d", x, w, strides=s, padding=pad, dilation=dil, groups=groups)
    close(out, conv_loops(x, w, s, pad, dil, groups), 1e-4)


def test_conv1d_layouts_and_int8():
    x, w = rand(1, 4, 6), rand(3, 4, 2)
    expected = conv_loops(x, w, (1,), (1, 0), (1,), 1)
    out = run("nn.conv1d", np.ascontiguousarray(x.transpose(0, 2, 1)),
              np.ascontiguousarray(w.transpose(2, 1, 0)), padding=(1, 0), data_layout="NWC",
              kernel_layout="WIO")
    close(out, expected.transpose(0, 2, 1), 1e-4)
    xi = rand(1, 2, 5, dtype="int8", lo=-100, hi=100)
    wi = rand(3, 2, 2, dtype="int8", lo=-100, hi=100)
    out = run("nn.conv1d", xi, wi, out_dtype="int32")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, conv_loops(xi, wi, (1,), (0, 0), (1,), 1))


@pytest.mark.parametrize("layout,kernel,out_layout,s,pad,dil,groups", [
    ("NHWC", "HWIO", None, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("NHWC", "OHWI", "NCHW", (2, 1), (1, 0, 2, 1), (1, 2), 2),
    ("NHWC", "HWIO", None, (1, 1), (1, 1, 1, 1), (1, 1), 4),   # depthwise
    ("NCHW", "HWIO", "NHWC", (1, 2), (0, 1, 0, 1), (2, 1), 1),
    ("HWCN", "IOHW", "CNHW", (2, 2), (1, 1, 0, 0), (1, 1), 2),
])
def test_conv2d_layouts_reference(layout, kernel, out_layout, s, pad, dil, groups):
    x, w = rand(2, 4, 7, 6), rand(8, 4 // groups, 3, 2)   # NCHW / OIHW
    expected = conv_loops(x, w, s, pad, dil, groups)       # NCHW
    xl = np.ascontiguousarray(x.transpose(["NCHW".index(c) for c in layout]))
    wl = np.ascontiguousarray(w.transpose(["OIHW".index(c) for c in kernel]))
    out = run("nn.conv2d", xl, wl, strides=s, padding=pad, dilation=dil, groups=groups,
              data_layout=layout, kernel_layout=kernel, out_layout=out_layout)
    ol = out_layout or layout
    close(out, expected.transpose(["NCHW".index(c) for c in ol]), 1e-4)


def test_conv2d_packed_layouts_reference():
    x, w = rand(2, 8, 6, 5), rand(8, 4, 3, 2)   # NCHW / OIHW, groups 2
    expected = conv_loops(x, w, (1, 2), (1, 0, 1, 1), (1, 1), 2)
    # NCHW4c data, OIHW4o kernel, NCHW4c out
    out = run("nn.conv2d", pack_channels(x, 4), pack_channels(w, 4, axis=0), strides=(1, 2),
              padding=(1, 0, 1, 1), groups=2, data_layout="NCHW4c", kernel_layout="OIHW4o")
    close(out, pack_channels(expected, 4), 1e-4)
    # NHWC4c data, OHWI2i4o kernel (I split by 2, O by 4), NCHW out
    xh = pack_channels(x.transpose(0, 2, 3, 1), 4, axis=3)            # N H W C/4 4
    wo = w.transpose(0, 2, 3, 1)                                        # O H W I
    wo = wo.reshape(2, 4, 3, 2, 2, 2).transpose(0, 2, 3, 4, 5, 1)       # O/4 H W I/2 2i 4o
    out = run("nn.conv2d", xh, np.ascontiguousarray(wo), strides=(1, 2), padding=(1, 0, 1, 1),
              groups=2, data_layout="NHWC4c", kernel_layout="OHWI2i4o", out_layout="NCHW")
    close(out, expected, 1e-4)


@pytest.mark.parametrize("s,pad,dil,groups", [
    ((1, 1, 1), (0,) * 6, (1, 1, 1), 1),
    ((2, 1, 2), (1, 0, 1, 0, 1, 1), (1, 2, 1), 2),
])
def test_conv3d_reference(s, pad, dil, groups):
    x = rand(1, 4, 5, 4, 5)
    w = rand(4, 4 // groups, 2, 2, 3)
    out = run("nn.conv3d", x, w, strides=s, padding=pad, dilation=dil, groups=groups)
    close(out, conv_loops(x, w, s, pad, dil, groups), 1e-4)
    # the same in NDHWC / DHWIO
    out = run("nn.conv3d", np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1)),
              np.ascontiguousarray(w.transpose(2, 3, 4, 1, 0)), strides=s, padding=pad,
              dilation=dil, groups=groups, data_layout="NDHWC", kernel_layout="DHWIO",
              out_layout="NCDHW")
    close(out, conv_loops(x, w, s, pad, dil, groups), 1e-4)


@pytest.mark.parametrize("r,xs,ws,kw", [
    (1, (2, 4, 5), (4, 3, 3), dict(strides=(2,), padding=(1, 0), output_padding=(1,))),
    (1, (1, 4, 4), (4, 1, 2), dict(strides=(3,), padding=(0, 0), groups=4, dilation=(2,))),
    (2, (1, 4, 3, 4), (4, 2, 2, 3), dict(strides=(2, 1), padding=(1, 1, 1, 1), groups=2,
                                         dilation=(1, 2))),
    (3, (1, 2, 2, 3, 2), (2, 2, 2, 2, 2), dict(strides=(2, 2, 2), padding=(1, 0, 0, 0, 1, 1),
                                               output_padding=(1, 0, 1))),
])
def test_conv_transpose_references(r, xs, ws, kw):
    x, w = rand(*xs), rand(*ws)
    full = {"strides": (1,) * r, "padding": (0,) * (2 * r), "output_padding": (0,) * r,
            "dilation": (1,) * r, "groups": 1, **kw}
    out = run(f"nn.conv{r}d_transpose", x, w, **kw)
    expected = conv_transpose_loops(x, w, full["strides"], full["padding"],
                                      full["output_padding"], full["dilation"], full["groups"])
    close(out, expected, 1e-4)
    ort = _ort("ConvTranspose", {"x": x, "w": w}, r + 2, strides=list(full["strides"]),
               pads=list(full["padding"]), output_padding=list(full["output_padding"]),
               dilations=list(full["dilation"]), group=full["groups"])
    close(out, ort, 1e-4)


def test_conv2d_transpose_layouts():
    x, w = rand(1, 2, 3, 3), rand(2, 3, 2, 2)
    expected = conv_transpose_loops(x, w, (2, 2), (0, 1, 1, 0), (1, 0), (1, 1), 1)
    out = run("nn.conv2d_transpose", np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
              np.ascontiguousarray(w.transpose(2, 3, 1, 0)), strides=2, padding=(0, 1, 1, 0),
              output_padding=(1, 0), data_layout="NHWC", kernel_layout="HWOI")
    close(out, expected.transpose(0, 2, 3, 1), 1e-4)


# ---------------------------------------------------------------------------
# ONNX Runtime as a second reference
# ---------------------------------------------------------------------------

def _ort(op_type, inputs, out_rank, **attrs):
    """Run a one-node ONNX model on ``inputs`` (name -> float32 array)."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def test_against_onnxruntime_conv_pool_norm():
    x1, x3 = rand(2, 4, 9), rand(1, 2, 5, 4, 6)
    w1 = rand(6, 2, 3)
    out = run("nn.conv1d", x1, w1, strides=2, padding=(1, 2), dilation=2, groups=2)
    close(out, _ort("Conv", {"x": x1, "w": w1}, 3, strides=[2], pads=[1, 2], dilations=[2],
                    group=2), 1e-4)
    # conv2d on NHWC data with an HWIO weight against ONNX's NCHW / OIHW Conv
    x2, w2 = rand(1, 4, 6, 5), rand(6, 2, 3, 2)
    out = run("nn.conv2d", np.ascontiguousarray(x2.transpose(0, 2, 3, 1)),
              np.ascontiguousarray(w2.transpose(2, 3, 1, 0)), strides=(2, 1),
              padding=(1, 0, 0, 1), dilation=(1, 2), groups=2, data_layout="NHWC",
              kernel_layout="HWIO")
    close(out.transpose(0, 3, 1, 2), _ort("Conv", {"x": x2, "w": w2}, 4, strides=[2, 1],
                                           pads=[1, 0, 0, 1], dilations=[1, 2], group=2), 1e-4)
    w3 = rand(3, 2, 2, 3, 2)
    out = run("nn.conv3d", x3, w3, padding=(1, 0, 1, 0, 1, 1))
    close(out, _ort("Conv", {"x": x3, "w": w3}, 5, pads=[1, 0, 1, 0, 1, 1]), 1e-4)
    for kind, op_type in (("max", "MaxPool"), ("avg", "AveragePool")):
        out = run(f"nn.{kind}_pool3d", x3, pool_size=(2, 3, 2), strides=(1, 2, 2),
                  padding=(1, 1, 0, 0, 1, 1), count_include_pad=True)
        extra = {"count_include_pad": 1} if kind == "avg" else {}
        close(out, _ort(op_type, {"x": x3}, 5, kernel_shape=[2, 3, 2], strides=[1, 2, 2],
                        pads=[1, 1, 0, 0, 1, 1], **extra))
        out = run(f"nn.{kind}_pool1d", x1, pool_size=3, strides=2, padding=1)
        close(out, _ort(op_type, {"x": x1}, 3, kernel_shape=[3], strides=[2], pads=[1, 1]))
    close(run("nn.adaptive_avg_pool3d", x3, output_size=1),
          _ort("GlobalAveragePool", {"x": x3}, 5))
    g, b, mm = rand(4), rand(4), rand(4)
    mv = rand(4, lo=0.5, hi=2)
    out, _, _ = run("nn.batch_norm", x1, g, b, mm, mv, axis=1, training=False, epsilon=1e-3)
    close(out, _ort("BatchNormalization", {"x": x1, "g": g, "b": b, "m": mm, "v": mv}, 3,
                    epsilon=1e-3), 1e-4)
    out = run("nn.instance_norm", x1, g, b, channel_axis=1, axes=[2])
    close(out, _ort("InstanceNormalization", {"x": x1, "g": g, "b": b}, 3), 1e-4)


def test_against_onnxruntime_activations():
    x = rand(2, 3, 4, lo=-3, hi=3)
    close(run("nn.leakyrelu", x, alpha=0.3), _ort("LeakyRelu", {"x": x}, 3, alpha=0.3))
    slope = rand(3)
    close(run("nn.prelu", x, slope, axis=1),
          _ort("PRelu", {"x": x, "s": slope.reshape(3, 1)}, 3))
    close(run("nn.selu", x), _ort("Selu", {"x": x}, 3, alpha=1.6732632423543772,
                                  gamma=1.0507009873554805))
    close(run("nn.softplus", x), _ort("Softplus", {"x": x}, 3))


def test_reference_shapes_match_inference_for_symbolic_free_cases():
    # one call per operator with the attributes' defaults, through run()'s checks
    x3, x4, x5 = rand(1, 2, 4), rand(1, 2, 4, 4), rand(1, 2, 3, 3, 3)
    for name, args, kw in (
            ("nn.max_pool1d", (x3,), {}), ("nn.avg_pool3d", (x5,), {}),
            ("nn.adaptive_avg_pool1d", (x3,), {}), ("nn.adaptive_avg_pool2d", (x4,), {}),
            ("nn.conv1d", (x3, rand(3, 2, 1)), {}), ("nn.conv3d", (x5, rand(3, 2, 1, 1, 1)), {})):
        run(name, *args, **kw)
    assert get_op("relax.nn.batch_norm").attrs["training"] is True  # TVM's default
    assert isinstance(call_op("nn.conv1d", tv("x", (1, 2, 4)), tv("w", (3, 2, 1))).struct_info,
                      TensorStructInfo)
