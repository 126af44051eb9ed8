"""The Executable: VM bytecode, constants and kernels, savable to one file.

File format (a zip archive, ``.pvm`` by convention):

* ``executable.json`` — format name and version, the function table (each
  function's bytecode as JSON lists, and its parameters' struct info as
  TVMScript text), the constant pool (scalars, strings and shapes inline;
  tensors as references into ``constants.npz``), the SHA-256 of the
  kernel file (``kernel_sha256``) and which buffer accesses the kernels
  were built to check (``check_bounds``: null for the default "unless
  proven", true for all, false for none; loading does not obey false, see
  :meth:`Executable.load`);
* ``constants.npz`` — tensor constants (read with ``allow_pickle=False``);
* ``kernels.json`` (phasec's JSON module format) or ``kernels.py``
  (TVMScript) — the PrimFuncs. Kernels are compiled again after loading;
  compiled libraries are cached per executable.

Loading treats the file as hostile data. Every member's declared size is
checked before anything is inflated (against the input size limit of
:mod:`phasec.fileio` and against what deflate can produce: a zip bomb is
refused at once); ``constants.npz`` must store its arrays uncompressed (the
executable deflates it as a whole: nested compression, which multiplies,
is refused); ``executable.json`` is at most :data:`MAX_DOCUMENT_BYTES`,
its JSON values are counted (:data:`MAX_DOCUMENT_VALUES`) and its nesting
measured before it is parsed; the kernel file is at most
:data:`MAX_KERNEL_FILE_BYTES` (and, as JSON, counted the same way); any
other member is refused; a zlib or CRC error is a damaged-file error; tensor
constants are checked against their declared shape and dtype and read only
when the VM first uses them; kernels whose text does not match the digest
recorded at build time are refused ("modified after build" — an integrity
check against edited or corrupted files, not a signature: anyone can write
a new digest); the bytecode is validated (register numbers, forward-only
jump targets, function and constant indices) and the parameter struct info
parsed as data. Nothing in the file is executed by Python, and no machine
code is ever read from it: the kernels are compiled again from their IR.
A damaged or hostile file gives a clear :class:`ExecutableFormatError`,
never a crash inside the VM.

Versions: 2 added the parameter struct info (``param_sinfo`` of each
function), 3 the kernel digest and ``check_bounds``. Version 1 and 2 files
load only when they have no kernels (a program of VM builtins alone): their
kernels could not be checked against a digest, and accepting them would let
anyone skip the check by editing the version field. Rebuild older
executables that have kernels. The signatures of version 1 files are
unknown (:meth:`Executable.signature` gives None struct info).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from phasec.errors import FileAccessError, InputError, ParseError, VMError
from phasec.fileio import (
    SafeZip, format_size, load_json, open_aligned_member, pieces, write_aligned_npz, write_atomic,
)
from phasec.ir import is_splat, tir
from phasec.ir.expr import CONSTANT_ALIGNMENT, aligned_empty
from phasec.ir.module import IRModule
from phasec.ir.struct_info import StructInfo
from phasec.interp import call_prim_func
from phasec.runtime.random_inputs import available_memory
from phasec.backend.vm.bytecode import (
    Call, CalleeKind, GetItem, Goto, If, Instruction, LoadConst, MakeClosure, MakePrim,
    MakeShape, MakeTuple, Match, Move, Kill, Ret, VMFunction, instruction_text,
    is_tail_call,
)

__all__ = ["Executable", "ExecutableFormatError", "ConstantPool", "FORMAT_NAME",
           "FORMAT_VERSION", "READABLE_VERSIONS", "kernel_digest"]

FORMAT_NAME = "phasec-vm-executable"
FORMAT_VERSION = 3
#: versions :meth:`Executable.load` reads (1: no parameter struct info; 2: no kernel digest)
READABLE_VERSIONS = (1, 2, 3)


class ExecutableFormatError(VMError, InputError):
    """A file is not a (valid) phasec executable."""


class Executable:
    """Compiled program: bytecode per Relax function, constant pool, PrimFuncs.

    Produced by :func:`phasec.backend.vm.codegen`; run with
    :class:`phasec.backend.vm.VirtualMachine`.
    """

    __slots__ = ("functions", "func_index", "constants", "prim_funcs", "_kernel_cache",
                 "_lock", "_signatures", "_check_bounds")

    def __init__(self, functions: Sequence[VMFunction], constants: Sequence[Any],
                 prim_funcs: Mapping[str, tir.PrimFunc]) -> None:
        self.functions: tuple[VMFunction, ...] = tuple(functions)
        self.func_index: dict[str, int] = {f.name: i for i, f in enumerate(self.functions)}
        self.constants: ConstantPool = constants if isinstance(constants, ConstantPool) \
            else ConstantPool(constants)
        self.prim_funcs: dict[str, tir.PrimFunc] = dict(prim_funcs)
        self._kernel_cache: dict[str, Mapping[str, Callable[..., Any]]] = {}
        self._lock = threading.Lock()
        self._signatures: dict[str, tuple[tuple[str, StructInfo | None], ...]] = {}
        self._check_bounds: bool | None = None
        self.validate()

    @property
    def check_bounds(self) -> bool | None:
        """Which buffer accesses the native kernels check (see
        :func:`phasec.build`): None (the default) every access not proven in
        bounds at compile time, True every access, False none (trusted
        kernels only); saved with the executable."""
        return self._check_bounds

    @check_bounds.setter
    def check_bounds(self, value: bool | None) -> None:
        value = None if value is None else bool(value)
        with self._lock:
            if value is not self._check_bounds:
                self._check_bounds = value
                self._kernel_cache.pop("llvm", None)  # compiled the other way

    # -- inspection ------------------------------------------------------------
    def function_names(self) -> list[str]:
        return [f.name for f in self.functions]

    def __contains__(self, name: object) -> bool:
        return name in self.func_index

    def __repr__(self) -> str:
        return (f"<Executable functions=[{', '.join(self.function_names())}] "
                f"kernels={len(self.prim_funcs)} constants={len(self.constants)}"
                f"{'' if self._check_bounds is None else f' check_bounds={self._check_bounds}'}>")

    def signature(self, name: str) -> list[tuple[str, StructInfo | None]]:
        """(name, struct info) of each parameter of function ``name``, as the
        compiled function had them (symbolic dimensions are ``tir.Var``s, one
        per name, shared across the parameters). A struct info is None when
        the parameter had none, or when the executable does not record it (a
        version-1 file). Raises :class:`VMError` for an unknown function."""
        sig = self._signatures.get(name)
        if sig is None:
            raise VMError(f"the executable has no function {name!r}; it has: "
                          f"{', '.join(self.function_names()) or '(none)'}")
        return list(sig)

    def stats(self) -> dict[str, int]:
        """Sizes: functions, instructions, registers, constants, kernels."""
        return {"functions": len(self.functions),
                "instructions": sum(len(f.code) for f in self.functions),
                "registers": sum(f.num_regs for f in self.functions),
                "constants": len(self.constants),
                "kernels": len(self.prim_funcs)}

    def as_text(self) -> str:
        """Disassembly of every function (for debugging and ``--print``); a call
        the VM runs in its caller's frame is marked ``# tail call``."""
        names = self.function_names()
        lines = []
        for i in range(len(self.constants)):
            lines.append(f"c{i} = {self.constants.describe(i)}")
        for f in self.functions:
            lines.append(f"\nfunction {f.name}({', '.join(f.params)})  # {f.num_regs} registers")
            for pc, ins in enumerate(f.code):
                tail = "  # tail call" if is_tail_call(f.code, pc) else ""
                lines.append(f"  {pc:4d}: {instruction_text(ins, names)}{tail}")
        if self.prim_funcs:
            lines.append(f"\nkernels: {', '.join(sorted(self.prim_funcs))}")
        return "\n".join(lines).lstrip("\n") + "\n"

    # -- kernels -------------------------------------------------------------------
    def kernels(self, backend: str = "llvm", planned: Any = None) -> Mapping[str, Callable[..., Any]]:
        """name -> callable for every PrimFunc (destination-passing style), built
        once per executable and backend: ``"llvm"`` (native code, with the
        bounds checks :attr:`check_bounds` chooses) or ``"interp"`` (the exact
        TIR interpreter, which always checks). ``planned``: for ``"llvm"``, the
        kernels' plan kept from an earlier build (``compile_prim_funcs``)."""
        with self._lock:
            cached = self._kernel_cache.get(backend)
            if cached is None:
                cached = _build_kernels(self.prim_funcs, backend, self._check_bounds, planned)
                self._kernel_cache[backend] = cached
            return cached

    # -- validation ------------------------------------------------------------------
    def validate(self) -> None:
        """Check the bytecode is self-consistent; raises ExecutableFormatError."""
        nfuncs = len(self.functions)
        nconsts = len(self.constants)
        if len(self.func_index) != nfuncs:
            raise ExecutableFormatError("two functions of the executable have the same name")
        for f in self.functions:
            def bad(pc: int, why: str) -> ExecutableFormatError:
                return ExecutableFormatError(f"function {f.name!r}, instruction {pc}: {why}")
            if len(f.params) > f.num_regs:
                raise ExecutableFormatError(f"function {f.name!r} has more parameters than registers")
            if not f.code:
                raise ExecutableFormatError(f"function {f.name!r} has no instructions")
            n = len(f.code)
            for pc, ins in enumerate(f.code):
                if not isinstance(ins, Instruction):
                    raise bad(pc, f"not an instruction: {ins!r:.60}")
                for r in (*ins.registers_read(), *ins.registers_written()):
                    if not isinstance(r, int) or not 0 <= r < f.num_regs:
                        raise bad(pc, f"register {r!r} out of range (function has {f.num_regs})")
                t = type(ins)
                if t is Goto or t is If:
                    off = ins.offset if t is Goto else ins.false_offset
                    if not isinstance(off, int) or not 0 <= pc + off < n:
                        raise bad(pc, f"jump target {pc}{off:+} outside the function")
                    # The code generator only jumps forward (if/else); a backward
                    # jump or one to itself can only loop, and would spin forever.
                    if off <= 0:
                        raise bad(pc, f"backward jump to instruction {pc + off}: phasec "
                                      f"never generates loops in bytecode")
                elif t is LoadConst and not (isinstance(ins.index, int) and 0 <= ins.index < nconsts):
                    raise bad(pc, f"constant index {ins.index!r} out of range")
                elif t is MakeClosure and not (isinstance(ins.func, int) and 0 <= ins.func < nfuncs):
                    raise bad(pc, f"function index {ins.func!r} out of range")
                elif t is Call:
                    if ins.kind == CalleeKind.VM_FUNC:
                        if not (isinstance(ins.callee, int) and 0 <= ins.callee < nfuncs):
                            raise bad(pc, f"function index {ins.callee!r} out of range")
                        callee = self.functions[ins.callee]
                        if len(ins.args) != len(callee.params):
                            raise bad(pc, f"{callee.name!r} takes {len(callee.params)} arguments, "
                                          f"the call passes {len(ins.args)}")
                    if ins.kind == CalleeKind.KERNEL:
                        kernel = self.prim_funcs.get(ins.callee)
                        if kernel is None:
                            raise bad(pc, f"unknown kernel {ins.callee!r}")
                        # (the VM reads its written arguments by position)
                        if len(ins.args) != len(kernel.params):
                            raise bad(pc, f"kernel {ins.callee!r} takes {len(kernel.params)} "
                                          f"arguments, the call passes {len(ins.args)}")
                    if ins.kind in (CalleeKind.PACKED, CalleeKind.BUILTIN) and not isinstance(ins.callee, str):
                        raise bad(pc, f"callee name must be a string, not {ins.callee!r}")
                elif t in (MakeShape, MakePrim, Match, MakeTuple, GetItem, Move, Kill, Ret):
                    pass
            if type(f.code[-1]) not in (Ret, Goto):
                raise ExecutableFormatError(f"function {f.name!r} does not end with ret or goto")
        self._signatures = {f.name: _parse_signature(f) for f in self.functions}

    # -- save / load -------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the executable to ``path`` (a zip archive; see the module doc),
        whole or not at all (:func:`phasec.fileio.write_atomic`)."""
        # whole or not at all: a full disk or Ctrl-C leaves the previous file
        write_atomic(path, lambda fh: self._write_archive(fh, compress=True), what="executable")

    def to_bytes(self, compress: bool = True, with_kernels: bool = True) -> bytes:
        """The archive :meth:`save` writes, as bytes; ``compress=False`` stores
        its members as they are (larger, but read back without inflating;
        each tensor's data on a 64-byte boundary of the archive, so bytes
        read to an aligned address give the constants in place),
        ``with_kernels=False`` leaves the kernels out (to be given to
        :meth:`load`): what the build cache keeps."""
        buffer = io.BytesIO()
        self._write_archive(buffer, compress, with_kernels)
        return buffer.getvalue()

    def _write_archive(self, fh: Any, compress: bool, with_kernels: bool = True) -> None:
        tensors: dict[str, np.ndarray] = {}
        consts = [_const_to_json(self.constants[i], tensors) for i in range(len(self.constants))]
        kernel_name, kernel_text = _kernels_to_text(self.prim_funcs if with_kernels else {})
        doc = {"format": FORMAT_NAME, "version": FORMAT_VERSION,
               "functions": [f.to_json() for f in self.functions],
               "constants": consts, "kernels": kernel_name,
               "kernel_sha256": kernel_digest(kernel_text.encode()),
               "check_bounds": self._check_bounds}

        def member(zf: zipfile.ZipFile, name: str) -> Any:
            # Each write to a deflated member is compressed in one call, which no
            # signal interrupts: write in pieces, so Ctrl-C acts within one piece.
            return pieces(zf.open(name, "w", force_zip64=True))

        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        with zipfile.ZipFile(fh, "w", compression=method) as zf:
            with member(zf, "executable.json") as out:
                out.write(json.dumps(doc, separators=(",", ":")).encode())
            if compress:
                with member(zf, "constants.npz") as out:  # streamed: no copy in memory
                    np.savez(out, **tensors)
            else:
                # stored as is (the build cache): each array's data on a
                # CONSTANT_ALIGNMENT boundary of the archive, so that archive
                # bytes read to an aligned address give the constants in place
                npz = io.BytesIO()
                write_aligned_npz(npz, tensors, CONSTANT_ALIGNMENT)
                with open_aligned_member(zf, "constants.npz", CONSTANT_ALIGNMENT) as out:
                    out.write(npz.getbuffer())
            if kernel_name:
                with member(zf, kernel_name) as out:
                    out.write(kernel_text.encode())

    @classmethod
    def load(cls, path: str | os.PathLike | bytes | memoryview, check_bounds: bool | None = None, *,
             name: str = "executable", kernels: Mapping[str, tir.PrimFunc] | None = None,
             authenticated: bool = False) -> "Executable":
        """Read an executable written by :meth:`save` (or its bytes, from
        :meth:`to_bytes`; ``name`` is what messages call them). ``kernels``:
        the kernels of an archive written without them (``with_kernels=False``).
        ``authenticated``: bytes vouched for byte by byte (the build cache's,
        under its HMAC), whose stored constants are used in place (see
        :class:`~phasec.fileio.SafeZip`).

        ``check_bounds``: None (the default) compiles the kernels with the
        default checks (every buffer access not proven in bounds), or with a
        check of every access if the file was built that way; True checks
        every access (to debug a kernel); False none, for a file you trust
        as you would a native library. The file records how it was built, but
        its "no checks" is not obeyed: a file is data that anyone can write,
        and turning memory safety off is the loading user's decision alone.

        Nothing is inflated before its declared size is checked (against
        :func:`phasec.fileio.max_input_bytes` and what deflate can produce);
        tensor constants are checked against their declared shape and dtype
        now and read when the VM first uses them. A file whose kernels do
        not match the digest recorded at build time is refused ("modified
        after build"). Every problem is an :class:`ExecutableFormatError`.
        """
        in_memory = isinstance(path, (bytes, memoryview))
        where = name if in_memory else os.fspath(path)
        trusted = authenticated and in_memory
        try:
            # (bytes come from the build cache, authenticated: constants are read as views)
            with SafeZip(path, "executable", name=where, authenticated=trusted) as zf:
                names = zf.members
                if "executable.json" not in names:
                    raise ExecutableFormatError(f"{where}: not a phasec executable "
                                                f"(no executable.json inside)")
                # Only data is read: no member holds code to run (kernels are compiled
                # from their IR), and an unexpected member is refused rather than ignored.
                unexpected = sorted(set(names) - set(_MEMBERS))
                if unexpected:
                    raise ExecutableFormatError(
                        f"{where}: damaged executable: unexpected member {unexpected[0]!r:.80}; "
                        f"an executable holds only {', '.join(_MEMBERS)} (no compiled code is "
                        f"ever read from one)")
                doc = _read_document(zf, where)
                npz = zf.read_view("constants.npz") if "constants.npz" in names else None
                kernel_name = doc.get("kernels") if isinstance(doc, dict) else None
                if kernel_name is not None and kernel_name not in _KERNEL_FILES:
                    raise ExecutableFormatError(
                        f"{where}: damaged executable: the kernel file must be one of "
                        f"{', '.join(_KERNEL_FILES)}, not {kernel_name!r:.80}")
                if kernel_name and kernel_name not in names:
                    raise ExecutableFormatError(f"{where}: kernel file {kernel_name!r} is missing")
                if kernel_name and zf.info(kernel_name).file_size > MAX_KERNEL_FILE_BYTES:
                    raise ExecutableFormatError(
                        f"{where}: damaged executable: {kernel_name} declares "
                        f"{format_size(zf.info(kernel_name).file_size)}, more than the "
                        f"{format_size(MAX_KERNEL_FILE_BYTES)} kernels take (it is damaged or "
                        f"built to exhaust memory)")
                kernel_bytes = zf.read(kernel_name) if kernel_name else b""
                kernel_text = kernel_bytes.decode() if kernel_name else None
        except ExecutableFormatError:
            raise
        except FileAccessError as exc:
            if exc.reason == "no such file":
                raise ExecutableFormatError(f"{where}: no such file") from None
            if exc.reason.startswith("not a zip archive"):
                raise ExecutableFormatError(f"{where}: not a phasec executable "
                                            f"({exc.reason})") from None
            if "damaged" in exc.reason or "member" in exc.reason:
                raise ExecutableFormatError(f"{where}: damaged executable: {exc.reason}") \
                    from None
            raise ExecutableFormatError(f"{where}: {exc.reason}") from None
        except UnicodeDecodeError as exc:
            raise ExecutableFormatError(f"{where}: not a phasec executable ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise ExecutableFormatError(f"{where}: not a phasec executable (format is "
                                        f"{doc.get('format') if isinstance(doc, dict) else None!r})")
        version = doc.get("version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise ExecutableFormatError(
                f"{where}: executable format version {version!r} is not supported (this "
                f"phasec reads versions {', '.join(map(str, READABLE_VERSIONS))}); rebuild "
                f"it with this phasec (phasec build)")
        if version < 3 and kernel_name:
            # Versions 1 and 2 had no digest: reading their kernels unchecked would let
            # anyone skip the check by editing the version (see the module doc).
            raise ExecutableFormatError(
                f"{where}: executable format version {version} records no kernel digest, so "
                f"its kernels cannot be checked; this phasec reads version {version} files "
                f"only when they have no kernels: rebuild it with this phasec (phasec build)")
        if version >= 3 and doc.get("kernel_sha256") != kernel_digest(kernel_bytes):
            raise ExecutableFormatError(
                f"{where}: the kernels were modified after build: their SHA-256 does not "
                f"match the one recorded when the executable was built; rebuild it from its "
                f"module (phasec build), and do not run files from untrusted sources")
        try:
            store = _TensorStore(npz, where, trusted) if npz is not None else None
            constants = ConstantPool([_const_from_json(c, store) for c in doc["constants"]])
            functions = [VMFunction.from_json(f) for f in doc["functions"]]
            if version >= 2:  # the parameter struct info is part of the format
                for f in functions:
                    if f.param_sinfo is None:
                        raise ExecutableFormatError(
                            f"{where}: damaged executable: function {f.name!r} has no "
                            f"param_sinfo (required since format version 2)")
            else:  # whatever a version-1 file says, it has no (valid) signatures
                functions = [replace(f, param_sinfo=None) for f in functions]
            prim_funcs = _kernels_from_text(kernel_name, kernel_text) if kernel_name else {}
            if kernels is not None:
                if prim_funcs:
                    raise ExecutableFormatError(f"{where}: has kernels of its own")
                prim_funcs = dict(kernels)
        except ExecutableFormatError:
            raise
        except FileAccessError as exc:
            raise ExecutableFormatError(f"{where}: damaged executable: {exc.reason}") from None
        except Exception as exc:  # malformed content of any kind
            raise ExecutableFormatError(f"{where}: damaged executable: "
                                        f"{type(exc).__name__}: {exc}") from None
        recorded = doc.get("check_bounds")
        if recorded is not None and type(recorded) is not bool:
            raise ExecutableFormatError(f"{where}: damaged executable: check_bounds must be "
                                        f"true, false or null, not {recorded!r:.40}")
        try:
            exe = cls(functions, constants, prim_funcs)
        except ExecutableFormatError as exc:
            raise ExecutableFormatError(f"{where}: {exc}") from None
        # the file may ask for more checks, never for fewer (see the docstring)
        exe.check_bounds = (True if recorded is True else None) if check_bounds is None \
            else bool(check_bounds)
        return exe


#: every member an executable may have, and the kernel files among them
_KERNEL_FILES = ("kernels.json", "kernels.py")
_MEMBERS = ("executable.json", "constants.npz", *_KERNEL_FILES)
#: the largest kernel file read (declared size, checked before inflating): the
#: JSON module format's value limit (16 million) takes about 100 MB of text
MAX_KERNEL_FILE_BYTES = 256 << 20
#: the largest ``executable.json`` read (declared size, checked before inflating) and
#: the most JSON values it may hold: a real one takes ~10 values and ~100 bytes per
#: instruction, so these allow hundreds of thousands of instructions, while
#: memory stays within a few hundred MB whatever the file holds
MAX_DOCUMENT_BYTES = 64 << 20
MAX_DOCUMENT_VALUES = 4_000_000
#: how deeply ``executable.json`` may nest (match patterns nest with tuple types)
MAX_DOCUMENT_DEPTH = 100


def _read_document(zf: SafeZip, where: str) -> Any:
    """``executable.json``, its declared size, value count and nesting
    checked before it is inflated or parsed."""
    size = zf.info("executable.json").file_size
    if size > MAX_DOCUMENT_BYTES:
        raise ExecutableFormatError(
            f"{where}: damaged executable: executable.json declares {format_size(size)}, "
            f"more than the {format_size(MAX_DOCUMENT_BYTES)} an executable's description "
            f"takes (it is damaged or built to exhaust memory)")
    try:
        return load_json(zf.read("executable.json"), "executable.json",
                         MAX_DOCUMENT_VALUES, MAX_DOCUMENT_DEPTH)
    except InputError as exc:
        raise ExecutableFormatError(f"{where}: damaged executable: {exc}") from None


def kernel_digest(kernel_text: bytes) -> str:
    """The SHA-256 of an executable's kernel file, recorded at build time."""
    return hashlib.sha256(kernel_text).hexdigest()


def _parse_signature(f: VMFunction) -> tuple[tuple[str, StructInfo | None], ...]:
    """Parse a function's ``param_sinfo`` texts; ExecutableFormatError if bad."""
    if f.param_sinfo is None:
        return tuple((name, None) for name in f.params)
    if not isinstance(f.param_sinfo, tuple) or len(f.param_sinfo) != len(f.params):
        raise ExecutableFormatError(f"function {f.name!r}: param_sinfo must give one struct "
                                    f"info per parameter ({len(f.params)})")
    # the parser is imported only when an executable is read (~0.4 s)
    from phasec.script.parser import parse_struct_info

    syms: dict[str, tir.Var] = {}  # one variable per dimension name, for all parameters
    sig = []
    for name, text in zip(f.params, f.param_sinfo):
        if text is None:
            sig.append((name, None))
            continue
        if not isinstance(text, str):
            raise ExecutableFormatError(f"function {f.name!r}, parameter {name!r}: struct info "
                                        f"must be text, not {type(text).__name__}")
        try:
            sinfo = parse_struct_info(text, syms=syms)
        except ParseError as exc:
            raise ExecutableFormatError(f"function {f.name!r}, parameter {name!r}: bad struct "
                                        f"info {text!r:.80}: {exc.message}") from None
        sig.append((name, sinfo))
    return tuple(sig)


# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

def _const_to_json(value: Any, tensors: dict[str, np.ndarray]) -> Any:
    if isinstance(value, np.ndarray):
        key = f"c{len(tensors)}"
        tensors[key] = value
        return {"tensor": key}
    if value is None:
        return {"null": True}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": repr(value)}  # exact, and nan/inf survive
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, tuple):
        return {"tuple": [_const_to_json(v, tensors) for v in value]}
    raise VMError(f"cannot save a constant of type {type(value).__name__}")


