"""VM bytecode: the instructions of a register machine, one list per function.

Each Relax function becomes a :class:`VMFunction`: its parameters arrive in
registers ``0 .. n-1``; every other value (bindings, temporaries, symbolic
shape variables, constants) lives in a register of its own. Instructions are
small frozen slotted classes; the VM pre-decodes them into plain tuples
before running (see :mod:`phasec.backend.vm.vm`).

Jumps (``Goto``, ``If``) are relative to the instruction's own index.

Two small tree encodings (nested tuples of str/int, so they serialize as
JSON) describe shapes:

* a scalar expression code: ``("imm", v)``, ``("reg", r)``,
  ``("bin", op, a, b)``, ``("not", a)``, ``("cast", dtype, a)``,
  ``("select", c, a, b)``, ``("call", intrinsic, (a, ...))``;
* a match pattern (what ``Match`` checks): ``("tensor", dtype|None, ndim,
  dims|None)``, ``("shape", ndim, dims|None)``, ``("prim", dtype, dim|None)``,
  ``("tuple", (pattern, ...))``, ``("func",)``, ``("any",)``; each dim is
  ``("imm", v)`` (must equal), ``("bind", r)`` (store into register r),
  ``("check", r)`` (must equal register r) or ``("expr", code)`` (must equal
  the expression, checked after every bind of the pattern).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any, ClassVar

from phasec.ir.intrinsics import SCALAR_INTRINSICS
from phasec.ir.tir import DTYPES
from phasec.runtime.binary_ops import SCALAR_BINARY

__all__ = [
    "CalleeKind", "Instruction", "Call", "Ret", "Goto", "If", "LoadConst", "Match",
    "MakeShape", "MakePrim", "MakeTuple", "GetItem", "MakeClosure", "Move", "Kill",
    "VMFunction", "INSTRUCTIONS", "instruction_from_json", "expr_code_text",
    "pattern_text", "tupleize", "is_tail_call",
]


class CalleeKind(IntEnum):
    """What a :class:`Call` calls."""

    PACKED = 0      #: a packed function, by name (phasec.runtime.packed registry)
    VM_FUNC = 1     #: another function of the executable, by index
    KERNEL = 2      #: a PrimFunc of the executable (destination-passing), by name
    CLOSURE = 3     #: the closure (or Python callable) held in a register
    BUILTIN = 4     #: a VM builtin, by name (allocation and friends)


class Instruction:
    """Base class of instructions. ``opname`` is the mnemonic used in text
    and JSON; the fields are the dataclass fields in order."""

    __slots__ = ()
    opname: ClassVar[str] = ""

    def to_json(self) -> list:
        return [self.opname, *(_jsonable(getattr(self, f.name)) for f in fields(self))]

    def registers_read(self) -> tuple[int, ...]:
        return ()

    def registers_written(self) -> tuple[int, ...]:
        return ()

    def __str__(self) -> str:
        return instruction_text(self)


def _instr(opname: str):
    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        cls.opname = opname
        return cls
    return wrap


@_instr("call")
class Call(Instruction):
    """``dst = callee(args...)``; ``callee`` is a name, a function index or a
    register depending on ``kind``."""

    dst: int
    kind: CalleeKind
    callee: int | str
    args: tuple[int, ...]

    def registers_read(self) -> tuple[int, ...]:
        return self.args + ((self.callee,) if self.kind == CalleeKind.CLOSURE else ())

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("ret")
class Ret(Instruction):
    """Return the value of register ``src`` to the caller."""

    src: int

    def registers_read(self) -> tuple[int, ...]:
        return (self.src,)


@_instr("goto")
class Goto(Instruction):
    """Jump by ``offset`` instructions."""

    offset: int


@_instr("if")
class If(Instruction):
    """Fall through when register ``cond`` is true, else jump by ``false_offset``."""

    cond: int
    false_offset: int

    def registers_read(self) -> tuple[int, ...]:
        return (self.cond,)


@_instr("load_const")
class LoadConst(Instruction):
    """``dst = constants[index]``."""

    dst: int
    index: int

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("match")
class Match(Instruction):
    """Check register ``src`` against ``pattern`` and bind its symbolic
    dimensions; on mismatch the error names ``what`` and ``expected``."""

    src: int
    pattern: tuple
    what: str
    expected: str

    def registers_read(self) -> tuple[int, ...]:
        return (self.src,)

    def registers_written(self) -> tuple[int, ...]:
        return tuple(_pattern_binds(self.pattern))


@_instr("make_shape")
class MakeShape(Instruction):
    """``dst = (dims...)``: a shape whose dims are scalar expression codes."""

    dst: int
    dims: tuple

    def registers_read(self) -> tuple[int, ...]:
        return code_registers(self.dims)

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("make_prim")
class MakePrim(Instruction):
    """``dst = expr`` as a Python scalar of ``dtype``."""

    dst: int
    expr: tuple
    dtype: str

    def registers_read(self) -> tuple[int, ...]:
        return code_registers(self.expr)

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("make_tuple")
class MakeTuple(Instruction):
    dst: int
    fields: tuple[int, ...]

    def registers_read(self) -> tuple[int, ...]:
        return self.fields

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("get_item")
class GetItem(Instruction):
    dst: int
    src: int
    index: int

    def registers_read(self) -> tuple[int, ...]:
        return (self.src,)

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("make_closure")
class MakeClosure(Instruction):
    """``dst`` = function ``func`` with the values of ``captured`` bound as its
    last arguments (TVM's convention)."""

    dst: int
    func: int
    captured: tuple[int, ...]

    def registers_read(self) -> tuple[int, ...]:
        return self.captured

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("move")
class Move(Instruction):
    dst: int
    src: int

    def registers_read(self) -> tuple[int, ...]:
        return (self.src,)

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst,)


