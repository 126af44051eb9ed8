"""FoldConstant: evaluate operator calls whose operands are all constants.

A call of a pure compute operator (``R.add``, ``R.multiply``, ``R.reshape``,
``R.nn.conv2d``...) whose tensor operands are constants, or variables bound
to constants, and whose other operands are constant shapes, prim values,
strings or dtypes, is evaluated at compile time with the operator's numpy
reference implementation (:func:`phasec.op.fold.evaluate_call`, the
evaluation the ONNX importer uses too: one budget, one error policy) and
replaced by the resulting ``R.const``. A
variable bound to a folded constant folds its users in turn, so chains fold
completely (the intermediate bindings stay; DeadCodeElimination removes the
unused ones). Elements of constant tuples (``R.split`` results) fold too.

The same call of the same constants (one weight transposed at every step
of an unrolled recurrence) folds once, into one Constant the calls share.

No compile engine or target is involved: the numbers come from the same
numpy references that define the operators' semantics, so folding cannot
change results. The folded constant gets the call's inferred dtype and is
only kept when its shape is the inferred one.

Not folded:

* results with more than ``max_elements`` elements (default
  :data:`~phasec.op.fold.MAX_FOLD_ELEMENTS`, ``1 << 20``, the budget of
  all evaluation ahead of run time), so folding never blows up the module
  (broadcasts of small constants), unless the call only rearranges one
  constant (``R.permute_dims``/``R.reshape``... of a weight: a tied LM head
  transposed its 50257x512 embedding on every call), which folds into a
  copy of what the model already holds, at most
  :data:`REARRANGED_COPIES` copies of one constant, or unless the result is a *splat* (every element the same bits): an
  elementwise, broadcast or injective call (``R.full``, ``R.permute_dims``,
  ``R.reshape``, ``R.add``...) of splat constants whose result is a splat
  too. A splat costs one element in the executable
  (:class:`~phasec.backend.vm.executable.ConstantPool` keeps it as its value
  and shape, materialized once when a VM first runs a function using it,
  shared between equal splats), while left unfolded it is recomputed and
  rewritten on every call (ONNX ``ConstantOfShape`` weights of the ONNX
  test models: ResNet-50 rebuilt 44 MB of them per call). The folded
  constant holds a broadcast view of the one element, not a full-size copy.
  Fills and layout ops of splats fold without evaluating, whatever their
  size; other ops are evaluated within the budget (``max_elements`` lowered
  below it only limits what is kept as a full-size constant). Memory: a VM holds a
  materialized splat while it lives, as any weight; unfolded, every call
  allocated and filled the same bytes;
* calls without any constant tensor operand (``R.zeros(shape)``,
  ``R.ones(shape)``): they would only turn a small program into a big
  constant;
* impure operators, calls of functions, ``call_tir`` / packed calls;
* a call whose evaluation fails (e.g. an index out of range in ``R.take``):
  the error is left to happen at run time, where it belongs;
* anything inside a function with a ``Codegen`` or ``Composite`` attribute
  (an external backend's function or pattern).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.ir import (
    Binding, Call, Constant, DataflowVar, Expr, ExprMutator, Function, IRModule, Op, Phase,
    TensorStructInfo, Tuple, TupleGetItem, Var, is_splat,
)
from phasec.op import OpPattern, find_op
from phasec.op.fold import (
    MAX_FOLD_ELEMENTS, UNKNOWN, evaluate_call, foldable, known_value, static_elements,
    static_shape,
)
from phasec.transform import PassConfigError, module_pass, register_pass
from phasec.transform.info import is_int_at_least

from phasec.passes.lambda_lifting import is_byoc_function

__all__ = ["FoldConstant"]

#: ops whose result, for splat operands, is a splat of the first tensor
#: operand's element (moved or copied elements), or of their fill value
_SPLAT_LAYOUT = frozenset({"relax.permute_dims", "relax.reshape", "relax.broadcast_to",
                           "relax.expand_dims", "relax.squeeze", "relax.flatten",
                           "relax.astype"})
_SPLAT_FILL = {"relax.zeros_like": 0, "relax.ones_like": 1}

#: ops that only rearrange one tensor's elements: a weight transposed or
#: reshaped on every call (a tied LM head's ``Transpose(W)``) folds whatever
#: its size, into one more copy of a weight the model already holds
_REARRANGE = frozenset({"relax.permute_dims", "relax.reshape", "relax.expand_dims",
                        "relax.squeeze", "relax.flatten"})
#: how many rearranged copies of one constant fold past ``max_elements``
#: (chains included): the module grows at most this many times its weights
REARRANGED_COPIES = 2


def _splat_element(op: str, args: Any, tensors: list) -> Any:
    """The element of a splat result that needs no evaluation (a fill or a
    moved element; the caller casts it to the result's dtype), or None."""
    if op == "relax.full" and len(tensors) == 1:
        return tensors[0].data.reshape(-1)[0]
    if op == "relax.full_like" and len(tensors) == 2:
        return tensors[1].data.reshape(-1)[0]
    if op in _SPLAT_FILL:
        return _SPLAT_FILL[op]
    if op in _SPLAT_LAYOUT and len(tensors) == 1:
        return tensors[0].data.reshape(-1)[0]
    return None


def _splat_const(element: Any, sinfo: Any) -> Constant | None:
    """A splat constant of ``sinfo`` (static shape): a read-only broadcast of
    one element, which :class:`Constant` keeps as it is (no full-size copy)."""
    if type(sinfo) is not TensorStructInfo or sinfo.dtype == "void":
        return None
    one = np.asarray(element).astype(sinfo.dtype).reshape(())
    return Constant(np.broadcast_to(one, static_shape(sinfo)))


def _operand_key(value: Any) -> Any:
    """A hashable key of a known operand (or attribute): arrays by
    identity (a large array's repr elides its middle), tuples and lists by
    their items, anything else (shapes, scalars, strings) by its repr."""
    if isinstance(value, np.ndarray):
        return ("array", id(value))
    if isinstance(value, (tuple, list)):
        return tuple(_operand_key(v) for v in value)
    return (type(value).__name__, repr(value))


def _as_expr(value: Any) -> Expr:
    """An evaluated value (an array, or a tuple of them) as a constant expression."""
    if isinstance(value, tuple):
        return Tuple([_as_expr(v) for v in value])
    return Constant(value)


class _Folder(ExprMutator):
    """Folds bindings in program order; remembers variables bound to constants."""

    def __init__(self, max_elements: int) -> None:
        super().__init__()
        self.max_elements = max_elements
        self.consts: dict[Var, Expr] = {}   # var -> Constant or Tuple of Constants
        self.splats: dict[int, tuple[bool, np.ndarray]] = {}  # id(data) -> (is_splat, data)
        # id(data) of a rearranged copy -> id(data) of the constant it copies, and how
        # many copies each original has (the arrays live in the module: ids stay theirs)
        self.origin: dict[int, int] = {}
        self.copies: dict[int, int] = {}
        # a call folded before, by its op, attributes and operands (arrays by
        # identity) -> (its folded expression or None, the operands and the
        # call, kept so that their arrays' ids stay theirs): the same call of
        # the same constants
        # (one weight transposed at each step of an unrolled recurrence)
        # folds into the same Constant, not one copy per call
        self.folded: dict[tuple, tuple[Expr | None, tuple[list, Call]]] = {}

    def _tensor_operands(self, args: tuple[Expr, ...]) -> list[Expr]:
        """The constant tensors among known operands (through tuples, and
        variables bound to constants: a Constant or a Tuple of them)."""
        tensors: list[Expr] = []
        for arg in args:  # in operand order: _splat_element reads the first ones
            stack = [arg]
            while stack:
                x = stack.pop()
                t = type(x)
                if t is Constant:
                    tensors.append(x)
                elif t is Var or t is DataflowVar:
                    tensors.append(self.consts[x])
                elif t is Tuple:
                    stack.extend(x.fields)
        return tensors

    # -- folding ----------------------------------------------------------------
    def _fold_call(self, call: Call) -> Expr | None:
        op = call.op
        if type(op) is not Op:
            return None
        opdef = find_op(op.name)
        if opdef is None or not foldable(opdef):
            return None
        operands = [known_value(a, self.consts.get) for a in call.args]
        if any(v is UNKNOWN for v in operands):
            return None
        tensors = self._tensor_operands(call.args)
        if not tensors:
            return None  # creation from shapes only: keep the small program
        key = (op.name, _operand_key(sorted(call.attrs.items())), repr(call.sinfo_args),
               _operand_key(operands))
        known = self.folded.get(key)
        if known is None:
            known = self.folded[key] = (self._evaluate(call, opdef, operands, tensors),
                                        (operands, call))
        return known[0]

    def _evaluate(self, call: Call, opdef: Any, operands: list, tensors: list) -> Expr | None:
        """The folded value of ``call`` (its operands known), or None."""
        op = call.op
        sinfo = call.struct_info
        n = static_elements(sinfo)
        if n is None:
            return None
        kept_whole = n <= self.max_elements
        if not kept_whole:  # past max_elements: folded only as a splat (one element)
            if not self._splat_candidate(opdef.pattern, tensors, sinfo):
                return self._fold_rearrangement(call, operands, tensors, n)
            element = _splat_element(op.name, call.args, tensors)
            if element is not None:  # known without evaluating the whole result
                return _splat_const(element, sinfo)
        value = evaluate_call(call, operands, max_elements=max(self.max_elements,
                                                               MAX_FOLD_ELEMENTS))
        if value is None:
            return None
        if not kept_whole:
            if not is_splat(value):
                return None  # too big, and not a splat after all (e.g. R.pad's border)
            return _splat_const(value.reshape(-1)[0], sinfo)
        return _as_expr(value)

    def _fold_rearrangement(self, call: Call, operands: list, tensors: list, n: int
                            ) -> Expr | None:
        """``permute_dims``/``reshape``... of one constant past ``max_elements``:
        folded while that constant has fewer than :data:`REARRANGED_COPIES`
        copies (a hostile chain of transposes cannot multiply the weights)."""
        if call.op.name not in _REARRANGE or len(tensors) != 1 or type(tensors[0]) is not Constant:
            return None
        data = tensors[0].data
        if data.size != n:
            return None
        origin = self.origin.get(id(data), id(data))
        if self.copies.get(origin, 0) >= REARRANGED_COPIES:
            return None
        value = evaluate_call(call, operands, max_elements=n)
        if not isinstance(value, np.ndarray):
            return None
        folded = Constant(value)
        self.copies[origin] = self.copies.get(origin, 0) + 1
        self.origin[id(folded.data)] = origin
        return folded

    def _splat_candidate(self, pattern: OpPattern, tensors: list, sinfo: Any) -> bool:
        """May this oversized call fold to a splat? Its operands must all be
        splat tensors and the op one that maps elements to elements (an
        injective op only moves or copies them), so the result is a splat
        unless the op makes up values of its own (checked after evaluating)."""
        if pattern > OpPattern.INJECTIVE or type(sinfo) is not TensorStructInfo:
            return False
        for t in tensors:
            if type(t) is not Constant:
                return False
            known = self.splats.get(id(t.data))
            if known is None:  # (the array is kept with its answer, so its id stays its own)
                known = self.splats[id(t.data)] = (is_splat(t.data), t.data)
            if not known[0]:
                return False
        return True

    # -- traversal ----------------------------------------------------------------
    def visit_function_(self, func: Function) -> Expr:
        if is_byoc_function(func):
            return func  # an external backend's function (or pattern): left as it is
        return super().visit_function_(func)

    def visit_binding(self, binding: Binding):
        value = self.visit_expr(binding.value)
        var = binding.var
        folded = None
        t = type(value)
        if t is Call:
            folded = self._fold_call(value)
        elif t is TupleGetItem:
            const = self.consts.get(value.tuple_value)
            if type(const) is Tuple:
                folded = const.fields[value.index]
        elif t is Var or t is DataflowVar:
            const = self.consts.get(value)
            if const is not None:
                self.consts[var] = const
        if folded is not None:
            value = folded
        if type(value) is Constant or (type(value) is Tuple and value.fields and all(
                type(f) is Constant for f in value.fields)):
            self.consts[var] = value
        return binding.rebind(value)


@register_pass
@module_pass(opt_level=0, phases=Phase.OPTIMIZATION, name="FoldConstant")
class FoldConstant:
    """Evaluate calls whose operands are all constants (numpy references)."""

    max_elements: int = MAX_FOLD_ELEMENTS

    def __post_init__(self) -> None:
        if not is_int_at_least(self.max_elements, 0):
            raise PassConfigError(f"FoldConstant(max_elements=...) must be an int >= 0, "
                                  f"not {self.max_elements!r}")

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        # _Folder.visit_function_ leaves BYOC functions alone.
        return mod.map_functions(lambda _, func: _Folder(self.max_elements).visit_expr(func))

