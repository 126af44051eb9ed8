"""FuseQDQMatmul: a QDQ int8 matmul runs on the integer GEMM, requantized in
its epilogue, as ONNX Runtime's QLinearMatMul computes it.

The pattern (what ONNX's QDQ format imports to, the weight's
DequantizeLinear folded at import)::

    d = R.dequantize(qa, sa, za)           # uint8 / int8 activations
    m = R.matmul(d, W)                     # W a float32 constant, 2-D
    y = R.quantize(m, sy, zy)              # m used only here

with scalar constant scales and zero points, becomes::

    acc = R.matmul(qa', Wq, out_dtype="int32") - (za' * colsum(Wq))   # exact
    y = R.quantize(astype(acc, "float32") * scale, 1.0, zy)

``Wq`` is W's int8 form, recovered only when it is exact: a scale ``sw`` for
which every element of W is ``float32(wq * sw)`` with ``|wq| <= 127``
(symmetric per-tensor int8, what quantizers write for weights); otherwise
nothing changes. An int8 ``qa`` is shifted to uint8 (``qa + 128``, its zero
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
    Call, Constant, DataflowBlock, DataflowVar, Expr, Function, IRModule, Phase, SeqExpr, Var,
    VarBinding, collect_exprs,
)
from phasec.ir.node import replace
from phasec.op.calls import call_op
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
        if not _is(q, "relax.quantize") or q.attrs.get("out_dtype") not in ("uint8", "int8"):
            return None
        m = q.args[0]
        mm = values.get(m)
        if not _is(mm, "relax.matmul") or self.uses[m] != 1:
            return None
        if mm.attrs.get("out_dtype") not in ("void", "float32", None):
            return None
        d, w = mm.args
        dq = values.get(d)
        if not _is(dq, "relax.dequantize") or dq.attrs.get("out_dtype") != "float32":
            return None
        if type(w) is not Constant or w.data.ndim != 2:
            return None
        qa = dq.args[0]
        adt = getattr(qa.struct_info, "dtype", None)
        sa, za, sy, zy = (_scalar(dq.args[1], "f"), _scalar(dq.args[2], "iu"),
                          _scalar(q.args[1], "f"), _scalar(q.args[2], "iu"))
        if adt not in ("uint8", "int8") or None in (sa, za, sy, zy):
            return None
        if sa[1] != np.float32 or sy[1] != np.float32:
            return None
        weight = int8_weight(np.asarray(w.data))
        if weight is None:
            return None
        wq, sw = weight
        out: list[VarBinding] = []
        za_ = int(za[0])
        if adt == "int8":  # uint8 x int8 GEMM: qa + 128, its zero point too
            wide = self._bind(out, call_op("astype", qa, dtype="int32"))
            shifted = self._bind(out, call_op("add", wide, Constant(np.array(128, np.int32))))
            qa = self._bind(out, call_op("astype", shifted, dtype="uint8"))
            za_ += 128
        acc = self._bind(out, call_op("matmul", qa, Constant(wq), out_dtype="int32"))
        correction = (za_ * wq.astype(np.int64).sum(axis=0)).astype(np.int32)
        if np.any(correction):
            acc = self._bind(out, call_op("subtract", acc, Constant(correction)))
        scale = np.float32(np.float32(np.float32(sa[0]) * sw) / np.float32(sy[0]))
        f = self._bind(out, call_op("astype", acc, dtype="float32"))
        f = self._bind(out, call_op("multiply", f, Constant(np.array(scale, np.float32))))
        out.append(VarBinding(b.var, call_op(
            "quantize", f, Constant(np.array(1.0, np.float32)), q.args[2], axis=-1,
            out_dtype=q.attrs["out_dtype"])))
        return out


def _is(e: Any, name: str) -> bool:
    return type(e) is Call and getattr(e.op, "name", None) == name


def _function(func: Function) -> Function:
    body = func.body
    if not isinstance(body, SeqExpr):
        return func
    rw = _Rewriter(func)
    blocks = tuple(rw.block(blk) if isinstance(blk, DataflowBlock) else blk
                   for blk in body.blocks)
    if all(a is b for a, b in zip(blocks, body.blocks)):
        return func
    return replace(func, body=replace(body, blocks=blocks))


@register_pass
@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, name="FuseQDQMatmul")
class FuseQDQMatmul:
    """Run dequantize -> matmul (a constant int8 weight) -> quantize on the integer GEMM.

    Requantized as ONNX Runtime's QLinearMatMul does (see the module docstring)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return mod.map_functions(
            lambda _, func: _function(func) if isinstance(func, Function) else func)
