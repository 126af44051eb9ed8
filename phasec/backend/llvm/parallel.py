"""Compiling the modules of one kernel library on several cores.

llvmlite lets one thread into LLVM at a time, so a large library's kernels
are split into a few modules (:func:`split_kernels`, deterministic: the same
kernels always give the same modules) and all but the first are compiled by
worker processes (:mod:`.objworker`) while this process compiles the first.
The workers are started here, by this process, from phasec's own
``objworker.py`` with the running interpreter, and they hand back object
code for IR this process generated: what gets loaded is code phasec built
for this user in this run, the same as an in-process compilation.

A worker that cannot be started, dies or answers nonsense is not an error:
its module is compiled here instead (so a broken worker costs time, never a
build). Invalid IR is reported as the in-process compilation reports it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from phasec.backend.llvm import objworker

__all__ = ["split_kernels", "compile_modules", "MIN_MODULE_IR_CHARS"]

#: the kernel IR (characters) a module must have to be worth a worker of its
#: own: a worker costs ~50 ms of CPU to start, and each module compiles the
#: shared library code again; 100k characters of kernel IR take ~0.3 s
MIN_MODULE_IR_CHARS = 100_000

#: one compiled module: object code, optimized IR, external functions called
Compiled = tuple[bytes, str, list[str]]


def split_kernels(sizes: dict[str, int], jobs: int) -> list[list[str]]:
    """Kernel names in at most ``jobs`` groups of about equal IR size, each
    with at least :data:`MIN_MODULE_IR_CHARS` (one group when the library is
    small). Deterministic: the largest kernel first into the lightest group
    (the first on ties); names sorted within a group."""
    total = sum(sizes.values())
    n = max(1, min(jobs, len(sizes), total // MIN_MODULE_IR_CHARS))
    groups: list[list[str]] = [[] for _ in range(n)]
    loads = [0] * n
    for name in sorted(sizes, key=lambda k: (-sizes[k], k)):
        i = loads.index(min(loads))
        groups[i].append(name)
        loads[i] += sizes[name]
    return [sorted(g) for g in groups if g]


class _Worker:
    """One worker process compiling one module."""

    def __init__(self, ir_text: str, header: dict[str, Any]) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc: subprocess.Popen[bytes] | None = None
        self.failed = False
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", objworker.__file__], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self.stderr, close_fds=True)
            assert self.proc.stdin is not None
            objworker.write_frame(self.proc.stdin, json.dumps({**header, "modules": 1}).encode())
            objworker.write_frame(self.proc.stdin, ir_text.encode("utf-8"))
            self.proc.stdin.close()
        except (OSError, ValueError):  # no interpreter to start, a closed pipe
            self._end()
            self.failed = True

    def result(self) -> "Compiled | str | None":
        """The compiled module, LLVM's error message, or None (the worker failed)."""
        if self.failed or self.proc is None or self.proc.stdout is None:
            return None
        try:
            reply = json.loads(objworker.read_frame(self.proc.stdout))
            obj = objworker.read_frame(self.proc.stdout)
            optimized = objworker.read_frame(self.proc.stdout).decode("utf-8")
            if self.proc.wait() != 0:
                return None
        except (EOFError, OSError, ValueError):
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("error"), str):
            return None
        if reply["error"]:
            return reply["error"]
        externals = reply.get("externals")
        if not obj or not isinstance(externals, list) or \
                not all(isinstance(e, str) for e in externals):
            return None
        return obj, optimized, externals

    def stop(self) -> bytes:
        """End the worker (killed if still running) and return what it wrote
        to its standard error."""
        self._end()
        if self.stderr.closed:
            return b""
        try:
            self.stderr.seek(0)
            return self.stderr.read()
        finally:
            self.stderr.close()

    def _end(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:  # a pipe the dead worker left unread
                        pass


def compile_modules(ir_texts: Sequence[str], triple: str, cpu: str, features: str,
                    opt_level: int, diagnostics: Callable[[bytes], None]) -> list[Compiled]:
    """Compile every module (the first here, the others in workers) and
    return the results in order; what the workers wrote to standard error
    goes to ``diagnostics`` once they have ended. Invalid IR raises
    RuntimeError with LLVM's message."""
    header = {"triple": triple, "cpu": cpu, "features": features, "opt_level": opt_level}
    workers: list[_Worker] = []
    try:
        for text in ir_texts[1:]:
            workers.append(_Worker(text, header))
        results = [objworker.compile_object(ir_texts[0], triple, cpu, features, opt_level)]
        for text, worker in zip(ir_texts[1:], workers):
            got = worker.result()
            if isinstance(got, str):
                raise RuntimeError(got)
            results.append(got if got is not None else
                           objworker.compile_object(text, triple, cpu, features, opt_level))
    finally:
        for worker in workers:  # (on Ctrl-C too: no worker outlives the build)
            diagnostics(worker.stop())
    return results
