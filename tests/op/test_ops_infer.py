"""Struct-info inference of every registered operator (the rest of inference
and the struct-info lattice: test_struct_info.py)."""

import numpy as np
import pytest

from phasec.errors import StructInfoError
from phasec.ir import (
    Constant, DataflowVar, ExternFunc, FuncStructInfo, GlobalVar, ObjectStructInfo, Op,
    PrimValue, ShapeExpr, ShapeStructInfo, Span, Tuple, TupleStructInfo, Var, tir,
)
from phasec.arith.lattice import struct_info_equal
from phasec.ir.text import sinfo_to_str
from phasec.op import (
    OpDef, OpPattern, REQUIRED, InferContext, call_op, find_op, get_op, list_ops,
)
from phasec.op.binary import BINARY_ARITH, COMPARISONS
from phasec.op.nn.activation import UNARY_ACTIVATIONS
from phasec.op.unary import UNARY as _UNARY

from helpers.op_infer import S, T, raises, tv

#: the unary operators and the elementwise activations of relax.nn (nn/activation.py)
UNARY = {**_UNARY, **UNARY_ACTIVATIONS}

n = tir.Var("n")
m = tir.Var("m")


# ---------------------------------------------------------------------------
# registry contents
# ---------------------------------------------------------------------------

EXPECTED_OPS = {
    *BINARY_ARITH, *COMPARISONS, *UNARY,
    "nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.rms_norm", "nn.conv2d",
    "nn.max_pool2d", "nn.avg_pool2d", "matmul", "sum", "mean", "max", "min", "prod",
    "reshape", "permute_dims", "expand_dims", "squeeze", "flatten", "concat", "split",
    "strided_slice", "take", "broadcast_to", "astype", "where", "zeros", "ones", "full",
    "zeros_like", "ones_like", "clip", "stop_fusion", "call_tir", "call_dps_packed",
    "call_pure_packed", "invoke_pure_closure", "make_closure", "invoke_closure", "null_value",
    "builtin.alloc_tensor", "memory.alloc_storage", "memory.alloc_tensor",
    "memory.kill_storage", "memory.kill_tensor", "vm.alloc_storage", "vm.alloc_tensor",
    "vm.kill_object",
}


def test_every_op_is_registered_with_a_complete_entry():
    names = {o.name.removeprefix("relax.") for o in list_ops()}
    assert EXPECTED_OPS <= names
    for opdef in list_ops():
        assert isinstance(opdef, OpDef)
        assert callable(opdef.infer)
        assert isinstance(opdef.pattern, OpPattern)
        for value in opdef.attrs.values():
            hash(value if value is not REQUIRED else 0)  # immutable, hashable defaults
        if opdef.category == "compute":
            assert opdef.reference is not None, opdef.name
            # a kernel, or a VM builtin / packed call (shape_of, print, sort...)
            assert (opdef.legalize is None) != (opdef.legalize_relax is None), opdef.name
        else:
            # builtins stay, except call_tir_with_grad, which LegalizeOps makes a call_tir
            assert opdef.legalize is None, opdef.name
            assert (opdef.legalize_relax is None) == (opdef.name != "relax.call_tir_with_grad")
            assert opdef.category in ("call", "memory", "vm")


def test_lookup_spellings():
    assert find_op("R.add") is get_op("relax.add")
    assert find_op("relax.nope") is None
    assert get_op("relax.nn.conv2d").script_name == "R.nn.conv2d"
    raises(["unknown operator", "relax.add"], call_op, "relax.addd", tv("x", (2,)), tv("y", (2,)))


def test_categories_and_purity():
    assert get_op("relax.add").category == "compute"
    assert get_op("relax.call_tir").category == "call"
    assert get_op("relax.builtin.alloc_tensor").category == "memory"
    assert get_op("relax.vm.alloc_storage").category == "vm"
    assert get_op("relax.invoke_closure").pure is False
    assert get_op("relax.memory.kill_storage").pure is False
    assert get_op("relax.vm.kill_object").pure is False
    assert get_op("relax.memory.alloc_storage").pure is True
    assert get_op("relax.call_pure_packed").pure is True
    assert get_op("relax.stop_fusion").pattern is OpPattern.OPAQUE
    assert get_op("relax.add").pattern is OpPattern.BROADCAST
    assert get_op("relax.exp").pattern is OpPattern.ELEMWISE
    assert get_op("relax.sum").pattern is OpPattern.COMM_REDUCE
    assert get_op("relax.matmul").pattern is OpPattern.OUT_ELEMWISE_FUSABLE
    assert get_op("relax.reshape").pattern is OpPattern.INJECTIVE


# ---------------------------------------------------------------------------
# call_op validation
# ---------------------------------------------------------------------------

def test_call_op_validates_operands_and_attributes():
    x = tv("x", (2, 3))
    raises(["R.add takes 2 operands", "1 was given"], call_op, "add", x)
    e = raises(["R.sum has no attribute 'axes'", "axis, keepdims"], call_op, "sum", x, axes=[1])
    assert isinstance(e, StructInfoError)
    raises(["requires the attribute 'dtype'"], call_op, "astype", x)
    raises(["invalid value", "'keepdims'"], call_op, "sum", x, keepdims="yes")
    raises(["operand 'x2' must be a Relax expression", "float"], call_op, "add", x, 1.0)


