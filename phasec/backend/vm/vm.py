"""The virtual machine: runs an :class:`Executable` on numpy arrays.

    exe = phasec.backend.vm.codegen(mod)          # or phasec.build(mod)
    vm = VirtualMachine(exe)                      # kernels compiled with LLVM
    out = vm["main"](x, w)

The bytecode is decoded once, when the VM is created, into plain tuples whose
callees are already resolved (packed functions, kernels, builtins) and whose
shape checks are compiled into closures; the dispatch loop is a flat
``if``/``elif`` chain over small integer opcodes. Relax calls push frames on
an explicit stack, so program recursion never meets Python's recursion limit.

Memory: ``vm.alloc_storage`` allocates an aligned byte buffer and
``vm.alloc_tensor`` makes an ndarray view into it; ``kill`` drops a
register's reference. :attr:`VirtualMachine.stats` counts allocations and the
peak of live allocated bytes (for the memory-planning benchmark).
"""

from __future__ import annotations

import operator
from time import perf_counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import DivisionByZeroError, VMError, counted, with_location
from phasec.interp.relax import normalize_value
from phasec.ir.intrinsics import SCALAR_INTRINSICS
from phasec.runtime.binary_ops import SCALAR_BINARY
from phasec.runtime.packed import find_packed_func, get_packed_func
from phasec.runtime.values import cast_scalar, describe_value, truth
from phasec.script.checks import int_range_problem
from phasec.backend.vm import bytecode as bc
from phasec.backend.vm.bytecode import CalleeKind
from phasec.backend.interrupt import armed, short_call
from phasec.backend.vm.executable import Executable
from phasec.backend.vm.memory import VMMemory

__all__ = ["VirtualMachine", "VMClosure", "DEFAULT_MAX_CALL_DEPTH"]

#: Deepest chain of Relax calls before the VM stops (runaway recursion guard).
DEFAULT_MAX_CALL_DEPTH = 100_000

#: A call of a function of constant shapes that took less than this runs
#: unarmed the next time (see VirtualMachine._invoke_entry): Ctrl-C then
#: waits at most about this long.
SHORT_CALL_SECONDS = 0.002


def _static_params(nparams: int, code: Sequence[bc.Instruction]) -> bool:
    """Whether every parameter register is checked as a tensor of constant
    shape and dtype (the function then does the same work on every call)."""
    static = {ins.src for ins in code
              if type(ins) is bc.Match and _static_tensor_pattern(ins.pattern) is not None}
    return nparams > 0 and all(r in static for r in range(nparams))

# Decoded opcodes, roughly in order of frequency (the dispatch chain tests
# them in this order).
_KERNEL, _PACKED, _BUILTIN, _MOVE, _CALL, _RET, _MATCH, _IF, _GOTO, _CLOSURE_CALL, \
    _MAKE_TUPLE, _GET_ITEM, _MAKE_SHAPE, _MAKE_PRIM, _MAKE_CLOSURE, _KILL, _LOAD = range(17)

_EMPTY: tuple = ()
_NEEDS_NORMALIZING = (np.generic, list, tuple)


class VMClosure:
    """A function value inside the VM: a function of the executable plus the
    values it captured (passed after the call's own arguments). Calling it
    from Python (e.g. from a packed function) runs it on its VM."""

    __slots__ = ("vm", "func_index", "captured")

    def __init__(self, vm: "VirtualMachine", func_index: int, captured: tuple) -> None:
        self.vm = vm
        self.func_index = func_index
        self.captured = captured

    @property
    def name(self) -> str:
        return self.vm._funcs[self.func_index].name

    def __call__(self, *args: Any) -> Any:
        return self.vm._execute(self.func_index, args + self.captured)

    def __repr__(self) -> str:
        return f"<VMClosure {self.name} captured={len(self.captured)}>"


