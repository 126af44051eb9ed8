"""Passes and the protocol every pass call follows.

Calling a pass on a module (``after = pass_(before)``), under
:meth:`PassContext.current`:

1. the module's phase must be one the pass accepts, else :class:`PhaseError`
   (naming the pass, the phases it accepts, the module's phase and what to
   run to get there);
2. instruments may veto the pass (``should_run``), except a transition pass;
3. the body runs (``transform_module`` / ``transform_function``); any
   exception becomes a :class:`PassError` naming the pass and the phase,
   chained to the original;
4. on a transition the infrastructure sets the new phase (bodies never do);
5. the result is verified against its phase as the context's ``verify`` mode
   says; a violation is a :class:`WellFormedError` naming the pass.

Modules are immutable, so the input is never modified, whatever happens.

:class:`~phasec.transform.sequential.Sequential` validates a whole sequence by
walking the phases through it before running anything.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from phasec.errors import PassError, PhaseError
from phasec.ir import Function, IRModule, Phase
from phasec.ir.tir import PrimFunc
from phasec.transform.context import PassContext
from phasec.transform.info import (
    ALL_PHASES, PassConfigError, PassInfo, PhasesLike, as_phases, phase_mismatch_message,
)
from phasec.transform.options import MISSING, options_spec, signature_defaults
from phasec.transform.verification import verify_for_pass

__all__ = [
    "Pass", "ModulePass", "FunctionPass", "PrimFuncPass", "module_pass", "function_pass",
    "prim_func_pass", "PrintIR", "MISSING",
]

class Pass:
    """Base of every pass: ``pass_(mod) -> IRModule`` and ``pass_.info``.

    Options of a configurable pass are the fields of its frozen dataclass
    (or the parameters of its ``__init__``), so ``FuseOps(fuse_opt_level=2)``
    is a value and :meth:`spec` can print it.
    """

    __slots__ = ()
    info: PassInfo

    def __call__(self, mod: IRModule) -> IRModule:
        raise NotImplementedError

    # -- options ---------------------------------------------------------
    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        """Option name -> default value (:data:`MISSING` when it has none)."""
        return signature_defaults(cls)

    def options(self) -> dict[str, Any]:
        """This pass's option values."""
        return {k: getattr(self, k) for k in type(self).option_defaults() if hasattr(self, k)}

    def spec(self) -> str:
        """The textual pipeline form, e.g. ``FuseOps{fuse_opt_level=2}``: the
        name and the options that differ from their defaults."""
        return self.info.name + options_spec(self.options(), type(self).option_defaults())


class _PassFailure(Exception):
    """Internal: a body failed on one function (carries where, for the message)."""

    def __init__(self, where: str, error: Exception) -> None:
        super().__init__(where)
        self.where = where
        self.error = error


def notify_instruments(ctx: PassContext, hook: str, *args: Any) -> None:
    """Call ``hook`` of every instrument of ``ctx`` with ``args``."""
    for inst in ctx.instruments:
        getattr(inst, hook)(*args)


class _LeafPass(Pass):
    """A pass with a body: runs the protocol in the module docstring."""

    __slots__ = ()

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        info = getattr(self, "info", None)
        if not isinstance(info, PassInfo):
            raise PassConfigError(f"{type(self).__name__} has no PassInfo: decorate it with "
                                  "@module_pass/@function_pass or set a class attribute info")
        if not isinstance(mod, IRModule):
            raise PassError(f"{info.name} must be called on an IRModule, not "
                            f"{type(mod).__name__}", info.name, None)
        phase = mod.phase
        if phase not in info.phases:
            err = PhaseError(phase_mismatch_message(info, phase))
            err.pass_name = info.name  # type: ignore[attr-defined]
            raise err
        ctx = PassContext.current()
        for inst in ctx.instruments:
            verdict = inst.should_run(mod, info)
            if verdict is None or verdict:
                continue
            if info.is_transition:
                raise PhaseError(
                    f"instrument {type(inst).__name__} asked to skip {info.name}, a transition "
                    f"pass ({phase.label} -> {info.transition_to.label}); transition passes "
                    "cannot be skipped")
            notify_instruments(ctx, "run_on_skip", mod, info,
                    f"{type(inst).__name__}.should_run returned False")
            return mod
        if ctx.verify == "each" and info.verify_input:
            try:
                verify_for_pass(mod, info, ctx, "input")
            except Exception as exc:
                notify_instruments(ctx, "run_on_error", mod, info, exc)
                raise
        notify_instruments(ctx, "run_before_pass", mod, info)
        try:
            result = self._run_body(mod, ctx, info, phase)
        except Exception as exc:
            notify_instruments(ctx, "run_on_error", mod, info, exc)
            raise
        notify_instruments(ctx, "run_after_pass", result, info)
        if ctx.verify == "each" or (ctx.verify == "transitions" and info.is_transition):
            try:
                verify_for_pass(result, info, ctx, "output",
                                given=None if info.verify_input else mod)
            except Exception as exc:
                notify_instruments(ctx, "run_on_error", result, info, exc)
                raise
        return result

    def _run_body(self, mod: IRModule, ctx: PassContext, info: PassInfo,
                  phase: Phase) -> IRModule:
        """The body plus the checks on what it returned; failures -> PassError."""
        try:
            result = self._transform(mod, ctx)
        except PassError:
            raise  # a pass called inside this one failed; it is already named
        except _PassFailure as failure:
            raise self._wrap(failure.error, info, phase, failure.where) from failure.error
        except Exception as exc:
            raise self._wrap(exc, info, phase, "") from exc
        if not isinstance(result, IRModule):
            raise PassError(f"{info.name} returned {type(result).__name__} instead of an "
                            "IRModule", info.name, phase)
        if result.phase != phase:
            raise PassError(
                f"{info.name} changed the module's phase from {phase.label} to "
                f"{result.phase.label}; pass bodies never set the phase: declare "
                "transition_to=... and the infrastructure sets it", info.name, phase)
        if info.transition_to is not None:
            result = result.with_phase(info.transition_to)
        return result

    @staticmethod
    def _wrap(exc: Exception, info: PassInfo, phase: Phase, where: str) -> PassError:
        loc = f" on {where}" if where else ""
        return PassError(f"{info.name} failed{loc} in phase {phase.label}: "
                         f"{type(exc).__name__}: {exc}", info.name, phase)


