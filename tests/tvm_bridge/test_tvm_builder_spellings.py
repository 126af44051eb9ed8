"""TVM's IR-builder spellings in TVMScript (``R.emit_with_ty``,
``R.TupleGetItem``, ``R.ShapeExpr``) as TVM's relax test suite writes them
(``-> None``: tests/tvm_bridge/test_tvm_oneoffs.py). Each is checked against TVM 0.27's
own reading: the module TVM prints for the source, read back by phasec,
must equal phasec's reading of the source. Malformed variants are parse
errors with a location."""

from __future__ import annotations

import pytest

import phasec
from phasec.errors import ParseError
from phasec.ir.structural import structural_equal

BUILDER = '''
@I.ir_module
class Module:
    @R.function
    def main(b: R.Tensor((2, 3), "float32"), c: R.Tensor((2, 3), "float32")):
        R.func_attr({"relax.force_pure": True})
        alloc: R.Tensor((2, 3), dtype="int32") = R.emit_with_ty(
            "relax.builtin.alloc_tensor",
            (R.shape([2, 3]), R.dtype("int32"), R.prim_value(0), R.str("global")),
            (R.Tensor((2, 3), dtype="int32"),),
        )
        t = (b, c)
        first = R.TupleGetItem(t, 0)
        total = R.emit_with_type("relax.add", (first, t[1]))
        shape = R.ShapeExpr([2, 3])
        return (alloc, total, shape)
'''

def _tvm_print(src: str) -> str:
    from tvm.script import from_source

    return from_source(src).script()


def test_read_as_tvm_reads_them() -> None:
    ours = phasec.parse(BUILDER)
    theirs = phasec.parse(_tvm_print(BUILDER))
    assert structural_equal(ours, theirs), (ours.script(), theirs.script())


def test_builder_calls_are_the_plain_calls() -> None:
    main = phasec.parse(BUILDER)["main"]
    values = [b.value for b in main.body.blocks[0].bindings]
    assert values[0].op.name == "relax.builtin.alloc_tensor"
    assert values[4].op.name == "relax.add"
    assert type(values[2]).__name__ == "TupleGetItem" and values[2].index == 0
    assert [d.value for d in values[5].values] == [2, 3]
    assert [[d.value for d in s.shape] for s in values[0].sinfo_args] == [[2, 3]]


@pytest.mark.parametrize("old,new,message", [
    ('"relax.add", (first', '"relax.nope", (first', "unknown operator 'relax.nope'"),
    ('"relax.add", (first, t[1])', '"relax.add", first', "the arguments must be a tuple"),
    ('R.emit_with_type("relax.add"', 'R.emit_with_type(3', "must be a string literal"),
    ("R.TupleGetItem(t, 0)", "R.TupleGetItem(t, -1)", "non-negative integer literal"),
    ("R.TupleGetItem(t, 0)", "R.TupleGetItem(t)", "missing the argument 'index'"),
    ('(R.Tensor((2, 3), dtype="int32"),)', '(R.Tensor((2, 3), dtype="int32"), 5)',
     "expected a struct info annotation"),
])
def test_malformed_builder_calls_are_located_parse_errors(old: str, new: str,
                                                         message: str) -> None:
    assert old in BUILDER
    with pytest.raises(ParseError) as info:
        phasec.parse(BUILDER.replace(old, new), "f.py")
    assert str(info.value).startswith("f.py:") and message in str(info.value)
