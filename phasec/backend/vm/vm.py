"""The virtual machine: runs an :class:`Executable` on numpy arrays.

    exe = phasec.backend.vm.codegen(mod)          # or phasec.build(mod)
    vm = VirtualMachine(exe)                      # kernels compiled with LLVM
    out = vm["main"](x, w)

The bytecode is decoded once, when the VM is created, into plain tuples whose
callees are already resolved (packed functions, kernels, builtins) and whose
shape checks are compiled into closures; the dispatch loop is a flat
``if``/``elif`` chain over small integer opcodes. Relax calls push frames on
an explicit stack, so program recursion never meets Python's recursion limit;
a call in tail position (its result returned unchanged: see
:func:`~phasec.backend.vm.bytecode.is_tail_call`) runs in its caller's frame
instead, so tail recursion (an ONNX Loop) needs constant stack and memory.
``max_call_depth`` bounds the other calls pending at once.

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

from phasec.errors import VMError, counted, with_location
from phasec.interp.relax import normalize_value
from phasec.runtime.packed import find_packed_func, get_packed_func
from phasec.runtime.values import (
    DEFAULT_MAX_CALL_DEPTH, depth_exceeded, describe_value, truth,
)
from phasec.backend.vm import bytecode as bc
from phasec.backend.vm.bytecode import CalleeKind
from phasec.backend.interrupt import FLAG, armed, claim_short, raise_interrupt, release_short
from phasec.backend.vm.executable import Executable
from phasec.backend.vm.matching import (
    compile_matcher, compile_prim, compile_shape,
)
from phasec.backend.vm.memory import VMMemory
from phasec.backend.vm.straight import (
    _BUILTIN, _CALL, _CLOSURE_CALL, _EMPTY, _GET_ITEM, _GOTO, _IF, _KERNEL, _KILL, _LOAD,
    _MAKE_CLOSURE, _MAKE_PRIM, _MAKE_SHAPE, _MAKE_TUPLE, _MATCH, _MOVE, _NEEDS_NORMALIZING,
    _PACKED, _RET, _SHORT_KEYS, compile_straight_line,
)

__all__ = ["VirtualMachine", "VMClosure", "DEFAULT_MAX_CALL_DEPTH"]


#: A straight-line call that took less than this runs unarmed the next time
#: it gets the same shapes (see VirtualMachine._invoke_entry): Ctrl-C then
#: waits at most about this long. (Arming is ~2 us with warm caches but
#: 25-40 us of a model whose kernels evict them: SqueezeNet's ~7 ms call,
#: 0.5%. At 20 ms it stays under a human's notice and ~0.2% of any call
#: still armed; it was 2 ms.)
SHORT_CALL_SECONDS = 0.02


def _inputs_and_work_key(args: tuple) -> tuple[tuple, tuple | None]:
    """The arguments as kernels take them (see :func:`_as_input`) and what
    decides the work of a straight-line call on them: its tensors' shapes
    and its scalar arguments (None: an argument of another kind, not
    judged). One pass: this runs on every call of a model."""
    key: list | None = []
    inputs = []
    for a in args:
        if type(a) is not np.ndarray or not a.flags.c_contiguous:
            a = _as_input(a)
        if key is not None:
            if type(a) is np.ndarray:
                key.append(a.shape)
            elif type(a) in (int, float, bool):
                key.append(a)
            else:
                key = None
        inputs.append(a)
    return tuple(inputs), (None if key is None else tuple(key))


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
                 "compiled", "short", "long")

    def __init__(self, name: str, params: tuple[str, ...], code: list, template: list,
                 start: int, source: Sequence[bc.Instruction]) -> None:
        self.name = name
        self.params = params
        self.nparams = len(params)
        self.code = code
        self.template = template
        self.start = start
        self.source = source
        #: straight-line functions (Ifs included): the code as one generated
        #: Python function ``compiled(args)`` (see compile_straight_line);
        #: None otherwise
        self.compiled: Callable[[tuple], Any] | None = None
        #: the work keys (see _inputs_and_work_key) whose last call took under
        #: SHORT_CALL_SECONDS: see VirtualMachine._invoke_entry
        self.short: set[tuple] = set()
        #: of a function with branches, the keys of a call that took longer
        #: (its data chose a longer path): they stay armed
        self.long: set[tuple] = set()


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
        max_call_depth: the most Relax calls pending at once (a guard against
            runaway recursion); tail calls reuse their caller's frame and
            do not count.
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
        name = f"<phasec vm function {len(self._funcs_compiled)}>"
        decoded.compiled = compile_straight_line(
            decoded, self._arg_regs, set(self._consts), name,
            lambda exc, pc: self._located(exc, decoded, pc, []))
        if decoded.compiled is not None:
            self._funcs_compiled.append(f.name)
        return decoded

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
            # (a tail call runs the callee in the caller's frame: see bc.is_tail_call)
            tail = bc.is_tail_call(f.code, pc)
            if kind == CalleeKind.VM_FUNC:
                return (_CALL, ins.dst, ins.callee, get_args, tail)
            return (_CLOSURE_CALL, ins.dst, ins.callee, get_args, tail)
        if t is bc.Move:
            return (_MOVE, ins.dst, ins.src)
        if t is bc.Ret:
            return (_RET, ins.src)
        if t is bc.Match:
            return (_MATCH, ins.src, compile_matcher(ins.pattern, ins.what, ins.expected))
        if t is bc.If:
            return (_IF, ins.cond, pc + ins.false_offset)
        if t is bc.Goto:
            return (_GOTO, pc + ins.offset)
        if t is bc.MakeTuple:
            return (_MAKE_TUPLE, ins.dst, _args_getter(ins.fields))
        if t is bc.GetItem:
            return (_GET_ITEM, ins.dst, ins.src, ins.index)
        if t is bc.MakeShape:
            return (_MAKE_SHAPE, ins.dst, compile_shape(ins.dims), ins.dims)
        if t is bc.MakePrim:
            return (_MAKE_PRIM, ins.dst, compile_prim(ins.expr, ins.dtype), ins.expr, ins.dtype)
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
        compiled = f.compiled
        if compiled is not None:
            args, key = _inputs_and_work_key(args)
            # Straight-line code does the same work whenever the shapes and
            # scalars it is given are the same. Arming (two
            # signal.set_wakeup_fd calls, ~2-5 us) is for long calls; a call
            # as short as the last one with the same shapes was runs unarmed,
            # and Ctrl-C during it is handled when it returns, as for any
            # Python code. (With Ifs, the data choose the path: shapes that
            # once took longer stay armed.)
            t0 = perf_counter()
            if key is not None and key in f.short:
                mine = claim_short()
                try:
                    result = compiled(args)
                finally:
                    if mine:
                        release_short()
            else:
                with armed():
                    result = compiled(args)
            if key is not None:
                if perf_counter() - t0 < SHORT_CALL_SECONDS:
                    if key not in f.long:
                        if len(f.short) >= _SHORT_KEYS:
                            f.short.clear()
                        f.short.add(key)
                else:
                    f.short.discard(key)
                    if getattr(compiled, "branches", False) and len(f.long) < _SHORT_KEYS:
                        f.long.add(key)  # the same shapes, another path: not short
            return result
        args = tuple([_as_input(a) for a in args])
        # Armed once per call (not per kernel): Ctrl-C stops a native kernel
        # within a second and raises KeyboardInterrupt here (backend/interrupt.py).
        with armed():
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
        cancel = FLAG
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
                    _, dst, callee_index, get_args, tail = ins
                    callee = funcs[callee_index]
                    new_regs = callee.template.copy()
                    new_regs[:callee.nparams] = get_args(regs)
                    if not tail:  # (a tail call replaces the caller's frame)
                        frames.append((f, code, regs, pc + 1, dst))
                        if len(frames) >= limit:
                            raise VMError(depth_exceeded(limit, callee.name, "VirtualMachine"))
                    elif cancel.value:
                        # A tail call, the only way the VM runs on without
                        # bound (an ONNX Loop whose condition stays true),
                        # checks the flag the interrupt watcher sets on
                        # Ctrl-C: Python drops a KeyboardInterrupt raised in
                        # a weakref callback (memory accounting frees every
                        # iteration's storages through them), and small
                        # kernels never poll the flag.
                        raise_interrupt(callee.name, "function")
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
                    _, dst, callee_reg, get_args, tail = ins
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
                        if not tail:
                            frames.append((f, code, regs, pc + 1, dst))
                            if len(frames) >= limit:
                                raise VMError(depth_exceeded(limit, callee.name,
                                                             "VirtualMachine"))
                        elif cancel.value:  # (Ctrl-C: see _CALL)
                            raise_interrupt(callee.name, "function")
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


def _resolve_packed(name: str) -> Callable[..., Any]:
    func = find_packed_func(name)
    if func is not None:
        return func

    def late(*args: Any) -> Any:  # registered after the VM was created, or never
        return get_packed_func(name)(*args)

    return late
