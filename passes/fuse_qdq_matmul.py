"""FuseQDQMatmul: a QDQ int8 matmul runs on the integer GEMM, requantized in
its epilogue, as ONNX Runtime's QLinearMatMul computes it.

The pattern (what ONNX's QDQ format imports to, the weight's
DequantizeLinear folded at import)::

    d = R.dequantize(qa, sa, za)           # uint8 / int8 activations
    m = R.matmul(d, W)                     # W a float32 constant, 2-D
    y = R.quantize(m, sy, zy)              # m used only here

with an optional constant bias added (``m = R.add(R.matmul(d, W), bias)``,
a Gemm's: one value per column),
or the same around a convolution (``R.nn.conv2d`` NCHW, one group, static
channels and sizes (the batch may be symbolic), any kernel, strides,
padding, dilation) with an optional constant
bias added (``m = R.add(R.nn.conv2d(d, W), bias)``, one value per output
channel), with scalar constant activation scales and zero points, becomes::

    acc = R.matmul(qa', Wq, out_dtype="int32") - (za' * colsum(Wq))   # exact
    y = R.quantize(astype(acc, "float32") * scale, 1.0, zy)

(a convolution: ``Wq[O, C*KH*KW] @ cols``, ``cols`` the input's windows,
``R.nn.im2col(qa', ...)`` padded with ``za'`` where the convolution pads,
for a stride-1 "same" one the product one ``R.nn.im2col_matmul(qa', Wq,
...)`` whose GEMM packs the windows from ``qa'`` panel by panel,
or for a 1x1 one of stride 1 without padding ``reshape(qa', (N, C, H*W))``;
then reshaped back). ``Wq`` is W's int8 form, recovered only when it is exact: a scale
``sw`` for which every element of W is ``float32(wq * sw)`` with ``|wq| <=
127`` (symmetric int8, what quantizers write for weights: ``sw = max|w| /
127``), one for the whole weight or else one per output column (matmul) or
channel (convolution); otherwise nothing changes. A bias must be
``float32(bq * float32(sa * sw))`` for an int32 ``bq`` (a dequantized int32
bias, as QDQ writes it), which is added to the int32 sums. An int8 ``qa`` is shifted to uint8 (``qa + 128``, its zero
point too) for the uint8 x int8 GEMM. ``scale`` is ``sa * sw / sy`` in
float32, left to right, and the product with ``float32(acc)`` is rounded
half to even and saturated after adding ``zy``: ONNX Runtime's requantization
of QLinearMatMul (what its QDQ transformer makes of this pattern). The
results therefore equal ONNX Runtime's bit for bit; against the float matmul
they differ where the float sum's rounding errors move a value across a
rounding boundary of the output's quantization (by one quantum).

Runs in the optimization phase after FoldConstant (it needs W folded) and
before DeadCodeElimination (which removes the float matmul it leaves unused).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from phasec.ir import (
    Call, Constant, DataflowBlock, DataflowVar, Expr, Function, IRModule, Phase, Var,
    VarBinding, collect_exprs,
)
from phasec.ir.node import replace
from phasec.op.calls import call_op
from phasec.passes._dataflow_blocks import is_op_call, map_dataflow_blocks
from phasec.transform import module_pass, register_pass

__all__ = ["FuseQDQMatmul", "int8_weight"]

_VAR_KINDS = frozenset((Var, DataflowVar))


def _scalar(e: Expr, kinds: str) -> Any:
    """The value of a constant scalar (shape () or (1,)) whose dtype kind is in ``kinds``."""
    if type(e) is not Constant or e.data.size != 1 or e.data.ndim > 1:
        return None
    if e.data.dtype.kind not in kinds:
        return None
    return e.data.reshape(()).item(), e.data.dtype


def int8_weight(w: np.ndarray) -> tuple[np.ndarray, np.float32] | None:
    """(wq int8, sw float32) with ``w == float32(wq) * sw`` element for element
    and ``|wq| <= 127``, or None: the symmetric per-tensor int8 weight that
    dequantizes to ``w`` exactly (a few scales near ``max|w| / 127`` are tried)."""
    if w.dtype != np.float32 or w.size == 0 or not np.all(np.isfinite(w)):
        return None
    top = float(np.abs(w).max())
    if top == 0.0:
        return None
    guess = np.float32(top / 127)
    for step in range(-2, 3):
        sw = np.float32(guess + step * np.spacing(guess))
        wq = np.rint(w / sw)
        if np.abs(wq).max() > 127:
            continue
        wq8 = wq.astype(np.int8)
        if np.array_equal(wq8.astype(np.float32) * sw, w):
            return wq8, sw
    return None


class _Rewriter:
    """Rewrites the pattern in the dataflow blocks of one function."""

    def __init__(self, func: Function) -> None:
        self.uses = Counter(collect_exprs(func.body, _VAR_KINDS))
        self.fresh = 0

    def _bind(self, out: list[VarBinding], call: Call) -> DataflowVar:
        self.fresh += 1
        var = DataflowVar(f"qdq_gemm_{self.fresh}", call.struct_info)
        out.append(VarBinding(var, call))
        return var

    def block(self, block: DataflowBlock) -> DataflowBlock:
        values: dict[Var, Expr] = {}
        bindings: list[Any] = []
        changed = False
        for b in block.bindings:
            new = self._rewrite(b, values) if isinstance(b, VarBinding) else None
            if isinstance(b, VarBinding):
                values[b.var] = b.value
            if new is None:
                bindings.append(b)
            else:
                bindings.extend(new)
                changed = True
        return replace(block, bindings=tuple(bindings)) if changed else block

    def _rewrite(self, b: VarBinding, values: dict[Var, Expr]) -> list[VarBinding] | None:
        q = b.value
        if not is_op_call(q, "relax.quantize") or q.attrs.get("out_dtype") not in ("uint8", "int8"):
            return None
        m = q.args[0]
        op, bias = values.get(m), None
        if is_op_call(op, "relax.add") and type(op.args[1]) is Constant and self.uses[m] == 1:
            m, bias = op.args[0], np.asarray(op.args[1].data)  # a Gemm's or a Conv's bias
            op = values.get(m)
        if self.uses[m] != 1:
            return None
        if is_op_call(op, "relax.matmul"):
            conv = False
        elif is_op_call(op, "relax.nn.conv2d") and _plain_conv(op):
            conv = True
        else:
            return None
        if op.attrs.get("out_dtype") not in ("void", "float32", None):
            return None
        d, w = op.args
        dq = values.get(d)
        if not is_op_call(dq, "relax.dequantize") or dq.attrs.get("out_dtype") != "float32":
            return None
        if type(w) is not Constant or w.data.ndim != (4 if conv else 2):
            return None
        qa = dq.args[0]
        adt = getattr(qa.struct_info, "dtype", None)
        sa, za, sy, zy = (_scalar(dq.args[1], "f"), _scalar(dq.args[2], "iu"),
                          _scalar(q.args[1], "f"), _scalar(q.args[2], "iu"))
        if adt not in ("uint8", "int8") or None in (sa, za, sy, zy):
            return None
        if sa[1] != np.float32 or sy[1] != np.float32:
            return None
        if conv:
            return self._conv(b, q, op, qa, adt, int(za[0]), np.float32(sa[0]),
                              np.float32(sy[0]), np.asarray(w.data), bias)
        found = channel_weights(np.asarray(w.data).T)  # per tensor, or per column
        if found is None:
            return None
        wq = np.ascontiguousarray(found[0].T)
        N = wq.shape[1]
        bq = np.zeros(N, np.int32)
        if bias is not None:  # one value per column, (N,) or (1, N)
            if bias.size != N or bias.ndim > 2 or bias.shape[-1] != N:
                return None
            bq = _int32_bias(bias.reshape(N), N, (np.float32(sa[0]) * found[1]).astype(
                np.float32))
            if bq is None:
                return None
        out: list[VarBinding] = []
        qa, za_ = self._as_uint8(out, qa, adt, int(za[0]))
        acc = self._bind(out, call_op("matmul", qa, Constant(wq), out_dtype="int32"))
        correction = (za_ * wq.astype(np.int64).sum(axis=0) - bq).astype(np.int32)
        scale = ((np.float32(sa[0]) * found[1]).astype(np.float32)
                 / np.float32(sy[0])).astype(np.float32)
        if np.all(scale == scale[0]):
            scale = scale[:1].reshape(())
        self._requantize(out, acc, correction, scale, q, b.var)
        return out

    def _conv(self, b: VarBinding, q: Call, conv: Call, qa: Expr, adt: str, za: int,
              sa: np.float32, sy: np.float32, w: np.ndarray,
              bias: np.ndarray | None) -> list[VarBinding] | None:
        """A convolution (NCHW, static but for the batch) as ``Wq[O, C*KH*KW] @ cols``:
        ``cols`` the input itself (``[N, C, H*W]``, 1x1, stride 1, no padding)
        or its windows (``nn.im2col``, or ``nn.im2col_matmul`` for a stride-1
        "same" one, padded with the zero point, so every
        term of the zero-point correction is one of the sum); its bias,
        ``float32(bq * sa * sw)`` as QDQ writes it, added as the int32 ``bq``."""
        # static channels and image sizes; the batch may be symbolic
        shape = getattr(qa.struct_info, "shape", None)
        out_shape = getattr(conv.struct_info, "shape", None)
        if shape is None or out_shape is None or len(shape) != 4 or len(out_shape) != 4:
            return None
        dims = [shape[0], *(getattr(d, "value", None) for d in shape[1:])]
        out_dims = [out_shape[0], *(getattr(d, "value", None) for d in out_shape[1:])]
        if None in dims or None in out_dims:
            return None
        O, C, KH, KW = w.shape
        found = channel_weights(w.reshape(O, C * KH * KW))
        if found is None:
            return None
        wq, sw = found
        bq = np.zeros(O, np.int32)
        if bias is not None:
            bq = _int32_bias(bias, O, (sa * sw).astype(np.float32))
            if bq is None:
                return None
        out: list[VarBinding] = []
        qa, za_ = self._as_uint8(out, qa, adt, za)
        n, _, h, wd = dims
        a = conv.attrs
        strides, padding = tuple(a["strides"]), tuple(a["padding"])
        windows = dict(kernel_size=(KH, KW), strides=strides, padding=padding,
                       dilation=tuple(a["dilation"]), pad_value=float(za_))
        if (KH, KW) == (1, 1) and strides == (1, 1) and not any(padding):
            cols = self._bind(out, call_op("reshape", qa, (n, C, h * wd)))
            acc = self._bind(out, call_op("matmul", Constant(wq), cols, out_dtype="int32"))
        elif strides == (1, 1) and out_dims[3] == wd:
            # a stride-1 "same" convolution: the GEMM packs its panels from
            # the image (most panels share one packing: gemm_windows)
            acc = self._bind(out, call_op("nn.im2col_matmul", qa, Constant(wq), **windows))
        else:
            # (strided: packed from the image too, each panel by its own code,
            # the kernel compiled 2-3x slower; the columns, then the GEMM)
            cols = self._bind(out, call_op("nn.im2col", qa, **windows))
            acc = self._bind(out, call_op("matmul", Constant(wq), cols, out_dtype="int32"))
        correction = (za_ * wq.astype(np.int64).sum(axis=1) - bq).astype(np.int32)
        scale = ((sa * sw).astype(np.float32) / sy).astype(np.float32)
        rows = self._requantize(out, acc, correction.reshape(O, 1), scale.reshape(O, 1), q, None)
        out.append(VarBinding(b.var, call_op("reshape", rows, tuple(out_dims))))
        return out

    def _as_uint8(self, out: list[VarBinding], qa: Expr, adt: str, za: int) -> tuple[Expr, int]:
        """``qa`` as the GEMM's uint8 operand: an int8 one plus 128 (its zero point too)."""
        if adt != "int8":
            return qa, za
        wide = self._bind(out, call_op("astype", qa, dtype="int32"))
        shifted = self._bind(out, call_op("add", wide, Constant(np.array(128, np.int32))))
        return self._bind(out, call_op("astype", shifted, dtype="uint8")), za + 128

    def _requantize(self, out: list[VarBinding], acc: Expr, correction: np.ndarray,
                    scale: np.ndarray, q: Call, var: Var | None) -> Var:
        """``quantize(float32(acc - correction) * scale, 1, zy)`` (ORT's requantization)."""
        if np.any(correction):
            acc = self._bind(out, call_op("subtract", acc, Constant(correction)))
        f = self._bind(out, call_op("astype", acc, dtype="float32"))
        f = self._bind(out, call_op("multiply", f, Constant(scale)))
        call = call_op("quantize", f, Constant(np.array(1.0, np.float32)), q.args[2], axis=-1,
                       out_dtype=q.attrs["out_dtype"])
        if var is None:
            return self._bind(out, call)
        out.append(VarBinding(var, call))
        return var


