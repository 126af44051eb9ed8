"""PackConstantWeights: pack a matmul's (or transform a Winograd convolution's)
constant weights once per build.

The GEMM schedule (:mod:`phasec.te.schedules.gemm`) copies each panel of B into a
contiguous packed buffer (micro-panels of ``K x NR`` elements) on every call
before the register tiles read it: for B = a weight matrix of a model that
copy is the same on every call, and for BERT's 768x3072 weights it costs
about a tenth of the matmul. In the lowering phase the weights are relax
constants passed to ``call_tir``, so this pass does the copy once, at build
time::

    y = R.call_tir(cls.fused_matmul_add, (x, R.const(W), R.const(b)), out_sinfo=...)
    ==>
    y = R.call_tir(cls.fused_matmul_add_prepacked, (x, R.const(Wp), R.const(b)), ...)

where ``Wp[t, k, c] = W[k, t*NR + c]`` (zero past the last column) and the
new kernel is the old one without its packing loop nests, reading ``Wp``
where it read the packed buffer. The schedule marks what may be removed: the
kernel's ``phasec.gemm_prepack`` attribute names the parameter (read exactly
as ``B[k, j]``) and ``phasec.gemm_prepack_width`` the micro-panel width; each
packing nest is ``AttrStmt("phasec.gemm_pack", first micro-panel, nest)``.
A kernel whose rewrite finds anything else is left as it is, and so is a
call whose argument is not a constant (the same kernel can serve both: the
original stays while a call uses it).

The pass changes no value: a packed element is a copy of a weight element,
read by the same multiply-add in the same order.

A Winograd convolution (:mod:`phasec.te.schedules.winograd`) marks its weight
transform (``U = G w G^T``) the same way: for a constant weight the pass
computes ``U`` here (in float64 rounded once, where the kernel's own
transform rounds at each step: the values may differ in the last bit) and
the kernel reads it.

A 1x1 convolution over a few columns (7x7 planes) whose weight is the GEMM's
row operand A marks A's row panels the same way
(:func:`phasec.te.schedules.gemm_prepack.row_panels`: ``Ap[r // mr, k, r %
mr] = A[r, k]``, each register tile's rows one contiguous run): the pass
computes them here.

The pass knows no schedule: each declares its transform
(:class:`~phasec.te.schedules.build_time.WeightTransform`: which parameter,
the marks, the buffer read instead, how to compute its value), and the pass
tries the declarations the schedule table lists
(:data:`phasec.te.schedules.WEIGHT_TRANSFORMS`) on every kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from phasec.ir import (
    Binding, Call, Constant, DataflowVar, ExprMutator, Function, GlobalVar, IRModule, Op, Phase,
    Tuple, Var, tir,
)
from phasec.ir.node import Node, replace
from phasec.te.blocks import bind_loop_vars_in_blocks
from phasec.te.schedules import WEIGHT_TRANSFORMS
from phasec.te.schedules.build_time import ir_nodes, stored_buffer
from phasec.te.schedules.gemm_prepack import pack_weight
from phasec.ir.visitor import collect_exprs
from phasec.transform import module_pass, register_pass

__all__ = ["PackConstantWeights", "prepacked_kernel", "pack_weight"]


@register_pass
@module_pass(opt_level=2, phases=Phase.LOWERING)
class PackConstantWeights:
    """Pack matmuls' (transform Winograd convolutions') constant weights once per build."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        variants: dict[str, tuple[str, tir.PrimFunc, int, bool, Any] | None] = {}
        # the module's kernels and the variants made so far: a variant has a
        # variant of its own when a second weight of the kernel is
        # transformed (an LSTM's W, then R)
        kernels = dict(mod.functions)

        def variant(name: str) -> tuple[str, tir.PrimFunc, int, bool, Any] | None:
            if name not in variants:
                func = kernels.get(name)
                made = prepacked_kernel(func) if isinstance(func, tir.PrimFunc) else None
                if made is None:
                    variants[name] = None
                else:
                    new_name = name + "_prepacked"
                    while new_name in kernels:
                        new_name += "_"
                    kernels[new_name] = made[0]
                    variants[name] = (new_name, *made)
            return variants[name]

        changed = {}
        packed = _PackedWeights()
        for name, func in mod.functions.items():
            if isinstance(func, Function):
                rewriter = _CallRewriter(variant, packed)
                new = rewriter.visit_expr(func)
                if rewriter.consumed:
                    # a weight bound to a variable (a folded constant) that no
                    # other expression reads is gone: not carried beside its
                    # packed form in the executable
                    used = {id(v) for v in collect_exprs(new, frozenset((Var, DataflowVar)))}
                    dead = {id(v) for v in rewriter.consumed if id(v) not in used}
                    if dead:
                        new = _DropBindings(dead).visit_expr(new)
                if new is not func:
                    changed[name] = new
        if not changed:
            return mod
        functions = {**mod.functions, **changed}
        for entry in variants.values():
            if entry is not None:
                functions[entry[0]] = entry[1]
        # the original kernels no call uses any more are not compiled
        used = {g.name_hint for f in functions.values() if isinstance(f, Function)
                for g in collect_exprs(f, frozenset((GlobalVar,)))}
        for name, entry in variants.items():
            if entry is not None and name not in used:
                functions.pop(name, None)
            if entry is not None and entry[0] not in used:
                functions.pop(entry[0], None)
        return mod.with_functions(functions)