def test_call_op_normalizes_attributes():
    x = tv("x", (1, 3, 8, 8))
    w = tv("w", (4, 3, 3, 3))
    c = call_op("nn.conv2d", x, w, strides=[2, 2], padding=1)
    assert c.attrs["strides"] == (2, 2)
    assert c.attrs["padding"] == (1, 1, 1, 1)
    assert c.attrs["dilation"] == (1, 1) and c.attrs["groups"] == 1
    assert list(c.attrs) == list(get_op("relax.nn.conv2d").attrs)
    assert call_op("nn.conv2d", x, w, padding=(1, 2)).attrs["padding"] == (1, 2, 1, 2)
    assert call_op("sum", x, axis=1).attrs["axis"] == (1,)
    assert call_op("sum", x, axis=np.int64(1)).attrs["axis"] == (1,)
    assert call_op("sum", x).attrs == {"axis": None, "keepdims": False}
    assert call_op("astype", x, dtype=np.dtype("int32")).attrs["dtype"] == "int32"
    for value in c.attrs.values():
        hash(value)
    raises(["padding needs 1, 2 or 4 integers"], call_op, "nn.conv2d", x, w, padding=(1, 2, 3))


def test_call_op_converts_shapes_and_tuples_and_sets_span():
    x = tv("x", (2, 6))
    span = Span("model.py", 3, 4)
    r = call_op("reshape", x, (3, -1), span=span)
    assert isinstance(r.args[1], ShapeExpr)
    assert r.span is span
    assert S(r) == 'R.Tensor((3, 4), dtype="float32")'
    c = call_op("concat", [x, x], axis=0)
    assert isinstance(c.args[0], Tuple)
    assert isinstance(c.op, Op) and c.op is call_op("concat", [x, x]).op  # shared Op node


def test_errors_carry_the_span():
    span = Span("model.py", 7, 2)
    e = raises(["model.py:7:3"], call_op, "add", tv("x", (2,)), tv("y", (2,), "int32"), span=span)
    assert e.span is span


# ---------------------------------------------------------------------------
# binary / comparison / unary
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BINARY_ARITH))
def test_binary_broadcasting(name):
    x = tv("x", (n, 1, 4))
    y = tv("y", (3, 1))
    assert S(call_op(name, x, y)) == 'R.Tensor((n, 3, 4), dtype="float32")'
    assert S(call_op(name, tv("a", (2, 3)), tv("b", (2, 3)))) == 'R.Tensor((2, 3), dtype="float32")'
    # scalar constant operand
    c = Constant(np.array(1.0, "float32"))
    assert S(call_op(name, x, c)) == 'R.Tensor((n, 1, 4), dtype="float32")'


@pytest.mark.parametrize("name", sorted(BINARY_ARITH))
def test_binary_errors(name):
    x = tv("x", (2, 3))
    y = tv("y", (2, 3), "int32")
    raises(["Binary operators must have the same datatype for both operands",
            f"R.{name}(x, y) has x with dtype float32 and y with dtype int32",
            'x: R.Tensor((2, 3), dtype="float32")', 'y: R.Tensor((2, 3), dtype="int32")'],
           call_op, name, x, y)
    raises(["cannot broadcast", "(2, 3)", "(4,)"], call_op, name, x, tv("z", (4,)))
    raises(["expects a tensor", "R.Shape([2])"], call_op, name, x, ShapeExpr([2]))


def test_broadcast_symbolic_cases():
    # provably equal symbolic dims
    a = tv("a", (n * 4, 2))
    b = tv("b", (4 * n, 2))
    assert S(call_op("add", a, b)) == 'R.Tensor((n * 4, 2), dtype="float32")'
    # 1 vs symbolic: the symbolic dim
    assert S(call_op("add", tv("a", (1, 2)), tv("b", (m, 2)))) == 'R.Tensor((m, 2), dtype="float32")'
    # two unrelated symbolic dims: ndim only, no error
    assert S(call_op("add", tv("a", (n, 2)), tv("b", (m, 2)))) == 'R.Tensor(ndim=2, dtype="float32")'
    # symbolic vs constant (not provably incompatible): ndim only
    assert S(call_op("add", tv("a", (n,)), tv("b", (3,)))) == 'R.Tensor(ndim=1, dtype="float32")'
    # n+1 vs n: not provably incompatible as a broadcast (n could be 0 -> 1)
    assert call_op("add", tv("a", (n + 1,)), tv("b", (n,))).struct_info.ndim == 1


def test_broadcast_unknown_shapes_and_dtypes():
    assert S(call_op("add", tv("a", ndim=2), tv("b", (3, 4, 5)))) == 'R.Tensor(ndim=3, dtype="float32")'
    assert S(call_op("add", tv("a"), tv("b", (3,)))) == 'R.Tensor(dtype="float32")'
    assert S(call_op("add", tv("a", (2,), "void"), tv("b", (2,)))) == "R.Tensor((2,))"
    assert S(call_op("less", tv("a", ndim=1, dtype="void"), tv("b", (2,)))) == 'R.Tensor(ndim=1, dtype="bool")'


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparisons_return_bool(name):
    x = tv("x", (n, 4))
    y = tv("y", (4,))
    assert S(call_op(name, x, y)) == 'R.Tensor((n, 4), dtype="bool")'
    raises(["same datatype"], call_op, name, x, tv("z", (4,), "int64"))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = tv("x", (n, 3))
    assert S(call_op(name, x)) == 'R.Tensor((n, 3), dtype="float32")'
    assert S(call_op(name, tv("u", ndim=2))) == 'R.Tensor(ndim=2, dtype="float32")'
    needs_float = UNARY[name][1]
    xi = tv("xi", (2,), "int32")
    if needs_float:
        raises([name.removeprefix("nn."), "float dtype", "xi has dtype int32"], call_op, name, xi)
    else:
        assert S(call_op(name, xi)) == 'R.Tensor((2,), dtype="int32")'
    raises(["expects a tensor"], call_op, name, Var("t", TupleStructInfo([])))


