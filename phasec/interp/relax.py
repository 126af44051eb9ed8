"""The reference interpreter for Relax modules of every phase.

It defines what "the same results" means for every pass and for the fuzzer:
each operator runs through its numpy ``reference`` from the operator
registry, PrimFuncs run through the exact TIR interpreter
(:func:`phasec.interp.tir.run_prim_func`), and packed functions come from
:mod:`phasec.runtime.packed`.

Run-time values:

=====================  ===========================================
Relax value            Python value
=====================  ===========================================
tensor                 ``numpy.ndarray``
tuple                  ``tuple``
shape                  ``tuple`` of ``int``
prim value             ``int`` / ``float`` / ``bool``
string, dtype          ``str``
function, closure      :class:`Closure` (callable from Python)
storage                :class:`Storage`
null                   ``None``
=====================  ===========================================

Evaluation walks binding lists with loops, and calls between Relax functions
go through an explicit stack of generators (a trampoline), so neither the
length of a program nor the depth of its recursion meets Python's recursion
limit; only the static nesting of If/Tuple expressions uses the Python stack.
A call in tail position (its value is the calling function's) replaces its
caller's activation, as on the VM: tail recursion runs in constant memory
and never counts against ``max_call_depth``.

What the VM shares with the interpreter is :mod:`phasec.runtime`'s (storage,
casts, If conditions, the semantics of TIR's operators and intrinsics); the
texts of values in messages and scalar evaluation are in ``_values``,
matching values against struct info in ``matching``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import DivisionByZeroError, IndexOutOfRangeError, PhasecError
from phasec.ir import tir
from phasec.ir.expr import (
    Call, Constant, DataTypeImm, Expr, ExternFunc, Function, GlobalVar, If,
    MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
    DataflowVar,
)
from phasec.ir.module import IRModule
from phasec.op import SYMBOLIC_ATTRS, map_symbolic_attrs
from phasec.ir.struct_info import (
    TensorStructInfo, TupleStructInfo,
)
from phasec.op.memory.view import is_void
from phasec.op.registry import REQUIRED, find_op
from phasec.runtime.packed import get_packed_func
from phasec.runtime.values import (
    DEFAULT_MAX_CALL_DEPTH, STORAGE_ALIGNMENT, InterpError, Storage, cast_scalar,
    depth_exceeded, describe_value, truth,
)
from phasec.interp._values import _MISSING, eval_prim_expr, prim_text, sinfo_text
from phasec.interp.matching import match_struct_info, match_struct_infos
from phasec.interp.tir import run_prim_func

__all__ = [
    "InterpError", "Interpreter", "Closure", "Storage", "run", "evaluate", "evaluate_expr",
    "eval_prim_expr", "match_struct_info", "match_struct_infos", "normalize_value", "sinfo_text",
    "prim_text", "describe_value", "call_prim_func",
    "DEFAULT_MAX_CALL_DEPTH", "STORAGE_ALIGNMENT",
]




# ---------------------------------------------------------------------------
# Run-time objects
# ---------------------------------------------------------------------------



class Closure:
    """A Relax function value: a function plus what it captured.

    Nested functions capture their defining environment; ``make_closure``
    captures explicit values, passed after the call's own arguments (TVM's
    convention: the lifted function's captured parameters come last).
    Calling a Closure from Python runs it in its interpreter.
    """

    __slots__ = ("interp", "func", "env", "captured", "name")

    def __init__(self, interp: "Interpreter", func: Function, env: "_Env | None",
                 captured: tuple = (), name: str = "") -> None:
        self.interp = interp
        self.func = func
        self.env = env
        self.captured = captured
        self.name = name

    def __call__(self, *args: Any) -> Any:
        return self.interp.apply(self, args)

    def __repr__(self) -> str:
        return f"<Closure {self.name or 'anonymous'}>"


class _Kernel:
    """A PrimFunc used as a value (called in destination-passing style)."""

    __slots__ = ("name", "func", "runner")

    def __init__(self, name: str, func: tir.PrimFunc,
                 runner: "KernelRunner | None" = None) -> None:
        self.name = name
        self.func = func
        self.runner = runner or call_prim_func

    def __call__(self, *args: Any) -> tuple:
        self.runner(self.name, self.func, args)
        return ()

    def __repr__(self) -> str:
        return f"<PrimFunc {self.name}>"


#: How the interpreter runs a PrimFunc: ``runner(name, prim_func, args)``.
KernelRunner = Callable[[str, tir.PrimFunc, Sequence[Any]], None]


def call_prim_func(name: str, func: tir.PrimFunc, args: Sequence[Any]) -> None:
    """Run PrimFunc ``func`` (named ``name`` in errors) on ``args`` (inputs,
    outputs and shape values: destination-passing style) with the exact TIR
    interpreter, as the interpreter calls a kernel; a kernel failing on its
    inputs raises an :class:`InterpError` (an out-of-range index: an
    IndexOutOfRangeError naming the kernel)."""
    nparams = len(func.params)
    if len(args) != nparams:
        raise InterpError(f"PrimFunc {name!r} takes {nparams} arguments (inputs, outputs and "
                          f"shape values), got {len(args)}")
    try:
        run_prim_func(func, list(args), name)
    except IndexOutOfRangeError as exc:
        raise exc.at(f"kernel {name!r}") from None
    except PhasecError:
        raise
    except Exception as exc:  # a kernel failing on our inputs is a user-facing error
        raise InterpError(f"PrimFunc {name!r} failed: {type(exc).__name__}: {exc}") from exc


class LocatedDivisionByZero(InterpError, DivisionByZeroError):
    """An integer division by zero in an interpreted program (an operator's
    reference or a kernel): the DivisionByZeroError the VM raises too, its
    message naming the function and the binding."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        InterpError.__init__(self, message)


