"""The struct-info lattice: equality, "is a base of", join.

Struct info describes sets of values; these functions compare and combine
them. Dimensions are compared by proof (:func:`phasec.arith.prove_equal`),
so ``n * 4`` and ``4 * n`` agree: the lattice lives with the arithmetic it
decides with, below the operators whose inference uses it.

* :func:`struct_info_equal`, :func:`is_base_of`, :func:`may_be_base_of`
  compare; :func:`join` (alias :func:`unify`) is the least upper bound.
* :func:`collect_shape_vars`, :func:`substitute_sinfo` and
  :func:`erase_to_ndim` read and rewrite the symbolic dimensions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from phasec.arith import free_vars, prove_equal, prove_not_equal, simplify, substitute
from phasec.ir import tir
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)

__all__ = ["struct_info_equal", "is_base_of", "may_be_base_of", "join", "unify",
           "collect_shape_vars", "substitute_sinfo", "erase_to_ndim"]

def _dims_equal(a: Sequence[tir.PrimExpr], b: Sequence[tir.PrimExpr]) -> bool:
    return len(a) == len(b) and all(prove_equal(x, y) for x, y in zip(a, b))


def _prim_value_equal(a: tir.PrimExpr | None, b: tir.PrimExpr | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return prove_equal(a, b)


def struct_info_equal(a: StructInfo | None, b: StructInfo | None) -> bool:
    """True when ``a`` and ``b`` describe provably the same set of values."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if x is None or y is None or type(x) is not type(y):
            return False
        if isinstance(x, TensorStructInfo):
            if x.dtype != y.dtype or x.ndim != y.ndim:
                return False
            if (x.shape is None) != (y.shape is None):
                return False
            if x.shape is not None and not _dims_equal(x.shape, y.shape):
                return False
        elif isinstance(x, ShapeStructInfo):
            if x.ndim != y.ndim or (x.values is None) != (y.values is None):
                return False
            if x.values is not None and not _dims_equal(x.values, y.values):
                return False
        elif isinstance(x, PrimStructInfo):
            if x.dtype != y.dtype or not _prim_value_equal(x.value, y.value):
                return False
        elif isinstance(x, TupleStructInfo):
            if len(x.fields) != len(y.fields):
                return False
            stack.extend(zip(x.fields, y.fields))
        elif isinstance(x, FuncStructInfo):
            if x.purity != y.purity or (x.params is None) != (y.params is None):
                return False
            if x.params is not None:
                if len(x.params) != len(y.params):
                    return False
                stack.extend(zip(x.params, y.params))
            stack.append((x.ret, y.ret))
    return True


def is_base_of(base: StructInfo | None, derived: StructInfo | None) -> bool:
    """True when every value described by ``derived`` is described by ``base``.

    ``base`` is less or equally specific: ``R.Object`` is a base of everything,
    ``R.Tensor(ndim=2)`` of ``R.Tensor((2, 3), "float32")``. Dimensions are
    compared with ``prove_equal``: only provable facts count. Callables are
    covariant in their result and contravariant in their parameters; an impure
    callable type is a base of a pure one.
    """
    stack = [(base, derived)]
    while stack:
        b, d = stack.pop()
        if b is d:
            continue
        if isinstance(b, ObjectStructInfo):
            continue
        if b is None or d is None or type(b) is not type(d):
            return False
        if isinstance(b, TensorStructInfo):
            if b.dtype != "void" and b.dtype != d.dtype:
                return False
            if b.ndim != -1 and b.ndim != d.ndim:
                return False
            if b.shape is not None and (d.shape is None or not _dims_equal(b.shape, d.shape)):
                return False
        elif isinstance(b, ShapeStructInfo):
            if b.ndim != -1 and b.ndim != d.ndim:
                return False
            if b.values is not None and (d.values is None or not _dims_equal(b.values, d.values)):
                return False
        elif isinstance(b, PrimStructInfo):
            if b.dtype != d.dtype:
                return False
            if b.value is not None and (d.value is None or not prove_equal(b.value, d.value)):
                return False
        elif isinstance(b, TupleStructInfo):
            if len(b.fields) != len(d.fields):
                return False
            stack.extend(zip(b.fields, d.fields))
        elif isinstance(b, FuncStructInfo):
            if b.purity and not d.purity:
                return False
            if b.params is not None:
                if d.params is None or len(b.params) != len(d.params):
                    return False
                stack.extend(zip(d.params, b.params))  # contravariant
            stack.append((b.ret, d.ret))
    return True


def may_be_base_of(base: StructInfo | None, derived: StructInfo | None) -> bool:
    """False only when no value of ``derived`` can match ``base``.

    This is the static check of a call argument against a parameter: kinds,
    known dtypes and ndims, and constant dimensions must agree; symbolic
    dimensions are left to the run-time check (TVM's "needs a match_cast").
    """
    stack = [(base, derived)]
    while stack:
        b, d = stack.pop()
        if isinstance(b, ObjectStructInfo) or isinstance(d, ObjectStructInfo) or b is None or d is None:
            continue
        if type(b) is not type(d):
            return False
        if isinstance(b, TensorStructInfo):
            if "void" not in (b.dtype, d.dtype) and b.dtype != d.dtype:
                return False
            if -1 not in (b.ndim, d.ndim) and b.ndim != d.ndim:
                return False
            if b.shape is not None and d.shape is not None:
                if any(prove_not_equal(x, y) for x, y in zip(b.shape, d.shape)):
                    return False
        elif isinstance(b, ShapeStructInfo):
            if -1 not in (b.ndim, d.ndim) and b.ndim != d.ndim:
                return False
            if b.values is not None and d.values is not None:
                if any(prove_not_equal(x, y) for x, y in zip(b.values, d.values)):
                    return False
        elif isinstance(b, PrimStructInfo):
            if b.dtype != d.dtype:
                return False
            if b.value is not None and d.value is not None and prove_not_equal(b.value, d.value):
                return False
        elif isinstance(b, TupleStructInfo):
            if len(b.fields) != len(d.fields):
                return False
            stack.extend(zip(b.fields, d.fields))
        elif isinstance(b, FuncStructInfo):
            if b.params is not None and d.params is not None and len(b.params) != len(d.params):
                return False
    return True


