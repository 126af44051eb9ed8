"""Evaluating an operator call on known operands: constant folding's one engine.

Everything phasec computes ahead of run time goes through
:func:`evaluate_call`: the FoldConstant pass (``passes/fold_constant.py``)
and the ONNX importer's evaluation at import (shape computations and
other values known from constants, :mod:`phasec.frontend.onnx`). The
numbers come from the operator's numpy ``reference``, the definition of its
semantics, so folding cannot change results. One budget and one error
policy hold for both:

* **The budget** is :data:`MAX_FOLD_ELEMENTS` elements of result (summed
  over the fields of a tuple result). A larger result, or one whose shape
  is not static, is not evaluated: the call stays a run-time operator. The
  budget bounds both the memory an evaluation takes and what a folded
  constant adds to the module. (FoldConstant's ``max_elements`` option,
  whose default is this budget, lowers or raises it for one pass.)
* **Errors**: an evaluation that fails (an index out of range in ``take``, a
  reference that rejects its operands, a division by zero in integers...)
  is no error ahead of run time: the call stays a run-time operator and
  fails there, where it belongs.
* **Operands**: a splat operand (one element broadcast, as FoldConstant keeps
  a big constant) counts at its full size against the budget: evaluating
  it visits every element, whatever memory it takes.
* **Agreement**: the value takes the dtype struct-info inference gave the
  call; a value whose shape is not the inferred one is not used.

Only pure compute operators with a reference are evaluated; never a call of
a function, a packed function or a builtin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec.ir import tir
from phasec.ir.expr import (
    Call, Constant, DataflowVar, DataTypeImm, Expr, Op, PrimValue, ShapeExpr, StringImm, Tuple,
    Var,
)
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op import map_symbolic_attrs, symbolic_attr_values
from phasec.op.registry import REQUIRED, OpDef, find_op

__all__ = ["MAX_FOLD_ELEMENTS", "UNKNOWN", "evaluate_call", "foldable", "known_value",
           "static_elements", "static_shape", "within_budget"]

#: The budget of evaluation ahead of run time, in elements of result (a
#: tuple's fields summed): 1 Mi elements, 4 MB of float32. Results of this
#: size are what shape computations, folded weights and small lookup tables
#: need; past it, a result is better computed where it is used (a broadcast
#: of a small constant would otherwise become a big one in the module).
MAX_FOLD_ELEMENTS = 1 << 20


def within_budget(elements: int) -> bool:
    """Whether a value of ``elements`` elements may be computed ahead of run
    time (for code that computes one itself, as the ONNX importer's ``Range``)."""
    return elements <= MAX_FOLD_ELEMENTS


class _Unknown:
    """The value of an operand not known before run time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


#: what :func:`known_value` returns for an operand known only at run time
UNKNOWN: Any = _Unknown()

#: a variable -> the expression it is known to be bound to (a Constant, a
#: Tuple of them), or None
Lookup = Callable[[Var], "Expr | None"]


def foldable(opdef: OpDef) -> bool:
    """Whether calls of ``opdef`` may be evaluated ahead of run time: a pure
    compute operator with a numpy reference."""
    return opdef.pure and opdef.category == "compute" and opdef.reference is not None


def static_shape(sinfo: TensorStructInfo) -> tuple[int, ...] | None:
    """The dimensions of ``sinfo`` as ints, or None unless all are constant."""
    if sinfo.shape is None:
        return None
    dims = []
    for d in sinfo.shape:
        c = d.value if type(d) is tir.IntImm else arith.const_int(d)
        if c is None:
            return None
        dims.append(int(c))
    return tuple(dims)


def static_elements(sinfo: Any) -> int | None:
    """The number of elements of a tensor, or of a (nested) tuple of tensors,
    with static shapes; None for anything else."""
    total = 0
    stack = [sinfo]
    while stack:
        s = stack.pop()
        if type(s) is TupleStructInfo:
            stack.extend(s.fields)
            continue
        if type(s) is not TensorStructInfo:
            return None
        shape = static_shape(s)
        if shape is None:
            return None
        total += math.prod(shape)
    return total


def known_value(expr: Expr, lookup: Lookup | None = None) -> Any:
    """The value of an operand known ahead of run time, as the operator's
    reference takes it, or :data:`UNKNOWN`.

    Known: a constant (its array), a shape of constant dimensions (a tuple of
    ints), a constant prim value (a Python scalar), a string or dtype, a tuple
    of known values (a tuple), and a variable ``lookup`` finds bound to one
    of those.
    """
    t = type(expr)
    if t is Constant:
        return expr.data
    if t is Var or t is DataflowVar:
        bound = lookup(expr) if lookup is not None else None
        return UNKNOWN if bound is None else known_value(bound, lookup)
    if t is Tuple:
        values = tuple(known_value(f, lookup) for f in expr.fields)
        return UNKNOWN if any(v is UNKNOWN for v in values) else values
    if t is ShapeExpr:
        dims = []
        for v in expr.values:
            c = v.value if type(v) is tir.IntImm else arith.const_int(v)
            if c is None:
                return UNKNOWN
            dims.append(int(c))
        return tuple(dims)
    if t is PrimValue:
        v = expr.value
        if type(v) is tir.IntImm:
            return bool(v.value) if v.dtype == "bool" else int(v.value)
        if type(v) is tir.FloatImm:
            return float(v.value)
        return UNKNOWN
    if t is StringImm or t is DataTypeImm:
        return expr.value
    return UNKNOWN


def evaluate_call(call: Call, operands: Sequence[Any] | None = None, *,
                  lookup: Lookup | None = None,
                  max_elements: int | None = None) -> Any:
    """The value of ``call`` computed now with its operator's reference: a
    numpy array (a tuple of them for a tuple result), or None when the call
    stays a run-time operator (see the module docstring: not a foldable
    operator, an operand not known, a result past ``max_elements`` or of a
    shape that is not static, an evaluation that fails or disagrees with
    inference). ``max_elements`` defaults to :data:`MAX_FOLD_ELEMENTS`.

    ``operands``: the operands' values if the caller has them already (from
    :func:`known_value`); otherwise they are read from ``call.args`` with
    ``lookup`` for variables.
    """
    op = call.op
    if type(op) is not Op:
        return None
    opdef = find_op(op.name)
    if opdef is None or not foldable(opdef):
        return None
    sinfo = call.struct_info
    n = static_elements(sinfo)
    if n is None or n > (MAX_FOLD_ELEMENTS if max_elements is None else max_elements):
        return None
    if operands is None:
        operands = [known_value(a, lookup) for a in call.args]
    if any(v is UNKNOWN for v in operands):
        return None
    budget = MAX_FOLD_ELEMENTS if max_elements is None else max_elements
    if any(_virtual_elements(v) > budget for v in operands):
        return None  # a splat's work is its full size, not its memory
    attrs = _attr_values(call)
    if attrs is None:
        return None
    kwargs = {k: v for k, v in opdef.attrs.items() if v is not REQUIRED}
    kwargs.update(attrs)
    try:
        with np.errstate(all="ignore"):
            value = _as_value(opdef.reference(*operands, **kwargs))
    except Exception:  # noqa: BLE001 - the error policy: it fails at run time instead
        return None
    return _conform(value, sinfo)


def _virtual_elements(value: Any) -> int:
    """The elements of an operand that are not in memory (a splat constant:
    one element broadcast), which evaluating it would still visit one by one."""
    if isinstance(value, tuple):
        return sum(_virtual_elements(v) for v in value)
    if isinstance(value, np.ndarray) and any(s == 0 and d > 1
                                             for s, d in zip(value.strides, value.shape)):
        return value.size
    return 0


def _attr_values(call: Call) -> dict[str, Any] | None:
    """The call's attributes, symbolic entries (strided_slice's ``begin``)
    made ints; None when one is not constant."""
    attrs = call.attrs or {}
    symbolic = symbolic_attr_values(attrs)
    if not symbolic:
        return dict(attrs)
    if any(arith.const_int(e) is None for e in symbolic):
        return None
    return dict(map_symbolic_attrs(attrs, lambda e: int(arith.const_int(e))))


def _as_value(value: Any) -> Any:
    """A reference's result as a value: numpy scalars become 0-d arrays
    (numpy turns 0-d arithmetic results into scalars), lists become tuples."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, (tuple, list)):
        return tuple(_as_value(v) for v in value)
    return value


def _conform(value: Any, sinfo: Any) -> Any:
    """``value`` in the dtype inference gave; None if its structure or shape
    is not the inferred one."""
    if type(sinfo) is TupleStructInfo:
        if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
            return None
        fields = tuple(_conform(v, s) for v, s in zip(value, sinfo.fields))
        return None if any(f is None for f in fields) else fields
    arr = np.asarray(value)
    if sinfo.dtype != "void" and str(arr.dtype) != sinfo.dtype:
        arr = arr.astype(sinfo.dtype)
    if arr.shape != static_shape(sinfo):
        return None
    return arr