class _Decoded:
    """A function ready to run: decoded code, initial register file."""

    __slots__ = ("name", "params", "nparams", "code", "template", "start", "source",
                 "compiled", "static", "short")

    def __init__(self, name: str, params: tuple[str, ...], code: list, template: list,
                 start: int, source: Sequence[bc.Instruction]) -> None:
        self.name = name
        self.params = params
        self.nparams = len(params)
        self.code = code
        self.template = template
        self.start = start
        self.source = source
        #: straight-line functions: the code as one generated Python function
        #: ``compiled(args)`` (see _compile_straight_line); None otherwise
        self.compiled: Callable[[tuple], Any] | None = None
        #: every parameter is a tensor of constant shape (so each call does
        #: the same work), and the last call took under SHORT_CALL_SECONDS:
        #: see VirtualMachine._invoke_entry
        self.static = _static_params(len(params), source)
        self.short = False


class _FunctionHandle:
    """``vm["main"]``: calling it runs the function."""

    __slots__ = ("vm", "index", "name")

    def __init__(self, vm: "VirtualMachine", index: int, name: str) -> None:
        self.vm = vm
        self.index = index
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function; arguments by position or by parameter name
        (``vm["main"](x=x, w=w)``, as ONNX Runtime takes inputs by name)."""
        if kwargs:
            args = self._by_position(args, kwargs)
        return self.vm._invoke_entry(self.index, args)

    def _by_position(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        params = self.vm.exe.functions[self.index].params
        bound: list[Any] = list(args) + [_MISSING] * max(0, len(params) - len(args))
        for key, value in kwargs.items():
            if key not in params:
                raise VMError(f"function {self.name!r} has no parameter {key!r}; its "
                              f"parameters are: {', '.join(params) or '(none)'}")
            at = params.index(key)
            if at < len(args):
                raise VMError(f"function {self.name!r} got parameter {key!r} twice (by position "
                              f"and by name)")
            bound[at] = value
        missing = [p for p, v in zip(params, bound) if v is _MISSING]
        if missing:
            raise VMError(f"function {self.name!r} is missing {counted(len(missing), 'argument')}: "
                          f"{', '.join(missing)}")
        return tuple(bound)

    def __repr__(self) -> str:
        return f"<VM function {self.name}>"


_MISSING = object()


class VirtualMachine(VMMemory):
    """Runs an Executable.

    Args:
        exe: the executable.
        kernels: how PrimFuncs run: ``"llvm"`` (native code, the default),
            ``"interp"`` (the exact TIR interpreter) or a mapping from kernel
            name to a callable taking the kernel's arguments.
        max_call_depth: runaway-recursion guard.
    """

    def __init__(self, exe: Executable, kernels: str | Mapping[str, Callable[..., Any]] = "llvm",
                 *, max_call_depth: int = DEFAULT_MAX_CALL_DEPTH) -> None:
        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine needs an Executable, not {type(exe).__name__}")
        self.exe = exe
        self.max_call_depth = _check_max_call_depth(max_call_depth)
        if isinstance(kernels, str):
            self.kernels: Mapping[str, Callable[..., Any]] = exe.kernels(kernels)
        elif isinstance(kernels, Mapping):
            missing = sorted(set(exe.prim_funcs) - set(kernels))
            if missing:
                raise VMError(f"no kernel implementation given for {', '.join(missing)}")
            uncallable = sorted(k for k in exe.prim_funcs if not callable(kernels[k]))
            if uncallable:
                raise VMError(f"the kernel implementation of {', '.join(uncallable)} is not "
                              f"callable")
            self.kernels = kernels
        else:
            raise VMError(f"VirtualMachine(kernels=...) takes 'llvm', 'interp' or a mapping "
                          f"from kernel name to callable, not {type(kernels).__name__}")
        self._init_memory()
        self._funcs_compiled: list[str] = []
        self._builtins: dict[str, Callable[..., Any]] = {
            "vm.alloc_storage": self._alloc_storage,
            "vm.alloc_tensor": self._alloc_tensor,
            "vm.empty": self._empty,
            "vm.get_packed": get_packed_func,
        }
        self._funcs = [self._decode(f) for f in exe.functions]

    # -- public API ----------------------------------------------------------------
    def __getitem__(self, name: str) -> _FunctionHandle:
        index = self.exe.func_index.get(name)
        if index is None:
            raise VMError(f"the executable has no function {name!r}; it has: "
                          f"{', '.join(self.exe.function_names()) or '(none)'}")
        return _FunctionHandle(self, index, name)

    def invoke(self, name: str, *args: Any) -> Any:
        """``vm.invoke("main", x)`` is ``vm["main"](x)``."""
        return self[name](*args)

    # -- decoding ------------------------------------------------------------------------
    def _decode(self, f: bc.VMFunction) -> _Decoded:
        consts = self.exe.constants
        template: list[Any] = [None] * f.num_regs
        # Leading load_const instructions (the codegen's prologue) become the
        # initial register file: constants then cost nothing per call.
        start = 0
        while start < len(f.code) and type(f.code[start]) is bc.LoadConst:
            ins = f.code[start]
            template[ins.dst] = consts[ins.index]
            start += 1
        # Registers that hold a constant for the whole function: set by the
        # prologue and written by nothing else.
        written: set[int] = set(range(len(f.params)))
        for ins in f.code[start:]:
            written.update(ins.registers_written())
        self._consts = {f.code[i].dst: template[f.code[i].dst] for i in range(start)
                        if f.code[i].dst not in written}
        self._arg_regs: dict[int, tuple[int, ...]] = {}
        code = [self._decode_instr(ins, pc, f) for pc, ins in enumerate(f.code)]
        decoded = _Decoded(f.name, f.params, code, template, start, f.code)
        decoded.compiled = self._compile_straight_line(decoded, self._arg_regs)
        return decoded

    def _compile_straight_line(self, f: _Decoded, arg_regs: Mapping[int, tuple[int, ...]]
                               ) -> Callable[[tuple], Any] | None:
        """One generated Python function running the whole of ``f``, when ``f``
        is straight-line code (no jumps, no calls of VM functions or closures):
        each instruction becomes one line, so running the function costs its
        calls and register moves but no dispatch. Used for entry calls (where
        there are no caller frames); errors are located with the same message
        as in the dispatch loop (the failing line gives the instruction).

        Only generated identifiers and integers enter the source; callables
        and constants are passed through the namespace.
        """
        ns: dict[str, Any] = {"EMPTY": _EMPTY, "NEEDS": _NEEDS_NORMALIZING,
                              "normalize": normalize_value, "get_item": _get_item,
                              "template": f.template}
        lines = ["def run(args):", "    regs = template.copy()",
                 f"    regs[:{f.nparams}] = args"]
        first_line = len(lines) + 1  # line number of instruction f.start
        ended = False
        for pc in range(f.start, len(f.code)):
            ins = f.code[pc]
            op = ins[0]
            if op == _KERNEL or op == _PACKED or op == _BUILTIN:
                regs = arg_regs.get(pc)
                if regs is None:
                    return None
                ns[f"f{pc}"] = ins[2]
                call = f"f{pc}({', '.join(f'regs[{r}]' for r in regs)})"
                if op == _KERNEL:
                    line = f"{call}; regs[{ins[1]}] = EMPTY"
                elif op == _PACKED:
                    line = (f"v = {call}; regs[{ins[1]}] = normalize(v) if isinstance(v, NEEDS) "
                            f"else v")
                else:
                    line = f"regs[{ins[1]}] = {call}"
            elif op == _MOVE:
                line = f"regs[{ins[1]}] = regs[{ins[2]}]"
            elif op == _RET:
                line = f"return regs[{ins[1]}]"
                ended = True
            elif op == _MATCH:
                ns[f"f{pc}"] = ins[2]
                line = f"f{pc}(regs[{ins[1]}], regs)"
            elif op == _MAKE_TUPLE or op == _MAKE_SHAPE or op == _MAKE_PRIM:
                ns[f"f{pc}"] = ins[2]
                line = f"regs[{ins[1]}] = f{pc}(regs)"
            elif op == _GET_ITEM:
                line = f"regs[{ins[1]}] = get_item(regs[{ins[2]}], {int(ins[3])})"
            elif op == _KILL:
                line = f"regs[{ins[2]}] = None; regs[{ins[1]}] = EMPTY"
            elif op == _LOAD:
                ns[f"c{pc}"] = ins[2]
                line = f"regs[{ins[1]}] = c{pc}"
            else:  # jumps, calls of VM functions and closures: the dispatch loop
                return None
            lines.append("    " + line)
            if ended:
                break
        if not ended:
            return None
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<phasec vm function {len(self._funcs_compiled)}>", "exec"), ns)  # noqa: S102 - generated
        self._funcs_compiled.append(f.name)
        run = ns["run"]
        code_obj = run.__code__
        start = f.start

        def located_run(args: tuple) -> Any:
            try:
                return run(args)
            except Exception as exc:
                tb = exc.__traceback__
                pc = start
                while tb is not None:  # the failing line of the generated function
                    if tb.tb_frame.f_code is code_obj:
                        pc = start + tb.tb_lineno - first_line
                    tb = tb.tb_next
                raise self._located(exc, f, pc, []) from exc
        return located_run

    def _decode_instr(self, ins: bc.Instruction, pc: int, f: bc.VMFunction) -> tuple:
        t = type(ins)
        if t is bc.Call:
            kind = ins.kind
            get_args = _args_getter(ins.args)
            if kind in (CalleeKind.KERNEL, CalleeKind.PACKED, CalleeKind.BUILTIN):
                self._arg_regs[pc] = tuple(ins.args)
            if kind == CalleeKind.KERNEL:
                return (_KERNEL, ins.dst, self.kernels[ins.callee], get_args)
            if kind == CalleeKind.PACKED:
                return (_PACKED, ins.dst, _resolve_packed(ins.callee), get_args)
            if kind == CalleeKind.BUILTIN:
                builtin = self._builtins.get(ins.callee)
                if builtin is None:
                    raise VMError(f"function {f.name!r}, instruction {pc}: unknown VM builtin "
                                  f"{ins.callee!r}")
                special = self._const_builtin(ins.callee, tuple(ins.args), self._consts)
                if special is not None:
                    self._arg_regs[pc] = special[1]
                    return (_BUILTIN, ins.dst, special[0], _args_getter(special[1]))
                return (_BUILTIN, ins.dst, builtin, get_args)
            if kind == CalleeKind.VM_FUNC:
                return (_CALL, ins.dst, ins.callee, get_args)
            return (_CLOSURE_CALL, ins.dst, ins.callee, get_args)
        if t is bc.Move:
            return (_MOVE, ins.dst, ins.src)
        if t is bc.Ret:
            return (_RET, ins.src)
        if t is bc.Match:
            return (_MATCH, ins.src, _compile_matcher(ins.pattern, ins.what, ins.expected))
        if t is bc.If:
            return (_IF, ins.cond, pc + ins.false_offset)
        if t is bc.Goto:
            return (_GOTO, pc + ins.offset)
        if t is bc.MakeTuple:
            return (_MAKE_TUPLE, ins.dst, _args_getter(ins.fields))
        if t is bc.GetItem:
            return (_GET_ITEM, ins.dst, ins.src, ins.index)
        if t is bc.MakeShape:
            dims = [_compile_expr(d) for d in ins.dims]
            return (_MAKE_SHAPE, ins.dst, lambda regs: tuple(int(d(regs)) for d in dims))
        if t is bc.MakePrim:
            expr, dtype = _compile_expr(ins.expr), ins.dtype
            return (_MAKE_PRIM, ins.dst, lambda regs: cast_scalar(expr(regs), dtype))
        if t is bc.MakeClosure:
            return (_MAKE_CLOSURE, ins.dst, ins.func, _args_getter(ins.captured))
        if t is bc.Kill:
            return (_KILL, ins.dst, ins.reg)
        if t is bc.LoadConst:
            return (_LOAD, ins.dst, self.exe.constants[ins.index])
        raise VMError(f"function {f.name!r}, instruction {pc}: cannot decode {ins!r}")

    # -- running -------------------------------------------------------------------------
    def _invoke_entry(self, index: int, args: tuple) -> Any:
        f = self._funcs[index]
        if len(args) != f.nparams:
            raise VMError(f"function {f.name!r} takes {f.nparams} argument"
                          f"{'' if f.nparams == 1 else 's'} ({', '.join(f.params)}), "
                          f"got {len(args)}")
        args = tuple([_as_input(a) for a in args])
        compiled = f.compiled
        if compiled is not None and f.static:
            # Straight-line code of constant shapes does the same work every
            # call. Arming (two signal.set_wakeup_fd calls, ~2-5 us) is for
            # long calls; a call as short as the last one was runs unarmed,
            # and Ctrl-C during it is handled when it returns, as for any
            # Python code.
            if f.short:
                with short_call():
                    t0 = perf_counter()
                    result = compiled(args)
                    f.short = perf_counter() - t0 < SHORT_CALL_SECONDS
                return result
            with armed():
                t0 = perf_counter()
                result = compiled(args)
                f.short = perf_counter() - t0 < SHORT_CALL_SECONDS
            return result
        # Armed once per call (not per kernel): Ctrl-C stops a native kernel
        # within a second and raises KeyboardInterrupt here (backend/interrupt.py).
        with armed():
            if compiled is not None:  # straight-line code: no dispatch loop
                return compiled(args)
            return self._execute(index, args)

    def _execute(self, index: int, args: tuple) -> Any:
        funcs = self._funcs
        f = funcs[index]
        if len(args) != f.nparams:
            raise VMError(f"function {f.name!r} takes {f.nparams} argument"
                          f"{'' if f.nparams == 1 else 's'}, got {len(args)}")
        if f.compiled is not None:
            return f.compiled(args)
        regs = f.template.copy()
        regs[:f.nparams] = args
        code = f.code
        pc = f.start
        frames: list[tuple] = []
        limit = self.max_call_depth
        ins: tuple = ()
        try:
            while True:
                ins = code[pc]
                op = ins[0]
                if op == _KERNEL:
                    _, dst, fn, get_args = ins
                    fn(*get_args(regs))
                    regs[dst] = _EMPTY
                    pc += 1
                elif op == _PACKED:
                    _, dst, fn, get_args = ins
                    value = fn(*get_args(regs))
                    if isinstance(value, _NEEDS_NORMALIZING):
                        value = normalize_value(value)
                    regs[dst] = value
                    pc += 1
                elif op == _BUILTIN:
                    _, dst, fn, get_args = ins
                    regs[dst] = fn(*get_args(regs))
                    pc += 1
                elif op == _MOVE:
                    regs[ins[1]] = regs[ins[2]]
                    pc += 1
                elif op == _CALL:
                    _, dst, callee_index, get_args = ins
                    callee = funcs[callee_index]
                    new_regs = callee.template.copy()
                    new_regs[:callee.nparams] = get_args(regs)
                    frames.append((f, code, regs, pc + 1, dst))
                    if len(frames) >= limit:
                        raise VMError(f"call depth exceeded {limit} (runaway recursion in "
                                      f"{callee.name!r}?)")
                    f, code, regs, pc = callee, callee.code, new_regs, callee.start
                elif op == _RET:
                    value = regs[ins[1]]
                    if not frames:
                        return value
                    f, code, regs, pc, dst = frames.pop()
                    regs[dst] = value
                elif op == _MATCH:
                    ins[2](regs[ins[1]], regs)
                    pc += 1
                elif op == _IF:
                    cond = regs[ins[1]]
                    pc = pc + 1 if (bool(cond) if type(cond) is bool else truth(cond)) else ins[2]
                elif op == _GOTO:
                    pc = ins[1]
                elif op == _CLOSURE_CALL:
                    _, dst, callee_reg, get_args = ins
                    closure = regs[callee_reg]
                    call_args = list(get_args(regs))
                    if type(closure) is VMClosure and closure.vm is self:
                        callee = funcs[closure.func_index]
                        call_args.extend(closure.captured)
                        if len(call_args) != callee.nparams:
                            expected = callee.nparams - len(closure.captured)
                            raise VMError(f"closure {callee.name!r} takes {expected} argument"
                                          f"{'' if expected == 1 else 's'}, "
                                          f"got {len(call_args) - len(closure.captured)}")
                        new_regs = callee.template.copy()
                        new_regs[:callee.nparams] = call_args
                        frames.append((f, code, regs, pc + 1, dst))
                        if len(frames) >= limit:
                            raise VMError(f"call depth exceeded {limit} (runaway recursion in "
                                          f"{callee.name!r}?)")
                        f, code, regs, pc = callee, callee.code, new_regs, callee.start
                    elif callable(closure):
                        value = closure(*call_args)
                        if isinstance(value, _NEEDS_NORMALIZING):
                            value = normalize_value(value)
                        regs[dst] = value
                        pc += 1
                    else:
                        raise VMError(f"cannot call {describe_value(closure)}: not a function")
                elif op == _MAKE_TUPLE:
                    regs[ins[1]] = ins[2](regs)
                    pc += 1
                elif op == _GET_ITEM:
                    tup = regs[ins[2]]
                    if type(tup) is not tuple or not -len(tup) <= ins[3] < len(tup):
                        raise VMError(f"cannot take item {ins[3]} of {describe_value(tup)}")
                    regs[ins[1]] = tup[ins[3]]
                    pc += 1
                elif op == _MAKE_SHAPE or op == _MAKE_PRIM:
                    regs[ins[1]] = ins[2](regs)
                    pc += 1
                elif op == _MAKE_CLOSURE:
                    regs[ins[1]] = VMClosure(self, ins[2], ins[3](regs))
                    pc += 1
                elif op == _KILL:
                    regs[ins[2]] = None
                    regs[ins[1]] = _EMPTY
                    pc += 1
                else:  # _LOAD
                    regs[ins[1]] = ins[2]
                    pc += 1
        except Exception as exc:
            raise self._located(exc, f, pc, frames) from exc

    def _located(self, exc: Exception, f: _Decoded, pc: int, frames: list) -> Exception:
        """The error to raise for ``exc`` raised at ``f``/``pc``: a VMError
        naming the function, the instruction and the Relax call chain."""
        if getattr(exc, "located", False):
            return exc
        chain = " <- ".join([f.name] + [fr[0].name for fr in reversed(frames)][:8])
        names = [g.name for g in self._funcs]
        try:
            text = bc.instruction_text(f.source[pc], names)
        except Exception:  # never let the error report fail
            text = "?"
        located = with_location(exc, f"(in {chain}, instruction {pc}: {text})")
        located.located = True
        return located


# ---------------------------------------------------------------------------
# Helpers: storage, inputs, packed functions, shapes
# ---------------------------------------------------------------------------

def _check_max_call_depth(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise VMError(f"max_call_depth must be an int >= 1, not {value!r}")
    return value


def _as_input(value: Any) -> Any:
    if type(value) is np.ndarray:  # the common case, tested first
        return value if value.flags.c_contiguous else np.ascontiguousarray(value)
    if isinstance(value, np.ndarray):
        # Kernels index row-major contiguous buffers.
        return value if value.flags.c_contiguous else np.ascontiguousarray(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _args_getter(arg_regs: tuple[int, ...]) -> Callable[[list], tuple]:
    """A fast ``regs -> tuple of the values of arg_regs`` (itemgetter is C code)."""
    if len(arg_regs) >= 2:
        return operator.itemgetter(*arg_regs)
    if len(arg_regs) == 1:
        reg = arg_regs[0]
        return lambda regs: (regs[reg],)
    return lambda regs: _EMPTY


def _get_item(tup: Any, index: int) -> Any:
    """``tup[index]`` for the VM's get_item (tuples only, index in range)."""
    if type(tup) is not tuple or not -len(tup) <= index < len(tup):
        raise VMError(f"cannot take item {index} of {describe_value(tup)}")
    return tup[index]


