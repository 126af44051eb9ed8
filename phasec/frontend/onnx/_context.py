"""What a converter sees: the node, its attributes and input values, and a
checked way to emit phasec operator calls with constant folding.

A *value* is what an ONNX tensor name stands for during import:

* a numpy array: the tensor is known at import time (an initializer, a
  ``Constant``, or anything computed from those alone). Arrays of dtype
  ``object`` hold *symbolic shape values*: 1-D (or 0-d) integer data whose
  elements are ints or symbolic dimensions (:class:`phasec.ir.tir.PrimExpr`),
  which is what ``Shape`` of a tensor with dynamic dimensions yields;
* a Relax expression (a variable bound in ``main``): a run-time tensor.

:meth:`NodeContext.emit` builds one phasec operator call (its struct info
inferred, so shape and dtype errors surface at once, attributed to the ONNX
node) and, when every operand is known, evaluates it with the operator's
numpy reference instead of emitting it (:func:`phasec.op.fold.evaluate_call`,
FoldConstant's evaluation: the same budget of
:data:`~phasec.op.fold.MAX_FOLD_ELEMENTS` elements, past which the call
stays a run-time operator, and the same error policy). Shape computations on
constants (``Shape -> Gather -> Concat -> Reshape``) therefore never reach
the compiled program as tensor operations. Converters that compute a value
at import themselves (``Range``, ``EyeLike``, :meth:`NodeContext.iota`...)
keep to the same budget (:func:`~phasec.op.fold.within_budget`) and emit the
run-time operator past it. The budget bounds values a model makes up from
small ones; a weight transformed into arrays no larger than itself (a
quantized weight shifted, summed or dequantized: ``ops_linalg.integer_gemm``,
DynamicQuantizeLSTM) is computed at import whatever its size, bounded by
what the file holds (:meth:`NodeContext.weight_transform`). A known array
becomes one Constant however many nodes read it (:meth:`NodeContext.expr`).
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec.arith.bound import prove_bounded
from phasec.ir.expr import Call, Constant, Expr, ShapeExpr, TupleGetItem
from phasec.ir.node import Span
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op import OpPattern, call_op, get_op, normalize_attrs, resolve_op
from phasec.op.fold import MAX_FOLD_ELEMENTS, UNKNOWN, evaluate_call, within_budget

if TYPE_CHECKING:
    from phasec.script.builder import BlockBuilder

__all__ = ["Value", "Unsupported", "SeqValue", "NodeContext", "is_const", "is_symbolic",
           "materialize", "settle"]

Value = Union[np.ndarray, Expr]

#: the largest size a symbolic dimension is assumed to take (an int64 byte count)
_MAX_DIM = (1 << 62) - 1


class SeqValue(tuple):
    """An ONNX sequence during import, expanded: the values of its tensors in
    order (:mod:`.ops_sequence`; phasec's IR has no sequence value)."""


class Unsupported(Exception):
    """Raised by a converter: this node (attribute, dtype, dynamic input...)
    is outside what the frontend supports. The importer collects these and
    reports every unsupported node of the model at once."""

    def __init__(self, reason: str, needs_value: str = "") -> None:
        self.reason = reason
        #: the ONNX tensor whose value would have to be known at import
        self.needs_value = needs_value
        super().__init__(reason)


def is_const(v: Any) -> bool:
    """True for values known at import time (numpy arrays, symbolic included)."""
    return isinstance(v, np.ndarray)


def is_symbolic(v: Any) -> bool:
    """True for known shape values holding symbolic dimensions."""
    return isinstance(v, np.ndarray) and v.dtype == object


def _int_or_expr(x: Any) -> Any:
    """An element of a symbolic array in canonical form: an int if constant."""
    if isinstance(x, tir.PrimExpr):
        x = arith.simplify(x)
        c = arith.const_int(x)
        return x if c is None else int(c)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    return x


def settle(arr: np.ndarray, dtype: str = "int64") -> np.ndarray:
    """A symbolic array with its elements simplified; a plain ``dtype`` array
    when no symbolic element is left."""
    if arr.dtype != object:
        return arr
    flat = [_int_or_expr(x) for x in arr.reshape(-1)]
    if all(not isinstance(x, tir.PrimExpr) for x in flat):
        return np.array(flat, dtype=dtype).reshape(arr.shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


def _sym_compare(fn: Callable[[Any, Any], bool], op: str) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        if not isinstance(a, tir.PrimExpr) and not isinstance(b, tir.PrimExpr):
            return fn(a, b)
        if op in ("==", "!="):
            if arith.prove_equal(tir.as_prim_expr(a), tir.as_prim_expr(b)):
                return op == "=="
            if arith.prove_not_equal(tir.as_prim_expr(a), tir.as_prim_expr(b)):
                return op == "!="
            # dimensions are never negative: ``seq == -1`` (the TorchScript
            # exporter's "keep this axis" test before an Expand) is false
            cond = tir.BinaryOp("==", tir.as_prim_expr(a), tir.as_prim_expr(b))
            sizes = {id(v): (0, _MAX_DIM) for x in (a, b) if isinstance(x, tir.PrimExpr)
                     for v in arith.free_vars(x)}
            if prove_bounded(cond, sizes) is False:
                return op == "!="
        raise Unsupported("a comparison of symbolic dimensions that cannot be decided at import")
    return cmp


def _sym_div(a: Any, b: Any) -> Any:
    if isinstance(a, tir.PrimExpr) or isinstance(b, tir.PrimExpr):
        return tir.as_prim_expr(a) // tir.as_prim_expr(b)  # dimensions are non-negative
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _sym_minmax(pick: str) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        if not isinstance(a, tir.PrimExpr) and not isinstance(b, tir.PrimExpr):
            return min(a, b) if pick == "min" else max(a, b)
        d = arith.const_int(arith.simplify(tir.as_prim_expr(a) - tir.as_prim_expr(b)))
        if d is None:
            raise Unsupported(f"{pick} of symbolic dimensions that cannot be decided at import")
        return (a if d <= 0 else b) if pick == "min" else (a if d >= 0 else b)
    return f


#: element functions for operators evaluated on symbolic shape values
_SYM_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "relax.add": operator.add, "relax.subtract": operator.sub, "relax.multiply": operator.mul,
    "relax.divide": _sym_div, "relax.floor_divide": lambda a, b: a // b,
    "relax.maximum": _sym_minmax("max"), "relax.minimum": _sym_minmax("min"),
    "relax.equal": _sym_compare(operator.eq, "=="),
    "relax.not_equal": _sym_compare(operator.ne, "!="),
}
#: operators that only move elements: their numpy references work on object arrays
_SYM_MOVE = frozenset({
    "relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.strided_slice",
    "relax.concat", "relax.take", "relax.broadcast_to", "relax.permute_dims", "relax.flatten",
    "relax.where",
})


class NodeContext:
    """One ONNX node during conversion (see the module docstring)."""

    def __init__(self, builder: "BlockBuilder", node: Any, index: int, opset: int,
                 inputs: Sequence[Value | None], attrs: dict[str, Any], span: Span,
                 hint: str, params: dict[int, np.ndarray] | None = None,
                 graphs: Callable[..., list[Any]] | None = None,
                 formats: dict[str, str] | None = None,
                 constants: dict[int, tuple[np.ndarray, Constant]] | None = None) -> None:
        self.builder = builder
        self.node = node
        self.index = index
        self.op_type: str = node.op_type
        self.opset = opset
        self.inputs = list(inputs)
        self.attrs = attrs
        self.span = span
        self.hint = hint
        #: input position -> initializer value, for inputs that are parameters
        #: of ``main`` (``keep_params_in_input``): usable where a constant is needed
        self.params = params or {}
        #: converts a subgraph into a builder's open function (the importer's
        #: ``convert_graph``; see :meth:`convert_graph`)
        self._graphs = graphs
        #: ONNX value name -> the narrow float format (bfloat16, float8...) whose
        #: values it holds in float32 (graph inputs of such types, casts to them)
        self.formats: dict[str, str] = {} if formats is None else formats
        #: id(array) -> (the array, its Constant), shared by every node of an
        #: import (see :meth:`expr`)
        self.constants: dict[int, tuple[np.ndarray, Constant]] = (
            {} if constants is None else constants)
        #: inside :meth:`weight_transform`
        self._weights = False

    # -- attributes and inputs ---------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value (ints, floats, strings, lists, arrays), or ``default``."""
        return self.attrs.get(name, default)

    def has(self, i: int) -> bool:
        """Is optional input ``i`` given (present and not the empty name)?"""
        return i < len(self.inputs) and self.inputs[i] is not None

    def input(self, i: int) -> Value:
        """Input ``i``; a missing required input is reported as unsupported."""
        if not self.has(i):
            raise Unsupported(f"input {i} is missing")
        return self.inputs[i]  # type: ignore[return-value]

    def optional(self, i: int) -> Value | None:
        return self.inputs[i] if self.has(i) else None

    def const(self, i: int, what: str = "") -> np.ndarray:
        """Input ``i`` as a numpy array; it must be known at import time."""
        v = self.input(i)
        if is_const(v):
            return v  # type: ignore[return-value]
        if i in self.params:
            return self.params[i]
        name = self.node.input[i]
        raise Unsupported(f"input {i} ({what or name!r}) must be known at import time "
                          f"(a constant or initializer), but {name!r} is computed at run time",
                          needs_value=name)

    def const_ints(self, i: int, what: str = "") -> list[Any]:
        """Input ``i`` as a list of ints (or symbolic dimensions)."""
        arr = self.const(i, what)
        return [_int_or_expr(x) for x in arr.reshape(-1)]

    def const_scalar(self, i: int, what: str = "") -> Any:
        arr = self.const(i, what)
        if arr.size != 1:
            raise Unsupported(f"input {i} ({what}) must be a scalar, got shape {arr.shape}")
        return arr.reshape(-1)[0].item() if arr.dtype != object else _int_or_expr(arr.reshape(-1)[0])

    def convert_graph(self, builder: "BlockBuilder", attr: str,
                      bound: "dict[str, Value]") -> list[Value]:
        """Convert the subgraph in attribute ``attr`` (an If branch, a Loop
        or Scan body) into ``builder``'s open function, its inputs bound to
        ``bound`` (by name); returns the values of its outputs."""
        graph = self.attrs.get(attr)
        if graph is None:
            raise Unsupported(f"attribute {attr!r} (a subgraph) is missing")
        if self._graphs is None:
            raise Unsupported(f"subgraph attribute {attr!r} outside a model import")
        return self._graphs(builder, graph, bound)

    def with_builder(self, builder: "BlockBuilder") -> "NodeContext":
        """This node's context emitting into ``builder`` (a branch or loop body)."""
        return NodeContext(builder, self.node, self.index, self.opset, self.inputs, self.attrs,
                           self.span, self.hint, self.params, self._graphs, self.formats,
                           self.constants)

    # -- value properties --------------------------------------------------------
    @staticmethod
    def sinfo(v: Value) -> TensorStructInfo:
        if isinstance(v, np.ndarray):
            return TensorStructInfo(v.shape, "int64" if v.dtype == object else str(v.dtype))
        if isinstance(v, SeqValue):
            raise Unsupported("a sequence where a tensor is needed")
        s = v.struct_info
        if not isinstance(s, TensorStructInfo):
            raise Unsupported("an input is not a tensor")
        return s

    def dtype(self, v: Value) -> str:
        return self.sinfo(v).dtype

    def ndim(self, v: Value) -> int:
        n = self.sinfo(v).ndim
        if n < 0:
            raise Unsupported("an input has unknown rank")
        return n

    def shape(self, v: Value) -> list[Any]:
        """Dimensions as ints where constant, symbolic PrimExprs otherwise."""
        s = self.sinfo(v)
        if s.shape is None:
            raise Unsupported("an input has an unknown shape")
        return [_int_or_expr(d) for d in s.shape]

    def static_shape(self, v: Value, what: str = "the input") -> list[int]:
        dims = self.shape(v)
        if any(not isinstance(d, int) for d in dims):
            raise Unsupported(f"{what} needs static dimensions, but has shape "
                              f"({', '.join(str(d) for d in dims)})")
        return dims

    # -- building ----------------------------------------------------------------
    def expr(self, v: Value) -> Expr:
        """``v`` as a Relax expression (a known array becomes ``R.const``).

        The same array (an initializer read by several nodes) becomes the
        same Constant every time: a Constant copies its array, and an
        unrolled recurrence's 20 steps each reading one 6.5 MB weight made
        20 copies of it, which the executable kept and every call streamed
        from memory (the packed forms too, PackConstantWeights)."""
        if isinstance(v, SeqValue):
            raise Unsupported("a sequence where a tensor is needed (in a subgraph's outputs?)")
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                return materialize(self.builder, v, self.hint, self.span)
            known = self.constants.get(id(v))
            if known is not None and known[0] is v:
                return known[1]
            const = Constant(v, span=self.span)
            self.constants[id(v)] = (v, const)  # (the array kept: its id is not reused)
            return const
        return v

    def _operand(self, a: Any) -> Any:
        if isinstance(a, np.ndarray):
            return self.expr(a)
        if isinstance(a, (list, tuple)):
            return type(a)(self._operand(x) for x in a)
        return a

    def emit(self, op: str, *args: Any, fold: bool = True, **attrs: Any) -> Value:
        """``R.<op>(*args, **attrs)``: folded when every operand is known
        (unless ``fold=False``), otherwise bound to a fresh variable named
        after the node's output.

        Operands are values, Python tuples of ints/dimensions for shape
        operands, or lists of values for tuple operands (``concat``).
        """
        opdef = resolve_op(op, self.span)
        # shape values beside run-time tensors (a mask times the sequence
        # length) are materialized as int64 tensors and computed at run time
        if any(_has_symbolic(a) for a in args) \
                and all(_sym_value(a) is not UNKNOWN for a in args):
            if opdef.name in _SYM_BINARY or opdef.name in _SYM_MOVE \
                    or not _run_time_only(opdef.name, attrs):
                return self._fold_symbolic(opdef.name, args, attrs)
        call = call_op(opdef.name, *[self._operand(a) for a in args], span=self.span, **attrs)
        folded = self._fold(call) if fold else None
        if folded is not None:
            return folded
        if opdef.pattern <= OpPattern.BROADCAST and _undecided(call.struct_info):
            call = self._conformed(call, attrs)
        return self.builder.emit(call, self.hint)

    def _conformed(self, call: Call, attrs: dict[str, Any]) -> Call:
        """An elementwise call whose operands' dimensions phasec cannot prove
        equal at import, though they are related (``seq`` and
        ``T.min(seq, 128)``: PyTorch's ``table[:, :seq]`` beside a tensor of
        ``seq`` rows): ONNX requires them equal (or 1) at run time, so each
        operand is checked there against the simplest of the candidates
        (``R.match_cast``, an error when they differ) and the result keeps a
        known shape. Unrelated symbolic dimensions (``batch`` against
        ``seq``, where either may be 1) are left as they were."""
        args = list(call.args)
        shapes = [a.struct_info.shape if isinstance(a.struct_info, TensorStructInfo) else None
                  for a in args]
        if any(sh is None for sh in shapes):
            return call
        n = max(len(sh) for sh in shapes)
        targets = [list(sh) for sh in shapes]
        for i in range(1, n + 1):
            dims = [sh[-i] for sh in shapes if len(sh) >= i and arith.const_int(sh[-i]) != 1]
            if len(dims) < 2:
                continue
            pick = min(dims, key=_complexity)
            names = {id(v) for v in arith.free_vars(tir.as_prim_expr(pick))}
            for k, sh in enumerate(shapes):
                d = sh[-i] if len(sh) >= i else None
                if d is None or d is pick or arith.const_int(d) == 1 \
                        or arith.prove_equal(d, pick):
                    continue
                if not names & {id(v) for v in arith.free_vars(d)}:
                    return call  # unrelated dimensions: either may broadcast at run time
                targets[k][len(sh) - i] = pick
        for k, (arg, sh) in enumerate(zip(args, shapes)):
            if targets[k] != list(sh):
                sinfo = TensorStructInfo(tuple(targets[k]), arg.struct_info.dtype)
                args[k] = self.builder.match_cast(arg, sinfo, self.hint)
        return call_op(call.op.name, *args, span=self.span, **attrs)

    def iota(self, n: int, shape: Sequence[int] | None = None) -> Value:
        """``0, 1, ..., n - 1`` as int64, reshaped to ``shape``: an array at
        import within the budget of evaluation ahead of run time, an
        ``R.arange`` computed at run time past it."""
        if within_budget(n):
            arr = np.arange(n, dtype=np.int64)
            return arr if shape is None else arr.reshape(shape)
        out = self.emit("arange", 0, n, 1, dtype="int64")
        return out if shape is None else self.emit("reshape", out, tuple(shape))

    def emit_tuple_item(self, tup: Value, index: int) -> Value:
        if isinstance(tup, tuple):
            return tup[index]
        return self.builder.emit(TupleGetItem(tup, index, span=self.span), self.hint)

    def emit_multi(self, op: str, *args: Any, **attrs: Any) -> list[Value]:
        """An operator returning a tuple (``split``): one value per field."""
        opdef = resolve_op(op, self.span)
        if any(_has_symbolic(a) for a in args):
            out = self._fold_symbolic(opdef.name, args, attrs)
            return list(out)  # type: ignore[arg-type]
        call = call_op(opdef.name, *[self._operand(a) for a in args], span=self.span, **attrs)
        folded = self._fold(call)
        if folded is not None:
            return list(folded)  # type: ignore[arg-type]
        tup = self.builder.emit(call, self.hint)
        if not isinstance(call.struct_info, TupleStructInfo):
            return [tup]  # a single result (e.g. unique with nothing else asked for)
        n = len(call.struct_info.fields)
        return [self.builder.emit(TupleGetItem(tup, k, span=self.span), self.hint)
                for k in range(n)]

    # -- folding ----------------------------------------------------------------
    @contextlib.contextmanager
    def weight_transform(self) -> Iterator[None]:
        """Within: a call on known operands is computed at import whatever its
        size, as long as its result has no more elements than its largest
        operand (a weight shifted, summed, dequantized or transposed: the
        file's own bytes bound it). The fold budget bounds what a model makes
        up from small values; past it, such a transform of a constant weight
        ran on every call (ddddocr's 1024 x 8210 uint8 MatMulInteger weight,
        its 2 x 512 x 2048 DynamicQuantizeLSTM weights: 4.5 ms of 26)."""
        outer, self._weights = self._weights, True
        try:
            yield
        finally:
            self._weights = outer

    def _fold(self, call: Call) -> Any:
        """The call's value computed at import (phasec.op.fold: the budget and
        error policy FoldConstant has; see :meth:`weight_transform`), or None:
        it stays a run-time call."""
        budget = None
        if self._weights:
            largest = max((a.data.size for a in call.args if isinstance(a, Constant)),
                          default=0)
            budget = max(MAX_FOLD_ELEMENTS, largest)
        value = evaluate_call(call, max_elements=budget)
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(_contiguous(v) for v in value)
        return _contiguous(value)

    def _fold_symbolic(self, name: str, args: Sequence[Any], attrs: dict[str, Any]) -> Any:
        opdef = get_op(name)
        norm = normalize_attrs(opdef, attrs, self.span)
        vals = [_sym_value(a) for a in args]
        if any(v is UNKNOWN for v in vals):
            raise Unsupported(f"{opdef.script_name} mixes symbolic shape values with run-time "
                              "tensors; only shape computations on known values are supported")
        try:
            # the result's size before it is made (the references allocate it)
            if name in _SYM_BINARY or name == "relax.where":
                _check_budget(opdef.script_name, np.broadcast_shapes(*map(np.shape, vals)))
            elif name == "relax.broadcast_to":
                _check_budget(opdef.script_name, tuple(vals[1]))
            if name in _SYM_BINARY:
                fn = np.frompyfunc(_SYM_BINARY[name], 2, 1)
                a, b = (np.asarray(v, dtype=object) for v in vals)
                out = fn(a, b)
                if name in ("relax.equal", "relax.not_equal"):
                    return np.asarray(out, dtype=bool)
                return settle(np.asarray(out, dtype=object))
            if name == "relax.astype":
                if norm["dtype"].startswith(("int", "uint")):
                    return settle(np.asarray(vals[0], dtype=object))
            elif name in _SYM_MOVE:
                ref = opdef.reference
                if name == "relax.concat":
                    out = ref([np.asarray(v, dtype=object) for v in vals[0]], **norm)
                elif name == "relax.where":
                    out = np.where(np.asarray(vals[0], bool), np.asarray(vals[1], object),
                                   np.asarray(vals[2], object))
                else:
                    out = ref(*[np.asarray(v, dtype=object) if isinstance(v, np.ndarray) else v
                                for v in vals], **norm)
                _check_budget(opdef.script_name, np.shape(out))
                return settle(np.asarray(out, dtype=object))
        except Unsupported:
            raise
        except (TypeError, ValueError, IndexError) as exc:
            raise Unsupported(f"{opdef.script_name} on symbolic shape values: {exc}") from None
        raise Unsupported(f"{opdef.script_name} on symbolic shape values (dynamic dimensions) "
                          "is not supported at import")


def _run_time_only(name: str, attrs: dict[str, Any]) -> bool:
    """Operators on shape values that import does not evaluate (a length cast
    to float for a scale, its square root...): computed at run time on the
    materialized values. An integer cast stays an import-time identity."""
    if name == "relax.astype":
        return not str(attrs.get("dtype", "")).startswith(("int", "uint"))
    return True


def materialize(builder: "BlockBuilder", value: np.ndarray, hint: str,
                span: Span | None = None) -> Expr:
    """A symbolic shape value as a run-time int64 tensor of its own shape:
    ``R.shape_to_tensor(R.shape([...]))``, reshaped when it is not 1-D (a
    0-d value stays 0-d). The symbolic dimensions are bound from the inputs'
    shapes at run time."""
    flat = tuple(tir.as_prim_expr(_int_or_expr(x)) for x in value.reshape(-1))
    out = builder.emit(call_op("relax.shape_to_tensor", ShapeExpr(flat), span=span), hint)
    if value.shape != (len(flat),):
        out = builder.emit(call_op("relax.reshape", out, ShapeExpr(value.shape), span=span), hint)
    return out


def _undecided(sinfo: Any) -> bool:
    """A tensor result whose rank is known but not its shape."""
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is None and sinfo.ndim >= 0


def _complexity(d: Any) -> tuple[int, str]:
    """Orders candidate dimensions: a constant, then a variable, then longer
    expressions."""
    if arith.const_int(d) is not None:
        return (0, "")
    text = str(d)
    return (1 if isinstance(d, tir.Var) else 2 + len(text), text)


def _contiguous(value: Any) -> np.ndarray:
    """``value`` as a C-contiguous array of its own shape: a 0-d value stays
    0-d (``np.ascontiguousarray`` would make it shape (1,), and a shape
    chain ``Shape -> Gather(0-d index) -> Unsqueeze -> Concat`` would then
    mix ranks)."""
    return np.require(np.asarray(value), requirements="C")


def _check_budget(what: str, shape: tuple[Any, ...]) -> None:
    """Symbolic shape values are evaluated at import or not at all: within
    the budget of evaluation ahead of run time (phasec.op.fold), as every
    value computed at import. (A shape with symbolic dimensions is left to
    the evaluation, which refuses it.)"""
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        return
    if not within_budget(math.prod(shape)):
        raise Unsupported(f"{what} on symbolic shape values makes {math.prod(shape)} "
                          "elements, more than the budget of evaluation at import "
                          "(phasec.op.fold.MAX_FOLD_ELEMENTS)")


def _has_symbolic(a: Any) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype == object
    if isinstance(a, (list, tuple)):
        return any(_has_symbolic(x) for x in a)
    return False


def _sym_value(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, list):
        vals = [_sym_value(x) for x in a]
        return UNKNOWN if any(v is UNKNOWN for v in vals) else vals
    if isinstance(a, tuple):
        return a
    if isinstance(a, Constant):
        return a.data
    return UNKNOWN
