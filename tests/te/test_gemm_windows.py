"""nn.im2col_matmul (``W @ im2col(x)`` of 8-bit operands, int32) on the
integer GEMM, which packs each panel's words straight from the image
(phasec/te/schedules/gemm_windows.py), against numpy: several panels (the
window runs written for each panel's columns), a last narrower panel and a
wider merged tail, rows that are not whole words (C * KH * KW not a
multiple of 4) and channel groups with a remainder, stride-1 "same" taps
(one run over the rows laid end to end) and strided, dilated, asymmetric
ones (a run per output row), pad values 0 and 255, one to three output
channels, uint8 data with an int8 weight and the other way round, a
symbolic batch; and the same without VNNI (the vpmaddwd path)."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import Constant, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import legalize_fused, lower_call

from helpers.cpu_features import run_without_vnni
from helpers.legalize import fused, tvar

N = tir.Var("n")

#: (data shape, data dtype, output channels, attrs)
CASES = [
    # 3 x 3 "same" over 37 x 29 (1073 columns: several panels, a merged tail),
    # K = 27 (the last word's last byte zero), 3 channels (< one group of 4)
    ((2, 3, 37, 29), "uint8", 11, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1),
                                        pad_value=255.0)),
    # strided, dilated, asymmetric padding: a run per output row
    ((1, 6, 23, 19), "uint8", 9, dict(kernel_size=(3, 3), strides=(2, 1), dilation=(1, 2),
                                      padding=(1, 0, 2, 1))),
    # 5 x 5 "same", 9 channels (two groups of 4 and one), symbolic batch
    ((N, 9, 17, 13), "uint8", 16, dict(kernel_size=(5, 5), padding=(2, 2, 2, 2),
                                       pad_value=128.0)),
    # 2 x 2 without padding (rows narrower than the image's), two output rows
    ((1, 4, 9, 40), "uint8", 2, dict(kernel_size=(2, 2), pad_value=7.0)),
    # int8 data, uint8 weight; a tap that lands in the padding only
    ((1, 7, 11, 12), "int8", 3, dict(kernel_size=(3, 1), strides=(1, 3),
                                     padding=(0, 2, 1, 0))),
    # one output channel, fewer columns than a micro-panel (one narrow panel)
    ((1, 5, 4, 6), "uint8", 1, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1))),
    # 3 x 3 "same" over 56 x 20 (1120 = 35 whole micro-panels), 13 channels
    ((1, 13, 20, 56), "uint8", 24, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1),
                                        pad_value=3.0)),
    # panels of 16 whole rows of 28: three inside the rows every tap reads
    # (one shared packing), the first, the last narrower one; symbolic batch
    ((N, 5, 72, 28), "uint8", 10, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1),
                                       pad_value=255.0)),
    # dilated "same" taps (whole rows lifted to keep offsets >= 0)
    ((1, 3, 47, 28), "uint8", 7, dict(kernel_size=(3, 3), dilation=(2, 3),
                                      padding=(2, 3, 2, 3), pad_value=1.0)),
    # shared panels whose words are loaded straight from the image (and the
    # edge panels' from their staged rows): a group of 4 channels and a rest
    # of 3 (K = 63, the last word's last byte zero)
    ((1, 7, 64, 28), "uint8", 13, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1),
                                       pad_value=9.0)),
    # 5 x 5 int8 data (a negative pad value): one group and a rest of 2
    # channels (50 bytes: 13 words, the last two bytes zero); groups of 100
    # rows go through the scratch of window bytes (DIRECT_MAX_ROWS)
    ((1, 6, 70, 28), "int8", 5, dict(kernel_size=(5, 5), padding=(2, 2, 2, 2),
                                     pad_value=-3.0)),
    # 1 x 3 taps (words across channels), 2 x 2 with only top and left
    # padding (one channel a group), rows of 16 with 11 channels
    ((1, 9, 64, 28), "uint8", 4, dict(kernel_size=(1, 3), padding=(0, 1, 0, 1),
                                      pad_value=250.0)),
    ((1, 2, 64, 28), "uint8", 3, dict(kernel_size=(2, 2), padding=(1, 1, 0, 0),
                                      pad_value=17.0)),
    ((1, 11, 96, 16), "uint8", 6, dict(kernel_size=(3, 3), padding=(1, 1, 1, 1),
                                       pad_value=77.0)),
    # 1 x 1 (no padding: words of four channels' pixels), 6 channels
    ((1, 6, 40, 28), "uint8", 5, dict(kernel_size=(1, 1), pad_value=0.0)),
]

#: the image sizes of the cases some of whose panels share one packing
_SHARED = {(72, 28), (47, 28), (64, 28), (70, 28), (96, 16), (40, 28)}


def _windows_scratch(func) -> list[str]:
    """Names of the buffers the kernel allocates for window bytes (a scratch
    of window rows, or a stride-1 "same" convolution's staged image rows)."""
    names = []

    def visit(s):
        if isinstance(s, tir.Allocate):
            if s.buffer.name.endswith(("_windows", "_rows")):
                names.append(s.buffer.name)
            visit(s.body)
        elif isinstance(s, tir.SeqStmt):
            for x in s.stmts:
                visit(x)
        elif isinstance(s, (tir.For, tir.AttrStmt, tir.LetStmt)):
            visit(s.body)
        elif isinstance(s, tir.IfThenElse):
            visit(s.then_case)
            visit(s.else_case)
        elif isinstance(s, tir.Block):
            visit(s.body)
        elif isinstance(s, tir.BlockRealize):
            visit(s.block)
    visit(func.body)
    return names


def _shared_panels(func) -> bool:
    """Whether the kernel packs a range of panels with one statement
    (``if lo <= v and v < hi``)."""
    found = []

    def visit(s):
        if isinstance(s, tir.IfThenElse):
            if isinstance(s.condition, tir.BinaryOp) and s.condition.op == "and":
                found.append(s)
            visit(s.then_case)
            visit(s.else_case)
        elif isinstance(s, tir.SeqStmt):
            for x in s.stmts:
                visit(x)
        elif isinstance(s, (tir.For, tir.AttrStmt, tir.LetStmt, tir.Allocate, tir.Block)):
            visit(s.body)
        elif isinstance(s, tir.BlockRealize):
            visit(s.block)
    visit(func.body)
    return bool(found)


def check_case(shape, dtype: str, out_channels: int, attrs: dict, weight_param: bool) -> None:
    """The kernel of ``nn.im2col_matmul`` equals the numpy reference, bit for bit."""
    kh, kw = attrs["kernel_size"]
    k = shape[1] * kh * kw
    wdt = "int8" if dtype == "uint8" else "uint8"
    rng = np.random.default_rng(k + out_channels)
    w = rng.integers(-128 if wdt == "int8" else 0, 128 if wdt == "int8" else 256,
                     (out_channels, k)).astype(wdt)
    x_var = tvar("img", shape, dtype)
    weight = tvar("w", w.shape, wdt) if weight_param else Constant(w)
    func = lower_call(call_op("nn.im2col_matmul", x_var, weight, **attrs)).prim_func
    assert _windows_scratch(func), "the GEMM did not pack its panels from the image"
    if tuple(shape[2:]) in _SHARED:  # panels that share one packing
        assert _shared_panels(func), "no panel shares its packing"
    kernel = compile_prim_funcs({"k": func})["k"]
    ref = get_op("relax.nn.im2col_matmul").reference
    for batch in ((1, 3) if shape[0] is N else (shape[0],)):
        lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
        x = rng.integers(lo, hi, (batch, *shape[1:])).astype(dtype)
        x.flat[::7] = hi - 1  # the ends of the type
        x.flat[3::11] = lo
        want = ref(x, w, **attrs)
        got = np.zeros(want.shape, "int32")
        kernel(x, w, got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0][1]}x{c[0][2]}x{c[0][3]}-k{c[3]['kernel_size']}"
                                              f"-{c[1]}-o{c[2]}" for c in CASES])
