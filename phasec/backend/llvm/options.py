"""The switches of the kernel code generator."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CodegenOptions"]


@dataclass(frozen=True)
class CodegenOptions:
    """Code generation switches.

    ``fast_math`` allows LLVM to reassociate float arithmetic (results may
    then differ from numpy by more than rounding); ``contract`` allows fusing
    a multiply and an add into one FMA, which only removes a rounding step.
    ``check_bounds`` makes every buffer load and store compare each index with
    its dimension first (like TVM's ``tir.instrument_bound_checkers``): a
    kernel with a wrong index ends with an error naming the buffer, the index
    and the extent instead of touching memory it does not own. It keeps
    inner loops from vectorizing (bench/bench_kernels.py measures the cost).
    """

    fast_math: bool = False
    contract: bool = True
    vector_math: bool = True
    #: check every buffer access against its extent (RC_BUFFER_OUT_OF_BOUNDS)
    check_bounds: bool = False
    cpu: str = ""
    features: str = ""
    prefer_vector_width: int | None = None

    @property
    def float_flags(self) -> str:
        """The fast-math flags of float instructions (with a trailing space)."""
        if self.fast_math:
            return "fast "
        return "contract " if self.contract else ""
