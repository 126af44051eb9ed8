"""What the operators computed by packed functions share: sort, argsort, topk
(:mod:`.sorting`), unique, nonzero (:mod:`.set`), median (:mod:`.statistical`)
and dynamic_strided_slice (:mod:`.index`).

Like TVM 0.27 on the CPU (which calls packed sorts and ``relax.run.unique``
/ ``relax.run.nonzero``), these lower to packed functions registered in
:mod:`phasec.runtime.packed` (numpy's stable sorts), through
``R.call_pure_packed(name, data, <attributes as prim values and strings>)``;
the references call the same functions, so the interpreter, FoldConstant
and the VM agree by construction.
"""

from __future__ import annotations

from phasec.ir import tir
from phasec.ir.expr import ExternFunc, PrimValue, StringImm
from phasec.op._common import attrs_of
from phasec.runtime.packed import get_packed_func
from phasec.op.calls import call_op

__all__ = ["packed", "lower_to_packed", "bool_value"]


def packed(name: str):
    """The packed function ``name`` (:mod:`phasec.runtime.packed`)."""
    return get_packed_func(name)


def lower_to_packed(name: str, attrs_to_args):
    """LegalizeOps: ``R.call_pure_packed(name, data, *attribute values)``."""
    def lower(call):

        extra = [PrimValue(v) if isinstance(v, (bool, int)) else StringImm(v)
                 for v in attrs_to_args(attrs_of(call))]
        return call_op("call_pure_packed", ExternFunc(name), call.args[0], *extra,
                       sinfo_args=[call.struct_info], span=call.span)
    return lower


def bool_value(v: bool) -> PrimValue:
    """``v`` as a bool R.prim_value."""
    return PrimValue(tir.IntImm(int(v), "bool"))
