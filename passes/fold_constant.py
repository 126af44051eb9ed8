"""FoldConstant: evaluate operator calls whose operands are all constants.

A call of a pure compute operator (``R.add``, ``R.multiply``, ``R.reshape``,
``R.nn.conv2d``...) whose tensor operands are constants, or variables bound
to constants, and whose other operands are constant shapes, prim values,
strings or dtypes, is evaluated at compile time with the operator's numpy
reference implementation, through the reference interpreter
(:mod:`phasec.interp`), and replaced by the resulting ``R.const``. A
variable bound to a folded constant folds its users in turn, so chains fold
completely (the intermediate bindings stay; DeadCodeElimination removes the
unused ones). Elements of constant tuples (``R.split`` results) fold too.

No compile engine or target is involved: the numbers come from the same
numpy references that define the operators' semantics, so folding cannot
change results. The folded constant gets the call's inferred dtype and is
only kept when its shape is the inferred one.

Not folded:

* results with more than ``max_elements`` elements (default ``1 << 20``),
  so folding never blows up the module (broadcasts of small constants),
  unless the result is a *splat* (every element the same bits): an
  elementwise, broadcast or injective call (``R.full``, ``R.permute_dims``,
  ``R.reshape``, ``R.add``...) of splat constants whose result is a splat
  too. A splat costs one element in the executable
  (:class:`~phasec.backend.vm.executable.ConstantPool` keeps it as its value
  and shape, materialized once when a VM first runs a function using it,
  shared between equal splats), while left unfolded it is recomputed and
  rewritten on every call (ONNX ``ConstantOfShape`` weights of the ONNX
  test models: ResNet-50 rebuilt 44 MB of them per call). The folded
  constant holds a broadcast view of the one element, not a full-size copy.
  Fills and layout ops of splats fold without evaluating; other ops are
  evaluated up to ``_MAX_SPLAT_ELEMENTS`` elements. Memory: a VM holds a
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

from phasec.interp import Interpreter
from phasec.ir import (
    Binding, Call, Constant, DataflowVar, DataTypeImm, Expr, ExprMutator, Function, IRModule,
    Op, Phase, PrimValue, ShapeExpr, StringImm, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, is_splat, tir,
)
from phasec.op import OpPattern, find_op
from phasec.transform import PassConfigError, module_pass, register_pass
from phasec.transform.info import is_int_at_least

from phasec.passes.lambda_lifting import is_byoc_function

__all__ = ["FoldConstant"]

#: Largest splat result evaluated (elements): folding evaluates it at full
#: size once (the numpy reference), so this bounds the build's transient
#: memory. Fills and layout ops of splats (``R.full``, ``R.permute_dims``...)
#: are not evaluated (see ``_splat_element``) and fold whatever their size.
_MAX_SPLAT_ELEMENTS = 1 << 25


#: ops whose result, for splat operands, is a splat of the first tensor
#: operand's element (moved or copied elements), or of their fill value
_SPLAT_LAYOUT = frozenset({"relax.permute_dims", "relax.reshape", "relax.broadcast_to",
                           "relax.expand_dims", "relax.squeeze", "relax.flatten",
                           "relax.astype"})
_SPLAT_FILL = {"relax.zeros_like": 0, "relax.ones_like": 1}


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
    return Constant(np.broadcast_to(one, tuple(d.value for d in sinfo.shape)))


class _Folder(ExprMutator):
    """Folds bindings in program order; remembers variables bound to constants."""

    def __init__(self, interp: Interpreter, max_elements: int) -> None:
        super().__init__()
        self.interp = interp
        self.max_elements = max_elements
        self.consts: dict[Var, Expr] = {}   # var -> Constant or Tuple of Constants
        self.splats: dict[int, tuple[bool, np.ndarray]] = {}  # id(data) -> (is_splat, data)

    # -- operands ---------------------------------------------------------------
    def _is_const_leaf(self, e: Expr) -> bool:
        t = type(e)
        if t is ShapeExpr:
            return all(type(v) is tir.IntImm for v in e.values)
        if t is PrimValue:
            return type(e.value) in (tir.IntImm, tir.FloatImm)
        return t is StringImm or t is DataTypeImm

    def _operand(self, e: Expr, bindings: dict, tensors: list) -> bool:
        """Can ``e`` be evaluated now? Records variables' values in ``bindings``."""
        stack = [e]
        while stack:
            x = stack.pop()
            t = type(x)
            if t is Constant:
                tensors.append(x)
            elif t is Var or t is DataflowVar:
                const = self.consts.get(x)
                if const is None:
                    return False
                bindings[x] = self._value(const)
                tensors.append(const)
            elif t is Tuple:
                stack.extend(x.fields)
            elif not self._is_const_leaf(x):
                return False
        return True

    @staticmethod
    def _value(const: Expr) -> Any:
        if type(const) is Constant:
            return const.data
        return tuple(_Folder._value(f) for f in const.fields)

    # -- folding ----------------------------------------------------------------
    def _fold_call(self, call: Call) -> Expr | None:
        op = call.op
        if type(op) is not Op:
            return None
        opdef = find_op(op.name)
        if opdef is None or not opdef.pure or opdef.reference is None \
                or opdef.category != "compute":
            return None
        bindings: dict[Var, Any] = {}
        tensors: list[Expr] = []
        for a in call.args:
            if not self._operand(a, bindings, tensors):
                return None
        if not tensors:
            return None  # creation from shapes only: keep the small program
        fits = self._fits(call.struct_info, self.max_elements)
        if not fits:
            if not self._splat_candidate(opdef.pattern, tensors, call.struct_info):
                return None
            element = _splat_element(op.name, call.args, tensors)
            if element is not None:  # known without evaluating the whole result
                return _splat_const(element, call.struct_info)
            if not self._fits(call.struct_info, _MAX_SPLAT_ELEMENTS):
                return None  # evaluating it would take too much memory
        try:
            with np.errstate(all="ignore"):
                result = self.interp.eval_expr(call, bindings)
        except Exception:  # noqa: BLE001 - a failing operator fails at run time instead
            return None
        if not fits:
            if not (isinstance(result, np.ndarray) and is_splat(result)):
                return None  # too big, and not a splat after all (e.g. R.pad's border)
            return _splat_const(result.reshape(-1)[0], call.struct_info)
        return self._to_const(result, call.struct_info)

    def _splat_candidate(self, pattern: OpPattern, tensors: list, sinfo: Any) -> bool:
        """May this oversized call fold to a splat? Its operands must all be
        splat tensors and the op one that maps elements to elements (an
        injective op only moves or copies them), so the result is a splat
        unless the op makes up values of its own (checked after evaluating)."""
        if pattern > OpPattern.INJECTIVE or type(sinfo) is not TensorStructInfo:
            return False
        if not self._fits(sinfo, 1 << 62):  # (static shapes only)
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

    @staticmethod
    def _fits(sinfo: Any, limit: int) -> bool:
        """Known to be within ``limit`` elements (static shapes only)."""
        total = 0
        stack = [sinfo]
        while stack:
            s = stack.pop()
            if type(s) is TupleStructInfo:
                stack.extend(s.fields)
                continue
            if type(s) is not TensorStructInfo or s.shape is None:
                return False
            n = 1
            for d in s.shape:
                if type(d) is not tir.IntImm:
                    return False
                n *= d.value
            total += n
        return total <= limit

    def _to_const(self, value: Any, sinfo: Any) -> Expr | None:
        if type(sinfo) is TupleStructInfo:
            if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
                return None
            fields = [self._to_const(v, s) for v, s in zip(value, sinfo.fields)]
            if any(f is None for f in fields):
                return None
            return Tuple(fields)
        if type(sinfo) is not TensorStructInfo:
            return None
        arr = np.asarray(value)
        if sinfo.dtype != "void" and str(arr.dtype) != sinfo.dtype:
            arr = arr.astype(sinfo.dtype)
        if arr.shape != tuple(d.value for d in sinfo.shape):
            return None
        return Constant(arr)

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

    max_elements: int = 1 << 20

    def __post_init__(self) -> None:
        if not is_int_at_least(self.max_elements, 0):
            raise PassConfigError(f"FoldConstant(max_elements=...) must be an int >= 0, "
                                  f"not {self.max_elements!r}")

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        interp = Interpreter(mod)
        # _Folder.visit_function_ leaves BYOC functions alone.
        return mod.map_functions(
            lambda _, func: _Folder(interp, self.max_elements).visit_expr(func))

