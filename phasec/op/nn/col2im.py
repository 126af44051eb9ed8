"""``nn.col2im``: blocks back into an image, overlaps summed (ONNX's Col2Im,
PyTorch's ``fold``); ``nn.im2col``, its converse over NCHW images.

``nn.col2im(data, image_shape, block_shape, strides, dilations, pads)``:
data ``[N, C * prod(block_shape), L]``, output ``[N, C, *image_shape]`` over
``r = len(image_shape)`` spatial dims. Column ``c * prod(block) + k`` (``k``
the block offset, row major) of block ``l`` (``l`` the block position on
the grid of ``L_j = (image_j + pads_j + pads_{r+j} - dilations_j *
(block_j - 1) - 1) // strides_j + 1`` blocks per dim, row major; ``L`` must
be their product) lands at ``position_j = l_j * strides_j - pads_j + k_j *
dilations_j``; values landing on one pixel add up, those landing in the
padding are dropped. The kernel gathers: each output pixel sums, over the
block offsets, the column whose block starts where that offset reaches it.

``nn.im2col(data, kernel_size, strides, padding, dilation, pad_value)``:
data ``[N, C, H, W]``, output ``[N, C * KH * KW, OH * OW]`` (PyTorch's
``unfold``): row ``(c * KH + i) * KW + j`` of column ``y * OW + x`` is
``data[n, c, y * sy + i * dy - top, x * sx + j * dx - left]``, or
``pad_value`` where that falls in the padding (``padding`` is (top, left,
bottom, right), as conv2d's). It makes a convolution a matmul of the
weight ``[O, C * KH * KW]`` and these columns; the integer convolutions pad
with their input's zero point through ``pad_value`` (the ONNX ConvInteger
converter).

``nn.im2col_matmul(data, weight, kernel_size, strides, padding, dilation,
pad_value)``: ``weight @ im2col(data, ...)`` of a uint8 and an int8 operand
(either side), int32 sums (``[N, O, OH * OW]``): an integer convolution in
one operator, whose GEMM packs its panels straight from the image, so the
columns never exist whole (:mod:`phasec.te.schedules.gemm_windows`;
FuseQDQMatmul).
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir import tir
from phasec.ir.tir import BinaryOp, Buffer, BufferStore, For, IntImm, Select, Stmt, seq
from phasec.op._common import (
    REQUIRED, OpPattern, as_float, attrs_of, define, err, int_tuple, tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _clamp, _const, _out, _tensor, legalizes
from phasec.op._tirgen import i64
from phasec.op.draw import declares_draw
from phasec.target import tuning
from phasec.te import operation as top
from phasec.te.schedules.gemm_prepack import byte_word
from phasec.te.schedules.gemm_windows import WINDOWS_ATTR, Windows, tap_runs

__all__: list[str] = []


def _full(a) -> tuple[tuple[int, ...], ...]:
    """(image, block, strides, dilations, pads) with the defaults filled."""
    r = len(a["image_shape"])
    return (tuple(a["image_shape"]), tuple(a["block_shape"]), tuple(a["strides"] or (1,) * r),
            tuple(a["dilations"] or (1,) * r), tuple(a["pads"] or (0,) * (2 * r)))


def _grid(image, block, strides, dilations, pads) -> list[int]:
    r = len(image)
    return [(image[j] + pads[j] + pads[r + j] - dilations[j] * (block[j] - 1) - 1) // strides[j]
            + 1 for j in range(r)]


def _infer_col2im(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    image, block, strides, dilations, pads = _full(a)
    r = len(image)
    if r < 1 or len(block) != r or len(strides) != r or len(dilations) != r or len(pads) != 2 * r:
        raise err(call, f"col2im needs one block size, stride and dilation per image dim and "
                        f"two pads ({r} dims: image_shape {image}, block_shape {block}, strides "
                        f"{strides}, dilations {dilations}, pads {pads})")
    if min(image + block + strides + dilations) < 1 or min(pads) < 0:
        raise err(call, "col2im's sizes, strides and dilations must be positive, its pads >= 0")
    grid = _grid(image, block, strides, dilations, pads)
    if min(grid) < 1:
        raise err(call, f"col2im: a block {block} (dilations {dilations}) does not fit the padded "
                        f"image {image}")
    if data.dtype == "bool":
        raise err(call, "col2im does not compute on bool tensors")
    if data.ndim not in (-1, 3):
        raise err(call, f"col2im expects [N, C * prod(block_shape), L], but the data has ndim "
                        f"{data.ndim}")
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, 2 + r)
    n, ck, blocks = data.shape
    kk = math.prod(block)
    ck_v, l_v = arith.const_int(ck), arith.const_int(blocks)
    if ck_v is not None and ck_v % kk:
        raise err(call, f"col2im: {ck_v} columns are not a multiple of the block's "
                        f"{kk} elements")
    if l_v is not None and l_v != math.prod(grid):
        raise err(call, f"col2im: {l_v} blocks, but the image holds {math.prod(grid)} "
                        f"(a {' x '.join(map(str, grid))} grid)")
    c = arith.simplify(BinaryOp("//", ck, i64(kk))) if ck_v is None else i64(ck_v // kk)
    return tensor_sinfo((n, c, *(i64(v) for v in image)), data.dtype)


def _col2im_ref(data, image_shape=(), block_shape=(), strides=(), dilations=(), pads=()):
    x = np.asarray(data)
    image, block, strides, dilations, pads = _full(dict(
        image_shape=image_shape, block_shape=block_shape, strides=strides, dilations=dilations,
        pads=pads))
    r = len(image)
    grid = _grid(image, block, strides, dilations, pads)
    n, ck, _ = x.shape
    kk = math.prod(block)
    c = ck // kk
    padded = np.zeros((n, c, *(image[j] + pads[j] + pads[r + j] for j in range(r))), x.dtype)
    cols = x.reshape(n, c, kk, -1)
    for li, l_pos in enumerate(np.ndindex(*grid)):  # scatter each block's columns
        for ki, k_pos in enumerate(np.ndindex(*block)):
            at = tuple(l_pos[j] * strides[j] + k_pos[j] * dilations[j] for j in range(r))
            padded[(slice(None), slice(None), *at)] += cols[:, :, ki, li]
    inner = tuple(slice(pads[j], pads[j] + image[j]) for j in range(r))
    return padded[(slice(None), slice(None), *inner)]


define("nn.col2im", ("data",), _infer_col2im,
       attrs={"image_shape": ((), int_tuple), "block_shape": ((), int_tuple),
              "strides": ((), int_tuple), "dilations": ((), int_tuple), "pads": ((), int_tuple)},
       reference=_col2im_ref, pattern=OpPattern.INJECTIVE,
       doc="Blocks of columns summed back into an image (ONNX Col2Im).")


@legalizes("nn.col2im")
def _col2im_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    image, block, strides, dilations, pads = _full(attrs_of(call))
    r = len(image)
    grid = _grid(image, block, strides, dilations, pads)
    kk = math.prod(block)
    zero = _const(0, x.dtype)

    def body(n, c, *y):
        total = None
        for ki, k_pos in enumerate(np.ndindex(*block)):
            valid, flat = None, i64(0)
            for j in range(r):
                # the block this offset reaches pixel y_j from: (y + pad - k * d) / s
                p = BinaryOp("-", BinaryOp("+", y[j], i64(pads[j])),
                             i64(k_pos[j] * dilations[j]))
                b = BinaryOp("//", p, i64(strides[j]))
                ok = BinaryOp("and", BinaryOp(">=", p, i64(0)),
                              BinaryOp("and", BinaryOp("==", BinaryOp("%", p,
                                                                      i64(strides[j])), i64(0)),
                                       BinaryOp("<", b, i64(grid[j]))))
                valid = ok if valid is None else BinaryOp("and", valid, ok)
                flat = BinaryOp("+", BinaryOp("*", flat, i64(grid[j])),
                                _clamp(b, IntImm(grid[j], "int64")))
            col = BinaryOp("+", BinaryOp("*", c, i64(kk)), i64(ki))
            term = Select(valid, x[n, col, flat], zero)
            total = term if total is None else BinaryOp("+", total, term)
        return total
    return te.compute(out.shape, body, name="T_col2im")


def _draw_col2im(ctx):
    n, ck, length = ctx.shape
    for block in ((1, 1), (ck, 1), (1, ck)) if ck > 1 else ((1, 1),):
        kk = block[0] * block[1]
        if ck % kk:
            continue
        # a 1 x L image of blocks stepping by 1: the columns fit exactly
        image = (block[0], length + block[1] - 1)
        hi = max(abs(ctx.lo), abs(ctx.hi)) * kk
        ctx.result_in(-hi, hi)
        return (ctx.x,), {"image_shape": image, "block_shape": block}
    return None


declares_draw("nn.col2im", ranks=(3,), build=_draw_col2im)


# ---------------------------------------------------------------------------
# nn.im2col
# ---------------------------------------------------------------------------

def _im2col_attrs(a) -> tuple[tuple[int, ...], ...]:
    """(kernel, strides, padding, dilation) with the defaults filled."""
    return (tuple(a["kernel_size"]), tuple(a["strides"] or (1, 1)),
            tuple(a["padding"] or (0, 0, 0, 0)), tuple(a["dilation"] or (1, 1)))


def _im2col_grid(hw, kernel, strides, padding, dilation) -> list[int]:
    return [(hw[j] + padding[j] + padding[2 + j] - dilation[j] * (kernel[j] - 1) - 1)
            // strides[j] + 1 for j in range(2)]


def _infer_im2col(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    kernel, strides, padding, dilation = _im2col_attrs(a)
    if len(kernel) != 2 or len(strides) != 2 or len(dilation) != 2 or len(padding) != 4:
        raise err(call, f"im2col needs two kernel sizes, strides and dilations and four pads, "
                        f"got kernel_size {kernel}, strides {strides}, dilation {dilation}, "
                        f"padding {padding}")
    if min(kernel + strides + dilation) < 1 or min(padding) < 0:
        raise err(call, "im2col's kernel sizes, strides and dilations must be positive, its "
                        "pads >= 0")
    if data.dtype == "bool":
        raise err(call, "im2col does not compute on bool tensors")
    if data.ndim not in (-1, 4):
        raise err(call, f"im2col expects an NCHW image, but the data has ndim {data.ndim}")
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, 3)
    n, c, h, w = data.shape
    hw = [arith.const_int(h), arith.const_int(w)]
    c_v = arith.const_int(c)
    if None in hw or c_v is None:
        raise err(call, "im2col needs static channels, height and width")
    grid = _im2col_grid(hw, kernel, strides, padding, dilation)
    if min(grid) < 1:
        raise err(call, f"im2col: a kernel {kernel} (dilation {dilation}) does not fit the "
                        f"padded {hw[0]} x {hw[1]} image")
    return tensor_sinfo((n, i64(c_v * math.prod(kernel)), i64(math.prod(grid))), data.dtype)


def _im2col_ref(data, kernel_size=(), strides=(), padding=(), dilation=(), pad_value=0.0):
    x = np.asarray(data)
    kernel, strides, padding, dilation = _im2col_attrs(dict(
        kernel_size=kernel_size, strides=strides, padding=padding, dilation=dilation))
    n, c, h, w = x.shape
    oh, ow = _im2col_grid((h, w), kernel, strides, padding, dilation)
    fill = np.asarray(pad_value, x.dtype)
    padded = np.pad(x, [(0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])],
                    constant_values=fill)
    cols = np.empty((n, c, kernel[0], kernel[1], oh, ow), x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            y0, x0 = i * dilation[0], j * dilation[1]
            cols[:, :, i, j] = padded[:, :, y0:y0 + strides[0] * (oh - 1) + 1:strides[0],
                                      x0:x0 + strides[1] * (ow - 1) + 1:strides[1]]
    return cols.reshape(n, c * kernel[0] * kernel[1], oh * ow)


#: the windows' attributes (nn.im2col's, nn.im2col_matmul's)
_WINDOW_ATTRS = {"kernel_size": (REQUIRED, int_tuple), "strides": ((), int_tuple),
                 "padding": ((), int_tuple), "dilation": ((), int_tuple),
                 "pad_value": (0.0, as_float)}

define("nn.im2col", ("data",), _infer_im2col, attrs=_WINDOW_ATTRS,
       # opaque: a producer fused in would be computed once per tap
       reference=_im2col_ref, pattern=OpPattern.OPAQUE,
       doc="The windows of a convolution over an NCHW image as columns (PyTorch's unfold).")


@legalizes("nn.im2col")
def _im2col_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    g = _windows(x, attrs_of(call))
    n, c = x.shape[0], arith.const_int(x.shape[1])
    work = c * g.taps * math.prod(g.grid)
    parallel = c > 1 and work >= tuning.host_tuning().parallel_min_work

    def build(bufs: list[Buffer], dst: Buffer) -> Stmt:
        b, ch = tir.Var("b", "int64"), tir.Var("ch", "int64")
        taps = []
        for i in range(g.kernel[0]):
            for j in range(g.kernel[1]):
                row = ch * i64(g.taps) + i64(i * g.kernel[1] + j)
                taps += tap_runs(g, i, j, 0, math.prod(g.grid),
                                 lambda y, x: bufs[0][(b, ch, y, x)],
                                 lambda p, v, row=row: BufferStore(dst, v, (b, row, p)))
        return For(b, i64(0), dst.shape[0], "serial", For(
            ch, i64(0), i64(c), "parallel" if parallel else "serial", seq(taps)))
    return te.extern((n, out.shape[1], out.shape[2]), x.dtype, [x], build, name="T_im2col")


def _windows(x, a, data=None) -> Windows:
    """The windows geometry of ``nn.im2col``'s attributes ``a`` over ``x``."""
    kernel, strides, padding, dilation = _im2col_attrs(a)
    hw = tuple(arith.const_int(d) for d in x.shape[2:])
    grid = _im2col_grid(hw, kernel, strides, padding, dilation)
    return Windows(hw, kernel, strides, padding, dilation, tuple(grid),
                   _const(a["pad_value"], x.dtype), data)


