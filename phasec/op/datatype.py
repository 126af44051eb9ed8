"""Data types (TVM 0.27's ``relax.op.datatype``): ``astype(x, dtype)`` (numpy
astype) and ``wrap_param(data, dtype)``, ToMixedPrecision's marker of a
parameter stored in one dtype and used in another; and the dtype helpers the
operators with a ``dtype`` attribute share (:func:`dtype_required`,
:func:`dtype_or_void`, :func:`with_dtype`)."""

from __future__ import annotations

import math

import numpy as np

from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp
from phasec.op._common import REQUIRED, OpPattern, as_dtype, attrs_of, define, tensor_arg
from phasec.op._lowering import Inputs, _const, _name, _out, _tensor, legalizes
from phasec.op.draw import BOOL, FLOAT, INT, Hooks, declares_draw
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["dtype_required", "dtype_or_void", "with_dtype"]


def dtype_required(v) -> str:
    """The normalizer of a ``dtype`` attribute that must name a dtype (not "void")."""
    d = as_dtype(v)
    if d == "void":
        raise ValueError("a concrete dtype is required")
    return d


def dtype_or_void(v) -> str:
    """The normalizer of an optional ``dtype`` attribute: None is "void"."""
    return as_dtype("void" if v is None else v)


def with_dtype(x: TensorStructInfo, dtype: str) -> TensorStructInfo:
    """``x``'s shape (or rank) with ``dtype``."""
    return TensorStructInfo(x.shape, dtype, x.ndim)


def _infer_astype(call, ctx):
    return with_dtype(tensor_arg(call, 0, ctx), attrs_of(call)["dtype"])


define("astype", ("x",), _infer_astype, attrs={"dtype": (REQUIRED, dtype_required)},
       reference=lambda x, dtype: np.asarray(x).astype(dtype),
       pattern=OpPattern.ELEMWISE, doc="Convert to ``dtype`` (numpy astype).")

# TVM 0.27's marker for a parameter stored in one dtype and used in another
# (ToMixedPrecision writes it). TVM infers astype's struct info but registers
# no legalization; phasec lowers it as the astype it means, elementwise so
# that the conversion fuses into its consumer.
define("wrap_param", ("data",), _infer_astype, attrs={"dtype": ("float32", dtype_required)},
       reference=lambda data, dtype: np.asarray(data).astype(dtype),
       pattern=OpPattern.ELEMWISE, doc="A parameter converted to ``dtype`` (an astype).")
declares_draw("wrap_param", dtypes=("float32", "int32"), ranks=(0, 1, 2, 3, 4),
              build=lambda ctx: ((ctx.x,), {"dtype": "float32"}))


@legalizes("astype", "wrap_param")
def _astype(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    if tir.is_bool(out.dtype) and not tir.is_bool(x.dtype):
        return te.compute(out.shape, lambda *i: BinaryOp("!=", x[i], _const(0, x.dtype)),
                          name=_name(call))
    return te.compute(out.shape, lambda *i: te.cast(x[i], out.dtype), name=_name(call))


# How the fuzzing generator draws astype (phasec.op.draw.Hooks)

def _astype_build(g, x):

    if x.kind == FLOAT:
        # float -> int truncates; values are well inside int32
        target = g.pick(["int32", "float32"])
    else:
        target = "float32"
    kind = INT if target.startswith("int") else FLOAT
    iv = (math.trunc(x.lo), math.trunc(x.hi)) if kind == INT else (x.lo, x.hi)
    if x.kind == BOOL:
        iv = (0.0, 1.0)
    return g.emit(call_op("relax.astype", x.expr, dtype=target), kind, iv)


declares_draw("astype", Hooks(_astype_build, (FLOAT, INT, BOOL),
                              accepts=lambda g, x: x.kind in (FLOAT, INT, BOOL), order=38))
