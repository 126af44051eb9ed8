"""Compiled kernels callable on numpy arrays, and the per-module cache.

``compile_prim_funcs({"add": f, ...})`` generates one LLVM module for all
kernels, JIT-compiles it and returns a :class:`CompiledLibrary`;
``lib["add"](a, b, out)`` checks the arguments against the buffer
declarations and calls the native entry through ctypes (which releases the
GIL). Arrays are passed as ``PyObject*``: the layout of numpy's array object
is probed once at import (:data:`array_layout`), and the native entry reads
each array's data pointer, dimensions, dtype and flags itself and checks
them (type, dtype, rank, shape, contiguity, alignment, writeability) before
running anything; only when it refuses an argument does Python look at the
arguments, to run valid ones it does not take (subclasses, equal dtypes) as
views or to say exactly what is wrong. That keeps a call near the cost of
the ctypes call itself (~0.5 us). Without the probed layout the checks run
in generated Python code (and without even the data offset, the data
pointers are passed, at about a microsecond per array for
``ndarray.ctypes.data``).
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, Callable

import llvmlite.binding as llvm
import numpy as np

from phasec.errors import (
    BufferAccessError, DivisionByZeroError, IndexOutOfRangeError, VMError, counted,
)
from phasec.ir import tir
from phasec.ir.structural import exact_fingerprint, structural_equal, structural_hash
from phasec.runtime.binary_ops import SCALAR_BINARY
from phasec.arith.inbounds import DIM_LIMIT
from phasec.target.tuning import host_tuning
from phasec.backend.llvm.fpenv import flush_by_default
from phasec.backend.llvm.abi import (
    OOB_EXTENT, OOB_SITE, OOB_VALUE, RC_BAD_ARGUMENTS, RC_BUFFER_OUT_OF_BOUNDS, RC_CANCELLED,
    RC_DIVISION_BY_ZERO, RC_INDEX_OUT_OF_RANGE, KernelABI, decode_buffer_site,
)
from phasec.backend.llvm.arrayprobe import (
    NUMPY_DTYPE as _NUMPY_DTYPE, probe_array_data_offset, probe_array_layout,
)
from phasec.backend.llvm.codegen import ModuleCodegen
from phasec.backend.llvm.options import CodegenOptions
from phasec.backend import interrupt
from phasec.backend.llvm.errors import CodegenError, refuse_host_calls
from phasec.backend.llvm import diskcache
from phasec.backend.llvm.jit import (
    NativeModule, bind_array_symbols, compile_jobs, host_target, host_target_info, jit_compile,
    jit_compile_modules, jit_load_cached,
)
from phasec.backend.llvm.parallel import STREAM_MODULE_IR_CHARS, split_kernels
from phasec.backend.llvm.work import library_pipeline

__all__ = ["compile_prim_funcs", "plan_library", "PlannedLibrary", "CompiledLibrary", "Kernel",
           "clear_cache", "cache_info", "array_data_offset", "array_layout"]

array_data_offset = probe_array_data_offset()
array_layout = probe_array_layout(array_data_offset)
if array_layout is not None:
    bind_array_symbols(array_layout)


def _shape_str(shape: tuple[Any, ...]) -> str:
    return "(" + ", ".join(str(d) if isinstance(d, int) else _expr_str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _expr_str(e: Any) -> str:
    if isinstance(e, tir.Var):
        return e.name
    if isinstance(e, tir.IntImm):
        return str(e.value)
    if isinstance(e, tir.BinaryOp):
        return f"({_expr_str(e.lhs)} {e.op} {_expr_str(e.rhs)})"
    return type(e).__name__


#: the operators a composite symbolic dimension may use (the Python evaluator's)
_SHAPE_OPS = frozenset({"+", "-", "*", "//", "%", "/", "min", "max", "<", "<=", ">", ">=", "==",
                        "!="})


def _shape_evaluator(e: tir.PrimExpr) -> Callable[[dict[int, int]], int]:
    """A Python evaluator for a composite symbolic dimension (rarely used)."""
    if isinstance(e, tir.IntImm):
        v = int(e.value)
        return lambda env: v
    if isinstance(e, tir.Var):
        k = id(e)
        return lambda env: env[k]
    if isinstance(e, tir.Cast):
        return _shape_evaluator(e.value)
    if isinstance(e, tir.BinaryOp) and e.op in _SHAPE_OPS:
        a, b = _shape_evaluator(e.lhs), _shape_evaluator(e.rhs)
        f = SCALAR_BINARY[e.op]

        return lambda env: f(a(env), b(env))  # (ZeroDivisionError: see _check_exprs)
    if isinstance(e, tir.Select):
        # strided_slice with a symbolic begin: a negative index counts from the end
        c, t, f2 = (_shape_evaluator(x) for x in (e.condition, e.true_value, e.false_value))
        return lambda env: t(env) if c(env) else f2(env)
    raise CodegenError(f"unsupported expression {type(e).__name__} in a buffer shape")


class _BadArguments(Exception):
    """Internal: a fast-path check failed; the slow path explains why."""


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``."""
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x0080
_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


