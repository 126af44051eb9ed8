"""The pass registry: passes by name, for textual pipelines, docs and tools.

Pass modules in the ``passes`` package register themselves on import::

    @register_pass
    @module_pass(opt_level=0, phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION)
    class LambdaLifting: ...

``passes`` (a higher layer) is imported the first time the registry is
queried, never when :mod:`phasec.transform` is imported.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Union

from phasec.transform.info import (
    PassConfigError, PassInfo, declare_pass_name, on_first_lookup, unknown_name_message,
)
from phasec.transform.options import MISSING, signature_defaults
from phasec.transform.pass_infra import Pass, PrintIR

__all__ = ["PassEntry", "PassRegistry", "register_pass", "get_pass", "list_passes",
           "get_pass_entry", "pass_entries", "REGISTRY"]

PassFactory = Union[type, Callable[..., Pass], Pass]

#: The package whose import registers the compiler's passes.
PASSES_PACKAGE = "phasec.passes"


@dataclass
class PassEntry:
    """One registered pass: how to build it and what it declares.

    ``factory`` is a pass class (called with options), a function returning
    a pass (called with options), or a pass object (which takes no options).
    Every registered pass must be constructible with no options.
    """

    name: str
    factory: PassFactory
    _info: PassInfo | None = field(default=None, repr=False)

    @property
    def info(self) -> PassInfo:
        """The PassInfo of the pass with default options."""
        if self._info is None:
            info = getattr(self.factory, "info", None)
            if not isinstance(info, PassInfo):
                info = self.create().info
            self._info = info
        return self._info

    @property
    def option_defaults(self) -> dict[str, Any]:
        """Option name -> default (:data:`MISSING` when there is none)."""
        f = self.factory
        if isinstance(f, Pass):
            return {}
        if isinstance(f, type) and issubclass(f, Pass):
            return f.option_defaults()
        return signature_defaults(f)

    @property
    def doc(self) -> str:
        """The first line of the pass's docstring."""
        text = inspect.getdoc(self.factory) or ""
        return text.strip().splitlines()[0] if text.strip() else ""

    @property
    def module(self) -> str:
        """The module that defines the pass."""
        origin = _origin(self.factory)
        return origin[0] if origin else type(self.factory).__module__

    def create(self, **options: Any) -> Pass:
        """Build the pass with these options; bad options are a PassConfigError."""
        defaults = self.option_defaults
        unknown = [k for k in options if k not in defaults]
        if unknown:
            known = ", ".join(f"{k}={'<required>' if v is MISSING else repr(v)}"
                              for k, v in defaults.items()) or "(none)"
            raise PassConfigError(f"pass {self.name} has no option {unknown[0]!r}; "
                                  f"its options: {known}")
        if isinstance(self.factory, Pass):
            return self.factory
        try:
            made = self.factory(**options)
        except PassConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise PassConfigError(f"invalid options for pass {self.name} "
                                  f"({options or 'defaults'}): {exc}") from exc
        if not isinstance(made, Pass):
            raise PassConfigError(f"the factory registered as {self.name} returned "
                                  f"{type(made).__name__}, not a Pass")
        if made.info.name != self.name:
            raise PassConfigError(f"the factory registered as {self.name} made a pass named "
                                  f"{made.info.name}")
        return made


