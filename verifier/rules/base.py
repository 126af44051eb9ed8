"""The rule base class and the one table every rule is registered in.

This module is the bottom of the rules package: the rule groups
(``scope``, ``normal_form``, ...) import it to define and register their
rules, and the package (:mod:`phasec.verifier.rules`) imports the groups and
answers queries over the complete table.

A rule is a small class: a stable ``code``, a one-line ``title``, a longer
``explanation``, the phase ``since`` which it applies, a default ``help``
line, and one or more *hooks* — methods named after the traversal events the
rule cares about. The checker walks each function once and calls, at every
event, only the hooks of the rules active in the phase being checked.

Events (all receive the :class:`~verifier.context.Context` first):

=====================  ==========================================================
``module(mod)``        once per module, before any function
``enter_function(f)``  a Relax function (top-level or nested), params not yet defined
``exit_function(f)``   after its body
``var_def(var, kind)`` a Relax variable is about to be defined; kind is
                       ``"param"``, ``"binding"`` or ``"match_cast"``
``var_use(var)``       a Relax variable is read (report without a node: a Var's
                       span is its definition, the context knows the use site)
``global_use(gv)``     a GlobalVar is referenced
``sym_def(v)``         a symbolic shape variable is defined (param annotation, match_cast)
``sym_use(v)``         a symbolic shape variable is read
``block(b)``           a binding block starts
``binding(b)``         a binding, after its value's events, before its var is defined
``call(call, opdef)``  a Call bound by a binding (``opdef`` None unless op is a
                       registered Op); a rule may restrict this to some operators
                       with ``ops`` / ``categories``
``if_(e)``             an If bound by a binding
``non_leaf(e, where)`` a non-leaf expression where A-normal form wants a leaf
``misplaced_seq(e)``   a SeqExpr that is not a function or branch body
``bad_value(v)``       a binding value that is not a Relax expression (e.g. a PrimFunc)
``prim_func(f)``       a PrimFunc (its body is walked next)
``tir_var_def(v)``     a TIR variable is defined (loop, let, block axis)
``tir_var_use(v)``     a TIR variable is read
``tir_buffer_use(b)``  a buffer is loaded, stored or named in a block region
=====================  ==========================================================
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from phasec.ir.module import IRModule
from phasec.ir.phase import Phase

from phasec.verifier.context import Context
from phasec.verifier.diagnostics import ERROR
from phasec.verifier.injection import Choose

__all__ = ["Rule", "TVMCheck", "HOOKS", "register", "registered"]

#: every event name a rule may implement
HOOKS = ("module", "enter_function", "exit_function", "var_def", "var_use", "global_use",
         "sym_def", "sym_use", "block", "binding", "call", "if_", "non_leaf",
         "misplaced_seq", "bad_value", "prim_func", "tir_var_def", "tir_var_use",
         "tir_buffer_use")


class TVMCheck(enum.Enum):
    """How TVM 0.27 treats a module that violates a rule, printed as TVMScript
    and checked by ``tvm.relax.analysis.check_well_formed``.

    ``tests/test_tvm_differential.py`` holds every rule to its classification
    against TVM itself, and ``phasec fuzz --against tvm`` injects the
    violations TVM refuses too (:data:`REFUSES`).
    """

    #: TVM refuses the module too (its parser or its check_well_formed).
    REFUSES = "refuses"
    #: A phase invariant: TVM has no phases, so phasec alone checks it.
    NO_PHASES = "no phases"
    #: The text cannot carry the violation: printed and read back, the module
    #: no longer has it (``tvm_note`` says what it reads back as).
    TEXT_CANNOT_CARRY = "text cannot carry it"
    #: TVM's check does not look for it: TVM accepts the module
    #: (``tvm_note`` says why).
    NOT_CHECKED = "not checked"


class Rule:
    """Base class of every rule; subclass, set the class attributes, override hooks.

    Besides its check, a rule carries how to break it (:meth:`inject`, for
    :mod:`phasec.testing.mutations`) and how TVM treats the violation
    (``tvm``), so a new rule is this one class plus its test cases.
    """

    code: ClassVar[str] = ""
    title: ClassVar[str] = ""
    explanation: ClassVar[str] = ""
    since: ClassVar[Phase] = Phase.INGESTION
    severity: ClassVar[str] = ERROR
    help: ClassVar[str] = ""
    #: restrict the ``call`` hook to calls of these operator names and/or
    #: operator categories (``OpDef.category``; ``"unknown"`` for an Op not in
    #: the registry). Both None: every call, whatever the callee.
    ops: ClassVar[frozenset[str] | None] = None
    categories: ClassVar[frozenset[str] | None] = None
    #: the ``call`` hook's diagnostics depend only on the call's struct-info
    #: key (``ctx.keys.call``: callee, operands' struct info, attributes,
    #: sinfo_args), the binding's kind and annotation, ``ctx.anf_ok``,
    #: ``ctx.in_dataflow``, ``ctx.func`` and the module. The checker then
    #: skips the hook for a key it already passed without a diagnostic
    #: (a performance promise; set it only when it holds).
    call_keyed: ClassVar[bool] = False
    #: how TVM's own well-formedness check treats a violation (required)
    tvm: ClassVar[TVMCheck | None] = None
    #: why TVM does not refuse it the way phasec does: required when ``tvm`` is
    #: TEXT_CANNOT_CARRY or NOT_CHECKED, a caveat for REFUSES
    tvm_note: ClassVar[str] = ""
    #: what :meth:`inject` does, one line ("bind the same variable twice")
    injection: ClassVar[str] = ""
    #: why the rule has no :meth:`inject`, when its violation cannot be injected
    uninjectable: ClassVar[str] = ""

    def hooks(self) -> list[str]:
        """The events this rule implements (the hook methods it overrides)."""
        return [h for h in HOOKS if getattr(type(self), h) is not getattr(Rule, h)]

    # Hook defaults: do nothing. Subclasses override the ones they need.
    def module(self, ctx: Context, mod: Any) -> None: ...
    def enter_function(self, ctx: Context, func: Any) -> None: ...
    def exit_function(self, ctx: Context, func: Any) -> None: ...
    def var_def(self, ctx: Context, var: Any, kind: str) -> None: ...
    def var_use(self, ctx: Context, var: Any) -> None: ...
    def global_use(self, ctx: Context, gvar: Any) -> None: ...
    def sym_def(self, ctx: Context, var: Any) -> None: ...
    def sym_use(self, ctx: Context, var: Any) -> None: ...
    def block(self, ctx: Context, block: Any) -> None: ...
    def binding(self, ctx: Context, binding: Any) -> None: ...
    def call(self, ctx: Context, call: Any, opdef: Any) -> None: ...
    def if_(self, ctx: Context, expr: Any) -> None: ...
    def non_leaf(self, ctx: Context, expr: Any, where: str) -> None: ...
    def misplaced_seq(self, ctx: Context, expr: Any) -> None: ...
    def bad_value(self, ctx: Context, value: Any) -> None: ...
    def prim_func(self, ctx: Context, func: Any) -> None: ...
    def tir_var_def(self, ctx: Context, var: Any) -> None: ...
    def tir_var_use(self, ctx: Context, var: Any) -> None: ...
    def tir_buffer_use(self, ctx: Context, buffer: Any) -> None: ...

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        """A copy of ``mod`` (well-formed, of phase ``since`` or later) with a
        violation of this rule, made the way a faulty pass would make it.

        ``choose(n)`` returns an index in ``range(n)`` for each choice (which
        function, which binding, where to insert), so hypothesis can drive and
        shrink them. Prefer a realistic edit of existing code (duplicate a
        binding, delete a function still called) and fall back to inserting a
        small self-contained offending binding or function when the module has
        nothing to edit. Rules that implement it set ``injection``; the others
        say why in ``uninjectable``.
        """
        raise NotImplementedError(f"rule {self.code} has no injector: {self.uninjectable}")

    @property
    def injectable(self) -> bool:
        """Does this rule implement :meth:`inject`?"""
        return type(self).inject is not Rule.inject

    def __repr__(self) -> str:
        return f"<rule {self.code} ({self.since.label}): {self.title}>"


_RULES: dict[str, Rule] = {}


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add one instance of ``cls`` to the rule table."""
    if not cls.code or not cls.title or not cls.explanation:
        raise ValueError(f"rule {cls.__name__} needs a code, a title and an explanation")
    if not isinstance(cls.tvm, TVMCheck):
        raise ValueError(f"rule {cls.code} needs tvm: how TVM's check_well_formed treats "
                         "a violation (a TVMCheck)")
    if cls.tvm in (TVMCheck.TEXT_CANNOT_CARRY, TVMCheck.NOT_CHECKED) and not cls.tvm_note:
        raise ValueError(f"rule {cls.code} needs a tvm_note saying why TVM does not refuse it")
    if cls.inject is not Rule.inject and not cls.injection:
        raise ValueError(f"rule {cls.code} needs an injection line describing its inject()")
    if cls.inject is Rule.inject and not cls.uninjectable:
        raise ValueError(f"rule {cls.code} needs an inject() method, or uninjectable saying "
                         "why its violation cannot be injected")
    if cls.code in _RULES:
        raise ValueError(f"rule code {cls.code} registered twice")
    _RULES[cls.code] = cls()
    return cls


def registered() -> dict[str, Rule]:
    """Code -> rule, for every rule registered so far (the rule groups register
    theirs when :mod:`phasec.verifier.rules` imports them)."""
    return _RULES
