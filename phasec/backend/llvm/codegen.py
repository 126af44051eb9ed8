"""Lower TIR ``PrimFunc``s to LLVM IR (textual assembly).

One :class:`ModuleCodegen` turns every kernel of a module into one LLVM
module; how one kernel becomes LLVM functions is :mod:`.kernel`'s. Design
choices, all for code LLVM can vectorize:

* row-major element addressing in int64 with ``nsw`` (in-bounds indexing
  never overflows), loop induction variables as phi nodes, loop metadata for
  ``vectorized``/``unroll`` loops (:mod:`.access`, :mod:`.loops`);
* ``parallel`` loops are outlined into a body function over an iteration
  chunk run by the process-wide thread pool (:mod:`.loops`, :mod:`.irlib`);
* expressions are emitted iteratively (no Python recursion on deep trees);
  ``Select`` and ``and``/``or`` branch lazily when an operand reads memory
  (:mod:`.expressions`);
* integer division follows TVM: ``/`` truncates, ``//`` and ``%`` floor; a
  zero divisor yields 0 and ``INT_MIN / -1`` wraps instead of trapping.

The kernel emitters are objects wired together per LLVM function
(:class:`.kernel.FunctionEmitters`): the function's state
(:mod:`.context`), the dtypes of expressions (:mod:`.exprtypes`),
conversions, buffer access and its bounds checks, expressions, intrinsics,
statements, loops and the exported entry (:mod:`.entry`).
"""

from __future__ import annotations

from collections.abc import Sequence

from phasec.ir import tir
from phasec.backend.llvm.abi import (
    OOB_EXTENT, OOB_SITE, OOB_VALUE, ArrayLayout, KernelABI, ParamABI, kernel_abi,
)
from phasec.backend.llvm.errors import CodegenError, refuse_host_calls
from phasec.backend.llvm.irlib import KERNEL_LIB_DECLS, KERNEL_LIB_IR
from phasec.backend.llvm.irtext import llvm_type, sanitize
from phasec.backend.llvm.kernel import emit_kernel
from phasec.backend.llvm.mathlib import MATH_DEPENDS, math_function
from phasec.backend.llvm.options import CodegenOptions

__all__ = ["ModuleCodegen", "KernelABI", "ParamABI", "CodegenOptions", "ArrayLayout",
           "llvm_type"]


