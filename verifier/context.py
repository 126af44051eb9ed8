"""The traversal state the checker maintains and rules read.

Scopes are :class:`Frame` objects. Every definition records the frame it was
made in (``defined_in``); a variable is visible exactly when its frame is
still open, because frames close in stack order. So scope queries are O(1)
and leaving a scope costs O(1) — no set copies, whatever the program size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from phasec.ir import tir
from phasec.ir.expr import Binding, Function, GlobalVar, Var
from phasec.ir.module import IRModule
from phasec.ir.node import Span
from phasec.ir.phase import Phase
from phasec.ir.struct_info import StructInfo
from phasec.op.infer import context_from_module

from phasec.verifier.diagnostics import Diagnostic
from phasec.verifier.keys import Keys

if TYPE_CHECKING:  # rules are built on the context; the context only reports for them
    from phasec.verifier.rules.base import Rule

__all__ = ["Frame", "Context", "FUNCTION", "BRANCH", "DATAFLOW", "PRIM_FUNC"]

FUNCTION = "function"
BRANCH = "if-branch"
DATAFLOW = "dataflow block"
PRIM_FUNC = "prim_func"


class Frame:
    """A scope: a function body, an if-branch, or a dataflow block (for DataflowVars)."""

    __slots__ = ("kind", "open", "function")

    def __init__(self, kind: str, function: str) -> None:
        self.kind = kind
        self.open = True
        self.function = function  # name of the function it belongs to (for messages)


class Context:
    """What rules may look at while the checker walks a module.

    Read-only for rules except :meth:`report`. Attributes:

    * ``mod``, ``phase``: the module and the phase being checked.
    * ``func_name``: the module-level function being walked (None at module level).
    * ``func``: the innermost Relax Function being walked; ``func_depth`` is 0
      for a module-level function and counts nesting.
    * ``top_func``: the module-level Function (or PrimFunc) being walked.
    * ``binding``: the binding being checked (None outside bindings);
      ``outer_binding`` the binding of the nested function being walked.
    * ``in_dataflow``: inside a dataflow block (and not inside a nested function).
    * ``defined_in``: Relax Var -> Frame of its definition; ``sym_defined_in`` and
      ``sym_owner`` (symbolic var -> module-level function name) likewise.
    * ``param_owner``: parameter Var -> name of the function it belongs to.
    * ``tir_scope``: TIR vars and buffers in scope while a PrimFunc is walked.
    """

    def __init__(self, mod: IRModule, phase: Phase) -> None:
        self.mod = mod
        self.phase = phase
        self.diagnostics: list[Diagnostic] = []
        self.func_name: str | None = None
        self.top_func: Any = None
        self.func: Function | None = None
        self.func_depth = -1
        self.binding: Binding | None = None
        self.outer_binding: Binding | None = None  # binds the nested function being walked
        self.in_dataflow = False
        self.frame: Frame | None = None
        self.df_frame: Frame | None = None  # the open dataflow block's frame
        self.anf_ok = True  # False when the current binding value broke normal form
        self.defined_in: dict[Var, Frame] = {}
        self.recursive: set[Var] = set()
        self.sym_defined_in: dict[tir.Var, Frame] = {}
        self.sym_owner: dict[tir.Var, str] = {}
        self.param_owner: dict[Var, str] = {}
        self.tir_scope: set[Any] = set()
        self.stmt_span: Span | None = None
        self._infer_ctx: Any = None
        self._state: dict[str, Any] = {}
        self._infer_memo: tuple[Any, Any, Any] = (None, None, None)
        self.infer_cache: dict[Any, StructInfo] = {}  # call key -> inferred struct info
        self.verdict_cache: dict[Any, str] = {}  # (annotation key, inferred key) -> verdict
        self.keys = Keys()

    # -- reporting -------------------------------------------------------
    def report(self, rule: Rule, message: str, node: Any = None, *, help: str | None = None,
               severity: str | None = None) -> None:
        """Record a violation of ``rule`` at ``node`` (or the current binding)."""
        binding = self.binding or self.outer_binding
        var = getattr(binding, "var", None)
        self.diagnostics.append(Diagnostic(
            rule.code, severity or rule.severity, message, self.func_name,
            var.name_hint if isinstance(var, Var) else None,
            self.span_of(node), rule.help if help is None else help))

    def span_of(self, node: Any = None) -> Span | None:
        """The most specific source location available for ``node``."""
        span = getattr(node, "span", None) if node is not None else None
        if isinstance(span, Span):
            return span
        if self.stmt_span is not None:
            return self.stmt_span
        b = self.binding or self.outer_binding
        if b is not None:
            for candidate in (b, getattr(b, "var", None), getattr(b, "value", None)):
                span = getattr(candidate, "span", None)
                if isinstance(span, Span):
                    return span
        for candidate in (self.func, self.top_func, self.mod):
            span = getattr(candidate, "span", None)
            if isinstance(span, Span):
                return span
        return None

    def state(self, rule: Rule, factory: Any = set) -> Any:
        """Per-check scratch storage for ``rule`` (rules themselves are stateless)."""
        st = self._state.get(rule.code)
        if st is None:
            st = self._state[rule.code] = factory()
        return st

    # -- scope queries -----------------------------------------------------
    def visible(self, var: Var) -> bool:
        """Is ``var`` defined and in scope here?"""
        frame = self.defined_in.get(var)
        return (frame is not None and frame.open) or var in self.recursive

    def sym_visible(self, var: tir.Var) -> bool:
        frame = self.sym_defined_in.get(var)
        return frame is not None and frame.open

    # -- module lookups ------------------------------------------------------
    def lookup(self, gvar: GlobalVar | str) -> Any:
        """The module function named by ``gvar``, or None."""
        name = gvar.name_hint if isinstance(gvar, GlobalVar) else gvar
        return self.mod.functions.get(name)

    def infer_context(self) -> Any:
        """The operator registry's InferContext for this module (built once)."""
        if self._infer_ctx is None:
            self._infer_ctx = context_from_module(self.mod)
        return self._infer_ctx
