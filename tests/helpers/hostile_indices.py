"""The data-indexed operators on hostile indices: one module per operator,
its index operand's dtype a parameter, for the tests that feed them indices
out of range (tests/op/test_ops_indexing.py, and the subprocess of
tests/testing/test_no_signal_death.py)."""

from __future__ import annotations

#: the module: ``{dtype}`` is the index operands' dtype, ``{call}`` the operator's call
HOSTILE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 5), dtype="float32"), i: R.Tensor((4, 3), dtype="{dtype}"),
             u: R.Tensor((4, 3), dtype="float32"), g: R.Tensor((2, 2), dtype="{dtype}"),
             gu: R.Tensor((2,), dtype="float32"), a: R.Tensor((2,), dtype="{dtype}"),
             g64: R.Tensor((2, 2), dtype="int64")):
        with R.dataflow():
            r = {call}
            R.output(r)
        return r
'''

#: operator -> (its call in HOSTILE, its index operand, the extent of the axis
#: that operand indexes; None for gather_nd / scatter_nd, whose first indexed
#: axis has extent 4)
CALLS = {
    "gather_elements": ("R.gather_elements(x, i, axis=1)", "i", 5),
    "gather_nd": ("R.gather_nd(x, g64, batch_dims=0)", "g64", None),
    "scatter_elements": ('R.scatter_elements(x, i, u, axis=1, reduction="add")', "i", 5),
    "scatter_nd": ('R.scatter_nd(x, g, gu, reduction="update")', "g", None),
    "index_put": ("R.index_put(x, (a, a), R.const(1.0, \"float32\"), accumulate=False)", "a", 4),
}