def test_im2col_matmul_equals_the_reference(case):
    check_case(*case, weight_param=False)


def test_im2col_matmul_with_the_weight_as_a_parameter():
    check_case(*CASES[2], weight_param=True)


def test_im2col_matmul_without_vnni():
    """Compiled as for a CPU without VNNI (the exact vpmaddwd sequence), in
    a process of its own: the target is chosen once per process."""
    run_without_vnni(__file__, "t.check_case(*t.CASES[0], weight_param=False); "
                               "t.check_case(*t.CASES[4], weight_param=True)")


def test_an_image_computed_in_the_kernel_is_read_through_the_gather():
    """A producer fused into the kernel (``x + 1`` inlined): no buffer of the
    image to pack from, so the GEMM packs the windows' gather instead; the
    same values."""
    attrs = dict(kernel_size=(3, 3), padding=(1, 1, 1, 1), pad_value=9.0)
    x = tvar("img", (1, 3, 7, 9), "uint8")
    w = np.random.default_rng(5).integers(-128, 128, (5, 27)).astype("int8")
    func = fused([x], lambda bb: call_op("nn.im2col_matmul", bb.emit(call_op(
        "add", x, Constant(np.array(1, "uint8")))), Constant(w), **attrs))
    prim = legalize_fused(func)
    assert not _windows_scratch(prim)
    kernel = compile_prim_funcs({"k": prim})["k"]
    data = np.random.default_rng(6).integers(0, 255, (1, 3, 7, 9)).astype("uint8")
    want = get_op("relax.nn.im2col_matmul").reference(data + 1, w, **attrs)
    got = np.zeros(want.shape, "int32")
    kernel(data, w, got)
    np.testing.assert_array_equal(got, want)