def _const_from_json(data: Any, store: "_TensorStore | None") -> Any:
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"bad constant {data!r:.60}")
    (kind, value), = data.items()
    if kind == "tensor":
        if store is None:
            raise ValueError("a tensor constant, but the file has no constants.npz")
        return store.pending(value)
    if kind == "null":
        return None
    if kind == "bool":
        return bool(value)
    if kind == "int":
        if not isinstance(value, int):
            raise ValueError(f"bad int constant {value!r}")
        return value
    if kind == "float":
        return float(value)
    if kind == "str":
        return str(value)
    if kind == "tuple":
        return tuple(_const_from_json(v, store) for v in value)
    raise ValueError(f"unknown constant kind {kind!r}")


class _TensorStore:
    """The tensors of a loaded file's ``constants.npz``: every member's declared
    size checked at once, each array read when first used."""

    def __init__(self, npz: "bytes | memoryview", where: str, authenticated: bool = False) -> None:
        self.where = where
        # (np.savez stores its members; the executable deflates the archive as a whole)
        try:
            self.zip = SafeZip(npz, name=f"{where} (constants.npz)", compressed=False,
                               authenticated=authenticated)
        except FileAccessError as exc:
            raise ExecutableFormatError(f"{where}: damaged executable: constants.npz: "
                                        f"{exc.reason}") from None

    def pending(self, key: Any) -> "_PendingTensor":
        if not isinstance(key, str):
            raise ValueError(f"bad tensor reference {key!r:.60}")
        member = f"{key}.npy"
        if member not in self.zip.members:
            raise ValueError(f"tensor constant {key!r} is missing from constants.npz")
        shape, _, dtype = self.zip.npy_header(member)
        return _PendingTensor(self, member, shape, dtype)