def test_stop_fusion_is_identity():
    x = tv("x", (n, 3))
    assert struct_info_equal(call_op("stop_fusion", x).struct_info, x.struct_info)


# ---------------------------------------------------------------------------
# nn
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["nn.softmax", "nn.log_softmax"])
def test_softmax(name):
    x = tv("x", (n, 10))
    assert S(call_op(name, x)) == 'R.Tensor((n, 10), dtype="float32")'
    assert S(call_op(name, x, axis=0)) == 'R.Tensor((n, 10), dtype="float32")'
    raises(["axis 2 is out of range", "ndim 2"], call_op, name, x, axis=2)
    raises(["float dtype"], call_op, name, tv("i", (3,), "int32"))


def test_layer_norm():
    x = tv("x", (n, 8, 16))
    g = tv("g", (16,))
    b = tv("b", (16,))
    assert S(call_op("nn.layer_norm", x, g, b, axes=[-1])) == 'R.Tensor((n, 8, 16), dtype="float32")'
    g2 = tv("g2", (8, 16))
    assert S(call_op("nn.layer_norm", x, g2, g2, axes=[1, 2])) == 'R.Tensor((n, 8, 16), dtype="float32")'
    raises(["gamma dimension 8 does not match input dimension 16"], call_op,
           "nn.layer_norm", x, tv("g3", (8,)), b, axes=[-1])
    raises(["gamma must have one dimension per normalized axis"], call_op,
           "nn.layer_norm", x, g2, b, axes=[-1])
    raises(["axes 3 is out of range"], call_op, "nn.layer_norm", x, g, b, axes=[3])
    raises(["requires the attribute 'axes'"], call_op, "nn.layer_norm", x, g, b)
    raises(["beta", "dtype float16"], call_op, "nn.layer_norm", x, g, tv("bh", (16,), "float16"), axes=[-1])


def test_rms_norm():
    x = tv("x", (n, 16))
    w = tv("w", (16,))
    assert S(call_op("nn.rms_norm", x, w)) == 'R.Tensor((n, 16), dtype="float32")'
    raises(["weight dimension 4 does not match"], call_op, "nn.rms_norm", x, tv("w2", (4,)))


def test_conv2d():
    x = tv("x", (n, 3, 32, 32))
    w = tv("w", (16, 3, 3, 3))
    assert S(call_op("nn.conv2d", x, w)) == 'R.Tensor((n, 16, 30, 30), dtype="float32")'
    assert S(call_op("nn.conv2d", x, w, padding=1)) == 'R.Tensor((n, 16, 32, 32), dtype="float32")'
    assert S(call_op("nn.conv2d", x, w, strides=2, padding=1)) == 'R.Tensor((n, 16, 16, 16), dtype="float32")'
    assert S(call_op("nn.conv2d", x, w, dilation=2)) == 'R.Tensor((n, 16, 28, 28), dtype="float32")'
    assert S(call_op("nn.conv2d", x, w, padding=(1, 0, 2, 0))) == 'R.Tensor((n, 16, 33, 30), dtype="float32")'
    # grouped / depthwise
    xg = tv("xg", (1, 8, 10, 10))
    assert S(call_op("nn.conv2d", xg, tv("wg", (8, 1, 3, 3)), groups=8)) == \
        'R.Tensor((1, 8, 8, 8), dtype="float32")'
    # symbolic spatial size
    xs = tv("xs", (1, 3, m, m))
    assert S(call_op("nn.conv2d", xs, w, padding=1)) == 'R.Tensor((1, 16, m, m), dtype="float32")'
    assert S(call_op("nn.conv2d", xs, w)) == 'R.Tensor((1, 16, m - 2, m - 2), dtype="float32")'
    # out_dtype
    xi = tv("xi", (1, 3, 5, 5), "int8")
    wi = tv("wi", (4, 3, 1, 1), "int8")
    assert S(call_op("nn.conv2d", xi, wi, out_dtype="int32")) == 'R.Tensor((1, 4, 5, 5), dtype="int32")'
    # unknown shape
    assert S(call_op("nn.conv2d", tv("u", ndim=4), w)) == 'R.Tensor(ndim=4, dtype="float32")'
    # errors
    raises(["3 input channels", "4 x groups(1)"], call_op, "nn.conv2d", x, tv("w4", (16, 4, 3, 3)))
    raises(["data_layout 'NHWW' is not a layout", "permutation of 'NCHW'"], call_op,
           "nn.conv2d", x, w, data_layout="NHWW")
    raises(["'NCHW4q' is not a layout", "or a packed layout such as NCHW4c"], call_op,
           "nn.conv2d", x, w, data_layout="NCHW4q")
    raises(["5-D data tensor (NCHW4c)"], call_op,
           "nn.conv2d", x, w, data_layout="NCHW4c")
    raises(["out_layout 'NCHW4c' packs C by 4, but the output has 6"], call_op, "nn.conv2d",
           tv("x6", (1, 3, 5, 5)), tv("w6", (6, 3, 1, 1)), out_layout="NCHW4c")
    raises(["kernel_layout 'OIW' is not a layout"], call_op, "nn.conv2d", x, w, kernel_layout="OIW")
    # the channels are read through the layouts: NHWC data of 3 channels, HWIO weight of 4
    raises(["3 input channels", "4 x groups(1)"], call_op, "nn.conv2d", tv("xh", (1, 7, 9, 3)),
           tv("wh4", (3, 3, 4, 4)), data_layout="NHWC", kernel_layout="HWIO")
    raises(["4-D data"], call_op, "nn.conv2d", tv("x3", (3, 32, 32)), w)
    raises(["not divisible by groups=2"], call_op, "nn.conv2d", tv("x6", (1, 6, 8, 8)),
           tv("w6", (5, 3, 3, 3)), groups=2)
    raises(["non-positive"], call_op, "nn.conv2d", tv("xsmall", (1, 3, 2, 2)), w)
    raises(["same datatype"], call_op, "nn.conv2d", x, tv("wh", (16, 3, 3, 3), "float16"))
    raises(["strides must be positive"], call_op, "nn.conv2d", x, w, strides=0)


