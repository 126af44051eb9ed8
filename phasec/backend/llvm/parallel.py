"""Compiling the modules of one kernel library on several cores.

llvmlite lets one thread into LLVM at a time, so a large library's kernels
are split into modules (:func:`split_kernels`, deterministic: the same
kernels always give the same modules), a few per core and smaller and
smaller, compiled by this process and by worker processes
(:mod:`.objworker`), each taking the next module as soon as it is free: what a module costs LLVM
is only roughly proportional to its size (a convolution of 45k characters
took 0.7 s, one of 180k 0.5 s), so a fixed share per process left one
waiting for the other (ResNet-50: 4.6 s of work against 3.7 s). The workers
are started here, by this process, from phasec's own ``objworker.py`` with
the running interpreter, and they hand back object code for IR this
process generated: what gets loaded is code phasec built for this user in
this run, the same as an in-process compilation; which process compiled a
module changes nothing in its code.

A worker that cannot be started, dies or answers nonsense is not an error:
its module is compiled here instead (so a broken worker costs time, never a
build). Invalid IR is reported as the in-process compilation reports it.

While the workers compile, the building thread may first do other work of
the build (:func:`meanwhile`: ``build_file`` packs the build-cache entry
there, ~0.1-0.2 s of Python that otherwise ran after LLVM on one core).
Before, a build may start a worker ahead (:func:`standby`: ``build_file``
does so before its passes), so that its interpreter and LLVM are up when
the first module is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from phasec.backend.llvm import objworker

__all__ = ["split_kernels", "compile_modules", "meanwhile", "Meanwhile", "standby",
           "MIN_MODULE_IR_CHARS", "MIN_SPLIT_IR_CHARS", "MODULE_SHARE", "STREAM_MODULE_IR_CHARS"]

#: the kernel IR (characters) a module must have to be worth a worker of its
#: own: a worker costs ~50 ms of CPU to start, and each module compiles the
#: shared library code again (~3 ms); 20k characters of kernel IR take
#: ~0.05-0.2 s. Small enough that the last modules even out the processes:
#: LLVM's time per character varies 10x between kernels (a max pool's 15k
#: characters cost as much as a convolution's 50k, and the split puts the
#: small ones last), so with 100k the last module kept one process busy
#: ~0.3 s after the other had finished, with 40k ~0.15-0.25 s (SqueezeNet
#: and ResNet-50, replayed from their per-kernel costs: 20k gives SqueezeNet
#: 11 modules instead of 9 and ~0.1 s less wall, ResNet-50 ~0.03 s)
MIN_MODULE_IR_CHARS = 20_000

#: the kernel IR (characters) of the smallest library compiled in several
#: modules (~0.2-0.4 s of LLVM, split in two: a worker's ~50 ms of CPU to
#: start buys ~0.1 s of wall)
MIN_SPLIT_IR_CHARS = 80_000

#: the kernel IR (characters) of each module a build hands to a worker while
#: it still emits the other kernels (runtime's ``_emitted_modules``): ~0.3 s
#: of LLVM, longer than emitting the rest of a model takes; replayed from
#: SqueezeNet's and ResNet-50's per-kernel costs, 80k gave the same wall
#: with more modules (12 and 13 instead of 9 and 10), 320k left ResNet-50's
#: worker idle at the end
STREAM_MODULE_IR_CHARS = 160_000

#: one compiled module: object code, optimized IR, external functions called
Compiled = tuple[bytes, str, list[str]]


#: each module holds about 1 / (MODULE_SHARE * jobs) of the kernel IR not
#: yet in a module: large modules first, then smaller and smaller ones,
#: which the processes free first take, so that they end together
MODULE_SHARE = 2


def split_kernels(sizes: dict[str, int], jobs: int) -> list[list[str]]:
    """Kernel names in groups, one module each, for ``jobs`` processes: one
    group when ``jobs`` is 1 or the library is small (under
    :data:`MIN_SPLIT_IR_CHARS`: a worker would cost more than it saves),
    else the kernels from the largest IR down, cut whenever a group holds
    ``1 / (MODULE_SHARE * jobs)`` of the IR left (at least
    ``MIN_MODULE_IR_CHARS``, and leaving at least that much), so that groups
    shrink from the first to the last. Deterministic (ties by name); names
    sorted within a group."""
    total = sum(sizes.values())
    if jobs <= 1 or total < MIN_SPLIT_IR_CHARS:
        return [sorted(sizes)] if sizes else []
    groups: list[list[str]] = []
    group: list[str] = []
    load, left = 0, total
    for name in sorted(sizes, key=lambda k: (-sizes[k], k)):
        group.append(name)
        load += sizes[name]
        if load >= max(left / (MODULE_SHARE * jobs), MIN_MODULE_IR_CHARS) \
                and left - load >= MIN_MODULE_IR_CHARS:
            groups.append(sorted(group))
            left -= load
            group, load = [], 0
    if group:
        groups.append(sorted(group))
    return groups


class Meanwhile:
    """A job this thread runs once while worker processes compile (see
    :func:`meanwhile`); :meth:`result` runs it now if that did not happen."""

    def __init__(self, job: Callable[[], Any]) -> None:
        self._job: Callable[[], Any] | None = job
        self._value: Any = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Run the job unless it has run (its exception is kept for :meth:`result`)."""
        job, self._job = self._job, None
        if job is not None:
            try:
                self._value = job()
            except Exception as exc:  # noqa: BLE001 - raised by result(), where it is asked for
                self._error = exc

    @property
    def pending(self) -> bool:
        """Whether the job has yet to run."""
        return self._job is not None

    def result(self) -> Any:
        """The job's value (running it first if it has not run), or its exception."""
        self.run()
        if self._error is not None:
            raise self._error
        return self._value


