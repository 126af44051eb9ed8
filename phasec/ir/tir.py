"""TIR: scalar expressions (also used for symbolic shapes) and loop-level kernels.

Naming follows TVM's ``tvm.tir``: ``Var``, ``IntImm``, ``Buffer``, ``For``,
``BufferStore``, ``Block``, ``PrimFunc``. Binary arithmetic is one node,
:class:`BinaryOp`, keyed by its operator symbol, so printers, interpreters and
code generators handle every operator in one table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Union

import numpy as np

from phasec.ir.intrinsics import (
    BIT_INTRINSICS, BOOL_INTRINSICS, INTRINSIC_DTYPES, INTRINSICS, LIBM_INTRINSICS,
    MATH_INTRINSICS,
)
from phasec.ir.node import Node, Span, children_getter, no_children, node, set_field

__all__ = [
    "PrimExpr", "Var", "IntImm", "FloatImm", "StringImm", "BufferData", "HOST_CALLS",
    "host_calls", "PRIM_FUNC_CALL", "describe_host_call", "BinaryOp", "Not", "Cast", "Select",
    "Call", "BufferLoad", "Buffer", "Stmt", "BufferStore", "SeqStmt", "seq", "For",
    "IfThenElse", "While", "Allocate", "LetStmt", "AttrStmt", "Evaluate", "IterVar", "BufferRegion",
    "Block", "BlockRealize", "PrimFunc", "const", "as_prim_expr", "expr_children",
    "stmt_children", "stmt_exprs", "contains_stmt",
    "ARITH_OPS", "COMPARE_OPS", "LOGIC_OPS", "INTRINSICS", "MATH_INTRINSICS", "FOR_KINDS",
    "LIBM_INTRINSICS", "BOOL_INTRINSICS", "BIT_INTRINSICS", "PREFETCH_ATTR", "PREFETCH_WRITE_ATTR",
    "KEEP_LOOP_ATTR",
    "is_float", "is_int", "is_bool", "DTYPES", "frozen_attrs",
]

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "float16", "float32", "float64")


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def frozen_attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """An immutable copy of an attribute dictionary (insertion order kept)."""
    if isinstance(attrs, MappingProxyType):
        return attrs
    return MappingProxyType(dict(attrs or {}))


# --------------------------------------------------------------------------
# Scalar expressions
# --------------------------------------------------------------------------

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "pow")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("and", "or")

#: The intrinsics callable as ``T.<name>(...)`` (INTRINSICS: name -> arity) and
#: their subsets: declared once each in phasec.ir.intrinsics.

#: ``ret``: TVM's ``T.ret(value)`` / ``return value`` in a PrimFunc with a
#: ``ret_dtype``; only as the statement ``Evaluate(ret(value))``, not in INTRINSICS.
RET = "ret"
#: ``T.attr({"phasec.prefetch": A[i, j]}): body``: a hint that ``A[i, j]`` will
#: be read soon (``"phasec.prefetch_write"``: written). The LLVM backend emits a
#: cache prefetch of that element's address (never a load: nothing is read
#: and no index is checked, a prefetch cannot fault), the interpreter and TVM
#: run the body as if the attribute were not there. The GEMM schedule puts
#: them before a register tile's reduction for what its epilogue reads.
PREFETCH_ATTR = "phasec.prefetch"
PREFETCH_WRITE_ATTR = "phasec.prefetch_write"
#: ``T.attr({"phasec.keep_loop": n}): for ...``: a hint that the serial loop it
#: wraps is not worth unrolling fully: the LLVM backend lets LLVM make at most
#: ``n`` copies of its body (1: ``llvm.loop.unroll.disable``, else
#: ``llvm.loop.unroll.count``) where LLVM would unroll a short constant loop
#: fully and vectorize every copy of the loops inside it again; the
#: interpreter and TVM run the body as if the attribute were not there. A
#: schedule puts it around a loop whose iterations each hold a loop LLVM
#: vectorizes, where the copies cost compile time and buy no run time
#: (measured per use: bench/README.md, "coldbuild").
KEEP_LOOP_ATTR = "phasec.keep_loop"
#: TVM has no checked_index: its syntax spells the intrinsic as a call of
#: this external function, T.call_pure_extern("int64", CHECKED_INDEX_EXTERN, i, n)
CHECKED_INDEX_EXTERN = "phasec_checked_index"


@node
class PrimExpr(Node):
    """A scalar expression. ``dtype`` is a string such as ``"int64"``."""

    # Arithmetic sugar for building kernels in Python (no ``==`` overload:
    # node equality is identity; use BinaryOp("==", a, b)).
    def __add__(self, o): return BinaryOp("+", self, as_prim_expr(o, self.dtype))
    def __radd__(self, o): return BinaryOp("+", as_prim_expr(o, self.dtype), self)
    def __sub__(self, o): return BinaryOp("-", self, as_prim_expr(o, self.dtype))
    def __rsub__(self, o): return BinaryOp("-", as_prim_expr(o, self.dtype), self)
    def __mul__(self, o): return BinaryOp("*", self, as_prim_expr(o, self.dtype))
    def __rmul__(self, o): return BinaryOp("*", as_prim_expr(o, self.dtype), self)
    def __truediv__(self, o): return BinaryOp("/", self, as_prim_expr(o, self.dtype))
    def __floordiv__(self, o): return BinaryOp("//", self, as_prim_expr(o, self.dtype))
    def __mod__(self, o): return BinaryOp("%", self, as_prim_expr(o, self.dtype))
    def __neg__(self): return BinaryOp("-", as_prim_expr(0, self.dtype), self)


@node
class Var(PrimExpr):
    """A scalar variable: a loop variable or a symbolic shape dimension."""

    name: str
    dtype: str = "int64"
    span: Span | None = None


@node
class IntImm(PrimExpr):
    value: int
    dtype: str = "int64"
    span: Span | None = None


@node
class FloatImm(PrimExpr):
    value: float
    dtype: str = "float32"
    span: Span | None = None


@node(derived=("dtype",))
class BinaryOp(PrimExpr):
    """``lhs <op> rhs`` for op in ARITH_OPS, COMPARE_OPS or LOGIC_OPS."""

    op: str
    lhs: PrimExpr
    rhs: PrimExpr
    dtype: str = ""
    span: Span | None = None

    def __post_init__(self) -> None:
        if self.op not in ARITH_OPS and self.op not in COMPARE_OPS and self.op not in LOGIC_OPS:
            raise ValueError(f"unknown TIR binary operator {self.op!r}")
        if not self.dtype:
            set_field(self, "dtype", "bool" if self.op in COMPARE_OPS or self.op in LOGIC_OPS
                      else self.lhs.dtype)


@node(derived=("dtype",))
class Not(PrimExpr):
    value: PrimExpr
    dtype: str = "bool"
    span: Span | None = None


@node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr
    span: Span | None = None


@node(derived=("dtype",))
class Select(PrimExpr):
    """``T.Select(cond, a, b)`` / ``T.if_then_else``: a if cond else b."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = ""
    span: Span | None = None

    def __post_init__(self) -> None:
        if not self.dtype:
            set_field(self, "dtype", self.true_value.dtype)