def join(a: StructInfo, b: StructInfo) -> StructInfo:
    """The least upper bound: the most specific struct info describing both.

    Used for ``If`` (the result of either branch). Differing dimensions give
    an ndim-only tensor, differing kinds ``R.Object``.
    """
    if a is b:
        return a
    if a is None or b is None:
        return ObjectStructInfo()
    if isinstance(a, ObjectStructInfo) or isinstance(b, ObjectStructInfo) or type(a) is not type(b):
        return ObjectStructInfo()
    if isinstance(a, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else "void"
        ndim = a.ndim if a.ndim == b.ndim else -1
        if a.shape is not None and b.shape is not None and _dims_equal(a.shape, b.shape):
            return TensorStructInfo(a.shape, dtype)
        return TensorStructInfo(None, dtype, ndim)
    if isinstance(a, ShapeStructInfo):
        if a.values is not None and b.values is not None and _dims_equal(a.values, b.values):
            return a
        return ShapeStructInfo(None, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo):
        if a.dtype != b.dtype:
            return ObjectStructInfo()
        return a if _prim_value_equal(a.value, b.value) else PrimStructInfo(a.dtype)
    if isinstance(a, TupleStructInfo):
        if len(a.fields) != len(b.fields):
            return ObjectStructInfo()
        return TupleStructInfo([join(x, y) for x, y in zip(a.fields, b.fields)])
    if isinstance(a, FuncStructInfo):
        if struct_info_equal(a, b):
            return a
        return FuncStructInfo(None, join(a.ret, b.ret), a.purity and b.purity)
    return ObjectStructInfo()


unify = join


def collect_shape_vars(sinfo: StructInfo | None) -> list[tir.Var]:
    """Symbolic variables of ``sinfo`` (shapes, prim values), each once, in order."""
    out: list[tir.Var] = []
    seen: set[int] = set()

    def add(exprs: Iterable[tir.PrimExpr]) -> None:
        for e in exprs:
            for v in free_vars(e):
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)

    stack = [sinfo]
    while stack:
        s = stack.pop()
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            add(s.shape)
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            add(s.values)
        elif isinstance(s, PrimStructInfo) and s.value is not None:
            add([s.value])
        elif isinstance(s, TupleStructInfo):
            stack.extend(reversed(s.fields))
        elif isinstance(s, FuncStructInfo):
            stack.append(s.ret)
            if s.params is not None:
                stack.extend(reversed(s.params))
    return out


def substitute_sinfo(sinfo: StructInfo, vmap: Mapping[tir.Var, tir.PrimExpr]) -> StructInfo:
    """``sinfo`` with symbolic variables replaced (and dims simplified)."""
    if not vmap:
        return sinfo

    def sub(dims):
        return tuple(simplify(substitute(d, vmap)) for d in dims)

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return TensorStructInfo(sub(sinfo.shape), sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return ShapeStructInfo(sub(sinfo.values))
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return PrimStructInfo(sinfo.dtype, sub([sinfo.value])[0])
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([substitute_sinfo(f, vmap) for f in sinfo.fields])
    if isinstance(sinfo, FuncStructInfo):
        params = None if sinfo.params is None else [substitute_sinfo(p, vmap) for p in sinfo.params]
        return FuncStructInfo(params, substitute_sinfo(sinfo.ret, vmap), sinfo.purity)
    return sinfo


def erase_to_ndim(sinfo: StructInfo, keep: set[int] | None = None) -> StructInfo:
    """Forget dimensions that mention variables outside ``keep`` (ids of tir.Vars).

    With ``keep=None`` every symbolic dimension is forgotten. Tensors and
    shapes keep their ndim and dtype, prim values their dtype.
    """
    def ok(exprs) -> bool:
        return all(keep is not None and all(id(v) in keep for v in free_vars(e))
                   for e in exprs)

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return sinfo if ok(sinfo.shape) else TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return sinfo if ok(sinfo.values) else ShapeStructInfo(None, sinfo.ndim)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return sinfo if ok([sinfo.value]) else PrimStructInfo(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        fields = [erase_to_ndim(f, keep) for f in sinfo.fields]
        if all(a is b for a, b in zip(fields, sinfo.fields)):
            return sinfo
        return TupleStructInfo(fields)
    if isinstance(sinfo, FuncStructInfo):
        params = None if sinfo.params is None else [erase_to_ndim(p, keep) for p in sinfo.params]
        return FuncStructInfo(params, erase_to_ndim(sinfo.ret, keep), sinfo.purity)
    return sinfo
