"""What compiled kernels and the runtime that calls them agree on: the
kernel's signature (:class:`KernelABI`, derived from a PrimFunc by
:func:`kernel_abi`), the layout of numpy's array object the native entries
read, the return codes and the globals an error leaves its details in, and
how a bounds-checked access names its buffer (:func:`buffer_site`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from phasec.ir import tir
from phasec.ir.memo import remembered
from phasec.ir.node import Node, children_getter
from phasec.backend.llvm.errors import CodegenError
from phasec.backend.llvm.irtext import LLVM_TYPE, is_float, is_intlike

__all__ = ["ArrayLayout", "ParamABI", "KernelABI", "kernel_abi", "NDARRAY_SYMBOL",
           "PYTHON_API_FUNCTIONS",
           "descr_symbol", "natively_checked_dim", "buffers_in_order", "buffer_site",
           "decode_buffer_site", "walk", "body_walk",
           "RC_OK", "RC_OUT_OF_MEMORY", "RC_BAD_ARGUMENTS", "RC_INDEX_OUT_OF_RANGE",
           "RC_BUFFER_OUT_OF_BOUNDS", "RC_DIVISION_BY_ZERO", "RC_CANCELLED", "OOB_VALUE",
           "OOB_EXTENT", "OOB_SITE", "CANCEL_FLAG"]

# --------------------------------------------------------------------------
# Return codes and the globals that carry an error's details
# --------------------------------------------------------------------------

#: Error codes returned by kernels. RC_BAD_ARGUMENTS: an entry that checks
#: its arrays (KernelABI.checked) found one it does not accept; nothing ran.
RC_OK, RC_OUT_OF_MEMORY, RC_BAD_ARGUMENTS = 0, 1, 1 << 30
#: a T.checked_index failed; the index and the extent are in OOB_VALUE / OOB_EXTENT
RC_INDEX_OUT_OF_RANGE = 2
OOB_VALUE, OOB_EXTENT = "phasec_oob_value", "phasec_oob_extent"
#: a kernel built with check_bounds made an out-of-bounds buffer access; the
#: index, the extent and the site (buffer_site()) are in OOB_VALUE, OOB_EXTENT, OOB_SITE
RC_BUFFER_OUT_OF_BOUNDS = 8
OOB_SITE = "phasec_oob_site"
#: an integer division or remainder by zero (a DivisionByZeroError naming the kernel)
RC_DIVISION_BY_ZERO = 16
#: the kernel stopped at a poll of the cancel flag (Ctrl-C; see ..interrupt and .loops)
RC_CANCELLED = 4
#: the process-wide cancel flag (an i32 the interrupt watcher sets)
CANCEL_FLAG = "phasec_rt_cancel"

# --------------------------------------------------------------------------
# numpy's array object
# --------------------------------------------------------------------------


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
#: (bound to this process's addresses by :func:`.jit.bind_array_symbols`).
NDARRAY_SYMBOL = "phasec_np_ndarray"

#: the CPython functions a fast entry (KernelABI.fast_symbol) calls: bound
#: with the array symbols, from the running interpreter
PYTHON_API_FUNCTIONS = ("PyEval_SaveThread", "PyEval_RestoreThread", "PyLong_FromLong")


def descr_symbol(dtype: str) -> str:
    """The symbol naming numpy's dtype object for ``dtype``."""
    return f"phasec_np_descr_{dtype}"


