"""LegalizeOps: high-level operators -> ``R.call_tir`` into generated PrimFuncs.

The transition from optimization (1) into lowering (2)::

    lv = R.add(x, y)                      lv = R.call_tir(cls.add, (x, y),
                                   ==>                    out_sinfo=R.Tensor((n, 4), "float32"))

* Every call of a ``compute`` operator becomes one ``call_tir`` into the
  PrimFunc :func:`phasec.op.legalize.lower_call` generates for it.
* Every call of a module function marked ``Primitive`` (a group made by
  FuseOps) becomes one ``call_tir`` into ONE PrimFunc made by
  :func:`~phasec.op.legalize.lower_fused`: injective operators are inlined
  into their consumers' loop nests and a reduction anchor carries its
  elementwise epilogue, so the group touches memory once. The Primitive
  Relax functions are removed; their kernels keep their names
  (``fused_matmul_add_relu``). The parameters every call of a Primitive
  function passes a constant (its weights) are named to the schedule
  (``ScheduleOptions.constant_inputs``) when the context lets
  PackConstantWeights run: a matrix-vector product then reads such a weight
  from micro-panels that pass packs once per build.
* Operators registered with ``legalizes_to_relax`` (shape_of, print,
  assert_op...) become the Relax expression their lowering returns: a
  ``call_pure_packed`` of a VM builtin or an impure packed call, no kernel.
* ``relax.stop_fusion`` (a fusion barrier) lowers to its operand: an alias,
  no kernel and no copy (it only mattered to FuseOps).

**Fusion versus inlining** (the question "what is the difference?"):
*fusion* is a graph-level decision, made by FuseOps in the optimization
phase, about which operators share ONE kernel — one ``call_tir``, so the
intermediate tensors between them never exist as Relax values and never
get allocated by the VM. *Inlining* is how the kernel generator
(:mod:`phasec.te`) then builds that kernel's loop nest: an injective
producer gets no buffer at all, its defining expression is substituted
into each load of it in the consumer's loop. Not every operator of a fused
group can be inlined: a reduction anchor (matmul, conv2d, sum) needs an
accumulator, so it is computed inside its elementwise epilogue's loop nest
into a small local buffer (``compute_at``) instead. Fusion without inlining
would still write every intermediate to memory (inside one kernel);
inlining without fusion is impossible, since an operator can only be
inlined into a consumer that lives in the same PrimFunc.

Kernels are deduplicated: structurally equal PrimFuncs (``structural_hash``
then ``structural_equal``) are added once, so ten ``R.add`` calls of the same
shapes share one ``cls.add``; a fused function structurally equal to one
already lowered is not lowered again (its calls use that lowering, the
parameters matched by position). Kernel names come from the operator (``add``,
``relu``, ``softmax``...), made unique against the module's names with
deterministic suffixes (``add1``, ``add2``...); functions are processed in
name order, so the result does not depend on dictionary order.

Symbolic shapes: a dimension that an output buffer binds (``n`` in
``R.zeros(R.shape([n, 4]))``) is read from that buffer's shape, as TVM's
LegalizeOps does; one that no buffer has as a bare dimension (``n`` in
``R.zeros(R.shape([2 * n]))``) becomes a scalar PrimFunc parameter passed
in the argument tuple as ``R.prim_value(n)`` (see legalize.py's calling
convention); phasec never emits ``tir_vars``.
For a fused group the group's own symbolic variables are mapped to the
caller's by matching the group's parameter struct info against the call's
arguments.

An operator without a legalization, or one whose result shape cannot be
known, is a :class:`LegalizeOpsError` naming the operator, the function, the
binding and its source location. Functions handed to an external code
generator (``Codegen`` attribute) are left alone. Lowering one operator call
is cached by (operator, attributes, operand struct info), so long programs of
repeated calls cost one lowering per distinct call shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phasec.errors import PhasecError, StructInfoError
from phasec.ir import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExprMutator,
    Function, GlobalVar, IRModule, MatchCast, Op, Phase, PrimStructInfo, PrimValue,
    ShapeStructInfo, StructInfo, TensorStructInfo, Tuple, TupleGetItem, TupleStructInfo, Var,
    VarBinding, structural_equal, structural_hash, tir,
)
from phasec.arith import simplify, substitute
from phasec.script.builder import NameTable
from phasec.ir.visitor import collect_exprs
from phasec.arith.lattice import collect_shape_vars, substitute_sinfo
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import context_from_module, infer_struct_info
from phasec.op import find_op, op_expr
from phasec.op.legalize import (
    LEGALIZE_RELAX, LegalizeError, LoweredCall, lower_call, lower_fused,
)
from phasec.op.registry import InferContext
from phasec.transform import module_pass, register_pass

from phasec.passes.pack_constant_weights import PackConstantWeights

__all__ = ["LegalizeOps", "LegalizeOpsError", "kernel_base_name"]

#: Function attributes of groups made by FuseOps / handed to external codegen.
PRIMITIVE = "Primitive"
BYOC_ATTRS = ("Codegen", "Composite")
STOP_FUSION = "relax.stop_fusion"


class LegalizeOpsError(PhasecError):
    """A call could not be lowered to TIR; the message says which and where."""


def kernel_base_name(op_name: str) -> str:
    """The kernel name for an operator: ``relax.nn.relu`` -> ``relu``."""
    return op_name.removeprefix("relax.").rsplit(".", 1)[-1] or "kernel"


@register_pass
@module_pass(opt_level=0, phases=Phase.OPTIMIZATION, transition_to=Phase.LOWERING,
             required=("ToNonDataflow",))
class LegalizeOps:
    """Lower every operator (and every fused group) to a call_tir into a generated PrimFunc."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        # Kernels may plan for weights packed once per build only when the
        # context lets PackConstantWeights run (otherwise they pack per call)
        prepack = ctx is not None and ctx.pass_enabled(PackConstantWeights.info)[0]
        return _ModuleLegalizer(mod, prepack).run()