def channel_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(wq int8 [O, C], sw float32 [O]) with ``w[o] == float32(wq[o]) * sw[o]``:
    one scale for all rows when one fits, else one per row (per output
    channel); None when a row has no exact int8 form."""
    whole = int8_weight(w)
    if whole is not None:
        return whole[0], np.full(w.shape[0], whole[1], np.float32)
    rows = [int8_weight(row) for row in w]
    if any(r is None for r in rows):
        return None
    return (np.stack([r[0] for r in rows]),  # type: ignore[index]
            np.array([r[1] for r in rows], np.float32))  # type: ignore[index]


def _int32_bias(bias: np.ndarray, O: int, step: np.ndarray) -> np.ndarray | None:
    """The int32 ``bq`` of a float bias of one value per output channel or
    column (shape (O,), (O, 1, 1) or (1, O, 1, 1)) equal to ``float32(bq * step)``."""
    if bias.dtype != np.float32 or bias.size != O or (
            bias.ndim == 4 and bias.shape != (1, O, 1, 1)) or bias.ndim not in (1, 3, 4):
        return None
    flat = bias.reshape(O)
    bq = np.rint(flat.astype(np.float64) / step.astype(np.float64))
    if np.abs(bq).max(initial=0) >= 2 ** 31:
        return None
    bq32 = bq.astype(np.int32)
    if not np.array_equal(bq32.astype(np.float32) * step, flat):
        return None
    return bq32


def _plain_conv(conv: Call) -> bool:
    """An NCHW / OIHW convolution of one group and a constant weight."""
    a = conv.attrs
    return (a.get("groups") == 1 and a.get("data_layout") == "NCHW"
            and a.get("kernel_layout") == "OIHW" and a.get("out_layout") in ("NCHW", None)
            and type(conv.args[1]) is Constant)


@register_pass
@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, name="FuseQDQMatmul")
class FuseQDQMatmul:
    """Run dequantize -> matmul (a constant int8 weight) -> quantize on the integer GEMM.

    Requantized as ONNX Runtime's QLinearMatMul does (see the module docstring)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return mod.map_functions(
            lambda _, func: map_dataflow_blocks(func, _Rewriter(func).block)
            if isinstance(func, Function) else func)
