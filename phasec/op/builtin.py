"""Call-like builtins, closures, and the memory / VM builtins.

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

Memory (category "memory"): allocation is pure, as in TVM (it has no
visible effect); killing is impure.

* ``R.builtin.alloc_tensor(shape: ShapeExpr, dtype=..., runtime_device_index=0)``
  -> ``R.Tensor(shape, dtype)``
* ``R.memory.alloc_storage(size: ShapeExpr, virtual_device_index=0,
  storage_scope="global", dtype="uint8")`` -> ``R.Object``; ``size`` is the
  storage size in bytes as a 1-D shape ``R.shape([nbytes])``.
* ``R.memory.alloc_tensor(storage, offset: PrimValue, shape: ShapeExpr, dtype=...)``
  -> ``R.Tensor(shape, dtype)``; ``offset`` is in bytes.
* ``R.memory.kill_storage(storage)``, ``R.memory.kill_tensor(tensor)`` -> ``R.Tuple()``

VM (category "vm"):

* ``R.vm.alloc_storage(size: ShapeExpr, runtime_device_index=0, dtype="uint8")``
  -> ``R.Object`` (pure)
* ``R.vm.alloc_tensor(storage, offset: PrimValue, shape: ShapeExpr, dtype=...)``
  -> ``R.Tensor(shape, dtype)`` (pure)
* ``R.vm.kill_object(obj)`` -> ``R.Tuple()`` (impure)
"""

from __future__ import annotations

from typing import Any

from phasec.ir.expr import Call, Expr, ExternFunc, GlobalVar, Op
from phasec.arith.lattice import is_base_of
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.op._common import (
    REQUIRED, as_dtype, as_int, as_str, attrs_of, define, err, int_tuple, shape_arg,
)
from phasec.op._lowering import legalizes_to_relax

__all__: list[str] = []


def _dtype_required(v):
    d = as_dtype(v)
    if d == "void":
        raise ValueError("a concrete dtype is required")
    return d


def _sinfo_result(call):
    if not call.sinfo_args:
        return ObjectStructInfo()
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


def _check_count(call, lo: int, hi: int) -> None:
    n = len(call.args)
    if not lo <= n <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise err(call, f"{expr_to_str(call.op)} expects {want} operands, got {n}")


def _check_tuple_operand(call, i: int, ctx, what: str) -> TupleStructInfo:
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
    _check_count(call, 2, 3)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, "R.call_tir's first operand must be a PrimFunc of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    _check_tuple_operand(call, 1, ctx, "tensors")
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
                            f"nor one of its {n_args} argument(s)")
    if not any(k >= 0 for k in indices):
        raise err(call, "R.call_tir_inplace needs at least one in-place output (an index "
                        "other than -1); use R.call_tir otherwise")
    if len([k for k in indices if k >= 0]) != len({k for k in indices if k >= 0}):
        raise err(call, f"R.call_tir_inplace: an argument is overwritten by two outputs "
                        f"(inplace_indices {list(indices)})")
    return out


def _infer_call_dps_packed(call, ctx):
    _check_count(call, 2, 2)
    if not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_dps_packed's first operand must be a packed function name, "
                        f"not {expr_to_str(call.args[0])}")
    _check_tuple_operand(call, 1, ctx, "tensors")
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


def _infer_call_tir_dyn(call, ctx):
    _check_count(call, 2, 2)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, "R.vm.call_tir_dyn's first operand must be a PrimFunc of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    _check_tuple_operand(call, 1, ctx, "arguments")
    return TupleStructInfo([])


def _check_closure(call, ctx) -> None:
    sinfo = arg_sinfo(call.args[0], ctx)
    if not isinstance(sinfo, (FuncStructInfo, ObjectStructInfo)):
        raise err(call, f"{expr_to_str(call.op)} expects a closure, but {expr_to_str(call.args[0])} "
                        f"has struct info {sinfo_to_str(sinfo)}")


def _infer_invoke_closure(call, ctx):
    _check_count(call, 2, 2)
    _check_closure(call, ctx)
    _check_tuple_operand(call, 1, ctx, "arguments")
    return _sinfo_result(call)


def _infer_make_closure(call, ctx):
    _check_count(call, 2, 2)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, f"R.make_closure's first operand must be a function of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    captured = _check_tuple_operand(call, 1, ctx, "captured values")
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
    _check_count(call, 2, 2)
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
define("vm.call_tir_dyn", ("func", "args"), _infer_call_tir_dyn, category="vm", pure=False,
       doc="VM: call a PrimFunc on (tensors..., shape): the build phase's form of a call_tir "
           "whose kernel takes symbolic sizes (impure: it writes its outputs).")
define("invoke_pure_closure", ("closure", "args"), _infer_invoke_closure, category="call",
       doc="Invoke a closure known to be pure; result = sinfo_args.")
