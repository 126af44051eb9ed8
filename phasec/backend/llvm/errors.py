"""Errors of the LLVM kernel compiler."""

from __future__ import annotations

from ...errors import PhasecError

__all__ = ["CodegenError"]


class CodegenError(PhasecError):
    """A PrimFunc cannot be compiled: undefined variable, unknown intrinsic,
    dtype mismatch, unsupported construct. The message names the kernel and,
    when the offending node carries one, its source location."""

    def __init__(self, message: str, kernel: str | None = None, span: object = None) -> None:
        self.kernel = kernel
        self.span = span
        where = f"kernel '{kernel}'" if kernel is not None else "kernel"
        if span is not None:
            where += f" at {span}"
        super().__init__(f"{where}: {message}")
