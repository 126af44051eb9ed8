"""R.layout_transform (phasec/op/manipulate/layout_transform.py,
phasec/op/_index_map.py):
inference against TVM 0.27 (IndexMap.map_shape's results, recorded here and
checked live through TVM's own parser), the index map read structurally and
printed as TVM prints it, the numpy reference against independent numpy
formulas (pad, reshape, transpose), the kernels on the TIR interpreter
(test_legalize's table) and on LLVM through the VM, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.errors import ParseError, StructInfoError
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.op.legalize import LegalizeError, lower_call

from helpers.legalize import check_call
from helpers.op_infer import S, raises, tv
from helpers.op_reference import close, run

n = tir.Var("n")


def _lt(x, index_map, **kw):
    return call_op("layout_transform", x, index_map=index_map, **kw)


# ---------------------------------------------------------------------------
# inference: TVM 0.27's tirx.IndexMap.from_func(f).map_shape(shape) for each
# ---------------------------------------------------------------------------

TVM_SHAPES = [
    ("lambda i: (i // 4, i % 4)", (10,), "(3, 4)"),
    ("lambda i: (i // 4, i % 4)", (2,), "(1, 4)"),                 # padded to 4
    ("lambda i: (i // 4, i % 4)", (n,), "((n - n % -4) // 4, 4)"),
    ("lambda i: (i % 16,)", (8,), "(16,)"),
    ("lambda i: (i % 16,)", (32,), "(16,)"),
    ("lambda i, j: (j * 10 + i,)", (10, 6), "(60,)"),
    ("lambda i, j: (j * 8 + i,)", (4, 6), "(44,)"),                  # EvalSet fall-back
    ("lambda i, j: (i * 4 + j,)", (3, 4), "(12,)"),
    ("lambda i, j: (i * 4 + j,)", (3, 6), "(14,)"),                  # EvalSet fall-back
    ("lambda i, j: (j, i)", (3, 6), "(6, 3)"),
    ("lambda i: (i // 4 // 2, i // 4 % 2, i % 4)", (16,), "(2, 2, 4)"),
    ("lambda i, j: (i // 4, j, i % 4)", (n, 6), "((n - n % -4) // 4, 6, 4)"),
    ("lambda i, j: (i, j * 2)", (3, 4), "(3, 8)"),
    ("lambda i: (i % 4, i // 4)", (10,), "(4, 3)"),
    ("lambda i: (i // 3, i % 4)", (12,), "(4, 4)"),                  # overlapping splits
    ("lambda i, j: (i + j,)", (3, 4), "(6,)"),
    ("lambda i: (i * 4,)", (3,), "(12,)"),
    ("lambda i0, i1, i2, i3: (i0, i1 // 4, i2, i3, i1 % 4)", (1, 8, 5, 5), "(1, 2, 5, 5, 4)"),
    ("lambda i0, i1, i2, i3, i4: (i0, i1 * 4 + i4, i2, i3)", (1, 2, 5, 5, 4), "(1, 8, 5, 5)"),
]


@pytest.mark.parametrize("index_map,shape,expected", TVM_SHAPES)
def test_inference_matches_tvm_map_shape(index_map, shape, expected):
    assert S(_lt(tv("x", shape), index_map)) == f'R.Tensor({expected}, dtype="float32")'


def test_inference_unknown_shapes_and_errors():
    assert S(_lt(tv("x", ndim=2), "lambda i, j: (j, i // 2, i % 2)")) == \
        'R.Tensor(ndim=3, dtype="float32")'
    assert S(_lt(tv("x"), "lambda i: (i // 2, i % 2)")) == 'R.Tensor(ndim=2, dtype="float32")'
    # TVM 0.27: "number of dimensions in input must match ... 3 != 2"
    raises(["must match the number of source dimensions", "3 != 2"], _lt, tv("x", (2, 3, 4)),
           "lambda i, j: (j, i)")
    # TVM 0.27 fails MapShape's is_zero(range->min) check on these
    raises(["output index i + 2 starts at 2, not 0"], _lt, tv("x", (3, 6)),
           "lambda i, j: (i + 2, j)")
    raises(["output index 3 - i starts at 1, not 0"], _lt, tv("x", (3,)), "lambda i: (3 - i,)")
    # TVM 0.27: "layout_transform pad_value dtype (float32) and input dtype (int32) must be the same"
    raises(["pad_value dtype (float32) and input dtype (int32) must be the same"], _lt,
           tv("x", (4,), "int32"), "lambda i: (i // 2, i % 2)", pad_value=1.5)
    raises(["unknown name 'k'"], _lt, tv("x", (4,)), "lambda i: (k,)")
    raises(["unsupported expression", "i ** 2"], _lt, tv("x", (4,)), "lambda i: (i ** 2,)")
    raises(["not a lambda"], _lt, tv("x", (4,)), "lambda i: (")


def test_pad_value_takes_the_input_dtype():
    # as TVM's relax.op.layout_transform converts a Python number
    call = _lt(tv("x", (5,), "float16"), "lambda i: (i // 2, i % 2)", pad_value=0)
    assert isinstance(call.attrs["pad_value"], tir.FloatImm)
    assert call.attrs["pad_value"].dtype == "float16"
    call = _lt(tv("x", (5,), "int8"), "lambda i: (i // 2, i % 2)", pad_value=-3)
    assert (call.attrs["pad_value"].dtype, call.attrs["pad_value"].value) == ("int8", -3)


def test_python_callable_index_map():
    # the builder API traces a Python lambda with symbolic indices (IndexMap.from_func)
    call = _lt(tv("x", (10, 6)), lambda i, j: (i // 4, j, i % 4))
    assert call.attrs["index_map"] == "lambda i, j: (i // 4, j, i % 4)"
    assert S(call) == 'R.Tensor((3, 6, 4), dtype="float32")'


# ---------------------------------------------------------------------------
# TVMScript: both spellings TVM accepts in, TVM 0.27's spelling out
# ---------------------------------------------------------------------------

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((10, 6), dtype="float32"), w: R.Tensor((8, 3, 3, 3), dtype="float32"),
             y: R.Tensor(("n", 6), dtype="float32")):
        n = T.int64()
        a = R.layout_transform(x, index_map=lambda i, j: (i // 4, j, i % 4), pad_value=None)
        b = R.layout_transform(w, index_map=T.index_map(
            lambda i0, i1, i2, i3: (i0 // 4, i1, i2, i3, i0 % 4), index_dtype="int32"))
        c = R.layout_transform(x, index_map=lambda i, j: (i // 4, j, i % 4), pad_value=1.5)
        d = R.layout_transform(y, index_map=lambda i, j: (j, i // 4, i % 4), pad_value=0)
        e = R.layout_transform(x, index_map=T.index_map(lambda i, j: (T.floordiv(j, 1) * 10 + i,)))
        return (a, b, c, d, e)
'''

#: the binding lines TVM 0.27 prints for SOURCE (tvm.script.from_source(SOURCE).script())
TVM_PRINTED = [
    'a: R.Tensor((3, 6, 4), dtype="float32") = R.layout_transform(x, index_map=T.index_map('
    'lambda i, j: (i // 4, j, i % 4)), pad_value=None)',
    'b: R.Tensor((2, 3, 3, 3, 4), dtype="float32") = R.layout_transform(w, index_map=T.index_map('
    'lambda i0, i1, i2, i3: (i0 // 4, i1, i2, i3, i0 % 4)), pad_value=None)',
    'c: R.Tensor((3, 6, 4), dtype="float32") = R.layout_transform(x, index_map=T.index_map('
    'lambda i, j: (i // 4, j, i % 4)), pad_value=T.float32(1.5))',
    'd: R.Tensor((6, (n - n % -4) // 4, 4), dtype="float32") = R.layout_transform(y, '
    'index_map=T.index_map(lambda i, j: (j, i // 4, i % 4)), pad_value=T.float32(0.0))',
]


def test_printed_as_tvm_prints_and_round_trips():
    mod = phasec.parse(SOURCE)
    text = mod.script()
    for line in TVM_PRINTED:
        assert line in text
    again = phasec.parse(text)
    assert again.script() == text
    from phasec.ir.structural import structural_equal
    assert structural_equal(mod, again)
    from phasec.script.json_format import from_json, to_json
    assert structural_equal(from_json(to_json(mod)), mod)


def test_tvm_reads_what_phasec_prints_and_infers_the_same():
    import tvm

    mod = phasec.parse(SOURCE)
    ours = {b.var.name_hint: b.var.struct_info for b in mod["main"].body.blocks[0].bindings}
    theirs = tvm.script.from_source(mod.script())
    text = theirs.script()
    for name in "abc":
        assert f"{name}: {phasec.op.infer.sinfo_to_str(ours[name])}" in text
    assert "R.Tensor((60,)" in text and str(ours["e"].shape[0].value) == "60"


def test_unreadable_index_map_is_a_parse_error_with_location():
    bad = SOURCE.replace("lambda i, j: (i // 4, j, i % 4), pad_value=None",
                         "lambda i, j: (i // 4, j, abs(i)), pad_value=None")
    with pytest.raises(ParseError) as info:
        phasec.parse(bad, "bad.py")
    assert "bad.py:8:" in str(info.value) and "abs(i)" in str(info.value)


# ---------------------------------------------------------------------------
# the reference against independent numpy formulas
# ---------------------------------------------------------------------------

def test_reference_split_pad_and_fuse():
    x = np.arange(60, dtype="float32").reshape(10, 6)
    # (i // 4, j, i % 4): pad rows to 12, rows -> (3, 4), move the 4 last
    out = run("layout_transform", x, index_map="lambda i, j: (i // 4, j, i % 4)", pad_value=-1.0)
    expected = np.pad(x, ((0, 2), (0, 0)), constant_values=-1).reshape(3, 4, 6).transpose(0, 2, 1)
    np.testing.assert_array_equal(out, expected)
    # pad_value None: TVM legalizes it as 0
    out = run("layout_transform", x, index_map="lambda i, j: (i // 4, j, i % 4)")
    np.testing.assert_array_equal(out, np.pad(x, ((0, 2), (0, 0))).reshape(3, 4, 6)
                                  .transpose(0, 2, 1))
    # j * 10 + i: column-major flattening
    np.testing.assert_array_equal(run("layout_transform", x, index_map="lambda i, j: (j * 10 + i,)"),
                                  x.T.reshape(-1))
    # (i, j * 2): every other column, the rest padding
    out = run("layout_transform", x, index_map="lambda i, j: (i, j * 2)", pad_value=7.0)
    expected = np.full((10, 12), 7, "float32")
    expected[:, ::2] = x
    np.testing.assert_array_equal(out, expected)


def test_reference_nchw_to_nchw4c_and_back():
    x = np.random.default_rng(0).standard_normal((2, 8, 3, 5)).astype("float32")
    packed = run("layout_transform", x,
                 index_map="lambda i0, i1, i2, i3: (i0, i1 // 4, i2, i3, i1 % 4)")
    np.testing.assert_array_equal(packed, x.reshape(2, 2, 4, 3, 5).transpose(0, 1, 3, 4, 2))
    back = run("layout_transform", packed,
               index_map="lambda i0, i1, i2, i3, i4: (i0, i1 * 4 + i4, i2, i3)")
    np.testing.assert_array_equal(back, x)
    # OIHW -> OHWI
    w = x[:, :3]
    np.testing.assert_array_equal(
        run("layout_transform", w, index_map="lambda o, i, h, w: (o, h, w, i)"),
        w.transpose(0, 2, 3, 1))
    ints = np.arange(10, dtype="int32")
    out = run("layout_transform", ints, index_map="lambda i: (i // 3, i % 3)", pad_value=-5)
    np.testing.assert_array_equal(out, np.concatenate([ints, [-5, -5]]).reshape(4, 3))


def test_a_map_that_cannot_be_inverted_is_a_clear_error():
    x = Var("x", TensorStructInfo((4, 4), "float32"))
    for text, why in (("lambda i, j: (i + j,)", "not sums of disjoint splits"),
                      ("lambda i, j: (i // 2, j)", "drops part of input index i"),
                      ("lambda i, j: (i % 2, j)", "keeps only 2 values of input index i")):
        with pytest.raises(LegalizeError, match=why):
            lower_call(_lt(x, text))
    # the reference says the same, rather than guessing
    from phasec.op.index_map import MapError
    with pytest.raises(MapError, match="drops part of input index i"):
        run("layout_transform", np.zeros((4, 2), "float32"), index_map="lambda i, j: (i // 2, j)")


# ---------------------------------------------------------------------------
# kernels: the TIR interpreter (test_legalize's table) and LLVM
# ---------------------------------------------------------------------------


M_SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8, 3, 5), dtype="float32"), y: R.Tensor((10, 6), dtype="float32")):
        n = T.int64()
        with R.dataflow():
            p = R.layout_transform(x, index_map=T.index_map(
                lambda i0, i1, i2, i3: (i0, i1 // 4, i2, i3, i1 % 4), index_dtype="int32"))
            q = R.nn.relu(p)
            b = R.layout_transform(q, index_map=T.index_map(
                lambda i0, i1, i2, i3, i4: (i0, i1 * 4 + i4, i2, i3), index_dtype="int32"))
            r = R.layout_transform(y, index_map=lambda i, j: (j, i // 4, i % 4), pad_value=-2.0)
            R.output(b, r)
        return (b, r)
"""


