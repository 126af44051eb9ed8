"""Native kernels: TIR PrimFuncs compiled to machine code with llvmlite.

``compile_prim_funcs({name: prim_func})`` compiles all kernels of a module
into one LLVM module (new pass manager at O3 with loop and SLP
vectorization, tuned for the host CPU) and returns a
:class:`CompiledLibrary`; ``lib[name](*arrays)`` runs a kernel on numpy
arrays in place. Compiled libraries are cached by the structure of the
functions, so building the same module twice does not recompile.
"""

from phasec.backend.llvm.abi import KernelABI, ParamABI
from phasec.backend.llvm.errors import CodegenError
from phasec.backend.llvm.options import CodegenOptions
from phasec.backend.llvm.jit import (
    get_num_threads, parallel_runtime_kind, set_min_parallel_work, set_num_threads,
    set_buffer_cache_limit, set_parallel_chunk_work, set_parallel_wake_work, trim_buffer_cache,
)
from phasec.backend.llvm.runtime import (
    CompiledLibrary, Kernel, UnknownKernelError, cache_info, clear_cache, compile_prim_funcs,
)

__all__ = ["compile_prim_funcs", "CompiledLibrary", "Kernel", "CodegenError",
           "UnknownKernelError", "CodegenOptions", "KernelABI", "ParamABI", "cache_info",
           "clear_cache", "set_num_threads", "get_num_threads", "set_min_parallel_work",
           "set_parallel_chunk_work", "set_parallel_wake_work", "parallel_runtime_kind",
           "trim_buffer_cache", "set_buffer_cache_limit"]
