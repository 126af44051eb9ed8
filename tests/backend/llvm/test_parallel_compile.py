"""A large kernel library is compiled as several LLVM modules by worker
processes (phasec/backend/llvm/parallel.py): the kernels compute what numpy
computes, the split and the code do not depend on which process compiled
what, a warm build maps every module from the disk cache, and a worker that
fails or a Ctrl-C never loses a build or leaves a worker behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phasec.backend.llvm import CodegenError, compile_prim_funcs, parallel
from phasec.errors import InputError
from phasec.ir import tir as T

N = 37


def _library() -> dict:
    """Six kernels out = a * x + b (elementwise, float32), each its own constants."""
    funcs = {}
    for k in range(6):
        A, C = T.Buffer("A", (N,)), T.Buffer("C", (N,))
        i = T.Var("i")
        value = A[i] * T.as_prim_expr(1.5 + k, "float32") + T.as_prim_expr(-k, "float32")
        funcs[f"k{k}"] = T.PrimFunc((A, C), T.For(i, 0, N, "serial", T.BufferStore(C, value, (i,))))
    return funcs


def _check(lib) -> None:
    x = np.linspace(-3, 3, N, dtype=np.float32)
    for k in range(6):
        out = np.empty(N, np.float32)
        lib[f"k{k}"](x, out)
        # (a multiply-add may be fused: one rounding instead of two)
        np.testing.assert_allclose(out, x * np.float32(1.5 + k) + np.float32(-k), rtol=1e-6,
                                   atol=1e-6)


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every library is split over 3 processes, in a private kernel cache."""
    monkeypatch.setattr(parallel, "MIN_MODULE_IR_CHARS", 1)
    monkeypatch.setattr(parallel, "MIN_SPLIT_IR_CHARS", 1)
    monkeypatch.setenv("PHASEC_COMPILE_JOBS", "3")
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    return tmp_path / "kernels"