class _PendingTensor:
    """A tensor constant not read yet (its header was checked)."""

    __slots__ = ("store", "member", "shape", "dtype")

    def __init__(self, store: _TensorStore, member: str, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.store, self.member, self.shape, self.dtype = store, member, shape, dtype

    def load(self) -> np.ndarray:
        try:
            arr = self.store.zip.array(self.member, writeable=False)
        except FileAccessError as exc:
            raise ExecutableFormatError(f"{self.store.where}: damaged executable: "
                                        f"{exc.reason}") from None
        # Kernels take C-contiguous arrays in native byte order: a Fortran-order
        # or big-endian array (numpy can write both) is converted once, here.
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            arr = np.array(arr, order="C")
        if arr.size and arr.__array_interface__["data"][0] % CONSTANT_ALIGNMENT:
            # (a view into an archive's bytes: aligned as every constant is)
            aligned = aligned_empty(arr.shape, arr.dtype)
            aligned[...] = arr
            arr = aligned
        arr.setflags(write=False)
        return arr


class _SplatTensor:
    """A tensor constant whose elements all have the same bits, kept as that
    element and its shape until a VM first uses it (see :class:`ConstantPool`)."""

    __slots__ = ("element", "shape", "_array", "_lock")

    def __init__(self, element: np.ndarray, shape: tuple[int, ...]) -> None:
        self.element, self.shape = element, shape
        self._array: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def dtype(self) -> np.dtype:
        return self.element.dtype

    def key(self) -> tuple:
        return (self.shape, self.element.dtype.str, self.element.tobytes())

    def load(self) -> np.ndarray:
        """The materialized array: made once, then shared by every use; a
        :class:`VMError` when it does not fit in the memory available."""
        with self._lock:
            if self._array is None:
                nbytes = math.prod(self.shape) * self.element.dtype.itemsize
                room = available_memory()
                if room is not None and nbytes > room:
                    raise VMError(f"a constant of shape {self.shape} ({format_size(nbytes)}) "
                                  f"does not fit in the memory available ({format_size(room)})")
                # aligned like every constant (kernels stream weights with full-width loads)
                try:
                    arr = aligned_empty(self.shape, self.element.dtype)
                except MemoryError:
                    raise VMError(f"out of memory making a constant of shape {self.shape} "
                                  f"({format_size(nbytes)})") from None
                arr[...] = self.element
                arr.setflags(write=False)
                self._array = arr
            return self._array


#: Tensor constants of at least this many elements that are splats are kept
#: compact (smaller ones cost less than the scan that would find them).
SPLAT_MIN_ELEMENTS = 4096


def _compact(value: Any, splats: dict[tuple, _SplatTensor]) -> Any:
    """``value`` with its splat tensors replaced by shared :class:`_SplatTensor`s."""
    if type(value) is tuple:
        return tuple(_compact(v, splats) for v in value)
    if type(value) is _SplatTensor:
        return splats.setdefault(value.key(), value)
    if not isinstance(value, np.ndarray):
        return value
    view = not value.flags.c_contiguous  # a splat Constant's broadcast view, say
    if (view or value.size >= SPLAT_MIN_ELEMENTS) and value.dtype.isnative and is_splat(value):
        splat = _SplatTensor(value.reshape(-1)[:1].reshape(()).copy(), value.shape)
        return splats.setdefault(splat.key(), splat)
    if view:  # kernels take C-contiguous arrays
        value = np.array(value, order="C")
        value.setflags(write=False)
    return value


def _materialize(value: Any) -> Any:
    if type(value) is _PendingTensor or type(value) is _SplatTensor:
        return value.load()
    if type(value) is tuple:
        return tuple(_materialize(v) for v in value)
    return value


def _has_pending(value: Any) -> bool:
    return type(value) is _PendingTensor or type(value) is _SplatTensor or (
        type(value) is tuple and any(_has_pending(v) for v in value))


class ConstantPool(Sequence[Any]):
    """The constants of an executable. Those read from a file load when first
    indexed (the VM indexes a function's constants when it first runs it),
    so constants nothing uses are never inflated.

    A tensor whose elements all have the same bits (a *splat*, e.g. an ONNX
    ``ConstantOfShape`` weight that FoldConstant folded) is kept as one
    element and its shape, and materialized when first indexed, once for all
    equal splats of the pool: the executable stays small, nothing is
    recomputed per call, and the kernels still get an ordinary array."""

    __slots__ = ("_values", "_pending", "_lock")

    def __init__(self, values: Sequence[Any]) -> None:
        splats: dict[tuple, _SplatTensor] = {}
        self._values = [_compact(v, splats) for v in values]
        self._pending = {i for i, v in enumerate(self._values) if _has_pending(v)}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self._values)
        if index in self._pending:
            with self._lock:
                if index in self._pending:
                    self._values[index] = _materialize(self._values[index])
                    self._pending.discard(index)
        return self._values[index]

    def loaded(self, index: int) -> bool:
        """Whether constant ``index`` is in memory (not waiting to be read)."""
        return index not in self._pending

    def describe(self, index: int) -> str:
        """The constant as :meth:`Executable.as_text` shows it, without reading it."""
        value = self._values[index]
        if type(value) in (_PendingTensor, _SplatTensor) and math.prod(value.shape) > 8:
            return f"{value.dtype}{list(value.shape)}"  # (a small one is shown, so read)
        return _const_text(self[index])