def _resolve_packed(name: str) -> Callable[..., Any]:
    func = find_packed_func(name)
    if func is not None:
        return func

    def late(*args: Any) -> Any:  # registered after the VM was created, or never
        return get_packed_func(name)(*args)

    return late


def _compile_expr(code: tuple) -> Callable[[list], Any]:
    kind = code[0]
    if kind == "imm":
        value = code[1]
        return lambda regs: value
    if kind == "reg":
        reg = code[1]
        return lambda regs: regs[reg]
    if kind == "bin":
        fn = SCALAR_BINARY[code[1]]
        lhs, rhs, text = _compile_expr(code[2]), _compile_expr(code[3]), bc.expr_code_text(code)

        def binary(regs: list) -> Any:
            a, b = lhs(regs), rhs(regs)
            try:
                return fn(a, b)
            except ZeroDivisionError:
                if isinstance(a, float) or isinstance(b, float):
                    raise VMError(f"division by zero in {text}") from None
                raise DivisionByZeroError(text) from None
        return binary
    if kind == "not":
        inner = _compile_expr(code[1])
        return lambda regs: not inner(regs)
    if kind == "cast":
        dtype, inner = code[1], _compile_expr(code[2])
        return lambda regs: cast_scalar(inner(regs), dtype)
    if kind == "select":
        c, a, b = (_compile_expr(x) for x in code[1:4])
        return lambda regs: a(regs) if c(regs) else b(regs)
    if kind == "call":
        fn = SCALAR_INTRINSICS[code[1]]
        args = [_compile_expr(x) for x in code[2]]
        return lambda regs: fn(*(a(regs) for a in args))
    raise VMError(f"bad scalar expression code {code!r}")