def test_split_shrinks_and_is_deterministic_and_complete() -> None:
    sizes = {"a": 500_000, "b": 300_000, "c": 250_000, "d": 200_000, "e": 10}
    groups = parallel.split_kernels(sizes, 2)
    assert groups == parallel.split_kernels(dict(reversed(sizes.items())), 2)
    assert sorted(n for g in groups for n in g) == sorted(sizes)
    # a quarter of what is left each (two processes), never under
    # MIN_MODULE_IR_CHARS nor leaving less: e (10 characters) joins d
    assert groups == [["a"], ["b"], ["c"], ["d", "e"]]
    # a small library, or one process: one module
    assert parallel.split_kernels({"a": 1000, "b": 2000}, 8) == [["a", "b"]]
    small = {"a": parallel.MIN_SPLIT_IR_CHARS // 2, "b": parallel.MIN_SPLIT_IR_CHARS // 2 - 1}
    assert parallel.split_kernels(small, 2) == [["a", "b"]]
    assert parallel.split_kernels({**small, "b": small["a"]}, 2) == [["a"], ["b"]]
    assert parallel.split_kernels(sizes, 1) == [sorted(sizes)]


def test_free_processes_take_the_next_module(split: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # modules are handed out one at a time: while this process is stuck on
    # its first module, the two workers take all the others
    import time

    from phasec.backend.llvm.jit import host_target

    by_workers: list[str] = []
    real_compile, real_here = parallel._Worker.compile, parallel.objworker.compile_object

    def worker_compile(self, text):
        got = real_compile(self, text)
        by_workers.append(text)
        return got

    here: list[str] = []

    def stuck_here(text, *args):
        here.append(text)
        deadline = time.monotonic() + 60
        while len(by_workers) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_here(text, *args)

    monkeypatch.setattr(parallel._Worker, "compile", worker_compile)
    monkeypatch.setattr(parallel.objworker, "compile_object", stuck_here)
    target = host_target()
    texts = [f"define i32 @f{k}() {{\nentry:\n  ret i32 {k}\n}}\n" for k in range(7)]
    done = parallel.compile_modules(texts, target.triple, target.cpu, target.features, 2,
                                    lambda _err: None, workers=2)
    assert here == texts[:1] and sorted(by_workers) == sorted(texts[1:])
    for k, (obj, optimized, externals) in enumerate(done):  # in order, whoever compiled it
        assert obj and f"@f{k}()" in optimized and f"ret i32 {k}" in optimized
        assert externals == []


def test_work_meanwhile_runs_while_the_workers_compile(split: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the job runs on the building thread once the workers hold modules, before
    # that thread compiles any itself; the library still computes what numpy does
    events: list[str] = []
    real_compile, real_here = parallel._Worker.compile, parallel.objworker.compile_object

    def worker_compile(self, text):
        events.append("worker")
        return real_compile(self, text)

    def here(*args):
        events.append("here")
        return real_here(*args)

    def job() -> int:
        events.append("job")
        return 42

    monkeypatch.setattr(parallel._Worker, "compile", worker_compile)
    monkeypatch.setattr(parallel.objworker, "compile_object", here)
    with parallel.meanwhile(job) as side:
        lib = compile_prim_funcs(_library(), use_cache=False)
        assert not side.pending and events.count("job") == 1
        assert "here" not in events[:events.index("job")]
    assert side.result() == 42 and events.count("job") == 1
    _check(lib)
    # no workers (one process): the job runs when its result is asked for, once
    monkeypatch.setenv("PHASEC_COMPILE_JOBS", "1")
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    events.clear()
    with parallel.meanwhile(job) as side:
        compile_prim_funcs(_library(), use_cache=False)
        assert side.pending and events == []
    assert side.result() == 42 and side.result() == 42 and events == ["job"]

    def failing() -> None:
        raise ValueError("the job's own error")

    with parallel.meanwhile(failing) as side:
        side.run()  # (kept: raised where the result is asked for)
    with pytest.raises(ValueError, match="the job's own error"):
        side.result()


def test_first_modules_go_to_a_worker_while_the_rest_is_emitted(
        split: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every kernel of the first half is a module of its own, given to a worker
    # as soon as it is emitted: a worker starts after the first kernel
    from phasec.backend.llvm import runtime
    from phasec.backend.llvm.codegen import ModuleCodegen

    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    reference = compile_prim_funcs(_library(), use_cache=False)  # (streamed too)
    monkeypatch.setattr(runtime, "STREAM_MODULE_IR_CHARS", 1)
    events: list[str] = []
    real_add, real_init = ModuleCodegen.add_kernel, parallel._Worker.__init__

    def add_kernel(self, name, func):
        events.append(name)
        return real_add(self, name, func)

    def init(self, *args):
        events.append("worker")
        real_init(self, *args)

    monkeypatch.setattr(ModuleCodegen, "add_kernel", add_kernel)
    monkeypatch.setattr(parallel._Worker, "__init__", init)
    lib = compile_prim_funcs(_library(), use_cache=False)
    assert [e for e in events if e != "worker"] == [f"k{k}" for k in range(6)]
    # a worker for the first module; a second (of two allowed) only if k1's
    # module came while the first was still busy
    assert events[:2] == ["k0", "worker"] and 1 <= events.count("worker") <= 2
    assert len(lib._natives) == 6
    _check(lib)
    # the same modules compiled here when no worker starts: the same code
    monkeypatch.setattr(parallel.sys, "executable", "/nonexistent/python")
    again = compile_prim_funcs(_library(), use_cache=False)
    assert again.optimized_ir == lib.optimized_ir
    _check(again)
    assert sorted(reference.optimized_ir.split("define")) == \
        sorted(lib.optimized_ir.split("define"))


def _recording_workers(monkeypatch: pytest.MonkeyPatch) -> list[parallel._Worker]:
    started: list[parallel._Worker] = []
    real_init = parallel._Worker.__init__

    def recording(self, *args):
        real_init(self, *args)
        started.append(self)

    monkeypatch.setattr(parallel._Worker, "__init__", recording)
    return started


def _ended(workers: list[parallel._Worker]) -> bool:
    return all(w.proc is not None and w.proc.returncode is not None for w in workers)


def test_a_kernel_that_fails_to_emit_after_modules_left_ends_the_workers(
        split: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from phasec.backend.llvm import runtime

    monkeypatch.setattr(runtime, "STREAM_MODULE_IR_CHARS", 1)
    started = _recording_workers(monkeypatch)
    funcs = _library()
    A, C, i = T.Buffer("A", (N,)), T.Buffer("C", (N,)), T.Var("i")
    stray = T.Var("stray")  # defined nowhere: the kernel cannot be emitted
    funcs["k4"] = T.PrimFunc((A, C), T.For(i, 0, N, "serial",
                                           T.BufferStore(C, A[i], (i + stray,))))
    with pytest.raises(CodegenError, match="k4"):
        compile_prim_funcs(funcs, use_cache=False)
    assert 1 <= len(started) <= 2 and _ended(started)  # (they had the first modules)


def test_library_compiled_by_workers_computes_what_numpy_does(split: Path) -> None:
    lib = compile_prim_funcs(_library(), use_cache=False)
    assert len(lib._natives) == 6  # a module a kernel (the split shrinks), three processes
    _check(lib)
    again = compile_prim_funcs(_library(), use_cache=False)  # the disk cache: all six mapped
    assert len(again._natives) == 6
    _check(again)
    assert again.optimized_ir == lib.optimized_ir


def test_the_code_does_not_depend_on_the_processes(split: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    first = compile_prim_funcs(_library(), use_cache=False).optimized_ir
    # every module compiled in this process (the workers fail to start): the same code
    monkeypatch.setattr(parallel.sys, "executable", "/nonexistent/python")
    lib = compile_prim_funcs(_library(), use_cache=False)
    assert lib.optimized_ir == first
    _check(lib)


def test_invalid_ir_in_a_worker_is_a_codegen_error(split: Path) -> None:
    from phasec.backend.llvm.jit import jit_compile_modules

    good = "define i32 @f() {\nentry:\n  ret i32 0\n}\n"
    with pytest.raises(CodegenError, match="generated LLVM IR is invalid"):
        jit_compile_modules([good, "define i32 @g( {"], ["f"], [], 2, cache_key=None)


def test_ctrl_c_while_compiling_leaves_no_worker(split: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args):
        raise KeyboardInterrupt

    started = _recording_workers(monkeypatch)
    monkeypatch.setattr(parallel.objworker, "compile_object", interrupted)
    with pytest.raises(KeyboardInterrupt):
        compile_prim_funcs(_library(), use_cache=False)
    assert len(started) == 2 and _ended(started)


@pytest.mark.parametrize("value", ["0", "many", "300"])
def test_an_invalid_job_count_is_an_input_error(value: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from phasec.backend.llvm.jit import compile_jobs

    monkeypatch.setenv("PHASEC_COMPILE_JOBS", value)
    with pytest.raises(InputError, match="PHASEC_COMPILE_JOBS"):
        compile_jobs()


def test_a_worker_on_standby_is_the_first_one_taken(split: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    reference = compile_prim_funcs(_library(), use_cache=False).optimized_ir
    started = _recording_workers(monkeypatch)
    compiled_by: list[parallel._Worker] = []
    real_compile = parallel._Worker.compile

    def compile_(self, text):
        compiled_by.append(self)
        return real_compile(self, text)

    monkeypatch.setattr(parallel._Worker, "compile", compile_)
    with parallel.standby(1):
        assert len(started) == 1 and started[0].proc is not None
        lib = compile_prim_funcs(_library(), use_cache=False)
        # it compiled modules; one more worker (of the two allowed) started for the rest
        assert any(w is started[0] for w in compiled_by) and len(started) == 2
        assert parallel._standby == []
    assert _ended(started) and lib.optimized_ir == reference
    _check(lib)


def test_a_worker_on_standby_that_nothing_takes_is_stopped(split: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    started = _recording_workers(monkeypatch)
    with parallel.standby(2):
        assert len(started) == 2 and not _ended(started)
    assert _ended(started) and parallel._standby == []
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C during the build: stopped too
        with parallel.standby(1):
            raise KeyboardInterrupt
    assert len(started) == 3 and _ended(started) and parallel._standby == []


def test_a_worker_on_standby_that_died_costs_time_not_the_build(
        split: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    monkeypatch.setenv("PHASEC_COMPILE_JOBS", "2")
    reference = compile_prim_funcs(_library(), use_cache=False).optimized_ir
    started = _recording_workers(monkeypatch)
    with parallel.standby(1):
        started[0].proc.kill()
        started[0].proc.wait()
        lib = compile_prim_funcs(_library(), use_cache=False)  # (its modules compiled here)
    assert started[0].failed and _ended(started)
    assert lib.optimized_ir == reference
    _check(lib)