@node
class Call(PrimExpr):
    """A math intrinsic, ``T.exp(x)`` etc.; ``name`` is a key of INTRINSICS."""

    name: str
    args: tuple[PrimExpr, ...]
    dtype: str = ""
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "args", tuple(self.args))
        if not self.dtype:
            dtype = INTRINSIC_DTYPES.get(self.name)
            if dtype is None:
                dtype = HOST_CALLS.get(self.name)
            if dtype == "" or (dtype is None and not self.args):
                raise ValueError(f"T.{self.name} needs its dtype")
            set_field(self, "dtype", dtype or self.args[0].dtype)


#: TVM's host-side TIR builtins phasec keeps as opaque calls (name -> the
#: dtype of the call): TVM legalizes sort, argsort and topk to a kernel whose
#: body is ``T.call_packed("tvm.contrib.sort.sort", T.tvm_stack_make_array(
#: data.data, T.tvm_stack_make_shape(...), ...), ...)``. phasec reads, prints,
#: serializes and verifies them; its backends refuse them (see host_calls).
HOST_CALLS: Mapping[str, str] = MappingProxyType({
    "call_packed": "int32", "tvm_stack_make_array": "handle", "tvm_stack_make_shape": "handle",
    # TVM's VM lowered to TIR (its VMTIR codegen) and host-side helpers
    "call_cpacked": "int32", "anylist_getitem": "handle", "anylist_setitem_call_packed": "int32",
    "anylist_setitem_call_cpacked": "int32",
    # a field of a DLTensor; its dtype is an operand (T.tvm_struct_get(t, 0, 5, "uint8"))
    "tvm_struct_get": "",
    # a GPU loop condition that every thread of a block computes alike
    "tvm_thread_invariant": "bool",
})


