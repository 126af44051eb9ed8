"""Operators: the registry, the operator families, and a checked way to build
operator calls.

``get_op("relax.add")`` / ``find_op("R.add")`` look an operator up;
:func:`call_op` builds a ``Call`` with validated operands and attributes and
its struct info inferred::

    call_op("relax.add", x, y)
    call_op("sum", x, axis=[1], keepdims=True)         # "relax." is optional
    call_op("reshape", x, (2, -1))                      # tuple -> R.shape([...])

The package is layered, lowest first: :mod:`.registry` (the table of
operators), :mod:`.infer` (struct-info inference), the helpers the families
share (``_common``, ``_lowering``...), :mod:`.calls` (building calls), the
family modules, :mod:`.definitions` (which imports every family), and
:mod:`.legalize` (the legalization drivers). This module only gathers the
public names; importing it (which importing any ``phasec.op.<module>``
does first) registers every built-in operator.
"""

from __future__ import annotations

from phasec.op import definitions  # noqa: F401  (every operator registers itself)
from phasec.op.calls import (
    OPERAND_DEFAULTS, OPTIONAL_OPERANDS, PRIM_OPERANDS, SHAPE_OPERANDS, SYMBOLIC_ATTRS,
    TUPLE_OPERANDS, call_op, finish_with_operands, map_symbolic_attrs, normalize_attrs,
    op_expr, resolve_op, symbolic_attr_values,
)
from phasec.op.registry import (
    CATEGORY_MAX_PHASE, REQUIRED, InferContext, OpDef, OpPattern, find_op, get_op, list_ops,
    register_op,
)

__all__ = ["OpDef", "OpPattern", "REQUIRED", "InferContext", "register_op", "get_op",
           "find_op", "list_ops", "call_op", "normalize_attrs", "finish_with_operands",
           "op_expr", "resolve_op", "CATEGORY_MAX_PHASE", "SHAPE_OPERANDS", "TUPLE_OPERANDS",
           "PRIM_OPERANDS", "OPTIONAL_OPERANDS", "OPERAND_DEFAULTS", "SYMBOLIC_ATTRS",
           "symbolic_attr_values", "map_symbolic_attrs"]
