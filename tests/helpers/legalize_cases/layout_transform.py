"""Legalization cases of R.layout_transform (tests/op/test_ops_layout_transform.py):
padding, fusing, scaling and splitting index maps."""

from __future__ import annotations

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op


def _lt(x, index_map, **kw):
    """R.layout_transform of ``x`` by the index map written as a lambda."""
    return call_op("layout_transform", x, index_map=index_map, **kw)


_D = Var("lt_d", TensorStructInfo((10, 6), "float32"))
_DI = Var("lt_di", TensorStructInfo((7,), "int32"))
_D4 = Var("lt_d4", TensorStructInfo((1, 8, 3, 2), "float32"))
LAYOUT_LEGALIZE_CASES = [
    ("layout_transform-pad", lambda: _lt(_D, "lambda i, j: (i // 4, j, i % 4)", pad_value=2.5)),
    ("layout_transform-pad-none", lambda: _lt(_D, "lambda i, j: (j, i // 3, i % 3)")),
    ("layout_transform-fuse", lambda: _lt(_D, "lambda i, j: (j * 10 + i,)")),
    ("layout_transform-scale", lambda: _lt(_D, "lambda i, j: (i, j * 2)", pad_value=-1.0)),
    ("layout_transform-int", lambda: _lt(_DI, "lambda i: (i % 4, i // 4)", pad_value=9)),
    ("layout_transform-nchw4c", lambda: _lt(_D4, "lambda a, b, c, d: (a, b // 4, c, d, b % 4)")),
    ("layout_transform-3split", lambda: _lt(Var("lt_v", TensorStructInfo((16,), "float32")),
                                            "lambda i: (i // 8, i // 4 % 2, i % 4)")),
]
