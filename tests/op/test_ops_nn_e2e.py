"""The nn operators end to end: a TVMScript module in TVM 0.27's spelling
(every attribute written out, as TVM prints them) parsed, compiled with
phasec.build (FuseOps, LegalizeOps, LLVM kernels) and run on the VM, against
the independent loop formulas of helpers/nn_loops.py. One module, compiled once:
LLVM compilation dominates this file's run time."""

from __future__ import annotations

import math

import numpy as np
import pytest

import phasec

from helpers.nn_loops import (
    adaptive_loops, attention_loops, bilinear_half_pixel, channel_stats, conv_loops,
    conv_transpose_loops, pack_channels, pool_loops,
)

SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 9), dtype="float32"), w1: R.Tensor((6, 2, 3), dtype="float32"),
             v: R.Tensor((1, 2, 5, 4, 5), dtype="float32"),
             w3: R.Tensor((3, 2, 2, 2, 3), dtype="float32"),
             g: R.Tensor((4,), dtype="float32"), b: R.Tensor((4,), dtype="float32"),
             mm: R.Tensor((4,), dtype="float32"), mv: R.Tensor((4,), dtype="float32"),
             wt: R.Tensor((5, 3, 2, 2), dtype="float32")):
        with R.dataflow():
            c1 = R.nn.conv1d(x, w1, strides=[2], padding=[1, 2], dilation=[1], groups=2,
                             data_layout="NCW", kernel_layout="OIW", out_layout="NCW",
                             out_dtype="void")
            r1 = R.nn.leakyrelu(c1, alpha=0.1)
            c3 = R.nn.conv3d(v, w3, strides=[1, 1, 2], padding=[1, 0, 1, 0, 1, 1],
                             dilation=[1, 1, 1], groups=1, data_layout="NCDHW",
                             kernel_layout="OIDHW", out_layout="NCDHW", out_dtype="void")
            p1 = R.nn.max_pool1d(x, pool_size=[3], strides=[2], dilation=[1], padding=[1, 1],
                                 ceil_mode=True, count_include_pad=False, layout="NCW",
                                 out_layout="NCW")
            p3 = R.nn.avg_pool3d(v, pool_size=[2, 3, 2], strides=[1, 2, 2], dilation=[1, 1, 1],
                                 padding=[1, 1, 0, 0, 1, 1], ceil_mode=False,
                                 count_include_pad=True, layout="NCDHW", out_layout="NCDHW")
            v4 = R.reshape(v, R.shape([2, 5, 4, 5]))
            a2 = R.nn.adaptive_avg_pool2d(v4, output_size=[3, 2], layout="NCHW",
                                          out_layout="NCHW")
            a3 = R.nn.adaptive_avg_pool3d(v, output_size=[1, 1, 1], layout="NCDHW",
                                          out_layout="NCDHW")
            t2 = R.nn.conv2d_transpose(v4, wt, strides=[2, 1], padding=[1, 0, 0, 1],
                                       output_padding=[1, 0], dilation=[1, 1], groups=1,
                                       data_layout="NCHW", kernel_layout="IOHW",
                                       out_layout="NCHW", out_dtype="void")
            t2r = R.nn.relu(t2)
            bn = R.nn.batch_norm(x, g, b, mm, mv, axis=1, epsilon=1.0000000000000001e-05,
                                 center=True, scale=True, momentum=0.10000000000000001,
                                 training=False)
            bn0 = bn[0]
            bt = R.nn.batch_norm(x, g, b, mm, mv, axis=1, epsilon=1e-3, center=True,
                                 scale=True, momentum=0.25, training=True)
            gn = R.nn.group_norm(x, g, b, num_groups=2, channel_axis=1, axes=[2],
                                 epsilon=1e-5, center=True, scale=True)
            inn = R.nn.instance_norm(x, g, b, channel_axis=1, axes=[2], epsilon=1e-5,
                                     center=True, scale=True)
            d = R.nn.dropout(x, rate=0.5)
            act = R.nn.prelu(R.nn.selu(R.nn.softplus(x, beta=1.0, threshold=20.0)), g, axis=1)
            out = (r1, c3, p1, p3, a2, a3, bn0, bt, gn, inn, d, act, t2r)
            R.output(out)
        return out

    @R.function
    def losses(q: R.Tensor((2, 3, 4, 4), dtype="float32"), k: R.Tensor((2, 5, 2, 4), dtype="float32"),
               v: R.Tensor((2, 5, 2, 3), dtype="float32"), bias: R.Tensor((1, 4, 3, 5), dtype="float32"),
               p: R.Tensor((3, 4, 2), dtype="float32"), t: R.Tensor((3, 2), dtype="int64"),
               w: R.Tensor((4,), dtype="float32")):
        with R.dataflow():
            att = R.nn.attention_bias(q, k, v, bias, scale=0.5, causal_mask="TopLeft",
                                      window_size=None)
            att2 = R.nn.attention(q, k, v, scale=None, causal_mask="BottomRight", window_size=None)
            nll = R.nn.nll_loss(p, t, w, reduction="mean", ignore_index=3)
            ce = R.nn.cross_entropy_with_logits(p, p)
            out = (att, att2, nll, ce)
            R.output(out)
        return out

    @R.function
    def imgq(img: R.Tensor((1, 2, 5, 7), dtype="float32"), s: R.Tensor((2,), dtype="float32"),
             z: R.Tensor((2,), dtype="int8")):
        with R.dataflow():
            up = R.image.resize2d(img, R.shape([8, 3]), roi=[0.0, 0.0, 0.0, 0.0], layout="NCHW",
                                  method="linear", coordinate_transformation_mode="half_pixel",
                                  rounding_method="round", cubic_alpha=-0.75, cubic_exclude=0,
                                  extrapolation_value=0.0, out_dtype="void")
            q = R.quantize(up, s, z, axis=1, out_dtype="int8")
            dq = R.dequantize(q, s, z, axis=1, out_dtype="float32")
            out = (up, q, dq)
            R.output(out)
        return out

    @R.function
    def sym(x: R.Tensor(("n", 2, "w"), dtype="float32"), k: R.Tensor((3, 2, 2), dtype="float32")):
        n = T.int64()
        w = T.int64()
        with R.dataflow():
            c = R.nn.conv1d(x, k, strides=[1], padding=[1, 0], dilation=[1], groups=1,
                            data_layout="NCW", kernel_layout="OIW", out_layout="NCW",
                            out_dtype="void")
            p = R.nn.avg_pool1d(c, pool_size=[2], strides=[2], dilation=[1], padding=[0, 1],
                                ceil_mode=True, count_include_pad=False, layout="NCW",
                                out_layout="NCW")
            a = R.nn.adaptive_avg_pool1d(c, output_size=[2], layout="NCW", out_layout="NCW")
            R.output(p, a)
        return (p, a)

    @R.function
    def nhwc(x: R.Tensor(("n", 5, 6, 4), dtype="float32"),
             k: R.Tensor((3, 2, 2, 6), dtype="float32"), bias: R.Tensor((6,), dtype="float32"),
             kd: R.Tensor((6, 3, 3, 1), dtype="float32")):
        n = T.int64()
        with R.dataflow():
            c = R.nn.conv2d(x, k, strides=[1, 2], padding=[1, 0, 1, 1], dilation=[1, 1],
                            groups=2, data_layout="NHWC", kernel_layout="HWIO",
                            out_layout="NHWC", out_dtype=None)
            r = R.nn.relu(R.add(c, bias))
            d = R.nn.conv2d(r, kd, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[2, 1],
                            groups=6, data_layout="NHWC", kernel_layout="OHWI",
                            out_layout="NCHW", out_dtype=None)
            R.output(d)
        return d

    @R.function
    def packed(x: R.Tensor((1, 2, 5, 4, 4), dtype="float32"),
               w: R.Tensor((2, 8, 3, 3, 4), dtype="float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1],
                            groups=1, data_layout="NCHW4c", kernel_layout="OIHW4o",
                            out_layout="NCHW4c", out_dtype=None)
            r = R.nn.relu(c)
            R.output(r)
        return r
"""


@pytest.fixture(scope="module")
def vm():
    mod = phasec.parse(SOURCE)
    return phasec.VirtualMachine(phasec.build(mod))


def close(got, expected, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol)


def test_nn_module_on_llvm(vm):
    rng = np.random.default_rng(7)
    f = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    x, w1, v, w3, g, b, mm = f(2, 4, 9), f(6, 2, 3), f(1, 2, 5, 4, 5), f(3, 2, 2, 2, 3), f(4), \
        f(4), f(4)
    mv = (np.abs(f(4)) + 0.5).astype("float32")
    wt = f(5, 3, 2, 2)
    (r1, c3, p1, p3, a2, a3, bn0, bt, gn, inn, d, act, t2r) = vm["main"](x, w1, v, w3, g, b, mm,
                                                                         mv, wt)
    t2 = conv_transpose_loops(v.reshape(2, 5, 4, 5), wt, (2, 1), (1, 0, 0, 1), (1, 0), (1, 1), 1)
    close(t2r, np.maximum(t2, 0))
    c1 = conv_loops(x, w1, (2,), (1, 2), (1,), 2)
    close(r1, np.where(c1 > 0, c1, 0.1 * c1))
    close(c3, conv_loops(v, w3, (1, 1, 2), (1, 0, 1, 0, 1, 1), (1, 1, 1), 1))
    close(p1, pool_loops(x, "max", (3,), (2,), (1, 1), (1,), True, False))
    close(p3, pool_loops(v, "avg", (2, 3, 2), (1, 2, 2), (1, 1, 0, 0, 1, 1), (1, 1, 1), False,
                          True))
    close(a2, adaptive_loops(v.reshape(2, 5, 4, 5), (3, 2)))
    close(a3, v.mean(axis=(2, 3, 4), keepdims=True))
    col = lambda a: np.asarray(a, np.float64)[None, :, None]  # noqa: E731
    close(bn0, (x - col(mm)) / np.sqrt(col(mv) + 1e-5) * col(g) + col(b))
    mean, var = channel_stats(x, 1)
    close(bt[0], (x - col(mean)) / np.sqrt(col(var) + 1e-3) * col(g) + col(b))
    close(bt[1], 0.75 * mm + 0.25 * mean)
    close(bt[2], 0.75 * mv + 0.25 * var)
    grp = x.astype(np.float64).reshape(2, 2, 2, 9)
    norm = (grp - grp.mean(axis=(2, 3), keepdims=True)) / np.sqrt(
        grp.var(axis=(2, 3), keepdims=True) + 1e-5)
    close(gn, norm.reshape(x.shape) * col(g) + col(b))
    x64 = x.astype(np.float64)
    close(inn, (x64 - x64.mean(2, keepdims=True)) / np.sqrt(x64.var(2, keepdims=True) + 1e-5)
          * col(g) + col(b))
    np.testing.assert_array_equal(d[0], x)
    np.testing.assert_array_equal(d[1], np.ones_like(x))
    sp = np.log1p(np.exp(x64))
    se = 1.0507009873554805 * np.where(sp > 0, sp, 1.6732632423543772 * (np.exp(sp) - 1))
    close(act, np.where(se > 0, se, col(g) * se))


@pytest.mark.parametrize("n,w", [(1, 5), (3, 8)])
def test_symbolic_nn_function_on_llvm(vm, n, w):
    rng = np.random.default_rng(n * 10 + w)
    x = rng.standard_normal((n, 2, w)).astype("float32")
    k = rng.standard_normal((3, 2, 2)).astype("float32")
    p, a = vm["sym"](x, k)
    c = conv_loops(x, k, (1,), (1, 0), (1,), 1)
    close(p, pool_loops(c, "avg", (2,), (2,), (0, 1), (1,), True, False))
    close(a, adaptive_loops(c, (2,)))
    assert math.prod(np.asarray(p).shape) > 0


@pytest.mark.parametrize("n", [1, 3])
def test_nhwc_conv2d_on_llvm(vm, n):
    rng = np.random.default_rng(n)
    f = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    x, k, bias, kd = f(n, 5, 6, 4), f(3, 2, 2, 6), f(6), f(6, 3, 3, 1)
    d = vm["nhwc"](x, k, bias, kd)
    # the loop formula in NCHW / OIHW
    c = conv_loops(x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1), (1, 2), (1, 0, 1, 1),
                    (1, 1), 2)
    r = np.maximum(c + bias[None, :, None, None], 0)
    close(d, conv_loops(r, kd.transpose(0, 3, 1, 2), (1, 1), (0, 0, 0, 0), (2, 1), 6))


def test_packed_nchw4c_conv2d_on_llvm(vm):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 8, 5, 4)).astype("float32")
    w = rng.standard_normal((8, 8, 3, 3)).astype("float32")
    r = vm["packed"](np.ascontiguousarray(pack_channels(x, 4)),
                     np.ascontiguousarray(pack_channels(w, 4, axis=0)))
    expected = np.maximum(conv_loops(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1), 0)
    close(r, pack_channels(expected, 4))


def test_attention_and_losses_on_llvm(vm):
    rng = np.random.default_rng(3)
    f = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    q, k, v, bias, p = f(2, 3, 4, 4), f(2, 5, 2, 4), f(2, 5, 2, 3), f(1, 4, 3, 5), f(3, 4, 2)
    t = np.array([[0, 3], [1, 2], [3, 3]], "int64")
    w = (np.abs(f(4)) + 0.5).astype("float32")
    att, att2, nll, ce = vm["losses"](q, k, v, bias, p, t, w)
    close(att, attention_loops(q, k, v, bias, 0.5, 0))
    close(att2, attention_loops(q, k, v, None, 0.5, 2))
    picked = [(-p[i, t[i, j], j] * w[t[i, j]], w[t[i, j]]) for i in range(3) for j in range(2)
              if t[i, j] != 3]
    close(nll, sum(a for a, _ in picked) / sum(b for _, b in picked))
    close(ce, -(p.astype(np.float64) ** 2).sum() / 3)


def test_resize_and_qdq_on_llvm(vm):
    rng = np.random.default_rng(5)
    img = rng.standard_normal((1, 2, 5, 7)).astype("float32")
    s = np.array([0.02, 0.05], "float32")
    z = np.array([3, -4], "int8")
    up, q, dq = vm["imgq"](img, s, z)
    close(up, bilinear_half_pixel(img, 8, 3), 1e-5)
    up = np.asarray(up)
    expected_q = np.clip(np.round(up / s[None, :, None, None]) + z[None, :, None, None],
                         -128, 127)
    np.testing.assert_array_equal(np.asarray(q), expected_q.astype("int8"))
    close(dq, (expected_q - z[None, :, None, None]) * s[None, :, None, None], 1e-6)