class ModulePass(_LeafPass):
    """A pass over the whole module: define ``transform_module(self, mod, ctx)``."""

    __slots__ = ()

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__} must define transform_module")

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.transform_module(mod, ctx)


def _each_function(pass_: Any, mod: IRModule, ctx: PassContext, kind: type,
                   what: str, skip: Callable[[Any], bool] = lambda func: False) -> IRModule:
    """Run ``pass_.transform_function`` on every function of type ``kind``;
    a failure names the function (``what`` is "function" or "PrimFunc")."""
    def apply(name: str, func: Any) -> Any:
        if skip(func):
            return func
        try:
            new = pass_.transform_function(func, mod, ctx)
        except PassError:
            raise
        except Exception as exc:
            raise _PassFailure(f"{what} {name!r}", exc) from exc
        if not isinstance(new, kind):
            raise _PassFailure(f"{what} {name!r}", TypeError(
                f"transform_function returned {type(new).__name__}, not a {kind.__name__}"))
        return new

    return mod.map_functions(apply, kind)


class FunctionPass(_LeafPass):
    """A pass applied to each Relax function of the module:
    ``transform_function(self, func, mod, ctx) -> Function``.

    PrimFuncs are left alone, and so are external functions (those with a
    ``Codegen`` attribute, compiled by a BYOC backend).
    """

    __slots__ = ()

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        raise NotImplementedError(f"{type(self).__name__} must define transform_function")

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _each_function(self, mod, ctx, Function, "function",
                              skip=lambda func: "Codegen" in func.attrs)


class PrimFuncPass(_LeafPass):
    """A pass applied to each PrimFunc of the module:
    ``transform_function(self, func, mod, ctx) -> PrimFunc``."""

    __slots__ = ()

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        raise NotImplementedError(f"{type(self).__name__} must define transform_function")

    def _transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _each_function(self, mod, ctx, PrimFunc, "PrimFunc")


# -- function-form passes ---------------------------------------------------------
class _FnPass:
    """The function form of the decorators: a pass object wrapping ``_func``.

    Subclasses declare the slots ``("info", "_func", "__doc__")`` themselves
    and have no docstring: ``__doc__`` is the wrapped function's.
    """

    __slots__ = ()
    _kind = ""

    def __init__(self, func: Callable[..., Any], info: PassInfo) -> None:
        self.info = info
        self._func = func
        self.__doc__ = func.__doc__

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"<{self._kind} {self.info.name}>"


class _FnModulePass(_FnPass, ModulePass):
    __slots__ = ("info", "_func", "__doc__")
    _kind = "ModulePass"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._func(mod, ctx)


class _FnFunctionPass(_FnPass, FunctionPass):
    __slots__ = ("info", "_func", "__doc__")
    _kind = "FunctionPass"

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return self._func(func, mod, ctx)


class _FnPrimFuncPass(_FnPass, PrimFuncPass):
    __slots__ = ("info", "_func", "__doc__")
    _kind = "PrimFuncPass"

    def transform_function(self, func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        return self._func(func, mod, ctx)


def _wrap_class(cls: type, base: type, method: str, info: PassInfo) -> type:
    """The class form of the decorators: a subclass of ``cls`` and ``base``."""
    if not callable(getattr(cls, method, None)):
        raise PassConfigError(f"pass class {cls.__name__} must define {method}(self, ...)")
    if issubclass(cls, Pass):
        if not issubclass(cls, base):
            raise PassConfigError(f"{cls.__name__} is a {cls.__mro__[1].__name__}, "
                                  f"not a {base.__name__}")
        cls.info = info
        return cls
    if "__call__" in vars(cls):
        raise PassConfigError(
            f"pass class {cls.__name__} defines __call__; the infrastructure's __call__ runs "
            f"the pass (phase check, verification): put the transformation in {method}")
    if dataclasses.is_dataclass(cls):
        if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise PassConfigError(f"pass class {cls.__name__} must be a frozen dataclass: "
                                  "use @dataclass(frozen=True), passes are values")
    elif "__init__" not in vars(cls):
        # Annotated class attributes become the pass's options.
        cls = dataclass(frozen=True)(cls)
    if "info" in signature_defaults(cls):
        raise PassConfigError(f"pass class {cls.__name__}: 'info' is reserved for the PassInfo")
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                 "__doc__": cls.__doc__, "info": info}
    return type(cls.__name__, (cls, base), namespace)


