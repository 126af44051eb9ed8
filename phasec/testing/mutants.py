"""A catalogue of mutant passes: plausible bugs a pass author could write.

Each :class:`Mutant` builds a pass through the public decorators
(:func:`~phasec.transform.function_pass`, :func:`~phasec.transform.module_pass`)
that changes a program the way a buggy pass would. The catalogue is made
from the operator registry, nothing listed by hand but the built-in passes'
bugs:

* ``swap``: a non-commutative binary elementwise operator with its operands
  swapped (commutative ones, found by evaluating the numpy reference both
  ways, are not mutants);
* ``drop``: a unary elementwise operator removed (its operand used instead);
* ``neighbour``: a unary elementwise operator replaced by the next one of
  the registry taking the same operand kinds;
* ``attr``: a shape or axis attribute off by one (``axis``, ``k``,
  ``repeats``...);
* ``reduce``: a reduction over a wrong axis, or with ``keepdims`` flipped;
* ``builtin``: bugs in the built-in passes' own logic (FoldConstant folding
  one operator wrongly, FuseOps dropping a fused function's epilogue,
  LegalizeOps lowering with a loop bound off by one).

A mutant is *equivalent* when no program can observe it; such mutants keep
their reason in :attr:`Mutant.equivalent` (e.g. dropping ``stop_fusion``,
an identity on values). ``bench/bench_mutation.py`` reports the fraction of
the others that :func:`phasec.testing.check_pass` kills.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.expr import Binding, Call, Constant, Expr, Function, Op, SeqExpr, Var
from phasec.ir.module import IRModule
from phasec.ir.node import children
from phasec.ir.phase import Phase
from phasec.ir.structural import structural_equal
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.ir.visitor import ExprMutator
from phasec.op import REQUIRED, InferContext, OpPattern, find_op
from phasec.op.infer import infer_struct_info
from phasec.testing._optable import op_names
from phasec.transform import Pass, PassContext, function_pass, get_pass, module_pass

__all__ = ["Mutant", "catalogue", "FAMILIES", "SHAPE_ATTRS", "operator_mutant"]

#: the families, in the order the benchmark reports them
FAMILIES = ("swap", "drop", "neighbour", "attr", "reduce", "builtin")

#: attributes that hold an axis, a count or a size: an off-by-one is plausible
SHAPE_ATTRS = ("axis", "axes", "k", "depth", "repeats", "indices_or_sections", "seq_axis",
               "batch_axis", "channel_axis", "num_groups", "upscale_factor", "batch_dims")

#: the phase operator mutants run in (where user passes rewrite operators)
_PHASES = (Phase.OPTIMIZATION,)


@dataclass(frozen=True)
class Mutant:
    """One mutant pass: ``make()`` builds it; ``equivalent`` is the reason no
    program can observe it (None: a real bug check_pass should find)."""

    name: str
    family: str
    description: str
    make: Callable[[], Pass]
    equivalent: str | None = None


# ---------------------------------------------------------------------------
# Rewriting the calls of one operator
# ---------------------------------------------------------------------------

class _Rewrite(ExprMutator):
    """Applies ``fn`` to each call of ``op`` (``fn`` returns the replacement
    or None to keep the call)."""

    def __init__(self, op: str, fn: Callable[[Call, InferContext], Expr | None],
                 ctx: InferContext, only_constant: bool = False) -> None:
        super().__init__()
        self.op, self.fn, self.ctx = op, fn, ctx
        self.only_constant = only_constant
        self.constants: set[Var] = set()

    def visit_binding(self, binding: Binding) -> Any:
        out = super().visit_binding(binding)
        if isinstance(binding.value, Constant):
            self.constants.add(binding.var)
        return out

    def _constant(self, e: Expr) -> bool:
        return isinstance(e, Constant) or e in self.constants

    def visit_call_(self, call: Call) -> Expr:
        call = super().visit_call_(call)  # type: ignore[assignment]
        if not (isinstance(call.op, Op) and call.op.name == self.op):
            return call
        if self.only_constant and not all(self._constant(a) for a in call.args):
            return call
        new = self.fn(call, self.ctx)
        return call if new is None else new


def _rewriter(op: str, fn: Callable[[Call, InferContext], Expr | None],
              only_constant: bool = False) -> Callable[[IRModule], IRModule]:
    def run(mod: IRModule) -> IRModule:
        ctx = InferContext({k: f.struct_info for k, f in mod.functions.items()
                            if isinstance(f, Function)})
        funcs = {}
        for name, func in mod.functions.items():
            if isinstance(func, Function):
                func = _Rewrite(op, fn, ctx, only_constant).visit_expr(func)
            funcs[name] = func
        return mod.update(funcs)
    return run


def _swap(call: Call, ctx: InferContext) -> Expr | None:
    return Call(call.op, [call.args[1], call.args[0], *call.args[2:]], call.attrs,
                call.sinfo_args, struct_info=call.struct_info)


def _drop(call: Call, ctx: InferContext) -> Expr | None:
    arg = call.args[0]
    if arg.struct_info is None or not structural_equal(arg.struct_info, call.struct_info):
        return None
    return arg


def _replace_by(other: str) -> Callable[[Call, InferContext], Expr | None]:
    def fn(call: Call, ctx: InferContext) -> Expr | None:
        return Call(Op(other), call.args, call.attrs, call.sinfo_args,
                    struct_info=call.struct_info)
    return fn


def _with_attrs(call: Call, ctx: InferContext, attrs: dict[str, Any],
                invalid_ok: bool = False) -> Expr | None:
    """``call`` with other attributes; its struct info is the inferred one
    (the binding keeps the old: a shape change is a bug the verifier
    reports). When inference refuses them: None, or with ``invalid_ok`` the
    call as a buggy pass would emit it (the verifier reports it)."""
    new = Call(call.op, call.args, attrs, call.sinfo_args)
    try:
        sinfo = infer_struct_info(new, ctx)
    except (PhasecError, ValueError, TypeError, IndexError):
        if not invalid_ok:
            return None
        sinfo = call.struct_info
    return Call(call.op, call.args, attrs, call.sinfo_args, struct_info=sinfo)


def _off_by_one(attr: str) -> Callable[[Call, InferContext], Expr | None]:
    def fn(call: Call, ctx: InferContext) -> Expr | None:
        attrs = dict(call.attrs or {})
        value = attrs.get(attr)
        if isinstance(value, bool):
            return None
        for delta in (1, -1):
            if isinstance(value, int):
                changed: Any = value + delta
            elif isinstance(value, tuple) and value and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value):
                changed = (value[0] + delta, *value[1:])
            else:
                return None
            new = _with_attrs(call, ctx, {**attrs, attr: changed}, invalid_ok=delta == -1)
            if new is not None:
                return new
        return None
    return fn


def _wrong_axis(call: Call, ctx: InferContext) -> Expr | None:
    attrs = dict(call.attrs or {})
    axis = attrs.get("axis")
    rank = len(call.args[0].struct_info.shape or ()) if getattr(
        call.args[0].struct_info, "shape", None) is not None else 0
    if axis is None:
        options: list[Any] = [0]  # all axes -> the first only
    elif isinstance(axis, int):
        options = [axis + 1, axis - 1]
    else:
        axes = tuple(axis)
        options = [axes[:-1] or None, tuple(a + 1 for a in axes)]
    for changed in options:
        if isinstance(changed, int) and not -rank <= changed < rank:
            continue
        new = _with_attrs(call, ctx, {**attrs, "axis": changed})
        if new is not None:
            return new
    return None


def _flip_keepdims(call: Call, ctx: InferContext) -> Expr | None:
    attrs = dict(call.attrs or {})
    return _with_attrs(call, ctx, {**attrs, "keepdims": not attrs.get("keepdims", False)})


_HOW: dict[str, Callable[[str, str | None], Callable[[Call, InferContext], Expr | None]]] = {
    "swap": lambda op, arg: _swap,
    "drop": lambda op, arg: _drop,
    "neighbour": lambda op, arg: _replace_by(arg or ""),
    "attr": lambda op, arg: _off_by_one(arg or ""),
    "axis": lambda op, arg: _wrong_axis,
    "keepdims": lambda op, arg: _flip_keepdims,
}


def operator_mutant(op: str, how: str, arg: str | None = None, *,
                    phases: Sequence[Phase] = _PHASES) -> Pass:
    """A function pass rewriting each call of ``op`` wrongly: ``how`` is
    ``"swap"``, ``"drop"``, ``"neighbour"`` (``arg``: the replacement),
    ``"attr"`` (``arg``: the attribute off by one), ``"axis"`` or
    ``"keepdims"``."""
    op = op if op.startswith("relax.") else "relax." + op
    fn = _HOW[how](op, arg)
    short = op.removeprefix("relax.")
    name = f"Mutant_{how}_{short}" + (f"_{arg.removeprefix('relax.')}" if arg else "")
    name = name.replace(".", "_")

    @function_pass(opt_level=0, phases=list(phases), name=name)
    def mutant(func: Function, mod: IRModule, ctx: PassContext) -> Function:
        ictx = InferContext({k: f.struct_info for k, f in mod.functions.items()
                             if isinstance(f, Function)})
        return _Rewrite(op, fn, ictx).visit_expr(func)  # type: ignore[return-value]

    return mutant


# ---------------------------------------------------------------------------
# Bugs in the built-in passes' own logic
# ---------------------------------------------------------------------------

def fold_constant_mutant(op: str, how: str, arg: str | None = None) -> Pass:
    """FoldConstant folding ``op`` wrongly: its calls on constant operands
    are folded as the operator mutant ``how`` would compute them."""
    real = get_pass("FoldConstant")
    fn = _HOW[how](op, arg)
    wrong = _rewriter(op, fn, only_constant=True)
    short = op.removeprefix("relax.").replace(".", "_")

    @module_pass(opt_level=0, phases=sorted(real.info.phases), name=f"FoldConstant_{how}_{short}")
    def fold(mod: IRModule, ctx: PassContext) -> IRModule:
        # the bug on the calls whose operands are constants in the input
        return real(wrong(mod))

    return fold


class _DropEpilogue(ExprMutator):
    """In a fused function with two operator calls or more whose result is an
    elementwise call of the shape and dtype of its operand: return the operand."""

    def __init__(self, out: Var) -> None:
        super().__init__()
        self.out = out

    def visit_binding(self, binding: Binding) -> Any:
        value = binding.value
        if binding.var is self.out and isinstance(value, Call) and isinstance(value.op, Op):
            opdef = find_op(value.op.name)
            arg = value.args[0] if value.args else None
            if (opdef is not None and opdef.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST)
                    and isinstance(arg, Var) and arg.struct_info is not None
                    and structural_equal(arg.struct_info, binding.var.struct_info)):
                return binding.rebind(arg)
        return binding


def _calls(func: Function) -> int:
    body = func.body
    if not isinstance(body, SeqExpr):
        return 0
    return sum(isinstance(b.value, Call) for block in body.blocks for b in block.bindings)


def fuse_ops_mutant() -> Pass:
    """FuseOps whose fused functions lose their epilogue (the last
    elementwise operator of a group of two or more)."""
    real = get_pass("FuseOps")

    @module_pass(opt_level=0, phases=sorted(real.info.phases), name="FuseOps_drop_epilogue")
    def fuse(mod: IRModule, ctx: PassContext) -> IRModule:
        mod = real(mod)
        funcs = {}
        for name, func in mod.relax_functions():
            body = func.body
            if func.attrs.get("Primitive") and _calls(func) >= 2 and isinstance(body, SeqExpr) \
                    and isinstance(body.body, Var):
                funcs[name] = _DropEpilogue(body.body).visit_expr(func)
        return mod.update(funcs)

    return fuse


def _shorten(stmt: Any) -> Any:
    """``stmt`` with its first (pre-order) constant loop extent above 1 minus one."""
    target = None
    stack = [stmt]
    while stack and target is None:
        n = stack.pop()
        if isinstance(n, tir.For) and isinstance(n.extent, tir.IntImm) and n.extent.value > 1:
            target = n
            break
        stack.extend(reversed(children(n)))
    if target is None:
        return stmt

    class Cut(StmtExprMutator):
        def visit_for_(self, node: tir.For) -> Any:
            if node.loop_var is target.loop_var:
                extent = tir.IntImm(target.extent.value - 1, target.extent.dtype)
                return dataclasses.replace(node, extent=extent)
            return node

    return Cut().visit(stmt)


def legalize_ops_mutant(op: str) -> Pass:
    """LegalizeOps whose lowering of ``op`` has a loop bound off by one (the
    first constant loop of its kernels runs one iteration less)."""
    real = get_pass("LegalizeOps")
    base = op.removeprefix("relax.").rsplit(".", 1)[-1]
    short = op.removeprefix("relax.").replace(".", "_")

    @module_pass(opt_level=0, phases=sorted(real.info.phases),
                 transition_to=real.info.transition_to, required=real.info.required,
                 name=f"LegalizeOps_loop_{short}")
    def legalize(mod: IRModule, ctx: PassContext) -> IRModule:
        # the real pass's work without its phase change (the infrastructure
        # moves the module to lowering after this body, as for LegalizeOps)
        mod = real(mod).with_phase(mod.phase)
        funcs = {}
        for name, pf in mod.prim_funcs():
            if name == base or (name.startswith(base) and name[len(base):].lstrip("_").isdigit()):
                funcs[name] = dataclasses.replace(pf, body=_shorten(pf.body))
        return mod.update(funcs)

    return legalize


# ---------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------

_FLOAT_GRID = np.linspace(-2.0, 2.0, 401, dtype="float32")
_INT_GRID = np.arange(-3, 4, dtype="int32")
_BOOL_GRID = np.array([False, True])
_GRIDS = (_FLOAT_GRID, _INT_GRID, _BOOL_GRID)


def _ref(op: str, *args: np.ndarray) -> np.ndarray | None:
    opdef = find_op(op)
    try:
        with np.errstate(all="ignore"):
            out = opdef.reference(*args) if opdef is not None and opdef.reference else None
    except Exception:  # noqa: BLE001 - a domain the reference refuses: not comparable
        return None
    return None if out is None else np.asarray(out)


def _simple(op: str, arity: int) -> bool:
    """An elementwise operator of ``arity`` tensor operands without required
    attributes (or, unary, an attribute-free operator kept apart from fusion:
    ``stop_fusion``, the gradient markers)."""
    opdef = find_op(op)
    if opdef is None or opdef.reference is None or opdef.variadic or len(opdef.args) != arity:
        return False
    if opdef.args[0] in ("shape", "start"):
        return False  # made from a shape, not from a tensor
    if opdef.pattern == OpPattern.OPAQUE:
        return arity == 1 and not opdef.attrs and _keeps_type(op)
    return (opdef.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST)
            and all(v is not REQUIRED for v in opdef.attrs.values()))


def _keeps_type(op: str) -> bool:
    """The result has the operand's dtype and shape on some grid."""
    for grid in _GRIDS:
        r = _ref(op, grid)
        if r is not None:
            return r.shape == grid.shape and r.dtype == grid.dtype
    return False