# ---------------------------------------------------------------------------
# Module driver: kernels, names, deduplication
# ---------------------------------------------------------------------------

class _ModuleLegalizer:
    def __init__(self, mod: IRModule, prepack: bool = True) -> None:
        self.mod = mod
        self.primitives: dict[str, Function] = {
            name: f for name, f in mod.relax_functions() if f.attrs.get(PRIMITIVE)}
        # Primitive functions disappear, so their names are free for their kernels.
        self.names = NameTable(n for n in mod.functions if n not in self.primitives)
        self.kernels: dict[str, tir.PrimFunc] = {}
        self._by_hash: dict[int, list[tuple[tir.PrimFunc, str]]] = {}
        # id -> (the PrimFunc itself, its kernel name): holding the object keeps
        # its id from being reused by a different PrimFunc.
        self._by_id: dict[int, tuple[tir.PrimFunc, str]] = {}
        for name, pf in mod.prim_funcs():
            self._remember(pf, name)
        self._fused: dict[str, tuple[LoweredCall, str, Function]] = {}
        self._fused_by_hash: dict[Any, list[tuple[LoweredCall, str, Function]]] = {}
        self._call_cache: dict[Any, tuple[LoweredCall, str, _Pattern]] = {}
        self.ctx: InferContext = context_from_module(mod)
        self.constant_params = _constant_params(mod, self.primitives) if prepack else {}

    def run(self) -> IRModule:
        new_funcs: dict[str, Any] = {}
        for name in sorted(self.mod.functions):
            func = self.mod.functions[name]
            if name in self.primitives:
                continue
            if isinstance(func, Function) and not _is_byoc(func):
                func = _FunctionLegalizer(self, name).visit_expr(func)
            new_funcs[name] = func
        # Keep the input's function order, then the kernels in creation order.
        ordered = {n: new_funcs[n] for n in self.mod.functions if n in new_funcs}
        ordered.update(self.kernels)
        return self.mod.with_functions(ordered)

    # -- kernels ---------------------------------------------------------------
    def _remember(self, pf: tir.PrimFunc, name: str) -> None:
        self._by_hash.setdefault(structural_hash(pf), []).append((pf, name))
        self._by_id[id(pf)] = (pf, name)

    def add_kernel(self, pf: tir.PrimFunc, hint: str) -> str:
        """The name of a PrimFunc structurally equal to ``pf`` (added if new)."""
        known = self._by_id.get(id(pf))
        if known is not None:
            return known[1]
        bucket = self._by_hash.get(structural_hash(pf), [])
        for other, name in bucket:
            if structural_equal(other, pf):
                self._by_id[id(pf)] = (pf, name)
                return name
        name = self.names.fresh(hint)
        self.kernels[name] = pf
        self._remember(pf, name)
        return name

    def lower_op_call(self, call: Call) -> tuple[LoweredCall, str, _Pattern | None]:
        """Lower one operator call: (lowered, kernel name, operand pattern).

        Cached by a key of everything legalization reads (operator, attributes,
        operand struct info, which operands are the same variable); a cache hit
        returns the template's LoweredCall, whose ``args`` refer to the
        template's operands: ``pattern`` is then not None and
        :meth:`_FunctionLegalizer._template_arg` maps them onto this call.
        """
        key = _call_key(call)
        if key is not None:
            hit = self._call_cache.get(key)
            if hit is not None:
                return hit
        lowered = lower_call(call)
        name = self.add_kernel(lowered.prim_func, kernel_base_name(call.op.name))
        pattern = _operand_positions(call, lowered) if key is not None else None
        if key is not None and pattern is not None:
            self._call_cache[key] = (lowered, name, pattern)
        return lowered, name, None

    def lower_primitive(self, gname: str) -> tuple[LoweredCall, str, Function]:
        """(lowered, kernel name, the function whose parameters ``lowered``
        refers to) of Primitive function ``gname``: a function structurally
        equal to one lowered before (SqueezeNet's fire modules repeat the same
        convolutions at the same shapes, each its own fused function) reuses
        that lowering, whose parameters correspond position by position."""
        hit = self._fused.get(gname)
        if hit is None:
            func = self.primitives[gname]
            constant_params = self.constant_params.get(gname, ())
            key = (structural_hash(func), constant_params)
            for other in self._fused_by_hash.get(key, ()):
                if structural_equal(other[2], func):
                    hit = other
                    break
            else:
                lowered = lower_fused(func, constant_params=constant_params)
                hit = (lowered, self.add_kernel(lowered.prim_func, gname), func)
                self._fused_by_hash.setdefault(key, []).append(hit)
            self._fused[gname] = hit
        return hit


