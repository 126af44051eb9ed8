"""The floating-point environment kernels run in: subnormal results flushed to zero.

A float operation whose operand or result is subnormal (magnitude below
2**-126 for float32) takes a microcode assist of a hundred cycles or more on
x86 cores. A network whose values decay towards zero, such as a
squeeze-excite gate of ``sigmoid(-80)`` times a small activation, feeds such
values to every following kernel: EfficientNet-B0 at 224x224 with weights
that drive its gates that low ran 39 ms a call instead of 15 (one thread;
ONNX Runtime 13 ms).

So on x86-64 every exported kernel entry, and the chunk trampoline its
parallel loops run through on the pool's threads, sets MXCSR's
flush-to-zero bit (FTZ) for the duration of the call and restores the
caller's MXCSR afterwards: a result that would be subnormal is +-0 instead,
an absolute difference below 2**-126 (float32) or 2**-1022 (float64) from
IEEE arithmetic, far inside any tolerance a comparison with numpy uses.
Operands are not touched (no DAZ): a subnormal *input* still compares as
nonzero, as numpy has it, and copies keep their bits. The Python caller's
own floating-point environment (numpy's) is never changed.

The VM's code generator stores an executable's float constants (weights)
with their subnormal elements as signed zeros under the same setting
(``phasec.backend.vm.codegen``): a subnormal *operand* costs an assist too.

``PHASEC_SUBNORMALS=keep`` (or ``compile_prim_funcs(flush_subnormals=False)``)
compiles kernels that keep IEEE subnormal results, and constants as they
are; other hosts (AArch64, ...) keep them always.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable

from phasec.errors import InputError

__all__ = ["SLOT", "SUBNORMALS_ENV", "flush_by_default", "kernel_env_call"]

SUBNORMALS_ENV = "PHASEC_SUBNORMALS"
#: MXCSR's flush-to-zero bit (bit 15)
_FTZ = 0x8000
_X86_64 = ("x86_64", "amd64")


def flush_by_default() -> bool:
    """Whether kernels flush subnormal results: the host is x86-64 and
    ``PHASEC_SUBNORMALS`` is unset or ``flush`` (InputError for another value)."""
    value = os.environ.get(SUBNORMALS_ENV, "flush").strip().lower()
    if value not in ("flush", "keep"):
        raise InputError(f"the environment variable {SUBNORMALS_ENV} must be 'flush' (the "
                         f"default: subnormal float results become 0) or 'keep', not {value!r}")
    return value == "flush" and platform.machine().lower() in _X86_64


#: the stack slot :func:`kernel_env_call` uses, for the function's entry block
#: (an alloca anywhere else would be a dynamic one)
SLOT = "  %mxcsr.slot = alloca i32, align 4"


def kernel_env_call(call: str, flush: bool, declare: Callable[[str, str], None],
                    slot_here: bool = True) -> list[str]:
    """The lines of ``%rc = call`` (``call``: an LLVM ``call`` instruction
    returning i32): with ``flush``, run with FTZ set and the caller's MXCSR
    restored after it, the stack slot that takes allocated first unless
    ``slot_here`` is false (then the caller puts :data:`SLOT` in its entry
    block). ``declare(name, line)`` declares the two intrinsics in the module.

    The callee stays a function of its own (``noinline``): inlined between
    the two MXCSR writes, LLVM optimized the kernel differently (the tied LM
    head's GEMM, x[64,512] @ W^T[512,50257]: 32 -> 40-57 ms a call)."""
    if not flush:
        return [f"  %rc = {call}"]
    declare("llvm.x86.sse.stmxcsr", "declare void @llvm.x86.sse.stmxcsr(ptr)")
    declare("llvm.x86.sse.ldmxcsr", "declare void @llvm.x86.sse.ldmxcsr(ptr)")
    return [*[SLOT] * slot_here,
            "  call void @llvm.x86.sse.stmxcsr(ptr %mxcsr.slot)",
            "  %mxcsr.caller = load i32, ptr %mxcsr.slot, align 4",
            f"  %mxcsr.ftz = or i32 %mxcsr.caller, {_FTZ}",
            "  store i32 %mxcsr.ftz, ptr %mxcsr.slot, align 4",
            "  call void @llvm.x86.sse.ldmxcsr(ptr %mxcsr.slot)",
            f"  %rc = {call} noinline",
            "  store i32 %mxcsr.caller, ptr %mxcsr.slot, align 4",
            "  call void @llvm.x86.sse.ldmxcsr(ptr %mxcsr.slot)"]