@pytest.mark.parametrize("size", [1, 3])
def test_layout_transform_on_llvm(size):
    vm = phasec.VirtualMachine(phasec.build(phasec.parse(M_SOURCE)))
    rng = np.random.default_rng(size)
    x = rng.standard_normal((size, 8, 3, 5)).astype("float32")
    y = rng.standard_normal((10, 6)).astype("float32")
    b, r = vm["main"](x, y)
    close(b, np.maximum(x, 0))
    expected = np.pad(y, ((0, 2), (0, 0)), constant_values=-2).reshape(3, 4, 6).transpose(2, 0, 1)
    close(r, expected)


def test_symbolic_padding_on_the_tir_interpreter():
    y = Var("y", TensorStructInfo((n, 6), "float32"))
    call = _lt(y, "lambda i, j: (j, i // 4, i % 4)", pad_value=7.0)
    for size in (3, 9):
        v = np.arange(size * 6, dtype="float32").reshape(size, 6)
        check_call(call, {y: v}, dims={n: size})
        pad = -(-size // 4) * 4 - size
        expected = np.pad(v, ((0, pad), (0, 0)), constant_values=7).reshape(-1, 4, 6)
        close(run_ref(call, v), expected.transpose(2, 0, 1))


def run_ref(call, *values):
    from phasec.op import get_op
    return get_op(call.op.name).reference(*values, **dict(call.attrs))


def test_bad_pad_value_type_is_a_clear_error():
    with pytest.raises(StructInfoError, match="pad_value"):
        _lt(tv("x", (4,)), "lambda i: (i // 2, i % 2)", pad_value="zero")