#: conv2d in other layouts: (data shape, weight shape, attributes, TVM 0.27's
#: inferred struct info and out_layout, from relax.op.nn.conv2d + BlockBuilder.normalize)
CONV2D_LAYOUTS = [
    ((n, 32, 32, 3), (3, 3, 3, 16), dict(data_layout="NHWC", kernel_layout="HWIO"),
     'R.Tensor((n, 30, 30, 16), dtype="float32")', "NHWC"),
    ((n, 32, m, 3), (16, 3, 3, 3), dict(data_layout="NHWC", kernel_layout="OHWI",
                                        out_layout="NCHW", strides=(2, 1), padding=(1, 0, 1, 2)),
     'R.Tensor((n, 16, 16, m), dtype="float32")', "NCHW"),
    ((1, 10, 10, 8), (3, 3, 1, 8), dict(data_layout="NHWC", kernel_layout="HWIO", groups=8,
                                        dilation=2),
     'R.Tensor((1, 6, 6, 8), dtype="float32")', "NHWC"),
    ((1, 3, 7, 9), (3, 3, 3, 4), dict(kernel_layout="HWIO", padding=1),
     'R.Tensor((1, 4, 7, 9), dtype="float32")', "NCHW"),
    ((7, 9, 3, 2), (4, 3, 2, 3), dict(data_layout="HWCN", kernel_layout="OHWI", out_layout="NHWC"),
     'R.Tensor((2, 5, 8, 4), dtype="float32")', "NHWC"),
    # TVM's packed sub-layouts: NCHW4c is (N, C/4, H, W, 4)
    ((2, 4, 28, 28, 4), (8, 16, 3, 3, 4), dict(data_layout="NCHW4c", kernel_layout="OIHW4o"),
     'R.Tensor((2, 8, 26, 26, 4), dtype="float32")', "NCHW4c"),
    ((2, 28, 28, 4, 4), (8, 3, 3, 16, 4), dict(data_layout="NHWC4c", kernel_layout="OHWI4o",
                                               padding=1),
     'R.Tensor((2, 28, 28, 8, 4), dtype="float32")', "NHWC4c"),
    ((2, 4, 28, 28, 4), (32, 16, 3, 3), dict(data_layout="NCHW4c", kernel_layout="OIHW",
                                             out_layout="NCHW"),
     'R.Tensor((2, 32, 26, 26), dtype="float32")', "NCHW"),
    ((n, 4, 10, 10, 4), (8, 16, 3, 3, 4), dict(data_layout="NCHW4c", kernel_layout="OIHW4o",
                                               strides=2),
     'R.Tensor((n, 8, 4, 4, 4), dtype="float32")', "NCHW4c"),
    ((2, 28, 28, 16), (8, 3, 3, 4, 4, 2), dict(data_layout="NHWC", kernel_layout="OHWI4i2o",
                                               out_layout="NCHW2c"),
     'R.Tensor((2, 8, 26, 26, 2), dtype="float32")', "NCHW2c"),
]


@pytest.mark.parametrize("xs,ws,kw,expected,out_layout", CONV2D_LAYOUTS)
def test_conv2d_layouts(xs, ws, kw, expected, out_layout):
    call = call_op("nn.conv2d", tv("x", xs), tv("w", ws), **kw)
    assert S(call) == expected
    # out_layout None is the data layout once the call is built (TVM's constructor)
    assert call.attrs["out_layout"] == out_layout


