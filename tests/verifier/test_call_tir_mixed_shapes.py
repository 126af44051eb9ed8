"""WF406 on a call_tir whose output buffer mixes static and symbolic extents.

The shape of TVM's relax test ``test_call_tir_output_shape_with_mixed_static_
and_dynamic`` (tests/python/relax/test_analysis_well_formed.py): a PrimFunc
``reshape`` writing B[16, M, N] called with ``out_sinfo`` R.Tensor((8, 16, 2)).
TVM 0.27's well-formedness check accepts it, but that test is marked
``xfail(reason="Not yet supported")`` and asserts the module is *not* well
formed, and ``tvm.compile`` refuses it ("Argument 1 type mismatch"): the kernel
writes 16 rows into an 8-row tensor. So WF406 is right to report it; what
must hold is that a consistent mixed shape (16, 8, 2: M = 8, N = 2) is clean
and computes the reshape.
"""

import numpy as np

import phasec
from phasec import verifier
from phasec.interp.relax import run

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor([256], "float16")):
        B = R.call_tir(Module.reshape, A, out_sinfo=R.Tensor(OUT, "float16"))
        return B

    @T.prim_func
    def reshape(A: T.Buffer(256, "float16"), B_handle: T.handle):
        M = T.int64()
        N = T.int64()
        B = T.match_buffer(B_handle, [16, M, N], dtype="float16")
        for i, j, k in T.grid(16, M, N):
            with T.block("compute"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi * N * M + vj * N + vk]
"""


def test_static_extent_that_disagrees_is_reported():
    mod = phasec.parse(MODULE.replace("OUT", "[8, 16, 2]"), "mixed.py")
    [diag] = verifier.check(mod)
    assert diag.code == "WF406" and diag.binding == "B"
    assert "extent 8 on axis 0" in diag.message and "buffer B" in diag.message


def test_consistent_mixed_extents_are_clean_and_reshape():
    mod = phasec.parse(MODULE.replace("OUT", "[16, 8, 2]"), "mixed.py")
    assert verifier.check(mod) == []
    a = (np.arange(256) % 61 - 30).astype("float16")
    np.testing.assert_array_equal(np.asarray(run(mod, a)), a.reshape(16, 8, 2))


def test_the_static_axis_is_checked_whatever_the_element_count():
    # 32 * 4 * 2 = 256 elements, as many as A: only axis 0 (32, not 16) is wrong
    mod = phasec.parse(MODULE.replace("OUT", "[32, 4, 2]"), "mixed.py")
    assert [d.code for d in verifier.check(mod)] == ["WF406"]
