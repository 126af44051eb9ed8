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

:class:`Sequential` validates a whole sequence by walking the phases through
it before running anything.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from phasec.errors import PassError, PhaseError
from phasec.ir import Function, IRModule, Phase
from phasec.ir.tir import PrimFunc
from phasec.transform.context import PassContext
from phasec.transform.info import (
    ALL_PHASES, PassConfigError, PassInfo, PhasesLike, as_phases, describe_phases, phase_after,
    phase_mismatch_message,
)
from phasec.transform.verification import verify_for_pass

__all__ = [
    "Pass", "ModulePass", "FunctionPass", "PrimFuncPass", "Sequential", "PlanStep",
    "module_pass", "function_pass", "prim_func_pass", "PrintIR", "MISSING",
]

#: Marks an option without a default in :meth:`Pass.option_defaults`.
MISSING: Any = dataclasses.MISSING


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
        return _signature_defaults(cls)

    def options(self) -> dict[str, Any]:
        """This pass's option values."""
        return {k: getattr(self, k) for k in type(self).option_defaults() if hasattr(self, k)}

    def spec(self) -> str:
        """The textual pipeline form, e.g. ``FuseOps{fuse_opt_level=2}``."""
        from phasec.transform.spec import pass_spec

        return pass_spec(self)


def _signature_defaults(target: Any) -> dict[str, Any]:
    """Options of a pass class or factory: its dataclass fields or parameters."""
    if isinstance(target, type) and dataclasses.is_dataclass(target):
        out = {}
        for f in dataclasses.fields(target):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                out[f.name] = MISSING
        return out
    if isinstance(target, type) and target.__init__ is object.__init__:
        return {}
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return {}
    return {name: (MISSING if p.default is inspect.Parameter.empty else p.default)
            for name, p in sig.parameters.items()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}


class _PassFailure(Exception):
    """Internal: a body failed on one function (carries where, for the message)."""

    def __init__(self, where: str, error: Exception) -> None:
        super().__init__(where)
        self.where = where
        self.error = error


def _notify(ctx: PassContext, hook: str, *args: Any) -> None:
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
            _notify(ctx, "run_on_skip", mod, info,
                    f"{type(inst).__name__}.should_run returned False")
            return mod
        if ctx.verify == "each" and info.verify_input:
            try:
                verify_for_pass(mod, info, ctx, "input")
            except Exception as exc:
                _notify(ctx, "run_on_error", mod, info, exc)
                raise
        _notify(ctx, "run_before_pass", mod, info)
        try:
            result = self._run_body(mod, ctx, info, phase)
        except Exception as exc:
            _notify(ctx, "run_on_error", mod, info, exc)
            raise
        _notify(ctx, "run_after_pass", result, info)
        if ctx.verify == "each" or (ctx.verify == "transitions" and info.is_transition):
            try:
                verify_for_pass(result, info, ctx, "output",
                                given=None if info.verify_input else mod)
            except Exception as exc:
                _notify(ctx, "run_on_error", result, info, exc)
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
    if "info" in _signature_defaults(cls):
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


# -- Sequential -------------------------------------------------------------------
@dataclass(frozen=True)
class PlanStep:
    """One step of a validated :class:`Sequential`.

    ``position`` is the 1-based place in the sequence ("2.3" inside a nested
    Sequential); ``skip_reason`` is non-empty for a skipped pass;
    ``required_by`` is set for a pass run because another requires it.
    """

    pass_: Pass
    position: str
    phase_before: Phase
    phase_after: Phase
    skip_reason: str = ""
    required_by: PassInfo | None = None

    @property
    def runs(self) -> bool:
        return not self.skip_reason


def as_pass_list(passes: Pass | Iterable[Pass], what: str) -> tuple[Pass, ...]:
    """``passes`` (one pass, kept whole if a Sequential, or a collection of
    passes) as a tuple; ``what`` names the receiver in the error otherwise."""
    if isinstance(passes, Pass):
        return (passes,)
    if not isinstance(passes, Iterable):
        raise PassConfigError(f"{what} takes a list of passes, not {type(passes).__name__}")
    items = tuple(passes)
    for i, p in enumerate(items, 1):
        if not isinstance(p, Pass):
            hint = (" (a pass class: instantiate it)" if isinstance(p, type)
                    and issubclass(p, Pass) else "")
            raise PassConfigError(f"{what}: item {i} is {type(p).__name__}{hint}, not a Pass")
    return items