@pytest.mark.parametrize("name", ["nn.max_pool2d", "nn.avg_pool2d"])
def test_pools(name):
    x = tv("x", (n, 3, 32, 32))
    assert S(call_op(name, x, pool_size=2, strides=2)) == 'R.Tensor((n, 3, 16, 16), dtype="float32")'
    assert S(call_op(name, x, pool_size=3, strides=2, padding=1)) == 'R.Tensor((n, 3, 16, 16), dtype="float32")'
    x7 = tv("x7", (1, 1, 7, 7))
    assert S(call_op(name, x7, pool_size=2, strides=2)) == 'R.Tensor((1, 1, 3, 3), dtype="float32")'
    assert S(call_op(name, x7, pool_size=2, strides=2, ceil_mode=True)) == \
        'R.Tensor((1, 1, 4, 4), dtype="float32")'
    # other layouts (TVM 0.27's InferTypePool2D): NHWC, and packed NCHW4c
    assert S(call_op(name, tv("xh", (n, 32, 32, 3)), pool_size=2, strides=2, layout="NHWC")) \
        == 'R.Tensor((n, 16, 16, 3), dtype="float32")'
    assert S(call_op(name, tv("xp", (1, 2, 7, 7, 4)), pool_size=2, strides=2, ceil_mode=True,
                     layout="NCHW4c", out_layout="NHWC")) == \
        'R.Tensor((1, 4, 4, 8), dtype="float32")'
    assert call_op(name, x, layout="NHWC").attrs["out_layout"] == "NHWC"
    raises(["layout 'NHWW' is not a layout"], call_op, name, x, layout="NHWW")
    raises(["expects a 4-D tensor (NCHW)"], call_op, name, tv("x2", (3, 4)))
    raises(["non-positive"], call_op, name, x7, pool_size=9)


# ---------------------------------------------------------------------------
# matmul and reductions
# ---------------------------------------------------------------------------

def test_matmul_shapes():
    def mm(a, b, **kw):
        return S(call_op("matmul", tv("a", a), tv("b", b), **kw))

    assert mm((n, 4), (4, 5)) == 'R.Tensor((n, 5), dtype="float32")'
    assert mm((4,), (4, 5)) == 'R.Tensor((5,), dtype="float32")'
    assert mm((n, 4), (4,)) == 'R.Tensor((n,), dtype="float32")'
    assert mm((4,), (4,)) == 'R.Tensor((), dtype="float32")'
    assert mm((2, 1, n, 4), (3, 4, 5)) == 'R.Tensor((2, 3, n, 5), dtype="float32")'
    assert mm((7, n, 4), (4, 5)) == 'R.Tensor((7, n, 5), dtype="float32")'
    assert mm((n, 4), (m, 5)) == 'R.Tensor((n, 5), dtype="float32")'  # symbolic k: not provably unequal
    raises(["reduction lengths differ: 4", "3"], mm, (n, 4), (3, 5))
    raises(["cannot broadcast"], mm, (2, n, 4), (3, 4, 5))
    raises(["0-d"], mm, (), (4,))
    assert S(call_op("matmul", tv("a", (2, 3), "int8"), tv("b", (3, 4), "int8"), out_dtype="int32")) == \
        'R.Tensor((2, 4), dtype="int32")'
    raises(["same datatype"], call_op, "matmul", tv("a", (2, 3)), tv("b", (3, 4), "float16"))
    assert S(call_op("matmul", tv("a", ndim=3), tv("b", (4, 5)))) == 'R.Tensor(ndim=3, dtype="float32")'
    assert S(call_op("matmul", tv("a", ndim=1), tv("b", ndim=1))) == 'R.Tensor(ndim=0, dtype="float32")'
    assert S(call_op("matmul", tv("a"), tv("b", (4, 5)))) == 'R.Tensor(dtype="float32")'


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions(name):
    x = tv("x", (n, 3, 4))
    assert S(call_op(name, x)) == 'R.Tensor((), dtype="float32")'
    assert S(call_op(name, x, axis=[1])) == 'R.Tensor((n, 4), dtype="float32")'
    assert S(call_op(name, x, axis=[0, -1], keepdims=True)) == 'R.Tensor((1, 3, 1), dtype="float32")'
    assert S(call_op(name, x, keepdims=True)) == 'R.Tensor((1, 1, 1), dtype="float32")'
    assert S(call_op(name, tv("u", ndim=3), axis=[0])) == 'R.Tensor(ndim=2, dtype="float32")'
    assert S(call_op(name, tv("u"), axis=[0])) == 'R.Tensor(dtype="float32")'
    assert S(call_op(name, tv("u"))) == 'R.Tensor((), dtype="float32")'
    raises(["axis 3 is out of range", "ndim 3"], call_op, name, x, axis=[3])
    raises(["repeated axis"], call_op, name, x, axis=[1, -2])


# ---------------------------------------------------------------------------
# manipulation
# ---------------------------------------------------------------------------

def test_reshape():
    x = tv("x", (n, 3, 4))
    assert S(call_op("reshape", x, (n, 12))) == 'R.Tensor((n, 12), dtype="float32")'
    assert S(call_op("reshape", x, (-1, 4))) == 'R.Tensor((n * 3, 4), dtype="float32")'
    assert S(call_op("reshape", x, (n * 2, -1))) == 'R.Tensor((n * 2, 6), dtype="float32")'
    assert S(call_op("reshape", tv("s", (2, 6)), (3, -1))) == 'R.Tensor((3, 4), dtype="float32")'
    assert S(call_op("reshape", tv("u", ndim=2), (3, -1))) == 'R.Tensor(ndim=2, dtype="float32")'
    shape_var = Var("s", ShapeStructInfo(ndim=3))
    assert S(call_op("reshape", x, shape_var)) == 'R.Tensor(ndim=3, dtype="float32")'
    raises(["cannot reshape a tensor of 12 elements into (5, 3)"], call_op, "reshape",
           tv("s", (2, 6)), (5, 3))
    raises(["not divisible by 5"], call_op, "reshape", tv("s", (2, 6)), (5, -1))
    raises(["at most one -1"], call_op, "reshape", x, (-1, -1))
    raises(["expects a shape", "R.Tensor((2,)"], call_op, "reshape", x, tv("t", (2,)))