def _grids(op: str) -> list[np.ndarray]:
    """The operand grids an operator's reference accepts (float, int)."""
    out = []
    for grid in _GRIDS:
        r = _ref(op, grid)
        if r is not None and r.shape == grid.shape:
            out.append(grid)
        if grid is _INT_GRID and out:
            break  # an operator of numbers: bools are not its operands
    return out


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Equal wherever ``a`` is finite (where the generator draws the operator)."""
    if a is None or b is None or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        ok = np.isfinite(a)
        if not ok.any():
            return False
        return bool(np.allclose(a[ok], np.asarray(b, dtype=a.dtype)[ok], rtol=1e-6, atol=1e-7,
                                equal_nan=False))
    return bool(np.array_equal(a, b))


def _commutative(op: str) -> bool:
    rng = np.random.default_rng(0)
    for kind in ("float32", "int32"):
        if kind == "float32":
            a, b = rng.uniform(0.25, 2.0, 64).astype(kind), rng.uniform(0.25, 2.0, 64).astype(kind)
        else:
            a, b = rng.integers(0, 4, 64).astype(kind), rng.integers(0, 4, 64).astype(kind)
        ab, ba = _ref(op, a, b), _ref(op, b, a)
        if ab is not None and ba is not None:
            return _same(ab, ba) and _same(ba, ab)
    return True  # no comparable evaluation: not a mutant we can build


def _identity_reason(op: str) -> str | None:
    grids = _grids(op)
    if grids and all(_same(_ref(op, g), g) for g in grids):
        return f"{op} is the identity on values (numpy reference), so dropping it changes nothing"
    return None


def _same_reason(op: str, other: str) -> str | None:
    grids = _grids(op)
    if grids and all(_same(_ref(op, g), _ref(other, g)) for g in grids):
        return f"{op} and {other} agree on every value the generator draws them on"
    return None


def _int_attrs(op: str) -> list[str]:
    opdef = find_op(op)
    return [a for a in opdef.attrs if a in SHAPE_ATTRS and a not in ("axis",)
            or (a == "axis" and opdef.pattern != OpPattern.COMM_REDUCE)] if opdef else []


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[Mutant, ...]:
    """Every mutant, from the operator registry and the built-in passes."""
    ops = op_names()
    out: list[Mutant] = []
    unary = [o for o in ops if _simple(o, 1)]
    for op in ops:
        if _simple(op, 2) and not _commutative(op):
            out.append(Mutant(f"swap:{op}", "swap", f"{op} with its operands swapped",
                              functools.partial(operator_mutant, op, "swap")))
    for i, op in enumerate(unary):
        if _keeps_type(op):  # dropping a type change would not even type-check
            out.append(Mutant(f"drop:{op}", "drop", f"{op} dropped (its operand used instead)",
                              functools.partial(operator_mutant, op, "drop"),
                              _identity_reason(op)))
        kinds = _kinds_of(op)
        nxt = next((u for u in unary[i + 1:] + unary[:i] if _kinds_of(u) == kinds
                    and _result_kind(u) == _result_kind(op)), None)
        if nxt is not None:
            out.append(Mutant(f"neighbour:{op}->{nxt}", "neighbour", f"{op} replaced by {nxt}",
                              functools.partial(operator_mutant, op, "neighbour", nxt),
                              _same_reason(op, nxt)))
    for op in ops:
        opdef = find_op(op)
        if opdef is None:
            continue
        for attr in _int_attrs(op):
            out.append(Mutant(f"attr:{op}.{attr}", "attr", f"{op}'s {attr} off by one",
                              functools.partial(operator_mutant, op, "attr", attr)))
        if opdef.pattern == OpPattern.COMM_REDUCE and "axis" in opdef.attrs:
            out.append(Mutant(f"reduce:{op}.axis", "reduce", f"{op} over a wrong axis",
                              functools.partial(operator_mutant, op, "axis")))
            if "keepdims" in opdef.attrs:
                out.append(Mutant(f"reduce:{op}.keepdims", "reduce",
                                  f"{op} with keepdims flipped",
                                  functools.partial(operator_mutant, op, "keepdims")))
    out += _builtin_mutants()
    return tuple(out)


def _kinds_of(op: str) -> tuple[bool, ...]:
    return tuple(bool(_ref(op, g) is not None) for g in _GRIDS)


def _result_kind(op: str) -> str:
    for grid in _GRIDS:
        r = _ref(op, grid)
        if r is not None:
            return r.dtype.kind
    return "none"


def _builtin_mutants() -> list[Mutant]:
    out = []
    for op, how, arg in (("relax.subtract", "swap", None), ("relax.divide", "swap", None),
                         ("relax.nn.relu", "drop", None), ("relax.exp", "neighbour",
                                                           "relax.tanh")):
        out.append(Mutant(f"builtin:FoldConstant.{how}.{op}", "builtin",
                          f"FoldConstant folds {op} wrongly ({how})",
                          functools.partial(fold_constant_mutant, op, how, arg)))
    out.append(Mutant("builtin:FuseOps.drop_epilogue", "builtin",
                      "FuseOps drops the epilogue of a fused group", fuse_ops_mutant))
    for op in ("relax.add", "relax.sum", "relax.nn.relu", "relax.matmul"):
        out.append(Mutant(f"builtin:LegalizeOps.loop.{op}", "builtin",
                          f"LegalizeOps lowers {op} with a loop bound off by one",
                          functools.partial(legalize_ops_mutant, op)))
    return out
