"""The access prover (``phasec.arith.inbounds``) through integer casts: a
cast keeps the value of an index whose constant bounds fit the new type, in
either direction between int64 and uint64 (the GEMM's flat columns,
``GemmPlan.flat``: ``j`` as unsigned, divided by the row width), and is
opaque otherwise (a negative value as uint64 wraps)."""

from __future__ import annotations

import numpy as np

import phasec
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs

CASTS = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(A: T.Buffer((35,), "float32"), B: T.Buffer((5, 7), "float32")):
        for j in range(35):
            B[T.Cast("int64", T.Cast("uint64", j) // T.uint64(7)),
              T.Cast("int64", T.Cast("uint64", j) % T.uint64(7))] = A[j]

    @T.prim_func
    def g(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            C[T.Cast("int64", T.Cast("uint64", i - 1) // T.uint64(2))] = A[i]
'''


def test_casts_of_bounded_indices_are_proven_and_wrapping_ones_are_not():
    funcs = dict(phasec.parse(CASTS).prim_funcs())
    # B's two indices and A's are proven (without a run-time check)
    assert prove_accesses(funcs["f"]).counts() == (2, 0)
    # C[uint64(-1) // 2] (i = 0) is not
    proofs = prove_accesses(funcs["g"])
    assert [n.buffer.name for n in proofs.unproven()] == ["C"]
    assert proofs.counts() == (1, 1)
    # and B is A's rows, written through the unsigned quotient and remainder
    a = np.arange(35, dtype="float32")
    b = np.zeros((5, 7), "float32")
    compile_prim_funcs({"f": funcs["f"]})["f"](a, b)
    np.testing.assert_array_equal(b, a.reshape(5, 7))