# --------------------------------------------------------------------------
# Kernel signature
# --------------------------------------------------------------------------


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

    ``fast_symbol`` is set for a checked entry of a kernel whose parameters
    are all buffers: a CPython builtin function body (``METH_FASTCALL``:
    ``PyObject *(PyObject *self, PyObject *const *args, Py_ssize_t n)``)
    calling the checked entry with the GIL released and returning its code
    as a Python int; calling it costs a fraction of a ctypes call.
    """

    name: str
    obj_symbol: str | None
    ptr_symbol: str
    params: tuple[ParamABI, ...]
    dim_vars: tuple[tir.Var, ...]
    checked: bool = False
    #: names of every buffer in :func:`buffers_in_order` order (for error messages)
    buffers: tuple[str, ...] = ()
    fast_symbol: str | None = None

    @property
    def entry_symbols(self) -> tuple[str, ...]:
        """The symbols a compiled library defines for this kernel."""
        main = self.obj_symbol or self.ptr_symbol
        return (main, self.fast_symbol) if self.fast_symbol else (main,)


def kernel_abi(name: str, func: tir.PrimFunc, symbol: str, with_obj_entry: bool,
               native_checks: bool = False) -> KernelABI:
    """Validate ``func``'s parameters and describe how to call it.

    Symbolic dimensions are bound by scalar parameters or by the first buffer
    dimension that is exactly that variable; composite dimensions (``n * 2``)
    are checked at call time once every variable they use is bound (natively
    by a checked entry when :func:`natively_checked_dim`, else in Python: a
    kernel with another kind has no ``checked`` entry).
    """
    # (a cold build asks twice for each kernel: plan_library, then the emission)
    params, dim_vars, checked, buffers, fast = remembered(
        _kernel_abi_parts, func, name, with_obj_entry, native_checks)
    return KernelABI(name, symbol + ".entry_obj" if with_obj_entry else None,
                     symbol + ".entry_ptr", params, dim_vars, checked, buffers,
                     symbol + ".entry_fast" if fast else None)


def _kernel_abi_parts(func: tir.PrimFunc, name: str, with_obj_entry: bool,
                      native_checks: bool
                      ) -> tuple[tuple[ParamABI, ...], tuple[tir.Var, ...], bool,
                                 tuple[str, ...], bool]:
    """:func:`kernel_abi` but for its symbols: (params, dim_vars, checked,
    buffer names, whether it has a fast entry)."""
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
        if p.dtype not in LLVM_TYPE:
            raise error(f"{what} has unsupported dtype {p.dtype!r} (supported: "
                        f"{', '.join(tir.DTYPES)})", p)

    known: set[int] = {id(p) for p in params if isinstance(p, tir.Var)}
    dim_vars: list[tir.Var] = []
    for p in params:
        if isinstance(p, tir.Buffer):
            for d in p.shape:
                if isinstance(d, tir.Var) and id(d) not in known:
                    if not is_intlike(d.dtype) or d.dtype == "bool" or d.dtype not in LLVM_TYPE:
                        raise error(f"shape variable '{d.name}' of buffer '{p.name}' must have "
                                    f"an integer dtype, not {d.dtype}", p)
                    known.add(id(d))
                    dim_vars.append(d)
    for p in params:
        if isinstance(p, tir.Buffer):
            for d in p.shape:
                for n in walk(d):
                    if isinstance(n, tir.Var) and id(n) not in known:
                        raise error(f"shape of buffer '{p.name}' uses '{n.name}', which is "
                                    "neither a scalar parameter nor a dimension of some buffer "
                                    "parameter, so it cannot be bound at call time", p)
                    if not isinstance(n, (tir.Var, tir.IntImm, tir.BinaryOp, tir.Cast,
                                          tir.Select)):
                        raise error(f"shape of buffer '{p.name}' contains a "
                                    f"{type(n).__name__}; only integer arithmetic (and "
                                    "selects) on shape variables is allowed", p)

    body_nodes = body_walk(func)  # one walk for both uses (warm builds do little else)
    written = {id(n.buffer) for n in body_nodes if isinstance(n, tir.BufferStore)}
    abi_params = []
    for p in params:
        if isinstance(p, tir.Buffer):
            shape = tuple(int(d.value) if isinstance(d, tir.IntImm) else d for d in p.shape)
            abi_params.append(ParamABI(p.name, "buffer", p.dtype, shape, written=id(p) in written))
        else:
            abi_params.append(ParamABI(p.name, "scalar", p.dtype, var=p))
    # Native checks compare dimensions as int64: not for ones given by a float
    # scalar, nor for composite dimensions beyond natively_checked_dim's.
    float_scalars = {id(p) for p in params if isinstance(p, tir.Var) and is_float(p.dtype)}
    checked = with_obj_entry and native_checks and all(
        isinstance(d, int) or (natively_checked_dim(d) and not any(
            isinstance(n, tir.Var) and id(n) in float_scalars for n in walk(d)))
        for p in abi_params for d in p.shape)
    fast = checked and all(p.kind == "buffer" for p in abi_params)
    return (tuple(abi_params), tuple(dim_vars), checked,
            tuple(b.name for b in buffers_in_order(func, body_nodes)), fast)


#: the operators of a composite dimension a checked entry evaluates itself
_NATIVE_DIM_OPS = frozenset({"+", "-", "*", "min", "max"})


def natively_checked_dim(d: Any) -> bool:
    """Whether a checked entry can check buffer dimension ``d`` itself: a
    variable, or integer arithmetic on variables and constants (``+ - *``,
    ``min``/``max``, ``//``/``%`` by a positive constant; casts are ignored,
    as the Python evaluator does). Anything else (a select, a division by a
    variable) is left to the Python checks, which give the exact error."""
    if isinstance(d, (tir.Var, tir.IntImm)):
        return True
    if isinstance(d, tir.Cast):
        return natively_checked_dim(d.value)
    if isinstance(d, tir.BinaryOp):
        if d.op in ("//", "%"):
            return isinstance(d.rhs, tir.IntImm) and d.rhs.value > 0 and \
                natively_checked_dim(d.lhs)
        return d.op in _NATIVE_DIM_OPS and natively_checked_dim(d.lhs) and \
            natively_checked_dim(d.rhs)
    return False


# --------------------------------------------------------------------------
# Buffers and the nodes of a function
# --------------------------------------------------------------------------


#: type -> its nodes' children getter (:func:`phasec.ir.node.children_getter`)
_CHILDREN: dict[type, Any] = {}


def walk(root: Node) -> list[Node]:
    """Every node reachable from ``root`` (pre-order, each object once;
    iterative).

    Children come from each class's field annotations, read by one getter per
    class (an ``attrgetter`` for the common shapes): the same nodes in the same
    order as testing every field's value, in ~60% of the time (a cold build
    walks each kernel's body several times)."""
    getters = _CHILDREN
    seen: set[int] = set()
    mark = seen.add
    order: list[Node] = []
    keep = order.append
    stack = [root]
    pop, push = stack.pop, stack.extend
    while stack:
        n = pop()
        i = id(n)
        if i in seen:
            continue
        mark(i)
        keep(n)
        t = type(n)
        get = getters.get(t)
        if get is None:
            get = getters[t] = children_getter(t, Node)
        kids = get(n)
        if kids:
            push(reversed(kids))
    return order


