"""``nn.col2im``: blocks back into an image, overlaps summed (ONNX's Col2Im,
PyTorch's ``fold``).

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
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, IntImm, Select
from phasec.op._common import (
    OpPattern, attrs_of, define, err, int_tuple, tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _clamp, _const, _out, _tensor, legalizes
from phasec.op._tirgen import i64
from phasec.op.draw import declares_draw

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
