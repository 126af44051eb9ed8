"""Straight-line VM functions as one generated Python function.

A function without calls of VM functions and closures, whose jumps are
those of a structured If (an entry point of a model, typically; a model's
If becomes Python's), is compiled to Python source, one line per
instruction, so running it costs its calls and register moves but no
dispatch. Per distinct binding of its parameters' symbolic dimensions it
computes once:

* the shapes and scalars computed from that binding (:func:`_entry_hoisting`);
* the outputs of kernels whose inputs are constants or computed from the
  binding alone (position ids, masks, rotary tables: what a static build
  folds to constants) — the first call of a binding keeps them
  (:func:`_memoized`), later calls skip the kernels, their allocations and
  the copies, reading the kept arrays in place where nothing but kernel
  inputs read them (:func:`_shared_outputs`; the kept arrays are read-only).
  (Only in functions without branches: which kernels run then depends on
  the data, and a kept output on the path taken.)

The decoded instruction set (opcodes below) is the VM's
(:mod:`phasec.backend.vm.vm` decodes bytecode into it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import VMError
from phasec.interp.relax import normalize_value
from phasec.runtime.values import describe_value, truth
from phasec.backend.vm import bytecode as bc
from phasec.backend.vm.matching import ExprSource

__all__ = ["compile_straight_line", "MEMO_BYTES", "MEMO_KEYS"]

# Decoded opcodes, roughly in order of frequency (the dispatch chain tests
# them in this order).
_KERNEL, _PACKED, _BUILTIN, _MOVE, _CALL, _RET, _MATCH, _IF, _GOTO, _CLOSURE_CALL, \
    _MAKE_TUPLE, _GET_ITEM, _MAKE_SHAPE, _MAKE_PRIM, _MAKE_CLOSURE, _KILL, _LOAD = range(17)

_EMPTY: tuple = ()
_NEEDS_NORMALIZING = (np.generic, list, tuple)

#: how many distinct argument shapes a function remembers (short calls,
#: hoisted values)
_SHORT_KEYS = 64

#: a kernel call memoized per binding keeps copies of its outputs up to this
#: many bytes (larger outputs are computed every call), for at most
#: MEMO_KEYS bindings at a time
MEMO_BYTES = 1 << 20
MEMO_KEYS = 8

_ALLOCATIONS = ("vm.alloc_storage", "vm.alloc_tensor")


def compile_straight_line(f: Any, arg_regs: Mapping[int, tuple[int, ...]], consts: set[int],
                          name: str, located: Callable[[Exception, int], Exception]
                          ) -> Callable[[tuple], Any] | None:
    """``f`` (a decoded VM function: ``code``, ``source``, ``start``,
    ``template``, ``nparams``) as one Python function ``run(args)``, or None
    when ``f`` is not straight-line code. ``consts`` are the registers
    holding a constant for the whole function; an exception is re-raised as
    ``located(exc, pc)`` of the instruction whose line failed.

    Only generated identifiers and integers enter the source; callables and
    constants are passed through the namespace.
    """
    ns: dict[str, Any] = {"EMPTY": _EMPTY, "NEEDS": _NEEDS_NORMALIZING,
                          "normalize": normalize_value, "get_item": _get_item,
                          "template": f.template, "hoisted": {}, "folded": {},
                          "memo": _memoized, "record": _record_folded}
    expr = ExprSource(ns)  # shape arithmetic inline: no call per dimension
    branches = _branches(f)
    if branches is None:
        return None
    ns["truth"] = truth
    after_matches, hoist, key_regs = _entry_hoisting(f.source, f.start)
    writes, readers = _register_uses(f)
    inline = _inline_hoisted(f, hoist, writes)
    shared = _shared_outputs(f, writes, readers)
    kernels_only = _kernels_only(f, writes, readers)
    head = ["def run(args):", "    regs = template.copy()", f"    regs[:{f.nparams}] = args"]
    head_pc: dict[int, int] = {}
    hoist_lines = ["def make_hoisted(regs, key):"]
    hoist_line_pc: dict[int, int] = {}
    body: list[tuple[int, str | None, str | None]] = []  # (pc, line, line when folded)
    folds: list[tuple[int, list[int]]] = []  # memoized kernels read in place when folded
    pooled: dict[int, Any] = {}  # constant-size pooled storage allocations, by pc
    kept_views: dict[int, tuple[int, object]] = {}  # kept-view tensors: (storage register, key)
    # registers whose value is the same whenever the binding is: constants,
    # the binding, what is computed from them (kernels: see _memoized)
    stable = set(consts) | set(key_regs)

    def reg(r: int) -> str:  # an operand
        return inline.get(r, f"regs[{r}]")

    def unit(r: int) -> str:  # the result of a kernel call or a kill: unit
        return f"; regs[{r}] = EMPTY" if r in readers else ""
    ended = False
    depth, ends = 1, []  # the indentation of the current block; where open blocks end
    for pc in range(f.start, len(f.code)):
        ins = f.code[pc]
        op = ins[0]
        while ends and ends[-1] == pc:
            ends.pop()
            depth -= 1
        indent = "    " * (depth - 1)  # (the generated lines are indented once more)
        opens_block = False
        if pc == after_matches:
            head.append(f"    key = ({''.join(f'regs[{r}], ' for r in key_regs)})")
            head.append("    S = hoisted.get(key)" if hoist else "    S = ()")
            if hoist:
                head.append("    if S is None: S = make_hoisted(regs, key)")
            head_pc.update({len(head) - k: pc for k in range(3 if hoist else 2)})
        now_stable: tuple[int, ...] = ()
        folded_line: str | None = None  # (None: the same as in a first call)
        if pc in hoist:
            hoist_lines.append(f"    s{hoist[pc]} = " + (
                expr.shape(ins[3]) if op == _MAKE_SHAPE else expr.prim(ins[3], ins[4])))
            hoist_line_pc[len(hoist_lines)] = pc
            line = None if ins[1] in inline else f"regs[{ins[1]}] = S[{hoist[pc]}]"
            now_stable = (ins[1],)
        elif op == _KERNEL or op == _PACKED or op == _BUILTIN:
            regs = arg_regs.get(pc)
            if regs is None:
                return None
            ns[f"f{pc}"] = ins[2]
            call = f"f{pc}({', '.join(reg(r) for r in regs)})"
            written = getattr(ins[2], "written_arguments", None) if op == _KERNEL else None
            outs = [regs[i] for i in written or ()]
            if outs and pc >= after_matches and not branches and all(
                    r in stable for i, r in enumerate(regs) if i not in written) \
                    and not set(outs) & {r for i, r in enumerate(regs) if i not in written}:
                ns[f"m{pc}"] = {}
                line = (f"memo(m{pc}, key, f{pc}, ({''.join(f'{reg(r)}, ' for r in regs)}), "
                        f"({''.join(f'regs[{r}], ' for r in outs)})){unit(ins[1])}")
                now_stable = tuple(outs)
                if all(shared.get(o, -1) == pc for o in outs):
                    first = sum(len(o) for _, o in folds)
                    folds.append((pc, outs))
                    folded_line = "; ".join(f"regs[{o}] = F[{first + k}]"
                                       for k, o in enumerate(outs)) + unit(ins[1])
            elif op == _KERNEL and getattr(ins[2], "native_call", None) is not None:
                # the kernel's builtin entry, then its error path only when it fails
                ns[f"n{pc}"] = ins[2].native_call
                args = ", ".join(reg(r) for r in regs)
                line = f"(rc := n{pc}({args})) and f{pc}.failed(rc, ({args},)){unit(ins[1])}"
            elif op == _KERNEL:
                line = f"{call}{unit(ins[1])}"
            elif op == _PACKED:
                line = (f"v = {call}; regs[{ins[1]}] = normalize(v) if isinstance(v, NEEDS) "
                        f"else v")
            else:
                reusing = getattr(ins[2], "reusing_views", None)
                if reusing is not None and kernels_only(ins[1]):
                    ns[f"f{pc}"] = reusing  # a tensor only kernels see: its view is kept
                    kept_views[pc] = (regs[0], reusing.view_key)
                elif getattr(ins[2], "pooled_cell", None) is not None and not regs:
                    pooled[pc] = ins[2]
                line = f"regs[{ins[1]}] = {call}"
        elif op == _MOVE:
            line = f"regs[{ins[1]}] = {reg(ins[2])}"
            if ins[2] in stable:
                now_stable = (ins[1],)
        elif op == _RET:
            line = f"return {reg(ins[1])}"
            ended = depth == 1
        elif op == _IF:  # the then-block, to the else-goto or the false target
            line = f"if truth(regs[{ins[1]}]):"
            ends.append(branches[pc])
            opens_block = True
        elif op == _GOTO:  # the end of a then-block: the else-block, to the target
            line = None
            if ins[1] > pc + 1:
                line = "else:"
                ends.append(ins[1])
                opens_block = True
        elif op == _MATCH:
            ns[f"f{pc}"] = ins[2]
            line = f"f{pc}(regs[{ins[1]}], regs)"
        elif op == _MAKE_SHAPE:
            line = f"regs[{ins[1]}] = {expr.shape(ins[3])}"
        elif op == _MAKE_PRIM:
            line = f"regs[{ins[1]}] = {expr.prim(ins[3], ins[4])}"
        elif op == _MAKE_TUPLE:
            ns[f"f{pc}"] = ins[2]
            line = f"regs[{ins[1]}] = f{pc}(regs)"
        elif op == _GET_ITEM:
            line = f"regs[{ins[1]}] = get_item({reg(ins[2])}, {int(ins[3])})"
        elif op == _KILL:
            line = f"regs[{ins[2]}] = None{unit(ins[1])}"
        elif op == _LOAD:
            ns[f"c{pc}"] = ins[2]
            line = f"regs[{ins[1]}] = c{pc}"
        else:  # calls of VM functions and closures: the dispatch loop
            return None
        if pc < after_matches:
            if line is not None:
                head.append("    " + line)
                head_pc[len(head)] = pc
        else:
            if line is not None and indent:  # (in a branch: nothing is folded)
                line = indent + line
            body.append((pc, line, line if folded_line is None else folded_line))
            if opens_block:  # (a block may be empty)
                depth += 1
                body.append((pc, indent + "    pass", None))
        stable.difference_update(f.source[pc].registers_written())
        stable.update(now_stable)
        if ended:
            break
    if not ended:
        return None

    lines, line_pc = head, head_pc
    folded_lines = ["def run_folded(regs, S, F, key):"]
    folded_pc: dict[int, int] = {}
    if folds:
        dead = _dead_when_folded(f, folds, after_matches, readers)
        memos = "".join(f"m{pc}, " for pc, _ in folds)
        lines += ["    F = folded.get(key)",
                  "    if F is not None: return run_folded(regs, S, F, key)"]
        line_pc.update({len(lines) - k: after_matches for k in range(2)})
        folded_at = {pc for pc, _ in folds}
        for pc, _, fline in body:
            if fline is not None and (pc not in dead or pc in folded_at):
                folded_lines.append("    " + fline)
                folded_pc[len(folded_lines)] = pc
    claimed_lines = ["def run_claimed(regs, S, L):"]
    claimed_pc: dict[int, int] = {}
    storages, views = _claimed(f, pooled, kept_views, writes, readers) \
        if not folds and not branches else ([], [])
    if views:
        # every storage that only kernels' kept views use, and those views,
        # taken at once when all are free (see VMMemory.claimer); else the
        # instructions one by one
        taken = {pc: at for at, pc in enumerate(storages + [pc for pc, _ in views])}
        ns["claim"] = pooled[storages[0]].pool.claimer(
            [pooled[pc].pooled_cell for pc in storages], [v for _, v in views])
        lines += ["    L = claim()", "    if L is not None: return run_claimed(regs, S, L)"]
        line_pc.update({len(lines) - k: after_matches for k in range(2)})
        for pc, line, _ in body:
            if line is not None:
                claimed_lines.append("    " + (line if pc not in taken
                                               else f"regs[{f.code[pc][1]}] = L[{taken[pc]}]"))
                claimed_pc[len(claimed_lines)] = pc
    for pc, line, _ in body:
        if line is not None:
            if line.startswith("return ") and folds:
                lines.append(f"    record(folded, key, ({memos}))")
                line_pc[len(lines)] = pc
            lines.append("    " + line)
            line_pc[len(lines)] = pc
    hoist_lines += ["    S = (" + "".join(f"s{k}, " for k in range(len(hoist))) + ")",
                    f"    if len(hoisted) >= {_SHORT_KEYS}: hoisted.clear()",
                    "    hoisted[key] = S", "    return S"]
    parts = [(lines, "run", line_pc), (hoist_lines, "make_hoisted", hoist_line_pc)]
    if folds:
        parts.append((folded_lines, "run_folded", folded_pc))
    if views:
        parts.append((claimed_lines, "run_claimed", claimed_pc))
    exec(compile("\n".join(ln for part, _, _ in parts for ln in part) + "\n", name,  # noqa: S102
                 "exec"), ns)
    run = ns["run"]
    codes: dict[Any, dict[int, int]] = {}
    offset = 0
    for part, fname, pcs in parts:
        codes[ns[fname].__code__] = {offset + n: pc for n, pc in pcs.items()}
        offset += len(part)

    def located_run(args: tuple) -> Any:
        try:
            return run(args)
        except Exception as exc:
            tb = exc.__traceback__
            pc = f.start
            while tb is not None:  # the failing line of the generated functions
                where = codes.get(tb.tb_frame.f_code)
                if where is not None:
                    pc = where.get(tb.tb_lineno, pc)
                tb = tb.tb_next
            raise located(exc, pc) from exc
    located_run.branches = bool(branches)  # type: ignore[attr-defined]
    return located_run


def _branches(f: Any) -> dict[int, int] | None:
    """The structured Ifs of ``f``: for each If, the pc where its then-block
    ends: its false target, or the goto just before that target when it
    jumps forward within the enclosing block (the else-block, which ends at
    the goto's target). {} without jumps; None when any other jump is
    there (backwards, out of its block, or a goto that is no If's)."""
    ends: dict[int, int] = {}
    else_gotos: set[int] = set()
    open_ends: list[int] = []  # where the enclosing blocks end, innermost last
    for pc in range(f.start, len(f.code)):
        while open_ends and open_ends[-1] == pc:
            open_ends.pop()
        ins = f.code[pc]
        limit = open_ends[-1] if open_ends else len(f.code)
        if ins[0] == _IF:
            target = ins[2]
            if not pc < target <= limit:
                return None
            last = f.code[target - 1] if target - 1 > pc else None
            if last is not None and last[0] == _GOTO and target <= last[1] <= limit:
                ends[pc] = target - 1
                else_gotos.add(target - 1)
                open_ends += [last[1], target - 1]
            else:
                ends[pc] = target
                open_ends.append(target)
        elif ins[0] == _GOTO and pc not in else_gotos:
            return None
    return ends


def _entry_hoisting(code: Sequence[bc.Instruction], start: int
                    ) -> tuple[int, dict[int, int], list[int]]:
    """What a straight-line function computes once per binding of its
    parameters' symbolic dimensions: ``(first instruction after the
    parameter matches, {pc: slot} of the make_shape/make_prim instructions
    that read only registers those matches bind and nothing else writes,
    those registers: the binding)``."""
    pc = start
    bound: set[int] = set()
    while pc < len(code) and type(code[pc]) is bc.Match:
        bound.update(code[pc].registers_written())
        pc += 1
    for ins in code[pc:]:
        bound.difference_update(ins.registers_written())
    hoisted = [p for p in range(pc, len(code)) if type(code[p]) in (bc.MakeShape, bc.MakePrim)
               and set(code[p].registers_read()) <= bound]
    return pc, {p: slot for slot, p in enumerate(hoisted)}, sorted(bound)


def _register_uses(f: Any) -> tuple[dict[int, int], dict[int, list[int]]]:
    """How many instructions of ``f`` write each register (a kill, which
    drops a value no later instruction reads, does not count), and the
    instructions that read it."""
    writes: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for pc in range(f.start, len(f.code)):
        ins = f.source[pc]
        for r in ins.registers_written() if type(ins) is not bc.Kill else (ins.dst,):
            writes[r] = writes.get(r, 0) + 1
        for r in ins.registers_read():
            readers.setdefault(r, []).append(pc)
    return writes, readers


def _inline_hoisted(f: Any, hoist: Mapping[int, int], writes: Mapping[int, int]
                    ) -> dict[int, str]:
    """The registers of hoisted values (see :func:`_entry_hoisting`) that the
    compiled function reads as ``S[slot]`` in place, never writing them:
    written once, and read only where the generated line takes operands
    (kernel, builtin and packed calls, moves, returns, get_item; not a
    match, a tuple or an inline shape, which read the register file)."""
    direct = (_KERNEL, _PACKED, _BUILTIN, _MOVE, _RET, _GET_ITEM, _KILL)
    other_reads: set[int] = set()
    for pc in range(f.start, len(f.code)):
        if pc not in hoist and f.code[pc][0] not in direct:
            other_reads.update(f.source[pc].registers_read())
    return {f.source[pc].registers_written()[0]: f"S[{slot}]" for pc, slot in hoist.items()
            if writes.get(f.source[pc].registers_written()[0]) == 1
            and f.source[pc].registers_written()[0] not in other_reads}


def _shared_outputs(f: Any, writes: Mapping[int, int], readers: Mapping[int, list[int]]
                    ) -> dict[int, int | None]:
    """Registers that may hold an array shared across calls (a memoized
    kernel's kept output), each with the kernel that writes its array (None:
    no kernel does): written once, and read only by that kernel, as other
    kernels' inputs (arguments they do not write), by matches, or by moves
    into registers that are themselves such — never returned, put in a
    tuple or passed to a builtin or packed function."""
    verdict: dict[int, bool] = {}
    producer: dict[int, int | None] = {}

    def only_read(r: int) -> bool:
        if r not in verdict:
            verdict[r] = False  # (a cycle of moves: not shared)
            producer[r] = None
            verdict[r] = writes.get(r) == 1 and all(
                read_only_at(pc, r) for pc in readers.get(r, ()))
        return verdict[r]

    def read_only_at(pc: int, r: int) -> bool:
        ins = f.code[pc]
        if ins[0] == _MATCH:
            return True
        if ins[0] == _MOVE:
            return only_read(ins[1])
        written = getattr(ins[2], "written_arguments", None) if ins[0] == _KERNEL else None
        if written is None:
            return False
        if any(i in written for i, a in enumerate(f.source[pc].args) if a == r):
            if producer[r] is not None:
                return False
            producer[r] = pc
        return True
    return {r: producer[r] for r in writes if only_read(r)}


def _kernels_only(f: Any, writes: Mapping[int, int], readers: Mapping[int, list[int]]
                  ) -> Callable[[int], bool]:
    """Whether a register's value reaches only kernels: written once, and
    read only as kernel arguments or by moves into registers that are
    themselves such (never returned, put in a tuple, matched, or passed to a
    builtin or packed function, where a user could get hold of it)."""
    verdict: dict[int, bool] = {}

    def only_kernels(r: int) -> bool:
        if r not in verdict:
            verdict[r] = False  # (a cycle of moves: not only kernels)
            verdict[r] = writes.get(r) == 1 and all(
                f.code[pc][0] == _KERNEL or (f.code[pc][0] == _MOVE and only_kernels(f.code[pc][1]))
                for pc in readers.get(r, ()))
        return verdict[r]
    return only_kernels


def _claimed(f: Any, pooled: Mapping[int, Any], kept_views: Mapping[int, tuple[int, object]],
             writes: Mapping[int, int], readers: Mapping[int, list[int]]
             ) -> tuple[list[int], list[tuple[int, tuple[int, object]]]]:
    """The allocations a call can take at once (see ``VMMemory.claimer``):
    the constant-size pooled storages (``pooled``: by pc) whose register
    nothing else writes and nothing but allocations of kept views
    (``kept_views``: by pc, their storage register and key) and kills
    reads, in pc order, and those views: ``(pc, (index of its storage in
    the first list, key))``, in pc order. (A storage that also holds a
    tensor a caller may keep, the model's output, is left out: it would not
    be free at the next call.)"""
    storages = [pc for pc in sorted(pooled)
                if writes.get(f.code[pc][1]) == 1
                and all(q in kept_views or f.code[q][0] == _KILL
                        for q in readers.get(f.code[pc][1], ()))]
    index = {f.code[pc][1]: at for at, pc in enumerate(storages)}
    views = [(pc, (index[reg], key)) for pc, (reg, key) in sorted(kept_views.items())
             if reg in index]
    return storages, views


def _dead_when_folded(f: Any, folds: Sequence[tuple[int, list[int]]], start: int,
                      readers: Mapping[int, list[int]]) -> set[int]:
    """The instructions a call with folded kernels (``folds``: their pcs and
    outputs) skips: those kernels, the allocations of their outputs (the
    kept arrays take their place), and the allocations (and moves) whose
    results only skipped instructions and kills read."""
    dead = {pc for pc, _ in folds}
    replaced = {o for _, outs in folds for o in outs}
    candidates = [pc for pc in range(start, len(f.code))
                  if f.code[pc][0] == _MOVE or (f.code[pc][0] == _BUILTIN
                                                and f.source[pc].callee in _ALLOCATIONS)]
    changed = True
    while changed:
        changed = False
        for pc in candidates:
            if pc in dead:
                continue
            dst = f.source[pc].registers_written()[0]
            if (dst in replaced and f.code[pc][0] == _BUILTIN) or all(
                    q in dead or f.code[q][0] == _KILL for q in readers.get(dst, ())):
                dead.add(pc)
                changed = True
    return dead


def _memoized(memo: dict, key: tuple, kernel: Callable[..., Any], args: tuple,
              outs: tuple[np.ndarray, ...]) -> None:
    """``kernel(*args)``, whose inputs are the same for the same ``key``: the
    first call of a key keeps read-only copies of its outputs, later ones
    copy them in (or read them in place: see :func:`_record_folded`)."""
    kept = memo.get(key)
    if kept is None:
        kernel(*args)
        if len(memo) >= MEMO_KEYS:
            memo.clear()
        memo[key] = tuple(_frozen_copy(o) for o in outs) \
            if sum(o.nbytes for o in outs) <= MEMO_BYTES else False
    elif kept is False:
        kernel(*args)
    else:
        for out, value in zip(outs, kept):
            out[...] = value


def _frozen_copy(a: np.ndarray) -> np.ndarray:
    kept = a.copy()
    kept.flags.writeable = False
    return kept


def _record_folded(folded: dict, key: tuple, memos: tuple[dict, ...]) -> None:
    """After a first call of ``key``: when every folded kernel kept its
    outputs, the next calls of ``key`` read them in place (``run_folded``)."""
    kept = [m.get(key) for m in memos]
    if any(k is None or k is False for k in kept):
        return
    if len(folded) >= MEMO_KEYS:
        folded.clear()
    folded[key] = tuple(a for k in kept for a in k)


def _get_item(tup: Any, index: int) -> Any:
    """``tup[index]`` for the VM's get_item (tuples only, index in range)."""
    if type(tup) is not tuple or not -len(tup) <= index < len(tup):
        raise VMError(f"cannot take item {index} of {describe_value(tup)}")
    return tup[index]
