"""KxK convolutions over small images (``te.schedules.conv_small_image``): a matmul of the gathered columns whose
rows are the positions and whose columns are the output channels, by the
OIHW weight read transposed (its flat ``[O, C*KH*KW]`` view), which
PackConstantWeights packs once when it is a constant. The values against
the reference interpreter (numpy) on odd and prime sizes, with padding,
strides, dilation, bias and relu fused, a weight that is a parameter, and
a symbolic batch (which keeps the other schedules)."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.interp import run as interpret
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.te.schedules.conv_small_image import NS_PER_PACKED, estimate, vector_pieces
from phasec.te.schedules.gemm import PACK_MARK

RNG = np.random.default_rng(2929)


def _module(xs, out_ch: int, kernel: tuple[int, int], *, weight_param: bool = False,
            bias: np.ndarray | None = None, **conv):
    """relu(conv2d(x, W, **conv) + b), W a constant or a parameter (b random
    unless given)."""
    x = Var("x", TensorStructInfo(xs, "float32"))
    c = xs[1]
    w = (RNG.standard_normal((out_ch, c, *kernel)) / np.sqrt(c * kernel[0] * kernel[1])
         ).astype(np.float32)
    params = [x]
    weight = Constant(w)
    if weight_param:
        weight = Var("w", TensorStructInfo(w.shape, "float32"))
        params.append(weight)
    if bias is None:
        bias = RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32)
    bias = Constant(bias)
    bb = BlockBuilder()
    with bb.function("main", params):
        y = bb.emit(call_op("relax.nn.conv2d", x, weight, **conv))
        y = bb.emit(call_op("relax.nn.relu", bb.emit(call_op("relax.add", y, bias))))
        bb.emit_func_output(y)
    return bb.get(), w


def _check(mod, *args) -> None:
    want = np.asarray(interpret(mod, *args), dtype=np.float64)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](*args))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _kernel_texts(mod) -> dict[str, str]:
    return {name: repr(f) for name, f in lower(mod).prim_funcs()}


@pytest.mark.parametrize("xs,out_ch,kernel,conv", [
    ((1, 13, 3, 3), 67, (3, 3), {"padding": [1, 1, 1, 1]}),       # SqueezeNet's fire 3x3
    ((2, 7, 5, 4), 37, (3, 2), {"strides": [2, 2], "padding": [1, 0, 1, 1]}),
    ((1, 29, 7, 7), 19, (3, 3), {"dilation": [2, 2]}),             # 3x3 outputs
    ((1, 11, 1, 1), 41, (3, 3), {"padding": [1, 1, 1, 1]}),        # one position (a GEMV)
    ((1, 131, 5, 5), 47, (1, 1), {"strides": [2, 2]}),             # a strided 1x1
    ((1, 53, 4, 4), 128, (3, 3), {"padding": [1, 1, 1, 1]}),       # a vector of positions
    ((1, 61, 5, 5), 97, (3, 3), {"padding": [1, 1, 1, 1]}),        # 25 positions
])
def test_constant_weight_packed_once(xs, out_ch, kernel, conv):
    mod, _ = _module(xs, out_ch, kernel, **conv)
    texts = _kernel_texts(mod)
    (packed,) = [t for n, t in texts.items() if n.endswith("_prepacked")]
    # positions as rows, channels as columns; the packing nest gone
    assert "T_conv2d_positions" in packed and "im2col_positions" in packed
    assert PACK_MARK not in packed
    _check(mod, RNG.standard_normal(xs).astype(np.float32))


def _numpy_conv(x, w, strides, padding, dilation):
    """relu-free direct convolution in float64 (the reference of the padded
    gather below): every output the sum over channels and taps."""
    (sy, sx), (dy, dx), (t, lft, btm, r) = strides, dilation, padding
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, btm), (lft, r)))
    o, _, kh, kw = w.shape
    oh = (xp.shape[2] - (kh - 1) * dy - 1) // sy + 1
    ow = (xp.shape[3] - (kw - 1) * dx - 1) // sx + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dy:i * dy + (oh - 1) * sy + 1:sy, j * dx:j * dx + (ow - 1) * sx + 1:sx]
            out += np.einsum("bchw,oc->bohw", win, w[:, :, i, j].astype(np.float64))
    return out


@pytest.mark.parametrize("xs,out_ch,conv", [
    # asymmetric padding and a dilation per axis, a batch of 2
    ((2, 29, 5, 7), 64, {"padding": [2, 1, 0, 2], "dilation": [1, 2]}),
    # a 3x3 over 7x7 as ResNet-50's and Inception v2's (narrowed), prime sizes
    ((1, 67, 7, 7), 131, {"padding": [1, 1, 1, 1]}),
    # strided: the border tested per element (no copy), a batch of 3
    ((3, 13, 7, 5), 64, {"padding": [2, 1, 0, 2], "strides": [1, 2], "dilation": [2, 1]}),
    ((2, 29, 5, 7), 64, {"padding": [2, 1, 0, 2], "strides": [1, 2], "dilation": [2, 1]}),
])
def test_padded_input_gathered_without_border_tests(xeon, xs, out_ch, conv):
    """At stride 1 the padding is copied once (``pad_temp``) and the columns
    read it at ``y + ry*dy`` with no select or clamp per element; strided,
    the image is read in place with the border tested. Against numpy's
    direct convolution (float64) and the reference interpreter. (The Xeon
    profile: the avx512 one takes Winograd for the 3x3 over 7x7.)"""
    bias = RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32)
    mod, w = _module(xs, out_ch, (3, 3), bias=bias, **conv)
    (packed,) = [t for n, t in _kernel_texts(mod).items() if n.endswith("_prepacked")]
    (gather,) = [line for line in packed.splitlines()
                 if line.lstrip().startswith("im2col_positions[") and "] = " in line]
    copied = "strides" not in conv
    assert ("pad_temp" in packed) == copied
    assert any(f in gather for f in ("Select", "T.max(", "T.min(")) != copied
    x = RNG.standard_normal(xs).astype(np.float32)
    _check(mod, x)
    want = np.maximum(_numpy_conv(x, w, conv.get("strides", [1, 1]), conv["padding"],
                                  conv.get("dilation", [1, 1])) + bias, 0)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_weight_as_a_parameter_keeps_the_other_schedules():
    """Packing B on every call costs what the whole vectors save (estimate)."""
    xs, out_ch = (1, 17, 3, 3), 53
    mod, w = _module(xs, out_ch, (3, 3), weight_param=True, padding=[1, 1, 1, 1])
    assert not any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
    _check(mod, RNG.standard_normal(xs).astype(np.float32), w)


def test_a_symbolic_batch_keeps_the_other_schedules():
    n = tir.Var("n", "int64")
    mod, _ = _module((n, 6, 3, 3), 29, (3, 3), padding=[1, 1, 1, 1])
    assert not any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
    vm = phasec.VirtualMachine(phasec.build(mod))
    for batch in (1, 2):
        x = RNG.standard_normal((batch, 6, 3, 3)).astype(np.float32)
        want = np.asarray(interpret(mod, x), dtype=np.float64)
        np.testing.assert_allclose(np.asarray(vm["main"](x)), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())


def test_vector_pieces_split_rows_as_the_gemm_tiles_do():
    assert [vector_pieces(w, 16) for w in (15, 16, 9, 3, 35, 63)] == [
        (0, 3), (1, 0), (0, 2), (0, 1), (2, 1), (3, 3)]


def test_estimate_counts_the_packing_of_a_weight_per_call():
    # 64 -> 256 channels, 3x3 over a 3x3 image: 9 positions, 15 padded columns
    const, other = estimate(9, 576, 256, 15, 16, weight_per_call=False)
    per_call, same = estimate(9, 576, 256, 15, 16, weight_per_call=True)
    assert const < other == same
    assert per_call - const == pytest.approx(NS_PER_PACKED * 576 * 256)
    # 17 -> 53: the weight packed per call costs more than it saves
    assert estimate(9, 153, 53, 15, 16, weight_per_call=False)[0] < other
    mine, other = estimate(9, 153, 53, 15, 16, weight_per_call=True)
    assert mine > other
    # a padded 1x1 of three input channels (12 positions, 12 padded columns)
    mine, other = estimate(12, 3, 23, 12, 16, weight_per_call=False)
    assert mine > other
    # 64 -> 64 over 6x6: 48 padded columns, three whole vectors
    mine, other = estimate(36, 576, 64, 48, 16, weight_per_call=False)
    assert mine > other


def test_large_images_and_wide_1x1_keep_the_other_schedules():
    # (a 1x1 projection over 7x7 is conv_pointwise_small's: its tests)
    for xs, out_ch, kernel, conv in (((1, 16, 8, 8), 32, (3, 3), {"padding": [1, 1, 1, 1]}),
                                     ((1, 64, 7, 7), 128, (1, 1), {})):
        mod, _ = _module(xs, out_ch, kernel, **conv)
        assert not any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
        _check(mod, RNG.standard_normal(xs).astype(np.float32))