class ModuleCodegen:
    """Accumulates the LLVM IR of all kernels of one module."""

    def __init__(self, options: CodegenOptions | None = None, array_data_offset: int | None = None,
                 array_layout: ArrayLayout | None = None) -> None:
        self.options = options or CodegenOptions()
        self.array_data_offset = array_data_offset
        #: set: entries check their arrays natively (see KernelABI.checked)
        self.array_layout = array_layout if array_data_offset is not None else None
        self.functions: list[str] = []
        self.decls: dict[str, str] = dict(KERNEL_LIB_DECLS)
        self.math: dict[str, str] = {}
        self.metadata: list[str] = []
        self._md_props: dict[str, str] = {}
        self._n_md = 0
        self._symbols: set[str] = set()
        self.kernels: dict[str, KernelABI] = {}
        #: kernel name -> the slice of ``functions`` its code takes
        self._spans: dict[str, tuple[int, int]] = {}

    # -- metadata and declarations -----------------------------------------
    def _md(self) -> str:
        ref = f"!{self._n_md}"
        self._n_md += 1
        return ref

    def loop_metadata(self, props: Sequence[str]) -> str:
        """A distinct loop-id node carrying ``props`` (shared property nodes)."""
        refs = []
        for p in props:
            ref = self._md_props.get(p)
            if ref is None:
                ref = self._md()
                self._md_props[p] = ref
                self.metadata.append(f"{ref} = !{{{p}}}")
            refs.append(ref)
        loop = self._md()
        self.metadata.append(f"{loop} = distinct !{{{', '.join([loop, *refs])}}}")
        return loop

    def declare(self, name: str, line: str) -> None:
        self.decls.setdefault(name, line)

    def intrinsic(self, name: str, ret: str, args: Sequence[str]) -> str:
        """Declare ``@name`` (once) and return its callee reference."""
        self.declare(name, f"declare {ret} @{name}({', '.join(args)})")
        return f"@{name}"

    def use_math(self, name: str) -> str:
        """Link the vectorizable math function ``name`` (see mathlib); returns the callee."""
        stack = [name]
        while stack:
            n = stack.pop()
            if n not in self.math:
                text, decls = math_function(n, self.options.features)
                self.math[n] = text
                for k, v in decls.items():
                    self.declare(k, v)
                stack.extend(MATH_DEPENDS.get(n, ()))
        return f"@{name}"

    def unique_symbol(self, base: str) -> str:
        sym = base
        k = 1
        while sym in self._symbols:
            k += 1
            sym = f"{base}_{k}"
        self._symbols.add(sym)
        return sym

    @property
    def attr_group(self) -> str:
        opts = self.options
        attrs = ["nounwind"]
        if opts.cpu:
            attrs.append(f'"target-cpu"="{opts.cpu}"')
        if opts.features:
            attrs.append(f'"target-features"="{opts.features}"')
        if opts.prefer_vector_width:
            attrs.append(f'"prefer-vector-width"="{opts.prefer_vector_width}"')
        return " ".join(attrs)

    # -- kernels ---------------------------------------------------------------
    def add_kernel(self, name: str, func: tir.PrimFunc) -> KernelABI:
        """Generate the code of one kernel; returns how to call it."""
        if not isinstance(func, tir.PrimFunc):
            raise CodegenError(f"expected a tir.PrimFunc, got {type(func).__name__}", name)
        if name in self.kernels:
            raise CodegenError("defined twice in the same module", name)
        refuse_host_calls(name, func)
        start = len(self.functions)
        abi = emit_kernel(self, name, func)
        self.kernels[name] = abi
        self._spans[name] = (start, len(self.functions))
        return abi

    def kernel_size(self, name: str) -> int:
        """The characters of LLVM IR kernel ``name`` generated."""
        a, b = self._spans[name]
        return sum(len(f) for f in self.functions[a:b])

    def kernel_sizes(self) -> dict[str, int]:
        """The characters of LLVM IR each kernel generated (an estimate of
        what compiling it costs)."""
        return {name: sum(len(f) for f in self.functions[a:b])
                for name, (a, b) in self._spans.items()}

    def plan_kernel(self, name: str, func: tir.PrimFunc) -> KernelABI:
        """The ABI :meth:`add_kernel` would produce, without generating code."""
        symbol = self.unique_symbol("phasec.k." + sanitize(name))
        return kernel_abi(name, func, symbol, self.array_data_offset is not None,
                          self.array_layout is not None)

    def unlikely_md(self) -> str:
        """The metadata node of a branch weight that marks error exits unlikely."""
        ref = self._md_props.get("unlikely")
        if ref is None:
            ref = self._md_props["unlikely"] = self._md()
            self.metadata.append(f'{ref} = !{{!"branch_weights", i32 1048575, i32 1}}')
        return ref

    def finish(self) -> str:
        """The complete LLVM assembly of the module."""
        return self._assemble(self.functions)

    def finish_split(self, groups: Sequence[Sequence[str]]) -> list[str]:
        """One LLVM module per group of kernel names (every kernel in exactly
        one group), each a complete module that compiles on its own: the
        shared library code, declarations and metadata are in all of them
        (what a module does not use LLVM drops), each kernel's functions only
        in its group's."""
        if sorted(n for g in groups for n in g) != sorted(self._spans):
            raise CodegenError("finish_split: the groups must hold every kernel exactly once")
        return [self.module_of(group) for group in groups]

    def module_of(self, names: Sequence[str]) -> str:
        """A complete LLVM module of the kernels ``names`` (added already), as
        one group of :meth:`finish_split`; the kernels added later are in
        other modules (the shared code and metadata so far are all here)."""
        functions = [f for name in names for f in self.functions[slice(*self._spans[name])]]
        return self._assemble(functions)

    def _assemble(self, functions: Sequence[str]) -> str:
        parts = [KERNEL_LIB_IR, *self.math.values(), "attributes #0 = { " + self.attr_group + " }",
                 f"@{OOB_VALUE} = global i64 0, align 8",
                 f"@{OOB_EXTENT} = global i64 0, align 8",
                 f"@{OOB_SITE} = global i64 0, align 8", ""]
        parts.extend(self.decls.values())
        parts.append("")
        parts.extend(functions)
        parts.extend(self.metadata)
        return "\n".join(parts) + "\n"