def test_permute_expand_squeeze_flatten():
    x = tv("x", (n, 3, 4))
    assert S(call_op("permute_dims", x)) == 'R.Tensor((4, 3, n), dtype="float32")'
    assert S(call_op("permute_dims", x, axes=[1, 0, 2])) == 'R.Tensor((3, n, 4), dtype="float32")'
    assert S(call_op("permute_dims", x, axes=[-1, 0, 1])) == 'R.Tensor((4, n, 3), dtype="float32")'
    raises(["one axis per dimension"], call_op, "permute_dims", x, axes=[1, 0])
    raises(["repeated axis"], call_op, "permute_dims", x, axes=[1, 1, 0])
    assert S(call_op("expand_dims", x, axis=0)) == 'R.Tensor((1, n, 3, 4), dtype="float32")'
    assert S(call_op("expand_dims", x, axis=[1, -1])) == 'R.Tensor((n, 1, 3, 4, 1), dtype="float32")'
    raises(["axis 5 is out of range"], call_op, "expand_dims", x, axis=5)
    y = tv("y", (1, 3, 1))
    assert S(call_op("squeeze", y)) == 'R.Tensor((3,), dtype="float32")'
    assert S(call_op("squeeze", y, axis=[0])) == 'R.Tensor((3, 1), dtype="float32")'
    # TVM 0.27 (and PyTorch): a listed axis of another constant size stays
    assert S(call_op("squeeze", y, axis=[1])) == 'R.Tensor((1, 3, 1), dtype="float32")'
    assert S(call_op("squeeze", y, axis=[0, 1])) == 'R.Tensor((3, 1), dtype="float32")'
    assert S(call_op("squeeze", tv("z", (1, n)))) == 'R.Tensor(dtype="float32")'  # n may be 1
    assert S(call_op("flatten", x)) == 'R.Tensor((n * 12,), dtype="float32")'
    assert S(call_op("flatten", tv("u", ndim=3))) == 'R.Tensor(ndim=1, dtype="float32")'


def test_concat_and_split():
    a = tv("a", (n, 3))
    b = tv("b", (n, 5))
    assert S(call_op("concat", (a, b), axis=1)) == 'R.Tensor((n, 8), dtype="float32")'
    assert S(call_op("concat", (a, a))) == 'R.Tensor((n * 2, 3), dtype="float32")'
    assert S(call_op("concat", (a, b), axis=None)) == 'R.Tensor((n * 8,), dtype="float32")'
    raises(["on axis 1 (only axis 0 may differ)"], call_op, "concat", (a, tv("c", (n, 5))), axis=0)
    raises(["one dtype"], call_op, "concat", (a, tv("d", (n, 3), "int32")), axis=1)
    raises(["one ndim"], call_op, "concat", (a, tv("e", (3,))), axis=0)
    raises(["at least one tensor"], call_op, "concat", Tuple([]))
    raises(["expects a tuple of tensors"], call_op, "concat", a)
    x = tv("x", (6, n))
    sp = call_op("split", x, indices_or_sections=3)
    assert S(sp) == ('R.Tuple(R.Tensor((2, n), dtype="float32"), R.Tensor((2, n), dtype="float32"), '
                     'R.Tensor((2, n), dtype="float32"))')
    sp = call_op("split", x, indices_or_sections=[2, 5], axis=0)
    assert [f.shape[0].value for f in sp.struct_info.fields] == [2, 3, 1]
    sp = call_op("split", x, indices_or_sections=[1], axis=1)
    assert sinfo_to_str(sp.struct_info.fields[1]) == 'R.Tensor((6, n - 1), dtype="float32")'
    sp = call_op("split", tv("y", (n * 4,)), indices_or_sections=2)
    assert sinfo_to_str(sp.struct_info.fields[0]) == 'R.Tensor((n * 2,), dtype="float32")'
    raises(["must be positive"], call_op, "split", x, indices_or_sections=0)
    # TVM 0.27 gives the last section a negative length here; phasec refuses it
    raises(["cannot be split into 4 sections", "the last would have -1 elements"], call_op,
           "split", tv("x5", (5, 3)), indices_or_sections=4)


#: split as TVM 0.27's InferTypeSplit (relax.op.split + BlockBuilder.normalize)
SPLIT_TVM = [
    ((10, 3), 4, 0, [(3, 3), (3, 3), (3, 3), (1, 3)]),          # ceildiv, the last the rest
    ((10, 3), [3, 1, 12], 0, [(3, 3), (0, 3), (9, 3), (0, 3)]),  # clamped, never negative
    ((10, 3), [-2, 4], 0, [(0, 3), (4, 3), (6, 3)]),
    ((4, 7), [2, 5], 1, [(4, 2), (4, 3), (4, 2)]),
]


@pytest.mark.parametrize("shape,spec,axis,expected", SPLIT_TVM)
def test_split_sections_as_tvm(shape, spec, axis, expected):
    sp = call_op("split", tv("x", shape), indices_or_sections=spec, axis=axis)
    assert [tuple(d.value for d in f.shape) for f in sp.struct_info.fields] == expected


