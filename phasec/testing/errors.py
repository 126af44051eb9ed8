"""Errors of phasec.testing's generators."""

from __future__ import annotations

from phasec.errors import PhasecError

__all__ = ["GeneratorError"]


class GeneratorError(PhasecError):
    """The generator produced an ill-formed module (a bug in phasec.testing)."""
