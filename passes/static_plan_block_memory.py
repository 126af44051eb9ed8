"""StaticPlanBlockMemory: reuse storage between tensors whose lifetimes do not overlap.

After CallTIRRewrite every kernel output is an ``R.builtin.alloc_tensor``.
This pass (lowering phase, 2) plans these allocations::

    a = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
    ...                                       # last use of a
    b = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
    ==>
    storage = R.memory.alloc_storage(R.shape([256]), virtual_device_index=0,
                                     storage_scope="global", dtype="uint8")
    a = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([64]), dtype="float32")
    ...
    _ = R.memory.kill_tensor(a)
    b = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([64]), dtype="float32")

**Liveness.** Each binding sequence (a function body, an if-branch) is
analysed on its own, in one forward pass over its bindings. A tensor's
lifetime runs from its allocation to the last use of the tensor or of any
variable aliasing it (``y = a``, a tuple holding it, an item taken from such
a tuple, a match_cast of it). Uses are operands of direct PrimFunc calls
(and of ``call_tir``), which read and write their arguments but keep no
reference.

**Escapes.** A tensor is not planned when it may outlive the sequence or be
retained elsewhere: it (or an alias) is the sequence's result, or is passed
to any other call (a Relax function, a closure, a packed function, any other
operator), or is referenced inside a nested if-branch or function.

**Reuse.** Storages are plain bytes, so tensors of any dtype share them.
When a tensor is allocated, the free storage of the smallest size that is
large enough is reused (best fit); when none is large enough the largest
free storage is reused and grown (its final size is the largest tensor it
holds, known once the sequence is planned); only with no free storage is a
new one created. Among free storages of the size chosen, the one freed last
is taken: its tensor was the last read, so its lines are the likeliest to
be still in the cache (the bytes planned are the same whichever is taken).
A storage is freed for reuse right after the binding that last uses its
tensor, so a kernel's output never shares storage with its own inputs.

**Symbolic shapes.** A tensor of symbolic shape (``R.shape([n, 4])``) is
planned too, into a storage of symbolic size (``R.shape([n * 16])``, computed
by the VM from the shape variables bound on function entry). It reuses a
free storage of the very same size expression when there is one; otherwise
a free symbolic storage whose size reads every variable the tensor's size
reads that the function's parameters do not bind (those are bound where the
storage is allocated; the parameters' are bound on entry), whose size becomes
the ``max`` of both: sizes that are not provably equal cannot be compared,
and the maximum holds either, as a constant storage grows to its largest
tensor.

**Concatenations in place.** A kernel call that is exactly a
concatenation, along an axis every dimension before which is 1, of planned
tensors of constant shape, each written by its first kernel call and
otherwise only read (``passes/_concat_in_place.py`` says what qualifies),
is dropped: the result's storage is taken before its first operand is
made, and each operand is allocated at its slice of it, so its producer
writes there::

    a = R.builtin.alloc_tensor(R.shape([1, 4, 7]), dtype="float32")
    _ = cls.conv(x, w, a)
    b = R.builtin.alloc_tensor(R.shape([1, 2, 7]), dtype="float32")
    _1 = cls.conv2(x, w2, b)
    c = R.builtin.alloc_tensor(R.shape([1, 6, 7]), dtype="float32")
    _2 = cls.concat(a, b, c)
    ==>
    storage = R.memory.alloc_storage(R.shape([168]), ...)
    a = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([1, 4, 7]), ...)
    _ = cls.conv(x, w, a)
    b = R.memory.alloc_tensor(storage, R.prim_value(112), R.shape([1, 2, 7]), ...)
    _1 = cls.conv2(x, w2, b)
    c = R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([1, 6, 7]), ...)

The result's lifetime then runs from its first operand's allocation to the
last use of the result or of any operand; the operands take no storage of
their own. Held that long, a result may keep other tensors from reusing
its memory (a U-Net's skip connection, made long before its
concatenation): the concatenations are taken only while the storages of
constant size total no more than with none taken, the one holding its
result longest before its concatenation left a copy first. A concat
kernel no call is left of is removed from the module.

**Kills.** In functions that may have effects (impure, or ``relax.force_pure``
as RemovePurityChecking leaves them) the pass inserts
``R.memory.kill_tensor`` after the last use of each planned tensor and of
each tensor variable aliasing it, and ``R.memory.kill_storage`` after the
last use of a storage's last tensor: the VM drops the registers there, so
memory is released as early as the plan allows.

**Statistics.** Each planned function gets the attributes
``relax.memory_plan.tensor_bytes`` (the bytes the planned tensors take
allocated one by one, a concatenation's operands included) and
``relax.memory_plan.storage_bytes`` (the bytes of the storages that replace
them), counting the tensors of constant shape only; :func:`plan_stats` sums
them per module.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from phasec.ir import (
    Binding, BindingBlock, Call, DataflowVar, Expr, ExprMutator, Function,
    GlobalVar, If, IRModule, ObjectStructInfo, Op, Phase, PrimStructInfo, PrimValue, SeqExpr,
    ShapeExpr, ShapeStructInfo, TensorStructInfo, Tuple, TupleGetItem, TupleStructInfo, Var,
    VarBinding,
    collect_exprs, tir,
)
from phasec.arith import free_vars, simplify
from phasec.ir.text import prim_expr_to_str
from phasec.op import op_expr
from phasec.transform import module_pass, register_pass
from phasec.passes._concat_in_place import ConcatGroup, concat_groups

__all__ = ["StaticPlanBlockMemory", "PlanStats", "plan_stats", "TENSOR_BYTES_ATTR",
           "STORAGE_BYTES_ATTR"]

TENSOR_BYTES_ATTR = "relax.memory_plan.tensor_bytes"
STORAGE_BYTES_ATTR = "relax.memory_plan.storage_bytes"
FORCE_PURE = "relax.force_pure"

_UNIT = TupleStructInfo([])
_ALLOC = "relax.builtin.alloc_tensor"
#: Operators whose tensor operands are only read or written during the call.
_NON_RETAINING_OPS = frozenset({
    "relax.call_tir", "relax.memory.kill_tensor", "relax.memory.kill_storage",
    "relax.vm.kill_object",
})


@dataclass(frozen=True)
class PlanStats:
    """Bytes of the planned tensors allocated one by one (``tensor_bytes``)
    against the bytes of the storages that hold them (``storage_bytes``)."""

    tensor_bytes: int = 0
    storage_bytes: int = 0

    @property
    def saved_bytes(self) -> int:
        return self.tensor_bytes - self.storage_bytes

    def __add__(self, other: "PlanStats") -> "PlanStats":
        return PlanStats(self.tensor_bytes + other.tensor_bytes,
                         self.storage_bytes + other.storage_bytes)


def plan_stats(mod: IRModule) -> dict[str, PlanStats]:
    """Per function (and ``"total"``): what StaticPlanBlockMemory planned.

    Read from the attributes the pass sets, so it works on the module right
    after the pass and on every later module (the build phase included).
    Functions the pass planned nothing in are not listed.
    """
    out: dict[str, PlanStats] = {}
    total = PlanStats()
    for name, func in mod.relax_functions():
        if TENSOR_BYTES_ATTR in func.attrs:
            stats = PlanStats(int(func.attrs[TENSOR_BYTES_ATTR]),
                              int(func.attrs.get(STORAGE_BYTES_ATTR, 0)))
            out[name] = stats
            total = total + stats
    out["total"] = total
    return out


@register_pass
@module_pass(opt_level=0, phases=Phase.LOWERING)
class StaticPlanBlockMemory:
    """Plan static-shape allocations into reused storage (alloc_storage + alloc_tensor)."""

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        dropped: set[str] = set()  # kernels of the concatenations taken in place

        def plan(name: str, func: Function) -> Function:
            may_kill = not func.is_pure or bool(func.attrs.get(FORCE_PURE))
            planner = _FunctionPlanner(mod, may_kill)
            new = planner.visit_expr(func)  # external (Codegen) functions stay as they are
            dropped.update(planner.dropped_kernels)
            if new is func:
                return func
            stats = PlanStats(int(func.attrs.get(TENSOR_BYTES_ATTR, 0)),
                              int(func.attrs.get(STORAGE_BYTES_ATTR, 0))) + planner.stats
            new = new.with_attr(TENSOR_BYTES_ATTR, stats.tensor_bytes)
            return new.with_attr(STORAGE_BYTES_ATTR, stats.storage_bytes)

        out = mod.map_functions(plan)
        if dropped:  # those no call is left of are not compiled
            called = {g.name_hint for _, f in out.relax_functions()
                      for g in collect_exprs(f, frozenset((GlobalVar,)))}
            called.update(c[len(tir.PRIM_FUNC_CALL):] for _, pf in out.prim_funcs()
                          for c in tir.host_calls(pf.body) if c.startswith(tir.PRIM_FUNC_CALL))
            out = out.remove(*(dropped - called))
        return out


# ---------------------------------------------------------------------------
# Analysis helpers
# ---------------------------------------------------------------------------

_VAR_KINDS = frozenset((Var, DataflowVar))


def _refs(expr: Expr) -> list[Var]:
    """Every Relax variable referenced in an expression (nested ones too)."""
    return collect_exprs(expr, _VAR_KINDS)


def _leaf_vars(expr: Expr) -> list[Var]:
    """Variables of a call operand (a leaf or a tuple of leaves), without recursion
    into anything but tuples."""
    out: list[Var] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            out.append(e)
        elif type(e) is Tuple:
            stack.extend(e.fields)
        elif type(e) is TupleGetItem:
            stack.append(e.tuple_value)
        elif not isinstance(e, (Op, GlobalVar)):
            out.extend(_refs(e))  # anything else: every variable it mentions
    return out


def _planned_alloc(value: Expr) -> tuple[tuple[tir.PrimExpr, ...], str, int | tir.PrimExpr,
                                         Any] | None:
    """(shape, dtype, bytes, size class) of an ``R.builtin.alloc_tensor`` to plan,
    or None for anything else.

    ``bytes`` is an int for a constant shape (size class None) and a
    simplified PrimExpr for a symbolic one, whose size class is a key equal
    only for the same expression over the same variables.
    """
    if type(value) is not Call or type(value.op) is not Op or value.op.name != _ALLOC:
        return None
    if len(value.args) != 1 or type(value.args[0]) is not ShapeExpr:
        return None
    dims = value.args[0].values
    dtype = str(value.attrs.get("dtype", "void"))
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return None
    if all(type(d) is tir.IntImm for d in dims):
        return dims, dtype, itemsize * math.prod(int(d.value) for d in dims), None
    size: tir.PrimExpr = tir.IntImm(itemsize, "int64")
    for d in dims:
        size = tir.BinaryOp("*", size, d)
    size = simplify(size)
    key = (prim_expr_to_str(size), tuple(id(v) for v in free_vars(size)))
    return dims, dtype, size, key


@dataclass
class _Token:
    """One static allocation of the sequence being planned."""

    index: int          # binding index of the allocation
    var: Var
    shape: tuple[tir.PrimExpr, ...]
    dtype: str
    nbytes: int | tir.PrimExpr
    size_class: Any     # None for a constant size, else the key of a symbolic one
    last_use: int = -1
    escapes: bool = False
    storage: int = -1
    #: where its storage is taken: its allocation, or for the result of a
    #: concatenation taken in place, its first operand's
    start: int = -1
    offset: int = 0     # bytes into its storage (an operand of such a concatenation)
    live_until: int = -1  # its last use, before any concatenation extends it

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.index


@dataclass
class _Storage:
    first: int          # binding index of its first tensor
    size: int | tir.PrimExpr
    size_class: Any = None
    end: int = -1       # last use of its last tensor
    var: Var | None = None
    #: ids of the shape variables a symbolic size reads
    reads: frozenset[int] = frozenset()
    #: the size classes of the symbolic tensors it holds (its size is their max)
    holds: set[Any] = field(default_factory=set)


def _constant_bytes(storages: list[_Storage]) -> int:
    return sum(st.size for st in storages if st.size_class is None)


# ---------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------

def _bound_on_entry(func: Function) -> frozenset[int]:
    """Ids of the shape variables a parameter of ``func`` binds on entry: a
    plain dimension of a tensor, a value of a shape, a prim value (not one
    only inside an expression, ``n * 2``, which nothing binds)."""
    bound: set[int] = set()
    stack = [p.struct_info for p in func.params]
    while stack:
        s = stack.pop()
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            dims: Any = s.shape
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            dims = s.values
        elif isinstance(s, PrimStructInfo) and s.value is not None:
            dims = [s.value]
        else:
            if isinstance(s, TupleStructInfo):
                stack.extend(s.fields)
            continue
        bound.update(id(d) for d in dims if isinstance(d, tir.Var))
    return frozenset(bound)


class _FunctionPlanner(ExprMutator):
    """Plans every binding sequence of one function, inner sequences first."""

    def __init__(self, mod: IRModule, may_kill: bool) -> None:
        super().__init__()
        self.mod = mod
        self.may_kill = may_kill
        self.stats = PlanStats()
        #: names of the kernels of the concatenations taken in place
        self.dropped_kernels: set[str] = set()
        self._storage_count = 0
        #: ids of the shape variables the function's parameters bind on entry
        self._entry_vars: frozenset[int] = frozenset()

    def visit_function_(self, func: Function) -> Expr:
        if func.attrs.get("Codegen") or func.attrs.get("Composite"):
            return func
        outer, self._entry_vars = self._entry_vars, _bound_on_entry(func)
        try:
            return super().visit_function_(func)
        finally:
            self._entry_vars = outer

    def visit_seq_expr_(self, seq: SeqExpr) -> Expr:
        seq = super().visit_seq_expr_(seq)  # plans the if-branches inside it first
        return self._plan(seq)

    def _is_kernel_call(self, call: Call) -> bool:
        """A direct call of a PrimFunc: it reads and writes its arguments only."""
        return self._kernel(call) is not None

    def _kernel(self, call: Call) -> tir.PrimFunc | None:
        """The PrimFunc a direct kernel call calls, or None."""
        op = call.op
        if type(op) is not GlobalVar:
            return None
        func = self.mod.functions.get(op.name_hint)
        return func if isinstance(func, tir.PrimFunc) else None

    # -- one sequence ----------------------------------------------------------
    def _plan(self, seq: SeqExpr) -> SeqExpr:
        bindings = [b for block in seq.blocks for b in block.bindings]
        tokens: list[_Token] = []
        alias: dict[Var, tuple[_Token, ...]] = {}
        var_last_use: dict[Var, int] = {}
        for i, b in enumerate(bindings):
            value = b.value
            if type(b) is VarBinding:
                info = _planned_alloc(value)
                if info is not None and type(b.var) is not DataflowVar:
                    tok = _Token(i, b.var, *info, last_use=i)
                    tokens.append(tok)
                    alias[b.var] = (tok,)
                    var_last_use[b.var] = i
                    continue
            used, escaped = self._uses(value)
            for v in used:
                toks = alias.get(v)
                if toks:
                    var_last_use[v] = i
                    for t in toks:
                        t.last_use = i
            for v in escaped:
                for t in alias.get(v, ()):
                    t.escapes = True
            # what the bound variable may alias
            flows = self._flows(value)
            if flows:
                toks = tuple({id(t): t for v in flows for t in alias.get(v, ())}.values())
                if toks:
                    alias[b.var] = toks
                    var_last_use[b.var] = i
        if not tokens:
            return seq
        for v in _leaf_vars(seq.body):
            for t in alias.get(v, ()):
                t.escapes = True
        planned = [t for t in tokens if not t.escapes]
        if not planned:
            return seq
        n = len(bindings)
        for t in planned:
            t.live_until = t.last_use
        groups = concat_groups(bindings, planned, alias, self._kernel)
        if groups:
            # Never more storage than without them: a result held from its
            # first operand on (a U-Net's skip connection, made long before
            # its concatenation) may keep others from reusing the memory.
            # The group that holds its result longest before its
            # concatenation is left a copy first.
            base = _constant_bytes(self._assign_groups(planned, [], n))
            storages = self._assign_groups(planned, groups, n)
            while groups and _constant_bytes(storages) > base:
                groups.remove(max(groups, key=lambda g: g.output.nbytes * (
                    g.output.index - g.output.start)))
                storages = self._assign_groups(planned, groups, n)
        else:
            storages = self._assign(planned, n)
        self.dropped_kernels.update(bindings[g.call_index].value.op.name_hint for g in groups)
        return self._rewrite(seq, bindings, planned, storages, alias, var_last_use,
                             {g.call_index for g in groups})

    def _assign_groups(self, planned: list[_Token], groups: list[ConcatGroup],
                       n: int) -> list[_Storage]:
        """:meth:`_assign` with the concatenations ``groups`` taken in place:
        each result's storage held from its first operand's allocation to
        the last use of it or of any operand, the operands at their offsets
        in it."""
        for t in planned:
            t.start, t.last_use, t.offset, t.storage = t.index, t.live_until, 0, -1
        members: set[int] = set()
        for g in groups:
            # (in binding order: an operand that is an inner group's result
            # holds that group's span already)
            g.output.start = min(m.start for m in g.members)
            g.output.last_use = max(g.output.last_use, *(m.last_use for m in g.members))
            members.update(id(m) for m in g.members)
        storages = self._assign([t for t in planned if id(t) not in members], n)
        for g in reversed(groups):  # outer groups first: their results' offsets are known
            for m, offset in zip(g.members, g.offsets):
                m.storage, m.offset = g.output.storage, g.output.offset + offset
        return storages

    def _uses(self, value: Expr) -> tuple[list[Var], list[Var]]:
        """(variables used without escaping, variables that escape) in a binding value."""
        t = type(value)
        if t is Call:
            op = value.op
            operands = [v for a in value.args for v in _leaf_vars(a)]
            if type(op) is Op and op.name in _NON_RETAINING_OPS:
                return operands, []
            if self._is_kernel_call(value):
                return operands, []
            callee = [op] if isinstance(op, Var) else []
            return callee, operands
        if t is If:
            cond = [value.cond] if isinstance(value.cond, Var) else []
            inner = _refs(value.true_branch) + _refs(value.false_branch)
            return cond, inner
        if isinstance(value, Var) or t in (Tuple, TupleGetItem):
            return _leaf_vars(value), []
        return [], _refs(value)

    @staticmethod
    def _flows(value: Expr) -> list[Var]:
        """Variables whose tensors the bound variable may hold."""
        if isinstance(value, Var) or type(value) in (Tuple, TupleGetItem):
            return _leaf_vars(value)
        return []

    def _assign(self, planned: list[_Token], n: int) -> list[_Storage]:
        """Give every planned tensor a storage: best fit among the free ones
        (a symbolic size reuses a storage of the very same size, else grows one
        that reads all its variables to the maximum of both)."""
        storages: list[_Storage] = []
        # constant sizes: (size, -when freed, storage id), sorted
        free: list[tuple[int, int, int]] = []
        free_symbolic: list[int] = []     # storage ids, the latest freed last
        ends: dict[int, list[_Token]] = {}
        for tok in planned:
            ends.setdefault(tok.last_use, []).append(tok)
        by_index = {tok.start: tok for tok in planned}
        for i in range(n):
            tok = by_index.get(i)
            if tok is not None and tok.size_class is not None:
                reads = frozenset(id(v) for v in free_vars(tok.nbytes))
                same = [k for k, sid in enumerate(free_symbolic)
                        if tok.size_class in storages[sid].holds]
                wider = [k for k, sid in enumerate(free_symbolic)
                         if reads - self._entry_vars <= storages[sid].reads]
                if same or wider:
                    tok.storage = free_symbolic.pop((same or wider)[-1])
                    st = storages[tok.storage]
                    if tok.size_class not in st.holds:
                        st.holds.add(tok.size_class)
                        st.reads = st.reads | reads
                        st.size = simplify(tir.BinaryOp("max", st.size, tok.nbytes))
                        st.size_class = (prim_expr_to_str(st.size), st.size_class)
                else:
                    tok.storage = len(storages)
                    storages.append(_Storage(i, tok.nbytes, tok.size_class, reads=reads,
                                             holds={tok.size_class}))
            elif tok is not None:
                k = bisect.bisect_left(free, (tok.nbytes, -n - 1))
                if k < len(free):
                    sid = free.pop(k)[2]            # best fit: smallest large enough
                elif free:                          # grow the largest free one
                    sid = free.pop(bisect.bisect_left(free, (free[-1][0], -n - 1)))[2]
                    storages[sid].size = tok.nbytes
                else:
                    sid = len(storages)
                    storages.append(_Storage(first=i, size=tok.nbytes))
                tok.storage = sid
            for done in ends.get(i, ()):
                st = storages[done.storage]
                st.end = max(st.end, i)
                if st.size_class is not None:
                    free_symbolic.append(done.storage)
                else:
                    bisect.insort(free, (st.size, -i, done.storage))
        return storages

    def _rewrite(self, seq: SeqExpr, bindings: list[Binding], planned: list[_Token],
                 storages: list[_Storage], alias: dict[Var, tuple[_Token, ...]],
                 var_last_use: dict[Var, int], dropped: set[int]) -> SeqExpr:
        before: dict[int, list[Binding]] = {}
        after: dict[int, list[Binding]] = {}
        replace: dict[int, Binding | None] = {}  # None: the binding is dropped
        for sid, st in enumerate(storages):
            st.var = Var(f"storage{self._storage_count or ''}", ObjectStructInfo())
            self._storage_count += 1
            before.setdefault(st.first, []).append(VarBinding(st.var, Call(
                op_expr("relax.memory.alloc_storage"), [ShapeExpr([st.size])],
                {"virtual_device_index": 0, "storage_scope": "global", "dtype": "uint8"},
                struct_info=ObjectStructInfo())))
        for tok in planned:
            sinfo = TensorStructInfo(tok.shape, tok.dtype)
            old = bindings[tok.index]
            replace[tok.index] = VarBinding(tok.var, Call(
                op_expr("relax.memory.alloc_tensor"),
                [storages[tok.storage].var, PrimValue(tir.IntImm(tok.offset, "int64")),
                 ShapeExpr(tok.shape)], {"dtype": tok.dtype, "runtime_device_index": 0},
                struct_info=sinfo),
                span=old.span)
        if self.may_kill:
            planned_ids = {id(t) for t in planned}
            # tensor variables (allocations and their aliases) die at their last use
            for v, last in var_last_use.items():
                toks = alias.get(v, ())
                if not toks or not all(id(t) in planned_ids for t in toks):
                    continue
                if not isinstance(v.struct_info, TensorStructInfo):
                    continue
                after.setdefault(last, []).append(VarBinding(Var("_", _UNIT), Call(
                    op_expr("relax.memory.kill_tensor"), [v], struct_info=_UNIT)))
            for st in storages:
                after.setdefault(st.end, []).append(VarBinding(Var("_", _UNIT), Call(
                    op_expr("relax.memory.kill_storage"), [st.var], struct_info=_UNIT)))
        self.stats = self.stats + PlanStats(
            sum(t.nbytes for t in planned if t.size_class is None),
            sum(st.size for st in storages if st.size_class is None))
        if dropped:  # concatenations taken in place: a result someone reads is ()
            read = {id(v) for b in bindings for v in _refs(b.value)} | {
                id(v) for v in _refs(seq.body)}
            for i in dropped:
                b = bindings[i]
                replace[i] = (VarBinding(b.var, Tuple([]), span=b.span)
                              if id(b.var) in read else None)
        blocks: list[BindingBlock] = []
        i = 0
        for block in seq.blocks:
            out: list[Binding] = []
            for b in block.bindings:
                out.extend(before.get(i, ()))
                new = replace.get(i, b)
                if new is not None:
                    out.append(new)
                out.extend(after.get(i, ()))
                i += 1
            blocks.append(type(block)(out, span=block.span))
        return SeqExpr(blocks, seq.body, span=seq.span)

