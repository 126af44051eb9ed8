"""VMBuiltinLower: memory builtins -> VM builtins (lowering -> build).

The transition from lowering (2) into build (3). What is left of memory
management becomes the VM's own instructions:

==============================================  =====================================
lowering                                        build
==============================================  =====================================
``R.builtin.alloc_tensor(shape, dtype)``        ``s = R.vm.alloc_storage(R.shape([nbytes]))``;
                                                ``R.vm.alloc_tensor(s, 0, shape, dtype)``
``R.memory.alloc_storage(size, ...)``           ``R.vm.alloc_storage(size, ...)``
``R.memory.alloc_tensor(s, off, shape, dtype)`` ``R.vm.alloc_tensor(s, off, shape, dtype)``
``R.memory.kill_tensor(t)`` / ``kill_storage``  ``R.vm.kill_object(t)``
``R.memory.view(x, shape, dtype, offset)``      ``runtime.TVMTensorCreateView`` (packed call,
                                                omitted operands filled from ``x``)
``R.memory.ensure_zero_offset(x)``              ``vm.builtin.ensure_zero_offset`` (packed call)
``R.to_vdevice(x, dst_vdevice=...)``            ``vm.builtin.to_device`` (packed call: a copy;
                                                only CPU target kinds build)
==============================================  =====================================

``nbytes`` of an unplanned allocation is ``prod(shape) * itemsize``, a
symbolic expression for a dynamic shape (the VM computes it from the shape
variables bound when the function was entered).

The pass requires RemovePurityChecking, CallTIRRewrite and
StaticPlanBlockMemory (a Sequential runs them first). What the build phase
forbids and this pass cannot lower is a :class:`VMBuiltinLowerError` naming
the function, the binding and the pass that handles it: ``call_tir`` /
``call_dps_packed`` (CallTIRRewrite), ``call_pure_packed`` /
``invoke_pure_closure`` and pure functions without ``relax.force_pure``
(RemovePurityChecking), high-level operators (LegalizeOps).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec.errors import PhasecError
from phasec.ir import (
    Binding, Call, DataTypeImm, Expr, ExprMutator, ExternFunc, Function, IRModule,
    ObjectStructInfo, Op, Phase, PrimValue, ShapeExpr, StringImm, TensorStructInfo, Var,
    VarBinding, tir,
)
from phasec.arith import simplify
from phasec.op import find_op, op_expr
from phasec.op.base import CPU_DEVICE_TYPE, CPU_TARGET_KINDS
from phasec.op.memory.view import is_void
from phasec.transform import module_pass, register_pass

__all__ = ["VMBuiltinLower", "VMBuiltinLowerError"]

FORCE_PURE = "relax.force_pure"

#: Operators the build phase forbids, and the pass that removes them.
_NEEDS_PASS = {
    "relax.call_tir": "CallTIRRewrite",
    "relax.call_dps_packed": "CallTIRRewrite",
    "relax.call_pure_packed": "RemovePurityChecking",
    "relax.call_inplace_packed": "RemovePurityChecking",
    "relax.invoke_pure_closure": "RemovePurityChecking",
}


class VMBuiltinLowerError(PhasecError):
    """Something the build phase forbids is left and this pass cannot lower it."""


@register_pass
@module_pass(opt_level=0, phases=Phase.LOWERING, transition_to=Phase.BUILD,
             required=("RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory"))
class VMBuiltinLower:
    """Lower memory builtins to VM builtins (vm.alloc_storage, vm.alloc_tensor, vm.kill_object)."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        # _Lowerer.visit_function_ leaves external (Codegen) functions alone.
        return mod.map_functions(lambda name, func: _Lowerer(name).visit_expr(func))


