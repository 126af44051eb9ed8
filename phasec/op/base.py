"""The base operators (TVM 0.27's ``relax.op.base``): the call-like builtins and
closures, shapes as values, print and assert_op, and device placement
(the memory and VM builtins are in :mod:`.memory` and :mod:`.vm`), and
``size(x)``, the element count of x as a 0-d int64 tensor.

Call-like builtins and closures
-------------------------------

Operand layouts (``R.<name>(operands..., attrs...)``):

Call-like (category "call", pure):

* ``R.call_tir(func: GlobalVar, args: Tuple[, tir_vars: ShapeExpr], sinfo_args=(out,))``
  calls a PrimFunc in destination-passing style; the result is
  ``sinfo_args[0]`` (a tensor, or a tuple of tensors for several outputs).
* ``R.call_dps_packed(func: ExternFunc, args: Tuple, sinfo_args=(out,))`` the
  same for a packed function.
* ``R.call_pure_packed(func: ExternFunc, *args, sinfo_args=...)`` a packed
  call known to be pure; result ``sinfo_args[0]`` (several: a tuple) or
  ``R.Object``.
* ``R.invoke_pure_closure(closure, args: Tuple, sinfo_args=...)`` likewise.

Closures (category "vm"): ``R.make_closure(func: GlobalVar, captured: Tuple)``
(pure; FuncStructInfo without the captured parameters when the callee is
known, else ``R.Object``); ``R.invoke_closure(closure, args: Tuple,
sinfo_args=...)`` (impure); ``R.null_value()`` (``R.Object``).

Shapes as values, print and assert_op
-------------------------------------

shape_of, shape_to_tensor, tensor_to_shape, print and assert_op: none of
them is a kernel: LegalizeOps lowers each to a VM builtin or a
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

Device placement
----------------

phasec builds for one device, the host CPU, so placement is checked and
carried but never moves data between devices:

* ``R.to_vdevice(x, dst_vdevice="llvm:0:global")`` is x copied to the virtual
  device ``dst_vdevice`` (``"<target kind>:<index>:<memory scope>"``, as in
  :attr:`~phasec.ir.struct_info.TensorStructInfo.vdevice``). The result's
  struct info is x's with that vdevice, as TVM infers it. As in TVM it is a
  memory builtin: it stays through LegalizeOps and VMBuiltinLower turns it
  into the VM builtin ``vm.builtin.to_device`` (TVM's LowerRuntimeBuiltin
  does the same), a copy on the CPU. A target kind that is not a CPU one
  (cuda, opencl...) is refused there, as phasec cannot build for it.
* ``R.hint_on_device(x, R.device(device_type=1, index=0), "global")`` is a
  hint for TVM's RealizeVDevice: the identity, with x's struct info.
  LegalizeOps replaces it by x, as RealizeVDevice does once it has used the
  hint. (tvm.compile never runs RealizeVDevice: a hint left in a module it
  compiles fails in TVM's code generation, a phase error PhaseCheck reports
  as PH202 after TVM's LegalizeOps.)

TVM registers no fusion pattern for either (opaque).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from phasec import arith
from phasec.errors import counted
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call, Expr, ExternFunc, GlobalVar, Op, ShapeExpr, StringImm
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
    TupleStructInfo,
)
from phasec.op._common import (
    REQUIRED, OpPattern, as_int, as_str, attrs_of, define, err, int_tuple, shape_arg, tensor_arg,
)
from phasec.op._lowering import _tensor, legalizes, legalizes_to_relax
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.arith.lattice import is_base_of
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.runtime.packed import get_packed_func
from phasec.op.calls import call_op

__all__ = ["CPU_DEVICE_TYPE", "CPU_TARGET_KINDS", "check_operand_count", "check_tuple_operand"]


# ---------------------------------------------------------------------------
# Call-like builtins and closures
# ---------------------------------------------------------------------------

def _sinfo_result(call):
    if not call.sinfo_args:
        return ObjectStructInfo()
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


def check_operand_count(call, lo: int, hi: int) -> None:
    """Raise unless the call has ``lo`` to ``hi`` operands."""
    n = len(call.args)
    if not lo <= n <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise err(call, f"{expr_to_str(call.op)} expects {want} operands, got {n}")


def check_tuple_operand(call, i: int, ctx, what: str) -> TupleStructInfo:
    """Operand ``i``'s struct info, which must be a tuple (of ``what``)."""
    sinfo = arg_sinfo(call.args[i], ctx)
    if not isinstance(sinfo, TupleStructInfo):
        raise err(call, f"{expr_to_str(call.op)} expects a tuple of {what} as operand {i}, "
                        f"but {expr_to_str(call.args[i])} has struct info {sinfo_to_str(sinfo)}")
    return sinfo