def _decorator(kind: str, base: type, method: str, fn_wrapper: type, pass_func: Any,
               opt_level: int, phases: PhasesLike | None, transition_to: Phase | int | str | None,
               name: str | None, required: Iterable[str], verify_input: bool = True) -> Any:
    def create(target: Any) -> Any:
        target_name = getattr(target, "__name__", None)
        if not callable(target) or target_name is None:
            raise PassConfigError(f"@{kind} decorates a function or a class, not "
                                  f"{type(target).__name__}")
        if name is None and target_name == "<lambda>":
            raise PassConfigError(f"@{kind} on a lambda needs name=...")
        if phases is None:
            raise PassConfigError(
                f"@{kind} for {name or target_name} must declare the phases it accepts, "
                "e.g. phases=Phase.OPTIMIZATION, phases=[0, 1] or phases='all'")
        info = PassInfo(name or target_name, opt_level, _accepted_phases(phases),
                        transition_to, tuple(required or ()), verify_input)
        if isinstance(target, type):
            return _wrap_class(target, base, method, info)
        return fn_wrapper(target, info)

    return create if pass_func is None else create(pass_func)


def _accepted_phases(phases: PhasesLike) -> frozenset[Phase]:
    result = as_phases(phases)
    if not result:
        raise PassConfigError("a pass must accept at least one phase")
    return result


def module_pass(pass_func: Any = None, *, opt_level: int = 0, phases: PhasesLike | None = None,
                transition_to: Phase | int | str | None = None, name: str | None = None,
                required: Iterable[str] = (), verify_input: bool = True) -> Any:
    """Declare a module pass (TVM's ``module_pass``, plus phases).

    On a function ``f(mod, ctx) -> IRModule`` it returns a pass object. On a
    class defining ``transform_module(self, mod, ctx)`` it returns a pass
    class: its annotated attributes are options (it becomes a frozen
    dataclass), so ``MyPass(opt=2)`` is a pass.

    Args:
        opt_level: minimum context opt_level at which a Sequential runs it.
        phases: the phases it accepts (required): a phase, several, or "all".
        transition_to: for transition passes, the phase after the pass.
        name: the pass name (default: the function or class name).
        required: names of registered passes a Sequential runs first.
        verify_input: False lets verify-each skip checking the pass's input
            (for passes that repair malformed modules, like Normalize).
    """
    return _decorator("module_pass", ModulePass, "transform_module", _FnModulePass, pass_func,
                      opt_level, phases, transition_to, name, required, verify_input)


def function_pass(pass_func: Any = None, *, opt_level: int = 0, phases: PhasesLike | None = None,
                  transition_to: Phase | int | str | None = None, name: str | None = None,
                  required: Iterable[str] = (), verify_input: bool = True) -> Any:
    """Declare a pass applied to every Relax function (TVM's ``function_pass``).

    On a function ``f(func, mod, ctx) -> Function`` or a class defining
    ``transform_function(self, func, mod, ctx)``; arguments as :func:`module_pass`.
    """
    return _decorator("function_pass", FunctionPass, "transform_function", _FnFunctionPass,
                      pass_func, opt_level, phases, transition_to, name, required, verify_input)


def prim_func_pass(pass_func: Any = None, *, opt_level: int = 0,
                   phases: PhasesLike | None = None,
                   transition_to: Phase | int | str | None = None, name: str | None = None,
                   required: Iterable[str] = (), verify_input: bool = True) -> Any:
    """Declare a pass applied to every PrimFunc (TVM's ``prim_func_pass``);
    arguments as :func:`module_pass`."""
    return _decorator("prim_func_pass", PrimFuncPass, "transform_function", _FnPrimFuncPass,
                      pass_func, opt_level, phases, transition_to, name, required, verify_input)


# -- built-in passes ---------------------------------------------------------------
@module_pass(opt_level=0, phases=ALL_PHASES, name="PrintIR")
class PrintIR:
    """Print the module (TVMScript) with a header to stderr; it is returned unchanged.

    Dumps go to standard error so that standard output carries only a
    command's result (``phasec opt ... | phasec-check -``).
    """

    header: str = ""

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        title = f"# PrintIR {self.header}".rstrip() + f" (phase {mod.phase.label})"
        print(f"{title}\n{mod.script()}", file=sys.stderr)
        return mod