@_instr("kill")
class Kill(Instruction):
    """Drop the value of register ``reg`` (so its memory can be freed);
    ``dst`` receives the empty tuple."""

    dst: int
    reg: int

    def registers_written(self) -> tuple[int, ...]:
        return (self.dst, self.reg)


INSTRUCTIONS: dict[str, type[Instruction]] = {
    c.opname: c for c in (Call, Ret, Goto, If, LoadConst, Match, MakeShape, MakePrim,
                          MakeTuple, GetItem, MakeClosure, Move, Kill)
}


@dataclass(frozen=True, slots=True)
class VMFunction:
    """One compiled Relax function.

    ``param_sinfo`` holds each parameter's struct info as TVMScript text
    (:func:`phasec.script.printer.print_sinfo`, e.g.
    ``R.Tensor((n, 4), dtype="float32")``; read back with
    :func:`phasec.script.parser.parse_struct_info`), None for a parameter
    without one; the whole field is None when unknown (an executable saved
    by an older phasec, or bytecode built by hand).
    """

    name: str
    params: tuple[str, ...]
    num_regs: int
    code: tuple[Instruction, ...]
    param_sinfo: tuple[str | None, ...] | None = None

    def to_json(self) -> dict:
        data = {"name": self.name, "params": list(self.params), "num_regs": self.num_regs,
                "code": [i.to_json() for i in self.code]}
        if self.param_sinfo is not None:
            data["param_sinfo"] = list(self.param_sinfo)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "VMFunction":
        """Rebuild from :meth:`to_json` output; raises ValueError (or
        KeyError/TypeError) on malformed data."""
        sinfo = data.get("param_sinfo")
        if sinfo is not None:
            if not isinstance(sinfo, list) or not all(s is None or isinstance(s, str)
                                                      for s in sinfo):
                raise ValueError(f"param_sinfo must be a list of strings or nulls, got "
                                 f"{sinfo!r:.80}")
            sinfo = tuple(sinfo)
        return cls(str(data["name"]), tuple(str(p) for p in data["params"]),
                   int(data["num_regs"]), tuple(instruction_from_json(i) for i in data["code"]),
                   sinfo)


# ---------------------------------------------------------------------------
# Tail calls
# ---------------------------------------------------------------------------

def is_tail_call(code: tuple[Instruction, ...] | list[Instruction], pc: int) -> bool:
    """Whether the Call at ``pc`` of ``code`` is a call of a VM function or
    closure whose result the function returns unchanged: what follows it,
    up to a ``ret`` of that value, is only moves, kills and gotos (how
    codegen lowers a SeqExpr ending in the call, or an If whose taken branch
    does: ``move dst = r; goto end; ...; kill ...; ret dst``). None of those
    can fail or be observed once the frame is gone, so the VM may run the
    callee in the caller's frame (constant stack and memory for recursion
    in tail position, e.g. the recursive function an ONNX Loop becomes)."""
    ins = code[pc]
    if type(ins) is not Call or ins.kind not in (CalleeKind.VM_FUNC, CalleeKind.CLOSURE):
        return False
    holding = {ins.dst}  # the registers holding the call's result
    at = pc + 1
    seen: set[int] = set()
    while 0 <= at < len(code) and at not in seen:
        seen.add(at)
        nxt = code[at]
        t = type(nxt)
        if t is Ret:
            return nxt.src in holding
        if t is Move:
            if nxt.src in holding:
                holding.add(nxt.dst)
            else:
                holding.discard(nxt.dst)
            at += 1
        elif t is Kill:
            holding.difference_update((nxt.dst, nxt.reg))
            at += 1
        elif t is Goto:
            at += nxt.offset
        else:
            return False
    return False


