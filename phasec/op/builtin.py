"""The ``relax.builtin`` operators (TVM 0.27's ``relax.op.builtin``):

* ``R.builtin.alloc_tensor(shape: ShapeExpr, dtype=..., runtime_device_index=0,
  storage_scope="global")`` -> ``R.Tensor(shape, dtype)`` (category "memory",
  pure): the allocation of a tensor, before StaticPlanBlockMemory turns it into
  storage and views of it (:mod:`.memory`).
* ``R.builtin.stop_lift_params(x)``: the identity on a tensor, marking where
  LiftTransformParams stops lifting parameter transformations. Inference is
  TVM's InferTypeUnaryArith (a tensor in, the same struct info out); it
  computes a copy, and is opaque to fusion as TVM registers no pattern for it.
"""

from __future__ import annotations

import numpy as np

from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.op._common import REQUIRED, OpPattern, as_int, as_str, define, err, tensor_arg
from phasec.op._lowering import _out, _tensor, legalizes
from phasec.op.datatype import dtype_required
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.op.memory.memory import tensor_of_shape

__all__: list[str] = []


# Attribute order is TVM's operand order: TVM 0.27 passes (and prints) these
# attributes as trailing positional operands, e.g.
# R.vm.alloc_storage(R.shape([64]), 0, R.dtype("uint8"), R.str("global")).
define("builtin.alloc_tensor", ("shape",), lambda call, ctx: tensor_of_shape(call, ctx, 0),
       attrs={"dtype": (REQUIRED, dtype_required), "runtime_device_index": (0, as_int),
              "storage_scope": ("global", as_str)},
       category="memory", doc="Allocate a tensor of the shape operand.")


# ---------------------------------------------------------------------------
# stop_lift_params
# ---------------------------------------------------------------------------

def _infer(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.builtin.stop_lift_params expects 1 operand, got {len(call.args)}")
    x = tensor_arg(call, 0, ctx, "x")
    if x.shape is not None:
        return TensorStructInfo(x.shape, x.dtype)
    return TensorStructInfo(None, x.dtype, x.ndim)


define("builtin.stop_lift_params", ("x",), _infer,
       reference=lambda x: np.array(x, copy=True), pattern=OpPattern.OPAQUE,
       doc="Identity; where LiftTransformParams stops lifting.")


@legalizes("builtin.stop_lift_params")
def _stop_lift_params(call, inputs):
    x = _tensor(inputs, 0, call)
    return te.compute(_out(call).shape, lambda *i: x[i], name="T_stop_lift_params")


declares_draw("builtin.stop_lift_params", dtypes=ANY_DTYPE, build=lambda ctx: ((ctx.x,), {}))