def _still_in_effect(name: str, owner: PassInfo, steps: list[PlanStep]) -> bool:
    """True when ``name`` ran and only other requirements of ``owner`` ran since.

    Any other pass in between may have undone its work (ConvertToDataflow
    after ToNonDataflow), so then the requirement runs again.
    """
    for step in reversed(steps):
        if not step.runs:
            continue
        ran = step.pass_.info.name
        if ran == name:
            return True
        if ran not in owner.required:
            return False
    return False


class _RunEverything:
    """A stand-in context for static analysis: nothing is skipped."""

    disabled_pass: frozenset[str] = frozenset()

    @staticmethod
    def pass_enabled(info: PassInfo) -> tuple[bool, str]:
        return True, ""


#: Sequential names that phasec gives itself; messages leave them out.
_ANONYMOUS_SEQUENTIALS = frozenset({"sequential", "opt", "pipeline"})


class Sequential(Pass):
    """An ordered list of passes, validated as a whole before any runs.

    Running it: the phases are walked through every pass (transitions
    included, required passes resolved from the registry); a misordered
    sequence raises :class:`PhaseError` naming the first offending pass and
    its position before anything has run. Then the passes run in order, each
    with its full per-pass protocol. Passes above the context's opt_level
    or named in ``disabled_pass`` are skipped, as in TVM, except transition
    passes: they always run, and disabling one is an error.

    Unlike a leaf pass, a Sequential is not itself reported to instruments.
    """

    __slots__ = ("passes", "_opt_level", "_name", "_required", "_info")

    def __init__(self, passes: Iterable[Pass] = (), opt_level: int = 0,
                 name: str = "sequential", required: Iterable[str] = ()) -> None:
        items = as_pass_list(passes, f"Sequential {name!r}")
        # Validate the declaration now (name, opt_level, required).
        PassInfo(name, opt_level, ALL_PHASES, None, tuple(required))
        self.passes: tuple[Pass, ...] = items
        self._opt_level = opt_level
        self._name = name
        self._required = tuple(required)
        self._info: PassInfo | None = None

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        return {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def info(self) -> PassInfo:  # type: ignore[override]
        """Derived: the phases it can start in (static walk, nothing skipped)
        and, if it contains transitions, the phase it ends in."""
        if self._info is None:
            starts = []
            final: Phase | None = None
            for start in Phase:
                try:
                    end = self._walk(start, _RunEverything(), [], "")
                except PhaseError:
                    continue
                starts.append(start)
                if end != start:
                    final = end
            self._info = PassInfo(self._name, self._opt_level, frozenset(starts),
                                  final if starts else None, self._required)
        return self._info

    def __len__(self) -> int:
        return len(self.passes)

    def __iter__(self) -> Iterator[Pass]:
        return iter(self.passes)

    def __repr__(self) -> str:
        return f"Sequential({self.spec()!r}, name={self._name!r})"

    # -- validation --------------------------------------------------------
    def plan(self, phase: Phase | int | str = Phase.INGESTION,
             ctx: PassContext | None = None) -> list[PlanStep]:
        """Validate the sequence for a module starting in ``phase`` and return
        the steps it would take under ``ctx`` (default: the current context).

        Raises :class:`PhaseError` for a misordered sequence or a disabled
        transition pass, :class:`PassConfigError` for an unknown required pass.
        """
        steps: list[PlanStep] = []
        self._walk(Phase.parse(phase), ctx if ctx is not None else PassContext.current(),
                   steps, "")
        return steps

    def validate(self, phase: Phase | int | str = Phase.INGESTION,
                 ctx: PassContext | None = None) -> Phase:
        """Validate statically (see :meth:`plan`); return the phase at the end."""
        steps = self.plan(phase, ctx)
        return steps[-1].phase_after if steps else Phase.parse(phase)

    def _walk(self, phase: Phase, ctx: Any, steps: list[PlanStep], prefix: str,
              outer_skip: str = "", outer_disabled: str | None = None) -> Phase:
        for index, p in enumerate(self.passes, 1):
            pos = f"{prefix}{index}"
            if isinstance(p, Sequential):
                skip, disabled = outer_skip, outer_disabled
                if not skip:
                    enabled, why = ctx.pass_enabled(PassInfo(p._name, p._opt_level))
                    if not enabled:
                        skip = f"enclosing Sequential {p._name!r}: {why}"
                        disabled = p._name if p._name in ctx.disabled_pass else None
                if not skip:
                    owner = PassInfo(p._name, p._opt_level, ALL_PHASES, None, p._required)
                    phase = self._add_required(owner, pos, phase, steps, (p._name,))
                phase = p._walk(phase, ctx, steps, pos + ".", skip, disabled)
                continue
            info = p.info
            skip, disabled = outer_skip, outer_disabled
            if not skip:
                enabled, skip = ctx.pass_enabled(info)
                disabled = info.name if info.name in ctx.disabled_pass else None
            if skip and info.is_transition:
                if disabled is not None:
                    raise self._error(
                        f"{self._describe()}: {info.name} at position {pos} is a transition pass "
                        f"({describe_phases(info.phases)} -> {info.transition_to.label}) and "
                        f"cannot be disabled (PassContext disabled_pass names {disabled!r}); "
                        "nothing has run", info.name, pos)
                skip = ""  # transitions run whatever the opt_level
            if skip:
                steps.append(PlanStep(p, pos, phase, phase, skip))
                continue
            phase = self._add_required(info, pos, phase, steps, (info.name,))
            self._check(info, pos, phase, steps)
            after = phase_after(info, phase)
            steps.append(PlanStep(p, pos, phase, after))
            phase = after
        return phase

    def _add_required(self, owner: PassInfo, pos: str, phase: Phase, steps: list[PlanStep],
                      chain: tuple[str, ...]) -> Phase:
        """Append the steps of ``owner``'s required passes (theirs first).

        A required pass whose effect still holds is not run again (like an
        LLVM analysis that is still available): see :func:`_still_in_effect`.
        """
        if not owner.required:
            return phase
        from phasec.transform.registry import get_pass

        for rname in owner.required:
            if _still_in_effect(rname, owner, steps):
                continue
            if rname in chain:
                raise PassConfigError(f"required passes form a cycle: "
                                      f"{' -> '.join(chain + (rname,))}")
            try:
                rp = get_pass(rname)
            except PassConfigError as exc:
                raise PassConfigError(f"{owner.name} requires {rname!r}, which cannot be "
                                      f"created: {exc}") from None
            phase = self._add_required(rp.info, pos, phase, steps, chain + (rname,))
            self._check(rp.info, pos, phase, steps, required_by=owner)
            after = phase_after(rp.info, phase)
            steps.append(PlanStep(rp, pos, phase, after, required_by=owner))
            phase = after
        return phase

    def _describe(self) -> str:
        return f"Sequential {self._name!r}"

    @staticmethod
    def _error(message: str, pass_name: str, position: str) -> PhaseError:
        err = PhaseError(message)
        err.pass_name = pass_name  # type: ignore[attr-defined]
        err.position = position  # type: ignore[attr-defined]
        return err

    def _check(self, info: PassInfo, pos: str, phase: Phase, steps: list[PlanStep],
               required_by: PassInfo | None = None) -> None:
        if phase in info.phases:
            return
        last = next((s for s in reversed(steps) if s.runs and s.phase_after != s.phase_before),
                    None)
        context = (f" at that point (after {last.pass_.info.name} at position {last.position})"
                   if last is not None else " at that point (the phase it starts in)")
        # Explain in terms of the pass the user wrote: a required pass that
        # cannot run is reported through the pass that requires it.
        shown = info
        if required_by is not None and required_by.phases and phase not in required_by.phases:
            shown = required_by
        reason = phase_mismatch_message(shown, phase, where="the module would be in",
                                        context=context)
        if shown is info and required_by is not None:
            reason = (f"{required_by.name} requires {info.name}, which cannot run there: "
                      + reason)
        owner = (required_by or info).name
        # pass_name is the leaf pass whose phase check fails (what running the
        # steps one by one would hit); the message, and requested_pass, name
        # the pass the user wrote.
        err = self._error(f"misordered passes{self._where()}: {owner} at position {pos} "
                          f"cannot run. {reason}. Nothing has run.", info.name, pos)
        err.requested_pass = owner  # type: ignore[attr-defined]
        raise err

    def _where(self) -> str:
        """`` in Sequential 'x'`` for a name the user chose; empty for the default names."""
        return "" if self._name in _ANONYMOUS_SEQUENTIALS else f" in Sequential {self._name!r}"

    # -- running -----------------------------------------------------------
    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise PassError(f"{self._describe()} must be called on an IRModule, not "
                            f"{type(mod).__name__}", self._name, None)
        ctx = PassContext.current()
        steps = self.plan(mod.phase, ctx)
        for step in steps:
            info = step.pass_.info
            if step.skip_reason:
                _notify(ctx, "run_on_skip", mod, info, step.skip_reason)
                continue
            if step.required_by is not None:
                _notify(ctx, "run_before_required", mod, info, step.required_by)
            mod = step.pass_(mod)
        return mod

    def flatten(self) -> list[Pass]:
        """The leaf passes, nested Sequentials expanded."""
        out: list[Pass] = []
        for p in self.passes:
            out.extend(p.flatten() if isinstance(p, Sequential) else (p,))
        return out


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

