"""Deterministic packed functions that generated programs call.

Generated modules use ``R.call_packed`` / ``R.call_pure_packed`` /
``R.call_dps_packed`` with these names, so the reference interpreter and the
VM can run them. They are registered when :mod:`phasec.testing` is imported
(re-registering is harmless). Each returns a fresh array and never reads
global state, so a program's results do not depend on how often (or whether)
a pass lets them run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from phasec.runtime.packed import register_func

__all__ = ["PACKED_FUNCS", "DPS_FUNCS", "register_testing_funcs"]


def _scale2(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * np.asarray(2, dtype=x.dtype), dtype=x.dtype)


def _clamp(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -1, 1).astype(x.dtype)


def _scale2_dps(x: np.ndarray, out: np.ndarray) -> None:
    np.multiply(x, np.asarray(2, dtype=x.dtype), out=out)


def _clamp_dps(x: np.ndarray, out: np.ndarray) -> None:
    np.clip(x, -1, 1, out=out)


#: name -> (function, interval transform) for value-returning packed funcs;
#: the transform maps the operand's value range to the result's.
PACKED_FUNCS: dict[str, tuple[Callable, Callable[[float, float], tuple[float, float]]]] = {
    "phasec.testing.scale2": (_scale2, lambda lo, hi: (2 * lo, 2 * hi)),
    "phasec.testing.clamp": (_clamp, lambda lo, hi: (max(-1.0, min(lo, 1.0)),
                                                     max(-1.0, min(hi, 1.0)))),
}

#: destination-passing versions (``R.call_dps_packed``): outputs written in place.
DPS_FUNCS: dict[str, tuple[Callable, Callable[[float, float], tuple[float, float]]]] = {
    "phasec.testing.scale2_dps": (_scale2_dps, PACKED_FUNCS["phasec.testing.scale2"][1]),
    "phasec.testing.clamp_dps": (_clamp_dps, PACKED_FUNCS["phasec.testing.clamp"][1]),
}


def register_testing_funcs() -> None:
    """Register every testing packed function (idempotent)."""
    for table in (PACKED_FUNCS, DPS_FUNCS):
        for name, (func, _) in table.items():
            register_func(name, func, override=True)
