"""One kernel in LLVM IR, from the emitters of the other modules.

A kernel ``K`` becomes

* ``@K`` (internal): the kernel proper, one ``noalias`` pointer per buffer
  parameter, then the scalar parameters, then the symbolic dimensions that
  are bound from buffer shapes; returns 0 or an error code;
* one function (and a trampoline) per ``parallel`` loop (see :mod:`.loops`);
* its exported entry (see :mod:`.entry`).

Each LLVM function has a :class:`~.context.KernelContext` and a
:class:`FunctionEmitters`, the emitters wired to that context; the dtypes of
the kernel's expressions (:class:`~.exprtypes.ExprTypes`) are shared by all
of its functions.
"""

from __future__ import annotations

from phasec.arith.inbounds import AccessProofs, prove_accesses
from phasec.ir import tir
from phasec.backend.llvm.abi import RC_OK, KernelABI, kernel_abi
from phasec.ir.memo import remembered
from phasec.backend.llvm.access import BufferAccess
from phasec.backend.llvm.bounds import BoundsChecker, find_out_of_bounds
from phasec.backend.llvm.context import BufferInfo, KernelContext, ModuleSink
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.entry import EntryEmitter
from phasec.backend.llvm.errors import CodegenError
from phasec.backend.llvm.expressions import ExpressionEmitter
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.exprtypes import has_variable_division
from phasec.backend.llvm.intrinsics import IntrinsicLowering
from phasec.backend.llvm.irtext import LLVM_TYPE, FunctionText, quote, sanitize
from phasec.backend.llvm.loops import LoopEmitter
from phasec.backend.llvm.statements import StatementEmitter
from phasec.backend.llvm.vectors import VectorLoops

__all__ = ["FunctionEmitters", "emit_kernel"]


class FunctionEmitters:
    """The emitters of one LLVM function of a kernel, wired together; an
    outlined parallel body gets its own (see :meth:`outline`)."""

    def __init__(self, ctx: KernelContext, types: ExprTypes,
                 proofs: AccessProofs | None = None, blocked: set[int] | None = None) -> None:
        self.ctx = ctx
        self.types = types
        self.proofs = proofs
        self.conversions = Conversions(ctx)
        self.bounds = BoundsChecker(ctx)
        self.access = BufferAccess(ctx, types, self.conversions, self.bounds, proofs)
        self.intrinsics = IntrinsicLowering(ctx, types, self.conversions)
        self.expressions = ExpressionEmitter(ctx, types, self.conversions, self.access,
                                             self.intrinsics)
        self.loops = LoopEmitter(ctx, self.expressions, self.conversions, self.outline,
                                 VectorLoops(ctx, types, self.expressions, self.access,
                                             blocked))
        self.statements = StatementEmitter(ctx, types, self.conversions, self.expressions,
                                           self.access, self.loops)

    def outline(self, ctx: KernelContext) -> FunctionEmitters:
        """The emitters of another function of the same kernel (a parallel loop's body)."""
        vectors = self.loops.vectors
        return FunctionEmitters(ctx, self.types, self.proofs,
                                None if vectors is None else vectors.blocked_tiles())

    def emit_stmt(self, s: tir.Stmt) -> None:
        self.statements.emit(s)


def emit_kernel(mod: ModuleSink, name: str, func: tir.PrimFunc) -> KernelABI:
    """Emit kernel ``name`` into ``mod``; returns how to call it."""
    # Native code does not check indices: refuse a kernel that would
    # certainly access memory outside its buffers (it would crash). The
    # verifier has usually analysed this very kernel already (the same memo).
    oob = remembered(find_out_of_bounds, func)
    if oob is not None:
        raise CodegenError(oob.message, name, getattr(oob.node, "span", None))
    params = func.params
    symbol = mod.unique_symbol("phasec.k." + sanitize(name))
    abi = kernel_abi(name, func, symbol, mod.array_data_offset is not None,
                     mod.array_layout is not None)
    arg_decls: list[str] = []
    bindings: list[tuple[tir.Var, str]] = []
    for i, p in enumerate(params):
        if isinstance(p, tir.Buffer):
            arg_decls.append(f"ptr noalias %arg{i}")
        else:
            arg_decls.append(f"{LLVM_TYPE[p.dtype]} %arg{i}")
            bindings.append((p, f"%arg{i}"))
    for k, v in enumerate(abi.dim_vars):
        arg_decls.append(f"{LLVM_TYPE[v.dtype]} %dim{k}")
        bindings.append((v, f"%dim{k}"))
    fn = FunctionText(f"define internal i32 {quote(symbol)}({', '.join(arg_decls)}) #0")
    ctx = KernelContext(mod, name, func, fn, symbol)
    for v, op in bindings:
        ctx.bind_var(v, op)
    # checked unless proven (CodegenOptions.check_bounds None): what is proven;
    # integer divisors are tested unless proven non-zero, whatever check_bounds says
    check = mod.options.check_bounds
    proofs = prove_accesses(func) if check is None or has_variable_division(func) else None
    emitters = FunctionEmitters(ctx, ExprTypes(ctx, proofs), proofs)
    for i, p in enumerate(params):
        if isinstance(p, tir.Buffer):
            what = f"dimension of buffer '{p.name}'"
            dims = [emitters.expressions.emit_value_as(d, "int64", what) for d in p.shape]
            ctx.bufs[id(p)] = BufferInfo(p, f"%arg{i}", dims)

    emitters.emit_stmt(func.body)
    ctx.raise_zero_divisor()
    fn.emit(f"ret i32 {RC_OK}")
    ctx.finish_function()
    EntryEmitter(mod, func, symbol).emit(abi)
    return abi
