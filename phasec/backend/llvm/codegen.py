"""Lower TIR ``PrimFunc``s to LLVM IR (textual assembly).

One :class:`ModuleCodegen` turns every kernel of a module into one LLVM
module. Each kernel ``K`` becomes

* ``@K`` (internal): the kernel proper, one ``noalias`` pointer per buffer
  parameter, then the scalar parameters, then the symbolic dimensions that
  are bound from buffer shapes; returns 0 or an error code;
* ``@K.entry_obj`` (when the numpy array layout is known): the exported
  C-ABI wrapper taking the ``PyArrayObject*`` of each array (it reads the
  data pointer itself, so the Python side does not pay for
  ``ndarray.ctypes`` on every call) and 64-bit scalars;
* ``@K.entry_ptr`` (otherwise): the same taking raw data pointers.

Design choices, all for code LLVM can vectorize:

* row-major element addressing in int64 with ``nsw`` (in-bounds indexing
  never overflows), loop induction variables as phi nodes, loop metadata for
  ``vectorized``/``unroll`` loops;
* ``parallel`` loops are outlined into a body function over an iteration
  chunk ``[begin, end)`` (keeping ``noalias`` on its buffer parameters) and a
  trampoline that unpacks a context struct; ``phasec_rt_parallel_for`` (the
  process-wide thread pool, see irlib) runs the chunks on all cores; nested
  parallel loops run serially, small loops too;
* expressions are emitted iteratively (no Python recursion on deep trees);
  ``Select`` and ``and``/``or`` branch lazily when an operand reads memory,
  so padding guards such as ``Select(i > 0, A[i - 1], 0)`` never read out of
  bounds, and compute both sides with ``select`` otherwise;
* integer division follows TVM: ``/`` truncates, ``//`` and ``%`` floor; a
  zero divisor yields 0 and ``INT_MIN / -1`` wraps instead of trapping.

The per-kernel code generator is assembled from mixins, one module per
part: ``entry`` (the exported entry and its argument checks), ``statements``
(statements and buffer memory), ``loops``, ``intrinsics``, ``expressions``
(types, conversions, expressions and arithmetic); this module keeps the
options, the ABI, the module-level driver and the per-kernel state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from phasec.ir import tir
from phasec.backend.llvm._base import (
    _LLVM_TYPE, OOB_EXTENT, OOB_SITE, OOB_VALUE, _BufInfo, _FunctionText, _is_float, _is_intlike,
    _sanitize, _walk, buffers_in_order, llvm_type,
)
from phasec.backend.llvm.errors import CodegenError, refuse_host_calls
from phasec.backend.llvm.irlib import KERNEL_LIB_DECLS, KERNEL_LIB_IR
from phasec.backend.llvm.entry import EntryCodegen
from phasec.backend.llvm.expressions import ExpressionCodegen
from phasec.backend.llvm.intrinsics import IntrinsicCodegen
from phasec.backend.llvm.loops import LoopCodegen
from phasec.backend.llvm.mathlib import MATH_DEPENDS, math_function
from phasec.backend.llvm.statements import StatementCodegen

__all__ = ["ModuleCodegen", "KernelABI", "ParamABI", "CodegenOptions", "llvm_type"]

# --------------------------------------------------------------------------
# Options and the ABI description handed to the runtime
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class CodegenOptions:
    """Code generation switches.

    ``fast_math`` allows LLVM to reassociate float arithmetic (results may
    then differ from numpy by more than rounding); ``contract`` allows fusing
    a multiply and an add into one FMA, which only removes a rounding step.
    ``check_bounds`` makes every buffer load and store compare each index with
    its dimension first (like TVM's ``tir.instrument_bound_checkers``): a
    kernel with a wrong index ends with an error naming the buffer, the index
    and the extent instead of touching memory it does not own. It keeps
    inner loops from vectorizing (bench/bench_kernels.py measures the cost).
    """

    fast_math: bool = False
    contract: bool = True
    vector_math: bool = True
    #: check every buffer access against its extent (RC_BUFFER_OUT_OF_BOUNDS)
    check_bounds: bool = False
    cpu: str = ""
    features: str = ""
    prefer_vector_width: int | None = None

    @property
    def float_flags(self) -> str:
        if self.fast_math:
            return "fast "
        return "contract " if self.contract else ""


@dataclass(frozen=True)
class ArrayLayout:
    """Where a numpy array object keeps its fields in this process (byte
    offsets into the object), and the addresses of the ndarray type and of
    the canonical dtype objects; probed by the runtime. With it, kernel
    entries check their array arguments natively instead of in Python."""

    type_offset: int
    data_offset: int
    nd_offset: int
    dims_offset: int
    descr_offset: int
    flags_offset: int
    ndarray_type: int
    descrs: tuple[tuple[str, int], ...]  # (phasec dtype, address of its np.dtype)

    def descr(self, dtype: str) -> int:
        return dict(self.descrs)[dtype]


#: Symbols naming numpy's ndarray type and dtype objects in compiled code
#: (bound to this process's addresses by :func:`bind_array_symbols`).
NDARRAY_SYMBOL = "phasec_np_ndarray"


def descr_symbol(dtype: str) -> str:
    """The symbol naming numpy's dtype object for ``dtype``."""
    return f"phasec_np_descr_{dtype}"


def bind_array_symbols(layout: ArrayLayout) -> None:
    """Bind the ndarray type and dtype symbols to this process's objects."""
    import llvmlite.binding as llvm

    llvm.add_symbol(NDARRAY_SYMBOL, layout.ndarray_type)
    for dtype, address in layout.descrs:
        llvm.add_symbol(descr_symbol(dtype), address)


@dataclass(frozen=True)
class ParamABI:
    """One kernel parameter as the runtime sees it.

    ``shape`` is given for buffers: per dimension an ``int`` (static), a
    ``tir.Var`` (symbolic, bound from the array or a scalar parameter) or a
    ``tir.PrimExpr`` (checked after all variables are bound).
    """

    name: str
    kind: str  # "buffer" or "scalar"
    dtype: str
    shape: tuple[Union[int, tir.PrimExpr], ...] = ()
    var: tir.Var | None = None  # the scalar Var for kind == "scalar"
    written: bool = False


@dataclass(frozen=True)
class KernelABI:
    """How to call one compiled kernel: entry symbol and argument order.

    ``obj_symbol`` is set when the entry takes ``PyObject*`` arrays; only
    ``ptr_symbol`` exists otherwise.

    The native entry takes, in order, one argument per parameter (array data
    pointer or ``PyObject*`` for buffers, ``int64``/``double`` for scalars)
    and then one ``int64`` per element of ``dim_vars``. A ``checked`` entry
    (``PyObject*`` arrays and an :class:`ArrayLayout`) takes no dimensions:
    it reads them from the arrays, checks each array's type, dtype, rank,
    shape and flags itself and returns ``RC_BAD_ARGUMENTS`` (running
    nothing) when one does not fit.
    """

    name: str
    obj_symbol: str | None
    ptr_symbol: str
    params: tuple[ParamABI, ...]
    dim_vars: tuple[tir.Var, ...]
    checked: bool = False
    #: names of every buffer in :func:`buffers_in_order` order (for error messages)
    buffers: tuple[str, ...] = ()


# --------------------------------------------------------------------------
# Module codegen
# --------------------------------------------------------------------------


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
        gen = _KernelCodegen(self, name, func)
        abi = gen.generate()
        self.kernels[name] = abi
        return abi

    def plan_kernel(self, name: str, func: tir.PrimFunc) -> KernelABI:
        """The ABI :meth:`add_kernel` would produce, without generating code."""
        symbol = self.unique_symbol("phasec.k." + _sanitize(name))
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
        parts = [KERNEL_LIB_IR, *self.math.values(), "attributes #0 = { " + self.attr_group + " }",
                 f"@{OOB_VALUE} = global i64 0, align 8",
                 f"@{OOB_EXTENT} = global i64 0, align 8",
                 f"@{OOB_SITE} = global i64 0, align 8", ""]
        parts.extend(self.decls.values())
        parts.append("")
        parts.extend(self.functions)
        parts.extend(self.metadata)
        return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------
# Kernel signature
# --------------------------------------------------------------------------


def kernel_abi(name: str, func: tir.PrimFunc, symbol: str, with_obj_entry: bool,
               native_checks: bool = False) -> KernelABI:
    """Validate ``func``'s parameters and describe how to call it.

    Symbolic dimensions are bound by scalar parameters or by the first buffer
    dimension that is exactly that variable; composite dimensions (``n * 2``)
    are checked at call time once every variable they use is bound (in
    Python: a kernel with one has no ``checked`` entry).
    """
    def error(message: str, node: Any) -> CodegenError:
        return CodegenError(message, name, getattr(node, "span", None))

    if not isinstance(func, tir.PrimFunc):
        raise CodegenError(f"expected a tir.PrimFunc, got {type(func).__name__}", name)
    params = func.params
    seen: set[int] = set()
    for p in params:
        if not isinstance(p, (tir.Buffer, tir.Var)):
            raise error(f"parameter of type {type(p).__name__} (expected a tir.Buffer or "
                        "tir.Var)", func)
        if id(p) in seen:
            raise error(f"parameter '{p.name}' appears twice", p)
        seen.add(id(p))
        what = f"buffer '{p.name}'" if isinstance(p, tir.Buffer) else f"scalar parameter '{p.name}'"
        if isinstance(p, tir.Var) and p.dtype == "handle":
            raise error(f"parameter '{p.name}' is an opaque handle (T.handle without "
                        f"T.match_buffer): phasec compiles kernels over buffers and scalars; "
                        f"bind it with T.match_buffer", p)
        if p.dtype not in _LLVM_TYPE:
            raise error(f"{what} has unsupported dtype {p.dtype!r} (supported: "
                        f"{', '.join(tir.DTYPES)})", p)

    known: set[int] = {id(p) for p in params if isinstance(p, tir.Var)}
    dim_vars: list[tir.Var] = []
    for p in params:
        if isinstance(p, tir.Buffer):
            for d in p.shape:
                if isinstance(d, tir.Var) and id(d) not in known:
                    if not _is_intlike(d.dtype) or d.dtype == "bool" or d.dtype not in _LLVM_TYPE:
                        raise error(f"shape variable '{d.name}' of buffer '{p.name}' must have "
                                    f"an integer dtype, not {d.dtype}", p)
                    known.add(id(d))
                    dim_vars.append(d)
    for p in params:
        if isinstance(p, tir.Buffer):
            for d in p.shape:
                for n in _walk(d):
                    if isinstance(n, tir.Var) and id(n) not in known:
                        raise error(f"shape of buffer '{p.name}' uses '{n.name}', which is "
                                    "neither a scalar parameter nor a dimension of some buffer "
                                    "parameter, so it cannot be bound at call time", p)
                    if not isinstance(n, (tir.Var, tir.IntImm, tir.BinaryOp, tir.Cast,
                                          tir.Select)):
                        raise error(f"shape of buffer '{p.name}' contains a "
                                    f"{type(n).__name__}; only integer arithmetic (and "
                                    "selects) on shape variables is allowed", p)

    body_nodes = _walk(func.body)  # one walk for both uses (warm builds do little else)
    written = {id(n.buffer) for n in body_nodes if isinstance(n, tir.BufferStore)}
    abi_params = []
    for p in params:
        if isinstance(p, tir.Buffer):
            shape = tuple(int(d.value) if isinstance(d, tir.IntImm) else d for d in p.shape)
            abi_params.append(ParamABI(p.name, "buffer", p.dtype, shape, written=id(p) in written))
        else:
            abi_params.append(ParamABI(p.name, "scalar", p.dtype, var=p))
    # Native checks compare dimensions as int64: not for composite dimensions
    # or ones given by a float scalar.
    float_scalars = {id(p) for p in params if isinstance(p, tir.Var) and _is_float(p.dtype)}
    checked = with_obj_entry and native_checks and all(
        isinstance(d, int) or (isinstance(d, tir.Var) and id(d) not in float_scalars)
        for p in abi_params for d in p.shape)
    return KernelABI(name, symbol + ".entry_obj" if with_obj_entry else None,
                     symbol + ".entry_ptr", tuple(abi_params), tuple(dim_vars), checked,
                     tuple(b.name for b in buffers_in_order(func, body_nodes)))


# --------------------------------------------------------------------------
# Per-kernel codegen
# --------------------------------------------------------------------------


class _KernelCodegen(EntryCodegen, StatementCodegen, LoopCodegen, IntrinsicCodegen,
                     ExpressionCodegen):
    """Emits one kernel; helper instances emit its outlined parallel bodies."""

    def __init__(self, mod: ModuleCodegen, name: str, func: tir.PrimFunc) -> None:
        self.mod = mod
        self.name = name
        self.func = func
        self.fn: _FunctionText | None = None
        self.vars: dict[int, tuple[str, str]] = {}
        self.var_objs: dict[int, tir.Var] = {}
        self.bufs: dict[int, _BufInfo] = {}
        self.allow_parallel = True
        self.types: dict[int, str] = {}  # expression -> dtype of its value
        self.optypes: dict[int, str] = {}  # BinaryOp -> dtype of its operands
        self.loads: dict[int, bool] = {}  # expression -> reads a buffer
        self.oom_label: str | None = None
        self.heap: list[str] = []  # heap buffers live at the point being emitted
        self._ordinals: dict[int, int] | None = None  # buffer id -> buffers_in_order index
        self.n_parallel = 0
        self.symbol = ""

    # -- errors ------------------------------------------------------------
    def error(self, message: str, node: Any = None) -> CodegenError:
        return CodegenError(message, self.name, getattr(node, "span", None))

    def check_dtype(self, dtype: Any, what: str, node: Any) -> str:
        if dtype not in _LLVM_TYPE:
            raise self.error(f"{what} has unsupported dtype {dtype!r} "
                             f"(supported: {', '.join(tir.DTYPES)})", node)
        return dtype

    # -- environment -------------------------------------------------------
    def bind_var(self, v: tir.Var, op: str) -> tuple[Any, Any]:
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

    def lookup_buffer(self, buf: Any, node: Any) -> _BufInfo:
        info = self.bufs.get(id(buf))
        if info is None:
            name = getattr(buf, "name", "?")
            raise self.error(f"buffer '{name}' is used but is neither a parameter nor allocated "
                             "in scope", node)
        return info

    def get_oom_label(self) -> str:
        if self.oom_label is None:
            self.oom_label = "oom"
        return self.oom_label

    # -- parallel loops -----------------------------------------------------
    _STMT: Mapping[type, Callable[..., None]] = {
        tir.SeqStmt: StatementCodegen._seq,
        tir.BufferStore: StatementCodegen._store,
        tir.For: LoopCodegen._for,
        tir.IfThenElse: StatementCodegen._if,
        tir.While: LoopCodegen._while,
        tir.Allocate: StatementCodegen._allocate,
        tir.LetStmt: StatementCodegen._let,
        tir.AttrStmt: StatementCodegen._attr,
        tir.Evaluate: StatementCodegen._evaluate,
        tir.Block: StatementCodegen._block,
    }