#: ``Call("@f", args, dtype)``: a call of PrimFunc ``f`` of the same module
#: that returns a value (TVM's ``Module.f(x, y)`` inside a kernel, ``f``
#: declared ``-> T.float32``); kept opaque like the host calls: phasec reads,
#: prints, serializes and verifies it, and its backends refuse it.
PRIM_FUNC_CALL = "@"


def describe_host_call(name: str) -> str:
    """What a name from :func:`host_calls` calls, for error messages."""
    if name.startswith(PRIM_FUNC_CALL):
        return f"PrimFunc {name[1:]!r} of the module (a call between PrimFuncs)"
    if name.startswith("T."):
        return f"TVM's builtin {name}"
    return f"TVM's packed function {name!r} (T.call_packed, a function of TVM's runtime)"


@node
class StringImm(PrimExpr):
    """A string operand of a host call (the packed function's name, "both")."""

    value: str
    dtype: str = "handle"
    span: Span | None = None


@node
class Buffer(Node):
    """A multi-dimensional buffer; identity is object identity, like Var.

    ``scope`` is TVM's storage scope (``"global"``; ``"shared"``, ``"local"``
    in GPU-scheduled kernels). On the CPU every scope is ordinary memory.
    """

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    span: Span | None = None
    scope: str = "global"

    def __post_init__(self) -> None:
        set_field(self, "shape", tuple(as_prim_expr(s) for s in self.shape))

    def __getitem__(self, indices) -> "BufferLoad":
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(as_prim_expr(i) for i in indices))


@node(derived=("dtype",))
class BufferLoad(PrimExpr):
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = ""
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "indices", tuple(self.indices))
        if not self.dtype:
            set_field(self, "dtype", self.buffer.dtype)


@node(derived=("dtype",))
class BufferData(PrimExpr):
    """``buf.data``: the address of a buffer's memory, an operand of host calls."""

    buffer: Buffer
    dtype: str = "handle"
    span: Span | None = None


def as_prim_expr(value: Any, dtype: str | None = None) -> PrimExpr:
    """Coerce a Python or numpy scalar (or a PrimExpr) into a PrimExpr.

    ``dtype`` is a hint: ints default to int64 and floats to float32, an int
    becomes a FloatImm when the hint is a float type.
    """
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, np.generic):
        value, dtype = value.item(), dtype or str(value.dtype)
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if isinstance(value, int):
        if dtype and is_float(dtype):
            return FloatImm(float(value), dtype)
        return IntImm(value, dtype if dtype and is_int(dtype) else "int64")
    if isinstance(value, float):
        return FloatImm(value, dtype if dtype and is_float(dtype) else "float32")
    raise TypeError(f"cannot use {type(value).__name__} as a TIR expression")