def body_walk(func: tir.PrimFunc) -> list[Node]:
    """``walk(func.body)``, remembered for the last kernels (the ABI and the
    vector emitter's register tiles both read a kernel's every node); the
    list is shared: do not change it."""
    return remembered(walk, func.body)


def buffers_in_order(func: tir.PrimFunc, body_nodes: list[Node] | None = None
                     ) -> list[tir.Buffer]:
    """Every buffer of ``func`` — its parameters, then the body's in pre-order —
    once each. The same order for structurally equal functions, so a number
    (:func:`buffer_site`) names a buffer across the kernel cache.
    ``body_nodes``: ``walk(func.body)`` when the caller has it already."""
    seen: set[int] = set()
    out: list[tir.Buffer] = []
    for n in [*func.params, *(walk(func.body) if body_nodes is None else body_nodes)]:
        if isinstance(n, tir.Buffer) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    return out


def buffer_site(ordinal: int, dim: int, write: bool) -> int:
    """The number a bounds-checked access stores in OOB_SITE."""
    return (ordinal << 20) | (min(dim, (1 << 19) - 1) << 1) | int(write)


def decode_buffer_site(site: int) -> tuple[int, int, bool]:
    """(buffer ordinal, dimension, is a write) of :func:`buffer_site`."""
    return site >> 20, (site >> 1) & ((1 << 19) - 1), bool(site & 1)
