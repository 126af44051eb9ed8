"""ONNX Loops of any trip count: the frontend makes a Loop a recursive Relax
function whose recursive call is in tail position, and the VM runs tail
calls in the caller's frame, so a loop needs constant stack and memory
whatever its trip count (it failed past 100,000 iterations, "call depth
exceeded", and held every iteration's tensors until the loop ended).

Models are built with ``onnx.helper``; results are checked against numpy's
closed forms and ONNX Runtime."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec.backend.vm.profiler import profile_run
from phasec.frontend.onnx import from_onnx

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def checked_model(nodes, inputs, outputs, initializer=()):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs,
                                                initializer=list(initializer)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def sum_loop_model(scan: bool = False):
    """Loop(M, s0): s += i each iteration; with ``scan``, the scan output i*i."""
    nodes = [helper.make_node("Add", ["s_in", "i"], ["s_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])]
    outs = [vi("c_out", B, []), vi("s_out", I64, [])]
    if scan:
        nodes.append(helper.make_node("Mul", ["i", "i"], ["sq"]))
        outs.append(vi("sq", I64, []))
    body = helper.make_graph(nodes, "body", [vi("i", I64, []), vi("c_in", B, []),
                                             vi("s_in", I64, [])], outs)
    loop_outs = ["s", "sc"] if scan else ["s"]
    return checked_model([helper.make_node("Loop", ["M", "", "s0"], loop_outs, body=body)],
                         [vi("M", I64, []), vi("s0", I64, [])],
                         [vi("s", I64, [])] + ([vi("sc", I64, ["k"])] if scan else []))


def run_both(model, feeds, **vm_options):
    """The outputs of phasec's VM and of ONNX Runtime."""
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)), **vm_options)
    got = vm["main"](*feeds.values())
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return (list(got) if isinstance(got, tuple) else [got]), sess.run(None, feeds)


def test_loop_of_250000_iterations():
    m, s0 = 250_000, 17
    (got,), (expected,) = run_both(sum_loop_model(), {"M": np.array(m), "s0": np.array(s0)})
    assert got.dtype == expected.dtype == np.int64
    assert int(got) == int(expected) == s0 + m * (m - 1) // 2


def test_loop_with_a_scan_output_of_20000_iterations():
    m = 20_000
    got, expected = run_both(sum_loop_model(scan=True), {"M": np.array(m), "s0": np.array(0)})
    assert int(got[0]) == int(expected[0]) == m * (m - 1) // 2
    assert got[1].shape == expected[1].shape == (m,)
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[1], np.arange(m, dtype=np.int64) ** 2)


def test_while_loop_takes_no_frame_per_iteration():
    # no trip count: the body's condition stops it (s < limit); a VM allowed
    # 10 pending calls runs 30,000 iterations
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "one"], ["s_out"]),
         helper.make_node("Less", ["s_out", "limit"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("s_in", I64, [])],
        [vi("c_out", B, []), vi("s_out", I64, [])])
    model = checked_model(
        [helper.make_node("Loop", ["", "c0", "s0"], ["s"], body=body)],
        [vi("c0", B, []), vi("s0", I64, []), vi("limit", I64, [])], [vi("s", I64, [])],
        [helper.make_tensor("one", I64, [], [1])])
    feeds = {"c0": np.array(True), "s0": np.array(5), "limit": np.array(30_005)}
    (got,), (expected,) = run_both(model, feeds, max_call_depth=10)
    assert int(got) == int(expected) == 30_005


def test_loop_carrying_1mb_holds_two_iterations_not_all():
    # v += 1 over a 1 MiB float32 tensor, 2,000 times: with a frame kept per
    # iteration the VM held ~2 GiB (every iteration's v) until the loop ended
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("v_in", F, [512, 512])],
        [vi("c_out", B, []), vi("v_out", F, [512, 512])])
    model = checked_model(
        [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
        [vi("M", I64, []), vi("v0", F, [512, 512])], [vi("v", F, [512, 512])],
        [helper.make_tensor("one", F, [], [1.0])])
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    v0 = np.random.default_rng(0).integers(-100, 100, (512, 512)).astype(np.float32)
    vm["main"](np.array(2), v0)
    vm.reset_stats()
    tracemalloc.start()
    try:
        got = vm["main"](np.array(2000), v0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, v0 + 2000)
    assert peak < 32 << 20, f"the loop held {peak / 2**20:.0f} MiB"
    assert vm.stats["peak_bytes"] < 32 << 20
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, sess.run(None, {"M": np.array(2000), "v0": v0})[0])