class _MatchFailure(Exception):
    """Internal: a value does not fit a pattern (reason in args[0])."""


_Deferred = list  # of (expr fn, actual, where, code)


def _compile_dims(dims: tuple, label: str) -> Callable[[Sequence[int], list, _Deferred, str], None]:
    steps = []
    for i, d in enumerate(dims):
        kind = d[0]
        if kind == "expr":
            steps.append((i, kind, _compile_expr(d[1]), d[1]))
        else:
            steps.append((i, kind, d[1], None))
    all_imm = all(kind == "imm" for _, kind, _, _ in steps)
    expected_static = tuple(v for _, _, v, _ in steps) if all_imm else None

    def match(values: Sequence[int], regs: list, deferred: _Deferred, where: str) -> None:
        if expected_static is not None and tuple(values) == expected_static:
            return
        for i, kind, v, code in steps:
            actual = int(values[i])
            if kind == "imm":
                if actual != v:
                    raise _MatchFailure(f"{where}{label} {i} is {actual}, expected {v}")
            elif kind == "bind":
                regs[v] = actual
            elif kind == "check":
                if regs[v] != actual:
                    raise _MatchFailure(f"{where}{label} {i} is {actual}, but an earlier "
                                        f"dimension with the same variable is {regs[v]}")
            else:
                deferred.append((v, actual, f"{where}{label} {i}", code))
    return match