def _draw_im2col(ctx):
    _, _, h, w = ctx.shape
    kernel = (min(h, 2), min(w, 3))
    ctx.result_in(min(ctx.lo, 0), max(ctx.hi, 0))
    return (ctx.x,), {"kernel_size": kernel, "strides": (1, 2), "padding": (1, 0, 0, 1)}


declares_draw("nn.im2col", ranks=(4,), build=_draw_im2col)


# ---------------------------------------------------------------------------
# nn.im2col_matmul
# ---------------------------------------------------------------------------

def _infer_im2col_matmul(call, ctx):
    cols = _infer_im2col(call, ctx)
    data, weight = tensor_arg(call, 0, ctx, "data"), tensor_arg(call, 1, ctx, "weight")
    if "void" not in (data.dtype, weight.dtype) and {data.dtype, weight.dtype} != {"uint8",
                                                                                   "int8"}:
        raise err(call, f"im2col_matmul multiplies uint8 by int8 (either side), got data "
                        f"{data.dtype} and weight {weight.dtype}")
    if weight.ndim not in (-1, 2):
        raise err(call, f"im2col_matmul expects a weight [O, C * KH * KW], but it has ndim "
                        f"{weight.ndim}")
    if cols.shape is None or weight.shape is None:
        return TensorStructInfo(None, "int32", 3)
    n, k, p = cols.shape
    o, wk = weight.shape
    if arith.const_int(wk) is not None and arith.const_int(wk) != arith.const_int(k):
        raise err(call, f"im2col_matmul: the weight has {arith.const_int(wk)} columns, the "
                        f"windows {arith.const_int(k)} rows")
    return tensor_sinfo((n, o, p), "int32")