# ---------------------------------------------------------------------------
# JSON and text
# ---------------------------------------------------------------------------

def _jsonable(value: Any) -> Any:
    if isinstance(value, IntEnum):
        return int(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def tupleize(value: Any) -> Any:
    """JSON lists back to the tuples instructions hold."""
    if isinstance(value, list):
        return tuple(tupleize(v) for v in value)
    return value


def instruction_from_json(data: Any) -> Instruction:
    """Rebuild an instruction from :meth:`Instruction.to_json` output; raises
    ValueError on anything malformed (every field is checked against its
    kind, patterns and expression codes against their grammar, so the VM
    never meets a malformed instruction)."""
    if not isinstance(data, list) or not data or not isinstance(data[0], str) \
            or data[0] not in INSTRUCTIONS:
        raise ValueError(f"not an instruction: {data!r:.80}")
    cls = INSTRUCTIONS[data[0]]
    names = [f.name for f in fields(cls)]
    values = data[1:]
    if len(values) != len(names):
        raise ValueError(f"instruction {data[0]!r} needs {len(names)} fields, got {len(values)}")
    kwargs = {n: tupleize(v) for n, v in zip(names, values)}
    kinds = _FIELD_KINDS[cls]
    for name, value in kwargs.items():
        problem = _FIELD_CHECKS[kinds[name]](value)
        if problem is not None:
            raise ValueError(f"instruction {data[0]!r}: field {name!r} {problem}, got "
                             f"{value!r:.80}")
    if cls is Call:
        kwargs["kind"] = CalleeKind(kwargs["kind"])
    return cls(**kwargs)


# -- field validation (data read from files) ------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_reg(v: Any) -> str | None:
    return None if _is_int(v) else "must be an integer"


def _check_regs(v: Any) -> str | None:
    ok = isinstance(v, tuple) and all(_is_int(r) for r in v)
    return None if ok else "must be a list of integers"


def _check_str(v: Any) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def _check_kind(v: Any) -> str | None:
    return None if _is_int(v) and v in CalleeKind._value2member_map_ else (
        f"must be a callee kind ({', '.join(str(int(k)) for k in CalleeKind)})")


def _check_callee(v: Any) -> str | None:
    return None if _is_int(v) or isinstance(v, str) else "must be an integer or a name"


def _check_dtype(v: Any) -> str | None:
    return None if isinstance(v, str) and v in DTYPES else "must be a dtype"


#: how deeply expression codes and patterns may nest in a file
_MAX_CODE_DEPTH = 64


def _code_problem(code: Any, depth: int = 0) -> str | None:
    """Why ``code`` is not a scalar expression code (see the module doc), or None."""
    if depth > _MAX_CODE_DEPTH:
        return "is nested too deeply"
    if not isinstance(code, tuple) or not code or not isinstance(code[0], str):
        return "is not an expression code"
    kind, args = code[0], code[1:]
    if kind == "imm" and len(args) == 1 and isinstance(args[0], (bool, int, float)):
        return None
    if kind == "reg" and len(args) == 1 and _is_int(args[0]):
        return None
    subs: tuple = ()
    if kind == "bin" and len(args) == 3 and isinstance(args[0], str) and args[0] in SCALAR_BINARY:
        subs = args[1:]
    elif kind == "not" and len(args) == 1:
        subs = args
    elif kind == "cast" and len(args) == 2 and _check_dtype(args[0]) is None:
        subs = args[1:]
    elif kind == "select" and len(args) == 3:
        subs = args
    elif kind == "call" and len(args) == 2 and isinstance(args[0], str) \
            and args[0] in SCALAR_INTRINSICS and isinstance(args[1], tuple):
        subs = args[1]
    else:
        return f"is not an expression code ({kind!r:.20} node)"
    for sub in subs:
        problem = _code_problem(sub, depth + 1)
        if problem is not None:
            return problem
    return None


def _dim_problem(dim: Any, depth: int) -> str | None:
    if not isinstance(dim, tuple) or len(dim) != 2:
        return "has a malformed dimension"
    if dim[0] in ("imm", "bind", "check"):
        return None if _is_int(dim[1]) else "has a malformed dimension"
    if dim[0] == "expr":
        return _code_problem(dim[1], depth + 1)
    return "has a malformed dimension"


def _dims_problem(dims: Any, depth: int) -> str | None:
    if dims is None:
        return None
    if not isinstance(dims, tuple):
        return "has malformed dimensions"
    for d in dims:
        problem = _dim_problem(d, depth)
        if problem is not None:
            return problem
    return None


def _pattern_problem(pat: Any, depth: int = 0) -> str | None:
    """Why ``pat`` is not a match pattern (see the module doc), or None."""
    if depth > _MAX_CODE_DEPTH:
        return "is nested too deeply"
    if not isinstance(pat, tuple) or not pat or not isinstance(pat[0], str):
        return "is not a pattern"
    kind = pat[0]
    if kind in ("func", "any") and len(pat) == 1:
        return None
    if kind == "tensor" and len(pat) == 4:
        if pat[1] is not None and _check_dtype(pat[1]) is not None:
            return "has a bad tensor dtype"
        if not _is_int(pat[2]) or pat[2] < -1:
            return "has a bad ndim"
        if pat[3] is not None and isinstance(pat[3], tuple) and pat[2] != len(pat[3]):
            return "has an ndim that does not match its dimensions"
        return _dims_problem(pat[3], depth)
    if kind == "shape" and len(pat) == 3:
        if not _is_int(pat[1]) or pat[1] < -1:
            return "has a bad ndim"
        if pat[2] is not None and isinstance(pat[2], tuple) and pat[1] != len(pat[2]):
            return "has an ndim that does not match its dimensions"
        return _dims_problem(pat[2], depth)
    if kind == "prim" and len(pat) == 3:
        if _check_dtype(pat[1]) is not None:
            return "has a bad scalar dtype"
        return None if pat[2] is None else _dim_problem(pat[2], depth)
    if kind == "tuple" and len(pat) == 2 and isinstance(pat[1], tuple):
        for sub in pat[1]:
            problem = _pattern_problem(sub, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"is not a pattern ({kind!r:.20})"


def _check_codes(v: Any) -> str | None:
    if not isinstance(v, tuple):
        return "must be a list of expression codes"
    for code in v:
        problem = _code_problem(code)
        if problem is not None:
            return problem
    return None


_FIELD_CHECKS = {
    "reg": _check_reg, "regs": _check_regs, "str": _check_str, "kind": _check_kind,
    "callee": _check_callee, "dtype": _check_dtype, "code": _code_problem,
    "codes": _check_codes, "pattern": _pattern_problem,
}

#: instruction class -> field -> kind of value (a key of _FIELD_CHECKS)
_FIELD_KINDS: dict[type, dict[str, str]] = {
    Call: {"dst": "reg", "kind": "kind", "callee": "callee", "args": "regs"},
    Ret: {"src": "reg"},
    Goto: {"offset": "reg"},
    If: {"cond": "reg", "false_offset": "reg"},
    LoadConst: {"dst": "reg", "index": "reg"},
    Match: {"src": "reg", "pattern": "pattern", "what": "str", "expected": "str"},
    MakeShape: {"dst": "reg", "dims": "codes"},
    MakePrim: {"dst": "reg", "expr": "code", "dtype": "dtype"},
    MakeTuple: {"dst": "reg", "fields": "regs"},
    GetItem: {"dst": "reg", "src": "reg", "index": "reg"},
    MakeClosure: {"dst": "reg", "func": "reg", "captured": "regs"},
    Move: {"dst": "reg", "src": "reg"},
    Kill: {"dst": "reg", "reg": "reg"},
}


def expr_code_text(code: tuple) -> str:
    kind = code[0]
    if kind == "imm":
        return repr(code[1])
    if kind == "reg":
        return f"r{code[1]}"
    if kind == "bin":
        return f"({expr_code_text(code[2])} {code[1]} {expr_code_text(code[3])})"
    if kind == "not":
        return f"not {expr_code_text(code[1])}"
    if kind == "cast":
        return f"{code[1]}({expr_code_text(code[2])})"
    if kind == "select":
        return f"select({', '.join(expr_code_text(c) for c in code[1:])})"
    if kind == "call":
        return f"{code[1]}({', '.join(expr_code_text(c) for c in code[2])})"
    return str(code)


def _dim_text(dim: tuple) -> str:
    kind = dim[0]
    if kind == "imm":
        return str(dim[1])
    if kind == "bind":
        return f"r{dim[1]}:="
    if kind == "check":
        return f"r{dim[1]}"
    return expr_code_text(dim[1])


def pattern_text(pat: tuple) -> str:
    kind = pat[0]
    if kind == "tensor":
        _, dtype, ndim, dims = pat
        shape = (f"({', '.join(_dim_text(d) for d in dims)})" if dims is not None
                 else f"ndim={ndim}" if ndim >= 0 else "?")
        return f"tensor[{shape}, {dtype or '?'}]"
    if kind == "shape":
        _, ndim, dims = pat
        return (f"shape[{', '.join(_dim_text(d) for d in dims)}]" if dims is not None
                else f"shape[ndim={ndim}]")
    if kind == "prim":
        return f"prim[{pat[1]}{'' if pat[2] is None else ' ' + _dim_text(pat[2])}]"
    if kind == "tuple":
        return f"tuple[{', '.join(pattern_text(p) for p in pat[1])}]"
    return kind


def code_registers(code: Any) -> tuple[int, ...]:
    """The registers the scalar expression code(s) ``code`` read, in order
    of first appearance (anything but a ``("reg", r)`` node is walked
    through; malformed codes are judged elsewhere)."""
    seen: dict[Any, None] = {}
    stack = [code]
    while stack:
        node = stack.pop()
        if type(node) is not tuple:
            continue
        if len(node) == 2 and node[0] == "reg" and type(node[1]) is int:
            seen[node[1]] = None
        else:
            stack.extend(reversed(node))
    return tuple(seen)


def _pattern_binds(pat: tuple):
    kind = pat[0]
    if kind == "tensor" and pat[3] is not None:
        yield from (d[1] for d in pat[3] if d[0] == "bind")
    elif kind == "shape" and pat[2] is not None:
        yield from (d[1] for d in pat[2] if d[0] == "bind")
    elif kind == "prim" and pat[2] is not None and pat[2][0] == "bind":
        yield pat[2][1]
    elif kind == "tuple":
        for p in pat[1]:
            yield from _pattern_binds(p)


_KIND_TEXT = {CalleeKind.PACKED: "packed", CalleeKind.VM_FUNC: "func",
              CalleeKind.KERNEL: "kernel", CalleeKind.CLOSURE: "closure",
              CalleeKind.BUILTIN: "builtin"}


def instruction_text(ins: Instruction, func_names: Any = None) -> str:
    """One line of disassembly; ``func_names[i]`` names function index i."""
    regs = lambda rs: ", ".join(f"r{r}" for r in rs)  # noqa: E731
    t = type(ins)
    if t is Call:
        callee = ins.callee
        if ins.kind == CalleeKind.VM_FUNC and func_names is not None:
            callee = func_names[callee]
        elif ins.kind == CalleeKind.CLOSURE:
            callee = f"r{callee}"
        return f"call r{ins.dst} = {_KIND_TEXT[ins.kind]} {callee}({regs(ins.args)})"
    if t is Ret:
        return f"ret r{ins.src}"
    if t is Goto:
        return f"goto {ins.offset:+d}"
    if t is If:
        return f"if r{ins.cond} else goto {ins.false_offset:+d}"
    if t is LoadConst:
        return f"load_const r{ins.dst} = c{ins.index}"
    if t is Match:
        return f"match r{ins.src} {pattern_text(ins.pattern)}  # {ins.what}"
    if t is MakeShape:
        return f"make_shape r{ins.dst} = [{', '.join(expr_code_text(d) for d in ins.dims)}]"
    if t is MakePrim:
        return f"make_prim r{ins.dst} = {ins.dtype}({expr_code_text(ins.expr)})"
    if t is MakeTuple:
        return f"make_tuple r{ins.dst} = ({regs(ins.fields)})"
    if t is GetItem:
        return f"get_item r{ins.dst} = r{ins.src}[{ins.index}]"
    if t is MakeClosure:
        name = func_names[ins.func] if func_names is not None else ins.func
        return f"make_closure r{ins.dst} = {name}[{regs(ins.captured)}]"
    if t is Move:
        return f"move r{ins.dst} = r{ins.src}"
    if t is Kill:
        return f"kill r{ins.reg}"
    return repr(ins)
