"""FuseOps [optimization]: group operators into private ``Primitive`` functions.

Within each dataflow block of each Relax function (functions with a
``Primitive``, ``Codegen`` or ``Composite`` attribute are left alone),
operator calls are partitioned into groups by their fusion pattern kind
(:class:`~phasec.op.registry.OpPattern`). Every group, a single operator
included, becomes a private module-level function with the attribute
``{"Primitive": True}`` whose body is one dataflow block holding the group's
bindings; the group's bindings in the caller are replaced by one call
``lv = cls.fused_matmul_add_relu(x, w, b)`` placed where the group's last
binding was. ``LegalizeOps`` then lowers each such function to ONE PrimFunc
(:func:`phasec.op.legalize.legalize_fused`), in which injective operators
are computed inline and the group's anchor (matmul, conv2d, a reduction...)
carries its elementwise epilogue.

**What is fused** (a "compute" operator is a pure operator of the registry's
``compute`` category; everything else — ``call_tir``, packed calls, closures,
builtins, ``If``, ``match_cast``, tuples, aliases, and operators that lower to
a VM builtin instead of a kernel (``shape_of``, ``shape_to_tensor``...) —
stays in the caller and is a fusion boundary):

* an out-elementwise-fusable operator (matmul, conv2d, pooling) with the
  elementwise/broadcast chain after it (its *epilogue*);
* injective chains: elementwise, broadcast and injective operators (reshape,
  permute_dims, concat, take...) computed inline in an injective consumer;
* a reduction with its elementwise/broadcast inputs (computed inline in the
  reduction) and its elementwise/broadcast epilogue;
* ``split`` (a tuple result) with its ``TupleGetItem`` bindings, when every
  use of every field is in the same group.
* a stem (default table only, ``FusionRules.stem_pools``): a conv2d of at
  most 4 input channels with its epilogue takes the 2-D max pool after it,
  pooled from a ring of its rows (``te.schedules.conv_pool_stem``).

A group has at most one anchor (reduction or out-elementwise-fusable
operator). Opaque compute operators (softmax, layer_norm...) become a function
of their own and never share it. ``R.stop_fusion(x)`` is a barrier: it stays
in the caller as an ordinary operator call (an identity, which ``LegalizeOps``
replaces by its operand), so nothing fuses across it.

**Default fusion table** (:data:`DEFAULT_RULES`; pairs are
*(producer kind, consumer kind)*; E elementwise, B broadcast, I injective,
R comm-reduce, O out-elementwise-fusable)::

    producer \\ consumer   E        B        I     R        O
    E                      inline   inline   inline inline  -
    B                      inline   inline   inline inline  -
    I                      inline   inline   inline -       -
    R (anchor)             epilogue epilogue -      -       -
    O (anchor)             epilogue epilogue -      -       -

"inline": the producer is computed inside the consumer's loop nest; for a
producer feeding a group's anchor the pair (producer, anchor kind) must be
allowed as well. "epilogue": the consumer joins the anchor's group; every
operator of the consumer's group must then be an allowed epilogue kind. At
most :attr:`FusionRules.max_fused_ops` (256) operators per group. Unlike TVM
the default lets a reduction take an elementwise epilogue (``mean`` then
``rsqrt``; softmax's ``sum`` then ``divide``) because the kernel generator
computes the reduction inside the epilogue's loop nest (``compute_at``);
:data:`TVM_RULES` is TVM's table. Producers are never inlined into an
out-elementwise-fusable operator (recomputing them for every output element
would cost more than the intermediate tensor), as in TVM.

**Replacing the table per target**: ``FuseOps(rules=MY_RULES)``, or
``PassContext(config={"FuseOps.rules": MY_RULES})`` for a whole pipeline (the
pass option wins), or a registered name (:func:`register_fusion_rules`) in a
textual pipeline: ``FuseOps{rules=no_epilogue}``. Built-in names:
``default``, ``tvm``, ``no_epilogue``.

**The algorithm** is linear in the size of the block. Each operator starts
alone. (1) In binding order, every out-elementwise-fusable anchor absorbs the
chain of single consumers after it that the table allows as its epilogue
(TVM's phase 0: anchors take their epilogue before anything else can claim
it). (2) In reverse binding order, a group whose last operator's every use
is in one other group merges into it when the table allows each edge (the
post-dominator rule of TVM, in the simple form: a producer used outside the
group, or by two groups, or by a block output, never merges). Groups thus
have one output, their last binding, and merging can never create a cycle.
``fuse_opt_level=0`` skips both steps (every operator alone, as in TVM's
tutorial); any level >= 1 runs both with the table; ``-1`` (the default)
takes the PassContext's opt_level.

**Lifted functions**: parameters are the group's external inputs in order of
first use (Relax variables and non-scalar constants; 0-d constants, shapes
and prim values stay inside); symbolic shape variables are fresh in every
lifted function; a symbolic variable the parameters do not define as a whole
dimension is passed in a leading ``R.Shape`` parameter. Names are
``fused_<operator names joined by _>`` (shortened beyond 64 characters),
made unique against the module (``fused_add1``...).

FuseOps is idempotent: calls to fused functions are not operators, so a
second run finds nothing to fuse and returns the module unchanged. The pass
has opt_level 0 (as in TVM) so a Sequential always runs it; fusion itself is
controlled by ``fuse_opt_level``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from phasec.ir import Phase, tir
from phasec import arith
from phasec.script.builder import NameTable, is_leaf
from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, Function,
    GlobalVar, If, Op, PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from phasec.arith.lattice import collect_shape_vars
from phasec.ir.module import IRModule
from phasec.op import map_symbolic_attrs, symbolic_attr_values
from phasec.op.legalize import LEGALIZE_RELAX
from phasec.op.registry import OpDef, OpPattern, find_op
from phasec.ir.struct_info import (
    FuncStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
    TupleStructInfo,
)
from phasec.ir.visitor import collect_exprs
from phasec.transform import (
    PassConfigError, PassContext, module_pass, register_config_option, register_pass,
)
from phasec.transform.info import is_int_at_least

from phasec.passes._fusion_rules import (
    ANCHOR_PATTERNS, DEFAULT_RULES, NO_EPILOGUE_RULES, TVM_RULES, FusionRules, get_fusion_rules,
    list_fusion_rules, register_fusion_rules, resolve_rules, stem_pool,
)

__all__ = ["FuseOps", "FusionRules", "DEFAULT_RULES", "TVM_RULES", "NO_EPILOGUE_RULES",
           "register_fusion_rules", "get_fusion_rules", "list_fusion_rules", "CONFIG_KEY",
           "STOP_FUSION_OP"]

#: PassContext config key holding the fusion rules (a FusionRules or a registered name).
CONFIG_KEY = register_config_option(
    "FuseOps.rules", "the fusion rules of every FuseOps without rules=...: a FusionRules "
    "object or the name of registered rules")
#: The fusion-barrier operator.
STOP_FUSION_OP = "relax.stop_fusion"
#: Attributes of functions FuseOps leaves alone.
_SKIP_ATTRS = ("Primitive", "Codegen", "Composite")
_MAX_NAME = 64


#: The highest meaningful fuse_opt_level (TVM's opt levels go up to 4); a
#: larger value is almost certainly a typo, so it is refused.
MAX_FUSE_OPT_LEVEL = 4


@register_pass
@module_pass(opt_level=0, phases=Phase.OPTIMIZATION)
@dataclass(frozen=True)
class FuseOps:
    """Group operators into private Primitive functions by pattern kind (fusion)."""

    fuse_opt_level: int = -1
    rules: Any = None  # FusionRules | str | None

    def __post_init__(self) -> None:
        level = self.fuse_opt_level
        if not is_int_at_least(level, -1) or level > MAX_FUSE_OPT_LEVEL:
            raise PassConfigError(
                f"FuseOps(fuse_opt_level={level!r}) must be an int from -1 to "
                f"{MAX_FUSE_OPT_LEVEL} (-1: use the PassContext's opt_level, 0: no fusion, "
                "1 or more: fuse)")
        if self.rules is not None:
            resolve_rules(self.rules, "FuseOps(rules=...)")  # fail at construction

    def options(self) -> dict[str, Any]:
        """Option values; a rules table is shown by its name (its textual form)."""
        rules = self.rules.name if isinstance(self.rules, FusionRules) else self.rules
        return {"fuse_opt_level": self.fuse_opt_level, "rules": rules}

    def resolved_rules(self, ctx: PassContext | None = None) -> FusionRules:
        """The table in force: the ``rules`` option, else the context's
        ``FuseOps.rules`` config, else :data:`DEFAULT_RULES`."""
        if self.rules is not None:
            return resolve_rules(self.rules, "FuseOps(rules=...)")
        ctx = ctx if ctx is not None else PassContext.current()
        configured = ctx.config.get(CONFIG_KEY)
        if configured is not None:
            return resolve_rules(configured, f"PassContext config {CONFIG_KEY!r}")
        return DEFAULT_RULES

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        rules = self.resolved_rules(ctx)
        level = self.fuse_opt_level if self.fuse_opt_level >= 0 else ctx.opt_level
        fuser = _ModuleFuser(rules, fuse=level > 0, names=NameTable(mod.functions))
        out = mod.map_functions(lambda _, func: func if any(
            func.attrs.get(key) for key in _SKIP_ATTRS) else fuser.function(func))
        return out if out is mod else out.update(fuser.lifted)


# ---------------------------------------------------------------------------
# Module and function traversal
# ---------------------------------------------------------------------------

class _ModuleFuser:
    """Rewrites functions, collecting the lifted functions (in creation order)."""

    def __init__(self, rules: FusionRules, fuse: bool, names: NameTable) -> None:
        self.rules = rules
        self.fuse = fuse
        self.names = names
        self.lifted: dict[str, Function] = {}
        self._opdefs: dict[str, OpDef | None] = {}

    def function(self, func: Function) -> Function:
        if not isinstance(func.body, SeqExpr):
            return func  # not normalized: nothing here is in a dataflow block
        body = self.seq(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs,
                        span=func.span)

    def seq(self, seq: Expr) -> Expr:
        if not isinstance(seq, SeqExpr):
            return seq
        blocks = []
        changed = False
        for block in seq.blocks:
            new = self.dataflow_block(block) if isinstance(block, DataflowBlock) else \
                self.plain_block(block)
            changed |= new is not block
            blocks.append(new)
        if not changed:
            return seq
        return SeqExpr(blocks, seq.body, struct_info=seq.struct_info, span=seq.span)

    def plain_block(self, block: BindingBlock) -> BindingBlock:
        """Outside dataflow blocks nothing is fused, but if-branches may hold
        dataflow blocks of their own."""
        out: list[Binding] = []
        changed = False
        for b in block.bindings:
            value = b.value
            if type(b) is VarBinding and isinstance(value, If):
                tb, fb = self.seq(value.true_branch), self.seq(value.false_branch)
                if tb is not value.true_branch or fb is not value.false_branch:
                    b = VarBinding(b.var, If(value.cond, tb, fb, struct_info=value.struct_info,
                                             span=value.span), span=b.span)
                    changed = True
            out.append(b)
        return type(block)(out, span=block.span) if changed else block

    def dataflow_block(self, block: DataflowBlock) -> DataflowBlock:
        graph = _Graph(block.bindings, self)
        if not graph.nodes:
            return block
        groups = _Partition(graph, self.rules)
        if self.fuse:
            groups.run()
        return _Rewriter(graph, groups, self).block(block)

    def opdef(self, op: Op) -> OpDef | None:
        try:
            return self._opdefs[op.name]
        except KeyError:
            found = self._opdefs[op.name] = find_op(op.name)
            return found

    def add_function(self, hint: str, func: Function) -> str:
        name = self.names.fresh(hint)
        self.lifted[name] = func
        return name


# ---------------------------------------------------------------------------
# The dataflow graph of one block
# ---------------------------------------------------------------------------

class _Graph:
    """Fusible operator calls of a block (nodes) and their uses.

    ``binding_of[i]``: index of node i's binding in the block; ``pattern[i]``
    its kind; ``consumers[i]``: nodes using its value (through tuple-field
    aliases too, repeated per use); ``escapes[i]``: its value (or a field
    alias of it) is used by something that is not a fusible call of this
    block, or is a block output.
    ``alias_root[j]`` (j a binding index): for ``t = s[k]`` where s is a node
    (or an alias of one), that node.
    """

    def __init__(self, bindings: Sequence[Binding], fuser: _ModuleFuser) -> None:
        self.bindings = bindings
        self.binding_of: list[int] = []
        self.pattern: list[OpPattern] = []
        self.consumers: list[list[int]] = []
        self.escapes: list[bool] = []
        self.alias_root: dict[int, int] = {}
        node_of: dict[Var, int] = {}
        rules = fuser.rules
        for index, b in enumerate(bindings):
            value = b.value
            kind = self._fusible(b, fuser, rules)
            if kind is not None:
                node = len(self.binding_of)
                self.binding_of.append(index)
                self.pattern.append(kind)
                self.consumers.append([])
                self.escapes.append(not isinstance(b.var, DataflowVar))
                for var in _arg_vars(value.args):
                    producer = node_of.get(var)
                    if producer is not None:
                        self.consumers[producer].append(node)
                node_of[b.var] = node
                continue
            if (type(b) is VarBinding and type(value) is TupleGetItem
                    and isinstance(value.tuple_value, Var) and value.tuple_value in node_of):
                root = node_of[value.tuple_value]
                node_of[b.var] = root
                self.alias_root[index] = root
                if not isinstance(b.var, DataflowVar):
                    self.escapes[root] = True
                continue
            # Anything else is a boundary: what it uses cannot be fused away.
            if node_of:
                for var in _vars_in(value):
                    producer = node_of.get(var)
                    if producer is not None:
                        self.escapes[producer] = True

    @property
    def nodes(self) -> range:
        return range(len(self.binding_of))

    @staticmethod
    def _fusible(b: Binding, fuser: _ModuleFuser, rules: FusionRules) -> OpPattern | None:
        """The pattern kind of a fusible operator call binding, else None."""
        if type(b) is not VarBinding:
            return None
        value = b.value
        if type(value) is not Call or type(value.op) is not Op:
            return None
        opdef = fuser.opdef(value.op)
        if (opdef is None or opdef.category != "compute" or not opdef.pure
                or opdef.name == STOP_FUSION_OP or b.var.struct_info is None
                or opdef.name in LEGALIZE_RELAX):  # a VM builtin (shape_of...), no kernel
            return None
        if not all(is_leaf(a) for a in value.args):
            return None  # not in A-normal form: leave it to Normalize
        return rules.pattern_of(opdef)


def _arg_vars(args: Sequence[Expr]) -> Iterator[Var]:
    """Variables among call operands (leaves, or tuples of leaves)."""
    for a in args:
        if isinstance(a, Var):
            yield a
        elif isinstance(a, Tuple):
            stack = list(a.fields)
            while stack:
                e = stack.pop()
                if isinstance(e, Var):
                    yield e
                elif isinstance(e, Tuple):
                    stack.extend(e.fields)


_VAR_KINDS = frozenset((Var, DataflowVar))


def _vars_in(expr: Expr) -> list[Var]:
    """Every variable an expression refers to."""
    if isinstance(expr, Var):
        return [expr]
    if isinstance(expr, Call):
        found = list(_arg_vars(expr.args))
        if isinstance(expr.op, Var):
            found.append(expr.op)
        return found
    if isinstance(expr, Tuple):
        return list(_arg_vars(expr.fields))
    if isinstance(expr, TupleGetItem) and isinstance(expr.tuple_value, Var):
        return [expr.tuple_value]
    return collect_exprs(expr, _VAR_KINDS)


# ---------------------------------------------------------------------------
# Partitioning
# ---------------------------------------------------------------------------

def _bits(mask: int) -> Iterator[OpPattern]:
    for kind in OpPattern:
        if mask >> kind.value & 1:
            yield kind


class _Partition:
    """Groups of graph nodes. A group is named by one of its nodes; every group
    has a single *sink* (its last node): all other members are used only
    inside the group, so the group has one output and merges never make cycles.

    ``anchor[g]``: the group's reduction / out-elementwise-fusable node or -1;
    ``kinds[g]``: bitmask of the other members' kinds; ``upstream[n]``: node n
    feeds its group's anchor (it is computed inline in the anchor's inputs).
    """

    def __init__(self, graph: _Graph, rules: FusionRules) -> None:
        self.graph = graph
        self.rules = rules
        n = len(graph.binding_of)
        self.group_of = list(range(n))
        self.members: list[list[int]] = [[i] for i in range(n)]
        self.sink = list(range(n))
        self.anchor = [i if graph.pattern[i] in ANCHOR_PATTERNS else -1 for i in range(n)]
        self.kinds = [0 if graph.pattern[i] in ANCHOR_PATTERNS else 1 << graph.pattern[i].value
                      for i in range(n)]
        self.upstream = [False] * n

    def run(self) -> None:
        self._anchor_epilogues()
        self._merge_into_consumers()

    def _allowed(self, producer: OpPattern, consumer: OpPattern) -> bool:
        return self.rules.can_fuse(producer, consumer)

    def _anchor_epilogues(self) -> None:
        """Step 1: each out-elementwise-fusable anchor takes the chain of single
        consumers after it that the table allows as its epilogue."""
        g, rules = self.graph, self.rules
        for a in g.nodes:
            kind = g.pattern[a]
            if kind is not OpPattern.OUT_ELEMWISE_FUSABLE or self.group_of[a] != a:
                continue
            while True:
                s = self.sink[a]
                uses = g.consumers[s]
                if g.escapes[s] or not uses or any(c != uses[0] for c in uses):
                    break
                c = uses[0]
                ckind = g.pattern[c]
                if (self.group_of[c] != c or len(self.members[c]) != 1
                        or ckind in ANCHOR_PATTERNS or not self._allowed(kind, ckind)
                        or len(self.members[a]) >= rules.max_fused_ops):
                    break
                self._absorb(c, a, feeds_anchor=False)
                self.sink[a] = c
            self._stem_pool(a)

    def _stem_pool(self, a: int) -> None:
        """A stem's conv2d group takes the max pool that alone uses it
        (:func:`~phasec.passes._fusion_rules.stem_pool`)."""
        g, s = self.graph, self.sink[a]
        uses = g.consumers[s]
        if (not self.rules.stem_pools or g.escapes[s] or not uses
                or any(c != uses[0] for c in uses) or self.group_of[uses[0]] != uses[0]
                or len(self.members[a]) >= self.rules.max_fused_ops
                or not stem_pool(g.bindings[g.binding_of[a]].value,
                                 g.bindings[g.binding_of[uses[0]]].value)):
            return
        self._absorb(uses[0], a, feeds_anchor=False)
        self.sink[a] = uses[0]
        self.anchor[a] = a  # (the convolution stays the group's anchor)

    def _merge_into_consumers(self) -> None:
        """Step 2: in reverse order, a group whose sink is used only by one
        other group merges into it when the table allows."""
        g = self.graph
        for p in reversed(g.nodes):
            gp = self.group_of[p]
            if self.sink[gp] != p or g.escapes[p]:
                continue
            uses = g.consumers[p]
            if not uses:
                continue
            gc = self.group_of[uses[0]]
            if gc == gp or any(self.group_of[c] != gc for c in uses):
                continue
            feeds = self._can_merge(gp, gc, uses)
            if feeds is not None:
                self._absorb(gp, gc, feeds)

    def _can_merge(self, gp: int, gc: int, uses: list[int]) -> bool | None:
        """None if group gp may not merge into gc; else whether it then feeds
        gc's anchor."""
        if len(self.members[gp]) + len(self.members[gc]) > self.rules.max_fused_ops:
            return None
        pattern = self.graph.pattern
        ap, ac = self.anchor[gp], self.anchor[gc]
        if ap >= 0:
            if ac >= 0:
                return None  # one anchor per group
            akind = pattern[ap]
            if all(self._allowed(akind, k) for k in _bits(self.kinds[gc])):
                return False
            return None
        produced = list(_bits(self.kinds[gp]))
        for c in uses:
            ckind = pattern[c]
            if not all(self._allowed(k, ckind) for k in produced):
                return None
        feeds = ac >= 0 and any(c == ac or self.upstream[c] for c in uses)
        if feeds:
            akind = pattern[ac]
            if not all(self._allowed(k, akind) for k in produced):
                return None
        return feeds

    def _absorb(self, gp: int, gc: int, feeds_anchor: bool) -> None:
        """Move every member of group gp into group gc (gc keeps its sink)."""
        moved = self.members[gp]
        for m in moved:
            self.group_of[m] = gc
            if feeds_anchor:
                self.upstream[m] = True
        self.members[gc].extend(moved)
        self.members[gp] = []
        self.kinds[gc] |= self.kinds[gp]
        if self.anchor[gp] >= 0:
            self.anchor[gc] = self.anchor[gp]