def test_split_single_section_and_symbolic_uneven():
    # TVM 0.27: one section, or no split points, is the input tensor itself (not a tuple)
    assert S(call_op("split", tv("x", (10, 3)), indices_or_sections=1)) == \
        'R.Tensor((10, 3), dtype="float32")'
    assert S(call_op("split", tv("x", (10, 3)), indices_or_sections=[])) == \
        'R.Tensor((10, 3), dtype="float32")'
    # TVM 0.27: ((n + 1) // 2, 3) and (n - (n + 1) // 2, 3)
    assert S(call_op("split", tv("x", (n, 3)), indices_or_sections=2)) == (
        'R.Tuple(R.Tensor(((n + 1) // 2, 3), dtype="float32"), '
        'R.Tensor((n - (n + 1) // 2, 3), dtype="float32"))')


def test_strided_slice():
    x = tv("x", (10, n))
    ss = call_op("strided_slice", x, axes=[0], begin=[2], end=[8], strides=[2])
    assert S(ss) == 'R.Tensor((3, n), dtype="float32")'
    assert S(call_op("strided_slice", x, axes=[0], begin=[-3], end=[100])) == 'R.Tensor((3, n), dtype="float32")'
    assert S(call_op("strided_slice", x, axes=[0], begin=[9], end=[-11], strides=[-1])) == \
        'R.Tensor((10, n), dtype="float32")'
    assert S(call_op("strided_slice", x, axes=[1], begin=[1], end=[2 ** 63 - 1])) == \
        'R.Tensor((10, n - 1), dtype="float32")'
    assert S(call_op("strided_slice", x, axes=[1], begin=[0], end=[-1])) == \
        'R.Tensor((10, n - 1), dtype="float32")'
    assert S(call_op("strided_slice", x, axes=[1], begin=[2], end=[6], strides=[2])) == \
        'R.Tensor((10, 2), dtype="float32")'
    raises(["equal length"], call_op, "strided_slice", x, axes=[0, 1], begin=[0], end=[1])
    raises(["non-zero"], call_op, "strided_slice", x, axes=[0], begin=[0], end=[1], strides=[0])
    raises(["axes 2 is out of range"], call_op, "strided_slice", x, axes=[2], begin=[0], end=[1])


def test_take():
    x = tv("x", (n, 3, 4))
    i = tv("i", (5, 2), "int64")
    assert S(call_op("take", x, i, axis=1)) == 'R.Tensor((n, 5, 2, 4), dtype="float32")'
    assert S(call_op("take", x, i)) == 'R.Tensor((5, 2), dtype="float32")'
    assert S(call_op("take", x, tv("j", ndim=1, dtype="int32"), axis=0)) == 'R.Tensor(ndim=3, dtype="float32")'
    raises(["integer indices", "dtype float32"], call_op, "take", x, tv("f", (2,)), axis=0)
    raises(["axis 3 is out of range"], call_op, "take", x, i, axis=3)


def test_broadcast_to():
    x = tv("x", (1, 4))
    assert S(call_op("broadcast_to", x, (n, 3, 4))) == 'R.Tensor((n, 3, 4), dtype="float32")'
    raises(["cannot broadcast shape (1, 4) to (3, 5)"], call_op, "broadcast_to", x, (3, 5))
    raises(["cannot reduce ndim"], call_op, "broadcast_to", x, (4,))


def test_astype_where_clip():
    x = tv("x", (n, 4))
    assert S(call_op("astype", x, dtype="float16")) == 'R.Tensor((n, 4), dtype="float16")'
    raises(["unknown dtype 'float7'"], call_op, "astype", x, dtype="float7")
    c = tv("c", (n, 1), "bool")
    assert S(call_op("where", c, x, tv("y", (4,)))) == 'R.Tensor((n, 4), dtype="float32")'
    raises(["bool condition"], call_op, "where", tv("ci", (n, 1), "int32"), x, x)
    raises(["both branches of one dtype"], call_op, "where", c, x, tv("yi", (4,), "int32"))
    assert S(call_op("clip", x, min=0, max=6)) == 'R.Tensor((n, 4), dtype="float32")'
    raises(["min (6.0) is greater than max (0.0)"], call_op, "clip", x, min=6, max=0)


def test_creation():
    assert S(call_op("zeros", (n, 2), dtype="int32")) == 'R.Tensor((n, 2), dtype="int32")'
    assert S(call_op("ones", (3,))) == 'R.Tensor((3,), dtype="float32")'
    fill = Constant(np.array(2.5, "float16"))
    assert S(call_op("full", (2, n), fill)) == 'R.Tensor((2, n), dtype="float16")'
    assert S(call_op("full", (2,), PrimValue(tir.IntImm(3, "int32")), dtype="float32")) == \
        'R.Tensor((2,), dtype="float32")'
    raises(["scalar fill value"], call_op, "full", (2,), Constant(np.zeros(3, "float32")))
    x = tv("x", (n, 4), "int32")
    assert S(call_op("zeros_like", x)) == 'R.Tensor((n, 4), dtype="int32")'
    assert S(call_op("ones_like", x, dtype="float32")) == 'R.Tensor((n, 4), dtype="float32")'
    raises(["expects a shape"], call_op, "zeros", tv("t", (2,)))


# ---------------------------------------------------------------------------
# call-like builtins, closures, memory
# ---------------------------------------------------------------------------

