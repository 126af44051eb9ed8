"""The switches of the kernel code generator."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CodegenOptions", "bounds_mode"]


def bounds_mode(check_bounds: bool | None) -> str:
    """How ``check_bounds`` reads in messages and listings: "unless proven"
    (None), "all" (True) or "none" (False)."""
    return "unless proven" if check_bounds is None else ("all" if check_bounds else "none")


@dataclass(frozen=True)
class CodegenOptions:
    """Code generation switches.

    ``fast_math`` allows LLVM to reassociate float arithmetic (results may
    then differ from numpy by more than rounding); ``contract`` allows fusing
    a multiply and an add into one FMA, which only removes a rounding step.
    Neither reaches the arithmetic whose value a rounding to an integer, a
    float remainder or a float comparison decides: it is emitted without
    flags (:mod:`.exact`).
    ``check_bounds`` decides which buffer loads and stores compare each index
    with its dimension first (like TVM's ``tir.instrument_bound_checkers``; a
    kernel with a wrong index then ends with an error naming the kernel, the
    buffer, the index and the extent instead of touching memory it does not
    own):

    * ``None`` (the default): every access that
      :func:`phasec.arith.inbounds.prove_accesses` does not prove in bounds.
      The loops of GEMM, convolution and elementwise kernels are proven, so
      they keep their speed; data-dependent and unproven indices are checked.
    * ``True``: every access (a debugging mode; keeps inner loops from
      vectorizing, bench/bench_kernels.py measures the cost).
    * ``False``: none, for trusted kernels only: a wrong index then reads or
      writes memory it does not own.

    ``flush_subnormals`` runs each kernel with x86's flush-to-zero bit set
    (results that would be subnormal are 0; see :mod:`.fpenv`).
    """

    fast_math: bool = False
    contract: bool = True
    vector_math: bool = True
    #: which buffer accesses are checked against their extent (RC_BUFFER_OUT_OF_BOUNDS):
    #: None the unproven ones, True all, False none
    check_bounds: bool | None = None
    cpu: str = ""
    features: str = ""
    prefer_vector_width: int | None = None
    flush_subnormals: bool = False

    @property
    def float_flags(self) -> str:
        """The fast-math flags of float instructions (with a trailing space)."""
        if self.fast_math:
            return "fast "
        return "contract " if self.contract else ""
