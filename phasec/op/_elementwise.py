"""What the elementwise families share: :mod:`.unary`, :mod:`.binary`,
:mod:`.ternary`, :mod:`.search`'s ``where`` and :mod:`.nn.activation` (the
dtype-kind check of TVM's math operators, the result on the operand's
virtual device, numpy results in a given dtype, truthiness in TIR, and the
interval of a 0/1 result for the fuzzing generator)."""

from __future__ import annotations

import numpy as np

from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import err
from phasec.op._lowering import _const
from phasec.ir.text import expr_to_str

__all__ = ["np_result", "kind_check", "on_device", "truthy", "bool_interval"]


def np_result(result, dtype) -> np.ndarray:
    """A numpy result as an array of ``dtype`` (no copy when it already is)."""
    return np.asarray(result).astype(dtype, copy=False)


def kind_check(call, x: TensorStructInfo, kind: str, k: int = 0) -> None:
    """Raise unless operand ``k`` has a dtype of ``kind``: "float", "numeric"
    (no bool), "int" (no bool, no float), "intbool"."""
    d = x.dtype
    if d == "void":
        return
    ok = {"float": tir.is_float(d), "numeric": d != "bool", "int": tir.is_int(d),
          "intbool": tir.is_int(d) or d == "bool"}[kind]
    if not ok:
        need = {"float": "a float dtype", "numeric": "a numeric (non-bool) dtype",
                "int": "an integer dtype", "intbool": "an integer or bool dtype"}[kind]
        raise err(call, f"{expr_to_str(call.op)} requires {need}, but {expr_to_str(call.args[k])} "
                        f"has dtype {d}")


def on_device(x: TensorStructInfo, dtype: str | None = None) -> TensorStructInfo:
    """``x``'s struct info (in ``dtype`` if given) on its virtual device, as
    TVM 0.27's InferTypeUnary."""
    return TensorStructInfo(x.shape, x.dtype if dtype is None else dtype, x.ndim,
                            vdevice=x.vdevice)


def truthy(x: PrimExpr) -> PrimExpr:
    """``x != 0`` as a TIR bool (``x`` itself when it is one)."""
    return x if tir.is_bool(x.dtype) else BinaryOp("!=", x, _const(0, x.dtype))


def bool_interval(*ivs):
    """The interval of a 0/1 result, whatever the operands' (a draw rule)."""
    return 0.0, 1.0
