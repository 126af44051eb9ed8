"""Conversions between the LLVM values of TIR dtypes (C cast semantics),
emitted into the current function of a kernel."""

from __future__ import annotations

from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.irtext import (
    BITS, LLVM_TYPE, float_literal, is_float, is_intlike, is_signed,
)

__all__ = ["Conversions"]


class Conversions:
    """Emits value conversions into ``ctx``'s function."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx

    def convert(self, op: str, src: str, dst: str) -> str:
        """Convert ``op`` of dtype ``src`` to ``dst`` (C cast semantics)."""
        if src == dst:
            return op
        fn = self.ctx.fn
        st, dt = LLVM_TYPE[src], LLVM_TYPE[dst]
        r = fn.tmp("cv")
        if dst == "bool":
            if is_float(src):
                fn.emit(f"{r} = fcmp une {st} {op}, {float_literal(0.0, src)}")
            else:
                fn.emit(f"{r} = icmp ne {st} {op}, 0")
            return r
        if is_intlike(src) and is_intlike(dst):
            sb, db = BITS[src], BITS[dst]
            if sb == db:
                return op
            if sb < db:
                ext = "sext" if is_signed(src) else "zext"
                fn.emit(f"{r} = {ext} {st} {op} to {dt}")
            else:
                fn.emit(f"{r} = trunc {st} {op} to {dt}")
            return r
        if is_intlike(src):  # -> float
            conv = "sitofp" if is_signed(src) else "uitofp"
            fn.emit(f"{r} = {conv} {st} {op} to {dt}")
            return r
        if is_intlike(dst):  # float -> int; freeze: out-of-range gives some value, not poison
            conv = "fptosi" if is_signed(dst) else "fptoui"
            raw = fn.tmp("cv")
            fn.emit(f"{raw} = {conv} {st} {op} to {dt}")
            fn.emit(f"{r} = freeze {dt} {raw}")
            return r
        if src == "float64" and dst == "float16":
            return self._f64_to_f16(op)
        conv = "fpext" if BITS[dst] > BITS[src] else "fptrunc"
        fn.emit(f"{r} = {conv} {st} {op} to {dt}")
        return r

    def _f64_to_f16(self, op: str) -> str:
        """double -> half, correctly rounded, through float.

        LLVM lowers a direct ``fptrunc double to half`` to a call of
        ``__truncdfhf2``, a compiler-rt function the JIT cannot resolve (the
        call jumps to address 0). Rounding to float first would round twice;
        rounding to float *to odd* (truncate, then set the last bit when
        inexact) keeps enough information for the second rounding to be the
        correct one (float has more than 11 + 2 mantissa bits).
        """
        fn = self.ctx.fn
        fabs = self.ctx.mod.intrinsic("llvm.fabs.f64", "double", ["double"])
        f, back, af, ad, away = (fn.tmp("h") for _ in range(5))
        fn.emit(f"{f} = fptrunc double {op} to float")
        fn.emit(f"{back} = fpext float {f} to double")
        fn.emit(f"{af} = call double {fabs}(double {back})")
        fn.emit(f"{ad} = call double {fabs}(double {op})")
        fn.emit(f"{away} = fcmp ogt double {af}, {ad}")  # rounded away from zero
        bits, down, trunc, inexact, odd, res, rf, r = (fn.tmp("h") for _ in range(8))
        fn.emit(f"{bits} = bitcast float {f} to i32")
        fn.emit(f"{down} = sub i32 {bits}, 1")  # one ulp towards zero (sign-magnitude)
        fn.emit(f"{trunc} = select i1 {away}, i32 {down}, i32 {bits}")
        fn.emit(f"{inexact} = fcmp one double {back}, {op}")  # false for NaN
        fn.emit(f"{odd} = or i32 {trunc}, 1")
        fn.emit(f"{res} = select i1 {inexact}, i32 {odd}, i32 {trunc}")
        fn.emit(f"{rf} = bitcast i32 {res} to float")
        fn.emit(f"{r} = fptrunc float {rf} to half")
        return r

    def to_i64(self, op: str, dtype: str) -> str:
        """``op`` of ``dtype`` as an i64 (a uint64 is used as it is)."""
        return self.convert(op, dtype, "int64") if dtype != "uint64" else op