class _CallRewriter(ExprMutator):
    """Points calls of kernels with a prepacked variant at it, with the
    weight packed: a constant argument, or a variable bound to one earlier
    in the function (FoldConstant's results stay bound)."""

    def __init__(self, variant: Any, packed: _PackedWeights) -> None:
        super().__init__()
        self.variant = variant
        self.packed = packed
        self.constants: dict[int, Constant] = {}  # id(var) -> the constant bound to it
        self.consumed: list[Var] = []             # variables read as a packed weight

    def visit_binding(self, binding: Binding) -> Any:
        call = binding.value
        if type(call) is Constant:
            self.constants[id(binding.var)] = call
        if not (type(call) is Call and type(call.op) is Op and call.op.name == "relax.call_tir"
                and len(call.args) >= 2 and type(call.args[0]) is GlobalVar
                and type(call.args[1]) is Tuple):
            return super().visit_binding(binding)
        name, args = call.args[0].name_hint, list(call.args[1].fields)
        while (entry := self.variant(name)) is not None:  # each weight it transforms
            new_name, _, index, keeps_b, pack = entry
            if index >= len(args):
                break
            weight = args[index] if type(args[index]) is Constant else self.constants.get(
                id(args[index]))
            if weight is None:
                break
            if weight is not args[index]:
                self.consumed.append(args[index])
            packed = self.packed.get(weight, new_name, pack)
            if keeps_b:
                args.insert(index + 1, packed)
            else:
                args[index] = packed
            name = new_name
        if name == call.args[0].name_hint:
            return binding
        operands = [GlobalVar(name), Tuple(args), *call.args[2:]]
        return binding.rebind(Call(call.op, operands, call.attrs, call.sinfo_args,
                                   struct_info=call.struct_info))


class _PackedWeights:
    """One Constant per packed form of a weight: the calls of one weight
    (an unrolled recurrence's steps all read one matrix) share its packed
    form, which the executable then holds once (its constant pool keeps
    one copy per array) and the caches see once per model call, not once
    per step (an LSTM unrolled over 20 steps of a 1 x 4096 @ 4096 x 400
    input projection streamed 20 copies of 8 MB). Kernels that pack
    the same weight the same way (one micro-panel width) share it too."""

    def __init__(self) -> None:
        #: (id of the weight's array, kernel) -> its packed Constant
        self.by_kernel: dict[tuple[int, str], Constant] = {}
        #: id of the weight's array -> (the array, its packed Constants)
        self.by_weight: dict[int, tuple[np.ndarray, list[Constant]]] = {}

    def get(self, weight: Constant, kernel: str,
            pack: Callable[[np.ndarray], np.ndarray]) -> Constant:
        """The packed Constant of ``weight`` for ``kernel`` (``pack`` its packing)."""
        key = (id(weight.data), kernel)
        known = self.by_kernel.get(key)
        if known is not None:
            return known
        data, forms = self.by_weight.setdefault(id(weight.data), (weight.data, []))
        value = np.ascontiguousarray(pack(data))
        made = next((c for c in forms if c.data.dtype == value.dtype
                     and np.array_equal(c.data, value)), None)  # (no copies, unlike tobytes)
        if made is None:
            made = Constant(value)
            forms.append(made)
        self.by_kernel[key] = made
        return made


class _DropBindings(ExprMutator):
    """Removes the bindings of the given variables (ids)."""

    def __init__(self, dead: set[int]) -> None:
        super().__init__()
        self.dead = dead

    def visit_binding(self, binding: Binding) -> Any:
        return None if id(binding.var) in self.dead else binding


#: (kernel reading its weight prepacked, index of the weight parameter,
#: whether the kernel still reads the weight as it is too, the packing of a
#: weight value)
Prepacked = tuple[tir.PrimFunc, int, bool, Callable[[np.ndarray], np.ndarray]]