# ---------------------------------------------------------------------------
# Rewriting the block and lifting the groups
# ---------------------------------------------------------------------------

class _Rewriter:
    def __init__(self, graph: _Graph, part: _Partition, fuser: _ModuleFuser) -> None:
        self.graph = graph
        self.part = part
        self.fuser = fuser

    def block(self, block: DataflowBlock) -> DataflowBlock:
        graph, part = self.graph, self.part
        bindings = block.bindings
        # Which group each binding moves into (None: it stays in the caller).
        owner: dict[int, int] = {}
        for node in graph.nodes:
            owner[graph.binding_of[node]] = part.group_of[node]
        for index, root in graph.alias_root.items():
            group = part.group_of[root]
            if part.sink[group] != root:  # a field alias of an inner value moves too
                owner[index] = group
        contents: dict[int, list[Binding]] = {}
        for index, b in enumerate(bindings):
            group = owner.get(index)
            if group is not None:
                contents.setdefault(group, []).append(b)
        sink_binding = {graph.binding_of[part.sink[g]]: g for g in contents}
        out: list[Binding] = []
        for index, b in enumerate(bindings):
            if index not in owner:
                out.append(b)
            elif index in sink_binding:
                out.append(self._lift(contents[sink_binding[index]], b))
        return DataflowBlock(out, span=block.span)

    def _lift(self, group: list[Binding], sink: Binding) -> VarBinding:
        """The group as a Primitive function; returns the caller's new binding."""
        func, args = _GroupFunction(group, sink).build()
        name = self.fuser.add_function(_function_name(group), func)
        callee = GlobalVar(name, struct_info=func.struct_info)
        call = Call(callee, args, struct_info=sink.var.struct_info, span=sink.value.span)
        return VarBinding(sink.var, call, span=sink.span)