def test_call_tir_and_packed():
    x = tv("x", (n, 4))
    out = T((n, 4))
    c = call_op("call_tir", GlobalVar("relu"), (x,), sinfo_args=[out])
    assert c.struct_info is out
    c = call_op("call_tir", GlobalVar("relu"), (x,), ShapeExpr([n]), sinfo_args=[out])
    assert len(c.args) == 3
    two = TupleStructInfo([out, out])
    assert call_op("call_tir", GlobalVar("k"), (x,), sinfo_args=[two]).struct_info is two
    raises(["exactly one output struct info"], call_op, "call_tir", GlobalVar("relu"), (x,))
    raises(["first operand must be a PrimFunc"], call_op, "call_tir", ExternFunc("f"), (x,),
           sinfo_args=[out])
    raises(["expects a tuple of tensors"], call_op, "call_tir", GlobalVar("relu"), x, sinfo_args=[out])
    raises(["outputs must be tensors"], call_op, "call_tir", GlobalVar("relu"), (x,),
           sinfo_args=[ObjectStructInfo()])
    c = call_op("call_dps_packed", "my_func", (x,), sinfo_args=[out])
    assert isinstance(c.args[0], ExternFunc) and c.struct_info is out
    c = call_op("call_pure_packed", ExternFunc("f"), x, x, sinfo_args=[out])
    assert c.struct_info is out and len(c.args) == 3
    assert isinstance(call_op("call_pure_packed", ExternFunc("f")).struct_info, ObjectStructInfo)
    raises(["packed function name"], call_op, "call_pure_packed", x)


def test_closures():
    x = tv("x", (n, 4))
    f_sinfo = FuncStructInfo([T((n, 4)), T((n, 4))], T((n, 4)))
    ctx = InferContext({"f": f_sinfo})
    clo = call_op("make_closure", GlobalVar("f"), (x,), ctx=ctx)
    assert sinfo_to_str(clo.struct_info) == \
        'R.Callable((R.Tensor((n, 4), dtype="float32"),), R.Tensor((n, 4), dtype="float32"), purity=True)'
    assert isinstance(call_op("make_closure", GlobalVar("g"), (x,)).struct_info, ObjectStructInfo)
    c = Var("c", ObjectStructInfo())
    r = call_op("invoke_closure", c, (x,), sinfo_args=[T((n, 4))])
    assert S(r) == 'R.Tensor((n, 4), dtype="float32")'
    r = call_op("invoke_pure_closure", c, (x,))
    assert isinstance(r.struct_info, ObjectStructInfo)
    raises(["expects a closure"], call_op, "invoke_closure", x, (x,))
    assert isinstance(call_op("null_value").struct_info, ObjectStructInfo)


def test_memory_builtins():
    t = call_op("builtin.alloc_tensor", (n, 4), dtype="float32")
    assert S(t) == 'R.Tensor((n, 4), dtype="float32")'
    assert t.attrs == {"dtype": "float32", "runtime_device_index": 0, "storage_scope": "global"}
    st = call_op("memory.alloc_storage", (64,))
    assert isinstance(st.struct_info, ObjectStructInfo)
    assert st.attrs == {"virtual_device_index": 0, "storage_scope": "global", "dtype": "uint8"}
    s = Var("s", ObjectStructInfo())
    mt = call_op("memory.alloc_tensor", s, 0, (4, 4), dtype="float32")
    assert isinstance(mt.args[1], PrimValue)
    assert S(mt) == 'R.Tensor((4, 4), dtype="float32")'
    raises(["integer offset"], call_op, "memory.alloc_tensor", s, ShapeExpr([0]), (4,), dtype="float32")
    raises(["storage object"], call_op, "memory.alloc_tensor", tv("x", (4,)), 0, (4,), dtype="float32")
    assert S(call_op("memory.kill_storage", s)) == "R.Tuple()"
    assert S(call_op("memory.kill_tensor", tv("x", (4,)))) == "R.Tuple()"
    assert isinstance(call_op("vm.alloc_storage", (64,)).struct_info, ObjectStructInfo)
    assert S(call_op("vm.alloc_tensor", s, 0, (2, 8), dtype="int8")) == 'R.Tensor((2, 8), dtype="int8")'
    assert S(call_op("vm.kill_object", s)) == "R.Tuple()"
    raises(["1-D shape"], call_op, "vm.alloc_storage", (8, 8))
    raises(["concrete dtype"], call_op, "builtin.alloc_tensor", (2,), dtype="void")


def test_dataflow_var_operands_work():
    x = DataflowVar("lv", T((2, 3)))
    assert S(call_op("exp", x)) == 'R.Tensor((2, 3), dtype="float32")'


def test_squeeze_of_an_axis_that_is_not_1_follows_tvm():
    # TVM 0.27's InferTypeSqueeze leaves a listed axis whose size is a constant
    # other than 1 (as PyTorch does; its exported-program frontend relies on it):
    # the shapes TVM infers and the values tvm.compile computes
    import numpy as np
    import tvm
    from tvm import relax

    import phasec

    x = np.arange(12, dtype="float32").reshape(3, 1, 4, 1)
    for axes in ([0], [0, 1], [1, 2, 3], [-1]):
        text = f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 1, 4, 1), "float32")):
        z = R.squeeze(x, axis={axes})
        return z
"""
        theirs = tvm.script.from_source(text)
        vm = relax.VirtualMachine(tvm.compile(theirs, "llvm"), tvm.cpu())
        want = vm["main"](tvm.runtime.tensor(x)).numpy()
        mod = phasec.parse(text)
        assert mod["main"].ret_struct_info.shape is not None
        assert tuple(int(d.value) for d in mod["main"].ret_struct_info.shape) == want.shape
        np.testing.assert_array_equal(phasec.interp.run(mod, x), want)
        np.testing.assert_array_equal(phasec.VirtualMachine(phasec.build(mod))["main"](x), want)
