"""The operator registry: one :class:`OpDef` per operator, in one place.

An entry carries everything the compiler needs to know about an operator:
its operands and attributes (which the TVMScript parser and printer use),
struct-info inference, a numpy reference implementation (the interpreter and
FoldConstant use it), its fusion pattern kind, its purity, and its
legalization to TIR (LegalizeOps uses it).

This module is the bottom of the operator package: it imports none of the
operators. They register themselves when their family modules are imported,
and importing :mod:`phasec.op` (which any ``phasec.op.<module>`` import
does first) imports every family, so the registry is complete wherever it
can be reached from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
import difflib
from typing import TYPE_CHECKING, Any

from phasec.op.draw import draw_of

if TYPE_CHECKING:
    from phasec.ir.expr import Call, Expr
    from phasec.ir.struct_info import StructInfo
    from phasec.te import Tensor

__all__ = ["OpPattern", "OpDef", "REQUIRED", "register_op", "get_op", "find_op",
           "list_ops", "InferContext", "CATEGORY_MAX_PHASE", "LEGALIZE", "LEGALIZE_RELAX",
           "LOWERS_TO", "LegalizeFn"]


class OpPattern(IntEnum):
    """Fusion pattern kinds, ordered as TVM's OpPatternKind."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default marker for an attribute that has no default.
REQUIRED: Any = _Required()


#: ``legalize(call, inputs) -> te.Tensor | list[te.Tensor]``: an operator's
#: lowering to a kernel (see :mod:`phasec.op._lowering`).
LegalizeFn = Callable[["Call", Sequence[Any]], "Tensor | list[Tensor]"]

#: op name -> TE definition of its lowering (registered beside the operator
#: with :func:`phasec.op._lowering.legalizes`)
LEGALIZE: dict[str, LegalizeFn] = {}

#: op name -> ``fn(call) -> Expr``: operators that lower to a Relax expression
#: instead of a kernel (a VM builtin or a packed call: shape_of, print...).
#: ``call`` carries its struct info; the result must be valid in the lowering
#: phase (call_pure_packed, an ExternFunc call...).
LEGALIZE_RELAX: dict[str, Callable[["Call"], "Expr"]] = {}

#: op name -> what its LEGALIZE_RELAX lowering produces, for PHASES.md
LOWERS_TO: dict[str, str] = {}


@dataclass(frozen=True)
class InferContext:
    """What inference may need beyond the call: struct info of module globals."""

    globals: Mapping[str, "StructInfo"] = field(default_factory=dict)


@dataclass(frozen=True)
class OpDef:
    """Everything phasec knows about one operator.

    Attributes:
        name: registry name, e.g. ``"relax.nn.conv2d"``; TVMScript spells it
            ``R.nn.conv2d`` (see :attr:`script_name`).
        args: names of the Relax-expression operands, in order. With
            ``variadic`` the last name absorbs any number of operands.
        attrs: attribute name -> default value (``REQUIRED`` if none). In
            TVMScript attributes are keyword arguments (or trailing positional
            arguments after the operands).
        infer: ``infer(call, ctx) -> StructInfo``; raises StructInfoError.
        reference: numpy implementation ``reference(*operand_values, **attrs)``,
            or None for ops that are not computations (builtins).
        pattern: fusion pattern kind.
        pure: False when the op has side effects.
        category: which phases may contain the op (see :data:`CATEGORY_MAX_PHASE`):
            ``"compute"`` high-level operators (ingestion, optimization);
            ``"call"`` call_tir, call_dps_packed, call_pure_packed,
            invoke_pure_closure (up to lowering); ``"memory"`` explicit
            allocation builtins ``R.builtin.*`` / ``R.memory.*`` (up to
            lowering); ``"vm"`` VM builtins ``R.vm.*``, make_closure,
            invoke_closure, null_value (every phase).
        doc: one line describing the op.
    """

    name: str
    args: tuple[str, ...]
    infer: Callable[["Call", InferContext], "StructInfo"]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    reference: Callable[..., Any] | None = None
    pattern: OpPattern = OpPattern.OPAQUE
    pure: bool = True
    variadic: bool = False
    category: str = "compute"
    doc: str = ""

    @property
    def legalize(self) -> Callable[..., Any] | None:
        """The op's lowering to TIR (a TE definition), or None.

        Each TE definition lives beside the op's definition in its family
        module, registered with :func:`phasec.op._lowering.legalizes`; this
        property is the op's view of its entry.
        """
        return LEGALIZE.get(self.name)

    @property
    def legalize_relax(self) -> Callable[..., Any] | None:
        """The op's lowering to a Relax expression instead of a kernel (a VM
        builtin or packed call: shape_of, print, sort...), or None; see
        :func:`phasec.op._lowering.legalizes_to_relax`."""
        return LEGALIZE_RELAX.get(self.name)

    @property
    def draw(self) -> Any:
        """How a random program generator calls the op (a
        :class:`phasec.op.draw.Draw` declared beside its definition), or None."""
        return draw_of(self.name)

    @property
    def max_phase(self) -> int:
        """The last phase (as an int) in which this op may appear."""
        return CATEGORY_MAX_PHASE[self.category]

    @property
    def script_name(self) -> str:
        """The TVMScript spelling: ``relax.nn.relu`` -> ``R.nn.relu``."""
        return "R." + self.name.removeprefix("relax.")


#: category -> last phase (0 ingestion .. 3 build) in which ops of it may appear
CATEGORY_MAX_PHASE: Mapping[str, int] = {"compute": 1, "call": 2, "memory": 2, "vm": 3}

_REGISTRY: dict[str, OpDef] = {}


def register_op(op: OpDef) -> OpDef:
    """Add an operator; registering a name twice is an error."""
    if op.category not in CATEGORY_MAX_PHASE:
        raise ValueError(f"operator {op.name!r}: unknown category {op.category!r}")
    if op.name in _REGISTRY:
        raise ValueError(f"operator {op.name!r} is already registered")
    _REGISTRY[op.name] = op
    return op


def find_op(name: str) -> OpDef | None:
    """The OpDef for ``name`` (``relax.add``, or the script form ``R.add``), or None."""
    if name.startswith("R."):
        name = "relax." + name[2:]
    return _REGISTRY.get(name)


def get_op(name: str) -> OpDef:
    """The OpDef for ``name``; an unknown name is a KeyError listing close matches."""
    op = find_op(name)
    if op is None:
        close = difflib.get_close_matches(name.replace("R.", "relax.", 1), list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown operator {name!r}{hint}")
    return op


def list_ops() -> list[OpDef]:
    """Every registered operator, sorted by name."""
    return sorted(_REGISTRY.values(), key=lambda o: o.name)