def _compile_pattern(pat: tuple) -> Callable[[Any, list, _Deferred, str], None]:
    kind = pat[0]
    if kind == "tensor":
        _, dtype, ndim, dims = pat
        np_dtype = np.dtype(dtype) if dtype else None
        match_dims = _compile_dims(dims, "dimension") if dims is not None else None

        def tensor(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, np.ndarray):
                raise _MatchFailure(f"{where}not a tensor")
            if np_dtype is not None and v.dtype != np_dtype:
                raise _MatchFailure(f"{where}dtype is {v.dtype}, expected {dtype}")
            if ndim >= 0 and v.ndim != ndim:
                raise _MatchFailure(f"{where}ndim is {v.ndim}, expected {ndim}")
            if match_dims is not None:
                match_dims(v.shape, regs, deferred, where)
        return tensor
    if kind == "shape":
        _, ndim, dims = pat
        match_dims = _compile_dims(dims, "value") if dims is not None else None

        def shape(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, tuple) or not all(
                    isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v):
                raise _MatchFailure(f"{where}not a shape")
            if ndim >= 0 and len(v) != ndim:
                raise _MatchFailure(f"{where}has {len(v)} dimensions, expected {ndim}")
            if match_dims is not None:
                match_dims(v, regs, deferred, where)
        return shape
    if kind == "prim":
        _, dtype, dim = pat
        is_int = dtype.startswith("int") or dtype.startswith("uint")
        lo, hi = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if is_int else (0, 0)
        match_value = _compile_dims((dim,), "value") if dim is not None else None

        def prim(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if isinstance(v, (np.ndarray, np.generic)) and np.ndim(v) == 0:
                v = v.item()
            if not isinstance(v, (bool, int, float)):
                raise _MatchFailure(f"{where}not a scalar")
            if is_int and (isinstance(v, float) or isinstance(v, bool)):
                raise _MatchFailure(f"{where}not an integer")
            if is_int and not lo <= v <= hi:
                raise _MatchFailure(f"{where}out of range: {int_range_problem(v, dtype)}")
            if match_value is not None:
                match_value((v,), regs, deferred, where)
        return prim
    if kind == "tuple":
        subs = [_compile_pattern(p) for p in pat[1]]
        n = len(subs)

        def tup(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, tuple):
                raise _MatchFailure(f"{where}not a tuple")
            if len(v) != n:
                raise _MatchFailure(f"{where}has {len(v)} fields, expected {n}")
            for i, (sub, x) in enumerate(zip(subs, v)):
                sub(x, regs, deferred, f"{where}field {i}: ")
        return tup
    if kind == "func":
        def func(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not callable(v):
                raise _MatchFailure(f"{where}not a function")
        return func
    return lambda v, regs, deferred, where: None


def _has_expr_dims(pat: tuple) -> bool:
    kind = pat[0]
    if kind == "tensor":
        dims = pat[3]
    elif kind == "shape":
        dims = pat[2]
    elif kind == "prim":
        dims = (pat[2],) if pat[2] is not None else None
    elif kind == "tuple":
        return any(_has_expr_dims(p) for p in pat[1])
    else:
        return False
    return dims is not None and any(d[0] == "expr" for d in dims)


def _static_tensor_pattern(pattern: tuple) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) when ``pattern`` is a tensor of known dtype and constant shape."""
    if pattern[0] != "tensor" or not pattern[1] or pattern[3] is None:
        return None
    _, dtype, ndim, dims = pattern
    if ndim != len(dims) or not all(d[0] == "imm" for d in dims):
        return None
    try:
        return np.dtype(dtype), tuple(int(d[1]) for d in dims)
    except TypeError:
        return None


def _compile_matcher(pattern: tuple, what: str, expected: str) -> Callable[[Any, list], None]:
    check = _compile_pattern(pattern)

    def fail(value: Any, reason: str) -> VMError:
        error = VMError(f"{what}: expected {expected}, got {describe_value(value)} ({reason})")
        error.located = True
        return error

    static = _static_tensor_pattern(pattern)
    if static is not None:
        # The common parameter check (a tensor of a static shape): one type,
        # dtype and shape comparison; anything else takes the full check for
        # its message.
        np_dtype, shape = static

        def static_tensor_matcher(value: Any, regs: list) -> None:
            if type(value) is np.ndarray and value.shape == shape and value.dtype == np_dtype:
                return
            try:
                check(value, regs, None, "")
            except _MatchFailure as failure:
                raise fail(value, failure.args[0]) from None
        return static_tensor_matcher

    if not _has_expr_dims(pattern):
        def simple_matcher(value: Any, regs: list) -> None:
            try:
                check(value, regs, None, "")
            except _MatchFailure as failure:
                raise fail(value, failure.args[0]) from None
        return simple_matcher

    def matcher(value: Any, regs: list) -> None:
        deferred: _Deferred = []
        try:
            check(value, regs, deferred, "")
        except _MatchFailure as failure:
            raise fail(value, failure.args[0]) from None
        for fn, actual, where, code in deferred:
            want = fn(regs)
            if want != actual:
                raise fail(value, f"{where} is {actual}, expected {bc.expr_code_text(code)} = {want}")
    return matcher
