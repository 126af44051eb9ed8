"""The float arithmetic a rounding or a comparison decides: emitted as written.

phasec lets LLVM contract a multiply and an add into one FMA (the
``contract`` fast-math flag, :attr:`.options.CodegenOptions.float_flags`):
that removes a rounding, so a result moves by less than an ulp. Where the
value is then rounded to an integer -- ``floor``, ``ceil``, ``round``
(``nearbyint``), ``trunc``, a cast of a float to an integer or bool -- or
reduced by a float ``//``, ``%`` or ``fmod`` (a step at each multiple of the
divisor; the intrinsics flagged ``steps`` in :mod:`phasec.ir.intrinsics`), an
ulp can move it across the boundary and change the result by a whole step:
resize's ``(x + 0.5) * (2 / 7) - 0.5`` is 0.5 exactly computed as written
(two roundings) and 0.5000000447 fused, and nearest then takes the other
row (a different input pixel, not an ulp). The same holds for grid
sampling's and roi_align's sample coordinates, an index computed in float,
a quantization's ``round(x / s)``, and for a float comparison (a coordinate
tested against the image's edge, an IoU against its threshold): each is a
discrete decision an ulp can flip.

So the float ``+ - *`` that feed such a step or comparison -- in its operand's
expression, through let-bound variables, not through values stored to and
loaded from a buffer (those are rounded to their dtype already) -- carry no
fast-math flag, ``fast_math`` or not: each operation rounds as written, like
numpy, ONNX Runtime and TVM. The
rest of the kernel keeps contraction (a GEMM's or a convolution's
multiply-adds round nothing to an integer: their code is unchanged).
"""

from __future__ import annotations

from phasec.backend.llvm.abi import body_walk
from phasec.backend.llvm.irtext import is_float
from phasec.ir import tir
from phasec.ir.intrinsics import STEPPING_INTRINSICS
from phasec.ir.memo import remembered

__all__ = ["exact_arithmetic"]

_ARITH = frozenset({"+", "-", "*"})
#: float binary operators that decide: comparisons, and the floor division and
#: remainder (a step at each multiple of the divisor)
_DECIDING_OPS = frozenset({*tir.COMPARE_OPS, "//", "%"})


def _rounded_operands(func: tir.PrimFunc) -> frozenset[int]:
    # the roots: the operands of roundings, fmod, float -> integer casts, float
    # comparisons, floor divisions and remainders;
    # then everything they compute from, through let-bound variables
    lets: dict[int, tir.PrimExpr] = {}
    roots: list[tir.PrimExpr] = []
    for n in body_walk(func):
        t = type(n)
        if t is tir.LetStmt:
            lets[id(n.var)] = n.value
        elif t is tir.Call and n.name in STEPPING_INTRINSICS:
            roots.extend(n.args)
        elif (t is tir.Cast and not is_float(n.dtype)
              and is_float(getattr(n.value, "dtype", ""))):
            roots.append(n.value)
        elif (t is tir.BinaryOp and n.op in _DECIDING_OPS
              and (is_float(getattr(n.lhs, "dtype", "")) or is_float(getattr(n.rhs, "dtype", "")))):
            roots.extend((n.lhs, n.rhs))
    if not roots:
        return frozenset()
    marked: set[int] = set()
    seen: set[int] = set()
    stack = roots
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        t = type(e)
        if t is tir.BufferLoad:
            continue  # a stored value; an index's own roundings are roots of their own
        if t is tir.Var:
            value = lets.get(id(e))
            if value is not None:
                stack.append(value)
            continue
        if t is tir.BinaryOp and e.op in _ARITH:
            marked.add(id(e))
        stack.extend(tir.expr_children(e))
    return frozenset(marked)


def exact_arithmetic(func: tir.PrimFunc) -> frozenset[int]:
    """The ids of the ``+ - *`` nodes of ``func``'s body whose value a
    rounding to an integer or a float comparison decides (see the module
    docstring): the code
    generator emits them without fast-math flags. Remembered per kernel
    (each outlined parallel body asks again)."""
    return remembered(_rounded_operands, func)
