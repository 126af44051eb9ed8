"""Building operator calls: look an operator up by any of its spellings, and
build a ``Call`` with validated operands and attributes and its struct info
inferred::

    call_op("relax.add", x, y)
    call_op("sum", x, axis=[1], keepdims=True)         # "relax." is optional
    call_op("reshape", x, (2, -1))                      # tuple -> R.shape([...])

Also the operand conventions the TVMScript parser shares with
:func:`call_op` (which operands take Python tuples, which may be omitted,
which attributes hold symbolic expressions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasec.errors import StructInfoError, counted
from phasec.ir import tir
from phasec.ir.expr import Call, Expr, ExternFunc, Op, PrimValue, ShapeExpr, Tuple
from phasec.ir.node import Span, set_field
from phasec.ir.struct_info import StructInfo
from phasec.op._common import ATTR_FINISHERS, ATTR_NORMALIZERS, finish_with_operands
from phasec.op.infer import infer_struct_info
from phasec.op.registry import REQUIRED, InferContext, OpDef, get_op

__all__ = ["call_op", "normalize_attrs", "finish_with_operands", "op_expr", "resolve_op",
           "SHAPE_OPERANDS", "TUPLE_OPERANDS", "PRIM_OPERANDS", "OPTIONAL_OPERANDS",
           "OPERAND_DEFAULTS", "SYMBOLIC_ATTRS", "symbolic_attr_values", "map_symbolic_attrs"]

#: Operand names that accept a Python tuple/list of dims (made a ShapeExpr).
SHAPE_OPERANDS = frozenset({"shape", "size"})
#: Operand names that accept a Python tuple/list of expressions (made a Tuple).
TUPLE_OPERANDS = frozenset({"tensors", "args"})
#: Operand names that accept a Python scalar (made a PrimValue): TVM prints
#: ``R.arange(0, 10, 1)``, ``R.tril(x, 1)``, ``R.eye(3, 3, 0)`` with bare numbers.
PRIM_OPERANDS = frozenset({"offset", "start", "end", "step", "k", "n", "m", "window_size",
                           "periodic", "alpha", "beta", "relative_byte_offset"})

#: Operands that may be omitted, per operator: TVM fills them with its "void"
#: value, the empty tuple ``R.tuple()`` (so do the parser and call_op).
OPTIONAL_OPERANDS: dict[str, tuple[str, ...]] = {
    "relax.memory.view": ("shape", "dtype", "relative_byte_offset"),
}
#: Operands with a default value when omitted (TVM 0.27's Python API:
#: ``R.tril(x)`` is ``R.tril(x, 0)``), per operator: name -> value.
OPERAND_DEFAULTS: dict[str, dict[str, Any]] = {
    "relax.tril": {"k": 0},
    "relax.triu": {"k": 0},
}

#: Attributes whose entries may be symbolic integer expressions, per operator:
#: TVM 0.27 passes strided_slice's begin / end / strides as tuples of PrimExprs
#: (``R.strided_slice(x, (0,), (index,), (index + 1,))``). The parser reads
#: expressions there; everything that rewrites symbolic variables (FuseOps,
#: LambdaLifting) maps them with :func:`map_symbolic_attrs`.
SYMBOLIC_ATTRS: dict[str, frozenset[str]] = {
    "relax.strided_slice": frozenset({"begin", "end", "strides"}),
}


def _is_symbolic(x: Any) -> bool:
    return isinstance(x, tir.PrimExpr) and type(x) is not tir.IntImm \
        and type(x) is not tir.FloatImm


def symbolic_attr_values(attrs: Mapping[str, Any] | None) -> list[Any]:
    """The symbolic ``tir.PrimExpr``s among attribute values (a value, or an
    entry of a tuple value); constants are not listed."""
    if not attrs:
        return []
    return [x for v in attrs.values() for x in (v if type(v) is tuple else (v,))
            if _is_symbolic(x)]


def map_symbolic_attrs(attrs: Mapping[str, Any] | None, fn: Any) -> Any:
    """``attrs`` with ``fn`` applied to each symbolic value (see
    :func:`symbolic_attr_values`); the same object when there is none."""
    if not symbolic_attr_values(attrs):
        return attrs

    def one(x: Any) -> Any:
        return fn(x) if _is_symbolic(x) else x

    return {k: tuple(one(x) for x in v) if type(v) is tuple else one(v)
            for k, v in attrs.items()}


_OPS: dict[str, Op] = {}
# name as given -> OpDef (operators are never unregistered)
_RESOLVED: dict[str, OpDef] = {}


def resolve_op(name: str, span: Span | None = None) -> OpDef:
    """The OpDef for ``relax.add``, ``R.add`` or ``add``; StructInfoError if unknown."""
    opdef = _RESOLVED.get(name)
    if opdef is not None:
        return opdef
    full = name if name.startswith(("relax.", "R.")) else "relax." + name
    try:
        opdef = get_op(full)
    except KeyError as exc:
        raise StructInfoError(str(exc.args[0]), span) from None
    _RESOLVED[name] = opdef
    return opdef


def op_expr(name: str) -> Op:
    """The (shared) ``Op`` expression naming the registered operator ``name``."""
    op = _OPS.get(name)
    if op is not None:
        return op
    opdef = resolve_op(name)
    op = _OPS.get(opdef.name)
    if op is None:
        op = _OPS[opdef.name] = Op(opdef.name)
    return op


def normalize_attrs(opdef: OpDef, attrs: Mapping[str, Any], span: Span | None = None) -> dict[str, Any]:
    """Check attribute names, fill in defaults and normalize values.

    Values become hashable and immutable (lists -> tuples of ints, an int axis
    -> a 1-tuple where the attribute is a list of axes...). Raises
    StructInfoError for unknown or missing attributes and for bad values.
    """
    unknown = [k for k in attrs if k not in opdef.attrs]
    if unknown:
        known = ", ".join(opdef.attrs) or "(none)"
        raise StructInfoError(
            f"{opdef.script_name} has no attribute {', '.join(map(repr, unknown))}; "
            f"its attributes are: {known}", span)
    norms = ATTR_NORMALIZERS.get(opdef.name, {})
    out: dict[str, Any] = {}
    for key, default in opdef.attrs.items():
        value = attrs.get(key, default)
        if value is REQUIRED:
            raise StructInfoError(f"{opdef.script_name} requires the attribute {key!r}", span)
        norm = norms.get(key)
        if norm is not None:
            try:
                value = norm(value)
            except (TypeError, ValueError) as exc:
                raise StructInfoError(
                    f"{opdef.script_name}: invalid value {value!r} for attribute {key!r}: {exc}",
                    span) from None
        out[key] = value
    finish = ATTR_FINISHERS.get(opdef.name)
    return finish(out) if finish is not None else out


def _convert_operand(opdef: OpDef, index: int, value: Any, span: Span | None) -> Expr:
    if isinstance(value, Expr):
        return value
    arg_names = opdef.args
    name = arg_names[min(index, len(arg_names) - 1)]
    if isinstance(value, (tuple, list)):
        if name in SHAPE_OPERANDS:
            return ShapeExpr(tuple(value), span=span)
        if name in TUPLE_OPERANDS:
            return Tuple([_convert_operand(opdef, index, v, span) for v in value], span=span)
    if name == "func" and isinstance(value, str):
        return ExternFunc(value, span=span)
    if name in PRIM_OPERANDS and isinstance(value, (int, float)) and not isinstance(value, bool):
        return PrimValue(value, span=span)
    raise StructInfoError(
        f"{opdef.script_name}: operand {name!r} must be a Relax expression, "
        f"not {type(value).__name__} ({value!r})", span)


def call_op(name: str, *args: Any, sinfo_args: tuple[StructInfo, ...] | list = (),
            span: Span | None = None, ctx: InferContext | None = None, **attrs: Any) -> Call:
    """Build ``R.<name>(*args, **attrs)`` with its struct info inferred.

    Validates the operand count and the attribute names (an unknown attribute
    is a StructInfoError listing the known ones), fills default attributes and
    normalizes their values. Python tuples/lists are accepted for shape
    operands (-> ``R.shape``) and tuple operands (-> a Relax Tuple).
    """
    opdef = resolve_op(name, span)
    optional = OPTIONAL_OPERANDS.get(opdef.name, ())
    if optional and len(args) < len(opdef.args):
        missing = opdef.args[len(args):]
        if all(m in optional for m in missing):
            args = (*args, *(Tuple([], span=span) for _ in missing))
    defaults = OPERAND_DEFAULTS.get(opdef.name, {})
    if defaults and len(args) < len(opdef.args):
        missing = opdef.args[len(args):]
        if all(m in defaults for m in missing):
            args = (*args, *(defaults[m] for m in missing))
    n_fixed = len(opdef.args) - (1 if opdef.variadic else 0)
    if (len(args) < n_fixed) or (not opdef.variadic and len(args) != len(opdef.args)):
        expected = (f"at least {counted(n_fixed, 'operand')}" if opdef.variadic
                    else counted(len(opdef.args), "operand"))
        raise StructInfoError(
            f"{opdef.script_name} takes {expected} "
            f"({', '.join(opdef.args) or 'none'}) but {len(args)} "
            f"{'was' if len(args) == 1 else 'were'} given", span)
    operands = [_convert_operand(opdef, i, a, span) for i, a in enumerate(args)]
    norm = finish_with_operands(opdef.name, normalize_attrs(opdef, attrs, span), operands)
    if isinstance(sinfo_args, StructInfo):
        sinfo_args = (sinfo_args,)
    call = Call(op_expr(opdef.name), operands, norm, tuple(sinfo_args), span=span)
    # The call is fresh and not yet shared: fill in its derived struct info.
    set_field(call, "struct_info", infer_struct_info(call, ctx))
    return call
