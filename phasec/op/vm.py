"""The VM builtins (TVM 0.27's ``relax.op.vm``), category "vm": what the build
phase's lowering passes write for the VM to run.

* ``R.vm.alloc_storage(size: ShapeExpr, runtime_device_index=0, dtype="uint8")``
  -> ``R.Object`` (pure)
* ``R.vm.alloc_tensor(storage, offset: PrimValue, shape: ShapeExpr, dtype=...)``
  -> ``R.Tensor(shape, dtype)`` (pure)
* ``R.vm.kill_object(obj)`` -> ``R.Tuple()`` (impure)
* ``R.vm.call_tir_dyn(func: GlobalVar, args: Tuple)`` -> ``R.Tuple()`` (impure): a
  call_tir whose kernel takes the symbolic sizes as a last shape argument.

The allocations infer as the memory builtins they stand for
(:mod:`.memory.memory`).
"""

from __future__ import annotations

from phasec.ir.expr import GlobalVar
from phasec.ir.struct_info import TupleStructInfo
from phasec.op._common import REQUIRED, as_int, as_str, define, err
from phasec.op.base import check_operand_count, check_tuple_operand
from phasec.op.datatype import dtype_required
from phasec.ir.text import expr_to_str
from phasec.op.memory.memory import infer_alloc_storage, infer_release, infer_storage_tensor

__all__: list[str] = []


def _infer_call_tir_dyn(call, ctx):
    check_operand_count(call, 2, 2)
    if not isinstance(call.args[0], GlobalVar):
        raise err(call, "R.vm.call_tir_dyn's first operand must be a PrimFunc of the module "
                        f"(cls.name), not {expr_to_str(call.args[0])}")
    check_tuple_operand(call, 1, ctx, "arguments")
    return TupleStructInfo([])


def _infer_alloc_storage(call, ctx):
    """As R.memory.alloc_storage."""
    return infer_alloc_storage(call, ctx)


def _infer_storage_tensor(call, ctx):
    """As R.memory.alloc_tensor."""
    return infer_storage_tensor(call, ctx)


def _void(call, ctx):
    """As R.memory.kill_storage."""
    return infer_release(call, ctx)


define("vm.call_tir_dyn", ("func", "args"), _infer_call_tir_dyn, category="vm", pure=False,
       doc="VM: call a PrimFunc on (tensors..., shape): the build phase's form of a call_tir "
           "whose kernel takes symbolic sizes (impure: it writes its outputs).")
# Attribute order is TVM's operand order: TVM 0.27 passes (and prints) these
# attributes as trailing positional operands, e.g.
# R.vm.alloc_storage(R.shape([64]), 0, R.dtype("uint8"), R.str("global")).
define("vm.alloc_storage", ("size",), _infer_alloc_storage,
       attrs={"runtime_device_index": (0, as_int), "dtype": ("uint8", dtype_required),
              "storage_scope": ("global", as_str)},
       category="vm", doc="VM: allocate storage of size bytes.")
define("vm.alloc_tensor", ("storage", "offset", "shape"), _infer_storage_tensor,
       attrs={"dtype": (REQUIRED, dtype_required), "runtime_device_index": (0, as_int)},
       category="vm", doc="VM: a tensor view of storage at a byte offset.")
define("vm.kill_object", ("obj",), _void, category="vm", pure=False,
       doc="VM: release an object (storage or tensor).")
