"""The in-bounds prover's overflow assumption made true (issue 27): kernel
calls refuse a symbolic dimension of 2**40 or more (a zero-size array can
carry any), and the prover uses a value in ``min``/``max``/``//``/``%``, a
guard or a loop bound only where its bounds under that limit fit in int64.
"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.arith.inbounds import DIM_LIMIT, prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import VMError

ROWS = '''
@I.ir_module
class Module:
    @T.prim_func
    def rows(a: T.handle, b: T.handle):
        n = T.int64()
        m = T.int64()
        A = T.match_buffer(a, (n, m), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            B[i] = T.float32(0)
'''

GUARDED = '''
@I.ir_module
class Module:
    @T.prim_func
    def f(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (4,), "float32")
        B = T.match_buffer(b, (0, n), "float32")
        if n * {k} < 4:
            A[n * {k}] = T.float32(1)
'''


def test_as_of_the_limit_a_symbolic_dimension_is_refused():
    assert DIM_LIMIT == 2 ** 40
    funcs = dict(phasec.parse(ROWS).prim_funcs())
    for check_bounds in (None, True, False):
        kernel = compile_prim_funcs(funcs, check_bounds=check_bounds)["rows"]
        out = np.ones(0, np.float32)
        kernel(np.ones((0, DIM_LIMIT - 1), np.float32), out)  # (the limit less one runs)
        with pytest.raises(VMError, match=r"dimension 1 is past phasec's limit of 2\*\*40"):
            kernel(np.ones((0, DIM_LIMIT), np.float32), out)
        with pytest.raises(VMError, match="past phasec's limit"):
            kernel(np.ones((0, 1 << 60), np.float32), out)


@pytest.mark.parametrize("k,proven", [(1 << 22, True), (1 << 24, False)])
def test_a_guard_that_may_overflow_proves_nothing(k, proven):
    """``n * 2**24`` wraps for n >= 2**39 (below the limit): the guard
    ``n * 2**24 < 4`` may then hold with a negative index, so the store is
    not proven; with 2**22 every value fits int64, and it is."""
    func = dict(phasec.parse(GUARDED.format(k=k)).prim_funcs())["f"]
    assert prove_accesses(func).counts() == ((1, 0) if proven else (0, 1))
