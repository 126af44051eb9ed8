"""Shared helpers for operator definitions: registration, attribute
normalization, operand access and the inference building blocks
(broadcasting, axis normalization, dtype checks)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import IndexOutOfRangeError, StructInfoError, counted
from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import Call, Op
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo, call_error
from phasec.ir.struct_info import ShapeStructInfo, TensorStructInfo
from phasec.op.registry import REQUIRED, InferContext, OpDef, OpPattern, find_op, register_op

__all__ = [
    "ATTR_NORMALIZERS", "ATTR_FINISHERS", "ATTR_OPERAND_FINISHERS", "finish_with_operands", "define", "attrs_of", "tensor_arg", "shape_arg", "err",
    "norm_axis", "norm_axes", "broadcast", "binary_vdevice", "binary_dtype", "Normalizer",
    "as_int", "as_float", "as_bool", "as_str", "as_dtype", "int_tuple", "opt",
    "pair", "padding4", "one_of", "shape_tuple", "prod", "OpPattern", "REQUIRED",
    "InferContext", "tensor_sinfo", "broadcast_dims",
]

Normalizer = Callable[[Any], Any]

#: op name -> attribute name -> normalizer (value -> canonical immutable value;
#: raises ValueError/TypeError with a message on bad input).
ATTR_NORMALIZERS: dict[str, dict[str, Normalizer]] = {}

#: op name -> ``finish(attrs) -> attrs``: fills attributes whose default
#: depends on another attribute, after each one is normalized (TVM 0.27's
#: constructors do the same: a convolution's ``out_layout`` None becomes its
#: ``data_layout``, so it prints as TVM prints it).
ATTR_FINISHERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}

#: op name -> ``finish(attrs, operands) -> attrs``: attributes whose value
#: depends on the operands, completed where a call is built (the parser,
#: :func:`phasec.op.call_op`): layout_transform's pad_value 0 takes the
#: input's dtype, as TVM's constructor converts it.
ATTR_OPERAND_FINISHERS: dict[str, Callable[[dict[str, Any], Sequence[Any]], dict[str, Any]]] = {}


def finish_with_operands(op_name: str, attrs: dict[str, Any], operands: Sequence[Any]) -> dict[str, Any]:
    """``attrs`` completed by the operator's :data:`ATTR_OPERAND_FINISHERS` entry, if any."""
    finish = ATTR_OPERAND_FINISHERS.get(op_name)
    return finish(dict(attrs), operands) if finish is not None else attrs


def define(name: str, args: Sequence[str], infer: Callable, *,
           attrs: Mapping[str, tuple[Any, Normalizer]] | None = None,
           reference: Callable | None = None, pattern: OpPattern = OpPattern.OPAQUE,
           pure: bool = True, variadic: bool = False, category: str = "compute",
           doc: str = "", finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
           finish_operands: Callable[[dict[str, Any], Sequence[Any]], dict[str, Any]] | None = None,
           ) -> OpDef:
    """Register ``relax.<name>``. ``attrs`` maps attr name -> (default, normalizer);
    ``finish`` (see :data:`ATTR_FINISHERS`) completes the normalized attributes."""
    attrs = dict(attrs or {})
    opdef = OpDef(
        name="relax." + name, args=tuple(args), infer=infer,
        attrs={k: d for k, (d, _) in attrs.items()}, reference=reference, pattern=pattern,
        pure=pure, variadic=variadic, category=category, doc=doc)
    register_op(opdef)
    ATTR_NORMALIZERS[opdef.name] = {k: n for k, (_, n) in attrs.items()}
    if finish is not None:
        ATTR_FINISHERS[opdef.name] = finish
    if finish_operands is not None:
        ATTR_OPERAND_FINISHERS[opdef.name] = finish_operands
    return opdef


# ---------------------------------------------------------------------------
# Attribute normalizers
# ---------------------------------------------------------------------------

def as_int(v: Any) -> int:
    if isinstance(v, tir.IntImm):
        return v.value
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected an integer, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    raise TypeError(f"expected an integer, got {v!r}")


def as_float(v: Any) -> float:
    if isinstance(v, (tir.FloatImm, tir.IntImm)):
        return float(v.value)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected a number, got {v!r}")
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    raise TypeError(f"expected a number, got {v!r}")