def _constant_params(mod: IRModule, primitives: dict[str, Function]) -> dict[str, tuple[int, ...]]:
    """For each Primitive function, the positions of the parameters every
    call of it passes a Constant, or a variable bound to one (the group's
    weights, which FuseOps made parameters; FoldConstant's results stay
    bound): its kernel may read them in a layout prepared once per build
    (PackConstantWeights, which looks through such variables too)."""
    found: dict[str, set[int]] = {}
    for name, func in mod.relax_functions():
        if name in primitives:
            continue
        bound = {id(b.var) for block in getattr(func.body, "blocks", ()) for b in block.bindings
                 if type(b) is VarBinding and type(b.value) is Constant}
        for call in collect_exprs(func, frozenset((Call,))):
            if type(call.op) is not GlobalVar or call.op.name_hint not in primitives:
                continue
            here = {k for k, a in enumerate(call.args)
                    if type(a) is Constant or id(a) in bound}
            gname = call.op.name_hint
            found[gname] = found[gname] & here if gname in found else here
    return {g: tuple(sorted(ks)) for g, ks in found.items() if ks}


def _is_byoc(func: Function) -> bool:
    return any(func.attrs.get(a) for a in BYOC_ATTRS)


# -- the lowering cache key ---------------------------------------------------------

def _dim_key(d: tir.PrimExpr) -> Any:
    if type(d) is tir.IntImm:
        return (d.value, d.dtype)
    return id(d) if type(d) is tir.Var else None


def _sinfo_key(s: StructInfo | None) -> Any:
    """A hashable key equal for struct info legalization cannot tell apart
    (constant dims by value, symbolic dims by variable identity)."""
    if type(s) is TensorStructInfo:
        if s.shape is None:
            return ("T", s.dtype, s.ndim, s.vdevice)
        dims = tuple(_dim_key(d) for d in s.shape)
        # the vdevice too: a cached lowering's out_ty carries it
        return None if None in dims else ("T", s.dtype, dims, s.vdevice)
    if type(s) is TupleStructInfo:
        fields = tuple(_sinfo_key(f) for f in s.fields)
        return None if None in fields else ("U", fields)
    return None