def _function_name(group: list[Binding]) -> str:
    parts = [b.value.op.name.rsplit(".", 1)[-1] for b in group if isinstance(b.value, Call)]
    name = "fused_" + "_".join(parts)
    if len(name) <= _MAX_NAME:
        return name
    kept: list[str] = []
    length = len("fused")
    for part in parts:
        if length + len(part) + 1 > _MAX_NAME - 16:
            break
        kept.append(part)
        length += len(part) + 1
    return "fused_" + "_".join(kept) + f"_and_{len(parts) - len(kept)}_more"


class _GroupFunction:
    """Builds the lifted function of one group: parameters for its external
    inputs, fresh symbolic variables, the bindings in one dataflow block."""

    def __init__(self, group: list[Binding], sink: Binding) -> None:
        self.group = group
        self.sink = sink
        self.names = NameTable()
        self.defined = {b.var for b in group}
        self.syms: dict[tir.Var, tir.Var] = {}
        self.params: list[Var] = []
        self.args: list[Expr] = []
        self.inner: dict[int, Expr] = {}  # id(caller var or constant) -> inner expr
        self._renamed: dict[int, StructInfo] = {}
        self._seen_sinfo: set[int] = set()

    # -- symbolic variables ------------------------------------------------
    def _note_sinfo(self, sinfo: StructInfo | None) -> None:
        if sinfo is None or id(sinfo) in self._seen_sinfo:
            return
        self._seen_sinfo.add(id(sinfo))
        for v in collect_shape_vars(sinfo):
            self._note_var(v)

    def _note_prim(self, expr: tir.PrimExpr) -> None:
        for v in arith.free_vars(expr):
            self._note_var(v)

    def _note_var(self, v: tir.Var) -> None:
        if v not in self.syms:
            self.syms[v] = tir.Var(v.name, v.dtype)

    def _collect_syms(self) -> None:
        for b in self.group:
            self._note_sinfo(b.var.struct_info)
            value = b.value
            if isinstance(value, Call):
                self._note_sinfo(value.struct_info)
                for s in value.sinfo_args:
                    self._note_sinfo(s)
                for e in symbolic_attr_values(value.attrs):  # strided_slice's begin=(i,)
                    self._note_prim(e)
                stack = list(value.args)
            else:
                stack = [value.tuple_value]
            while stack:
                a = stack.pop()
                if isinstance(a, Var):
                    self._note_sinfo(a.struct_info)
                elif isinstance(a, Tuple):
                    stack.extend(a.fields)
                elif isinstance(a, ShapeExpr):
                    for d in a.values:
                        self._note_prim(d)
                elif isinstance(a, PrimValue):
                    self._note_prim(a.value)

    def _sinfo(self, sinfo: StructInfo | None) -> StructInfo | None:
        """``sinfo`` with the group's symbolic variables renamed (cached: the
        same struct info object is typically shared by a call and its variable)."""
        if sinfo is None or not self.syms:
            return sinfo
        key = id(sinfo)
        hit = self._renamed.get(key)
        if hit is None:
            hit = self._renamed[key] = _rename_sinfo(sinfo, self.syms)
        return hit

    def _prim(self, expr: tir.PrimExpr) -> tir.PrimExpr:
        return arith.substitute(expr, self.syms) if self.syms else expr

    # -- parameters --------------------------------------------------------
    def _collect_params(self) -> None:
        for b in self.group:
            value = b.value
            stack = list(reversed(value.args)) if isinstance(value, Call) else [value.tuple_value]
            while stack:
                a = stack.pop()
                if isinstance(a, Tuple):
                    stack.extend(reversed(a.fields))
                elif isinstance(a, Var):
                    if a not in self.defined and id(a) not in self.inner:
                        self._add_param(a, a.name_hint, a.struct_info)
                elif isinstance(a, Constant) and a.data.ndim > 0 and id(a) not in self.inner:
                    self._add_param(a, "const", a.struct_info)

    def _add_param(self, arg: Expr, hint: str, sinfo: StructInfo | None) -> None:
        param = Var(self.names.fresh(hint), self._sinfo(sinfo))
        self.params.append(param)
        self.args.append(arg)
        self.inner[id(arg)] = param

    def _shape_param(self) -> None:
        """Symbolic variables the tensor parameters do not define (as a whole
        dimension, before any other use) go in a leading R.Shape parameter."""
        if not self.syms:
            return
        defined: set[tir.Var] = set()
        needed: list[tir.Var] = []

        def need(v: tir.Var) -> None:
            if v not in defined and v not in needed:
                needed.append(v)

        for p in self.params:
            _scan_param_dims(p.struct_info, defined, need)
        for v in self.syms.values():
            if v not in defined:
                need(v)
        if not needed:
            return
        reverse = {new: old for old, new in self.syms.items()}
        param = Var(self.names.fresh("tir_vars"), ShapeStructInfo(needed))
        self.params.insert(0, param)
        self.args.insert(0, ShapeExpr([reverse[v] for v in needed]))

    # -- body --------------------------------------------------------------
    def _expr(self, e: Expr) -> Expr:
        mapped = self.inner.get(id(e))
        if mapped is not None:
            return mapped
        if isinstance(e, Tuple):
            return Tuple([self._expr(f) for f in e.fields], span=e.span)
        if isinstance(e, ShapeExpr):
            return ShapeExpr([self._prim(d) for d in e.values], span=e.span) if self.syms else e
        if isinstance(e, PrimValue):
            return PrimValue(self._prim(e.value), span=e.span) if self.syms else e
        return e  # scalar constants, strings, dtypes, operators

    def build(self) -> tuple[Function, list[Expr]]:
        self._collect_syms()
        self._collect_params()
        self._shape_param()
        new_bindings: list[Binding] = []
        result: Var | None = None
        for b in self.group:
            value = b.value
            if isinstance(value, Call):
                sinfo = value.struct_info if value.struct_info is not None else b.var.struct_info
                attrs = map_symbolic_attrs(value.attrs, self._prim)
                new_value: Expr = Call(value.op, [self._expr(a) for a in value.args],
                                       attrs, [self._sinfo(s) for s in value.sinfo_args],
                                       struct_info=self._sinfo(sinfo), span=value.span)
            else:
                new_value = TupleGetItem(self._expr(value.tuple_value), value.index,
                                         span=value.span)
            cls = Var if b is self.sink else DataflowVar
            var = cls(self.names.fresh(b.var.name_hint), self._sinfo(b.var.struct_info),
                      span=b.var.span)
            self.inner[id(b.var)] = var
            new_bindings.append(VarBinding(var, new_value, span=b.span))
            if b is self.sink:
                result = var
        assert result is not None
        body = SeqExpr([DataflowBlock(new_bindings)], result)
        func = Function(self.params, body, result.struct_info, True, {"Primitive": True})
        return func, self.args