def as_bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise TypeError(f"expected True or False, got {v!r}")


def as_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise TypeError(f"expected a string, got {v!r}")


def as_dtype(v: Any) -> str:
    """A dtype name; ``None`` (TVM 0.27's spelling of "no dtype") is ``"void"``."""
    if v is None:
        return "void"
    if isinstance(v, np.dtype):
        v = str(v)
    if isinstance(v, type) and issubclass(v, np.generic):
        v = np.dtype(v).name
    if v == "void" or v in tir.DTYPES:
        return v
    raise ValueError(f"unknown dtype {v!r}; expected one of {', '.join(tir.DTYPES)} or void")


def int_tuple(v: Any) -> tuple[int, ...]:
    """An int or a sequence of ints -> tuple of ints."""
    if isinstance(v, (list, tuple)):
        return tuple(as_int(x) for x in v)
    return (as_int(v),)


def opt(norm: Normalizer) -> Normalizer:
    """Allow None in addition to what ``norm`` accepts."""
    def f(v: Any) -> Any:
        return None if v is None else norm(v)
    return f


def pair(v: Any) -> tuple[int, int]:
    t = int_tuple(v)
    if len(t) == 1:
        return (t[0], t[0])
    if len(t) != 2:
        raise ValueError(f"expected 1 or 2 integers, got {len(t)}")
    return t  # type: ignore[return-value]


def padding4(v: Any) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from 1, 2 or 4 integers."""
    t = int_tuple(v)
    if len(t) == 1:
        return (t[0],) * 4  # type: ignore[return-value]
    if len(t) == 2:
        return (t[0], t[1], t[0], t[1])
    if len(t) == 4:
        return t  # type: ignore[return-value]
    raise ValueError(f"padding needs 1, 2 or 4 integers, got {len(t)}")


def one_of(*choices: str) -> Normalizer:
    def f(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(map(repr, choices))}, got {v!r}")
        return v
    return f


# ---------------------------------------------------------------------------
# Operand access
# ---------------------------------------------------------------------------

def err(call: Call, message: str) -> StructInfoError:
    """A StructInfoError naming the call and its operands' struct info."""
    return call_error(call, message)


_FOUND: dict[str, OpDef | None] = {}


def _find(name: str) -> OpDef | None:
    if name not in _FOUND:
        _FOUND[name] = find_op(name)
    return _FOUND[name]


def attrs_of(call: Call) -> dict[str, Any]:
    """The call's attributes with defaults filled in and values normalized."""
    opdef = _find(call.op.name) if isinstance(call.op, Op) else None
    if opdef is None:
        return dict(call.attrs)
    out = dict(opdef.attrs)
    out.update(call.attrs)
    norms = ATTR_NORMALIZERS.get(opdef.name, {})
    for k, v in out.items():
        if v is REQUIRED:
            raise err(call, f"missing required attribute {k!r}")
        norm = norms.get(k)
        if norm is not None:
            try:
                out[k] = norm(v)
            except (TypeError, ValueError) as exc:
                raise err(call, f"invalid value for attribute {k!r}: {exc}") from None
    finish = ATTR_FINISHERS.get(opdef.name)
    return finish(out) if finish is not None else out


def _op_script(call: Call) -> str:
    return expr_to_str(call.op)


def _check_arity(call: Call, n: int) -> None:
    if len(call.args) < n:
        raise err(call, f"{_op_script(call)} expects {counted(n, 'operand')}, got {len(call.args)}")


#: Arithmetic operators that do not take bool tensors: their kernels compute
#: in the operands' dtype, and bool has no arithmetic (numpy itself refuses
#: some of them, e.g. subtract and negative). The logical operators,
#: comparisons, astype and data movement take bool tensors.
NO_BOOL_OPS = frozenset("relax." + n for n in (
    "add", "subtract", "multiply", "divide", "floor_divide", "maximum", "minimum",
    "negative", "nn.relu", "matmul", "nn.conv2d",
    "nn.max_pool2d"))