def _check_out_sinfo(call) -> None:
    if len(call.sinfo_args) != 1:
        raise err(call, f"{expr_to_str(call.op)} needs exactly one output struct info "
                        f"(out_sinfo=...), got {len(call.sinfo_args)}")
    out = call.sinfo_args[0]
    fields = out.fields if isinstance(out, TupleStructInfo) else (out,)
    for f in fields:
        if not isinstance(f, TensorStructInfo):
            raise err(call, f"{expr_to_str(call.op)} outputs must be tensors, "
                            f"got out_sinfo {sinfo_to_str(out)}")


def _infer_call_tir(call, ctx):
    check_operand_count(call, 2, 3)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, "R.call_tir's first operand must be a PrimFunc of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    check_tuple_operand(call, 1, ctx, "tensors")
    if len(call.args) == 3:
        shape_arg(call, 2, ctx)
    _check_out_sinfo(call)
    return call.sinfo_args[0]


def _infer_call_tir_inplace(call, ctx):
    out = _infer_call_tir(call, ctx)
    n_out = len(out.fields) if isinstance(out, TupleStructInfo) else 1
    args = call.args[1]
    n_args = len(args.fields) if hasattr(args, "fields") else None
    indices = attrs_of(call)["inplace_indices"]
    if len(indices) != n_out:
        raise err(call, f"R.call_tir_inplace has {n_out} output(s) but {len(indices)} "
                        f"inplace_indices {list(indices)}")
    for k in indices:
        if k < -1 or (n_args is not None and k >= n_args):
            raise err(call, f"R.call_tir_inplace: inplace index {k} is not -1 (a new output) "
                            f"nor one of its {counted(n_args, 'argument')}")
    if not any(k >= 0 for k in indices):
        raise err(call, "R.call_tir_inplace needs at least one in-place output (an index "
                        "other than -1); use R.call_tir otherwise")
    if len([k for k in indices if k >= 0]) != len({k for k in indices if k >= 0}):
        raise err(call, f"R.call_tir_inplace: an argument is overwritten by two outputs "
                        f"(inplace_indices {list(indices)})")
    return out


def _infer_call_dps_packed(call, ctx):
    check_operand_count(call, 2, 2)
    if not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_dps_packed's first operand must be a packed function name, "
                        f"not {expr_to_str(call.args[0])}")
    check_tuple_operand(call, 1, ctx, "tensors")
    _check_out_sinfo(call)
    return call.sinfo_args[0]


def _infer_call_pure_packed(call, ctx):
    if not call.args or not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_pure_packed's first operand must be a packed function name")
    return _sinfo_result(call)


def _infer_call_inplace_packed(call, ctx):
    """TVM 0.27's InferTypeCallInplacePacked: the result is ``sinfo_args``;
    each in-place index names an operand (after the callee), -1 a new value,
    at least one is not -1, none repeats, and the argument an index names
    must have the struct info of the output it becomes."""
    if len(call.args) < 2 or not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_inplace_packed needs a packed function name and at least one "
                        "argument (without arguments use R.call_pure_packed)")
    indices = attrs_of(call)["inplace_indices"]
    n = len(call.args) - 1
    seen = set()
    for i, k in enumerate(indices):
        if not -1 <= k < n:
            raise err(call, f"in-place index {i} is out of range (must be between -1 and {n - 1}, "
                            f"inclusive, but is {k})")
        if k != -1:
            if k in seen:
                raise err(call, f"all in-place indices must be unique, but index {k} appears "
                                "more than once")
            seen.add(k)
    if not seen:
        raise err(call, "at least one in-place index must be other than -1 (or else use "
                        "R.call_pure_packed)")
    ret = _sinfo_result(call)
    outs = [ret] if len(indices) == 1 else (
        list(ret.fields) if isinstance(ret, TupleStructInfo) else None)
    if outs is None or len(outs) != len(indices):
        raise err(call, "several in-place indices need a tuple result (ty_args) with one field "
                        "per index")
    for out, k in zip(outs, indices):
        if k == -1:
            continue
        given = arg_sinfo(call.args[k + 1], ctx)
        if not is_base_of(out, given):
            raise err(call, f"the result {sinfo_to_str(out)} does not match the in-place "
                            f"argument {k}: {sinfo_to_str(given)}")
    return ret


def _check_closure(call, ctx) -> None:
    sinfo = arg_sinfo(call.args[0], ctx)
    if not isinstance(sinfo, (FuncStructInfo, ObjectStructInfo)):
        raise err(call, f"{expr_to_str(call.op)} expects a closure, but {expr_to_str(call.args[0])} "
                        f"has struct info {sinfo_to_str(sinfo)}")


