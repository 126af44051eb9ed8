"""Buffer element addresses and loads: row-major int64 addressing with
``nsw`` (in-bounds indexing never overflows), each index checked first
unless ``check_bounds`` is False or (``check_bounds`` None, the default)
:func:`phasec.arith.inbounds.prove_accesses` proved it in bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phasec.arith.inbounds import AccessProofs
from phasec.ir import tir
from phasec.backend.llvm.bounds import BoundsChecker
from phasec.backend.llvm.context import BufferInfo, KernelContext
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.irtext import elem_bytes, mem_type, sanitize

__all__ = ["BufferAccess"]


class BufferAccess:
    """Emits the addresses of buffer elements, and loads, into ``ctx``'s function."""

    def __init__(self, ctx: KernelContext, types: ExprTypes, conversions: Conversions,
                 bounds: BoundsChecker, proofs: AccessProofs | None = None) -> None:
        self.ctx = ctx
        self.proofs = proofs  # (check_bounds None) the accesses proven in bounds
        self.types = types
        self.conversions = conversions
        self.bounds = bounds

    def is_checked(self, node: tir.BufferLoad | tir.BufferStore, dim: int) -> bool:
        """Whether index ``dim`` of ``node`` gets a run-time bounds check."""
        check = self.ctx.options.check_bounds
        proofs = self.proofs
        return bool(check) or (check is None and (proofs is None or not proofs.proven(node, dim)))

    def element_ptr(self, buf: tir.Buffer, indices: Sequence[Any], index_ops: Sequence[str],
                    node: Any) -> tuple[BufferInfo, str]:
        """The address of ``buf[indices]`` (``index_ops``: the indices' operands)."""
        ctx = self.ctx
        info = ctx.lookup_buffer(buf, node)
        if len(indices) != len(info.dims):
            raise ctx.error(f"buffer '{buf.name}' has {len(info.dims)} dimension(s) but is "
                            f"indexed with {len(indices)} index(es)", node)
        fn = ctx.fn
        flat = "0"
        for d, (idx, op) in enumerate(zip(indices, index_ops)):
            i64 = self.conversions.to_i64(op, self.types.dtype_of(idx))
            if self.is_checked(node, d):
                self.bounds.check(buf, d, i64, info.dims[d], isinstance(node, tir.BufferStore))
            if d == 0:
                flat = i64
                continue
            m = fn.tmp("ix")
            fn.emit(f"{m} = mul nsw i64 {flat}, {info.dims[d]}")
            a = fn.tmp("ix")
            fn.emit(f"{a} = add nsw i64 {m}, {i64}")
            flat = a
        p = fn.tmp("p." + sanitize(buf.name))
        fn.emit(f"{p} = getelementptr inbounds {mem_type(buf.dtype)}, ptr {info.ptr}, i64 {flat}")
        return info, p

    def load(self, n: tir.BufferLoad, index_ops: Sequence[str]) -> str:
        """The value of ``n`` (a bool is loaded as a byte and compared with 0)."""
        _, p = self.element_ptr(n.buffer, n.indices, index_ops, n)
        dtype = n.buffer.dtype
        fn = self.ctx.fn
        r = fn.tmp(sanitize(n.buffer.name))
        fn.emit(f"{r} = load {mem_type(dtype)}, ptr {p}, align {elem_bytes(dtype)}")
        if dtype == "bool":
            b = fn.tmp("b")
            fn.emit(f"{b} = icmp ne i8 {r}, 0")
            return b
        return r
