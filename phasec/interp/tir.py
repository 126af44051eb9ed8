"""An exact, slow interpreter for TIR ``PrimFunc``s on numpy arrays.

This is the semantic reference for kernels: legalization tests and the LLVM
code generator are checked against it. It favours exactness and clear errors
over speed; only small shapes should be run through it.

Semantics (TVM's, with phasec's choices written down):

* Values: integers are Python ints wrapped to their dtype's range after every
  operation (two's complement), booleans are Python bools, floats are numpy
  scalars of their dtype (``np.float32`` arithmetic stays in float32, so
  results match numpy bit for bit where numpy uses the same operation).
* ``//`` and ``%`` are floor division and floor modulo (TVM's ``floordiv`` /
  ``floormod``) for integers and floats; ``/`` is true division for floats
  and division truncating toward zero for integers (TVM's ``Div``). Integer
  division or remainder by zero is an error, :class:`TIRDivisionByZeroError`
  (the :class:`~phasec.errors.DivisionByZeroError` compiled kernels raise);
  ``INT_MIN / -1`` wraps.
* Operands whose dtypes differ are converted to the operator's dtype
  (arithmetic: the node's dtype; comparisons: numpy's common type) with
  :class:`~phasec.ir.tir.Cast` semantics. Casts from float to int truncate
  like numpy's ``astype``; casts to bool test ``!= 0``.
* ``Select`` (``T.if_then_else``) and ``and`` / ``or`` evaluate only the
  operand they need, so a guarded out-of-bounds load is never performed.
  (Code generators may evaluate both branches of a Select; phasec's own
  legalizations clamp indices so that both branches are always in bounds.)
* ``round`` rounds half to even (``np.rint``); ``max``/``min`` propagate NaN
  (``np.maximum``/``np.minimum``); ``erf`` is computed in float64 and rounded
  to the operand's dtype.
* Loops of every kind (serial, parallel, vectorized, unroll) run serially in
  order. A ``Block``'s ``init`` runs right before its body when every reduce
  axis is bound to 0. Each block binding must lie in ``[0, extent)``.
* Every load and store is bounds-checked. ``T.alloc_buffer`` storage starts
  as NaN for float buffers (to expose reads of uninitialized memory) and 0
  otherwise.
* Symbolic dimensions are bound from scalar parameters first, then from the
  shapes of the arrays passed for buffer parameters; every buffer's declared
  shape is then checked against its array.

Execution is iterative (explicit stacks), so deeply nested expressions,
statement sequences and let chains never reach Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec.errors import (
    BufferAccessError, DivisionByZeroError, IndexOutOfRangeError, PhasecError, VMError, counted,
)
from phasec.ir import tir
from phasec.ir.intrinsics import BIT, FACT, INDEX, INTRINSIC_TABLE
from phasec.runtime.binary_ops import ARITH, BINARY_OPS, COMPARE, int_pow
from phasec.ir.tir import (
    Allocate, BinaryOp, Block, Buffer, BufferLoad, BufferStore, Cast, Evaluate, FloatImm, For,
    IfThenElse, IntImm, LetStmt, Not, PrimExpr, PrimFunc, Select, SeqStmt, Stmt, Var,
)

__all__ = ["run_prim_func", "eval_prim_expr", "TIRExecutionError", "TIRBufferAccessError",
           "TIRDivisionByZeroError"]


class TIRExecutionError(PhasecError):
    """A kernel did something undefined while running (out-of-bounds access,
    integer division by zero, an unbound variable, an unknown node)."""


class TIRBufferAccessError(TIRExecutionError, BufferAccessError):
    """An out-of-bounds buffer access on the interpreter: a TIRExecutionError,
    and the BufferAccessError bounds-checked compiled kernels raise."""


class TIRDivisionByZeroError(TIRExecutionError, DivisionByZeroError):
    """An integer division or remainder by zero on the interpreter: a
    TIRExecutionError, and the DivisionByZeroError compiled kernels raise."""

    def __init__(self, where: str) -> None:
        DivisionByZeroError.__init__(self, where)


def _checked_index(index: Any, extent: Any) -> int:
    """``T.checked_index``: negative indices count from the end; the rest is an error."""
    i, n = int(index), int(extent)
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexOutOfRangeError("kernel", i, n)
    return j


# --------------------------------------------------------------------------
# Scalar values and conversions
# --------------------------------------------------------------------------

def _int_bits(dtype: str) -> tuple[int, bool]:
    """(bit width, signed) of an integer dtype."""
    if dtype.startswith("uint"):
        return int(dtype[4:]), False
    return int(dtype[3:]), True


def _wrapper(dtype: str) -> Callable[[int], int]:
    """A function wrapping a Python int into the range of an integer dtype."""
    bits, signed = _int_bits(dtype)
    mask = (1 << bits) - 1
    if not signed:
        return lambda v: v & mask
    half = 1 << (bits - 1)
    lo, hi = -half, half - 1

    def wrap(v: int) -> int:
        if lo <= v <= hi:
            return v
        return ((v + half) & mask) - half
    return wrap


def _kind(dtype: str) -> str:
    if tir.is_bool(dtype):
        return "bool"
    if tir.is_int(dtype):
        return "int"
    if tir.is_float(dtype):
        return "float"
    raise TIRExecutionError(f"unsupported TIR dtype {dtype!r}")


def _converter(src: str, dst: str) -> Callable[[Any], Any] | None:
    """Cast semantics from ``src`` to ``dst``; None when no conversion is needed."""
    if src == dst:
        return None
    dk = _kind(dst)
    sk = _kind(src) if src else "float"
    if dk == "bool":
        return lambda v: bool(v != 0)
    if dk == "int":
        wrap = _wrapper(dst)
        if sk == "float":
            npdt = np.dtype(dst)
            return lambda v: int(np.asarray(v).astype(npdt))
        return lambda v: wrap(int(v))
    ftype = np.dtype(dst).type
    return lambda v: ftype(v)


def _immediate(value: Any, dtype: str) -> Any:
    kind = _kind(dtype)
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return _wrapper(dtype)(int(value))
    return np.dtype(dtype).type(value)


def _int_div_checked(fn: Callable[[int, int], int]) -> Callable[[int, int], int]:
    def div(a: int, b: int) -> int:
        if b == 0:
            raise TIRDivisionByZeroError("a TIR expression")  # run_prim_func names the kernel
        return fn(a, b)
    return div


def _int_pow(a: int, b: int) -> int:
    # Integer power with a negative exponent: C-like truncation of 1/a**|b|
    # (0 but for the bases 1 and -1; 0 itself has no inverse).
    if b < 0 and a == 0:
        raise TIRExecutionError("integer division by zero (0 raised to a negative power)")
    return int_pow(a, b)


# The operators' semantics (phasec.runtime.binary_ops): exact on integers,
# whose results the caller wraps to the dtype; numpy's on floats.
_INT_OPS: dict[str, Callable[[int, int], Any]] = {
    **{op: s.scalar for op, s in BINARY_OPS.items() if s.kind == ARITH},
    **{op: _int_div_checked(BINARY_OPS[op].scalar) for op in ("/", "//", "%")},
    "pow": _int_pow,
}

_FLOAT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    op: s.array for op, s in BINARY_OPS.items() if s.kind == ARITH and s.array is not None}


def _compare(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], bool]:
    return lambda a, b: bool(f(a, b))


_COMPARE_OPS: dict[str, Callable[[Any, Any], bool]] = {
    op: _compare(s.scalar) for op, s in BINARY_OPS.items() if s.kind == COMPARE}


def _float_intrinsic(name: str) -> Callable[..., Any]:
    """The numpy semantics of math intrinsic ``name`` (phasec.ir.intrinsics)."""
    spec = INTRINSIC_TABLE.get(name)
    if spec is None or spec.numpy is None:
        raise TIRExecutionError(f"unknown TIR intrinsic T.{name}")
    return spec.numpy


# --------------------------------------------------------------------------
# Expression compilation: post-order code for a small stack machine
# --------------------------------------------------------------------------

# Instruction opcodes. Each instruction is a tuple (opcode, operand...).
_CONST, _VAR, _BIN, _UN, _LOAD, _JF, _JMP, _CALL = range(8)


class _Machine:
    """State of one run: variable bindings, live buffers, compiled code."""

    def __init__(self, func_name: str) -> None:
        self.func_name = func_name
        self.env: dict[Var, Any] = {}
        self.arrays: dict[Buffer, np.ndarray] = {}
        self._code: dict[int, list[tuple]] = {}
        self._keep: list[PrimExpr] = []  # keeps compiled expressions alive (ids stay unique)

    # -- compilation ------------------------------------------------------
    def compile(self, expr: PrimExpr) -> list[tuple]:
        code = self._code.get(id(expr))
        if code is None:
            code = self._compile(expr)
            self._code[id(expr)] = code
            self._keep.append(expr)
        return code

    def _compile(self, root: PrimExpr) -> list[tuple]:
        code: list[tuple] = []
        work: list[Any] = [root]
        while work:
            item = work.pop()
            if isinstance(item, tuple):      # an instruction to emit after its operands
                code.append(item)
                continue
            if callable(item):
                item(code, work)
                continue
            self._compile_node(item, code, work)
        return code

    def _compile_node(self, e: PrimExpr, code: list[tuple], work: list[Any]) -> None:
        if isinstance(e, Var):
            code.append((_VAR, e))
        elif isinstance(e, (IntImm, FloatImm)):
            code.append((_CONST, _immediate(e.value, e.dtype)))
        elif isinstance(e, BinaryOp):
            self._compile_binary(e, code, work)
        elif isinstance(e, Not):
            work.append((_UN, lambda v: not v))
            work.append(e.value)
        elif isinstance(e, Cast):
            conv = _converter(e.value.dtype, e.dtype)
            if conv is not None:
                work.append((_UN, conv))
            work.append(e.value)
        elif isinstance(e, Select):
            self._compile_branch(e.condition, e.true_value, e.false_value, code, work,
                                 _converter(e.true_value.dtype, e.dtype),
                                 _converter(e.false_value.dtype, e.dtype))
        elif isinstance(e, tir.Call):
            self._compile_call(e, work)
        elif isinstance(e, BufferLoad):
            work.append((_LOAD, e.buffer, len(e.indices)))
            for idx in reversed(e.indices):
                work.append(self._index_code(idx))
        else:
            raise TIRExecutionError(
                f"cannot evaluate TIR expression node {type(e).__name__} "
                "(is it a tensor-expression node that was not lowered?)")

    def _index_code(self, idx: PrimExpr) -> Any:
        if tir.is_int(idx.dtype):
            return idx
        return _IndexCheck(idx)

    def _compile_binary(self, e: BinaryOp, code: list[tuple], work: list[Any]) -> None:
        op = e.op
        if op in tir.LOGIC_OPS:
            # a and b  ==  Select(a, b, False);  a or b  ==  Select(a, True, b)
            as_bool = _converter(e.rhs.dtype, "bool")
            if op == "and":
                self._compile_branch(e.lhs, e.rhs, tir.IntImm(0, "bool"), code, work, as_bool, None)
            else:
                self._compile_branch(e.lhs, tir.IntImm(1, "bool"), e.rhs, code, work, None, as_bool)
            return
        if op in tir.COMPARE_OPS:
            ldt, rdt = e.lhs.dtype, e.rhs.dtype
            common = ldt if ldt == rdt else str(np.result_type(np.dtype(ldt), np.dtype(rdt)))
            fn = _COMPARE_OPS[op]
        else:
            common = e.dtype
            kind = _kind(common)
            if kind == "float":
                fn = _FLOAT_OPS[op]
                ftype = np.dtype(common).type
                if op in ("//", "%", "min", "max", "pow"):
                    base = fn
                    fn = lambda a, b, base=base, ftype=ftype: ftype(base(a, b))  # noqa: E731
            elif kind == "int":
                base_int = _INT_OPS[op]
                wrap = _wrapper(common)
                fn = lambda a, b, base=base_int, wrap=wrap: wrap(base(a, b))  # noqa: E731
            else:  # bool arithmetic (rare): compute on ints, cast back
                base_int = _INT_OPS[op]
                fn = lambda a, b, base=base_int: bool(base(int(a), int(b)))  # noqa: E731
        lconv = _converter(e.lhs.dtype, common)
        rconv = _converter(e.rhs.dtype, common)
        work.append((_BIN, fn))
        if rconv is not None:
            work.append((_UN, rconv))
        work.append(e.rhs)
        if lconv is not None:
            work.append((_UN, lconv))
        work.append(e.lhs)

    def _compile_branch(self, cond: PrimExpr, then_e: PrimExpr, else_e: PrimExpr,
                        code: list[tuple], work: list[Any],
                        then_conv: Callable | None, else_conv: Callable | None) -> None:
        """Emit ``cond; JF else; then; JMP end; else: else_e; end:``."""
        state: dict[str, int] = {}

        def after_cond(code: list[tuple], work: list[Any]) -> None:
            state["jf"] = len(code)
            code.append((_JF, -1))

        def after_then(code: list[tuple], work: list[Any]) -> None:
            if then_conv is not None:
                code.append((_UN, then_conv))
            state["jmp"] = len(code)
            code.append((_JMP, -1))
            code[state["jf"]] = (_JF, len(code))

        def after_else(code: list[tuple], work: list[Any]) -> None:
            if else_conv is not None:
                code.append((_UN, else_conv))
            code[state["jmp"]] = (_JMP, len(code))

        work.append(after_else)
        work.append(else_e)
        work.append(after_then)
        work.append(then_e)
        work.append(after_cond)
        work.append(_AsBool(cond))

    def _compile_call(self, e: tir.Call, work: list[Any]) -> None:
        spec = INTRINSIC_TABLE.get(e.name)
        if spec is None:
            raise TIRExecutionError(f"unknown TIR intrinsic T.{e.name}")
        arity = spec.arity
        if len(e.args) != arity:
            raise TIRExecutionError(f"T.{e.name} takes {counted(arity, 'argument')}, "
                                    f"got {len(e.args)}")
        if spec.kind == FACT:  # a stated fact, never evaluated (see phasec.ir.intrinsics)
            work.append((_CONST, True))
            return
        if spec.kind == INDEX:
            work.append((_BIN, _checked_index))
            work.append(e.args[1])
            work.append(e.args[0])
            return
        if spec.kind == BIT:
            dt = e.dtype
            wrap = (lambda v: bool(v)) if dt == "bool" else _wrapper(dt)
            bits = np.dtype(dt).itemsize * 8 if dt != "bool" else 1
            fn = spec.on_bits(bits)
            if len(e.args) == 1:
                work.append((_UN, lambda a, fn=fn, wrap=wrap: wrap(fn(int(a)))))
            else:
                work.append((_BIN, lambda a, b, fn=fn, wrap=wrap: wrap(fn(int(a), int(b)))))
                work.append(e.args[1])
            work.append(e.args[0])
            return
        if arity == 2:  # atan2, fmod: both operands in the result's float dtype
            dt = e.dtype if tir.is_float(e.dtype) else "float64"
            ftype = np.dtype(dt).type
            work.append((_BIN, lambda a, b, f=ftype, g=spec.numpy: f(g(f(a), f(b)))))
            work.append(e.args[1])
            work.append(e.args[0])
            return
        arg = e.args[0]
        result_bool = spec.result == "bool"
        if tir.is_float(arg.dtype):
            fn = _float_intrinsic(e.name)
            out_conv = _converter("bool" if result_bool else arg.dtype, e.dtype)
        else:
            # Integer operands: compute in float64, then convert to the result dtype.
            ffn = _float_intrinsic(e.name)
            res_dtype = "bool" if result_bool else "float64"
            fn = lambda v, ffn=ffn: ffn(np.float64(v))  # noqa: E731
            out_conv = _converter(res_dtype, e.dtype)
        if out_conv is not None:
            work.append((_UN, out_conv))
        work.append((_UN, fn))
        work.append(arg)

    # -- evaluation -------------------------------------------------------
    def eval(self, expr: PrimExpr) -> Any:
        code = self.compile(expr)
        env = self.env
        stack: list[Any] = []
        pc, n = 0, len(code)
        while pc < n:
            ins = code[pc]
            pc += 1
            op = ins[0]
            if op == _CONST:
                stack.append(ins[1])
            elif op == _VAR:
                try:
                    stack.append(env[ins[1]])
                except KeyError:
                    raise TIRExecutionError(
                        f"variable {ins[1].name} is used but not bound (not a parameter, "
                        "loop variable, block axis or let variable in scope)") from None
            elif op == _BIN:
                b = stack.pop()
                stack[-1] = ins[1](stack[-1], b)
            elif op == _UN:
                stack[-1] = ins[1](stack[-1])
            elif op == _LOAD:
                k = ins[2]
                if k:
                    idx = tuple(stack[-k:])
                    del stack[-k:]
                else:
                    idx = ()
                stack.append(self.load(ins[1], idx))
            elif op == _JF:
                if not stack.pop():
                    pc = ins[1]
            elif op == _JMP:
                pc = ins[1]
        return stack[-1]

    def array(self, buf: Buffer) -> np.ndarray:
        arr = self.arrays.get(buf)
        if arr is None:
            raise TIRExecutionError(
                f"buffer {buf.name} is accessed but is neither a parameter nor allocated in scope")
        return arr

    def _check_index(self, buf: Buffer, arr: np.ndarray, idx: tuple, write: bool = False) -> None:
        if len(idx) != arr.ndim:
            raise TIRExecutionError(
                f"buffer {buf.name} has {arr.ndim} dimension(s) but is indexed with {len(idx)}")
        for dim, (i, d) in enumerate(zip(idx, arr.shape)):
            if not 0 <= i < d:
                raise TIRBufferAccessError(
                    self.func_name, buf.name, dim, int(i), int(d), write,
                    f"out-of-bounds access {buf.name}[{', '.join(map(str, idx))}] "
                    f"(shape {tuple(arr.shape)}) in PrimFunc {self.func_name}")

    def load(self, buf: Buffer, idx: tuple) -> Any:
        arr = self.array(buf)
        self._check_index(buf, arr, idx)
        v = arr[idx]
        kind = _kind(buf.dtype)
        if kind == "int":
            return int(v)
        if kind == "bool":
            return bool(v)
        return v

    def store(self, buf: Buffer, idx: tuple, value: Any) -> None:
        arr = self.array(buf)
        self._check_index(buf, arr, idx, write=True)
        try:
            arr[idx] = value
        except ValueError as exc:  # read-only array
            raise TIRExecutionError(f"cannot write buffer {buf.name}: {exc}") from None


class _AsBool:
    """A work item: compile an expression and convert its value to bool."""

    __slots__ = ("expr",)

    def __init__(self, expr: PrimExpr) -> None:
        self.expr = expr

    def __call__(self, code: list[tuple], work: list[Any]) -> None:
        conv = _converter(self.expr.dtype, "bool")
        if conv is not None:
            work.append((_UN, conv))
        work.append(self.expr)


class _IndexCheck:
    """A work item: compile a buffer index that must be an integer."""

    __slots__ = ("expr",)

    def __init__(self, expr: PrimExpr) -> None:
        self.expr = expr

    def __call__(self, code: list[tuple], work: list[Any]) -> None:
        raise TIRExecutionError(f"buffer index of dtype {self.expr.dtype} (indices must be integers)")


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------

class _Loop:
    __slots__ = ("var", "next", "end", "body")

    def __init__(self, var: Var, start: int, end: int, body: Stmt) -> None:
        self.var, self.next, self.end, self.body = var, start, end, body


class _Restore:
    """Undo variable bindings (and free allocations) when a scope ends."""

    __slots__ = ("saved", "buffer")

    def __init__(self, saved: list[tuple[Var, Any]], buffer: Buffer | None = None) -> None:
        self.saved = saved
        self.buffer = buffer


_UNBOUND = object()


def _bind(env: dict[Var, Any], var: Var, value: Any, saved: list[tuple[Var, Any]]) -> None:
    saved.append((var, env.get(var, _UNBOUND)))
    env[var] = value


def _run(m: _Machine, body: Stmt) -> None:
    env = m.env
    work: list[Any] = [body]
    while work:
        item = work.pop()
        if isinstance(item, _Loop):
            if item.next < item.end:
                env[item.var] = item.next
                item.next += 1
                work.append(item)
                work.append(item.body)
            continue
        if isinstance(item, _Restore):
            for var, old in reversed(item.saved):
                if old is _UNBOUND:
                    env.pop(var, None)
                else:
                    env[var] = old
            if item.buffer is not None:
                m.arrays.pop(item.buffer, None)
            continue
        if isinstance(item, BufferStore):
            idx = tuple(m.eval(i) for i in item.indices)
            value = m.eval(item.value)
            conv = _converter(item.value.dtype, item.buffer.dtype)
            m.store(item.buffer, idx, value if conv is None else conv(value))
        elif isinstance(item, SeqStmt):
            work.extend(reversed(item.stmts))
        elif isinstance(item, For):
            if item.kind == "thread_binding":  # refused, as by the LLVM backend
                raise TIRExecutionError(
                    f"loop '{item.loop_var.name}' is bound to the GPU thread axis "
                    f"{item.thread!r} (T.thread_binding); the TIR interpreter runs CPU kernels "
                    f"only")
            start = m.eval(item.min)
            extent = m.eval(item.extent)
            saved: list[tuple[Var, Any]] = []
            _bind(env, item.loop_var, start, saved)
            work.append(_Restore(saved))
            work.append(_Loop(item.loop_var, int(start), int(start) + int(extent), item.body))
        elif isinstance(item, Block):
            _run_block(m, item, work)
        elif isinstance(item, IfThenElse):
            if m.eval(item.condition):
                work.append(item.then_case)
            elif item.else_case is not None:
                work.append(item.else_case)
        elif isinstance(item, tir.While):
            if m.eval(item.condition):
                work.append(item)  # test again once the body has run
                work.append(item.body)
        elif isinstance(item, tir.AttrStmt):
            work.append(item.body)  # a hint for TVM's lowering
        elif isinstance(item, LetStmt):
            value = m.eval(item.value)
            conv = _converter(item.value.dtype, item.var.dtype)
            saved = []
            _bind(env, item.var, value if conv is None else conv(value), saved)
            work.append(_Restore(saved))
            work.append(item.body)
        elif isinstance(item, Allocate):
            buf = item.buffer
            shape = tuple(int(m.eval(s)) for s in buf.shape)
            if any(s < 0 for s in shape):
                raise TIRExecutionError(f"T.alloc_buffer {buf.name} has negative shape {shape}")
            fill = np.nan if tir.is_float(buf.dtype) else 0
            m.arrays[buf] = np.full(shape, fill, dtype=buf.dtype)
            work.append(_Restore([], buf))
            work.append(item.body)
        elif isinstance(item, Evaluate):
            if isinstance(item.value, tir.Call) and item.value.name == tir.RET:
                raise TIRExecutionError("this PrimFunc returns a value (T.ret / return); the TIR "
                                        "interpreter runs kernels, which return nothing")
            m.eval(item.value)
        else:
            raise TIRExecutionError(f"cannot execute TIR statement node {type(item).__name__}")


def _run_block(m: _Machine, block: Block, work: list[Any]) -> None:
    values = [m.eval(v) for v in block.iter_values]
    saved: list[tuple[Var, Any]] = []
    at_first_reduce = True
    for iv, value in zip(block.iter_vars, values):
        start = m.eval(iv.min) if iv.has_min else 0
        if not iv.has_min:
            extent = m.eval(iv.extent)
            if not 0 <= value < extent:
                raise TIRExecutionError(
                    f"block {block.name}: axis {iv.var.name} is bound to {value}, outside "
                    f"[0, {extent}) in PrimFunc {m.func_name}")
        # A (begin, end) domain is not checked: TVM derives them for the blocks
        # it nests and does not keep them consistent with the binding (its
        # adaptive pooling binds v to an axis over [v, 1), empty for v >= 1);
        # TVM never checks a domain at run time, the binding alone is the value.
        if iv.kind == "R" and value != start:
            at_first_reduce = False
        _bind(m.env, iv.var, value, saved)
    work.append(_Restore(saved))
    work.append(block.body)
    if block.init is not None and at_first_reduce:
        work.append(block.init)


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

def _func_name(func: PrimFunc) -> str:
    return str(func.attrs.get("global_symbol", "(unnamed)"))


def _shape_str(shape: Sequence[PrimExpr]) -> str:
    parts = []
    for s in shape:
        parts.append(str(s.value) if isinstance(s, IntImm) else
                     s.name if isinstance(s, Var) else "<expr>")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _bind_params(m: _Machine, func: PrimFunc, args: Sequence[Any]) -> None:
    name = m.func_name
    params = func.params
    if len(args) != len(params):
        expected = ", ".join(p.name for p in params)
        raise VMError(f"PrimFunc {name} takes {counted(len(params), 'argument')} ({expected}), "
                      f"got {len(args)}")
    buffers: list[tuple[int, Buffer, np.ndarray]] = []
    for pos, (p, a) in enumerate(zip(params, args)):
        if isinstance(p, Var):
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
                if tir.is_float(p.dtype) and isinstance(a, (float, int, np.floating, np.integer)):
                    m.env[p] = np.dtype(p.dtype).type(a)
                    continue
                raise VMError(f"PrimFunc {name}: argument {pos} ({p.name}) must be an integer "
                              f"scalar, got {type(a).__name__}")
            m.env[p] = _immediate(int(a), p.dtype)
        elif isinstance(p, Buffer):
            if not isinstance(a, np.ndarray):
                raise VMError(f"PrimFunc {name}: argument {pos} (buffer {p.name}) must be a numpy "
                              f"array, got {type(a).__name__}")
            if str(a.dtype) != p.dtype:
                raise VMError(f"PrimFunc {name}: argument {pos} (buffer {p.name}) has dtype "
                              f"{a.dtype}, expected {p.dtype}")
            if a.ndim != len(p.shape):
                raise VMError(f"PrimFunc {name}: argument {pos} (buffer {p.name}) has shape "
                              f"{tuple(a.shape)}, expected {len(p.shape)} dimension(s) "
                              f"{_shape_str(p.shape)}")
            buffers.append((pos, p, a))
            m.arrays[p] = a
        else:
            raise VMError(f"PrimFunc {name}: parameter {pos} is a {type(p).__name__}, "
                          "expected a Buffer or a Var")
    # Bind bare symbolic dimensions from the arrays' shapes.
    for pos, buf, arr in buffers:
        for dim, size in zip(buf.shape, arr.shape):
            if isinstance(dim, Var) and dim not in m.env:
                m.env[dim] = int(size)
    # Check every declared dimension against the actual shape.
    for pos, buf, arr in buffers:
        for axis, (dim, size) in enumerate(zip(buf.shape, arr.shape)):
            try:
                want = int(m.eval(dim))
            except TIRExecutionError as exc:
                raise VMError(f"PrimFunc {name}: cannot evaluate dimension {axis} of buffer "
                              f"{buf.name}: {exc}") from None
            if want != size:
                bound = ", ".join(f"{v.name}={m.env[v]}" for v in m.env if isinstance(v, Var))
                raise VMError(f"PrimFunc {name}: argument {pos} (buffer {buf.name}) has shape "
                              f"{tuple(arr.shape)}, but dimension {axis} must be {want} "
                              f"(declared {_shape_str(buf.shape)}"
                              + (f" with {bound}" if bound else "") + ")")


def run_prim_func(func: PrimFunc, args: Sequence[np.ndarray | int], name: str | None = None
                  ) -> None:
    """Execute ``func`` on ``args`` (one per parameter), writing outputs in place.
    Errors name the kernel ``name`` (default: its ``global_symbol``).

    Buffer parameters take numpy arrays of exactly the declared dtype and
    shape (symbolic dimensions are bound from the arrays); scalar ``Var``
    parameters take Python or numpy integers. Argument mismatches raise
    :class:`~phasec.errors.VMError`; undefined behaviour while running (an
    out-of-bounds access, integer division by zero...) raises
    :class:`TIRExecutionError`.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"run_prim_func expects a PrimFunc, got {type(func).__name__}")
    m = _Machine(name or _func_name(func))
    packed = tir.host_calls(func.body)
    if packed:  # refused before anything runs
        raise TIRExecutionError(
            f"PrimFunc {m.func_name} calls {tir.describe_host_call(packed[0])}, which the TIR "
            f"interpreter does not run; phasec's own lowering of an operator computes it in TIR")
    with np.errstate(all="ignore"):
        _bind_params(m, func, args)
        try:
            _run(m, func.body)
        except TIRDivisionByZeroError:
            raise TIRDivisionByZeroError(f"kernel {m.func_name!r}") from None


def eval_prim_expr(expr: PrimExpr, bindings: dict[Var, Any] | None = None) -> Any:
    """Evaluate a scalar TIR expression with the given variable values.

    Integers come back as Python ints, booleans as bools and floats as numpy
    scalars of the expression's dtype.
    """
    m = _Machine("<expr>")
    for var, value in (bindings or {}).items():
        m.env[var] = _immediate(value, var.dtype)
    with np.errstate(all="ignore"):
        return m.eval(expr)
