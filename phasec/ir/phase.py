"""Compilation phases: the ``phase`` attribute an IRModule carries."""

from __future__ import annotations

from enum import IntEnum

from phasec.errors import InvalidPhaseError

__all__ = ["Phase"]


class Phase(IntEnum):
    """The four phases of the pipeline, ordered.

    ``LambdaLifting`` enters OPTIMIZATION, ``LegalizeOps`` enters LOWERING and
    ``VMBuiltinLower`` enters BUILD. Invariants accumulate phase by phase.
    """

    INGESTION = 0
    OPTIMIZATION = 1
    LOWERING = 2
    BUILD = 3

    @classmethod
    def parse(cls, value: "Phase | int | str") -> "Phase":
        """Accept a Phase, its number (0-3, also as a string) or its name (any case);
        anything else is an :class:`~phasec.errors.InvalidPhaseError` (a ValueError)."""
        if isinstance(value, Phase):
            return value
        if isinstance(value, bool):
            raise InvalidPhaseError(f"invalid phase {value!r}: {cls.choices()}")
        if isinstance(value, int):
            try:
                return cls(value)
            except ValueError:
                raise InvalidPhaseError(f"invalid phase {value}: {cls.choices()}") from None
        if isinstance(value, str):
            text = value.strip()
            if text.isdigit():
                return cls.parse(int(text))
            try:
                return cls[text.upper()]
            except KeyError:
                raise InvalidPhaseError(f"invalid phase {value!r}: {cls.choices()}") from None
        raise InvalidPhaseError(f"invalid phase {value!r} ({type(value).__name__}): {cls.choices()}")

    @classmethod
    def choices(cls) -> str:
        return "expected one of " + ", ".join(f"{p.label} ({p.value})" for p in cls)

    @property
    def label(self) -> str:
        """The lower-case name used in module attributes and messages."""
        return self.name.lower()

    def __str__(self) -> str:
        return self.label
