"""VM codegen checks a module against the *build* phase's rules, all of
them: a memory builtin that only lowering allows (PH304) is refused, the
same kernel call with the VM's own allocation compiles and computes x + x.

(Found by mutation testing, bench/bench_core_mutation.py: codegen verifying
against the lowering phase's rules survived the suite.)
"""

import numpy as np
import pytest

import phasec
from phasec.backend.vm import VirtualMachine, codegen
from phasec.errors import WellFormedError

MODULE = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "build"})

    @T.prim_func(private=True)
    def add(A: T.Buffer((T.int64(2), T.int64(3)), "float32"),
            B: T.Buffer((T.int64(2), T.int64(3)), "float32"),
            C: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            C[i, j] = A[i, j] + B[i, j]

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
ALLOCATION
        _ = cls.add(x, x, out)
        return out
"""
LOWERING_BUILTIN = """\
        out = R.builtin.alloc_tensor(R.shape([2, 3]), dtype="float32")"""
VM_BUILTINS = """\
        storage: R.Object = R.vm.alloc_storage(R.shape([24]), runtime_device_index=0, dtype="uint8")
        out: R.Tensor((2, 3), "float32") = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([2, 3]), dtype="float32")"""


def test_codegen_refuses_a_memory_builtin_of_the_lowering_phase():
    mod = phasec.parse(MODULE.replace("ALLOCATION", LOWERING_BUILTIN), "ph304.py")
    with pytest.raises(WellFormedError) as err:
        codegen(mod)
    assert {d.code for d in err.value.diagnostics} == {"PH304"}


def test_codegen_compiles_the_vm_allocation():
    mod = phasec.parse(MODULE.replace("ALLOCATION", VM_BUILTINS), "vm.py")
    x = np.arange(6, dtype="float32").reshape(2, 3) - 2.5
    out = VirtualMachine(codegen(mod), kernels="interp")["main"](x)
    np.testing.assert_array_equal(np.asarray(out), x + x)


def test_codegen_needs_a_module():
    with pytest.raises(TypeError, match="codegen needs an IRModule, not str"):
        codegen("not a module")
