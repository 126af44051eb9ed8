"""The markers of TVM 0.27's ``relax.grad`` namespace that need no gradient
machinery: ``R.grad.no_grad(x)``, ``R.grad.start_checkpoint(x)`` and
``R.grad.end_checkpoint(x)``.

Each is the identity (TVM infers the operand's struct info, whatever it is)
and tells TVM's Gradient pass what to differentiate or recompute; as in TVM,
a checkpoint marker's operand must be a variable (it names the tensor the
stage starts or ends at). phasec has no Gradient pass, so they only have to
survive the pipeline until LegalizeOps, which replaces each by its operand,
as TVM's legalization does. The gradient operators themselves
(``R.grad.*_backward``) are not registered: they are out of scope (see
PHASES.md's list of missing TVM operators).
"""

from __future__ import annotations

import numpy as np

from phasec.ir.expr import Call, Expr, Var
from phasec.ir.text import expr_to_str
from phasec.op.infer import arg_sinfo
from phasec.op._common import OpPattern, define, err
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.op._lowering import legalizes_to_relax

__all__: list[str] = []

_MARKERS = {
    "no_grad": "Identity; the Gradient pass treats the result as a constant.",
    "start_checkpoint": "Identity; starts a stage the Gradient pass recomputes instead of storing.",
    "end_checkpoint": "Identity; ends a checkpointed stage.",
}


def _infer_marker(call, ctx):
    name = call.op.name.removeprefix("relax.")
    if len(call.args) != 1:
        raise err(call, f"R.{name} expects 1 operand, got {len(call.args)}")
    if name.endswith("_checkpoint") and not isinstance(call.args[0], Var):
        raise err(call, f"R.{name} marks a variable; its operand "
                        f"{expr_to_str(call.args[0])} is not one (bind it first)")
    return arg_sinfo(call.args[0], ctx)


def _operand(call: Call) -> Expr:
    return call.args[0]


for _name, _doc in _MARKERS.items():
    define(f"grad.{_name}", ("input",), _infer_marker, reference=np.asarray,
           pattern=OpPattern.OPAQUE, doc=_doc)
    legalizes_to_relax(f"grad.{_name}", lowers_to="its operand")(_operand)
    declares_draw(f"grad.{_name}", dtypes=ANY_DTYPE,
                  build=lambda ctx: ((ctx.x,), {}) if isinstance(ctx.x, Var) else None)
