"""``phasec run --profile``: each kernel's calls and time, the VM between
them, and for an ONNX model ONNX Runtime's own profile beside it (issue 29:
the next slow operator found in one command).

The expected call counts come from the module itself (how often ``main``
calls each PrimFunc) and the operator types from the ONNX graph, never from
the profiler's own output."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.backend.vm import profile_run
from phasec.cli import main

#: main calls `twice` twice and `once` once (and nothing else: no fused ops)
TWO_KERNELS = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @T.prim_func(private=True)
    def twice(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
        for i in range(T.int64(8)):
            B[i] = A[i] * T.float32(2)

    @T.prim_func(private=True)
    def once(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
        for i in range(T.int64(8)):
            B[i] = A[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
        cls = Module
        a = R.call_tir(cls.twice, (x,), out_sinfo=R.Tensor((8,), "float32"))
        b = R.call_tir(cls.twice, (a,), out_sinfo=R.Tensor((8,), "float32"))
        c = R.call_tir(cls.once, (b,), out_sinfo=R.Tensor((8,), "float32"))
        return c
'''


def test_profile_counts_each_kernels_calls_and_the_vm_between_them():
    mod = phasec.parse(TWO_KERNELS)
    exe = phasec.build(mod)
    x = np.arange(8, dtype="float32")
    found = profile_run(exe, "main", [x], rounds=4)
    assert found.rounds == 4
    assert {k.name: k.calls for k in found.kernels} == {"twice": 2, "once": 1}
    # each row says what its kernel writes (the module's out_sinfo)
    assert {k.name: k.output for k in found.kernels} == {"twice": "float32[8]",
                                                         "once": "float32[8]"}
    assert re.search(r"^\s+twice\s+2\s.*float32\[8\]$", found.table(), re.M)
    assert found.kernel_calls == 3
    assert all(k.seconds > 0 for k in found.kernels)
    assert found.whole_seconds > 0 and found.vm_seconds >= 0
    # the timed VM computes what the plain one does
    np.testing.assert_allclose(phasec.VirtualMachine(exe)["main"](x), x * 4 + 1)


def test_profile_times_native_entries_and_the_vm_within_the_same_calls(monkeypatch):
    """Kernels are timed through their native entries, as the plain VM calls
    them (not through Kernel.__call__'s Python checks), and the VM's own
    time is measured within the timed calls: reported, and what the table's
    rows add up to."""
    from phasec.backend.llvm.runtime import Kernel

    def refuse(self, *args):
        raise AssertionError("the profile timed Kernel.__call__, not the native entry")
    mod = phasec.parse(TWO_KERNELS)
    exe = phasec.build(mod)
    x = np.arange(8, dtype="float32")
    monkeypatch.setattr(Kernel, "__call__", refuse)
    found = profile_run(exe, "main", [x], rounds=20)
    assert {k.name: k.calls for k in found.kernels} == {"twice": 2, "once": 1}
    assert found.between_seconds is not None and found.vm_seconds == max(0.0,
                                                                         found.between_seconds)
    # three tiny kernels: the VM's own work is most of the call, measured
    # with the timing's own cost taken out (within twice the untimed call)
    assert 0 < found.vm_seconds < 2 * found.whole_seconds
    table = found.table()
    assert re.search(r"^\s+VM between kernels \(.* per kernel call\)", table, re.M)
    assert re.search(r"^\s+rest \(sites' best rounds, caches\)", table, re.M)


#: ``gather`` reads ``A`` at an index its caller gives (checked: no proof)
GATHER = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @T.prim_func(private=True)
    def gather(A: T.Buffer((T.int64(8),), "float32"), I: T.Buffer((T.int64(1),), "int64"),
               B: T.Buffer((T.int64(1),), "float32")):
        B[0] = A[I[0]]

    @R.function
    def main(x: R.Tensor((8,), "float32"), i: R.Tensor((1,), "int64")
             ) -> R.Tensor((1,), "float32"):
        cls = Module
        b = R.call_tir(cls.gather, (x, i), out_sinfo=R.Tensor((1,), "float32"))
        return b
'''


def test_a_kernel_failing_under_the_profile_raises_its_own_error():
    """A timed native entry that fails (here the kernel's bounds check) goes
    to the kernel's error path, as on the plain VM: the same error, located."""
    from phasec.backend.vm import VirtualMachine
    from phasec.errors import BufferAccessError
    exe = phasec.build(phasec.parse(GATHER))
    x = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(VirtualMachine(exe)["main"](x, np.array([3])), [3])
    with pytest.raises(BufferAccessError) as plain:
        VirtualMachine(exe)["main"](x, np.array([100]))
    with pytest.raises(BufferAccessError) as profiled:
        profile_run(exe, "main", [x, np.array([100])], rounds=2)
    assert str(profiled.value) == str(plain.value)
    assert "index 100 in dimension 0" in str(plain.value)


@pytest.fixture
def conv_model(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_run_profile_of_an_onnx_model_shows_onnx_runtime_beside_it(capsys, conv_model):
    assert main(["run", str(conv_model), "--profile", "--threads", "1", "--repeat", "3",
                 "-q"]) == 0
    out = capsys.readouterr().out
    ours = out[out.index("profile: best of 3 rounds, 1 thread"):out.index("ONNX Runtime ")]
    assert re.search(r"sum of kernels\s+\d+\s", ours) and "VM between kernels" in ours
    assert re.search(r"per kernel call", ours)
    # the kernel writing the graph's output says so with the graph's shape
    assert "float32[1, 4, 8, 8]" in ours
    theirs = out[out.index("ONNX Runtime "):out.index("check against")]
    graph_ops = {n.op_type for n in onnx.load(conv_model).graph.node}
    listed = {line.split()[0] for line in theirs.splitlines()[2:]
              if line.strip() and not line.strip().startswith(("sum", "whole", "("))}
    # ORT fuses Conv+Relu (and may add a layout node): whatever it lists, the
    # convolution is there, and "whole call" carries the phasec/ORT ratio
    assert "Conv" in listed and listed - graph_ops <= {"ReorderInput", "ReorderOutput",
                                                       "FusedConv"}
    assert re.search(r"whole call  phasec/ORT \d+\.\d\dx", theirs)
    assert out.rstrip().endswith("PASS")


def test_profile_of_a_module_has_no_onnx_runtime_part(capsys, tmp_path):
    src = tmp_path / "m.py"
    src.write_text(TWO_KERNELS)
    assert main(["run", str(src), "--profile", "--repeat", "2", "-q"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+twice\s+2\s", out, re.M) and re.search(r"^\s+once\s+1\s", out, re.M)
    assert "ONNX Runtime" not in out


def test_onnx_runtime_refusing_the_model_is_a_line_not_a_traceback(capsys, conv_model,
                                                                   monkeypatch):
    import phasec.cli.run as run_cli

    def refuse(*_args, **_kwargs):
        raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : a refusal\nmore")
    monkeypatch.setattr(run_cli, "ort_profile", refuse)
    assert main(["run", str(conv_model), "--profile", "--repeat", "2", "-q"]) == 0
    out = capsys.readouterr().out
    assert "ONNX Runtime could not run the model for its profile: [ONNXRuntimeError] : 10 : " \
           "INVALID_GRAPH : a refusal)" in out and "more" not in out
    assert out.rstrip().endswith("PASS")