class _Env:
    """Variable bindings of one function activation; ``parent`` is the
    environment a nested function captured. Keys are Relax Vars and TIR Vars
    (symbolic dimensions), both compared by identity."""

    __slots__ = ("vars", "parent")

    def __init__(self, parent: "_Env | None" = None) -> None:
        self.vars: dict[Any, Any] = {}
        self.parent = parent

    def lookup(self, var: Any) -> Any:
        env: _Env | None = self
        while env is not None:
            value = env.vars.get(var, _MISSING)
            if value is not _MISSING:
                return value
            env = env.parent
        return _MISSING




class _Invoke:
    """Request from an evaluating generator to the trampoline: call a Relax
    function. ``tail``: the requesting activation returns the result
    unchanged, so the callee replaces it on the stack (a proper tail call)."""

    __slots__ = ("closure", "args", "tail")

    def __init__(self, closure: Closure, args: tuple) -> None:
        self.closure = closure
        self.args = args
        self.tail = False


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------

_LEAF_TYPES = frozenset({Var, DataflowVar, Constant, ShapeExpr, PrimValue, StringImm,
                         DataTypeImm, GlobalVar, ExternFunc, Op})


class Interpreter:
    """Evaluates the functions of one module on numpy values.

    ``Interpreter(mod)("main", x, y)`` (or ``.call("main", x, y)``) runs
    ``main``; :func:`run` is the one-shot form.
    """

    def __init__(self, mod: IRModule, *, max_call_depth: int = DEFAULT_MAX_CALL_DEPTH,
                 kernel_runner: "KernelRunner | None" = None) -> None:
        if not isinstance(mod, IRModule):
            raise TypeError(f"Interpreter needs an IRModule, not {type(mod).__name__}")
        if isinstance(max_call_depth, bool) or not isinstance(max_call_depth, int) \
                or max_call_depth < 1:
            raise InterpError(f"max_call_depth must be an int >= 1, not {max_call_depth!r}")
        self.mod = mod
        self.max_call_depth = max_call_depth
        # how PrimFuncs run: the exact TIR interpreter unless the caller gives
        # another runner (phasec.testing.bisect: kernels compiled with LLVM)
        self.kernel_runner: KernelRunner = kernel_runner or call_prim_func
        self._globals: dict[str, Any] = {}
        self._op_cache: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
        self._special: dict[str, Callable[[Call, list, _Env], Any]] = {
            "relax.call_tir": self._op_call_tir,
            "relax.call_tir_with_grad": self._op_call_tir,
            "relax.call_tir_inplace": self._op_call_tir_inplace,
            "relax.vm.call_tir_dyn": self._op_call_tir_dyn,
            "relax.call_dps_packed": self._op_call_dps_packed,
            "relax.call_pure_packed": self._op_call_packed_op,
            "relax.call_packed": self._op_call_packed_op,
            "relax.make_closure": self._op_make_closure,
            "relax.invoke_closure": self._op_invoke_closure,
            "relax.invoke_pure_closure": self._op_invoke_closure,
            "relax.builtin.alloc_tensor": self._op_builtin_alloc_tensor,
            "relax.memory.alloc_storage": self._op_alloc_storage,
            "relax.vm.alloc_storage": self._op_alloc_storage,
            "relax.memory.alloc_tensor": self._op_alloc_tensor,
            "relax.vm.alloc_tensor": self._op_alloc_tensor,
            "relax.memory.kill_storage": self._op_kill,
            "relax.memory.kill_tensor": self._op_kill,
            "relax.vm.kill_object": self._op_kill,
            "relax.null_value": lambda call, args, env: None,
            "relax.call_inplace_packed": self._op_call_packed_op,
            "relax.memory.view": self._op_memory_view,
            "relax.memory.ensure_zero_offset": self._op_ensure_zero_offset,
        }

    # -- public API --------------------------------------------------------
    def call(self, entry: str, *args: Any) -> Any:
        """Run function ``entry`` of the module on ``args`` and return its result."""
        if not isinstance(entry, str):
            raise InterpError(f"the entry function name must be a string, not {entry!r}")
        if entry not in self.mod:
            names = ", ".join(name for name, _ in self.mod.relax_functions()) or "(none)"
            raise InterpError(f"module has no function {entry!r}; its Relax functions: {names}")
        args = tuple(np.asarray(a) if isinstance(a, np.generic) else a for a in args)
        callee = self._global_value(entry)
        if isinstance(callee, _Kernel):
            return callee(*args)
        return self.apply(callee, args)

    __call__ = call

    def apply(self, callee: Any, args: Sequence[Any]) -> Any:
        """Call a function value (a Closure or any Python callable) on ``args``."""
        if isinstance(callee, Closure):
            return self._trampoline(self._activation(callee, tuple(args)))
        if callable(callee):
            return callee(*args)
        raise InterpError(f"cannot call {describe_value(callee)}: it is not a function")

    def eval_expr(self, expr: Expr, bindings: Mapping[Var, Any] | None = None) -> Any:
        """Evaluate one expression; its free variables take values from ``bindings``."""
        env = _Env()
        if bindings:
            env.vars.update(bindings)
        return self._trampoline(self._eval(expr, env))

    # -- driver --------------------------------------------------------------
    def _trampoline(self, gen: Any) -> Any:
        # Each Relax call is a generator on this explicit stack: a callee's
        # _Invoke request pushes a new activation, its return value is sent
        # back to the caller. A tail call's activation replaces its caller's
        # (whose generator is dropped: it would only have returned the value),
        # so recursion in tail position (an ONNX Loop) runs in constant stack
        # and memory, and only other calls count against max_call_depth.
        stack = [gen]
        sent: Any = None
        limit = self.max_call_depth
        while True:
            try:
                request = stack[-1].send(sent)
            except StopIteration as stop:
                stack.pop()
                if not stack:
                    return stop.value
                sent = stop.value
                continue
            if request.tail:
                stack[-1] = self._activation(request.closure, request.args)
            else:
                if len(stack) >= limit:
                    raise InterpError(depth_exceeded(limit, request.closure.name or "a closure",
                                                     "Interpreter"))
                stack.append(self._activation(request.closure, request.args))
            sent = None

    def _activation(self, closure: Closure, args: tuple) -> Any:
        func = closure.func
        name = closure.name or "<anonymous function>"
        if closure.captured:
            args = args + closure.captured
        if len(args) != len(func.params):
            expected = len(func.params) - len(closure.captured)
            raise InterpError(f"function {name!r} takes {_plural(expected, 'argument')}, "
                              f"got {len(args) - len(closure.captured)}")
        env = _Env(closure.env)
        vars_ = env.vars
        # All parameters bind their symbolic variables together (see
        # match_struct_infos): a compound dim may use a later parameter's var.
        match_struct_infos([(arg, param.struct_info, f"function {name!r}, parameter "
                             f"{param.name_hint!r}")
                            for param, arg in zip(func.params, args)
                            if param.struct_info is not None],
                           env.lookup, vars_.__setitem__)
        for param, arg in zip(func.params, args):
            vars_[param] = arg
        return self._eval_seq(func.body, env, name, True)

    def _global_value(self, name: str) -> Any:
        value = self._globals.get(name)
        if value is None:
            func = self.mod.functions.get(name)
            if func is None:
                raise InterpError(f"module has no function {name!r}")
            value = (_Kernel(name, func, self.kernel_runner) if isinstance(func, tir.PrimFunc)
                     else Closure(self, func, None, (), name))
            self._globals[name] = value
        return value

    # -- evaluation (generators: they yield _Invoke requests) -------------------
    def _eval_seq(self, seq: SeqExpr, env: _Env, fname: str, tail: bool = False):
        """Evaluate ``seq``; ``tail``: its value is the activation's result
        (so is then that of its last binding when the body is that variable)."""
        vars_ = env.vars
        leaf = self._leaf
        last = _tail_binding(seq) if tail else None
        for block in seq.blocks:
            for binding in block.bindings:
                value = binding.value
                try:
                    if type(value) in _LEAF_TYPES:
                        result = leaf(value, env)
                    elif type(value) is Call:
                        result = self._call(value, env)
                        if type(result) is _Invoke:
                            result.tail = binding is last
                            result = yield result
                    elif type(value) is Function:
                        result = Closure(self, value, env, (), binding.var.name_hint)
                    else:
                        result = yield from self._eval(value, env, fname, binding is last)
                    if type(binding) is MatchCast:
                        match_struct_info(result, binding.struct_info, env.lookup,
                                          vars_.__setitem__, "match_cast")
                except PhasecError as exc:
                    if getattr(exc, "located", False):
                        raise
                    message = f"{_where(fname, binding)}: {exc}"
                    located = (LocatedDivisionByZero(exc.where, message)
                               if isinstance(exc, DivisionByZeroError) else InterpError(message))
                    located.located = True
                    # chain to the root cause (e.g. the packed function's own exception)
                    cause = exc.__cause__ if isinstance(exc, InterpError) and exc.__cause__ else exc
                    raise located from cause
                vars_[binding.var] = result
        body = seq.body
        if type(body) in _LEAF_TYPES:
            return leaf(body, env)
        return (yield from self._eval(body, env, fname, tail))

    def _eval(self, expr: Expr, env: _Env, fname: str = "<expr>", tail: bool = False):
        """Evaluate ``expr``; ``tail``: its value is the activation's result."""
        t = type(expr)
        if t in _LEAF_TYPES:
            return self._leaf(expr, env)
        if t is Call:
            result = self._call(expr, env)
            if type(result) is _Invoke:
                result.tail = tail
                result = yield result
            return result
        if t is Tuple:
            fields = []
            for f in expr.fields:
                fields.append(self._leaf(f, env) if type(f) in _LEAF_TYPES
                              else (yield from self._eval(f, env, fname)))
            return tuple(fields)
        if t is TupleGetItem:
            tup = yield from self._eval(expr.tuple_value, env, fname)
            return _get_item(tup, expr.index)
        if t is If:
            cond = yield from self._eval(expr.cond, env, fname)
            branch = expr.true_branch if truth(cond) else expr.false_branch
            return (yield from self._eval_seq(branch, env, fname, tail))
        if t is SeqExpr:
            return (yield from self._eval_seq(expr, env, fname, tail))
        if t is Function:
            return Closure(self, expr, env, (), "")
        raise InterpError(f"cannot evaluate a {t.__name__} expression")

    def _value(self, expr: Expr, env: _Env) -> Any:
        """Value of a call operand: a leaf or a (nested) tuple of leaves."""
        t = type(expr)
        if t in _LEAF_TYPES:
            return self._leaf(expr, env)
        if t is Tuple:
            return tuple(self._value(f, env) for f in expr.fields)
        if t is TupleGetItem:
            return _get_item(self._value(expr.tuple_value, env), expr.index)
        # Not A-normal form: evaluate fully (may run Relax calls).
        return self._trampoline(self._eval(expr, env))

    def _leaf(self, expr: Expr, env: _Env) -> Any:
        t = type(expr)
        if t is Var or t is DataflowVar:
            value = env.lookup(expr)
            if value is _MISSING:
                raise InterpError(f"variable {expr.name_hint!r} is used before it is defined")
            return value
        if t is Constant:
            return expr.data
        if t is ShapeExpr:
            lookup = self._sym_lookup(env)
            return tuple(int(eval_prim_expr(v, lookup)) for v in expr.values)
        if t is PrimValue:
            return cast_scalar(eval_prim_expr(expr.value, self._sym_lookup(env)), expr.value.dtype)
        if t is StringImm or t is DataTypeImm:
            return expr.value
        if t is GlobalVar:
            return self._global_value(expr.name_hint)
        if t is ExternFunc:
            return get_packed_func(expr.global_symbol)
        raise InterpError(f"operator {expr.name!r} cannot be used as a value")

    @staticmethod
    def _sym_lookup(env: _Env) -> Callable[[tir.Var], Any]:
        def lookup(var: tir.Var) -> Any:
            value = env.lookup(var)
            if value is _MISSING:
                raise InterpError(f"symbolic variable {var.name} is not bound (no parameter "
                                  f"or match_cast defines it)")
            return value
        return lookup

    # -- calls -----------------------------------------------------------------
    def _call(self, call: Call, env: _Env) -> Any:
        """Evaluate a call; returns its value, or an _Invoke for a Relax callee."""
        op = call.op
        t = type(op)
        if t is Op:
            args = [self._value(a, env) for a in call.args]
            special = self._special.get(op.name)
            if special is not None:
                return special(call, args, env)
            if op.name in SYMBOLIC_ATTRS and call.attrs:
                return self._op_reference(op.name, call, args, self._attr_values(call, env))
            return self._op_reference(op.name, call, args)
        if t is ExternFunc:
            args = [self._value(a, env) for a in call.args]
            return self._call_packed(op.global_symbol, args)
        callee = self._value(op, env)
        args = tuple(self._value(a, env) for a in call.args)
        return self._invoke(callee, args)

    def _invoke(self, callee: Any, args: tuple) -> Any:
        if isinstance(callee, Closure):
            return _Invoke(callee, args)
        if callable(callee):
            return normalize_value(callee(*args))
        raise InterpError(f"cannot call {describe_value(callee)}: it is not a function")

    def _attr_values(self, call: Call, env: _Env) -> Mapping[str, Any]:
        """The call's attributes with symbolic entries (strided_slice's
        ``begin=(index,)``) evaluated in ``env``."""
        lookup = self._sym_lookup(env)
        return map_symbolic_attrs(call.attrs, lambda e: int(eval_prim_expr(e, lookup)))

    def _op_reference(self, name: str, call: Call, args: list,
                      attrs: Mapping[str, Any] | None = None) -> Any:
        entry = self._op_cache.get(name)
        if entry is None:
            opdef = find_op(name)
            if opdef is None:
                raise InterpError(f"unknown operator {name!r}")
            if opdef.reference is None:
                raise InterpError(f"operator {name!r} has no reference implementation to interpret")
            defaults = {k: v for k, v in opdef.attrs.items() if v is not REQUIRED}
            entry = self._op_cache[name] = (opdef.reference, defaults)
        reference, kwargs = entry
        if attrs is None:
            attrs = call.attrs
        if attrs:
            kwargs = {**kwargs, **attrs}
        try:
            return normalize_value(reference(*args, **kwargs))
        except PhasecError:
            raise
        except Exception as exc:
            raise InterpError(f"operator {name!r} failed on "
                              f"({', '.join(describe_value(a) for a in args)}): "
                              f"{type(exc).__name__}: {exc}") from exc

    def _call_packed(self, name: str, args: Sequence[Any]) -> Any:
        func = get_packed_func(name)
        try:
            return normalize_value(func(*args))
        except PhasecError:
            raise
        except Exception as exc:
            raise InterpError(f"packed function {name!r} raised {type(exc).__name__}: {exc}") from exc

    def _alloc_outputs(self, call: Call, env: _Env, skip: tuple[int, ...] = ()) -> list[np.ndarray]:
        """Zeroed arrays for the outputs (those whose ``skip`` entry is >= 0,
        outputs written in place, left out)."""
        if not call.sinfo_args:
            raise InterpError(f"{_op_name(call)} needs the output struct info (out_sinfo)")
        out = call.sinfo_args[0]
        fields = out.fields if isinstance(out, TupleStructInfo) else (out,)
        lookup = self._sym_lookup(env)
        arrays = []
        for i, sinfo in enumerate(fields):
            if i < len(skip) and skip[i] >= 0:
                continue
            if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype == "void":
                raise InterpError(f"{_op_name(call)}: output {sinfo_text(sinfo)} needs a known "
                                  f"shape and dtype")
            shape = tuple(int(eval_prim_expr(d, lookup)) for d in sinfo.shape)
            arrays.append(np.zeros(shape, dtype=sinfo.dtype))
        return arrays

    @staticmethod
    def _pack_outputs(call: Call, outs: list[np.ndarray]) -> Any:
        return tuple(outs) if isinstance(call.sinfo_args[0], TupleStructInfo) else outs[0]

    def _op_call_tir(self, call: Call, args: list, env: _Env) -> Any:
        kernel = args[0]
        if not isinstance(kernel, _Kernel):
            raise InterpError(f"call_tir needs a PrimFunc of the module, got {describe_value(kernel)}")
        inputs = _as_tuple(args[1]) if len(args) > 1 else ()
        tir_vars = tuple(args[2]) if len(args) > 2 and args[2] is not None else ()
        outs = self._alloc_outputs(call, env)
        kernel.runner(kernel.name, kernel.func, [*inputs, *outs, *tir_vars])
        return self._pack_outputs(call, outs)

    def _op_call_tir_inplace(self, call: Call, args: list, env: _Env) -> Any:
        # Functional semantics: the kernel writes into copies of the arguments it
        # overwrites, which become those outputs (the same values TVM's in-place
        # call leaves, since the overwritten arguments are not used afterwards).
        kernel = args[0]
        if not isinstance(kernel, _Kernel):
            raise InterpError(f"call_tir_inplace needs a PrimFunc of the module, got "
                              f"{describe_value(kernel)}")
        inputs = list(_as_tuple(args[1]) if len(args) > 1 else ())
        tir_vars = tuple(args[2]) if len(args) > 2 and args[2] is not None else ()
        indices = tuple(call.attrs["inplace_indices"])
        for k in indices:
            if k >= 0:
                inputs[k] = np.array(inputs[k], copy=True)
        fresh = iter(self._alloc_outputs(call, env, skip=indices))
        outs = [inputs[k] if k >= 0 else next(fresh) for k in indices]
        new_outs = [o for o, k in zip(outs, indices) if k < 0]
        kernel.runner(kernel.name, kernel.func, [*inputs, *new_outs, *tir_vars])
        return self._pack_outputs(call, outs)

    def _op_call_tir_dyn(self, call: Call, args: list, env: _Env) -> Any:
        # TVM's lowered form: (kernel, (tensors..., shape)): shape values become scalars.
        kernel = args[0]
        flat: list[Any] = []
        for a in _as_tuple(args[1]):
            flat.extend(a) if isinstance(a, tuple) else flat.append(a)
        kernel(*flat)
        return ()

    def _op_call_dps_packed(self, call: Call, args: list, env: _Env) -> Any:
        func = args[0]
        inputs = _as_tuple(args[1]) if len(args) > 1 else ()
        outs = self._alloc_outputs(call, env)
        try:
            func(*inputs, *outs)
        except PhasecError:
            raise
        except Exception as exc:
            raise InterpError(f"call_dps_packed: {_callee_name(call)} raised "
                              f"{type(exc).__name__}: {exc}") from exc
        return self._pack_outputs(call, outs)

    def _op_call_packed_op(self, call: Call, args: list, env: _Env) -> Any:
        if not args:
            raise InterpError(f"{_op_name(call)} needs the packed function as first operand")
        func, rest = args[0], args[1:]
        try:
            return normalize_value(func(*rest))
        except PhasecError:
            raise
        except Exception as exc:
            raise InterpError(f"{_op_name(call)}: {_callee_name(call)} raised "
                              f"{type(exc).__name__}: {exc}") from exc

    def _op_ensure_zero_offset(self, call: Call, args: list, env: _Env) -> Any:
        return get_packed_func("vm.builtin.ensure_zero_offset")(args[0])

    def _op_memory_view(self, call: Call, args: list, env: _Env) -> Any:
        # omitted operands (R.tuple(), R.null_value()): the input's shape, dtype, offset 0
        data, shape, dtype, offset = args
        ops = call.args
        if is_void(ops[1]):
            shape = np.shape(data)
        if is_void(ops[2]) or dtype is None:
            dtype = np.asarray(data).dtype
        if is_void(ops[3]):
            offset = 0
        return get_packed_func("runtime.TVMTensorCreateView")(data, shape, dtype, offset)

    def _op_make_closure(self, call: Call, args: list, env: _Env) -> Any:
        func = args[0]
        captured = _as_tuple(args[1]) if len(args) > 1 else ()
        if not isinstance(func, Closure):
            raise InterpError(f"make_closure needs a Relax function, got {describe_value(func)}")
        return Closure(self, func.func, func.env, func.captured + captured, func.name)

    def _op_invoke_closure(self, call: Call, args: list, env: _Env) -> Any:
        callee = args[0]
        call_args = _as_tuple(args[1]) if len(args) > 1 else ()
        return self._invoke(callee, call_args)

    # Memory builtins: operands are found by the names the registry gives them,
    # falling back to TVM's operand order.
    def _operands(self, call: Call, args: list, tvm_order: Sequence[str]) -> dict[str, Any]:
        opdef = find_op(call.op.name)
        names = opdef.args if opdef is not None else tvm_order
        named = dict(zip(names, args))
        if opdef is not None:
            named.update({k: v for k, v in opdef.attrs.items() if k not in named})
        named.update(call.attrs)
        return named

    def _op_builtin_alloc_tensor(self, call: Call, args: list, env: _Env) -> np.ndarray:
        ops = self._operands(call, args, ("shape", "dtype", "runtime_device_index"))
        shape, dtype = ops.get("shape"), ops.get("dtype")
        return np.zeros(tuple(int(d) for d in _as_tuple(shape)), dtype=_dtype_of(dtype))

    def _op_alloc_storage(self, call: Call, args: list, env: _Env) -> Storage:
        ops = self._operands(call, args, ("size", "virtual_device_index", "storage_scope", "dtype"))
        # The size is in bytes (as in TVM); the dtype operand only names the
        # element type the planner had in mind.
        size = ops.get("size", ops.get("shape"))
        return Storage(math.prod(int(d) for d in _as_tuple(size)))

    def _op_alloc_tensor(self, call: Call, args: list, env: _Env) -> np.ndarray:
        ops = self._operands(call, args, ("storage", "offset", "shape", "dtype"))
        storage = ops.get("storage")
        if not isinstance(storage, Storage):
            raise InterpError(f"{_op_name(call)} needs a storage, got {describe_value(storage)}")
        offset = int(ops.get("offset", 0) or 0)
        return storage.tensor(offset, _as_tuple(ops.get("shape")), _dtype_of(ops.get("dtype")))

    def _op_kill(self, call: Call, args: list, env: _Env) -> tuple:
        # Nothing to free: Python's reference counting releases the memory
        # once the last binding dies. (The VM drops its register here.)
        return ()