def _rename_sinfo(sinfo: StructInfo, vmap: dict[tir.Var, tir.Var]) -> StructInfo:
    """``sinfo`` with symbolic variables renamed; unlike ``substitute_sinfo``
    nothing is simplified, so the lifted function states exactly the caller's
    shapes."""
    def dims(values: Sequence[tir.PrimExpr]) -> list[tir.PrimExpr]:
        return [arith.substitute(d, vmap) for d in values]

    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None:
            return sinfo
        return TensorStructInfo(dims(sinfo.shape), sinfo.dtype, span=sinfo.span)
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is None:
            return sinfo
        return ShapeStructInfo(dims(sinfo.values), span=sinfo.span)
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is None:
            return sinfo
        return PrimStructInfo(sinfo.dtype, arith.substitute(sinfo.value, vmap), span=sinfo.span)
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([_rename_sinfo(f, vmap) for f in sinfo.fields], span=sinfo.span)
    if isinstance(sinfo, FuncStructInfo):
        params = None if sinfo.params is None else [_rename_sinfo(p, vmap) for p in sinfo.params]
        return FuncStructInfo(params, _rename_sinfo(sinfo.ret, vmap), sinfo.purity,
                              span=sinfo.span)
    return sinfo


def _scan_param_dims(sinfo: StructInfo | None, defined: set[tir.Var], need: Any) -> None:
    """Walk a parameter's dimensions as the verifier does: a bare variable not
    yet defined is defined here; any other occurrence must already be defined.
    Inside a tuple the order of fields is not relied on (conservative)."""
    if isinstance(sinfo, TupleStructInfo):
        bare: list[tir.Var] = []
        stack: list[StructInfo] = [sinfo]
        while stack:
            s = stack.pop()
            if isinstance(s, TupleStructInfo):
                stack.extend(s.fields)
                continue
            for dim in _dims(s):
                if isinstance(dim, tir.Var):
                    bare.append(dim)
                else:
                    for v in arith.free_vars(dim):
                        need(v)
        defined.update(bare)
        return
    for dim in _dims(sinfo):
        if isinstance(dim, tir.Var):
            defined.add(dim)
        else:
            for v in arith.free_vars(dim):
                need(v)


def _dims(sinfo: Any) -> tuple[tir.PrimExpr, ...]:
    shape = getattr(sinfo, "shape", None)
    if shape is None:
        shape = getattr(sinfo, "values", None)
    if shape is None:
        value = getattr(sinfo, "value", None)
        shape = (value,) if isinstance(value, tir.PrimExpr) else ()
    return tuple(shape)