def _const_text(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"{value.dtype}{list(value.shape)} {value.tolist()}"
        return f"{value.dtype}{list(value.shape)}"
    return repr(value)


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
#
# The JSON format and the parser are imported only when an executable is
# saved or loaded (they take 0.2-1.4 s to import: a VM running a built
# executable does without); the LLVM backend only when it compiles kernels,
# so that a VM whose kernels run on the interpreter works without it.

def _kernels_to_text(prim_funcs: Mapping[str, tir.PrimFunc]) -> tuple[str | None, str]:
    if not prim_funcs:
        return None, ""
    mod = IRModule(dict(prim_funcs))
    try:
        from phasec.script.json_format import to_json
    except ImportError:
        return "kernels.py", mod.script()
    text = to_json(mod)
    return "kernels.json", text if isinstance(text, str) else json.dumps(text)


def _kernels_from_text(name: str, text: str) -> dict[str, tir.PrimFunc]:
    if name == "kernels.json":
        from phasec.script.json_format import from_json

        mod = from_json(text)
    elif name == "kernels.py":
        from phasec.script.parser import parse

        mod = parse(text)
    else:
        raise ExecutableFormatError(f"unknown kernel file {name!r}")
    return dict(mod.prim_funcs())


def _build_kernels(prim_funcs: Mapping[str, tir.PrimFunc], backend: str,
                   check_bounds: bool | None = None,
                   planned: Any = None) -> dict[str, Callable[..., Any]]:
    if not prim_funcs:
        return {}
    if backend == "interp":
        def make(name: str, func: tir.PrimFunc) -> Callable[..., Any]:
            def kernel(*args: Any) -> None:
                call_prim_func(name, func, args)
            kernel.__name__ = name
            return kernel

        return {name: make(name, f) for name, f in prim_funcs.items()}
    if backend == "llvm":
        try:
            from phasec.backend.llvm import compile_prim_funcs
        except ImportError as exc:
            raise VMError(f"the LLVM kernel backend is not available ({exc}); run with "
                          f"VirtualMachine(exe, kernels='interp')") from exc
        lib = compile_prim_funcs(dict(prim_funcs), check_bounds=check_bounds, planned=planned)
        return {name: lib[name] for name in prim_funcs}
    raise VMError(f"unknown kernel backend {backend!r}; expected 'llvm' or 'interp'")