def _builtin_function(address: int, name: str, owner: Any) -> Callable[..., int]:
    """A builtin function object running the fast entry at ``address``
    (see ``KernelABI.fast_symbol``). Its ``self`` holds the method
    definition and ``owner`` (the compiled code), so both live as long as
    the function does, whoever keeps it."""
    definition = _MethodDef(name.encode(), address, _METH_FASTCALL, None)
    return _new_builtin(ctypes.addressof(definition), (definition, owner), None)


class Kernel:
    """One compiled kernel: ``kernel(*args)`` with numpy arrays for buffer
    parameters (C-contiguous, exact dtype and shape) and ints/floats for
    scalar parameters, in the PrimFunc's parameter order. Outputs are written
    in place (destination-passing style); returns None."""

    __slots__ = ("name", "abi", "_cfunc", "_fast", "_owner", "_exprs", "native_call")

    def __init__(self, abi: KernelABI, native: NativeModule) -> None:
        self.name = abi.name
        self.abi = abi
        self._owner = native  # keeps the JIT engine alive
        use_obj = abi.obj_symbol is not None
        argtypes: list[Any] = []
        for p in abi.params:
            if p.kind == "buffer":
                argtypes.append(ctypes.py_object if use_obj else ctypes.c_void_p)
            else:
                argtypes.append(ctypes.c_double if p.dtype.startswith("float") else ctypes.c_int64)
        if not abi.checked:
            argtypes += [ctypes.c_int64] * len(abi.dim_vars)
        proto = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)
        self._cfunc = proto(native.addresses[abi.obj_symbol if use_obj else abi.ptr_symbol])
        fast_address = native.addresses.get(abi.fast_symbol) if abi.fast_symbol else None
        #: ``native_call(*arrays)`` -> the kernel's return code, 0 on success,
        #: anything else for :meth:`failed` (None: no such entry); it does
        #: not arm Ctrl-C (see :mod:`phasec.backend.interrupt`): for callers
        #: that arm once around many kernel calls, as the VM does
        self.native_call: Callable[..., int] | None = (
            _builtin_function(fast_address, abi.fast_symbol, native) if fast_address else None)
        # composite dimensions (n * 2): (parameter, axis, evaluator)
        self._exprs: tuple[Any, ...] = tuple(
            (i, d, _shape_evaluator(dim)) for i, p in enumerate(abi.params) if p.kind == "buffer"
            for d, dim in enumerate(p.shape) if not isinstance(dim, (int, tir.Var)))
        self._fast = self._build_fast_path(use_obj)

    @property
    def written_arguments(self) -> tuple[int, ...]:
        """The positions of the buffers the kernel writes (its outputs); it
        reads the others and has no other effect."""
        return tuple(i for i, p in enumerate(self.abi.params) if p.kind == "buffer" and p.written)

    def failed(self, rc: int, args: tuple[Any, ...]) -> None:
        """What calling the kernel on ``args`` does after :attr:`native_call`
        returned ``rc`` (not 0): arguments the native checks refused run or
        are explained by the slow path; any other code raises its error."""
        try:
            self._fail(rc)
        except _BadArguments:
            return self._slow_call(args)

    def __call__(self, *args: Any) -> None:
        try:
            return self._fast(*args)
        except _BadArguments:
            return self._slow_call(args)
        except ctypes.ArgumentError as exc:
            raise VMError(f"kernel '{self.name}': bad scalar argument: {exc}") from None
        except TypeError:
            if len(args) != len(self.abi.params):
                raise self._diagnose(args) from None
            raise

    def _build_fast_path(self, use_obj: bool) -> Callable[..., None]:
        """Generate the argument checker and call for this kernel's signature.

        Only generated identifiers and integers enter the source; dtypes,
        shapes and callables are passed through the namespace. Any failed
        check goes to :meth:`_diagnose`, which builds the precise message.
        """
        abi = self.abi
        names = [f"a{i}" for i in range(len(abi.params))]
        cfunc = self.native_call or self._cfunc
        ns: dict[str, Any] = {"nd": np.ndarray, "cfunc": cfunc, "fail": self._fail,
                              "bad": self._bad, "scalar": self._scalar}
        lines: list[str] = []
        dim_of: dict[int, str] = {}  # Var id -> local holding its value
        call_args: list[str] = []
        # Scalars first: they may fix shape dimensions.
        for i, p in enumerate(abi.params):
            if p.kind == "scalar":
                kind = "float" if p.dtype.startswith("float") else "bool" if p.dtype == "bool" \
                    else "int"
                pyt = "float" if kind == "float" else "int"
                lines.append(f"if type(a{i}) is not {pyt}: a{i} = scalar(a{i}, {kind!r})")
                dim_of[id(p.var)] = f"a{i}"
        for i, p in enumerate(abi.params):
            if p.kind != "buffer" or abi.checked:  # (a checked entry checks arrays itself)
                continue
            ns[f"dt{i}"] = _NUMPY_DTYPE[p.dtype]
            lines.append(f"if not isinstance(a{i}, nd) or (a{i}.dtype is not dt{i} and "
                         f"a{i}.dtype != dt{i}): bad()")
            flags = [f"not f{i}.c_contiguous", f"not f{i}.aligned"] + (
                [f"not f{i}.writeable"] if p.written else [])
            lines.append(f"f{i} = a{i}.flags")
            lines.append(f"if {' or '.join(flags)}: bad()")
            if all(isinstance(d, int) for d in p.shape):
                ns[f"sh{i}"] = tuple(p.shape)
                lines.append(f"if a{i}.shape != sh{i}: bad()")
                continue
            lines.append(f"s{i} = a{i}.shape")
            lines.append(f"if len(s{i}) != {len(p.shape)}: bad()")
            for d, dim in enumerate(p.shape):
                if isinstance(dim, int):
                    lines.append(f"if s{i}[{d}] != {dim}: bad()")
                elif isinstance(dim, tir.Var):
                    local = dim_of.get(id(dim))
                    if local is None:
                        local = f"d{len(dim_of)}"
                        dim_of[id(dim)] = local
                        lines.append(f"{local} = s{i}[{d}]")
                        lines.append(f"if {local} >= {DIM_LIMIT}: bad()")
                    else:
                        lines.append(f"if s{i}[{d}] != {local}: bad()")
        if self._exprs and not abi.checked:
            env = ", ".join(f"{id(v)}: {dim_of[id(v)]}" for v in abi.dim_vars)
            env += "".join(f", {id(p.var)}: a{i}" for i, p in enumerate(abi.params)
                           if p.kind == "scalar")
            ns["check_exprs"] = self._check_exprs
            lines.append(f"check_exprs(({', '.join(names)},), {{{env.lstrip(', ')}}})")
        for i, p in enumerate(abi.params):
            if p.kind == "buffer" and not use_obj:
                call_args.append(f"a{i}.ctypes.data")
            else:
                call_args.append(f"a{i}")
        if not abi.checked:
            call_args += [dim_of[id(v)] for v in abi.dim_vars]
        # Armed (see ..interrupt): Ctrl-C stops the native call within a second.
        # The VM arms once per call, so its kernels take the first branch.
        ns["interrupt"], ns["armed"] = interrupt, interrupt.armed
        lines.append("if interrupt._is_armed:")
        lines.append(f"    rc = cfunc({', '.join(call_args)})")
        lines.append("else:")
        lines.append("    with armed():")
        lines.append(f"        rc = cfunc({', '.join(call_args)})")
        lines.append("if rc: fail(rc)")
        src = f"def fast({', '.join(names)}):\n" + "".join(f"    {ln}\n" for ln in lines)
        exec(compile(src, "<phasec kernel wrapper>", "exec"), ns)  # noqa: S102 - generated
        return ns["fast"]

    @staticmethod
    def _bad() -> None:
        raise _BadArguments

    def _fail(self, rc: int) -> None:
        if rc == RC_BAD_ARGUMENTS:
            raise _BadArguments
        raise self._failure(rc)

    def _slow_call(self, args: tuple[Any, ...]) -> None:
        """Arguments the fast path refused: valid ones the native checks do
        not take (an ndarray subclass, a dtype object equal to but not the
        canonical one) run as plain ndarray views of the same memory;
        anything else is an error saying what is wrong."""
        if self.abi.checked and len(args) == len(self.abi.params):
            views = list(args)
            for pos, p in enumerate(self.abi.params):
                a = args[pos]
                if p.kind != "buffer" or not isinstance(a, np.ndarray):
                    continue
                if type(a) is not np.ndarray:
                    a = a.view(np.ndarray)
                want = _NUMPY_DTYPE[p.dtype]
                if a.dtype is not want and a.dtype == want:
                    a = a.view(want)
                views[pos] = a
            if any(v is not a for v, a in zip(views, args)):
                try:
                    return self._fast(*views)
                except _BadArguments:
                    pass
        raise self._diagnose(args) from None

    @staticmethod
    def _scalar(value: Any, kind: str) -> Any:
        """Validate and convert a scalar argument that is not exactly int/float
        (numpy scalars; bools only for bool parameters)."""
        if isinstance(value, (bool, np.bool_)):
            if kind != "bool":
                raise _BadArguments
            return int(value)
        if isinstance(value, (int, np.integer)):
            return float(value) if kind == "float" else int(value)
        if kind == "float" and isinstance(value, (float, np.floating)):
            return float(value)
        raise _BadArguments

    def _check_exprs(self, args: tuple[Any, ...], env: dict[int, int]) -> None:
        for pos, d, ev in self._exprs:
            p = self.abi.params[pos]
            try:
                expected = ev(env)
            except ZeroDivisionError:  # as the kernel computes it: an error
                raise DivisionByZeroError(f"kernel '{self.name}' (dimension {d} of parameter "
                                          f"'{p.name}', {_expr_str(p.shape[d])})") from None
            if args[pos].shape[d] != expected:
                raise VMError(f"kernel '{self.name}': parameter '{p.name}' dimension {d} must be "
                              f"{_expr_str(p.shape[d])} = {expected}, got array of shape "
                              f"{args[pos].shape}")

    def _failure(self, rc: int) -> VMError:
        # Parallel chunks OR their codes together: test the bits.
        if rc & RC_CANCELLED:  # Ctrl-C or SIGTERM: raise what the signal raises
            interrupt.raise_interrupt(self.name)
        if rc & RC_DIVISION_BY_ZERO:  # (first: a later error may come of its quotient)
            return DivisionByZeroError(f"kernel '{self.name}'")
        if rc & RC_BUFFER_OUT_OF_BOUNDS:
            value = ctypes.c_int64.from_address(self._owner.globals[OOB_VALUE]).value
            extent = ctypes.c_int64.from_address(self._owner.globals[OOB_EXTENT]).value
            site = ctypes.c_int64.from_address(self._owner.globals[OOB_SITE]).value
            ordinal, dim, write = decode_buffer_site(site)
            names = self.abi.buffers
            buffer = names[ordinal] if 0 <= ordinal < len(names) else "?"
            return BufferAccessError(self.name, buffer, dim, value, extent, write)
        if rc & RC_INDEX_OUT_OF_RANGE:
            value = ctypes.c_int64.from_address(self._owner.globals[OOB_VALUE]).value
            extent = ctypes.c_int64.from_address(self._owner.globals[OOB_EXTENT]).value
            return IndexOutOfRangeError(f"kernel {self.name!r}", value, extent)
        if rc & 1:
            return VMError(f"kernel '{self.name}' failed: out of memory allocating a temporary "
                           "buffer")
        return VMError(f"kernel '{self.name}' failed with error code {rc}")

    # -- the slow path: say exactly what is wrong ------------------------------
    def _diagnose(self, args: tuple[Any, ...]) -> VMError:
        abi = self.abi
        if len(args) != len(abi.params):
            sig = ", ".join(p.name for p in abi.params)
            return VMError(f"kernel '{self.name}' takes {counted(len(abi.params), 'argument')} ({sig}), "
                           f"got {len(args)}")
        values: dict[int, tuple[int, str]] = {}  # var id -> (value, where it came from)
        for pos, p in enumerate(abi.params):
            if p.kind == "scalar":
                v = args[pos]
                ok = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                if p.dtype == "bool":
                    ok = ok or isinstance(v, (bool, np.bool_))
                if p.dtype.startswith("float"):
                    ok = ok or isinstance(v, (float, np.floating))
                if not ok:
                    return VMError(f"kernel '{self.name}': scalar parameter '{p.name}' expects "
                                   f"a Python {'float' if p.dtype.startswith('float') else 'int'} "
                                   f"({p.dtype}), got {type(v).__name__}")
                values[id(p.var)] = (v, f"scalar parameter '{p.name}'")
        for pos, p in enumerate(abi.params):
            if p.kind != "buffer":
                continue
            a = args[pos]
            want = f"{p.dtype}{_shape_str(p.shape)}"
            prefix = f"kernel '{self.name}': parameter '{p.name}' expects a {want} array"
            if not isinstance(a, np.ndarray):
                return VMError(f"{prefix}, got {type(a).__name__}")
            if a.dtype != _NUMPY_DTYPE[p.dtype]:
                return VMError(f"{prefix}, got dtype {a.dtype}")
            if a.ndim != len(p.shape):
                return VMError(f"{prefix}, got {a.ndim}-d array of shape {a.shape}")
            if not a.flags.c_contiguous:
                return VMError(f"{prefix}, got a non C-contiguous array (use np.ascontiguousarray)")
            if not a.flags.aligned:
                return VMError(f"{prefix}, got an array whose data is not aligned to its dtype")
            if p.written and not a.flags.writeable:
                return VMError(f"{prefix}, got a read-only array but the kernel writes to it")
            for d, dim in enumerate(p.shape):
                n = a.shape[d]
                if isinstance(dim, int):
                    if n != dim:
                        return VMError(f"{prefix}, got shape {a.shape} (dimension {d} is {n}, "
                                       f"expected {dim})")
                elif isinstance(dim, tir.Var):
                    if n >= DIM_LIMIT:
                        return VMError(f"{prefix}, got shape {a.shape}: dimension {d} is past "
                                       f"phasec's limit of 2**40 - 1 for a symbolic dimension")
                    prev = values.get(id(dim))
                    if prev is None:
                        values[id(dim)] = (n, f"dimension {d} of '{p.name}'")
                    elif prev[0] != n:
                        return VMError(f"{prefix}, got shape {a.shape}: dimension {d} binds "
                                       f"'{dim.name}' = {n}, but {prev[1]} gave "
                                       f"'{dim.name}' = {prev[0]}")
        try:  # every variable is bound now: the composite dimensions
            self._check_exprs(args, {k: v for k, (v, _) in values.items()})
        except VMError as exc:
            return exc
        return VMError(f"kernel '{self.name}': invalid arguments")

    def __repr__(self) -> str:
        sig = ", ".join(f"{p.name}: {p.dtype}{_shape_str(p.shape) if p.kind == 'buffer' else ''}"
                        for p in self.abi.params)
        return f"<phasec kernel {self.name}({sig})>"


