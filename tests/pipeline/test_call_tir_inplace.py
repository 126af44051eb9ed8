"""R.call_tir_inplace: a PrimFunc that overwrites some of its arguments.

Output i is argument ``inplace_indices[i]`` (-1: a new output allocated as
by call_tir). References: numpy formulas, and TVM 0.27 compiling and running
the same module."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

import phasec
from phasec import verifier
from phasec.interp.relax import run as interpret

MODULE = '''
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def add_and_scale(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32"), C: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            A[i] = A[i] + B[i]
            C[i] = B[i] * T.float32(2.0)

    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        cls = Module
        z = R.call_tir_inplace(cls.add_and_scale, (x, y), inplace_indices=[0, -1], out_ty=[R.Tensor((4,), "float32"), R.Tensor((4,), "float32")])
        return z
'''

X = np.array([1.0, -2.0, 3.5, 0.0], dtype="float32")
Y = np.array([0.5, 4.0, -1.0, 2.0], dtype="float32")


def test_reads_verifies_and_prints_what_tvm_reads() -> None:
    mod = phasec.parse(MODULE)
    assert [d for d in verifier.check(mod) if d.severity == "error"] == []
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.call_tir_inplace"
    assert tuple(call.attrs["inplace_indices"]) == (0, -1)
    reference = tvm.script.from_source(MODULE)
    again = tvm.script.from_source(mod.script())
    tvm.ir.assert_structural_equal(again.without_attr("phase"), reference)


@pytest.mark.parametrize("engine", ["vm", "interpreter"])
def test_runs_with_in_place_semantics(engine: str) -> None:
    mod = phasec.parse(MODULE)
    if engine == "vm":
        a, c = phasec.VirtualMachine(phasec.build(mod))["main"](X.copy(), Y.copy())
    else:
        a, c = interpret(mod, X.copy(), Y.copy())
    np.testing.assert_array_equal(np.asarray(a), X + Y)
    np.testing.assert_array_equal(np.asarray(c), 2 * Y)


def test_matches_tvm() -> None:
    exe = tvm.compile(tvm.script.from_source(MODULE), target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    want = [o.numpy() for o in vm["main"](tvm.runtime.tensor(X.copy()),
                                          tvm.runtime.tensor(Y.copy()))]
    got = phasec.VirtualMachine(phasec.build(phasec.parse(MODULE)))["main"](X.copy(), Y.copy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_lowering_allocates_only_new_outputs() -> None:
    from phasec.pipeline import lower

    text = lower(phasec.parse(MODULE)).script()
    main = text[text.index("def main"):]
    assert main.count("R.vm.alloc_tensor(") == 1  # C only; A is written in x


@pytest.mark.parametrize("change, message", [
    ("inplace_indices=[0, -1], out_ty=[R.Tensor((4,), \"float32\"), R.Tensor((4,), \"float32\")]",
     None),
    ("inplace_indices=[0], out_ty=[R.Tensor((4,), \"float32\"), R.Tensor((4,), \"float32\")]",
     "2 output(s) but 1 inplace_indices"),
    ("inplace_indices=[5, -1], out_ty=[R.Tensor((4,), \"float32\"), R.Tensor((4,), \"float32\")]",
     "inplace index 5"),
    ("inplace_indices=[0, -1], out_ty=[R.Tensor((4,), \"int32\"), R.Tensor((4,), \"float32\")]",
     "overwrites input 0"),
])
def test_inconsistent_calls_are_reported(change: str, message: str | None) -> None:
    original = ("inplace_indices=[0, -1], out_ty=[R.Tensor((4,), \"float32\"), "
                "R.Tensor((4,), \"float32\")]")
    mod = phasec.parse(MODULE.replace(original, change))
    errors = [d for d in verifier.check(mod) if d.severity == "error"]
    if message is None:
        assert errors == []
    else:
        assert any(message in d.message for d in errors), [d.message for d in errors]


def test_not_allowed_in_the_build_phase() -> None:
    mod = phasec.parse(MODULE).with_phase("build")
    assert "PH303" in {d.code for d in verifier.check(mod)}