def _im2col_matmul_ref(data, weight, kernel_size=(), strides=(), padding=(), dilation=(),
                       pad_value=0.0):
    cols = _im2col_ref(data, kernel_size, strides, padding, dilation, pad_value)
    prod = np.matmul(np.asarray(weight).astype(np.int64), cols.astype(np.int64))
    return prod.astype(np.int32)  # (int32 wraps, as the kernel's sums do)


define("nn.im2col_matmul", ("data", "weight"), _infer_im2col_matmul, attrs=_WINDOW_ATTRS,
       reference=_im2col_matmul_ref, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="weight @ im2col(data) of 8-bit operands, in int32: an integer convolution.")


@legalizes("nn.im2col_matmul")
def _im2col_matmul_te(call, inputs):
    """``int32 sum(dot4)`` over words of the windows' and the weight's bytes
    (as ``matmul`` of 8-bit operands), the windows an inlined gather whose
    geometry the reduction carries (``WINDOWS_ATTR``): the GEMM schedule
    packs its panels straight from the input (gemm_windows.pack_panel)."""
    x, w = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    g = _windows(x, attrs_of(call), data=x)
    (h, wd), (oh, ow) = g.hw, g.grid
    c = arith.const_int(x.shape[1])
    K = c * g.taps
    (sy, sx), (dy, dx) = g.strides, g.dilation
    kw = g.kernel[1]

    def col(b, k, p):
        ch = top.clamp_index(k // i64(g.taps), i64(c))  # (k past K: a word's zero bytes)
        tap = k % i64(g.taps)
        y = p // i64(ow) * i64(sy) + tap // i64(kw) * i64(dy) - i64(g.padding[0])
        xx = p % i64(ow) * i64(sx) + tap % i64(kw) * i64(dx) - i64(g.padding[1])
        value = x[b, ch, top.clamp_index(y, i64(h)), top.clamp_index(xx, i64(wd))]
        return top.select(top.all_of(top.in_range(y, 0, h), top.in_range(xx, 0, wd)), value,
                          g.fill)
    cols = top.compute((x.shape[0], i64(K), i64(oh * ow)), col, name="windows", inline=True)
    kq = top.reduce_axis(i64(-(-K // 4)), "kq")

    def body(b, o, p):
        bw = byte_word(cols, lambda k: [b, k, p], K, kq.var)
        aw = byte_word(w, lambda k: [o, k], K, kq.var)
        pair = (bw, aw) if x.dtype == "uint8" else (aw, bw)
        return top.sum(top.call("dot4_u8s8", *pair), axis=[kq])
    return top.compute(out.shape, body, name="T_im2col_matmul", tag="matmul",
                       attrs={WINDOWS_ATTR: g})


def _draw_im2col_matmul(ctx):
    _, c, h, w = ctx.shape
    kernel = (min(h, 3), min(w, 2))
    k = c * kernel[0] * kernel[1]
    # small values: the generator keeps every result within VALUE_CAP
    data = ctx.const(ctx.shape, 0, 2, "uint8")
    weight = ctx.const((3, k), -1, 1, "int8")
    ctx.result_in(-2 * k, 2 * k)
    return (data, weight), {"kernel_size": kernel, "strides": (2, 1), "padding": (1, 1, 0, 1),
                            "pad_value": 2.0}


declares_draw("nn.im2col_matmul", ranks=(4,), build=_draw_im2col_matmul)
