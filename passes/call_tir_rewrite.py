"""CallTIRRewrite: explicit output allocation plus a direct kernel call.

``call_tir`` and ``call_dps_packed`` allocate their outputs implicitly. In
the lowering phase (2) this pass makes the allocation explicit::

    y = R.call_tir(cls.f, (a, b), out_sinfo=R.Tensor((n, 4), "float32"),
                   tir_vars=R.shape([m]))
    ==>
    alloc = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
    _ = cls.f(a, b, alloc, R.prim_value(m))       # direct PrimFunc call (DPS)
    y = alloc

Several outputs (a tuple ``out_sinfo``) get one allocation each and
``y = (alloc, alloc1)``. Scalar operands in the argument tuple
(``R.prim_value(m)``, how phasec's LegalizeOps and TVM 0.27 pass a kernel's
scalar parameters) stay in place, before the outputs. A ``tir_vars`` operand
(written by other producers; phasec's LegalizeOps no longer emits one) is
passed after the outputs as ``R.prim_value`` operands, one per dimension:
the form both the VM code generator and the reference interpreter call a
PrimFunc with. ``R.call_dps_packed(f, (a,), out_sinfo)`` becomes
``R.call_packed(f, a, alloc)`` (a packed call on the allocated outputs) and
``y = alloc``. ``R.call_tir_inplace(cls.f, (a, b), inplace_indices=[0, -1],
out_sinfo=[...])`` allocates only the outputs marked -1; an in-place output is
the argument the kernel overwrites: ``_ = cls.f(a, b, alloc)`` and
``y = (a, alloc)``.

The direct calls are impure, so the pass requires ``RemovePurityChecking``
(which marks functions ``relax.force_pure``). Allocations are
``R.builtin.alloc_tensor``; StaticPlanBlockMemory plans the static ones and
VMBuiltinLower turns the rest into VM builtins.
"""

from __future__ import annotations

from typing import Any

from phasec.errors import PhasecError
from phasec.ir import (
    Binding, Call, ExprMutator, ExternFunc, GlobalVar, IRModule, ObjectStructInfo, Op, Phase,
    PrimValue, ShapeExpr, ShapeStructInfo, StructInfo, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, VarBinding,
)
from phasec.ir.text import sinfo_to_str
from phasec.op import op_expr
from phasec.transform import module_pass, register_pass

__all__ = ["CallTIRRewrite", "CallTIRRewriteError"]

_UNIT = TupleStructInfo([])


class CallTIRRewriteError(PhasecError):
    """A call_tir / call_dps_packed cannot be rewritten (the message says where)."""


@register_pass
@module_pass(opt_level=0, phases=Phase.LOWERING, required=("RemovePurityChecking",))
class CallTIRRewrite:
    """Rewrite call_tir / call_dps_packed into an explicit output allocation and a direct call."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        return mod.map_functions(lambda name, func: _Rewriter(name).visit_expr(func))


class _Rewriter(ExprMutator):
    def __init__(self, func_name: str) -> None:
        super().__init__()
        self.func_name = func_name

    def visit_binding(self, binding: Binding) -> Any:
        value = binding.value
        if type(value) is Call and type(value.op) is Op and value.op.name in (
                "relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace"):
            pre, result = self._rewrite(binding, value)
            return [*pre, binding.rebind(result)]
        return super().visit_binding(binding)

    def error(self, binding: Binding, message: str) -> CallTIRRewriteError:
        span = binding.span or getattr(binding.value, "span", None)
        loc = f" ({span})" if span is not None else ""
        return CallTIRRewriteError(f"function {self.func_name!r}, binding "
                                   f"{binding.var.name_hint!r}{loc}: {message}")

    def _rewrite(self, binding: Binding, call: Call) -> tuple[list[Binding], Any]:
        is_tir = call.op.name in ("relax.call_tir", "relax.call_tir_inplace")
        what = "R.call_tir" if is_tir else "R.call_dps_packed"
        # call_tir_inplace: output i is argument inplace_indices[i] (-1: allocated)
        inplace = tuple(call.attrs.get("inplace_indices", ())) if call.attrs else ()
        if len(call.args) < 2 or len(call.sinfo_args) != 1:
            raise self.error(binding, f"{what} needs a callee, a tuple of arguments and one "
                                      "output struct info")
        callee = call.args[0]
        if is_tir and type(callee) is not GlobalVar:
            raise self.error(binding, "R.call_tir's callee must be a PrimFunc of the module")
        if not is_tir and type(callee) is not ExternFunc:
            raise self.error(binding, "R.call_dps_packed's callee must be a packed function")
        pre: list[Binding] = []
        inputs = self._inputs(call.args[1], pre)
        out = call.sinfo_args[0]
        fields = list(out.fields) if isinstance(out, TupleStructInfo) else [out]
        allocs: list[Var] = []
        results: list[Any] = []
        for i, sinfo in enumerate(fields):
            if i < len(inplace) and inplace[i] >= 0:
                if inplace[i] >= len(inputs):
                    raise self.error(binding, f"R.call_tir_inplace: inplace index {inplace[i]} "
                                              f"is not one of its {len(inputs)} arguments")
                results.append(inputs[inplace[i]])
                continue
            if not (isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
                    and sinfo.dtype != "void"):
                raise self.error(binding, f"{what} output {sinfo_to_str(sinfo)} needs a known "
                                          "shape and dtype to be allocated")
            alloc = Var("alloc", sinfo)
            shape = ShapeExpr(sinfo.shape)
            pre.append(VarBinding(alloc, Call(
                op_expr("relax.builtin.alloc_tensor"), [shape],
                {"dtype": sinfo.dtype, "runtime_device_index": 0, "storage_scope": "global"},
                struct_info=sinfo)))
            allocs.append(alloc)
            results.append(alloc)
        scalars: list[PrimValue] = []
        if is_tir and len(call.args) > 2:
            scalars = [PrimValue(v) for v in self._tir_var_values(binding, call.args[2])]
        if is_tir:
            kernel_call = Call(callee, [*inputs, *allocs, *scalars], struct_info=_UNIT)
            pre.append(VarBinding(Var("_", _UNIT), kernel_call))
        else:
            obj = ObjectStructInfo()
            pre.append(VarBinding(Var("_", obj), Call(callee, [*inputs, *allocs],
                                                      struct_info=obj)))
        if isinstance(out, TupleStructInfo):
            return pre, Tuple(results)
        return pre, results[0]

    @staticmethod
    def _inputs(args: Any, pre: list[Binding]) -> list[Any]:
        if type(args) is Tuple:
            return list(args.fields)
        sinfo = args.struct_info
        if isinstance(sinfo, TupleStructInfo):
            # a tuple-typed variable: pass its fields
            items = []
            for k, f in enumerate(sinfo.fields):
                item = Var(f"{getattr(args, 'name_hint', 'arg')}_{k}", f)
                pre.append(VarBinding(item, TupleGetItem(args, k, struct_info=f)))
                items.append(item)
            return items
        return [args]

    def _tir_var_values(self, binding: Binding, tir_vars: Any) -> tuple:
        if type(tir_vars) is ShapeExpr:
            return tir_vars.values
        sinfo: StructInfo | None = tir_vars.struct_info
        if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
            return sinfo.values
        raise self.error(binding, "R.call_tir's tir_vars must be a shape with known values "
                                  "(R.shape([...]))")