def _infer_invoke_closure(call, ctx):
    check_operand_count(call, 2, 2)
    _check_closure(call, ctx)
    check_tuple_operand(call, 1, ctx, "arguments")
    return _sinfo_result(call)


def _infer_make_closure(call, ctx):
    check_operand_count(call, 2, 2)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, f"R.make_closure's first operand must be a function of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    captured = check_tuple_operand(call, 1, ctx, "captured values")
    fsinfo = ctx.globals.get(call.args[0].name_hint) if ctx is not None else None
    if fsinfo is None:
        fsinfo = call.args[0].struct_info
    if isinstance(fsinfo, FuncStructInfo) and fsinfo.params is not None:
        if len(captured.fields) > len(fsinfo.params):
            raise err(call, f"R.make_closure captures {len(captured.fields)} values but "
                            f"cls.{call.args[0].name_hint} has only {len(fsinfo.params)} parameters")
        return FuncStructInfo(fsinfo.params[:len(fsinfo.params) - len(captured.fields)], fsinfo.ret,
                              fsinfo.purity)
    return ObjectStructInfo()


define("call_tir", ("func", "args", "tir_vars"), _infer_call_tir, variadic=True, category="call",
       doc="Call a PrimFunc in destination-passing style; result = out_sinfo.")
define("call_tir_inplace", ("func", "args", "tir_vars"), _infer_call_tir_inplace, variadic=True,
       attrs={"inplace_indices": (REQUIRED, int_tuple)}, category="call",
       doc="Call a PrimFunc that writes output i into argument inplace_indices[i] (-1: a "
           "new output, allocated as by call_tir); result = out_sinfo.")


def _grad_kwargs(v) -> tuple[tuple[str, Any], ...]:
    """te_grad_kwargs, kept hashable: (name, value) pairs sorted by name."""
    if isinstance(v, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in v):
        v = dict(v)
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise TypeError(f"expected a dict from argument names to values, got {v!r}")
    return tuple(sorted(v.items()))


def _infer_call_tir_with_grad(call, ctx):
    check_operand_count(call, 2, 2)
    return _infer_call_tir(call, ctx)


define("call_tir_with_grad", ("func", "args"), _infer_call_tir_with_grad, category="call",
       attrs={"te_grad_name": (REQUIRED, as_str), "te_grad_kwargs": ((), _grad_kwargs)},
       doc="A call_tir that names the TE gradient (te_grad_name) TVM's Gradient pass uses; "
           "phasec has no Gradient pass, and LegalizeOps lowers it to the call_tir it is.")


@legalizes_to_relax("call_tir_with_grad", lowers_to="its call_tir")
def _call_tir_with_grad(call: Call) -> Expr:
    # the gradient's name is for TVM's Gradient pass, which phasec does not have
    return Call(Op("relax.call_tir"), call.args, None, call.sinfo_args,
                struct_info=call.struct_info, span=call.span)


define("call_dps_packed", ("func", "args"), _infer_call_dps_packed, category="call",
       doc="Call a packed function in destination-passing style; result = out_sinfo.")
define("call_pure_packed", ("func", "args"), _infer_call_pure_packed, variadic=True,
       category="call", doc="A packed call known to be pure; result = sinfo_args.")
define("call_inplace_packed", ("func", "args"), _infer_call_inplace_packed, variadic=True,
       attrs={"inplace_indices": (REQUIRED, int_tuple)}, category="call",
       doc="A packed call that writes its result into the arguments inplace_indices name "
           "(-1: a new value); pure as TVM declares it; result = sinfo_args.")
define("invoke_pure_closure", ("closure", "args"), _infer_invoke_closure, category="call",
       doc="Invoke a closure known to be pure; result = sinfo_args.")
define("make_closure", ("func", "args"), _infer_make_closure, category="vm",
       doc="Capture values into a closure over a module function.")
define("invoke_closure", ("closure", "args"), _infer_invoke_closure, category="vm", pure=False,
       doc="Invoke a closure (impure); result = sinfo_args.")
def _infer_call_builtin_with_ctx(call, ctx):
    check_operand_count(call, 2, 2)
    if not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_builtin_with_ctx's first operand must be a builtin's name")
    return _sinfo_result(call)


define("call_builtin_with_ctx", ("func", "args"), _infer_call_builtin_with_ctx, category="vm",
       pure=False, doc="VM: call a builtin that takes the VM context first (TVM's VMShapeLower "
                       "emits it); result = sinfo_args.")
