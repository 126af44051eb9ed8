"""The memory builtins (TVM 0.27's ``relax.op.memory``; views are in :mod:`.view`).

Memory (category "memory"): allocation is pure, as in TVM (it has no
visible effect); killing is impure.

* ``R.memory.alloc_storage(size: ShapeExpr, virtual_device_index=0,
  storage_scope="global", dtype="uint8")`` -> ``R.Object``; ``size`` is the
  storage size in bytes as a 1-D shape ``R.shape([nbytes])``.
* ``R.memory.alloc_tensor(storage, offset: PrimValue, shape: ShapeExpr, dtype=...)``
  -> ``R.Tensor(shape, dtype)``; ``offset`` is in bytes.
* ``R.memory.kill_storage(storage)``, ``R.memory.kill_tensor(tensor)`` -> ``R.Tuple()``
"""

from __future__ import annotations

from phasec.ir.struct_info import (
    ObjectStructInfo, PrimStructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.op._common import REQUIRED, as_int, as_str, attrs_of, define, err, shape_arg
from phasec.op.base import check_operand_count
from phasec.op.datatype import dtype_required
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo

__all__ = ["tensor_of_shape", "infer_alloc_storage", "infer_storage_tensor", "infer_release"]


def tensor_of_shape(call, ctx, shape_index: int) -> TensorStructInfo:
    """A tensor of the shape operand ``shape_index`` and the ``dtype`` attribute."""
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


def infer_alloc_storage(call, ctx):
    """An allocation of storage: R.Object, from a 1-D size in bytes."""
    size = shape_arg(call, 0, ctx)
    if size.ndim not in (-1, 1):
        raise err(call, f"{expr_to_str(call.op)}: the storage size must be a 1-D shape "
                        f"R.shape([nbytes]), got {sinfo_to_str(size)}")
    return ObjectStructInfo()


def infer_storage_tensor(call, ctx):
    """A tensor of the shape operand in the storage operand, at an integer offset."""
    check_operand_count(call, 3, 3)
    _check_storage(call, ctx)
    return tensor_of_shape(call, ctx, 2)


def infer_release(call, ctx):
    """The release of one object: R.Tuple()."""
    check_operand_count(call, 1, 1)
    return TupleStructInfo([])


# Attribute order is TVM's operand order: TVM 0.27 passes (and prints) these
# attributes as trailing positional operands, e.g.
# R.vm.alloc_storage(R.shape([64]), 0, R.dtype("uint8"), R.str("global")).
define("memory.alloc_storage", ("size",), infer_alloc_storage,
       attrs={"virtual_device_index": (0, as_int), "storage_scope": ("global", as_str),
              "dtype": ("uint8", dtype_required)},
       category="memory", doc="Allocate storage of size bytes (R.shape([nbytes])).")
define("memory.alloc_tensor", ("storage", "offset", "shape"), infer_storage_tensor,
       attrs={"dtype": (REQUIRED, dtype_required), "runtime_device_index": (0, as_int)},
       category="memory", doc="A tensor view of storage at a byte offset.")
define("memory.kill_storage", ("storage",), infer_release, category="memory", pure=False,
       doc="Release storage.")
define("memory.kill_tensor", ("tensor",), infer_release, category="memory", pure=False,
       doc="Release a tensor.")
