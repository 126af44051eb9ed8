"""``ewise_fma(x1, x2, x3)`` (TVM 0.27's ``relax.op.ternary``): ``x1 * x2 + x3`` on
three tensors of one shape and dtype (no broadcasting, TVM's rule); multiply
then add, each rounded (TVM's legalization), not a fused multiply-add."""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.tir import BinaryOp
from phasec.op._common import OpPattern, define, err, tensor_arg
from phasec.op._elementwise import kind_check, on_device
from phasec.op._lowering import _name, _out, _tensor, legalizes
from phasec.ir.text import sinfo_to_str

__all__: list[str] = []


def _infer_fma(call, ctx):
    xs = [tensor_arg(call, k, ctx) for k in range(3)]
    for k, x in enumerate(xs):
        kind_check(call, x, "numeric", k)
    dtypes = {x.dtype for x in xs}
    if len(dtypes) > 1:
        raise err(call, f"ewise_fma needs three operands of one dtype, got "
                        f"{', '.join(x.dtype for x in xs)}")
    ndims = {x.ndim for x in xs if x.ndim != -1}
    if len(ndims) > 1:
        raise err(call, f"ewise_fma needs three operands of one ndim (no broadcasting), got "
                        f"{', '.join(sinfo_to_str(x) for x in xs)}")
    known = [x for x in xs if x.shape is not None]
    for x in known[1:]:
        if any(arith.prove_not_equal(p, q) for p, q in zip(known[0].shape, x.shape)):
            raise err(call, f"ewise_fma needs three operands of one shape (no broadcasting), "
                            f"got {', '.join(sinfo_to_str(x) for x in xs)}")
    return on_device(known[0] if known else xs[0])


def _fma_ref(x1, x2, x3):
    a, b, c = np.asarray(x1), np.asarray(x2), np.asarray(x3)
    with np.errstate(all="ignore"):
        return (a * b + c).astype(a.dtype)


define("ewise_fma", ("x1", "x2", "x3"), _infer_fma, reference=_fma_ref,
       pattern=OpPattern.ELEMWISE, doc="x1 * x2 + x3 on three tensors of one shape and dtype.")


@legalizes("ewise_fma")
def _ewise_fma(call, inputs):
    a, b, c = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    return te.compute(out.shape, lambda *i: BinaryOp("+", BinaryOp("*", a[i], b[i]), c[i]),
                      name=_name(call))