define("null_value", (), lambda call, ctx: ObjectStructInfo(), category="vm",
       doc="The null object.")


# ---------------------------------------------------------------------------
# Shapes as values, print and assert_op
# ---------------------------------------------------------------------------

_VOID = TupleStructInfo([])


def _format_str(v) -> str:
    if isinstance(v, StringImm):
        return v.value
    if isinstance(v, str):
        return v
    raise TypeError(f"expected a string, got {v!r}")


def _pure_packed(name: str, call: Call) -> Call:

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
    # the VM's own implementation: one behaviour
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


# ---------------------------------------------------------------------------
# Device placement
# ---------------------------------------------------------------------------


#: target kinds whose memory is the host's: to_vdevice to them is a copy phasec builds
CPU_TARGET_KINDS = ("llvm", "c")
#: DLPack's device type of the CPU (TVM's R.device(device_type=1))
CPU_DEVICE_TYPE = 1

_VDEVICE = re.compile(r"([A-Za-z_][\w.-]*)(?::(-?\d+)(?::([\w.-]+))?)?")


def _vdevice(v) -> str:
    """The canonical ``"kind:index:scope"``; an omitted index is 0 and an
    omitted scope "global" (the parser resolves them against the module's
    virtual devices first, as TVM looks them up)."""
    text = as_str(v)
    m = _VDEVICE.fullmatch(text)
    if m is None:
        raise ValueError(f"expected a virtual device \"<target kind>[:<index>[:<memory scope>]]\" "
                         f"(e.g. \"llvm:0:global\"), got {text!r}")
    kind, index, scope = m.groups()
    return f"{kind}:{index or 0}:{scope or 'global'}"


def _infer_to_vdevice(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.to_vdevice expects 1 operand, got {len(call.args)}")
    x = tensor_arg(call, 0, ctx, "data")
    dst = attrs_of(call)["dst_vdevice"]
    if x.shape is not None:
        return TensorStructInfo(x.shape, x.dtype, vdevice=dst)
    return TensorStructInfo(None, x.dtype, x.ndim, vdevice=dst)


define("to_vdevice", ("data",), _infer_to_vdevice, attrs={"dst_vdevice": (REQUIRED, _vdevice)},
       reference=lambda data, dst_vdevice: np.array(data, copy=True), category="memory",
       doc="Copy to the virtual device ``dst_vdevice`` (VMBuiltinLower: vm.builtin.to_device).")


def _infer_hint_on_device(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.hint_on_device expects 1 operand, got {len(call.args)}")
    return tensor_arg(call, 0, ctx, "data")


def _device_type(v) -> int:
    n = as_int(v)
    if n < 1:
        raise ValueError(f"expected a DLPack device type (1 = CPU, 2 = CUDA...), got {n}")
    return n


def _device_index(v) -> int:
    n = as_int(v)
    if n < 0:
        raise ValueError(f"expected a device index >= 0, got {n}")
    return n


define("hint_on_device", ("data",), _infer_hint_on_device,
       attrs={"device_type": (CPU_DEVICE_TYPE, _device_type), "index": (0, _device_index),
              "memory_scope": ("global", as_str)},
       reference=lambda data, **_: np.asarray(data), pattern=OpPattern.OPAQUE,
       doc="A placement hint for RealizeVDevice; the identity.")


@legalizes_to_relax("hint_on_device", lowers_to="its operand")
def _hint_on_device(call: Call) -> Expr:
    return call.args[0]


declares_draw("hint_on_device", dtypes=ANY_DTYPE, build=lambda ctx: ((ctx.x,), {}))


# ---------------------------------------------------------------------------
# size
# ---------------------------------------------------------------------------

def _infer_size(call, ctx):
    tensor_arg(call, 0, ctx)
    return TensorStructInfo((), "int64")


define("size", ("x",), _infer_size,
       reference=lambda x: np.asarray(np.asarray(x).size, np.int64), pattern=OpPattern.INJECTIVE,
       doc="The number of elements of x, as a 0-d int64 tensor.")


@legalizes("size")
def _size(call, inputs):
    x = _tensor(inputs, 0, call)
    total: PrimExpr = tir.IntImm(1)
    for d in x.shape:
        total = BinaryOp("*", total, d)
    total = arith.simplify(total)
    return te.compute((), lambda: total, name="T_size")


def _draw_size(ctx):
    n = math.prod(ctx.shape)
    ctx.result_in(n, n)
    return (ctx.x,), {}


declares_draw("size", dtypes=ANY_DTYPE, ranks=(0, 1, 2, 3, 4), build=_draw_size)
