"""PassContext: the settings under which passes run (TVM's ``PassContext``).

A context is entered with ``with PassContext(...):``; contexts nest, and the
innermost one is :meth:`PassContext.current`. The current context lives in a
:class:`contextvars.ContextVar`, so threads and asyncio tasks each see their own.

A typo in a setting is an error, not a silently ignored setting: the pass
names of ``disabled_pass``/``required_pass`` must name declared passes and
the keys of ``config`` registered config options
(:func:`register_config_option`, as TVM's ``TVM_REGISTER_PASS_CONFIG_OPTION``),
with a "did you mean" as textual pipelines give. They are checked when the
context is made.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from phasec.transform.info import (
    PassConfigError, PassInfo, declared_pass_names, is_int_at_least, load_declarations,
    unknown_name_message,
)
from phasec.transform.instruments import PassInstrument

__all__ = ["PassContext", "VERIFY_MODES", "register_config_option", "config_options"]

#: ``"each"``: verify after every pass; ``"transitions"``: only after transition
#: passes; ``"off"``: never (the phase check before each pass still happens).
VERIFY_MODES = ("each", "transitions", "off")

_CURRENT: contextvars.ContextVar["PassContext | None"] = contextvars.ContextVar(
    "phasec_pass_context", default=None)


#: config key -> what it does: the keys PassContext(config=...) accepts.
_CONFIG_OPTIONS: dict[str, str] = {}


def register_config_option(key: str, description: str = "") -> str:
    """Declare a ``PassContext(config=...)`` key that a pass reads; returns ``key``.

    A pass module registers its keys when it is imported, as TVM's
    ``TVM_REGISTER_PASS_CONFIG_OPTION`` does (``FuseOps.rules`` is one); a
    pass of your own registers its key before a context uses it. Registering
    a key again replaces its description.
    """
    if not isinstance(key, str) or not key:
        raise PassConfigError(f"a config option is a non-empty str, not {key!r}")
    _CONFIG_OPTIONS[key] = description
    return key


def config_options() -> dict[str, str]:
    """Every registered config option (the built-in passes' included) and its description."""
    load_declarations()
    return dict(sorted(_CONFIG_OPTIONS.items()))


def _check_pass_names(names: frozenset[str], what: str) -> None:
    """Every name in ``names`` is a declared pass (loaded only when there are names)."""
    if not names:
        return
    known = declared_pass_names()
    for name in sorted(names):
        if name not in known:
            raise PassConfigError(f"PassContext({what}=...): "
                                  f"{unknown_name_message('pass', name, known, 'passes')}")


def _check_config(config: Mapping[str, Any]) -> None:
    """Every key of ``config`` is a registered config option."""
    if not config:
        return
    known = config_options()
    for key in config:
        if not isinstance(key, str):
            raise PassConfigError(f"PassContext(config=...) keys are option names (str), "
                                  f"not {key!r}")
        if key not in known:
            raise PassConfigError(
                f"PassContext(config=...): "
                f"{unknown_name_message('config option', key, known)} (a pass of your own "
                "registers its option with phasec.transform.register_config_option)")


def _names(value: Iterable[str] | str | None, what: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):  # a single name, not its characters
        return frozenset((value,))
    if not isinstance(value, Iterable):
        raise PassConfigError(f"PassContext({what}=...) takes a list of pass names, "
                              f"not {type(value).__name__}")
    names = tuple(value)
    for n in names:
        if not isinstance(n, str):
            raise PassConfigError(f"PassContext({what}=...) takes pass names (str), got {n!r}")
    return frozenset(names)


def as_instruments(value: Any, what: str = "PassContext(instruments=...)"
                   ) -> tuple["PassInstrument", ...]:
    """``value`` (one instrument, a collection of them or None) as a tuple;
    ``what`` names the argument in the error for anything else."""
    if isinstance(value, PassInstrument):  # one instrument, not in a list
        return (value,)
    if value is not None and not isinstance(value, Iterable):
        raise PassConfigError(f"{what} takes a list of PassInstrument objects, "
                              f"not {type(value).__name__}")
    insts = tuple(value or ())
    for inst in insts:
        if not isinstance(inst, PassInstrument):
            raise PassConfigError(
                f"{what} takes PassInstrument objects, got {type(inst).__name__}; subclass "
                "PassInstrument or decorate the class with @pass_instrument")
    return insts


class PassContext:
    """Settings for running passes; use as a context manager.

    Args:
        opt_level: a ``Sequential`` skips passes whose ``opt_level`` is above
            this (transition passes are never skipped).
        disabled_pass: names of passes a ``Sequential`` skips. Naming a
            transition pass here is an error when the sequence is validated.
        instruments: :class:`PassInstrument` objects called around every pass.
        config: free-form options for passes (``ctx.config.get(key)``).
        verify: ``"each"`` (default), ``"transitions"`` or ``"off"``; see
            :data:`VERIFY_MODES`. ``True``/``False`` mean ``"each"``/``"off"``.
        required_pass: names of passes a ``Sequential`` runs whatever their
            opt_level (TVM's ``required_pass``).

    Pass names and config keys are checked here, when the context is made:
    a name must be that of a pass declared by then (a built-in or registered
    pass, or any pass object already made with ``@module_pass``,
    ``@function_pass`` or ``Sequential``), a key a config option registered
    by then (:func:`register_config_option`). An unknown one is a
    :class:`PassConfigError` with the closest known names. So define your
    own passes, and register their options, before the context that names
    them.
    """

    __slots__ = ("opt_level", "disabled_pass", "required_pass", "instruments", "config",
                 "verify", "_tokens")

    def __init__(self, opt_level: int = 2, disabled_pass: Iterable[str] | str | None = (),
                 instruments: Iterable["PassInstrument"] | None = (),
                 config: Mapping[str, Any] | None = None, verify: str | bool = "each", *,
                 required_pass: Iterable[str] | str | None = ()) -> None:
        if not is_int_at_least(opt_level, 0):
            raise PassConfigError(f"PassContext(opt_level=...) must be an int >= 0, "
                                  f"not {opt_level!r}")
        if verify is True:
            verify = "each"
        elif verify is False:
            verify = "off"
        if verify not in VERIFY_MODES:
            raise PassConfigError(f"PassContext(verify={verify!r}) is not a verify mode; "
                                  f"expected one of {', '.join(map(repr, VERIFY_MODES))}")
        insts = as_instruments(instruments)
        if config is not None and not isinstance(config, Mapping):
            raise PassConfigError(f"PassContext(config=...) must be a mapping, "
                                  f"not {type(config).__name__}")
        self.opt_level = opt_level
        self.disabled_pass = _names(disabled_pass, "disabled_pass")
        self.required_pass = _names(required_pass, "required_pass")
        _check_pass_names(self.disabled_pass, "disabled_pass")
        _check_pass_names(self.required_pass, "required_pass")
        _check_config(config or {})
        self.instruments: tuple[PassInstrument, ...] = insts
        self.config: Mapping[str, Any] = MappingProxyType(dict(config or {}))
        self.verify: str = verify
        self._tokens: list[contextvars.Token] = []

    # -- scoping -----------------------------------------------------------
    @staticmethod
    def current() -> "PassContext":
        """The innermost entered context, or the default one (opt_level 2, verify each)."""
        ctx = _CURRENT.get()
        return ctx if ctx is not None else _DEFAULT

    def __enter__(self) -> "PassContext":
        token = _CURRENT.set(self)
        entered: list[PassInstrument] = []
        try:
            for inst in self.instruments:
                inst.enter_pass_ctx()
                entered.append(inst)
        except BaseException:
            # Leave the instruments that did enter in a clean state.
            for inst in reversed(entered):
                try:
                    inst.exit_pass_ctx()
                except Exception:  # the original failure is the one to report
                    pass
            _CURRENT.reset(token)
            raise
        self._tokens.append(token)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        token = self._tokens.pop()
        try:
            first: BaseException | None = None
            for inst in self.instruments:
                try:
                    inst.exit_pass_ctx()
                except Exception as exc:  # exit every instrument, then report
                    first = first or exc
            if first is not None and exc_info[0] is None:
                raise first
        finally:
            _CURRENT.reset(token)

    # -- queries -----------------------------------------------------------
    def pass_enabled(self, info: PassInfo) -> tuple[bool, str]:
        """Whether a ``Sequential`` should run ``info`` here, and if not, why.

        TVM's rule: disabled beats required beats opt_level. Transition passes
        are decided by the caller (they are never skipped).
        """
        if info.name in self.disabled_pass:
            return False, "disabled by PassContext(disabled_pass=...)"
        if info.name in self.required_pass:
            return True, ""
        if info.opt_level > self.opt_level:
            return False, (f"opt_level {info.opt_level} is above the context's "
                           f"opt_level {self.opt_level}")
        return True, ""

    def replace(self, **changes: Any) -> "PassContext":
        """A new context with some settings changed (this one is not modified)."""
        args = dict(opt_level=self.opt_level, disabled_pass=self.disabled_pass,
                    instruments=self.instruments, config=self.config, verify=self.verify,
                    required_pass=self.required_pass)
        unknown = set(changes) - set(args)
        if unknown:
            raise PassConfigError(f"PassContext has no setting {sorted(unknown)[0]!r}; "
                                  f"settings: {', '.join(args)}")
        args.update(changes)
        return PassContext(**args)

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, disabled_pass={sorted(self.disabled_pass)}, "
                f"instruments=[{', '.join(type(i).__name__ for i in self.instruments)}], "
                f"verify={self.verify!r})")


_DEFAULT = PassContext()
