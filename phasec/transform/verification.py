"""The bridge from the pass infrastructure to the well-formedness verifier.

:mod:`phasec.verifier` (a lower layer) is imported on first use, not when
:mod:`phasec.transform` is: it adds ~0.1 s to the ~0.5 s that importing the
pass infrastructure takes, which tools that only list or parse passes do
not need. Modules are immutable, so a module that verified once stays verified:
a small identity cache remembers the last verified modules, which lets the
infrastructure verify a pass's *input* (to avoid blaming a pass for a
violation it was handed) at no cost when that input is the verified output of
the previous pass.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from phasec.errors import PhasecError, WellFormedError

if TYPE_CHECKING:
    from phasec.ir import IRModule
    from phasec.transform.context import PassContext
    from phasec.transform.info import PassInfo

__all__ = ["verify_for_pass", "is_verified", "load_verifier", "forget_verified"]

VerifyFn = Callable[..., None]

# Strong references: they keep ids unique while a module is in the cache.
_VERIFIED: deque["IRModule"] = deque(maxlen=8)


def _verifier() -> Any:
    """The :mod:`phasec.verifier` package, imported on first use (see above)."""
    from phasec import verifier

    return verifier


def load_verifier() -> VerifyFn:
    """``verifier.verify``, imported on first use.

    Raises a :class:`PhasecError` that says how to proceed when the verifier
    cannot be imported (a broken installation).
    """
    try:
        return _verifier().verify
    except (ImportError, AttributeError) as exc:
        raise PhasecError(
            f"cannot verify modules: the 'verifier' package is unavailable ({exc}); "
            "reinstall phasec, or run with PassContext(verify='off')") from exc


def is_verified(mod: "IRModule") -> bool:
    """True when ``mod`` (this very object) passed verification recently."""
    return any(m is mod for m in _VERIFIED)


def forget_verified() -> None:
    """Empty the cache of verified modules (tests that swap the verifier use it)."""
    _VERIFIED.clear()


def _inherited(failure: WellFormedError, given: "IRModule") -> bool:
    """True when every violation in a pass's output was already in its input."""
    verifier = _verifier()

    def key(d: object) -> tuple:
        return (d.code, d.function, d.binding)  # type: ignore[attr-defined]

    before = {key(d) for d in verifier.check(given, phase=given.phase)}
    return all(key(d) in before for d in failure.diagnostics)


def verify_for_pass(mod: "IRModule", info: "PassInfo", ctx: "PassContext", stage: str,
                    given: "IRModule | None" = None) -> None:
    """Verify ``mod`` against its phase on behalf of the pass ``info``.

    ``stage`` is ``"output"`` (``mod`` is the pass's result: a violation is
    the pass's fault) or ``"input"`` (``mod`` is what the pass was given).
    ``given`` is the pass's unverified input (passes declared with
    ``verify_input=False``): a violation of the output that the input already
    had is blamed on the input, not on the pass.
    Instruments hear about the time spent; a violation raises
    :class:`WellFormedError` naming the culprit and carrying the diagnostics.
    """
    if is_verified(mod):
        return
    verify = load_verifier()
    phase = mod.phase
    start = time.perf_counter()
    failure: WellFormedError | None = None
    try:
        verify(mod, phase=phase, pass_name=info.name if stage == "output" else None)
    except WellFormedError as exc:
        failure = exc
    elapsed = time.perf_counter() - start
    for inst in ctx.instruments:
        inst.run_after_verify(mod, info, elapsed, stage)
    if failure is None:
        _VERIFIED.append(mod)
        return
    if stage == "output" and given is not None and _inherited(failure, given):
        stage = "input"
        try:  # the verifier's words again, without "after pass X": X is not to blame
            verify(mod, phase=phase)
        except WellFormedError as exc:
            failure = exc
    if stage == "output":
        if failure.pass_name == info.name and info.name in str(failure):
            raise failure  # the verifier already named the culprit
        head = (f"{info.name} produced a module that is not well-formed for phase "
                f"{phase.label}")
        culprit: str | None = info.name
    else:
        head = (f"the module given to {info.name} is not well-formed for phase "
                f"{phase.label} (no verified pass produced it, so {info.name} is not to blame)")
        culprit = None
    detail = str(failure)
    message = f"{head}: {detail}" if detail else head
    raise WellFormedError(message, failure.diagnostics, pass_name=culprit) from failure