def _call_key(call: Call) -> Any:
    """Key of a call whose operands are all variables, else None (no caching)."""
    keys = []
    ids: list[int] = []
    for a in call.args:
        if type(a) is not Var and type(a) is not DataflowVar:
            return None
        k = _sinfo_key(a.struct_info)
        if k is None:
            return None
        keys.append(k)
        ids.append(id(a))
    out = _sinfo_key(call.struct_info)
    if out is None:
        return None
    same = tuple(ids.index(i) for i in ids)  # which operands are the same variable
    key = (call.op.name, tuple(call.attrs.items()), tuple(keys), same, out)
    try:
        hash(key)
    except TypeError:
        return None
    return key


#: For each input buffer of a cached lowering: (operand index, tuple field or None).
_Pattern = tuple[tuple[int, "int | None"], ...]


def _operand_positions(call: Call, lowered: LoweredCall) -> _Pattern | None:
    """Where each input of ``lowered`` comes from among ``call``'s operands;
    None when one is not an operand (then the lowering is not cached)."""
    positions = []
    index = {id(a): i for i, a in enumerate(call.args)}
    for arg in lowered.args:
        if id(arg) in index:
            positions.append((index[id(arg)], None))
        elif type(arg) is TupleGetItem and id(arg.tuple_value) in index:
            positions.append((index[id(arg.tuple_value)], arg.index))
        else:
            return None
    return tuple(positions)


# ---------------------------------------------------------------------------
# Function rewriting
# ---------------------------------------------------------------------------