_pending = threading.local()


@contextmanager
def meanwhile(job: Callable[[], Any]) -> Iterator[Meanwhile]:
    """Within the block, the first :func:`compile_modules` of this thread runs
    ``job`` on this thread once its workers have their modules (the job's
    Python then overlaps their LLVM instead of following it on one core);
    ``.result()`` gives its value, running it then if no compilation with
    workers happened (one module, a disk-cache hit)."""
    handle = Meanwhile(job)
    outer = getattr(_pending, "job", None)
    _pending.job = handle
    try:
        yield handle
    finally:
        _pending.job = outer


class _Worker:
    """One worker process compiling the modules it is given, one at a time;
    started without a header (:func:`standby`), it waits for :meth:`begin`."""

    def __init__(self, header: dict[str, Any] | None) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc: subprocess.Popen[bytes] | None = None
        self.failed = False
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", objworker.__file__], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self.stderr, close_fds=True)
        except (OSError, ValueError):  # no interpreter to start
            self._end()
            self.failed = True
        if header is not None:
            self.begin(header)

    def begin(self, header: dict[str, Any]) -> None:
        """Send the compilation settings (the worker's first frame)."""
        if self.failed or self.proc is None or self.proc.stdin is None:
            return
        try:
            objworker.write_frame(self.proc.stdin, json.dumps(header).encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):  # a worker that died meanwhile: a closed pipe
            self._end()
            self.failed = True

    def compile(self, ir_text: str) -> "Compiled | str | None":
        """The compiled module, LLVM's error message, or None (the worker
        failed: it is given nothing more)."""
        if self.failed or self.proc is None or self.proc.stdin is None \
                or self.proc.stdout is None:
            return None
        try:
            objworker.write_frame(self.proc.stdin, ir_text.encode("utf-8"))
            self.proc.stdin.flush()
            reply = json.loads(objworker.read_frame(self.proc.stdout))
            obj = objworker.read_frame(self.proc.stdout)
            optimized = objworker.read_frame(self.proc.stdout).decode("utf-8")
        except (EOFError, OSError, ValueError):  # (a killed worker: a closed pipe)
            self.failed = True
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("error"), str):
            self.failed = True
            return None
        if reply["error"]:
            return reply["error"]
        externals = reply.get("externals")
        if not obj or not isinstance(externals, list) or \
                not all(isinstance(e, str) for e in externals):
            self.failed = True
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


#: workers started by :func:`standby`, not yet taken by a compilation
_standby: list[_Worker] = []
_standby_lock = threading.Lock()


@contextmanager
def standby(count: int = 1) -> Iterator[None]:
    """Start ``count`` worker processes now, which the compilations within
    the block (in any thread) take before starting their own; those not
    taken are stopped when the block ends, an exception or Ctrl-C included.

    A worker's interpreter and LLVM take ~0.05-0.1 s to start: started when
    the first module is ready, that delayed the worker's first module; a
    build that starts one before its passes (``build_file``) has it ready,
    the start overlapping the passes on another core."""
    started = [_Worker(None) for _ in range(max(0, count))]
    with _standby_lock:
        _standby.extend(started)
    try:
        yield
    finally:
        with _standby_lock:
            # (a worker compares by identity: ``in`` finds this block's own)
            left = [w for w in started if w in _standby]
            _standby[:] = [s for s in _standby if s not in left]
        for worker in left:
            worker.stop()  # (it compiled nothing: nothing of its output to show)