def prepacked_kernel(func: tir.PrimFunc) -> Prepacked | None:
    """``func`` reading its weight parameter already transformed, or None
    when it marks nothing to transform or its body is not what the
    schedules mark.

    The transforms are the schedules' declarations
    (:data:`phasec.te.schedules.WEIGHT_TRANSFORMS`, the first that applies):
    the GEMM schedule's packing of B into micro-panels, a Winograd
    convolution's weight transform. When the kernel still reads the weight
    as it is too (columns beyond the last whole micro-panel read B
    directly), the transformed parameter comes right after the original;
    otherwise it replaces it.
    """
    for transform in WEIGHT_TRANSFORMS:
        plan = transform.plan(func)
        if plan is None:
            continue
        made = _rewrite(func, plan.index, plan.transformed, plan.mark, plan.offset, plan.attrs)
        if made is not None:
            return (*made, plan.compute)
    return None


def _rewrite(func: tir.PrimFunc, index: int, packed: tir.Buffer, mark: str,
             offset: Callable[[tir.AttrStmt], Any], attrs: dict[str, Any]
             ) -> tuple[tir.PrimFunc, int, bool] | None:
    """``func`` without its ``mark`` nests, reading ``packed`` (a new
    parameter) where it read the buffers those nests wrote."""
    b = func.params[index]
    surgery = _Surgery(packed, mark, offset)
    try:
        body = surgery.stmt(func.body, {})
    except _Unexpected:
        return None
    mentioned = _buffers_mentioned(body)
    if not surgery.removed or not mentioned.isdisjoint(surgery.removed):
        return None
    keeps_b = id(b) in mentioned
    params = list(func.params)
    if keeps_b:
        params.insert(index + 1, packed)
    else:
        params[index] = packed
    # the micro-panel index reads the panel loop's variable inside blocks
    body = bind_loop_vars_in_blocks(body)
    return tir.PrimFunc(params, body, attrs, func.span, func.ret_dtype), index, keeps_b


class _Unexpected(Exception):
    """The marks are not where the schedules put them: leave the kernel."""


class _Surgery:
    """Removes the nests marked ``mark`` and redirects their buffers' reads
    to ``packed`` (the first index shifted by ``offset(mark statement)``)."""

    def __init__(self, packed: tir.Buffer, mark: str,
                 offset: Callable[[tir.AttrStmt], Any]) -> None:
        self.packed = packed
        self.mark = mark
        self.offset = offset
        self.removed: set[int] = set()  # ids of the per-call packed buffers

    def stmt(self, s: Any, base: dict[int, Any]) -> Any:
        """``s`` rewritten (``base``: packed buffer id -> its first micro-panel)."""
        t = type(s)
        if t is tir.AttrStmt and s.key == self.mark:
            raise _Unexpected  # a mark outside a sequence: not the schedule's shape
        if t is tir.SeqStmt:
            out = []
            env = base
            for x in s.stmts:
                if type(x) is tir.AttrStmt and x.key == self.mark:
                    target = stored_buffer(x.body)
                    if target is None:
                        raise _Unexpected
                    env = {**env, id(target): self.offset(x)}
                    self.removed.add(id(target))
                    continue
                out.append(self.stmt(x, env))
            if not out:
                return tir.Evaluate(tir.IntImm(0, "int32"))
            return out[0] if len(out) == 1 else tir.SeqStmt(tuple(out))
        if t is tir.Allocate:
            body = self.stmt(s.body, base)
            if id(s.buffer) in self.removed:
                return body  # the per-call packed buffer is gone
            return s if body is s.body else replace(s, body=body)
        return self.node(s, base)

    def node(self, x: Any, base: dict[int, Any]) -> Any:
        t = type(x)
        if t is tir.BufferLoad and id(x.buffer) in base:
            i0, *rest = x.indices
            return tir.BufferLoad(self.packed, (_plus(base[id(x.buffer)], i0), *rest))
        if t is tir.BufferRegion and id(x.buffer) in base:
            (m0, e0), *rest = x.region
            return tir.BufferRegion(self.packed, ((_plus(base[id(x.buffer)], m0), e0), *rest))
        if t is tuple:
            items = [self.node(i, base) for i in x]
            return x if all(a is b for a, b in zip(items, x)) else tuple(items)
        if isinstance(x, tir.Stmt):
            if t in (tir.SeqStmt, tir.Allocate) or (t is tir.AttrStmt and x.key == self.mark):
                return self.stmt(x, base)
        if isinstance(x, Node) and not isinstance(x, (tir.Buffer, tir.Var)):
            changes = {}
            for f in t._fields:
                old = getattr(x, f)
                new = (self.stmt(old, base) if isinstance(old, tir.Stmt)
                       else self.node(old, base))
                if new is not old:
                    changes[f] = new
            return replace(x, **changes) if changes else x
        return x


def _plus(a: Any, b: Any) -> Any:
    if type(a) is tir.IntImm and a.value == 0:
        return b
    return a + b


def _buffers_mentioned(root: Any) -> set[int]:
    """Ids of the buffers that nodes under ``root`` load, store, allocate or
    name in a region."""
    return {id(n.buffer) for n in ir_nodes(root) if getattr(n, "buffer", None) is not None}