class PassRegistry:
    """Name -> :class:`PassEntry`; loads the ``passes`` package lazily."""

    def __init__(self, package: str | None = PASSES_PACKAGE) -> None:
        self._entries: dict[str, PassEntry] = {}
        self._package = package
        self._loaded = package is None

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # before importing: pass modules call register()
        try:
            importlib.import_module(self._package)
        except ModuleNotFoundError as exc:
            if exc.name != self._package:
                self._loaded = False
                raise
        except BaseException:
            self._loaded = False  # a broken pass module: fail again next time
            raise

    def register(self, factory: PassFactory, name: str | None = None, *,
                 override: bool = False) -> PassFactory:
        """Register ``factory`` (pass class, factory function or pass object)."""
        static = getattr(factory, "info", None)
        if isinstance(factory, type) and not issubclass(factory, Pass):
            raise PassConfigError(f"cannot register {factory.__name__}: not a pass class "
                                  "(decorate it with @module_pass or @function_pass first)")
        if not callable(factory) and not isinstance(factory, Pass):
            raise PassConfigError(f"cannot register {factory!r}: not a pass or pass factory")
        if name is None:
            if not isinstance(static, PassInfo):
                raise PassConfigError(f"register_pass({getattr(factory, '__name__', factory)}) "
                                      "needs name=... for a factory function")
            name = static.name
        if isinstance(static, PassInfo) and static.name != name:
            raise PassConfigError(f"cannot register pass {static.name} as {name!r}: the "
                                  "registered name must be the pass's info.name "
                                  "(textual pipelines print info.name)")
        old = self._entries.get(name)
        if old is not None and old.factory is not factory and not override \
                and not _same_definition(old.factory, factory):
            raise PassConfigError(f"a pass named {name} is already registered (from "
                                  f"{old.module}); pass override=True to replace it")
        self._entries[name] = PassEntry(name, factory,
                                        static if isinstance(static, PassInfo) else None)
        declare_pass_name(name)
        return factory

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def entry(self, name: str) -> PassEntry:
        """The entry for ``name``; unknown names list the known ones."""
        self._ensure_loaded()
        if not isinstance(name, str):
            raise PassConfigError(f"a pass name must be a string, not {name!r:.60}")
        found = self._entries.get(name)
        if found is None:
            raise PassConfigError(self.unknown_message(name))
        return found

    def unknown_message(self, name: str) -> str:
        return unknown_name_message("pass", name, self._entries, "passes")

    def get(self, name: str, **options: Any) -> Pass:
        return self.entry(name).create(**options)

    def names(self) -> list[str]:
        self._ensure_loaded()
        return sorted(self._entries)

    def entries(self) -> list[PassEntry]:
        self._ensure_loaded()
        return [self._entries[n] for n in sorted(self._entries)]

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    @contextlib.contextmanager
    def scope(self) -> Iterator["PassRegistry"]:
        """Registrations made inside the block are undone at its end (for tests)."""
        self._ensure_loaded()
        saved = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = saved


def _origin(obj: Any) -> tuple[str, str] | None:
    """(module, qualname) of where a pass or factory was defined."""
    target = getattr(obj, "_func", obj) if isinstance(obj, Pass) else obj
    qualname = getattr(target, "__qualname__", None)
    module = getattr(target, "__module__", None)
    return (module, qualname) if isinstance(qualname, str) and module else None


def _same_definition(a: Any, b: Any) -> bool:
    """True when ``b`` is ``a`` re-created by re-importing its module."""
    origin = _origin(a)
    return origin is not None and origin == _origin(b)


#: The global registry used by :func:`register_pass` and :func:`get_pass`.
REGISTRY = PassRegistry()
# PassContext checks pass names and config options against what the built-in
# passes declare: importing them is this registry's job.
on_first_lookup(REGISTRY._ensure_loaded)


def register_pass(factory: PassFactory | None = None, name: str | None = None, *,
                  override: bool = False) -> Any:
    """Register a pass class, pass object or factory function under its name.

    Usable as ``register_pass(FuseOps)``, ``@register_pass`` or
    ``@register_pass(name="X")`` (a factory function needs ``name``). The
    registered name must be the pass's ``info.name``. Returns ``factory``.
    """
    if factory is None:
        return lambda f: REGISTRY.register(f, name, override=override)
    return REGISTRY.register(factory, name, override=override)


def get_pass(name: str, **options: Any) -> Pass:
    """A new pass from the registry: ``get_pass("FuseOps", fuse_opt_level=2)``.

    Raises :class:`PassConfigError` for an unknown name or option, listing
    what is known.
    """
    return REGISTRY.get(name, **options)


def get_pass_entry(name: str) -> PassEntry:
    """The registry entry (info, options, docstring) for ``name``."""
    return REGISTRY.entry(name)


def list_passes() -> list[str]:
    """The names of every registered pass, sorted."""
    return REGISTRY.names()


def pass_entries() -> list[PassEntry]:
    """Every registry entry, sorted by name."""
    return REGISTRY.entries()


register_pass(PrintIR)
