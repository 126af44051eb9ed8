"""Views of tensor memory (category "memory", pure, as TVM 0.27 declares them):

* ``R.memory.view(x, shape, dtype, relative_byte_offset)``: a tensor that
  shares ``x``'s memory, with another shape, element type and/or byte
  offset. An omitted operand is TVM's "void" (the empty tuple
  ``R.tuple()``; ``R.null_value()`` for the dtype as well): the input's
  shape, dtype, offset 0. Inference as TVM's InferTypeView: the shape comes
  from ``shape`` (or the input), the dtype from ``dtype`` (or the input),
  and a view provably past the end of ``x`` is an error.
* ``R.memory.ensure_zero_offset(x)``: ``x`` with its data at offset 0 (a
  copy when it is a view at an offset); struct info unchanged.

VMBuiltinLower lowers them to the packed functions TVM's LowerRuntimeBuiltin
uses: ``runtime.TVMTensorCreateView(x, shape, dtype, offset)`` (every
operand filled in) and ``vm.builtin.ensure_zero_offset(x)``
(:mod:`phasec.runtime.packed` implements both on numpy arrays: a view is a numpy
array over the same buffer, bounds-checked).
"""

from __future__ import annotations

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import Call, DataTypeImm, PrimValue, Tuple
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.ir.struct_info import ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo
from phasec.op._common import define, err

__all__ = ["is_void", "VIEW_OPTIONAL"]

#: the operands of R.memory.view that may be omitted (filled with R.tuple())
VIEW_OPTIONAL = ("shape", "dtype", "relative_byte_offset")


def is_void(e) -> bool:
    """TVM's "not given": the empty tuple (or, for a dtype, R.null_value())."""
    if isinstance(e, Tuple) and not e.fields:
        return True
    return isinstance(e, Call) and getattr(e.op, "name", None) == "relax.null_value"


def _itemsize(dtype: str) -> int | None:
    if dtype in ("void", "") or dtype not in tir.DTYPES:
        return None
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def _nelems(shape):
    acc = tir.IntImm(1, "int64")
    for d in shape:
        acc = tir.BinaryOp("*", acc, d)
    return arith.simplify(acc)


def _infer_view(call, ctx):
    if len(call.args) != 4:
        raise err(call, f"R.memory.view takes 4 operands (x, shape, dtype, "
                        f"relative_byte_offset), got {len(call.args)}")
    data = arg_sinfo(call.args[0], ctx)
    if not isinstance(data, TensorStructInfo):
        raise err(call, f"R.memory.view expects a tensor, but {expr_to_str(call.args[0])} has "
                        f"struct info {sinfo_to_str(data)}")
    shape_arg, dtype_arg, off_arg = call.args[1:]
    view_shape = None
    if not is_void(shape_arg):
        view_shape = arg_sinfo(shape_arg, ctx)
        if not isinstance(view_shape, ShapeStructInfo):
            raise err(call, "R.memory.view expects a shape R.shape([...]) or R.tuple() for the "
                            f"shape, but {expr_to_str(shape_arg)} has struct info "
                            f"{sinfo_to_str(view_shape)}")
    dtype_given = not is_void(dtype_arg)
    out_dtype = data.dtype
    if dtype_given:
        if isinstance(dtype_arg, DataTypeImm):
            if dtype_arg.value == "void":
                raise err(call, "R.memory.view's dtype must be a concrete dtype, not void; use "
                                "R.null_value() (or omit it) for no change")
            out_dtype = dtype_arg.value
        elif isinstance(arg_sinfo(dtype_arg, ctx), ObjectStructInfo):
            out_dtype = "void"
        else:
            raise err(call, "R.memory.view expects the dtype as R.dtype(...), but got "
                            f"{expr_to_str(dtype_arg)}")
    offset = tir.IntImm(0, "int64")
    if not is_void(off_arg):
        s = arg_sinfo(off_arg, ctx)
        if not isinstance(s, PrimStructInfo) or s.dtype != "int64":
            raise err(call, "R.memory.view expects the relative_byte_offset as an int64 "
                            f"R.prim_value, but {expr_to_str(off_arg)} has struct info "
                            f"{sinfo_to_str(s)}")
        offset = off_arg.value if isinstance(off_arg, PrimValue) else None
    if view_shape is not None and view_shape.values is not None:
        out_shape, ndim = tuple(view_shape.values), len(view_shape.values)
    elif view_shape is not None:
        out_shape, ndim = None, view_shape.ndim
    else:
        out_shape, ndim = data.shape, data.ndim
    in_size, out_size = _itemsize(data.dtype), _itemsize(out_dtype)
    if data.shape is not None and out_shape is not None and in_size and out_size:
        in_bytes = arith.simplify(tir.BinaryOp("*", _nelems(data.shape), tir.IntImm(in_size, "int64")))
        end = tir.BinaryOp("*", _nelems(out_shape), tir.IntImm(out_size, "int64"))
        if offset is not None:
            end = tir.BinaryOp("+", end, offset)
        end = arith.simplify(end)
        e, b = arith.const_int(end), arith.const_int(in_bytes)
        if e is not None and b is not None and e > b:
            raise err(call, f"the view would end at byte {e}, past the end of "
                            f"{expr_to_str(call.args[0])} ({b} bytes); views must stay inside "
                            "the array they view")
    elif in_size and out_size and view_shape is None and out_size > in_size:
        raise err(call, f"R.memory.view changes the element size from {in_size} to {out_size} "
                        "bytes without a new shape: the view would exceed the array")
    if out_shape is not None:
        return TensorStructInfo(out_shape, out_dtype)
    return TensorStructInfo(None, out_dtype, ndim)


def _infer_ensure_zero_offset(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.memory.ensure_zero_offset takes 1 operand, got {len(call.args)}")
    return arg_sinfo(call.args[0], ctx)


define("memory.view", ("x", "shape", "dtype", "relative_byte_offset"), _infer_view,
       category="memory",
       doc="A tensor sharing x's memory with another shape, dtype and/or byte offset "
           "(omitted operands: R.tuple()).")
define("memory.ensure_zero_offset", ("x",), _infer_ensure_zero_offset, category="memory",
       doc="x with its data at byte offset 0 (a copy if x is an offset view).")