const = as_prim_expr


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------

#: ``thread_binding``: a loop bound to a GPU thread axis (``thread``, e.g.
#: "blockIdx.x"), as TVM schedules GPU kernels; phasec reads, prints and
#: serializes it, and its CPU backends refuse it (see PHASES.md).
FOR_KINDS = ("serial", "parallel", "vectorized", "unroll", "thread_binding")


@node
class Stmt(Node):
    """A TIR statement."""


@node
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "indices", tuple(as_prim_expr(i) for i in self.indices))


@node
class SeqStmt(Stmt):
    """Statements in order: none (printed ``pass``) or at least two. A nested
    SeqStmt is flattened into its parent (as TVM's SeqStmt::Flatten) and a
    sequence of one statement is refused (build with :func:`seq`, which
    gives the bare statement): the text spells neither, so they would not
    read back as themselves."""

    stmts: tuple[Stmt, ...]
    span: Span | None = None

    def __post_init__(self) -> None:
        flat: list[Stmt] = []
        for s in self.stmts:
            if type(s) is SeqStmt:
                flat.extend(s.stmts)  # already flat
            else:
                flat.append(s)
        if len(flat) == 1:
            raise ValueError("a SeqStmt of one statement has no text (it reads back as the "
                             "bare statement): build sequences with tir.seq")
        set_field(self, "stmts", tuple(flat))


def seq(stmts: Iterable[Stmt], span: Span | None = None) -> Stmt:
    """The statements in sequence: nested sequences flattened, one statement
    as itself, none as the empty ``SeqStmt`` (the only forms the text reads
    back)."""
    flat: list[Stmt] = []
    for s in stmts:
        if type(s) is SeqStmt:
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat), span=span)


