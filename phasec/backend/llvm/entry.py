"""The exported entry of a kernel: argument checks (numpy arrays checked
natively when the array layout is known), scalar conversion and the call of
the kernel proper."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from phasec.arith.inbounds import DIM_LIMIT
from phasec.ir import tir
from phasec.backend.llvm.abi import (
    NDARRAY_SYMBOL, RC_BAD_ARGUMENTS, KernelABI, descr_symbol,
)
from phasec.backend.llvm.context import ModuleSink
from phasec.backend.llvm.fpenv import SLOT, kernel_env_call
from phasec.backend.llvm.irtext import LLVM_TYPE, is_float, quote

__all__ = ["EntryEmitter"]

#: numpy array flags (NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE: numpy's C API).
NPY_C_CONTIGUOUS, NPY_ALIGNED, NPY_WRITEABLE = 0x1, 0x100, 0x400


class EntryEmitter:
    """Emits the exported entry of kernel ``func`` into ``mod``: a wrapper
    calling the kernel proper, ``kernel_symbol``. One exported entry per
    kernel, so the kernel body is inlined into exactly one caller."""

    def __init__(self, mod: ModuleSink, func: tir.PrimFunc, kernel_symbol: str) -> None:
        self.mod = mod
        self.func = func
        self.kernel_symbol = kernel_symbol

    def emit(self, abi: KernelABI) -> None:
        """The entry ``abi`` describes: checked, taking ``PyObject*`` arrays, or raw pointers."""
        if abi.checked:
            self.emit_checked(abi)
            if abi.fast_symbol is not None:
                self.emit_fast(abi)
        elif abi.obj_symbol is not None:
            self.emit_plain(abi.obj_symbol, abi.dim_vars, objects=True)
        else:
            self.emit_plain(abi.ptr_symbol, abi.dim_vars, objects=False)

    def emit_plain(self, symbol: str, dim_vars: Sequence[tir.Var], objects: bool) -> None:
        """The exported wrapper: raw pointers (or PyObject*) and int64/double scalars."""
        decls, lines, call_args = [], [], []
        for i, p in enumerate(self.func.params):
            if isinstance(p, tir.Buffer):
                decls.append(f"ptr %a{i}")
                if objects:
                    lines.append(f"  %a{i}.f = getelementptr i8, ptr %a{i}, i64 {self.mod.array_data_offset}")
                    lines.append(f"  %a{i}.d = load ptr, ptr %a{i}.f, align 8")
                    call_args.append(f"ptr %a{i}.d")
                else:
                    call_args.append(f"ptr %a{i}")
            else:
                wide = "double" if is_float(p.dtype) else "i64"
                decls.append(f"{wide} %a{i}")
                op = self._entry_convert(lines, f"%a{i}", wide, p.dtype, f"%a{i}.c")
                call_args.append(f"{LLVM_TYPE[p.dtype]} {op}")
        for k, v in enumerate(dim_vars):
            decls.append(f"i64 %d{k}")
            op = self._entry_convert(lines, f"%d{k}", "i64", v.dtype, f"%d{k}.c")
            call_args.append(f"{LLVM_TYPE[v.dtype]} {op}")
        text = [f"define i32 {quote(symbol)}({', '.join(decls)}) #0 {{", "entry:", *lines,
                *self._call_kernel(call_args, entry_block=True), "  ret i32 %rc", "}", ""]
        self.mod.functions.append("\n".join(text))

    def emit_checked(self, abi: KernelABI) -> None:
        """The exported wrapper taking ``PyObject*`` arrays that it checks
        itself (see :class:`KernelABI`): each buffer argument must be an
        exact ndarray (its type is read first: the header every object
        has), with the canonical dtype object, the rank, the static and
        symbolic dimensions (a symbolic one bound by its first occurrence or
        by a scalar parameter, and below ``DIM_LIMIT``), C-contiguous, aligned, writeable if written.
        A chain of blocks, each branching to ``bad`` on failure, so a field is
        only read once the object is known to be an array."""
        layout = self.mod.array_layout
        assert layout is not None
        decls: list[str] = []
        call_args: list[str] = []
        blocks: list[list[str]] = [[]]  # the checks, one block each
        bound: dict[int, str] = {}      # dimension Var -> i64 operand
        scalars: dict[int, str] = {}
        lines = blocks[0]
        for i, p in enumerate(self.func.params):
            if isinstance(p, tir.Var):
                wide = "double" if is_float(p.dtype) else "i64"
                decls.append(f"{wide} %a{i}")
                op = self._entry_convert(lines, f"%a{i}", wide, p.dtype, f"%a{i}.c")
                call_args.append(f"{LLVM_TYPE[p.dtype]} {op}")
                if wide == "i64":
                    scalars[id(p)] = f"%a{i}"
        bound.update(scalars)

        def field(i: int, name: str, offset: int, ty: str) -> str:
            lines.append(f"  %a{i}.{name}.p = getelementptr i8, ptr %a{i}, i64 {offset}")
            lines.append(f"  %a{i}.{name} = load {ty}, ptr %a{i}.{name}.p, align 4")
            return f"%a{i}.{name}"

        composite: list[tuple[str, tir.PrimExpr]] = []  # (array dimension, expression)
        for i, p in enumerate(self.func.params):
            if not isinstance(p, tir.Buffer):
                continue
            decls.insert(i, f"ptr %a{i}")
            abi_p = abi.params[i]
            tp = field(i, "type", layout.type_offset, "ptr")
            # The ndarray type and the dtype objects are named symbols (their
            # addresses are bound when the code is loaded), so compiled code
            # holds no address of this process and can be cached on disk.
            self.mod.declare(NDARRAY_SYMBOL, f"@{NDARRAY_SYMBOL} = external global i8")
            lines.append(f"  %a{i}.ok0 = icmp eq ptr {tp}, @{NDARRAY_SYMBOL}")
            lines.append(f"  br i1 %a{i}.ok0, label %chk{i}.fields, label %bad")
            lines = [f"chk{i}.fields:"]
            blocks.append(lines)
            descr = field(i, "descr", layout.descr_offset, "ptr")
            nd = field(i, "nd", layout.nd_offset, "i32")
            flags = field(i, "flags", layout.flags_offset, "i32")
            mask = NPY_C_CONTIGUOUS | NPY_ALIGNED | (NPY_WRITEABLE if abi_p.written else 0)
            dsym = descr_symbol(p.dtype)
            self.mod.declare(dsym, f"@{dsym} = external global i8")
            lines.append(f"  %a{i}.ok1 = icmp eq ptr {descr}, @{dsym}")
            lines.append(f"  %a{i}.ok2 = icmp eq i32 {nd}, {len(p.shape)}")
            lines.append(f"  %a{i}.fm = and i32 {flags}, {mask}")
            lines.append(f"  %a{i}.ok3 = icmp eq i32 %a{i}.fm, {mask}")
            lines.append(f"  %a{i}.ok12 = and i1 %a{i}.ok1, %a{i}.ok2")
            lines.append(f"  %a{i}.ok = and i1 %a{i}.ok12, %a{i}.ok3")
            lines.append(f"  br i1 %a{i}.ok, label %chk{i}.shape, label %bad")
            lines = [f"chk{i}.shape:"]
            blocks.append(lines)
            checks: list[str] = []
            if abi_p.shape:
                dims = field(i, "dims", layout.dims_offset, "ptr")
                for d, dim in enumerate(abi_p.shape):
                    v = f"%a{i}.d{d}"
                    lines.append(f"  {v}.p = getelementptr i64, ptr {dims}, i64 {d}")
                    lines.append(f"  {v} = load i64, ptr {v}.p, align 8")
                    if isinstance(dim, tir.Var):  # below DIM_LIMIT, as the in-bounds proofs need
                        lines.append(f"  {v}.lim = icmp ult i64 {v}, {DIM_LIMIT}")
                        checks.append(f"{v}.lim")
                    if isinstance(dim, tir.Var) and id(dim) not in bound:
                        bound[id(dim)] = v
                        continue
                    if not isinstance(dim, (int, tir.Var)):  # once every variable is bound
                        composite.append((v, dim))
                        continue
                    want = str(dim) if isinstance(dim, int) else bound[id(dim)]
                    lines.append(f"  {v}.ok = icmp eq i64 {v}, {want}")
                    checks.append(f"{v}.ok")
            acc = "true"
            for k, c in enumerate(checks):
                lines.append(f"  %a{i}.s{k} = and i1 {acc}, {c}")
                acc = f"%a{i}.s{k}"
            lines.append(f"  br i1 {acc}, label %chk{i}.data, label %bad")
            lines = [f"chk{i}.data:"]
            blocks.append(lines)
            data = field(i, "data", layout.data_offset, "ptr")
            call_args.insert(i, f"ptr {data}")
        if composite:
            lines = self._check_composite(blocks, composite, bound)
        for k, v in enumerate(abi.dim_vars):
            op = self._entry_convert(lines, bound[id(v)], "i64", v.dtype, f"%dv{k}.c")
            call_args.append(f"{LLVM_TYPE[v.dtype]} {op}")
        lines += self._call_kernel(call_args, entry_block=False)
        lines.append("  ret i32 %rc")
        if self.mod.options.flush_subnormals:
            blocks[0].insert(0, SLOT)
        body = [ln for block in blocks for ln in block]
        text = [f"define i32 {quote(abi.obj_symbol)}({', '.join(decls)}) #0 {{", "entry:", *body,
                "bad:", f"  ret i32 {RC_BAD_ARGUMENTS}", "}", ""]
        self.mod.functions.append("\n".join(text))

    def _call_kernel(self, call_args: Sequence[str], entry_block: bool) -> list[str]:
        """``%rc = call`` of the kernel proper, in the kernels' floating-point
        environment (:mod:`.fpenv`)."""
        call = f"call i32 {quote(self.kernel_symbol)}({', '.join(call_args)})"
        return kernel_env_call(call, self.mod.options.flush_subnormals, self.mod.declare,
                               slot_here=entry_block)

    def emit_fast(self, abi: KernelABI) -> None:
        """The builtin-function body calling the checked entry (see
        :attr:`KernelABI.fast_symbol`): a wrong argument count is
        ``RC_BAD_ARGUMENTS`` like a wrong argument, so the caller's slow path
        explains both. The call is ``noinline``: the checked entry, with the
        kernel inlined into it, stays one copy."""
        n = len(abi.params)
        for name, line in (
                ("PyEval_SaveThread", "declare ptr @PyEval_SaveThread()"),
                ("PyEval_RestoreThread", "declare void @PyEval_RestoreThread(ptr)"),
                ("PyLong_FromLong", "declare ptr @PyLong_FromLong(i64)")):
            self.mod.declare(name, line)
        loads, args = [], []
        for i in range(n):
            loads.append(f"  %p{i}.at = getelementptr ptr, ptr %args, i64 {i}")
            loads.append(f"  %p{i} = load ptr, ptr %p{i}.at, align 8")
            args.append(f"ptr %p{i}")
        text = [f"define ptr {quote(abi.fast_symbol)}(ptr %self, ptr %args, i64 %n) {{",
                "entry:", f"  %ok = icmp eq i64 %n, {n}", "  br i1 %ok, label %call, label %bad",
                "call:", *loads,
                "  %ts = call ptr @PyEval_SaveThread()",
                f"  %rc = call i32 {quote(abi.obj_symbol)}({', '.join(args)}) noinline",
                "  call void @PyEval_RestoreThread(ptr %ts)",
                "  %rc64 = sext i32 %rc to i64",
                "  %res = call ptr @PyLong_FromLong(i64 %rc64)", "  ret ptr %res",
                "bad:", f"  %bad.res = call ptr @PyLong_FromLong(i64 {RC_BAD_ARGUMENTS})",
                "  ret ptr %bad.res", "}", ""]
        self.mod.functions.append("\n".join(text))

    def _check_composite(self, blocks: list[list[str]],
                         composite: Sequence[tuple[str, tir.PrimExpr]],
                         bound: dict[int, str]) -> list[str]:
        """Compare each composite dimension (``batch * seq``) with its
        expression evaluated in int64 (see ``natively_checked_dim``); an
        overflow is a mismatch (no array dimension is that large). Returns
        the block the call goes in."""
        lines = blocks[-1]
        oks: list[str] = []
        names = itertools.count()

        def value(e: tir.PrimExpr) -> str:
            if isinstance(e, tir.IntImm):
                return str(int(e.value))
            if isinstance(e, tir.Var):
                return bound[id(e)]
            if isinstance(e, tir.Cast):
                return value(e.value)
            a, b = value(e.lhs), value(e.rhs)
            t = f"%cd{next(names)}"
            if e.op in ("+", "-", "*"):
                kind = {"+": "sadd", "-": "ssub", "*": "smul"}[e.op]
                fn = self.mod.intrinsic(f"llvm.{kind}.with.overflow.i64", "{i64, i1}",
                                        ["i64", "i64"])
                lines.append(f"  {t}.r = call {{i64, i1}} {fn}(i64 {a}, i64 {b})")
                lines.append(f"  {t} = extractvalue {{i64, i1}} {t}.r, 0")
                lines.append(f"  {t}.o = extractvalue {{i64, i1}} {t}.r, 1")
                lines.append(f"  {t}.ok = xor i1 {t}.o, true")
                oks.append(f"{t}.ok")
            elif e.op in ("min", "max"):
                pred = "slt" if e.op == "min" else "sgt"
                lines.append(f"  {t}.c = icmp {pred} i64 {a}, {b}")
                lines.append(f"  {t} = select i1 {t}.c, i64 {a}, i64 {b}")
            else:  # floor division / modulo by a positive constant
                lines.append(f"  {t}.q = sdiv i64 {a}, {b}")
                lines.append(f"  {t}.r = srem i64 {a}, {b}")
                lines.append(f"  {t}.n = icmp slt i64 {t}.r, 0")
                if e.op == "//":
                    lines.append(f"  {t}.a = zext i1 {t}.n to i64")
                    lines.append(f"  {t} = sub i64 {t}.q, {t}.a")
                else:
                    lines.append(f"  {t}.a = add i64 {t}.r, {b}")
                    lines.append(f"  {t} = select i1 {t}.n, i64 {t}.a, i64 {t}.r")
            return t

        for dim_value, expr in composite:
            want = value(expr)
            ok = f"%cd{next(names)}"
            lines.append(f"  {ok} = icmp eq i64 {dim_value}, {want}")
            oks.append(ok)
        acc = "true"
        for k, c in enumerate(oks):
            lines.append(f"  %cd.s{k} = and i1 {acc}, {c}")
            acc = f"%cd.s{k}"
        lines.append(f"  br i1 {acc}, label %chk.call, label %bad")
        blocks.append(["chk.call:"])
        return blocks[-1]

    @staticmethod
    def _entry_convert(lines: list[str], op: str, wide: str, dtype: str, out: str) -> str:
        ty = LLVM_TYPE[dtype]
        if ty == wide:
            return op
        if dtype == "bool":
            lines.append(f"  {out} = icmp ne i64 {op}, 0")
        elif wide == "double":
            lines.append(f"  {out} = fptrunc double {op} to {ty}")
        else:
            lines.append(f"  {out} = trunc i64 {op} to {ty}")
        return out