def tensor_arg(call: Call, i: int, ctx: InferContext | None, what: str = "") -> TensorStructInfo:
    """The TensorStructInfo of operand ``i``; an error if it is not a tensor
    (or is a bool tensor given to an operator of :data:`NO_BOOL_OPS`)."""
    _check_arity(call, i + 1)
    sinfo = arg_sinfo(call.args[i], ctx)
    if not isinstance(sinfo, TensorStructInfo):
        label = what or expr_to_str(call.args[i])
        raise err(call, f"{_op_script(call)} expects a tensor for {label}, but "
                        f"{expr_to_str(call.args[i])} has struct info {sinfo_to_str(sinfo)}")
    if sinfo.dtype == "bool" and getattr(call.op, "name", None) in NO_BOOL_OPS:
        raise err(call, f"{_op_script(call)} does not compute on bool tensors, but "
                        f"{expr_to_str(call.args[i])} is bool; use R.logical_and, "
                        f"R.logical_or or R.logical_not, or convert it first with "
                        f"R.astype({expr_to_str(call.args[i])}, \"int32\")")
    return sinfo


def shape_arg(call: Call, i: int, ctx: InferContext | None) -> ShapeStructInfo:
    """The ShapeStructInfo of operand ``i`` (a ShapeExpr or a shape-valued var)."""
    _check_arity(call, i + 1)
    sinfo = arg_sinfo(call.args[i], ctx)
    if not isinstance(sinfo, ShapeStructInfo):
        raise err(call, f"{_op_script(call)} expects a shape (R.shape([...])) for operand "
                        f"{expr_to_str(call.args[i])}, but it has struct info {sinfo_to_str(sinfo)}")
    return sinfo


def tensor_sinfo(shape: Sequence[tir.PrimExpr] | None, dtype: str, ndim: int = -1) -> TensorStructInfo:
    if shape is not None:
        return TensorStructInfo(tuple(arith.simplify(d) for d in shape), dtype)
    return TensorStructInfo(None, dtype, ndim)


def prod(dims: Sequence[tir.PrimExpr]) -> tir.PrimExpr:
    acc: tir.PrimExpr = tir.IntImm(1)
    for d in dims:
        acc = tir.BinaryOp("*", acc, d)
    return arith.simplify(acc)


def shape_tuple(v: Any) -> tuple[int, ...]:
    """A runtime shape value (tuple, list, ShapeExpr of constants, array) -> ints."""
    if isinstance(v, np.ndarray):
        return tuple(int(x) for x in v.reshape(-1))
    return tuple(int(x.value) if isinstance(x, tir.IntImm) else int(x)
                 for x in getattr(v, "values", v))


# ---------------------------------------------------------------------------
# Axes, dtypes, broadcasting
# ---------------------------------------------------------------------------