class _FunctionLegalizer(ExprMutator):
    """Rewrites the bindings of one function (and of its if-branches)."""

    def __init__(self, parent: _ModuleLegalizer, func_name: str) -> None:
        super().__init__()
        self.parent = parent
        self.func_name = func_name
        self.dataflow = False
        self.binding: Binding | None = None

    # -- traversal -------------------------------------------------------------
    def visit_function_(self, func: Function) -> Expr:
        if _is_byoc(func):
            return func  # external codegen compiles it as it is
        return super().visit_function_(func)

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        saved = self.dataflow
        self.dataflow = isinstance(block, DataflowBlock)
        try:
            return super().visit_binding_block(block)
        finally:
            self.dataflow = saved

    def visit_binding(self, binding: Binding) -> Any:
        saved = self.binding
        self.binding = binding
        try:
            value = binding.value
            if type(value) is Call:
                lowered = self._lower(value)
                if lowered is not None:
                    pre, new_value = lowered
                    if isinstance(binding, MatchCast):
                        new = MatchCast(binding.var, new_value, binding.struct_info,
                                        span=binding.span)
                    else:
                        new = VarBinding(binding.var, new_value, span=binding.span)
                    return [*pre, new]
            return super().visit_binding(binding)
        finally:
            self.binding = saved

    def visit_global_var_(self, gv: GlobalVar) -> Expr:
        if gv.name_hint in self.parent.primitives:
            raise self.error(f"the Primitive function cls.{gv.name_hint} is used as a value; "
                             "LegalizeOps can only lower direct calls of fused functions")
        return gv

    # -- errors ------------------------------------------------------------------
    def error(self, message: str) -> LegalizeOpsError:
        b = self.binding
        where = f"function {self.func_name!r}"
        if b is not None:
            where += f", binding {b.var.name_hint!r}"
            span = b.span or getattr(b.value, "span", None)
            if span is not None:
                where += f" ({span})"
        return LegalizeOpsError(f"{where}: {message}")

    # -- lowering ----------------------------------------------------------------
    def _lower(self, call: Call) -> tuple[list[Binding], Expr] | None:
        """(bindings to emit first, the new value) for a call to lower, else None."""
        op = call.op
        if type(op) is Op:
            if op.name == STOP_FUSION and len(call.args) == 1:
                return [], self.visit_expr(call.args[0])
            opdef = find_op(op.name)
            if opdef is None:
                raise self.error(f"unknown operator {op.name!r}")
            relax_level = LEGALIZE_RELAX.get(op.name)
            if opdef.category != "compute" and relax_level is None:
                return None
            if relax_level is not None:  # a VM builtin or packed call, no kernel
                try:
                    return [], relax_level(self._with_sinfo(call))
                except (LegalizeError, StructInfoError) as exc:
                    raise self.error(f"cannot legalize {expr_to_str(call.op)}: "
                                     f"{getattr(exc, 'message', None) or exc}") from exc
            return self._lower_op(call)
        if type(op) is GlobalVar and op.name_hint in self.parent.primitives:
            return self._lower_fused(call, op.name_hint)
        return None

    def _lower_op(self, call: Call) -> tuple[list[Binding], Expr]:
        call = self._with_sinfo(call)
        try:
            lowered, name, pattern = self.parent.lower_op_call(call)
        except (LegalizeError, StructInfoError) as exc:
            raise self.error(f"cannot legalize {expr_to_str(call.op)}: "
                             f"{getattr(exc, 'message', None) or exc}") from exc
        pre: list[Binding] = []
        if pattern is None:
            args = [self._leaf(a, pre) for a in lowered.args]
        else:
            args = [self._leaf(self._template_arg(call, pos), pre) for pos in pattern]
        out = lowered.out_sinfo
        self._check_out(out, call)
        return pre, self._call_tir(name, args, list(lowered.tir_vars), out, pre)

    @staticmethod
    def _template_arg(call: Call, pos: tuple[int, int | None]) -> Expr:
        operand = call.args[pos[0]]
        return operand if pos[1] is None else TupleGetItem(operand, pos[1])

    def _with_sinfo(self, call: Call) -> Call:
        if call.struct_info is not None:
            return call
        try:
            sinfo = infer_struct_info(call, self.parent.ctx)
        except StructInfoError as exc:
            raise self.error(exc.message) from exc
        return Call(call.op, call.args, call.attrs, call.sinfo_args, struct_info=sinfo,
                    span=call.span)

    def _lower_fused(self, call: Call, gname: str) -> tuple[list[Binding], Expr]:
        try:
            # (func: the function lowered, gname's own or one equal to it)
            lowered, name, func = self.parent.lower_primitive(gname)
        except (LegalizeError, StructInfoError) as exc:
            raise self.error(f"cannot lower the fused function cls.{gname}: "
                             f"{getattr(exc, 'message', None) or exc}") from exc
        if len(call.args) != len(func.params):
            raise self.error(f"cls.{gname} takes {len(func.params)} arguments, the call "
                             f"passes {len(call.args)}")
        param_arg = {p: self.visit_expr(a) for p, a in zip(func.params, call.args)}
        vmap: dict[tir.Var, tir.PrimExpr] = {}
        for p, a in zip(func.params, param_arg.values()):
            _bind_dims(p.struct_info, _sinfo_of(a), vmap)
        pre: list[Binding] = []
        args = []
        for arg in lowered.args:
            if isinstance(arg, Var) and arg in param_arg:
                args.append(self._leaf(param_arg[arg], pre))
            elif type(arg) is TupleGetItem and arg.tuple_value in param_arg:
                outer = param_arg[arg.tuple_value]
                item = outer.fields[arg.index] if type(outer) is Tuple else \
                    TupleGetItem(outer, arg.index)
                args.append(self._leaf(item, pre))
            elif type(arg) is Constant:
                args.append(arg)
            else:
                raise self.error(f"the fused kernel of cls.{gname} reads {expr_to_str(arg)}, "
                                 "which is neither a parameter nor a constant")
        unbound = [v for v in lowered.tir_vars if not (isinstance(v, tir.Var) and v in vmap)]
        unbound += [v for v in collect_shape_vars(lowered.out_sinfo) if v not in vmap]
        if unbound:
            names = ", ".join(sorted({v.name if isinstance(v, tir.Var) else str(v)
                                      for v in unbound}))
            raise self.error(f"cannot lower the call of cls.{gname}: the symbolic "
                             f"dimension(s) {names} of the fused function are not determined "
                             "by the shapes of the call's arguments")
        tir_vars = [simplify(substitute(v, vmap)) for v in lowered.tir_vars]
        out = substitute_sinfo(lowered.out_sinfo, vmap)
        self._check_out(out, call)
        return pre, self._call_tir(name, args, tir_vars, out, pre)

    def _check_out(self, out: StructInfo, call: Call) -> None:
        fields = out.fields if isinstance(out, TupleStructInfo) else (out,)
        for f in fields:
            if not (isinstance(f, TensorStructInfo) and f.shape is not None and f.dtype != "void"):
                raise self.error(f"cannot lower {expr_to_str(call.op)}: its result "
                                 f"{sinfo_to_str(out)} needs a known shape and dtype "
                                 "(add a R.match_cast to give the operands known shapes)")

    def _leaf(self, expr: Expr, pre: list[Binding]) -> Expr:
        """``expr`` usable as a call_tir argument: tuple items get a variable."""
        if type(expr) is TupleGetItem:
            tup = expr.tuple_value
            if type(tup) is Tuple:
                return self._leaf(tup.fields[expr.index], pre)
            sinfo = _sinfo_of(expr)
            cls = DataflowVar if self.dataflow else Var
            var = cls(_hint(tup) + f"_{expr.index}", sinfo)
            pre.append(VarBinding(var, TupleGetItem(tup, expr.index, struct_info=sinfo)))
            return var
        return expr

    def _call_tir(self, kernel: str, args: Sequence[Expr], tir_vars: list[tir.PrimExpr],
                  out: StructInfo, pre: list[Binding]) -> Expr:
        # The kernel's scalar parameters follow its input buffers: they are
        # passed in the argument tuple (TVM 0.27's call_tir has no tir_vars).
        scalars = [PrimValue(v) for v in tir_vars]
        operands: list[Expr] = [GlobalVar(kernel), Tuple([*args, *scalars])]
        if type(out) is TupleStructInfo and len(out.fields) == 1:
            # A one-field tuple result (R.meshgrid of one tensor, R.split into
            # one section): TVM 0.27's call_tir takes a list of tensor types
            # and gives one tensor a tensor result, so the kernel's call
            # returns the tensor and a tuple of it follows (as TVM legalizes).
            field = out.fields[0]
            cls = DataflowVar if self.dataflow else Var
            var = cls("lv", field)
            pre.append(VarBinding(var, Call(op_expr("relax.call_tir"), operands, None, (field,),
                                            struct_info=field)))
            return Tuple([var])
        return Call(op_expr("relax.call_tir"), operands, None, (out,), struct_info=out)