class CompiledLibrary(Mapping[str, Kernel]):
    """The compiled kernels of one module, by name (a read-only mapping).

    A large library is compiled as several LLVM modules at once (see
    :mod:`.parallel`): each kernel runs from the native module holding its
    symbol."""

    def __init__(self, natives: "list[NativeModule]", abis: Mapping[str, KernelABI],
                 llvm_ir: "str | Callable[[], str]") -> None:
        self._natives = natives
        self._native = natives[0]
        self._kernels = {name: Kernel(abi, _holder(natives, abi)) for name, abi in abis.items()}
        # a callable when the code came from the disk cache without any IR:
        # the IR is generated only if someone asks for it
        self._llvm_ir = llvm_ir

    @property
    def llvm_ir(self) -> str:
        """The unoptimised LLVM IR as generated."""
        if callable(self._llvm_ir):
            self._llvm_ir = self._llvm_ir()
        return self._llvm_ir

    @property
    def optimized_ir(self) -> str:
        """The LLVM IR after the O3 pipeline (look for ``<8 x float>`` etc.);
        a library compiled as several modules shows them one after another."""
        return "\n".join(n.optimized_ir for n in self._natives)

    @property
    def compile_seconds(self) -> float:
        return self._native.compile_seconds

    def assembly(self) -> str:
        """The host machine code of the optimized IR, as assembly text."""
        tm = host_target().create_target_machine()
        return "\n".join(tm.emit_assembly(llvm.parse_assembly(n.optimized_ir))
                         for n in self._natives)

    def __getitem__(self, name: str) -> Kernel:
        try:
            return self._kernels[name]
        except KeyError:
            raise UnknownKernelError(
                f"no kernel named {name!r} in this library (kernels: "
                f"{', '.join(sorted(self._kernels)) or 'none'})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __contains__(self, name: object) -> bool:
        return name in self._kernels

    def __repr__(self) -> str:
        return f"<CompiledLibrary {sorted(self._kernels)}>"


def _holder(natives: "list[NativeModule]", abi: KernelABI) -> NativeModule:
    """The native module that defines ``abi``'s entry."""
    symbol = abi.obj_symbol or abi.ptr_symbol
    for native in natives:
        if native.addresses.get(symbol):
            return native
    raise CodegenError("compiled, but its entry is in none of the library's modules", abi.name)


class UnknownKernelError(VMError, KeyError):
    """Asked a CompiledLibrary for a kernel it does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


# --------------------------------------------------------------------------
# Compilation and cache
# --------------------------------------------------------------------------

_CACHE_SIZE = 64
_cache: "OrderedDict[tuple[Any, ...], list[tuple[dict, list[NativeModule], dict, Any]]]" = \
    OrderedDict()
_cache_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}


def clear_cache() -> None:
    """Forget every cached compiled module."""
    with _cache_lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0


def cache_info() -> dict[str, int]:
    """Cache statistics: hits, misses and entries."""
    with _cache_lock:
        return {**_stats, "entries": sum(len(v) for v in _cache.values())}


def compile_prim_funcs(funcs: Mapping[str, tir.PrimFunc], *, fast_math: bool = False,
                       vector_math: bool = True, opt_level: int = 3,
                       use_cache: bool = True, check_bounds: bool | None = None,
                       flush_subnormals: bool | None = None,
                       planned: "PlannedLibrary | None" = None) -> CompiledLibrary:
    """Compile every PrimFunc of ``funcs`` into one native library.

    Keys are kernel names (``lib[name]``). Compiling structurally equal
    functions again (same names) reuses the cached native code.

    ``fast_math`` lets LLVM reassociate float arithmetic (off: results match
    numpy up to rounding; multiply-adds may still be fused into FMAs).
    ``vector_math`` uses phasec's vectorizable float32 exp/sigmoid/tanh/erf
    (within 4 ulps) instead of libm calls. ``opt_level`` 0-3 selects the
    LLVM pipeline (vectorization from 2); a small library (a few thousand
    element stores in all, every extent static) gets O2 without LLVM's own
    loop transformations (:func:`.work.library_pipeline`). ``check_bounds`` chooses the buffer
    accesses checked at run time: None (default) those not proven in bounds,
    True all (slower), False none (trusted kernels only); see
    :class:`CodegenOptions`. A failed check raises
    :class:`phasec.errors.BufferAccessError` naming the kernel, buffer,
    dimension, index and extent. ``flush_subnormals`` (default: the
    ``PHASEC_SUBNORMALS`` environment variable, else flush on x86-64) runs
    the kernels with float results that would be subnormal flushed to 0
    (:mod:`.fpenv`: they would otherwise cost a microcode assist each).

    ``planned``: :func:`plan_library` of these very ``funcs`` with these
    options, kept from an earlier process (a build entry, authenticated: it
    is trusted, not checked against ``funcs``). When its program key is still
    the one these options give and the disk cache holds that program's code,
    the code is mapped without walking the TIR (its fingerprint, ABIs and
    host-call check are the plan's); otherwise it is ignored.

    Raises :class:`phasec.backend.llvm.CodegenError` (a PhasecError) naming
    the kernel for undefined variables, unknown intrinsics, dtype mismatches
    and other malformed kernels.
    """
    if not isinstance(funcs, Mapping):
        raise CodegenError(f"compile_prim_funcs expects a mapping name -> PrimFunc, got "
                           f"{type(funcs).__name__}")
    funcs = dict(funcs)
    for name, f in funcs.items():
        if not isinstance(name, str):
            raise CodegenError(f"kernel names must be strings, got {name!r}")
        if not isinstance(f, tir.PrimFunc):
            raise CodegenError(f"expected a tir.PrimFunc, got {type(f).__name__}", name)
    if opt_level not in (0, 1, 2, 3):
        raise CodegenError(f"opt_level must be 0..3, got {opt_level!r}")
    options = _options(fast_math, vector_math, check_bounds, flush_subnormals)
    if planned is not None:
        lib = _load_planned(funcs, planned, options, opt_level, use_cache)
        if lib is not None:
            return lib
    for name, f in funcs.items():
        refuse_host_calls(name, f)
    # (the array ABI too: it decides the entries, and tests may switch it off)
    key = (structural_hash(funcs), options, opt_level, array_data_offset is not None,
           array_layout is not None)
    if use_cache:
        with _cache_lock:
            for cached_funcs, natives, abis, ir in _cache.get(key, ()):
                if structural_equal(cached_funcs, funcs):
                    _stats["hits"] += 1
                    _cache.move_to_end(key)
                    # ABIs come from *these* funcs so errors use their names.
                    return CompiledLibrary(natives, _abis_for(funcs, options), ir)

    natives, abis, ir = _compile(funcs, options, opt_level)
    if use_cache:
        _remember(key, (funcs, natives, abis, ir))
    return CompiledLibrary(natives, abis, ir)


def _remember(key: tuple, entry: tuple) -> None:
    """Keep a library just compiled or mapped in this process's cache (a
    miss), the least recently used keys dropped beyond its size."""
    with _cache_lock:
        _stats["misses"] += 1
        _cache.setdefault(key, []).append(entry)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _options(fast_math: bool, vector_math: bool, check_bounds: bool | None,
             flush_subnormals: bool | None) -> CodegenOptions:
    """The code generator's options of :func:`compile_prim_funcs`'s arguments."""
    target = host_target_info()  # (the parallel runtime may still compile: jit waits)
    # LLVM's tuning for some AVX-512 hosts prefers 256-bit vectors; the
    # schedules' register tiles are sized for the width of the target's tuning
    return CodegenOptions(fast_math=fast_math, vector_math=vector_math, cpu=target.cpu,
                          features=target.features,
                          check_bounds=None if check_bounds is None else bool(check_bounds),
                          prefer_vector_width=host_tuning().vector_bits,
                          flush_subnormals=flush_by_default() if flush_subnormals is None
                          else bool(flush_subnormals))


@dataclasses.dataclass(frozen=True)
class PlannedLibrary:
    """What :func:`compile_prim_funcs` derives from a library's TIR before it
    maps cached code (three walks of every kernel: SqueezeNet's take ~90 ms
    of a ~200 ms warm build), computed once by :func:`plan_library` and kept
    with the TIR: its exact fingerprint, the disk cache's program key and
    each kernel's ABI (whose variables are the kernels' own)."""

    fingerprint: str
    program_key: str
    abis: Mapping[str, KernelABI]


def plan_library(funcs: Mapping[str, tir.PrimFunc], *, fast_math: bool = False,
                 vector_math: bool = True, opt_level: int = 3,
                 check_bounds: bool | None = None,
                 flush_subnormals: bool | None = None) -> PlannedLibrary | None:
    """The :class:`PlannedLibrary` of compiling ``funcs`` with these options
    (as :func:`compile_prim_funcs` takes them), or None when the disk cache
    cannot key it (off, a program without an exact fingerprint, no kernels)."""
    funcs = dict(funcs)
    options = _options(fast_math, vector_math, check_bounds, flush_subnormals)
    key = _program_key(funcs, options, opt_level) if funcs else None
    if key is None:
        return None
    fingerprint = exact_fingerprint(funcs)
    assert fingerprint is not None  # (the key has it)
    return PlannedLibrary(fingerprint, key, _abis_for(funcs, options))


def _load_planned(funcs: dict[str, tir.PrimFunc], planned: PlannedLibrary,
                  options: CodegenOptions, opt_level: int, use_cache: bool) -> CompiledLibrary | None:
    """``funcs`` compiled as ``planned`` says, from this process's cache
    (keyed by the exact fingerprint: equal programs, names included) or the
    disk cache; None when the plan no longer fits or the code is not cached."""
    if not diskcache.enabled() or sorted(planned.abis) != sorted(funcs):
        return None
    key = ("exact", planned.fingerprint, options, opt_level, array_data_offset is not None,
           array_layout is not None)
    with _cache_lock:
        kept = _cache.get(key) if use_cache else None
        if kept:  # (an exact fingerprint: any entry under it is this program)
            _stats["hits"] += 1
            _cache.move_to_end(key)
            _funcs, natives, abis, ir = kept[0]
            return CompiledLibrary(natives, abis, ir)
    target = host_target_info()
    if diskcache.program_key(planned.fingerprint, _settings(options), opt_level,
                             (target.triple, target.cpu, target.features)) != planned.program_key:
        return None
    abis = {name: planned.abis[name] for name in sorted(funcs)}
    natives = jit_load_cached(planned.program_key, _entries(abis), _GLOBALS)
    if natives is None:
        return None
    ir: Callable[[], str] = lambda: _generate(funcs, options)[1].finish()  # noqa: E731
    if use_cache:
        _remember(key, (funcs, natives, abis, ir))
    return CompiledLibrary(natives, abis, ir)


def _abis_for(funcs: Mapping[str, tir.PrimFunc], options: CodegenOptions) -> dict[str, KernelABI]:
    gen = ModuleCodegen(options, array_data_offset, array_layout)
    return {name: gen.plan_kernel(name, funcs[name]) for name in sorted(funcs)}


_GLOBALS = [OOB_VALUE, OOB_EXTENT, OOB_SITE]


def _compile(funcs: Mapping[str, tir.PrimFunc], options: CodegenOptions,
             opt_level: int) -> tuple[list[NativeModule], dict[str, KernelABI],
                                      "str | Callable[[], str]"]:
    key = _program_key(funcs, options, opt_level)
    if key is not None:
        # A warm build: the disk cache has this program's machine code, found
        # without generating its IR (code generation is most of a warm build)
        abis = _abis_for(funcs, options)
        natives = jit_load_cached(key, [s for a in abis.values() for s in a.entry_symbols],
                                  _GLOBALS)
        if natives is not None:
            return natives, abis, lambda: _generate(funcs, options)[1].finish()
    gen = ModuleCodegen(options, array_data_offset, array_layout)
    abis: dict[str, KernelABI] = {}
    modules = _emitted_modules(funcs, gen, abis, compile_jobs())
    first = next(modules)
    if len(abis) < len(funcs):
        # a large library on several cores, its first module compiled by a
        # worker while this thread emits the rest (see _emitted_modules)
        natives = jit_compile_modules(itertools.chain([first], modules),
                                      lambda: _entries(abis), _GLOBALS, opt_level,
                                      cache_key=key)
        return natives, abis, gen.finish
    texts = [first, *modules]
    if len(texts) > 1:
        natives = jit_compile_modules(texts, _entries(abis), _GLOBALS, opt_level, cache_key=key)
        return natives, abis, gen.finish
    ir = gen.finish()
    level, off = library_pipeline((f.body for f in funcs.values()), opt_level)
    return [jit_compile(ir, _entries(abis), _GLOBALS, level, cache_key=key, off=off)], abis, ir


def _entries(abis: Mapping[str, KernelABI]) -> list[str]:
    return [s for a in abis.values() for s in a.entry_symbols]


def _emitted_modules(funcs: Mapping[str, tir.PrimFunc], gen: ModuleCodegen,
                     abis: dict[str, KernelABI], jobs: int) -> Iterator[str]:
    """The LLVM modules of ``funcs``, emitting the kernels (in name order,
    their ABIs into ``abis``) as they are asked for.

    With several processes, the kernels of the first half (by count) go out
    in modules of at least :data:`STREAM_MODULE_IR_CHARS` as soon as they
    are emitted, so that a worker compiles them while this thread emits the
    rest (SqueezeNet: 0.27 s of emission, on one core before); the kernels
    left are split as :func:`split_kernels` splits (largest first, smaller
    and smaller, so that the processes end together). The same kernels
    always give the same modules: the result does not depend on who
    compiled what."""
    names = sorted(funcs)
    half = len(names) // 2
    group: list[str] = []
    load = 0
    for k, name in enumerate(names):
        abis[name] = gen.add_kernel(name, funcs[name])
        if k >= half or jobs <= 1:
            continue
        group.append(name)
        load += gen.kernel_size(name)
        if load >= STREAM_MODULE_IR_CHARS:
            yield gen.module_of(group)
            group, load = [], 0
    sizes = gen.kernel_sizes()
    streamed = set(names[:half]) - set(group) if jobs > 1 else set()
    rest = {n: sizes[n] for n in names if n not in streamed}
    groups = split_kernels(rest, jobs)
    if len(groups) <= 1 and not streamed:
        yield gen.finish()
        return
    for g in groups:
        yield gen.module_of(g)


def _generate(funcs: Mapping[str, tir.PrimFunc],
              options: CodegenOptions) -> tuple[dict[str, KernelABI], ModuleCodegen]:
    gen = ModuleCodegen(options, array_data_offset, array_layout)
    abis = {name: gen.add_kernel(name, funcs[name]) for name in sorted(funcs)}
    return abis, gen


def _program_key(funcs: Mapping[str, tir.PrimFunc], options: CodegenOptions,
                 opt_level: int) -> str | None:
    """The disk-cache key of ``funcs`` compiled with ``options`` (see
    :func:`diskcache.program_key`), or None (cache off, or a program the exact
    fingerprint cannot serialize: its entry is then keyed by its IR)."""
    if not diskcache.enabled():
        return None
    fingerprint = exact_fingerprint(dict(funcs))
    if fingerprint is None:
        return None
    target = host_target_info()
    return diskcache.program_key(fingerprint, _settings(options), opt_level,
                                 (target.triple, target.cpu, target.features))


def _settings(options: CodegenOptions) -> str:
    """The code generation settings a program key covers (this process's
    addresses left out)."""
    layout = None if array_layout is None else dataclasses.replace(
        array_layout, ndarray_type=0, descrs=tuple((d, 0) for d, _ in array_layout.descrs))
    return repr((options, array_data_offset, layout))

