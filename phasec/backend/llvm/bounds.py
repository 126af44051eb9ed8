"""The run-time check of buffer accesses (:class:`BoundsChecker`), emitted
for every access a kernel's ``check_bounds`` mode asks to check (see
:class:`.options.CodegenOptions`). The static refusal of certainly
out-of-bounds accesses is :func:`phasec.arith.outofbounds.find_out_of_bounds`
(re-exported here)."""

from __future__ import annotations

from phasec.arith.outofbounds import OutOfBounds, find_out_of_bounds
from phasec.ir import tir
from phasec.backend.llvm.abi import (
    OOB_EXTENT, OOB_SITE, OOB_VALUE, RC_BUFFER_OUT_OF_BOUNDS, buffer_site, buffers_in_order,
)
from phasec.backend.llvm.context import KernelContext

__all__ = ["find_out_of_bounds", "OutOfBounds", "BoundsChecker"]


class BoundsChecker:
    """The run-time check of a ``check_bounds`` kernel's buffer accesses,
    emitted into ``ctx``'s function: an index outside its dimension records
    the access (index, extent, :func:`.abi.buffer_site`) and returns
    RC_BUFFER_OUT_OF_BOUNDS, freeing the live heap buffers."""

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx
        self._ordinals: dict[int, int] | None = None  # buffer id -> buffers_in_order index

    def check(self, buf: tir.Buffer, dim: int, index: str, extent: str, write: bool) -> None:
        """Emit ``0 <= index < extent`` (i64 operands) for dimension ``dim`` of ``buf``."""
        ctx = self.ctx
        fn = ctx.fn
        ok = fn.tmp("inb")
        fn.emit(f"{ok} = icmp ult i64 {index}, {extent}")  # unsigned: negatives fail too
        bad, cont = fn.label("oob"), fn.label("inb")
        fn.emit(f"br i1 {ok}, label %{cont}, label %{bad}, !prof {ctx.mod.unlikely_md()}")
        fn.start(bad)
        if self._ordinals is None:
            self._ordinals = {id(b): k for k, b in enumerate(buffers_in_order(ctx.func))}
        site = buffer_site(self._ordinals.get(id(buf), 0), dim, write)
        fn.emit(f"store atomic i64 {index}, ptr @{OOB_VALUE} monotonic, align 8")
        fn.emit(f"store atomic i64 {extent}, ptr @{OOB_EXTENT} monotonic, align 8")
        fn.emit(f"store atomic i64 {site}, ptr @{OOB_SITE} monotonic, align 8")
        ctx.error_return(str(RC_BUFFER_OUT_OF_BOUNDS))
        fn.start(cont)
