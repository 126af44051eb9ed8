"""The default thread count of parallel loops follows the CPUs the process
may use (affinity mask, cgroup quota), and PHASEC_NUM_THREADS sets it
(issue 32, item 10: the default ignored both)."""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = ("import os, sys\n"
         "if len(sys.argv) > 1: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
         "from phasec.backend.llvm import get_num_threads\n"
         "print(get_num_threads(), len(os.sched_getaffinity(0)))\n")


def _child(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PHASEC_NUM_THREADS"}
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_default_follows_the_affinity_mask_and_the_variable_overrides_it() -> None:
    pinned = _child("pin")
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout.split() == ["1", "1"]  # one CPU allowed: one thread
    free = _child()
    threads, allowed = map(int, free.stdout.split())
    assert 1 <= threads <= allowed
    assert _child(PHASEC_NUM_THREADS="3").stdout.split()[0] == "3"


def test_an_invalid_thread_count_is_a_usage_error_naming_the_variable() -> None:
    done = subprocess.run([sys.executable, "-m", "phasec", "run", "-q", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PHASEC_NUM_THREADS": "0"})
    assert done.returncode == 2
    assert "PHASEC_NUM_THREADS must be a number of threads from 1 to 256, not '0'" in done.stderr


def test_the_parallel_runtime_compiles_meanwhile_and_is_waited_for(tmp_path) -> None:
    # host_target_info returns while the runtime compiles in a thread (an empty
    # kernel cache: it is compiled, not mapped); what runs code waits for it
    code = ("import numpy as np\n"
            "from phasec.backend.llvm import compile_prim_funcs, get_num_threads, "
            "set_min_parallel_work\n"
            "from phasec.backend.llvm.jit import host_target_info, parallel_runtime_kind\n"
            "from phasec.ir import tir as T\n"
            "target = host_target_info()\n"
            "A, C, i = T.Buffer('A', (4096,)), T.Buffer('C', (4096,)), T.Var('i')\n"
            "f = T.PrimFunc((A, C), T.For(i, 0, 4096, 'parallel', "
            "T.BufferStore(C, A[i] * T.as_prim_expr(2.0, 'float32'), (i,))))\n"
            "set_min_parallel_work(0)\n"
            "k = compile_prim_funcs({'double': f})['double']\n"
            "x = np.arange(4096, dtype=np.float32); out = np.empty_like(x); k(x, out)\n"
            "assert (out == 2 * x).all()\n"
            "print(bool(target.cpu), get_num_threads(), parallel_runtime_kind())\n")
    env = {**os.environ, "PHASEC_NUM_THREADS": "3", "PHASEC_CACHE_DIR": str(tmp_path)}
    env.pop("PHASEC_KERNEL_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "3", "pool"]
    # a bad setting is refused at once, by the call that starts the runtime
    bad = subprocess.run([sys.executable, "-c", "from phasec.backend.llvm.jit import "
                          "host_target_info\nhost_target_info()"], capture_output=True,
                         text=True, env={**env, "PHASEC_PARALLEL_RUNTIME": "bogus"}, timeout=120)
    assert bad.returncode != 0 and "PHASEC_PARALLEL_RUNTIME must be 'pool'" in bad.stderr


def test_a_fork_while_the_runtime_compiles_leaves_a_child_that_compiles(tmp_path) -> None:
    # fork right after host_target_info (the runtime's thread inside LLVM, an
    # empty kernel cache): the fork waits for that thread, so the child's own
    # compilation does not block on a lock held by a thread it does not have
    code = ("import os, sys, numpy as np\n"
            "from phasec.backend.llvm import compile_prim_funcs\n"
            "from phasec.backend.llvm.jit import host_target_info\n"
            "from phasec.ir import tir as T\n"
            "host_target_info()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    A, C, i = T.Buffer('A', (64,)), T.Buffer('C', (64,)), T.Var('i')\n"
            "    f = T.PrimFunc((A, C), T.For(i, 0, 64, 'serial', "
            "T.BufferStore(C, A[i] + T.as_prim_expr(1.0, 'float32'), (i,))))\n"
            "    k = compile_prim_funcs({'inc': f})['inc']\n"
            "    x = np.arange(64, dtype=np.float32); out = np.empty_like(x); k(x, out)\n"
            "    os._exit(0 if (out == x + 1).all() else 3)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print(os.waitstatus_to_exitcode(status))\n")
    env = {**os.environ, "PHASEC_CACHE_DIR": str(tmp_path)}
    env.pop("PHASEC_KERNEL_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]