@node
class For(Stmt):
    """``for loop_var in range(min, min + extent)`` with a kind from FOR_KINDS;
    ``thread`` is the thread axis of a ``thread_binding`` loop (None otherwise)."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    span: Span | None = None
    thread: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FOR_KINDS:
            raise ValueError(f"unknown loop kind {self.kind!r}; expected one of {FOR_KINDS}")
        if (self.kind == "thread_binding") != bool(self.thread):
            raise ValueError("a thread_binding loop needs its thread axis (e.g. "
                             "thread=\"threadIdx.x\"), and only such a loop has one")
        set_field(self, "min", as_prim_expr(self.min))
        set_field(self, "extent", as_prim_expr(self.extent))


@node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None
    span: Span | None = None


@node
class While(Stmt):
    """``while condition: body``: TVM's While (its bucketize searches with
    one); ``body`` runs as long as ``condition`` holds, evaluated before
    every iteration."""

    condition: PrimExpr
    body: Stmt
    span: Span | None = None


@node
class Allocate(Stmt):
    """``buf = T.alloc_buffer(...)``: ``buffer`` is live inside ``body``."""

    buffer: Buffer
    body: Stmt
    span: Span | None = None


@node
class LetStmt(Stmt):
    """``var = value`` followed by ``body`` (a scalar binding)."""

    var: Var
    value: PrimExpr
    body: Stmt
    span: Span | None = None


@node
class AttrStmt(Stmt):
    """``T.attr({"pragma_scope": "seq"})`` / ``T.attr(0, key, value)``: TVM's
    attribute statement, a hint for TVM's lowering that scopes over ``body``
    (``value`` a number, string or scalar expression). phasec keeps it and
    otherwise runs ``body`` as if it were not there."""

    key: str
    value: Any
    body: Stmt
    span: Span | None = None


@node
class Evaluate(Stmt):
    """A scalar expression evaluated for effect (``T.evaluate(0)`` is a no-op)."""

    value: PrimExpr
    span: Span | None = None


@node
class IterVar(Node):
    """A block axis: ``var = T.axis.spatial(extent, binding)``; kind "S" or "R".

    The axis ranges over ``[min, min + extent)``; ``min`` is 0 unless the text
    gives the domain as ``(begin, end)`` (TVM writes that for the inner blocks
    it nests, e.g. in adaptive pooling: ``T.axis.spatial((v, v + 1), v)``).
    """

    var: Var
    extent: PrimExpr
    kind: str = "S"
    span: Span | None = None
    min: PrimExpr | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("S", "R"):
            raise ValueError(f"block axis kind must be 'S' or 'R', not {self.kind!r}")
        set_field(self, "extent", as_prim_expr(self.extent))
        # One spelling of "starts at 0" (None and 0 alike) so that consumers
        # and structural equality see a single form.
        set_field(self, "min", IntImm(0, self.var.dtype) if self.min is None
                  else as_prim_expr(self.min, self.var.dtype))

    @property
    def has_min(self) -> bool:
        """Whether the domain starts elsewhere than 0 (``(begin, end)`` form)."""
        return not (type(self.min) is IntImm and self.min.value == 0)


@node
class BufferRegion(Node):
    """``A[v0, 0:4]``: per dimension a (min, extent) pair."""

    buffer: Buffer
    region: tuple[tuple[PrimExpr, PrimExpr], ...]
    span: Span | None = None


@node
class Block(Stmt):
    """``with T.sblock(name)``: axes bound to ``iter_values``, optional init.

    Merges TVM's Block and BlockRealize: ``iter_values[i]`` is the binding of
    ``iter_vars[i]`` (``T.axis.spatial(extent, value)``). ``annotations``
    (``T.sblock_attr({...})``) are hints for TVM's schedulers; phasec keeps
    them so that TVM's modules go through phasec unchanged, and ignores them.
    """

    name: str
    iter_vars: tuple[IterVar, ...]
    iter_values: tuple[PrimExpr, ...]
    body: Stmt
    init: Stmt | None = None
    reads: tuple[BufferRegion, ...] = ()
    writes: tuple[BufferRegion, ...] = ()
    annotations: Mapping[str, Any] | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "annotations", frozen_attrs(self.annotations))
        set_field(self, "iter_vars", tuple(self.iter_vars))
        set_field(self, "iter_values", tuple(as_prim_expr(v) for v in self.iter_values))
        set_field(self, "reads", tuple(self.reads))
        set_field(self, "writes", tuple(self.writes))
        if len(self.iter_vars) != len(self.iter_values):
            raise ValueError("a block needs one binding per axis")


BlockRealize = Block  # TVM name; phasec keeps the binding inside Block


#: PrimFunc attribute keys renamed in TVM 0.27 (old spelling -> canonical);
#: a PrimFunc built or parsed with the old key holds the canonical one.
LEGACY_ATTR_KEYS = {"tir.noalias": "tirx.noalias"}

#: The key of the attribute statement TVMScript text wraps around an
#: ``Allocate``/``LetStmt`` that statements outside its scope follow
#: (``with T.attr({"phasec.scope": T.bool(True)}):``): TVM 0.27 has no scoped
#: allocation or let to spell it with. Readers drop the attribute; no IR node
#: carries it.
SCOPE_ATTR = "phasec.scope"


@node
class PrimFunc(Node):
    """A loop-level kernel.

    ``params`` are Buffers (tensors, destination-passing style: outputs last)
    or scalar ``Var``s (shape parameters). Symbolic dimensions appearing in
    buffer shapes are bound by the shapes of the buffers passed at call time.

    ``ret_dtype``: a PrimFunc that returns a scalar (TVM's ``-> T.bool`` with
    ``return value``, the statement ``Evaluate(ret(value))``; host-side
    helpers such as TVM's ComputePrimValue makes) has its dtype here; None
    for kernels, which return nothing. phasec reads, prints and verifies
    them; its backends do not run them.
    """

    params: tuple[Union[Buffer, Var], ...]
    body: Stmt
    attrs: Mapping[str, Any] | None = None
    span: Span | None = None
    ret_dtype: str | None = None

    def __post_init__(self) -> None:
        set_field(self, "params", tuple(self.params))
        attrs = self.attrs
        if attrs and any(k in LEGACY_ATTR_KEYS for k in attrs):
            attrs = {LEGACY_ATTR_KEYS.get(k, k): v for k, v in attrs.items()}
        set_field(self, "attrs", frozen_attrs(attrs))

    def with_attr(self, key: str, value: Any) -> "PrimFunc":
        return PrimFunc(self.params, self.body, {**self.attrs, key: value}, span=self.span,
                        ret_dtype=self.ret_dtype)



# ---------------------------------------------------------------------------
# Traversal: the one definition of what a node holds
# ---------------------------------------------------------------------------
# Read off the nodes' dataclass fields (see phasec.ir.node.node_fields): a new
# node class needs no traversal code here.

_EXPR_CHILDREN: dict[type, Callable[[Any], tuple]] = {}
_STMT_CHILDREN: dict[type, Callable[[Any], tuple]] = {}
_STMT_EXPRS: dict[type, Callable[[Any], tuple]] = {}


def expr_children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operands of a scalar expression (a load's indices included), in
    field order; () for anything that is not a PrimExpr."""
    try:  # the hot path of every expression walk: one lookup, one call
        return _EXPR_CHILDREN[type(e)](e)
    except KeyError:
        t = type(e)
        get = _EXPR_CHILDREN[t] = (children_getter(t, PrimExpr) if issubclass(t, PrimExpr)
                                   else no_children)
        return get(e)


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``: bodies, branches, a block's init,
    in field order; () for anything that is not a Stmt."""
    try:
        return _STMT_CHILDREN[type(s)](s)
    except KeyError:
        t = type(s)
        get = _STMT_CHILDREN[t] = (children_getter(t, Stmt) if issubclass(t, Stmt)
                                   else no_children)
        return get(s)


def stmt_exprs(s: Stmt) -> tuple[PrimExpr, ...]:
    """The expressions a statement holds directly, in field order: a loop's
    variable and bounds, a store's value and indices, a condition, a block's
    bindings (not those of the statements inside it)."""
    try:
        return _STMT_EXPRS[type(s)](s)
    except KeyError:
        t = type(s)
        get = _STMT_EXPRS[t] = (children_getter(t, PrimExpr) if issubclass(t, Stmt)
                                else no_children)
        return get(s)


def host_calls(body: Stmt) -> list[str]:
    """The packed functions a kernel body calls through TVM's host builtins
    (``T.call_packed("tvm.contrib.sort.sort", ...)`` gives that name), in
    order (``T.<builtin>`` for a host builtin that names none), and the
    PrimFuncs it calls (``"@f"``, see PRIM_FUNC_CALL)."""
    found: list[str] = []
    stmts: list[Any] = [body]
    exprs: list[Any] = []
    while stmts:
        s = stmts.pop()
        stmts.extend(reversed(stmt_children(s)))
        exprs.extend(stmt_exprs(s))
    for root in exprs:  # in statement order
        stack = [root]
        while stack:
            e = stack.pop()
            if type(e) is Call and e.name.startswith(PRIM_FUNC_CALL):
                found.append(e.name)
            elif type(e) is Call and e.name in HOST_CALLS:
                # the function a packed call names (its first string operand)
                names = [a.value for a in e.args if type(a) is StringImm]
                found.append(names[0] if names else f"T.{e.name}")
                continue
            stack.extend(reversed(expr_children(e)))
    return found


def contains_stmt(body: Stmt, kind: type) -> bool:
    """Whether a statement of type ``kind`` occurs in ``body`` (iterative walk)."""
    stack = [body]
    while stack:
        s = stack.pop()
        if type(s) is kind:
            return True
        stack.extend(stmt_children(s))
    return False
