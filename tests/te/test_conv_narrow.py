"""Narrow NCHW conv2d (output rows shorter than a vector: ResNet's 14x14
and 7x7 stages; unpadded 1x1 ones: test_conv_pointwise_flat.py). Stride 1: computed over the padded rows laid end to end
(``te.schedules.conv_flat_rows``); strided: over the input gathered into columns
(im2col, ``te.schedules.conv_im2col``: its panels packed from the image). The values against numpy's
reference convolution, on the TIR interpreter and on LLVM, for padding,
dilation, 5x5 and 1x1 kernels, odd and prime sizes and a symbolic batch;
the kernel's structure (a flat padded copy or the columns, the GEMM over
all positions, the epilogue); and the calls that keep the plain schedule
(wide rows, channels-last). Grouped and depthwise ones: test_conv_grouped.py."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.target.tuning import host_tuning
from phasec.te.schedules.conv_im2col import ANCHOR_NAME

from helpers.legalize import fused  # a Primitive function built by a BlockBuilder
from helpers.te_checks import check_llvm_and_interp, top_level

RNG = np.random.default_rng(7)
#: conv_im2col's packed panels of the image's windows
IM2COL_PANELS = ANCHOR_NAME + "_bpack"


def _conv_bias_relu(n, c, h, w, o, k, **attrs):
    d = Var("d", TensorStructInfo((n, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((o, c // attrs.get("groups", 1), k, k), "float32"))
    b = Var("b", TensorStructInfo((1, o, 1, 1), "float32"))
    func = fused([d, wt, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, wt, **attrs)), b))))
    return func, (d, wt, b)


def _buffers(prim):
    out, stack = [], [prim.body]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.Allocate):
            out.append(s.buffer.name)
        stack.extend(tir.stmt_children(s))
    return out


def _check_against_numpy(prim, c, h, w, o, k, attrs):
    """``prim`` (relu(conv2d + bias)) on LLVM and, when small enough
    (:data:`INTERPRETED_MACS`), on the TIR interpreter against numpy's
    reference convolution, for random values."""
    x = RNG.standard_normal((1, c, h, w)).astype("float32")
    wa = RNG.standard_normal((o, c, k, k)).astype("float32")
    ba = RNG.standard_normal((1, o, 1, 1)).astype("float32")
    pads = attrs.get("padding", 0)
    pads = (pads,) * 4 if isinstance(pads, int) else pads
    two = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    want = np.maximum(get_op("relax.nn.conv2d").reference(
        x, wa, padding=pads, strides=two(attrs.get("strides", 1)),
        dilation=two(attrs.get("dilation", 1))) + ba, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": prim})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if want.size * c * k * k <= INTERPRETED_MACS:
        interp = np.zeros(want.shape, "float32")
        run_prim_func(prim, [x, wa, ba, interp])
        np.testing.assert_allclose(interp, want, rtol=1e-4, atol=1e-4)


#: the multiply-adds of a case also run on the TIR interpreter (~5-10k a
#: second there: 16 -> 24 channels over 7x7 took 25 s); each schedule has
#: cases under it
INTERPRETED_MACS = 60_000


CASES = {  # (c, h, w, o, k, attrs)
    "3x3_pad1_14": (8, 14, 14, 16, 3, {"padding": 1}),
    "3x3_pad1_7": (16, 7, 7, 24, 3, {"padding": 1}),
    "3x3_pad1_14_few_channels": (3, 14, 14, 5, 3, {"padding": 1}),
    "3x3_pad1_7_few_channels": (4, 7, 7, 6, 3, {"padding": 1}),
    "5x5_pad2_9": (4, 9, 9, 5, 5, {"padding": 2}),
    "3x3_dil2_13": (3, 13, 13, 7, 3, {"padding": 2, "dilation": 2}),
    "3x3_uneven_pad": (5, 11, 10, 6, 3, {"padding": (1, 0, 2, 1)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_narrow_conv_over_flat_padded_rows_matches_numpy(name):
    c, h, w, o, k, attrs = CASES[name]
    func, _ = _conv_bias_relu(1, c, h, w, o, k, **attrs)
    low = lower_fused(func)
    assert "pad_flat" in _buffers(low.prim_func) and "T_conv2d_rows" in _buffers(low.prim_func)
    _check_against_numpy(low.prim_func, c, h, w, o, k, attrs)


def test_a_symbolic_batch_takes_the_flat_rows_too():
    n = tir.Var("n")
    func, _ = _conv_bias_relu(n, 6, 7, 7, 8, 3, padding=1)
    low = lower_fused(func)
    assert "pad_flat" in _buffers(low.prim_func)
    lib = compile_prim_funcs({"k": low.prim_func})
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 6, 7, 7)).astype("float32")
        wa = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
        ba = RNG.standard_normal((1, 8, 1, 1)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(x, wa, padding=(1, 1, 1, 1))
                          + ba, 0)
        got = np.zeros(want.shape, "float32")
        lib["k"](x, wa, ba, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


STRIDED = {  # (c, h, w, o, k, attrs): 7x7 and narrower outputs
    "3x3_s2_14": (8, 14, 14, 16, 3, {"padding": 1, "strides": 2}),
    "1x1_s2_14": (12, 14, 14, 20, 1, {"strides": 2}),
    "3x3_s2_odd_uneven": (5, 13, 11, 7, 3, {"padding": (1, 0, 2, 1), "strides": 2}),
    "3x3_s2x3_dil2": (6, 17, 19, 9, 3, {"padding": 2, "strides": (2, 3), "dilation": 2}),
    "5x5_s3_prime": (3, 23, 23, 11, 5, {"padding": 2, "strides": 3}),
    # the first and last column taps read only padding (every output column),
    # the first row tap only from the fourth output row on
    "3x3_s3_dil8_taps_in_padding": (4, 20, 7, 5, 3, {"padding": 8, "strides": 3,
                                                     "dilation": 8}),
    # output rows of one to two vectors, not whole ones (ResNet's 56 -> 28;
    # taken where the target's im2col_row_vectors asks, as on the Xeon)
    "3x3_s2_prime_to_29": (5, 57, 57, 7, 3, {"padding": 1, "strides": 2}),
    "3x3_s2_to_20": (5, 39, 39, 3, 3, {"padding": 1, "strides": 2}),
    "1x1_s2_to_19": (5, 37, 38, 6, 1, {"strides": 2}),
    # strided along the rows only: a window sliding along x (packed all the same)
    "3x3_s1x2_to_19": (5, 9, 37, 6, 3, {"padding": 1, "strides": (1, 2)}),
    # one output row (no flat columns: a GEMM per row, its panels packed too)
    "3x3_s2_one_row_of_31": (17, 3, 61, 5, 3, {"padding": (0, 1, 0, 1), "strides": 2}),
}
#: the cases of output rows of one to two vectors (and the row-strided and one-row
#: ones after them), taken as on the Xeon
TWO_VECTOR_ROWS = ("3x3_s2_prime_to_29", "3x3_s2_to_20", "1x1_s2_to_19", "3x3_s1x2_to_19",
                   "3x3_s2_one_row_of_31")


LANES = host_tuning().lanes(32)


def _out_width(w, k, attrs):
    p = attrs.get("padding", 0)
    left, right = (p, p) if isinstance(p, int) else (p[1], p[3])
    s, d = attrs["strides"], attrs.get("dilation", 1)
    s, d = (s if isinstance(s, int) else s[1]), (d if isinstance(d, int) else d[1])
    return (w + left + right - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("name", list(STRIDED))
def test_narrow_strided_conv_over_gathered_columns_matches_numpy(request, name):
    from phasec.arith.inbounds import prove_accesses

    if name in TWO_VECTOR_ROWS:
        request.getfixturevalue("xeon")  # (its im2col_row_vectors takes them)

    c, h, w, o, k, attrs = STRIDED[name]
    func, _ = _conv_bias_relu(1, c, h, w, o, k, **attrs)
    low = lower_fused(func)
    # one GEMM over all positions (FLAT_COLUMNS_ATTR), its panels packed
    # straight from the image (no tensor of columns), the epilogue in its
    # tiles (no flat result read back by a second nest), whatever the width
    assert IM2COL_PANELS in _buffers(low.prim_func)
    assert "im2col" not in _buffers(low.prim_func)
    assert len(top_level(low.prim_func)) == 1
    assert prove_accesses(low.prim_func).counts()[1] == 0
    _check_against_numpy(low.prim_func, c, h, w, o, k, attrs)


@pytest.mark.parametrize("shape,residual", [
    ((6, 13, 13, 5), (1, 5, 7, 7)),       # a residual read as the output: in the tiles
    ((5, 29, 37, 3), (1, 3, 15, 19)),     # the same over 15 x 19
    ((6, 13, 13, 5), (1, 5, 1, 7)),       # broadcast along the rows: the GEMM row by row
])
def test_strided_conv_over_gathered_columns_with_a_residual(xeon, shape, residual):
    # (the Xeon profile: its im2col_row_vectors takes the 19-wide rows too)
    c, h, w, o = shape
    d = Var("d", TensorStructInfo((1, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((o, c, 3, 3), "float32"))
    r = Var("r", TensorStructInfo(residual, "float32"))
    func = fused([d, wt, r], lambda bb: call_op("add", bb.emit(call_op(
        "nn.conv2d", d, wt, padding=1, strides=2)), r))
    low = lower_fused(func)
    assert IM2COL_PANELS in _buffers(low.prim_func)
    x = RNG.standard_normal((1, c, h, w)).astype("float32")
    wa = RNG.standard_normal((o, c, 3, 3)).astype("float32")
    ra = RNG.standard_normal(residual).astype("float32")
    want = get_op("relax.nn.conv2d").reference(x, wa, padding=(1, 1, 1, 1),
                                               strides=(2, 2)) + ra
    check_llvm_and_interp(low.prim_func, [x, wa, ra], want.astype("float32"))


def test_a_symbolic_batch_takes_the_gathered_columns_too():
    n = tir.Var("n")
    func, _ = _conv_bias_relu(n, 6, 14, 14, 8, 3, padding=1, strides=2)
    low = lower_fused(func)
    assert IM2COL_PANELS in _buffers(low.prim_func)
    lib = compile_prim_funcs({"k": low.prim_func})
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 6, 14, 14)).astype("float32")
        wa = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
        ba = RNG.standard_normal((1, 8, 1, 1)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(
            x, wa, padding=(1, 1, 1, 1), strides=(2, 2)) + ba, 0)
        got = np.zeros(want.shape, "float32")
        lib["k"](x, wa, ba, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs,shape", [
    ({"padding": 1, "strides": 2}, (8, 40, 72)),       # strided, rows wider than two vectors
    ({"padding": 1, "strides": 2}, (8, 6, 6)),         # strided, fewer positions than a vector
    ({"padding": 1}, (8, 6, 40)),                      # rows wider than a vector
    ({"padding": 1, "data_layout": "NHWC", "kernel_layout": "HWIO"}, (8, 7, 7)),
])
def test_other_convolutions_keep_the_plain_schedule(attrs, shape):
    c, h, w = shape
    o, k = 8, 3
    nhwc = attrs.get("data_layout") == "NHWC"
    d = Var("d", TensorStructInfo((1, h, w, c) if nhwc else (1, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((k, k, c, o) if nhwc else (o, c // attrs.get("groups", 1),
                                                              k, k), "float32"))
    func = fused([d, wt], lambda bb: call_op("nn.conv2d", d, wt, **attrs))
    low = lower_fused(func)
    assert "pad_flat" not in _buffers(low.prim_func)
    assert IM2COL_PANELS not in _buffers(low.prim_func)
    assert "pad_temp" in _buffers(low.prim_func)


def test_wide_rows_fuse_the_epilogue_into_the_conv_nest():
    func, _ = _conv_bias_relu(1, 3, 6, 20, 4, 3, padding=1)
    low = lower_fused(func)
    body = low.prim_func.body
    while isinstance(body, tir.Allocate):
        body = body.body
    # the padded input (pad_temp), then one nest: the conv and its epilogue
    assert isinstance(body, tir.SeqStmt) and len(body.stmts) == 2
    x = RNG.standard_normal((1, 3, 6, 20)).astype("float32")
    wa = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
    ba = RNG.standard_normal((1, 4, 1, 1)).astype("float32")
    want = np.maximum(get_op("relax.nn.conv2d").reference(x, wa, padding=(1, 1, 1, 1)) + ba, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _chosen_with_a_constant_weight(func):
    """(what the table made of the convolution, the weight a constant as in
    a model; whether conv_small_image alone would take it), the kernel."""
    from phasec.te import schedules
    from phasec.te.schedules import conv_small_image

    seen = []
    choose = schedules.choose

    def spy(kind, subject):
        made = choose(kind, subject)
        if kind == "conv":  # (the weight is known constant while lowering)
            seen.append((made, conv_small_image.schedule(subject) is not None))
        return made
    schedules.choose = spy
    try:
        low = lower_fused(func, constant_params=(1,))
    finally:
        schedules.choose = choose
    return seen[0], low.prim_func


@pytest.mark.parametrize("c,h,o", [
    (256, 14, 256),  # 7x7: 49 positions, 3 vectors and one lane
    (256, 12, 256),  # 6x6: 36, 2 vectors and a quarter
    (256, 10, 256),  # 5x5: 25, one vector, half of one and a lane
])
def test_strided_small_outputs_that_fill_their_vectors_take_the_columns(c, h, o):
    from phasec.arith.inbounds import prove_accesses

    attrs = {"padding": 1, "strides": 2}
    func, _ = _conv_bias_relu(1, c, h, h, o, 3, **attrs)
    ((made, small), prim) = _chosen_with_a_constant_weight(func)
    assert small  # (the rule ahead of it matters: conv_small_image takes these shapes)
    taken = made.name == ANCHOR_NAME
    if LANES == 16:
        assert taken == (h != 10)  # (49 of 64 and 36 of 48 lanes, not 25 of 48)
    assert (IM2COL_PANELS in _buffers(prim)) == taken
    assert prove_accesses(prim).counts()[1] == 0
    x = RNG.standard_normal((1, c, h, h)).astype("float32")
    wa = RNG.standard_normal((o, c, 3, 3)).astype("float32")
    ba = RNG.standard_normal((1, o, 1, 1)).astype("float32")
    want = np.maximum(get_op("relax.nn.conv2d").reference(
        x, wa, padding=(1, 1, 1, 1), strides=(2, 2)) + ba, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": prim})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