define("make_closure", ("func", "args"), _infer_make_closure, category="vm",
       doc="Capture values into a closure over a module function.")
define("invoke_closure", ("closure", "args"), _infer_invoke_closure, category="vm", pure=False,
       doc="Invoke a closure (impure); result = sinfo_args.")
def _infer_call_builtin_with_ctx(call, ctx):
    _check_count(call, 2, 2)
    if not isinstance(call.args[0], ExternFunc):
        raise err(call, "R.call_builtin_with_ctx's first operand must be a builtin's name")
    return _sinfo_result(call)


define("call_builtin_with_ctx", ("func", "args"), _infer_call_builtin_with_ctx, category="vm",
       pure=False, doc="VM: call a builtin that takes the VM context first (TVM's VMShapeLower "
                       "emits it); result = sinfo_args.")
define("null_value", (), lambda call, ctx: ObjectStructInfo(), category="vm",
       doc="The null object.")


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------

def _tensor_of_shape(call, ctx, shape_index: int) -> TensorStructInfo:
    shape = shape_arg(call, shape_index, ctx)
    dtype = attrs_of(call)["dtype"]
    if shape.values is None:
        return TensorStructInfo(None, dtype, shape.ndim)
    return TensorStructInfo(shape.values, dtype)


def _check_storage(call, ctx) -> None:
    sinfo = arg_sinfo(call.args[0], ctx)
    if not isinstance(sinfo, ObjectStructInfo):
        raise err(call, f"{expr_to_str(call.op)} expects a storage object (R.Object) as its first "
                        f"operand, but {expr_to_str(call.args[0])} has struct info {sinfo_to_str(sinfo)}")
    off = arg_sinfo(call.args[1], ctx)
    if not (isinstance(off, PrimStructInfo) and off.dtype.startswith(("int", "uint"))):
        raise err(call, f"{expr_to_str(call.op)} expects an integer offset "
                        f"(R.prim_value), but {expr_to_str(call.args[1])} has struct info "
                        f"{sinfo_to_str(off)}")


def _infer_alloc_storage(call, ctx):
    size = shape_arg(call, 0, ctx)
    if size.ndim not in (-1, 1):
        raise err(call, f"{expr_to_str(call.op)}: the storage size must be a 1-D shape "
                        f"R.shape([nbytes]), got {sinfo_to_str(size)}")
    return ObjectStructInfo()


def _infer_storage_tensor(call, ctx):
    _check_count(call, 3, 3)
    _check_storage(call, ctx)
    return _tensor_of_shape(call, ctx, 2)


def _void(call, ctx):
    _check_count(call, 1, 1)
    return TupleStructInfo([])


# Attribute order is TVM's operand order: TVM 0.27 passes (and prints) these
# attributes as trailing positional operands, e.g.
# R.vm.alloc_storage(R.shape([64]), 0, R.dtype("uint8"), R.str("global")).
define("builtin.alloc_tensor", ("shape",), lambda call, ctx: _tensor_of_shape(call, ctx, 0),
       attrs={"dtype": (REQUIRED, _dtype_required), "runtime_device_index": (0, as_int),
              "storage_scope": ("global", as_str)},
       category="memory", doc="Allocate a tensor of the shape operand.")
define("memory.alloc_storage", ("size",), _infer_alloc_storage,
       attrs={"virtual_device_index": (0, as_int), "storage_scope": ("global", as_str),
              "dtype": ("uint8", _dtype_required)},
       category="memory", doc="Allocate storage of size bytes (R.shape([nbytes])).")
define("memory.alloc_tensor", ("storage", "offset", "shape"), _infer_storage_tensor,
       attrs={"dtype": (REQUIRED, _dtype_required), "runtime_device_index": (0, as_int)},
       category="memory", doc="A tensor view of storage at a byte offset.")
define("memory.kill_storage", ("storage",), _void, category="memory", pure=False,
       doc="Release storage.")
define("memory.kill_tensor", ("tensor",), _void, category="memory", pure=False,
       doc="Release a tensor.")
define("vm.alloc_storage", ("size",), _infer_alloc_storage,
       attrs={"runtime_device_index": (0, as_int), "dtype": ("uint8", _dtype_required),
              "storage_scope": ("global", as_str)},
       category="vm", doc="VM: allocate storage of size bytes.")
define("vm.alloc_tensor", ("storage", "offset", "shape"), _infer_storage_tensor,
       attrs={"dtype": (REQUIRED, _dtype_required), "runtime_device_index": (0, as_int)},
       category="vm", doc="VM: a tensor view of storage at a byte offset.")
define("vm.kill_object", ("obj",), _void, category="vm", pure=False,
       doc="VM: release an object (storage or tensor).")

