"""Errors of the LLVM kernel compiler."""

from __future__ import annotations

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.memo import remembered

__all__ = ["CodegenError", "refuse_host_calls"]


def refuse_host_calls(name: str, func: "tir.PrimFunc") -> None:
    """A CodegenError if ``func`` calls TVM's host builtins (T.call_packed...),
    which name functions of TVM's runtime that phasec neither has nor runs."""
    packed = remembered(_host_calls, func.body)  # a cold build asks twice per kernel
    if packed:
        raise CodegenError(f"calls {tir.describe_host_call(packed[0])}, which the LLVM backend "
                           f"does not compile; phasec's own lowering of an operator computes "
                           f"it in TIR", name)


def _host_calls(body: "tir.Stmt") -> tuple[str, ...]:
    return tuple(tir.host_calls(body))


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