class _Lowerer(ExprMutator):
    def __init__(self, func_name: str) -> None:
        super().__init__()
        self.func_name = func_name
        self.binding: Binding | None = None

    def error(self, message: str, node: Any = None) -> VMBuiltinLowerError:
        where = f"function {self.func_name!r}"
        b = self.binding
        if b is not None:
            where += f", binding {b.var.name_hint!r}"
        span = getattr(b, "span", None) or getattr(node, "span", None)
        if span is not None:
            where += f" ({span})"
        return VMBuiltinLowerError(f"{where}: {message}")

    def visit_function_(self, func: Function) -> Expr:
        if func.attrs.get("Codegen") or func.attrs.get("Composite"):
            return func
        if func.is_pure and not func.attrs.get(FORCE_PURE):
            raise self.error("the function is pure without relax.force_pure, which the build "
                             "phase forbids: run RemovePurityChecking first", func)
        return super().visit_function_(func)

    def visit_binding(self, binding: Binding) -> Any:
        saved = self.binding
        self.binding = binding
        try:
            value = binding.value
            if type(value) is Call and type(value.op) is Op \
                    and value.op.name == "relax.builtin.alloc_tensor":
                return self._alloc_tensor(binding, value)
            return super().visit_binding(binding)
        finally:
            self.binding = saved

    def _alloc_tensor(self, binding: Binding, call: Call) -> list[Binding]:
        shape = call.args[0] if call.args else None
        if type(shape) is not ShapeExpr:
            raise self.error("R.builtin.alloc_tensor needs a literal shape R.shape([...])", call)
        dtype = str(call.attrs.get("dtype", "void"))
        try:
            itemsize = np.dtype(dtype).itemsize
        except TypeError:
            raise self.error(f"R.builtin.alloc_tensor has an unknown dtype {dtype!r}",
                             call) from None
        nbytes: tir.PrimExpr = tir.IntImm(itemsize, "int64")
        if all(type(d) is tir.IntImm for d in shape.values):
            nbytes = tir.IntImm(itemsize * math.prod(int(d.value) for d in shape.values), "int64")
        else:
            for d in shape.values:
                nbytes = tir.BinaryOp("*", nbytes, d)
            nbytes = simplify(nbytes)
        device = int(call.attrs.get("runtime_device_index", 0))
        storage = Var(f"{binding.var.name_hint}_storage", ObjectStructInfo())
        alloc_storage = Call(op_expr("relax.vm.alloc_storage"), [ShapeExpr([nbytes])],
                             {"runtime_device_index": device, "dtype": "uint8",
                              "storage_scope": str(call.attrs.get("storage_scope", "global"))},
                             struct_info=ObjectStructInfo(), span=call.span)
        tensor = Call(op_expr("relax.vm.alloc_tensor"),
                      [storage, PrimValue(tir.IntImm(0, "int64")), shape],
                      {"dtype": dtype, "runtime_device_index": device},
                      struct_info=call.struct_info, span=call.span)
        return [VarBinding(storage, alloc_storage, span=binding.span), binding.rebind(tensor)]

    def _view(self, call: Call) -> Expr:
        """R.memory.view -> runtime.TVMTensorCreateView(x, shape, dtype, offset) with
        every omitted operand filled from the input (TVM's LowerBuiltinView)."""
        data, shape, dtype, offset = call.args
        if is_void(shape) and is_void(dtype) and is_void(offset):
            return data
        sinfo = data.struct_info
        if is_void(shape):
            if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
                raise self.error("R.memory.view without a shape needs an input of known shape",
                                 call)
            shape = ShapeExpr(sinfo.shape)
        if is_void(dtype):
            if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == "void":
                raise self.error("R.memory.view without a dtype needs an input of known dtype",
                                 call)
            dtype = DataTypeImm(sinfo.dtype)
        if is_void(offset):
            offset = PrimValue(tir.IntImm(0, "int64"))
        return Call(ExternFunc("runtime.TVMTensorCreateView"), [data, shape, dtype, offset],
                    None, (call.struct_info,), struct_info=call.struct_info, span=call.span)

    def _to_device(self, call: Call) -> Expr:
        """``R.to_vdevice`` -> ``vm.builtin.to_device(x, device_type, device_id,
        scope)``, TVM's layout (its LowerRuntimeBuiltin); only CPU targets build."""
        dst = str(call.attrs["dst_vdevice"])
        kind, index, scope = dst.split(":", 2)
        if kind not in CPU_TARGET_KINDS:
            raise self.error(f"R.to_vdevice to {dst!r}: phasec builds for the host CPU only "
                             f"(target kinds {', '.join(CPU_TARGET_KINDS)})", call)
        operands = [call.args[0], PrimValue(tir.IntImm(CPU_DEVICE_TYPE, "int64")),
                    PrimValue(tir.IntImm(max(int(index), 0), "int64")), StringImm(scope)]
        return Call(ExternFunc("vm.builtin.to_device"), operands, None, (call.struct_info,),
                    struct_info=call.struct_info, span=call.span)

    def visit_call_(self, call: Call) -> Expr:
        call = super().visit_call_(call)
        op = call.op
        if type(op) is not Op:
            return call
        name = op.name
        if name == "relax.memory.alloc_storage":
            size = call.args[0]
            device = int(call.attrs.get("virtual_device_index", 0))
            dtype = str(call.attrs.get("dtype", "uint8"))
            return Call(op_expr("relax.vm.alloc_storage"), [size],
                        {"runtime_device_index": device, "dtype": dtype,
                         "storage_scope": str(call.attrs.get("storage_scope", "global"))},
                        struct_info=call.struct_info, span=call.span)
        if name == "relax.memory.alloc_tensor":
            return Call(op_expr("relax.vm.alloc_tensor"), call.args,
                        {"dtype": call.attrs.get("dtype"),
                         "runtime_device_index": int(call.attrs.get("runtime_device_index", 0))},
                        struct_info=call.struct_info,
                        span=call.span)
        if name in ("relax.memory.kill_tensor", "relax.memory.kill_storage"):
            return Call(op_expr("relax.vm.kill_object"), call.args, None,
                        struct_info=call.struct_info, span=call.span)
        if name == "relax.memory.view":
            return self._view(call)
        if name == "relax.memory.ensure_zero_offset":
            return Call(ExternFunc("vm.builtin.ensure_zero_offset"), call.args, None,
                        (call.struct_info,), struct_info=call.struct_info, span=call.span)
        if name == "relax.to_vdevice":
            return self._to_device(call)
        if name in _NEEDS_PASS:
            raise self.error(f"R.{name.removeprefix('relax.')} is not allowed in the build "
                             f"phase: run {_NEEDS_PASS[name]} before VMBuiltinLower", call)
        opdef = find_op(name)
        if opdef is not None and opdef.category == "compute":
            raise self.error(f"high-level operator {opdef.script_name} left in the lowering "
                             "phase: run LegalizeOps", call)
        if opdef is not None and opdef.category == "memory":
            raise self.error(f"memory builtin {opdef.script_name} has no VM lowering", call)
        return call
