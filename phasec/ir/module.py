"""IRModule: an immutable map from global names to functions, plus attributes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from phasec.ir.expr import BaseFunc, Function, GlobalVar
from phasec.ir.node import Node, Span, node, script_text
from phasec.ir.phase import Phase
from phasec.ir.tir import PrimFunc, frozen_attrs

__all__ = ["IRModule", "VDevice", "Target", "DummyGlobalInfo", "GLOBAL_INFO_KINDS",
           "canonical_vdevice"]

#: The kinds of module global info phasec keeps (``I.module_global_infos``).
GLOBAL_INFO_KINDS = ("vdevice",)


def target_kind(target: Any) -> str:
    """The kind of a target written as a string or a configuration dictionary."""
    if isinstance(target, Mapping):
        return str(target.get("kind", ""))
    return str(target).split()[0] if str(target).strip() else ""


def plain_target(target: Any) -> Any:
    """A target as phasec keeps it: configuration dictionaries as dicts and
    arrays as lists at every depth (as TVM prints them), whatever spelling
    (tuple or list) the source or document used."""
    if isinstance(target, (tuple, list)):
        return [plain_target(v) for v in target]
    if isinstance(target, Mapping):
        return {k: plain_target(v) for k, v in target.items()}
    return target


def target_problem(target: Any) -> str | None:
    """Why ``target`` is not a target TVM accepts (None when it is): a
    non-blank target string, or a configuration dictionary whose ``"kind"``
    is a non-empty string."""
    if isinstance(target, str):
        return None if target.strip() else "a target string cannot be blank"
    if isinstance(target, Mapping):
        kind = target.get("kind")
        if isinstance(kind, str) and kind:
            return None
        return 'a target dictionary needs a "kind" string (e.g. {"kind": "cuda"})'
    return ('a target is a target string such as "llvm" or a target dictionary, not '
            f"{type(target).__name__}")


@node
class VDevice(Node):
    """A virtual device, TVM's ``I.vdevice(target, vdevice_id, memory_scope)``.

    ``target`` is kept as written: a target string (``"llvm"``,
    ``"cuda -arch=sm_80"``) or a target configuration dictionary (what TVM
    prints, ``{"kind": "cuda", "arch": "sm_80", ...}``). phasec compiles for
    the host only; it carries virtual devices so that TVM modules that name
    them read, print and compare faithfully.
    """

    target: Any
    vdevice_id: int = 0
    memory_scope: str = "global"
    span: Span | None = None

    @property
    def kind(self) -> str:
        """The target kind (``"llvm"``, ``"cuda"``...)."""
        return target_kind(self.target)


@node
class DummyGlobalInfo(Node):
    """TVM's ``I.dummy_global_info()``: a global info entry that holds
    nothing (TVM's tests use it to exercise module global infos). Under any
    key but ``"vdevice"``; kept so that such modules read and print back."""

    span: Span | None = None


@node
class Target(Node):
    """A compilation target as TVM writes it, ``T.target("llvm")`` or
    ``T.target({"kind": "llvm", "keys": ["cpu"], ...})``, kept as written.

    TVM's LegalizeOps sets it as the ``"target"`` attribute of the PrimFuncs
    of a module with virtual devices. phasec compiles every kernel for the
    host CPU and keeps the attribute so that such modules read, print and
    compare faithfully.
    """

    target: Any
    span: Span | None = None

    @property
    def kind(self) -> str:
        """The target kind (``"llvm"``, ``"cuda"``...)."""
        return target_kind(self.target)


def canonical_vdevice(devices: tuple[VDevice, ...], dev: VDevice) -> str:
    """How a tensor's struct info names ``dev``, one of ``devices`` (the module's
    virtual devices): ``"<kind>:<index among devices of that kind>:<scope>"``,
    TVM's printed form (e.g. ``"llvm:0:global"``)."""
    same_kind = [d for d in devices if d.kind == dev.kind]
    index = next(i for i, d in enumerate(same_kind) if d is dev)
    return f"{dev.kind}:{index}:{dev.memory_scope}"


def _frozen_global_infos(infos: Mapping[str, Any] | None) -> Mapping[str, tuple[Any, ...]]:
    out = {}
    for key, values in dict(infos or {}).items():
        values = tuple(values)
        if key not in GLOBAL_INFO_KINDS:
            if not all(isinstance(v, DummyGlobalInfo) for v in values):
                raise ValueError(f"unsupported module global info {key!r}; phasec keeps "
                                 f"{', '.join(GLOBAL_INFO_KINDS)} (and placeholder "
                                 f"DummyGlobalInfo entries under other keys)")
        elif key == "vdevice" and not all(isinstance(v, VDevice) for v in values):
            raise TypeError("global_infos['vdevice'] must hold VDevice entries")
        out[key] = values
    return MappingProxyType(out)


class IRModule:
    """A module of Relax functions and PrimFuncs.

    Immutable: every method that "changes" a module returns a new one.
    ``mod.phase`` is read from ``attrs["phase"]``; no attribute means ingestion.
    ``global_infos`` is TVM's module global info (``I.module_global_infos``):
    ``{"vdevice": (VDevice, ...)}``, which tensor struct info refers to.
    """

    __slots__ = ("_functions", "_attrs", "_global_infos", "span")

    def __init__(self, functions: Mapping[str, BaseFunc] | None = None,
                 attrs: Mapping[str, Any] | None = None, span: Span | None = None,
                 global_infos: Mapping[str, Any] | None = None) -> None:
        funcs = dict(functions or {})
        for name, func in funcs.items():
            if not isinstance(name, str):
                raise TypeError(f"IRModule keys are function names (str), not {type(name).__name__}")
            if not isinstance(func, (Function, PrimFunc)):
                raise TypeError(f"IRModule[{name!r}] must be a Function or PrimFunc, "
                                f"not {type(func).__name__}")
        self._functions = MappingProxyType(funcs)
        self._attrs = frozen_attrs(attrs)
        self._global_infos = _frozen_global_infos(global_infos)
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
    def global_infos(self) -> Mapping[str, tuple[Any, ...]]:
        return self._global_infos

    @property
    def vdevices(self) -> tuple[VDevice, ...]:
        """The module's virtual devices (``global_infos["vdevice"]``), in order."""
        return self._global_infos.get("vdevice", ())

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
        return IRModule({**self._functions, **functions}, self._attrs, self.span,
                        self._global_infos)

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
                        self._attrs, self.span, self._global_infos)

    def with_functions(self, functions: Mapping[str, BaseFunc]) -> "IRModule":
        """A module with exactly these functions and the same attributes."""
        return IRModule(functions, self._attrs, self.span, self._global_infos)

    def with_attr(self, key: str, value: Any) -> "IRModule":
        return IRModule(self._functions, {**self._attrs, key: value}, self.span,
                        self._global_infos)

    def with_attrs(self, attrs: Mapping[str, Any]) -> "IRModule":
        return IRModule(self._functions, attrs, self.span, self._global_infos)

    def with_global_infos(self, global_infos: Mapping[str, Any]) -> "IRModule":
        return IRModule(self._functions, self._attrs, self.span, global_infos)

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
        text = script_text(self, syntax)
        if text is None:  # no printer installed: name the functions at least
            return f"<IRModule: {', '.join(sorted(self._functions)) or 'no functions'}>"
        return text

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        """The module as TVMScript, as TVM shows it."""
        return self.script()