def norm_axis(call: Call, axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in [-ndim, ndim) -> [0, ndim); an error naming the op otherwise."""
    if not -ndim <= axis < ndim:
        raise err(call, f"{what} {axis} is out of range for a tensor of ndim {ndim} "
                        f"(expected -{ndim} <= {what} < {ndim})" if ndim > 0 else
                        f"{what} {axis} is out of range for a 0-d tensor")
    return axis + ndim if axis < 0 else axis


def norm_axes(call: Call, axes: Sequence[int], ndim: int, what: str = "axis") -> list[int]:
    """Normalize a list of axes; repeated axes are an error."""
    out = [norm_axis(call, a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise err(call, f"{what} {tuple(axes)} contains a repeated axis")
    return out


def binary_dtype(call: Call, a: TensorStructInfo, b: TensorStructInfo) -> str:
    """The common dtype of two operands ("void" if either is unknown)."""
    if a.dtype == "void" or b.dtype == "void":
        return "void"
    if a.dtype != b.dtype:
        x, y = (expr_to_str(call.args[0]), expr_to_str(call.args[1]))
        raise err(call, "Binary operators must have the same datatype for both operands. "
                        f"However, {expr_to_str(call)} has {x} with dtype {a.dtype} and "
                        f"{y} with dtype {b.dtype}")
    return a.dtype


def _is_one(d: tir.PrimExpr) -> bool:
    return isinstance(d, tir.IntImm) and d.value == 1


def broadcast_dims(call: Call, a: Sequence[tir.PrimExpr], b: Sequence[tir.PrimExpr],
                   names: tuple[str, str]) -> tuple[tir.PrimExpr, ...] | None:
    """Numpy broadcasting of two known shapes; None when a dim is not decidable.

    Equal (provably) dims stay, 1 broadcasts against anything, two constants
    that differ (neither 1) are an error; two symbolic dims that cannot be
    proven equal give None (the caller falls back to an ndim-only result).
    """
    out: list[tir.PrimExpr] = []
    known = True
    n = max(len(a), len(b))
    for i in range(1, n + 1):
        x = a[-i] if i <= len(a) else None
        y = b[-i] if i <= len(b) else None
        if x is None:
            out.append(y)
        elif y is None or x is y:
            out.append(x)
        elif _is_one(x):
            out.append(y)
        elif _is_one(y):
            out.append(x)
        elif arith.prove_equal(x, y):
            out.append(x)
        elif arith.const_int(x) is not None and arith.const_int(y) is not None:
            raise err(call, f"cannot broadcast {names[0]} of shape "
                            f"{_shape_str(a)} with {names[1]} of shape {_shape_str(b)}: "
                            f"dimension {x.value if isinstance(x, tir.IntImm) else x} "
                            f"vs {y.value if isinstance(y, tir.IntImm) else y} "
                            f"(axis -{i}) differ and neither is 1")
        else:
            known = False
            out.append(x)
    return tuple(reversed(out)) if known else None


def _shape_str(dims: Sequence[tir.PrimExpr]) -> str:
    return sinfo_to_str(ShapeStructInfo(tuple(dims))).removeprefix("R.Shape(").removesuffix(")")


def binary_vdevice(call: Call, a: TensorStructInfo, b: TensorStructInfo) -> str | None:
    """The virtual device of a binary operator's result, as TVM 0.27 infers it
    (InferBinaryArithOpOutVDevice): the one operand that names a device, the
    same device of both, or an error for two different devices; an explicit
    result struct info (``ty_args``) decides."""
    if call.sinfo_args and type(call.sinfo_args[0]) is TensorStructInfo:
        return call.sinfo_args[0].vdevice
    va, vb = a.vdevice, b.vdevice
    if va is None or va == vb:
        return vb
    if vb is None:
        return va
    raise err(call, f"the operands are on different virtual devices "
                    f"({expr_to_str(call.args[0])} on {va!r}, {expr_to_str(call.args[1])} on "
                    f"{vb!r}); copy one to the other's device with R.to_vdevice")


def broadcast(call: Call, a: TensorStructInfo, b: TensorStructInfo, dtype: str,
              names: tuple[str, str] | None = None) -> TensorStructInfo:
    """The result of broadcasting ``a`` and ``b`` (best partial result), on
    their virtual device (:func:`binary_vdevice`)."""
    vdevice = binary_vdevice(call, a, b) if a.vdevice is not None or b.vdevice is not None \
        else None
    if a.shape is not None and b.shape is not None:
        if a.shape == b.shape and a.dtype == dtype and a.span is None and a.vdevice == vdevice:
            return a  # same dimension objects: nothing to broadcast (common fast path)
        if names is None:
            names = (expr_to_str(call.args[0]), expr_to_str(call.args[1]))
        dims = broadcast_dims(call, a.shape, b.shape, names)
        if dims is not None:
            return TensorStructInfo(dims, dtype, vdevice=vdevice)
        return TensorStructInfo(None, dtype, max(a.ndim, b.ndim), vdevice=vdevice)
    if a.ndim != -1 and b.ndim != -1:
        return TensorStructInfo(None, dtype, max(a.ndim, b.ndim), vdevice=vdevice)
    return TensorStructInfo(None, dtype, -1, vdevice=vdevice)


def check_indices(indices: np.ndarray, extent: int, where: str) -> None:
    """The reference semantics of indices read from data (take, gather...):
    ``-extent <= i < extent``, negatives counting from the end; anything else
    raises the IndexOutOfRangeError compiled kernels raise (T.checked_index)."""
    if indices.size:
        bad = (indices < -extent) | (indices >= extent)
        if bad.any():
            raise IndexOutOfRangeError(where, int(indices[bad].flat[0]), int(extent))
