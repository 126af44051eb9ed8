"""Shapes as values, and the two operators with side effects: shape_of,
shape_to_tensor, tensor_to_shape, print, assert_op.

None of them is a kernel: LegalizeOps lowers each to a VM builtin or a
packed call (:func:`~phasec.op.legalize.legalizes_to_relax`), as TVM 0.27
does, and the functions are registered in :mod:`phasec.runtime.packed`:

* ``shape_of(x)`` -> ``R.call_pure_packed("vm.builtin.shape_of", x)``: the
  shape of x (``R.Shape([...])`` with x's dimensions when known).
* ``shape_to_tensor(s)`` -> ``vm.builtin.shape_to_tensor``: a 1-D int64
  tensor of the dimensions.
* ``tensor_to_shape(t)`` -> ``vm.builtin.tensor_to_shape``: a 1-D integer
  tensor read as a shape (its values are data: ``R.Shape(ndim=k)``);
  negative entries are an error when it runs.
* ``print(*values, format="")`` -> ``R.call_packed("relax.run.print",
  R.str(format), *values)``: writes ``format.format(*values)`` (without a
  format: the values separated by spaces) and a newline to standard output;
  impure, returns ``R.Tuple()``.
* ``assert_op(condition, *format_args, format="")`` ->
  ``R.call_packed("relax.run.assert_op", condition, R.str(format), *args)``:
  a false condition (a bool scalar: 0-d tensor or prim value) stops the
  program with ProgramAssertionError carrying the formatted message
  (default "Assertion Failed"); impure, returns ``R.Tuple()``.

TVM prints the format as ``format=R.str("...")``; phasec's attribute is a
plain string, written ``format="..."``.
"""

