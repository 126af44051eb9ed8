"""IR objects read as TVMScript in a REPL or debugger (issue 18), as TVM's do."""

from __future__ import annotations

import phasec
from phasec.ir import structural_equal
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        y = R.add(x, x)
        return y
'''


def test_repr_of_relax_objects_is_their_tvmscript():
    mod = phasec.parse(SOURCE)
    func = mod.functions["main"]
    x = func.params[0]
    binding = func.body.blocks[0].bindings[0]
    assert repr(x) == 'x: R.Tensor((2, 3), dtype="float32")'
    assert repr(x.struct_info) == 'R.Tensor((2, 3), dtype="float32")'
    assert repr(binding) == 'y: R.Tensor((2, 3), dtype="float32") = R.add(x, x)'
    assert repr(binding.value) == "R.add(x, x)"
    assert repr(TensorStructInfo(None, "int8", ndim=2)) == 'R.Tensor(dtype="int8", ndim=2)'
    assert "<" not in repr(func) and "def main(x: R.Tensor((2, 3)" in repr(func)
    # The module's repr is a complete, parseable module.
    assert structural_equal(phasec.parse(repr(mod)), mod)


def test_repr_of_tir_objects_and_fallback():
    n = tir.Var("n", "int64")
    assert repr(n) == "n"
    assert repr(tir.BinaryOp("+", n, tir.IntImm(1, "int64"))) == "n + T.int64(1)"

    class Odd(tir.PrimExpr):  # a node the printer does not know: never raises
        __slots__ = ()
    odd = object.__new__(Odd)
    assert "Odd" in repr(odd)
