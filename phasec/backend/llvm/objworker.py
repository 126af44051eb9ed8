"""LLVM IR to object code, in this process or in a compile worker process.

:func:`compile_object` optimizes one LLVM module with phasec's pipeline
(:func:`optimize`, which :func:`phasec.backend.llvm.jit.jit_compile` runs too:
new pass manager at O``opt_level``, loop and SLP vectorization from O2) and
emits its machine
code as a relocatable object for the JIT's target machine; the parent loads
that object into an MCJIT engine as it loads a kernel-cache entry.

llvmlite serialises every call into LLVM behind one process-wide lock, so
threads cannot compile two modules at once: the kernels of a large library
are split into modules compiled by worker processes (:mod:`.parallel`). A
worker is this file run as a script (``python -I objworker.py``): it imports
llvmlite and the standard library only (no phasec: starting one costs
~50 ms of CPU), reads its modules from standard input, and writes each
one's object code and optimized IR to standard output. What LLVM prints
(remarks) goes to the worker's standard error, a file the parent reads and
shows like its own captured output. The worker ignores SIGINT: on Ctrl-C
the parent stops and kills its workers (a terminal sends SIGINT to the whole
process group).

Framing, both ways: an 8-byte little-endian length, then that many bytes.
Request: a JSON header (``triple``, ``cpu``, ``features``, ``opt_level``),
then modules one at a time, each module's IR in one frame, until the parent
closes the stream. Reply per module, written before the next module is
read: a JSON header (``error``: '' or LLVM's message; ``externals``: the
functions the code calls but does not define), the object code, the
optimized IR. (One at a time, so that the parent hands the next module to
whichever process is free: see :mod:`.parallel`.)
"""

from __future__ import annotations

import json
import signal
import struct
import sys
from collections.abc import Collection
from typing import Any, BinaryIO

import llvmlite.binding as llvm

_LENGTH = struct.Struct("<Q")
#: the largest frame a worker or its parent reads (a kernel module is a few MiB)
MAX_FRAME_BYTES = 1 << 30

_initialized = False
#: the prefix of the vector variants of phasec.backend.llvm.intdot's helper
#: (spelled here: a worker imports no phasec)
_DOT4_VARIANT = "phasec.dot4_u8s8.v"


def _initialize() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialized = True


def target_machine(triple: str, cpu: str, features: str) -> Any:
    """The target machine the JIT uses (same settings as ``HostTarget``)."""
    _initialize()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="default",
                                        codemodel="jitdefault", jit=True)


#: the switches of LLVM's pipeline tuning options, all on from O2 (see
#: :func:`pass_builder`); with one off, LLVM still does what the IR's loop
#: metadata forces (a loop phasec marks vectorized or unrolled)
PIPELINE_SWITCHES = ("loop_vectorization", "slp_vectorization", "loop_unrolling",
                     "loop_interleaving")


def pass_builder(tm: Any, opt_level: int, off: Collection[str] = ()) -> Any:
    """LLVM's pass builder for phasec's pipeline at O``opt_level``, every
    switch of :data:`PIPELINE_SWITCHES` on from O2 but those in ``off``
    (a build turns them all off for a small library only,
    :func:`.work.library_pipeline`; ``bench/bench_compile_variants.py``
    measures what each costs and buys)."""
    unknown = set(off) - set(PIPELINE_SWITCHES)
    if unknown:
        raise ValueError(f"no pipeline switch {sorted(unknown)}; the switches: {PIPELINE_SWITCHES}")
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    for switch in PIPELINE_SWITCHES:
        setattr(pto, switch, opt_level >= 2 and switch not in off)
    return llvm.create_pass_builder(tm, pto)


def optimize(mod: Any, tm: Any, opt_level: int, off: Collection[str] = ()) -> None:
    """Run phasec's LLVM pipeline on ``mod`` in place (``off``: see :func:`pass_builder`)."""
    pb = pass_builder(tm, opt_level, off)
    pb.getModulePassManager().run(mod, pb)
    if any(f.name.startswith(_DOT4_VARIANT) for f in mod.functions):
        # the vectorizer called the dot4 helper's vector variants (intdot.py):
        # their bodies (one vpdpbusd) go in place now, which the pipeline's
        # inliner, run before the vectorizer, could not do
        late = llvm.create_new_module_pass_manager()
        late.add_always_inliner_pass()
        late.add_instruction_combine_pass()
        late.run(mod, pb)


def compile_object(ir_text: str, triple: str, cpu: str, features: str,
                   opt_level: int) -> tuple[bytes, str, list[str]]:
    """(object code, optimized IR, external functions called) of ``ir_text``.
    Invalid IR raises RuntimeError with LLVM's message."""
    tm = target_machine(triple, cpu, features)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    mod.triple = triple
    mod.data_layout = str(tm.target_data)
    optimize(mod, tm, opt_level)
    externals = [f.name for f in mod.functions
                 if f.is_declaration and not f.name.startswith("llvm.")]
    optimized = str(mod)
    return bytes(tm.emit_object(mod)), optimized, externals


def write_frame(out: BinaryIO, data: bytes) -> None:
    out.write(_LENGTH.pack(len(data)))
    out.write(data)


def read_frame(src: BinaryIO) -> bytes:
    """One frame; EOFError when the stream ends first or the length is absurd."""
    data = read_frame_or_end(src)
    if data is None:
        raise EOFError("the stream ended")
    return data


def read_frame_or_end(src: BinaryIO) -> bytes | None:
    """One frame, or None when the stream ends cleanly before it; EOFError
    when it ends inside the frame or the length is absurd."""
    head = src.read(_LENGTH.size)
    if not head:
        return None
    if len(head) != _LENGTH.size:
        raise EOFError("the stream ended inside a frame length")
    (size,) = _LENGTH.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise EOFError(f"a frame of {size} bytes")
    data = src.read(size)
    if len(data) != size:
        raise EOFError("the stream ended inside a frame")
    return data


def serve(src: BinaryIO, out: BinaryIO) -> None:
    """Compile modules until ``src`` ends (see the module docstring)."""
    header = json.loads(read_frame(src))
    while (frame := read_frame_or_end(src)) is not None:
        ir_text = frame.decode("utf-8")
        try:
            obj, optimized, externals = compile_object(
                ir_text, header["triple"], header["cpu"], header["features"],
                int(header["opt_level"]))
            reply = {"error": "", "externals": externals}
        except RuntimeError as exc:
            obj, optimized, reply = b"", "", {"error": str(exc), "externals": []}
        write_frame(out, json.dumps(reply).encode())
        write_frame(out, obj)
        write_frame(out, optimized.encode("utf-8"))
        out.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; see the docstring
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except (EOFError, BrokenPipeError):  # the parent went away
        sys.exit(1)