def _tail_binding(seq: SeqExpr) -> Any:
    """The binding of ``seq`` whose value is its value (its body is that
    binding's variable, bound last and not by a match_cast, whose check
    would follow the value), or None."""
    if not seq.blocks or not seq.blocks[-1].bindings:
        return None
    last = seq.blocks[-1].bindings[-1]
    return last if type(last) is not MatchCast and last.var is seq.body else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _where(fname: str, binding: Any) -> str:
    span = getattr(binding, "span", None) or getattr(binding.value, "span", None)
    loc = f" ({span})" if span is not None else ""
    return f"function {fname!r}, binding {binding.var.name_hint!r}{loc}"


def _op_name(call: Call) -> str:
    op = call.op
    return getattr(op, "name", None) or getattr(op, "global_symbol", None) or "call"


def _callee_name(call: Call) -> str:
    first = call.args[0] if call.args else None
    if isinstance(first, ExternFunc):
        return f"packed function {first.global_symbol!r}"
    return "the callee"


def normalize_value(value: Any) -> Any:
    """Results of Python code (operator references, packed functions) as
    interpreter values: numpy scalars become 0-d arrays (numpy turns 0-d
    arithmetic results into scalars), lists become tuples."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, (tuple, list)):
        return tuple(normalize_value(v) for v in value)
    return value


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _dtype_of(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, np.dtype):
        return str(value)
    raise InterpError(f"expected a dtype, got {describe_value(value)}")


def _get_item(tup: Any, index: int) -> Any:
    if not isinstance(tup, tuple):
        raise InterpError(f"cannot take item {index} of {describe_value(tup)}: not a tuple")
    if not -len(tup) <= index < len(tup):
        raise InterpError(f"tuple index {index} out of range for a tuple of {len(tup)} fields")
    return tup[index]


# ---------------------------------------------------------------------------
# One-shot helpers
# ---------------------------------------------------------------------------

def run(mod: IRModule, *args: Any, entry: str = "main",
        max_call_depth: int = DEFAULT_MAX_CALL_DEPTH,
        kernel_runner: "KernelRunner | None" = None) -> Any:
    """Interpret ``mod[entry](*args)`` and return the result.

    Works for modules of every phase; arguments are numpy arrays (tensors),
    tuples, tuples of ints (shapes) or Python scalars (prim values).
    ``kernel_runner(name, prim_func, args)`` runs PrimFuncs in
    destination-passing style instead of the exact (slow) TIR interpreter.
    """
    return Interpreter(mod, max_call_depth=max_call_depth,
                       kernel_runner=kernel_runner).call(entry, *args)


#: Alias of :func:`run` (``phasec.evaluate(mod, x, entry="main")``).
evaluate = run


def evaluate_expr(expr: Expr, mod: IRModule | None = None,
                  bindings: Mapping[Var, Any] | None = None) -> Any:
    """Evaluate one expression (e.g. a call whose operands are constants, as
    FoldConstant does); free variables take their values from ``bindings`` and
    GlobalVars refer to ``mod``."""
    return Interpreter(mod if mod is not None else IRModule()).eval_expr(expr, bindings)
