"""IRModule: an immutable map from global names to functions, plus attributes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from .expr import BaseFunc, Function, GlobalVar
from .node import Span
from .phase import Phase
from .tir import PrimFunc, frozen_attrs

__all__ = ["IRModule"]


class IRModule:
    """A module of Relax functions and PrimFuncs.

    Immutable: every method that "changes" a module returns a new one.
    ``mod.phase`` is read from ``attrs["phase"]``; no attribute means ingestion.
    """

    __slots__ = ("_functions", "_attrs", "span")

    def __init__(self, functions: Mapping[str, BaseFunc] | None = None,
                 attrs: Mapping[str, Any] | None = None, span: Span | None = None) -> None:
        funcs = dict(functions or {})
        for name, func in funcs.items():
            if not isinstance(name, str):
                raise TypeError(f"IRModule keys are function names (str), not {type(name).__name__}")
            if not isinstance(func, (Function, PrimFunc)):
                raise TypeError(f"IRModule[{name!r}] must be a Function or PrimFunc, "
                                f"not {type(func).__name__}")
        self._functions = MappingProxyType(funcs)
        self._attrs = frozen_attrs(attrs)
        if "phase" in self._attrs:
            Phase.parse(self._attrs["phase"])  # reject nonsense early
        self.span = span

    # -- reading ---------------------------------------------------------
    @property
    def functions(self) -> Mapping[str, BaseFunc]:
        return self._functions

    @property
    def attrs(self) -> Mapping[str, Any]:
        return self._attrs

    @property
    def phase(self) -> Phase:
        return Phase.parse(self._attrs.get("phase", Phase.INGESTION))

    def __getitem__(self, name: str | GlobalVar) -> BaseFunc:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        try:
            return self._functions[key]
        except KeyError:
            raise KeyError(f"module has no function {key!r}; it has: "
                           f"{', '.join(self._functions) or '(none)'}") from None

    def __contains__(self, name: object) -> bool:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        return key in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._functions:
            raise KeyError(f"module has no function {name!r}")
        return GlobalVar(name)

    def relax_functions(self) -> Iterator[tuple[str, Function]]:
        return ((n, f) for n, f in self._functions.items() if isinstance(f, Function))

    def prim_funcs(self) -> Iterator[tuple[str, PrimFunc]]:
        return ((n, f) for n, f in self._functions.items() if isinstance(f, PrimFunc))

    # -- "changing" (returns new modules) --------------------------------
    def update(self, functions: Mapping[str, BaseFunc]) -> "IRModule":
        """A module with these functions added or replaced."""
        return IRModule({**self._functions, **functions}, self._attrs, self.span)

    def map_functions(self, fn: Callable[[str, Any], BaseFunc],
                      kind: type = Function) -> "IRModule":
        """Apply ``fn(name, func)`` to every function of type ``kind`` (Relax
        functions by default) and put back what it returns; a function it
        returns unchanged stays, and the module itself is returned when
        nothing changed."""
        changed = {}
        for name, func in self._functions.items():
            if isinstance(func, kind):
                new = fn(name, func)
                if new is not func:
                    changed[name] = new
        return self.update(changed) if changed else self

    def update_func(self, name: str, func: BaseFunc) -> "IRModule":
        return self.update({name: func})

    def remove(self, *names: str) -> "IRModule":
        return IRModule({k: v for k, v in self._functions.items() if k not in names},
                        self._attrs, self.span)

    def with_functions(self, functions: Mapping[str, BaseFunc]) -> "IRModule":
        """A module with exactly these functions and the same attributes."""
        return IRModule(functions, self._attrs, self.span)

    def with_attr(self, key: str, value: Any) -> "IRModule":
        return IRModule(self._functions, {**self._attrs, key: value}, self.span)

    def with_attrs(self, attrs: Mapping[str, Any]) -> "IRModule":
        return IRModule(self._functions, attrs, self.span)

    def with_phase(self, phase: Phase | int | str) -> "IRModule":
        return self.with_attr("phase", Phase.parse(phase).label)

    # -- text ------------------------------------------------------------
    def script(self, syntax: str | None = None) -> str:
        """The module as TVMScript.

        ``syntax``: ``"tvm"`` (what TVM 0.27 prints and parses: ``tirx``,
        ``T.sblock``, ``out_ty=``, ``out_dtype=None``) or ``"legacy"`` (the
        spelling before TVM 0.27); default: the spelling selected with
        :func:`phasec.script.printer.syntax`, else ``"tvm"``.
        """
        from ..script.printer import print_module

        return print_module(self, syntax)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        """The module as TVMScript, as TVM shows it."""
        return self.script()