def _take_standby(header: dict[str, Any]) -> _Worker | None:
    """A worker :func:`standby` started, now given ``header``, or None."""
    with _standby_lock:
        worker = _standby.pop(0) if _standby else None
    if worker is not None:
        worker.begin(header)
    return worker


def compile_modules(ir_texts: Iterable[str], triple: str, cpu: str, features: str,
                    opt_level: int, diagnostics: Callable[[bytes], None],
                    workers: int | None = None) -> list[Compiled]:
    """Compile every module, here and in ``workers`` worker processes, each
    process taking the next module in order as soon as it is free, and
    return the results in order; what the workers wrote to standard error
    goes to ``diagnostics`` once they have ended. Invalid IR raises
    RuntimeError with LLVM's message.

    ``ir_texts`` a sequence: the workers (one per module after the first
    when ``workers`` is None) start once this process has taken the first
    module, the largest. An iterator (modules produced while others compile:
    the kernel IR emitted kernel by kernel, see ``runtime``): a worker
    starts with its first module, another (up to ``workers``, one when
    None) whenever a module comes while none is free, and they take the
    modules as it yields them, while this thread produces the rest; it compiles only once
    the iterator is done. An exception of the iterator ends the workers and
    propagates."""
    header = {"triple": triple, "cpu": cpu, "features": features, "opt_level": opt_level}
    streamed = not isinstance(ir_texts, Sequence)
    texts: list[str] = []
    pending: deque[int] = deque()
    ready = threading.Condition()
    closed = False  # (no module comes after those in ``pending``)
    results: dict[int, "Compiled | str | None"] = {}

    free = 0  # (workers waiting for a module or about to ask for one)

    def take(wait: bool) -> int | None:
        nonlocal free
        with ready:
            while wait and not pending and not closed:
                ready.wait()
            if not pending:
                return None
            free -= wait  # (a worker's feeder took it)
            return pending.popleft()

    def feed(worker: _Worker) -> None:
        # (a thread per worker: it waits on the worker's pipes while this
        # thread is inside LLVM, which releases the GIL)
        nonlocal free
        while (i := take(wait=True)) is not None:
            got = worker.compile(texts[i])
            results[i] = got
            if got is None or isinstance(got, str):
                return  # (the module is compiled here, or its error raised)
            with ready:
                free += 1

    def add(text: str) -> None:
        with ready:
            texts.append(text)
            pending.append(len(texts) - 1)
            ready.notify()

    def close() -> None:
        nonlocal closed
        with ready:
            closed = True
            ready.notify_all()

    started: list[_Worker] = []
    feeders: list[threading.Thread] = []

    def start(count: int) -> None:
        nonlocal free
        fresh = [_take_standby(header) or _Worker(header) for _ in range(max(0, count))]
        started.extend(fresh)
        for worker in fresh:
            if not worker.failed:
                with ready:
                    free += 1
                feeders.append(threading.Thread(target=feed, args=(worker,), daemon=True))
                feeders[-1].start()

    job: Meanwhile | None = getattr(_pending, "job", None)
    i: int | None = None
    try:
        if streamed:
            limit = 1 if workers is None else workers
            for text in ir_texts:
                add(text)
                # (one more worker when none is free for this module: a
                # library of few modules starts no more than it uses)
                with ready:
                    more = len(started) < limit and free <= 0
                if more:
                    start(1)
            close()
        else:
            for text in ir_texts:
                add(text)
            close()
            count = len(texts) - 1 if workers is None else min(workers, len(texts) - 1)
            # (the largest module here, the workers are still starting; unless
            # this thread has other work first: then the workers take the first)
            if job is None or not job.pending or count <= 0:
                i = take(wait=False)
            start(count)
        if job is not None and job.pending and started:
            job.run()
        if i is None:
            i = take(wait=False)
        while i is not None:
            results[i] = objworker.compile_object(texts[i], triple, cpu, features, opt_level)
            i = take(wait=False)
        for thread in feeders:
            thread.join()
        for k in range(len(texts)):
            if isinstance(results.get(k), str):
                raise RuntimeError(results[k])
        for k in range(len(texts)):
            if results.get(k) is None:  # a worker that failed: compiled here
                results[k] = objworker.compile_object(texts[k], triple, cpu, features,
                                                      opt_level)
    finally:
        close()  # (feeders waiting for a module that will not come end)
        for worker in started:  # (on Ctrl-C too: no worker outlives the build)
            diagnostics(worker.stop())
        for thread in feeders:  # (their workers are dead: their pipes are closed)
            thread.join()
    out = [results[k] for k in range(len(texts))]
    return [r for r in out if r is not None and not isinstance(r, str)]