def test_profile_of_a_loop_counts_every_iteration():
    m = 300
    exe = phasec.build(from_onnx(sum_loop_model()))
    profile = profile_run(exe, "main", [np.array(m), np.array(0)], rounds=2)
    # per iteration: the body's Add, the counter's increment, the condition
    # (evaluated once more, to stop)
    assert sorted(k.calls for k in profile.kernels) == [m, m, m + 1]
    assert profile.kernel_calls == 3 * m + 1


_ENDLESS = '''
import signal, sys, time
import numpy as np, onnx, phasec
from phasec.backend.vm.memory import VMMemory
from phasec.frontend.onnx import from_onnx
if sys.argv[2] == "slow-release":
    release = VMMemory._release
    def slow_release(self, ref):  # the weakref callback where Python drops exceptions
        until = time.perf_counter() + 0.002
        while time.perf_counter() < until:
            pass
        release(self, ref)
    VMMemory._release = slow_release
vm = phasec.VirtualMachine(phasec.build(from_onnx(onnx.load(sys.argv[1]))))
print("running", flush=True)
try:
    vm["main"](np.array(True), np.array(0))
    print("returned?!", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("after:", int(vm["main"](np.array(False), np.array(7))), flush=True)
'''


@pytest.mark.parametrize("where", ["anywhere", "slow-release"])
def test_an_endless_loop_runs_until_ctrl_c(tmp_path, where):
    # a Loop whose condition stays true (as a `while True`) no longer stops at
    # "call depth exceeded": it runs, in constant memory, until interrupted,
    # and the VM stays usable (ONNX Runtime runs it forever too). With
    # "slow-release" the signal lands in the VM's weakref callback, whose
    # KeyboardInterrupt Python drops ("Exception ignored"): the VM's tail
    # calls see the interrupt watcher's flag instead (the loop ran on before).
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "one"], ["s_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("s_in", I64, [])],
        [vi("c_out", B, []), vi("s_out", I64, [])])
    model = checked_model(
        [helper.make_node("Loop", ["", "c0", "s0"], ["s"], body=body)],
        [vi("c0", B, []), vi("s0", I64, [])], [vi("s", I64, [])],
        [helper.make_tensor("one", I64, [], [1])])
    onnx.save(model, tmp_path / "endless.onnx")
    proc = subprocess.Popen(
        [sys.executable, "-c", _ENDLESS, str(tmp_path / "endless.onnx"), where], cwd=tmp_path,
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # (a child of a non-interactive shell's background job ignores SIGINT)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline() == "running\n", proc.stderr.read()
        time.sleep(3)  # (the loop runs: nothing stops it but the signal)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out == "interrupted\nafter: 7\n", err
    assert proc.returncode == 0, err


def test_scan_runs_its_steps_as_tail_calls_too():
    # Scan (opset 17): a running sum over the rows of x, the state and each
    # step's sum as outputs; a VM allowed 10 pending calls scans 5,000 rows
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])], "body",
        [vi("s_in", F, [2]), vi("x_t", F, [2])], [vi("s_out", F, [2]), vi("y_t", F, [2])])
    model = checked_model(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)],
        [vi("s0", F, [2]), vi("x", F, [5000, 2])], [vi("s", F, [2]), vi("y", F, [5000, 2])])
    x = np.random.default_rng(1).integers(-4, 5, (5000, 2)).astype(np.float32)
    s0 = np.array([0.5, -1], np.float32)
    got, expected = run_both(model, {"s0": s0, "x": x}, max_call_depth=10)
    sums = s0 + np.cumsum(x, axis=0)  # small integers (and halves): exact in float32
    for g, e, ref in zip(got, expected, (sums[-1], sums)):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(g, ref)
