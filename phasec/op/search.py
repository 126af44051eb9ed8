"""Search (TVM 0.27's ``relax.op.search``): ``where(condition, x1, x2)``, x1
where the condition holds else x2, the three broadcasting together.
"""

from __future__ import annotations

import numpy as np

from phasec import te
from phasec.ir.expr import Call
from phasec.ir.tir import Select
from phasec.op._common import OpPattern, broadcast, define, err, tensor_arg
from phasec.op._elementwise import truthy
from phasec.op._lowering import Inputs, _bcast, _name, _out, _tensor, legalizes
from phasec.op.draw import BOOL, FLOAT, Hooks, broadcast_ok, declares_draw, hull
from phasec.op.infer import expr_to_str
from phasec.te import Tensor

__all__: list[str] = []


def _infer_where(call, ctx):
    cond = tensor_arg(call, 0, ctx, "the condition")
    x = tensor_arg(call, 1, ctx)
    y = tensor_arg(call, 2, ctx)
    if cond.dtype not in ("void", "bool"):
        raise err(call, f"where needs a bool condition, but {expr_to_str(call.args[0])} "
                        f"has dtype {cond.dtype}")
    if "void" not in (x.dtype, y.dtype) and x.dtype != y.dtype:
        raise err(call, f"where needs both branches of one dtype, but "
                        f"{expr_to_str(call.args[1])} has dtype {x.dtype} and "
                        f"{expr_to_str(call.args[2])} has dtype {y.dtype}")
    dtype = x.dtype if x.dtype == y.dtype else "void"
    names = tuple(expr_to_str(a) for a in call.args[:3])
    xy = broadcast(call, x, y, dtype, names[1:])
    return broadcast(call, cond, xy, dtype, (names[0], f"broadcast({names[1]}, {names[2]})"))


def _where_ref(condition, x1, x2):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    return np.where(np.asarray(condition), x1, x2).astype(np.result_type(x1, x2))


define("where", ("condition", "x1", "x2"), _infer_where, reference=_where_ref,
       pattern=OpPattern.BROADCAST, doc="Select x1 where condition else x2 (broadcasting).")


@legalizes("where")
def _where(call: Call, inputs: Inputs) -> Tensor:
    c, a, b = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    shape = out.shape
    return te.compute(shape, lambda *i: Select(truthy(_bcast(c, shape, i)), _bcast(a, shape, i),
                                               _bcast(b, shape, i)), name=_name(call))


# How the fuzzing generator draws where (phasec.op.draw.Hooks)

def _where_build(g, c):
    """``where(cond, x1, x2)``: the first operand is the condition; the
    branches are float values in scope that broadcast with it, or constants."""
    from phasec.op import call_op

    xs = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape))
    opts: list = xs + (["const"] if g.cfg.constants else [])
    if not xs:
        opts = ["const"]
    x1 = g.pick(opts)
    if x1 == "const":
        x1 = g.constant(g.const_shape(c), (-2.0, 2.0), "float32")
    ys = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape)
                   and broadcast_ok(x1.shape, v.shape))
    x2 = g.pick(ys + ["const"])
    if x2 == "const":
        x2 = g.constant((), (-2.0, 2.0), "float32")
    iv = hull((x1.lo, x1.hi), (x2.lo, x2.hi))
    return g.emit(call_op("relax.where", c.expr, x1.expr, x2.expr), FLOAT, iv)


declares_draw("where", Hooks(_where_build, (BOOL,), accepts=lambda g, x: x.kind == BOOL,
                             order=37))
