"""Fusion rules: which operator pattern kinds FuseOps may put in one function.

A :class:`FusionRules` value is a table a user replaces per target (an
accelerator that runs matmul alone, a CPU that likes big kernels...)::

    from phasec.passes.fuse_ops import FuseOps, FusionRules, DEFAULT_RULES
    from phasec.op.registry import OpPattern as P

    no_epilogue = DEFAULT_RULES.forbid((P.OUT_ELEMWISE_FUSABLE, P.ELEMWISE),
                                       (P.OUT_ELEMWISE_FUSABLE, P.BROADCAST),
                                       name="my_accel")
    mod = FuseOps(rules=no_epilogue)(mod)
    # or for a whole pipeline: PassContext(config={"FuseOps.rules": no_epilogue})
    # or by name once registered: register_fusion_rules(no_epilogue),
    #   then FuseOps{rules=my_accel} in a textual pipeline

The table is a set of allowed *(producer kind, consumer kind)* pairs over
:class:`~phasec.op.registry.OpPattern`; see :mod:`phasec.passes.fuse_ops` for how
FuseOps reads it and for the default table. ``op_patterns`` overrides the
pattern kind of individual operators (``{"relax.nn.conv2d": OpPattern.OPAQUE}``
keeps conv2d alone), and ``max_fused_ops`` bounds the size of a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from phasec import arith
from phasec.op.registry import OpDef, OpPattern
from phasec.transform import PassConfigError
from phasec.transform.info import is_int_at_least

__all__ = [
    "FusionRules", "DEFAULT_RULES", "TVM_RULES", "NO_EPILOGUE_RULES", "INJECTIVE_PATTERNS",
    "ANCHOR_PATTERNS", "STEM_MAX_CHANNELS", "stem_pool", "register_fusion_rules",
    "get_fusion_rules", "list_fusion_rules",
    "resolve_rules",
]

E, B, I = OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE
R, O = OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE

#: Kinds computed inline in their consumer (no accumulator needed).
INJECTIVE_PATTERNS: frozenset[OpPattern] = frozenset({E, B, I})
#: Kinds that anchor a group: at most one per fused function.
ANCHOR_PATTERNS: frozenset[OpPattern] = frozenset({R, O})
#: Kinds that may appear in the table at all (TUPLE and OPAQUE never fuse).
_FUSABLE = INJECTIVE_PATTERNS | ANCHOR_PATTERNS

Pair = tuple[OpPattern, OpPattern]


def _pattern(value: Any, where: str) -> OpPattern:
    """An OpPattern from an OpPattern, its int value or its name (any case)."""
    if isinstance(value, OpPattern):
        return value
    if isinstance(value, str) and value.upper() in OpPattern.__members__:
        return OpPattern[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return OpPattern(value)
        except ValueError:
            pass
    names = ", ".join(OpPattern.__members__)
    raise PassConfigError(f"FusionRules: {where}: {value!r} is not a pattern kind; "
                          f"expected one of {names}")


@dataclass(frozen=True)
class FusionRules:
    """A replaceable fusion table.

    Attributes:
        pairs: allowed (producer kind, consumer kind) pairs. For an injective
            producer (ELEMWISE/BROADCAST/INJECTIVE) ``(P, C)`` lets it be
            computed inline in a consumer of kind ``C``; for an anchor
            (COMM_REDUCE/OUT_ELEMWISE_FUSABLE) ``(A, C)`` lets a consumer of
            kind ``C`` join as the anchor's epilogue. Pairs involving TUPLE or
            OPAQUE are rejected: such operators always stay alone.
        max_fused_ops: the largest number of operators in one group
            (TVM's ``kMaxFusedOps`` is 256).
        op_patterns: per-operator pattern overrides, operator name ->
            kind (e.g. ``{"relax.nn.conv2d": OpPattern.OPAQUE}``).
        name: how the table is spelled in a textual pipeline
            (``FuseOps{rules=NAME}``) once registered.
        stem_pools: a conv2d of few input channels (a stem, :func:`stem_pool`)
            with its epilogue also takes the 2-D max pool after it, one kernel
            that pools the convolution's rows from a ring
            (:mod:`phasec.te.schedules.conv_pool_stem`).
    """

    pairs: frozenset[Pair] = frozenset()
    max_fused_ops: int = 256
    op_patterns: Mapping[str, OpPattern] = field(default_factory=dict)
    name: str = "custom"
    stem_pools: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.pairs, (str, bytes)) or not isinstance(self.pairs, Iterable):
            raise PassConfigError("FusionRules(pairs=...) takes (producer, consumer) pairs of "
                                  f"pattern kinds, not {type(self.pairs).__name__}")
        pairs = set()
        for item in self.pairs:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise PassConfigError(f"FusionRules(pairs=...): {item!r} is not a "
                                      "(producer, consumer) pair")
            pair = (_pattern(item[0], "pairs"), _pattern(item[1], "pairs"))
            for kind in pair:
                if kind not in _FUSABLE:
                    raise PassConfigError(
                        f"FusionRules(pairs=...): ({pair[0].name}, {pair[1].name}) names "
                        f"{kind.name}, which never fuses; use ELEMWISE, BROADCAST, INJECTIVE, "
                        "COMM_REDUCE or OUT_ELEMWISE_FUSABLE")
            pairs.add(pair)
        object.__setattr__(self, "pairs", frozenset(pairs))
        if not is_int_at_least(self.max_fused_ops, 1):
            raise PassConfigError(f"FusionRules(max_fused_ops={self.max_fused_ops!r}) must be "
                                  "an int >= 1")
        if not isinstance(self.op_patterns, Mapping):
            raise PassConfigError("FusionRules(op_patterns=...) maps operator names to "
                                  f"pattern kinds, not {type(self.op_patterns).__name__}")
        overrides = {}
        for op_name, kind in self.op_patterns.items():
            if not isinstance(op_name, str):
                raise PassConfigError(f"FusionRules(op_patterns=...): key {op_name!r} is not "
                                      "an operator name")
            key = "relax." + op_name[2:] if op_name.startswith("R.") else op_name
            overrides[key] = _pattern(kind, f"op_patterns[{op_name!r}]")
        # A sorted tuple keeps the value hashable and its repr deterministic.
        object.__setattr__(self, "op_patterns", _FrozenDict(sorted(overrides.items())))
        if not isinstance(self.name, str) or not self.name:
            raise PassConfigError("FusionRules(name=...) must be a non-empty string")

    # -- queries -----------------------------------------------------------
    def can_fuse(self, producer: OpPattern, consumer: OpPattern) -> bool:
        """Whether the table allows the pair (see :attr:`pairs`)."""
        return (producer, consumer) in self.pairs

    def pattern_of(self, op: OpDef) -> OpPattern:
        """The kind FuseOps uses for ``op``: its override, else its registry pattern."""
        return self.op_patterns.get(op.name, op.pattern)

    # -- deriving new tables ----------------------------------------------
    def allow(self, *pairs: Pair, name: str | None = None) -> "FusionRules":
        """A copy that also allows ``pairs``."""
        return replace(self, pairs=self.pairs | frozenset(pairs), name=name or self.name)

    def forbid(self, *pairs: Pair, name: str | None = None) -> "FusionRules":
        """A copy without ``pairs``."""
        drop = {(_pattern(a, "forbid"), _pattern(b, "forbid")) for a, b in pairs}
        return replace(self, pairs=self.pairs - drop, name=name or self.name)

    def with_op_patterns(self, overrides: Mapping[str, OpPattern],
                         name: str | None = None) -> "FusionRules":
        """A copy with more per-operator pattern overrides."""
        return replace(self, op_patterns={**self.op_patterns, **overrides},
                       name=name or self.name)

    def describe(self) -> str:
        """The table as text, one ``producer -> consumers`` line per producer kind."""
        lines = [f"fusion rules {self.name!r} (max {self.max_fused_ops} ops per group)"]
        for producer in sorted(_FUSABLE):
            consumers = sorted(c for p, c in self.pairs if p == producer)
            text = ", ".join(c.name for c in consumers) or "(nothing)"
            lines.append(f"  {producer.name} -> {text}")
        for op_name, kind in self.op_patterns.items():
            lines.append(f"  override {op_name}: {kind.name}")
        return "\n".join(lines)


class _FrozenDict(dict):
    """A read-only, hashable dict (FusionRules stays a hashable value)."""

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FusionRules.op_patterns is read-only; use with_op_patterns()")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


_INJECTIVE_CHAINS = frozenset((p, c) for p in INJECTIVE_PATTERNS for c in INJECTIVE_PATTERNS)

#: The default table (see the module docstring of :mod:`phasec.passes.fuse_ops`).
DEFAULT_RULES = FusionRules(
    pairs=_INJECTIVE_CHAINS | {(E, R), (B, R), (O, E), (O, B), (R, E), (R, B)},
    name="default", stem_pools=True)

#: TVM's table: reductions take no epilogue.
TVM_RULES = replace(DEFAULT_RULES.forbid((R, E), (R, B), name="tvm"), stem_pools=False)

#: Anchors (matmul, conv2d, pooling, reductions) take no epilogue; injective
#: chains and reduction inputs still fuse.
NO_EPILOGUE_RULES = replace(DEFAULT_RULES.forbid((O, E), (O, B), (R, E), (R, B),
                                                 name="no_epilogue"), stem_pools=False)

#: input channels up to which a conv2d takes the max pool after it (:func:`stem_pool`)
STEM_MAX_CHANNELS = 4


def stem_pool(conv: Any, pool: Any) -> bool:
    """Whether the 2-D max pool ``pool`` joins the group of the convolution
    ``conv`` (Relax calls): an NCHW float conv2d of one group and at most
    :data:`STEM_MAX_CHANNELS` input channels, an NCHW max pool. The
    convolution's output (3.2 MB for ResNet-50's) is then pooled from a ring
    of its rows in the cache, never written whole."""
    if (getattr(conv.op, "name", None) != "relax.nn.conv2d"
            or getattr(pool.op, "name", None) != "relax.nn.max_pool2d"):
        return False
    ca, pa = conv.attrs, pool.attrs
    if (str(ca.get("data_layout", "NCHW")) != "NCHW" or str(ca.get("kernel_layout", "OIHW"))
            != "OIHW" or str(ca.get("out_layout") or "NCHW") != "NCHW"
            or int(ca.get("groups", 1)) != 1 or str(pa.get("layout", "NCHW")) != "NCHW"
            or str(pa.get("out_layout") or "NCHW") != "NCHW"):
        return False
    weight = getattr(conv.args[1], "struct_info", None)
    shape = getattr(weight, "shape", None)
    dims = shape if isinstance(shape, tuple) else getattr(shape, "values", None)
    if dims is None or len(dims) != 4 or getattr(weight, "dtype", "") not in ("float32", "float64"):
        return False
    channels = arith.const_int(dims[1])
    return channels is not None and channels <= STEM_MAX_CHANNELS

_NAMED: dict[str, FusionRules] = {}


def register_fusion_rules(rules: FusionRules, *, replace_existing: bool = False) -> FusionRules:
    """Make ``rules`` available by its name (``FuseOps{rules=NAME}``)."""
    if not isinstance(rules, FusionRules):
        raise PassConfigError(f"register_fusion_rules takes a FusionRules, not "
                              f"{type(rules).__name__}")
    existing = _NAMED.get(rules.name)
    if existing is not None and existing != rules and not replace_existing:
        raise PassConfigError(f"fusion rules {rules.name!r} are already registered with a "
                              "different table; pass replace_existing=True or pick another name")
    _NAMED[rules.name] = rules
    return rules


def get_fusion_rules(name: str) -> FusionRules:
    """The registered table called ``name``; an unknown name lists the known ones."""
    rules = _NAMED.get(name)
    if rules is None:
        raise PassConfigError(f"unknown fusion rules {name!r}; registered: "
                              f"{', '.join(sorted(_NAMED))}")
    return rules


def list_fusion_rules() -> list[str]:
    """Names of the registered tables."""
    return sorted(_NAMED)


def resolve_rules(value: Any, where: str) -> FusionRules:
    """A FusionRules from a FusionRules or a registered name; ``where`` names
    the source (the pass option or the PassContext config key) in errors."""
    if isinstance(value, FusionRules):
        return value
    if isinstance(value, str):
        try:
            return get_fusion_rules(value)
        except PassConfigError as exc:
            raise PassConfigError(f"{where}: {exc}") from None
    raise PassConfigError(f"{where} must be a FusionRules or the name of registered fusion "
                          f"rules, not {type(value).__name__}")


for _rules in (DEFAULT_RULES, TVM_RULES, NO_EPILOGUE_RULES):
    register_fusion_rules(_rules)
