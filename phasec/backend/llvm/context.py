"""The state of one LLVM function being emitted for a kernel, shared by the
emitters of :mod:`.kernel`: the module it goes into (:class:`ModuleSink`),
the function's text, the LLVM operands of the TIR variables and buffers in
scope, the heap buffers live at the point being emitted, and the error exits.

A kernel is one such function, plus one per ``parallel`` loop, whose body is
outlined into a function of its own (see :mod:`.loops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from phasec.ir import tir
from phasec.backend.llvm.abi import ArrayLayout, RC_DIVISION_BY_ZERO, RC_OUT_OF_MEMORY
from phasec.backend.llvm.errors import CodegenError
from phasec.backend.llvm.irtext import LLVM_TYPE, FunctionText
from phasec.backend.llvm.options import CodegenOptions

__all__ = ["ModuleSink", "BufferInfo", "KernelContext"]


class ModuleSink(Protocol):
    """What the emitters of a kernel use of the LLVM module they emit into
    (:class:`.codegen.ModuleCodegen`)."""

    options: CodegenOptions
    #: the byte offset of the data pointer in numpy's array object (None: unknown)
    array_data_offset: int | None
    #: set: entries check their arrays natively (see KernelABI.checked)
    array_layout: ArrayLayout | None
    #: the text of every function emitted so far
    functions: list[str]

    def declare(self, name: str, line: str) -> None:
        """Add the declaration ``line`` of global ``name`` (once)."""

    def intrinsic(self, name: str, ret: str, args: Sequence[str]) -> str:
        """Declare the function ``@name`` (once); returns its callee reference."""

    def use_math(self, name: str) -> str:
        """Link the vectorizable math function ``name`` (see mathlib); returns the callee."""

    def unlikely_md(self) -> str:
        """The metadata node of a branch weight that marks error exits unlikely."""

    def loop_metadata(self, props: Sequence[str]) -> str:
        """A distinct loop-id node carrying ``props``."""

    def unique_symbol(self, base: str) -> str:
        """``base``, or ``base_N`` if a kernel of the module has that symbol already."""


@dataclass
class BufferInfo:
    """A buffer in scope: its base pointer and its dimensions (i64 operands)."""

    buffer: tir.Buffer
    ptr: str
    dims: list[str]


class KernelContext:
    """One LLVM function of kernel ``name`` (``func``) being emitted into ``mod``.

    ``symbol`` is the function's own symbol; ``allow_parallel`` is False in
    an outlined parallel body (nested parallel loops run serially).
    """

    def __init__(self, mod: ModuleSink, name: str, func: tir.PrimFunc, fn: FunctionText,
                 symbol: str, allow_parallel: bool = True) -> None:
        self.mod = mod
        self.options = mod.options
        self.name = name
        self.func = func
        self.fn = fn
        self.symbol = symbol
        self.allow_parallel = allow_parallel
        #: Var id -> (LLVM operand, dtype) of the variables in scope
        self.vars: dict[int, tuple[str, str]] = {}
        #: the bound Var objects themselves (an id is not reused while bound)
        self.var_objs: dict[int, tir.Var] = {}
        #: Buffer id -> the buffer's pointer and dimensions
        self.bufs: dict[int, BufferInfo] = {}
        #: heap buffers live at the point being emitted (an error exit frees them)
        self.heap: list[tuple[str, str]] = []  # (pointer, size) of live phasec_rt_alloc blocks
        #: the label of the out-of-memory exit, once a branch to it was emitted
        self.oom_label: str | None = None
        #: parallel loops outlined so far (numbers their functions)
        self.n_parallel = 0
        #: once a division tests its divisor: an i8 of the entry block, set
        #: to 1 when a tested divisor was 0 (see note_zero_divisor)
        self.divzero_flag: str | None = None

    # -- errors ------------------------------------------------------------
    def error(self, message: str, node: Any = None) -> CodegenError:
        """A CodegenError naming this kernel and ``node``'s source location."""
        return CodegenError(message, self.name, getattr(node, "span", None))

    def check_dtype(self, dtype: Any, what: str, node: Any) -> str:
        """``dtype`` if the code generator supports it, else a CodegenError."""
        if dtype not in LLVM_TYPE:
            raise self.error(f"{what} has unsupported dtype {dtype!r} "
                             f"(supported: {', '.join(tir.DTYPES)})", node)
        return dtype

    # -- scope ---------------------------------------------------------------
    def bind_var(self, v: tir.Var, op: str) -> tuple[Any, Any]:
        """Bind ``v`` to operand ``op``; returns what :meth:`unbind_var` restores."""
        prev = (self.vars.get(id(v)), self.var_objs.get(id(v)))
        self.vars[id(v)] = (op, v.dtype)
        self.var_objs[id(v)] = v
        return prev

    def unbind_var(self, v: tir.Var, prev: tuple[Any, Any]) -> None:
        if prev[0] is None:
            self.vars.pop(id(v), None)
            self.var_objs.pop(id(v), None)
        else:
            self.vars[id(v)], self.var_objs[id(v)] = prev

    def lookup_buffer(self, buf: Any, node: Any) -> BufferInfo:
        """The pointer and dimensions of ``buf``, which must be in scope."""
        info = self.bufs.get(id(buf))
        if info is None:
            name = getattr(buf, "name", "?")
            raise self.error(f"buffer '{name}' is used but is neither a parameter nor allocated "
                             "in scope", node)
        return info

    # -- exits ---------------------------------------------------------------
    def get_oom_label(self) -> str:
        """The label of the out-of-memory exit (emitted by :meth:`finish_function`)."""
        if self.oom_label is None:
            self.oom_label = "oom"
        return self.oom_label

    def error_return(self, rc: str) -> None:
        """End the function with error code ``rc``, freeing the heap buffers
        that are live here (innermost first); a zero divisor met before (and
        not raised yet) adds RC_DIVISION_BY_ZERO, the first cause."""
        fn = self.fn
        for ptr, size in reversed(self.heap):
            fn.emit(f"call void @phasec_rt_free(ptr {ptr}, i64 {size})")
        if self.divzero_flag is not None and rc != str(RC_DIVISION_BY_ZERO):
            v, w, bit, code = fn.tmp("dz"), fn.tmp("dz"), fn.tmp("dz"), fn.tmp("rc")
            fn.emit(f"{v} = load i8, ptr {self.divzero_flag}, align 1")
            fn.emit(f"{w} = zext i8 {v} to i32")
            fn.emit(f"{bit} = mul i32 {w}, {RC_DIVISION_BY_ZERO}")
            fn.emit(f"{code} = or i32 {rc}, {bit}")
            rc = code
        fn.emit(f"ret i32 {rc}")

    def note_zero_divisor(self, is_zero: str) -> None:
        """Record the i1 ``is_zero`` (a tested divisor is 0) in the function's
        flag. The error is raised at the next loop exit, ``while`` test, error
        exit or return (:meth:`raise_zero_divisor`), not here: a loop that
        divides keeps no early exit, so it still vectorizes (the flag becomes
        an or-reduction). Until then the division computes with divisor 1."""
        fn = self.fn
        flag = self.divzero_flag
        if flag is None:
            flag = self.divzero_flag = fn.tmp("divzero.flag")
            fn.allocas.append(f"  {flag} = alloca i8, align 1")
            fn.allocas.append(f"  store i8 0, ptr {flag}, align 1")
        z, old, new = fn.tmp("dz"), fn.tmp("dz"), fn.tmp("dz")
        fn.emit(f"{z} = zext i1 {is_zero} to i8")
        fn.emit(f"{old} = load i8, ptr {flag}, align 1")
        fn.emit(f"{new} = or i8 {old}, {z}")
        fn.emit(f"store i8 {new}, ptr {flag}, align 1")

    def raise_zero_divisor(self) -> None:
        """Return RC_DIVISION_BY_ZERO here if a tested divisor was 0 (no code
        when no division of this function tests its divisor)."""
        if self.divzero_flag is None:
            return
        fn = self.fn
        v, met = fn.tmp("dz"), fn.tmp("dz")
        fn.emit(f"{v} = load i8, ptr {self.divzero_flag}, align 1")
        fn.emit(f"{met} = icmp ne i8 {v}, 0")
        bad, ok = fn.label("divzero"), fn.label("divok")
        fn.emit(f"br i1 {met}, label %{bad}, label %{ok}, !prof {self.mod.unlikely_md()}")
        fn.start(bad)
        self.error_return(str(RC_DIVISION_BY_ZERO))
        fn.start(ok)

    def finish_function(self) -> None:
        """Close the function (its out-of-memory exit, if used) and add it to the module."""
        fn = self.fn
        if self.oom_label is not None:
            fn.start(self.oom_label)
            fn.emit(f"ret i32 {RC_OUT_OF_MEMORY}")
        self.mod.functions.append(fn.text())