def _hint(expr: Expr) -> str:
    return expr.name_hint if isinstance(expr, Var) else "lv"


def _sinfo_of(expr: Expr) -> StructInfo | None:
    if expr.struct_info is not None:
        return expr.struct_info
    try:
        return infer_struct_info(expr)
    except StructInfoError:
        return None


def _bind_dims(param: StructInfo | None, arg: StructInfo | None,
               vmap: dict[tir.Var, tir.PrimExpr]) -> None:
    """Bind the symbolic variables that appear as whole dimensions of ``param``
    to the corresponding dimensions of ``arg`` (first binding wins)."""
    stack = [(param, arg)]
    while stack:
        p, a = stack.pop()
        pairs: Sequence[tuple[tir.PrimExpr, tir.PrimExpr]] = ()
        if isinstance(p, TensorStructInfo) and isinstance(a, TensorStructInfo):
            if p.shape is not None and a.shape is not None and len(p.shape) == len(a.shape):
                pairs = list(zip(p.shape, a.shape))
        elif isinstance(p, ShapeStructInfo) and isinstance(a, ShapeStructInfo):
            if p.values is not None and a.values is not None and len(p.values) == len(a.values):
                pairs = list(zip(p.values, a.values))
        elif isinstance(p, PrimStructInfo) and isinstance(a, PrimStructInfo):
            if p.value is not None and a.value is not None:
                pairs = [(p.value, a.value)]
        elif isinstance(p, TupleStructInfo) and isinstance(a, TupleStructInfo):
            stack.extend(zip(p.fields, a.fields))
        for pd, ad in pairs:
            if isinstance(pd, tir.Var) and pd not in vmap:
                vmap[pd] = ad