from __future__ import annotations

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import Call, ExternFunc, ShapeExpr, StringImm
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.ir.struct_info import (
    PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.op._common import OpPattern, attrs_of, define, err, shape_arg, tensor_arg
from phasec.op._draw import ANY_DTYPE, declares_draw
from phasec.op._lowering import legalizes_to_relax

__all__: list[str] = []

_VOID = TupleStructInfo([])


def _format_str(v) -> str:
    if isinstance(v, StringImm):
        return v.value
    if isinstance(v, str):
        return v
    raise TypeError(f"expected a string, got {v!r}")


def _pure_packed(name: str, call: Call) -> Call:
    from phasec.op.calls import call_op

    return call_op("call_pure_packed", ExternFunc(name), *call.args,
                   sinfo_args=[call.struct_info], span=call.span)


def _packed(name: str, call: Call, args) -> Call:
    return Call(ExternFunc(name), list(args), None, (_VOID,), struct_info=_VOID, span=call.span)


# ---------------------------------------------------------------------------
# shape_of / shape_to_tensor / tensor_to_shape
# ---------------------------------------------------------------------------

def _infer_shape_of(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.shape is not None:
        return ShapeStructInfo(tuple(x.shape))
    return ShapeStructInfo(None, x.ndim)


define("shape_of", ("x",), _infer_shape_of,
       reference=lambda x: tuple(int(d) for d in np.shape(x)), pattern=OpPattern.OPAQUE,
       doc="The shape of a tensor, as a shape value.")
legalizes_to_relax("shape_of")(lambda call: _pure_packed("vm.builtin.shape_of", call))


def _infer_shape_to_tensor(call, ctx):
    s = shape_arg(call, 0, ctx)
    if s.ndim == -1:
        return TensorStructInfo(None, "int64", 1)
    return TensorStructInfo((tir.IntImm(s.ndim),), "int64")


def _shape_to_tensor_ref(expr):
    from phasec.runtime.packed import get_packed_func

    return get_packed_func("vm.builtin.shape_to_tensor")(expr)


define("shape_to_tensor", ("expr",), _infer_shape_to_tensor, reference=_shape_to_tensor_ref,
       pattern=OpPattern.OPAQUE, doc="A shape value as a 1-D int64 tensor.")
legalizes_to_relax("shape_to_tensor")(
    lambda call: _pure_packed("vm.builtin.shape_to_tensor", call))


def _infer_tensor_to_shape(call, ctx):
    t = tensor_arg(call, 0, ctx)
    if t.dtype != "void" and not tir.is_int(t.dtype):
        raise err(call, f"tensor_to_shape needs an integer tensor, but {expr_to_str(call.args[0])} "
                        f"has dtype {t.dtype}")
    if t.ndim not in (-1, 1):
        raise err(call, f"tensor_to_shape needs a 1-D tensor, but {expr_to_str(call.args[0])} "
                        f"has ndim {t.ndim}")
    length = arith.const_int(t.shape[0]) if t.shape is not None else None
    return ShapeStructInfo(None, -1 if length is None else length)


def _tensor_to_shape_ref(expr):
    from phasec.runtime.packed import get_packed_func

    return get_packed_func("vm.builtin.tensor_to_shape")(expr)


define("tensor_to_shape", ("expr",), _infer_tensor_to_shape, reference=_tensor_to_shape_ref,
       pattern=OpPattern.OPAQUE, doc="A 1-D integer tensor read as a shape value.")
legalizes_to_relax("tensor_to_shape")(
    lambda call: _pure_packed("vm.builtin.tensor_to_shape", call))


# ---------------------------------------------------------------------------
# print / assert_op
# ---------------------------------------------------------------------------

def _infer_print(call, ctx):
    return _VOID


def _print_ref(*values, format=""):  # noqa: A002 - TVM's attribute name
    from phasec.runtime.packed import get_packed_func  # the VM's own implementation: one behaviour

    return get_packed_func("relax.run.print")(format, *values)


define("print", ("values",), _infer_print, attrs={"format": ("", _format_str)},
       reference=_print_ref, pattern=OpPattern.OPAQUE, pure=False, variadic=True,
       doc="Print the values (with a str.format format) to standard output; impure.")


@legalizes_to_relax("print")
def _print(call):
    return _packed("relax.run.print", call, [StringImm(attrs_of(call)["format"]), *call.args])


def _infer_assert(call, ctx):
    if not call.args:
        raise err(call, "assert_op needs a condition")
    cond = arg_sinfo(call.args[0], ctx)
    ok = (isinstance(cond, TensorStructInfo) and cond.dtype in ("bool", "void")
          and cond.ndim in (0, -1)) or (isinstance(cond, PrimStructInfo) and cond.dtype == "bool")
    if not ok:
        raise err(call, f"assert_op needs a bool scalar condition (a 0-d bool tensor or "
                        f"R.prim_value(True)), but {expr_to_str(call.args[0])} has struct info "
                        f"{sinfo_to_str(cond)}")
    return _VOID


def _assert_ref(condition, *format_args, format=""):  # noqa: A002
    from phasec.runtime.packed import get_packed_func

    return get_packed_func("relax.run.assert_op")(condition, format, *format_args)


define("assert_op", ("condition", "format_args"), _infer_assert,
       attrs={"format": ("", _format_str)}, reference=_assert_ref, pattern=OpPattern.OPAQUE,
       pure=False, variadic=True,
       doc="Stop the program with the formatted message when the condition is false; impure.")


@legalizes_to_relax("assert_op")
def _assert(call):
    args = [call.args[0], StringImm(attrs_of(call)["format"]), *call.args[1:]]
    return _packed("relax.run.assert_op", call, args)


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_shape_to_tensor(ctx):
    ctx.result_in(0, max(ctx.shape, default=0))
    return (ShapeExpr(ctx.shape),), {}


def _draw_tensor_to_shape(ctx):
    dims = np.array([ctx.integers(0, 4) for _ in range(ctx.integers(1, 3))], "int64")
    return (dims,), {}


# shapes are values here, not tensors: shape_of and tensor_to_shape give an
# R.Shape (opaque to later operators), shape_to_tensor reads a shape literal
# of the static shape in scope; print and assert_op are impure (impure
# functions, outside dataflow blocks), assert_op on a true condition
declares_draw("shape_of", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False,
              build=lambda ctx: ((ctx.x,), {}))
declares_draw("shape_to_tensor", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4),
              build=_draw_shape_to_tensor)
declares_draw("tensor_to_shape", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False,
              build=_draw_tensor_to_shape)
declares_draw("print", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False, impure=True,
              build=lambda ctx: ((ctx.x,), {"format": ctx.choose(["", "value: {}"])}))
declares_draw("assert_op", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), static=False, impure=True,
              build=lambda ctx: ((np.array(True), ctx.x), {"format": ctx.choose(["", "x={}"])}))
