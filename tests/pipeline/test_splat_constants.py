"""Splat constants: tensors whose elements all have the same bits.

ONNX ``ConstantOfShape`` weights (the ONNX test models') import as
``R.full`` calls. FoldConstant folds them (and layout ops of them) past its
``max_elements`` limit only when the result is a splat, and the VM's
constant pool keeps a splat as one element and a shape, materialized once on
first use and shared between equal ones: the weight is neither rebuilt on
every call nor stored at full size in the executable.

References are independent: numpy formulas, onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec import parse
from phasec.backend.vm import VirtualMachine
from phasec.backend.vm.executable import ConstantPool, Executable
from phasec.frontend.onnx import from_onnx
from phasec.ir import Call, Constant, is_splat
from phasec.ir.expr import CONSTANT_ALIGNMENT
from phasec.transform import PassContext, get_pass


def _bindings(mod):
    out = {}
    for block in mod.functions["main"].body.blocks:
        for b in block.bindings:
            out[b.var.name_hint] = b.value
    return out


# ---------------------------------------------------------------------------
# is_splat

def test_is_splat_is_bitwise():
    assert is_splat(np.full((3, 4), 0.02, np.float32))
    assert is_splat(np.full((5,), np.nan, np.float32))  # one NaN payload: the same bits
    assert not is_splat(np.array([0.0, -0.0], np.float32))  # equal, but not the same bits
    assert not is_splat(np.array([1.0, 1.0, 2.0], np.float64))
    assert not is_splat(np.zeros((0,), np.float32))
    assert is_splat(np.array(7, np.int64))
    assert is_splat(np.ones((2, 2), bool)) and not is_splat(np.array([True, False]))


# ---------------------------------------------------------------------------
# FoldConstant

_SPLATS = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((3, 2), "float32")) -> R.Tensor((3, 2), "float32"):
        w = R.full(R.shape([2, 3]), R.const(1.5, "float32"), dtype="float32")
        wt = R.permute_dims(w, axes=[1, 0])
        w2 = R.multiply(wt, R.const(2.0, "float32"))
        other = R.full(R.shape([3, 2]), R.const(2.5, "float32"), dtype="float32")
        mixed = R.concat((w2, other), axis=0)
        c = R.const([1.0, 2.0], "float32")
        big = R.broadcast_to(c, R.shape([3, 2]))
        y = R.add(x, w2)
        z = R.add(y, big)
        head = R.strided_slice(mixed, axes=[0], begin=[0], end=[3])
        r = R.add(z, head)
        return r
"""


def test_fold_constant_folds_oversized_splats_only():
    mod = parse(_SPLATS)
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant", max_elements=4)(mod)
    got = _bindings(out)
    # 6 elements > 4, but splats: folded, with the reference's values
    for name, value in (("w", 1.5), ("wt", 1.5), ("w2", 3.0), ("other", 2.5)):
        assert isinstance(got[name], Constant), name
        np.testing.assert_array_equal(got[name].data, np.full(got[name].data.shape, value))
    assert got["wt"].data.shape == (3, 2)
    # splat operands, but not a splat result: left to run time
    assert isinstance(got["mixed"], Call)
    # a broadcast of a constant that is not a splat stays a call, as before
    assert isinstance(got["big"], Call)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    want = x + 3.0 + np.array([1.0, 2.0], np.float32) + 3.0
    for m in (mod, out):
        np.testing.assert_allclose(np.asarray(phasec.VirtualMachine(phasec.build(m))["main"](x)),
                                   want, rtol=1e-6)


def test_folded_splats_cost_one_element_and_round_trip():
    from phasec.script.json_format.decode import from_json
    from phasec.script.json_format.encode import to_json

    mod = parse(_SPLATS)
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant", max_elements=4)(mod)
    w2 = _bindings(out)["w2"].data
    assert w2.shape == (3, 2) and not any(w2.strides) and not w2.flags.writeable
    # the text and JSON forms write the values out; read back, the same module
    for back in (parse(out.script()), from_json(to_json(out))):
        np.testing.assert_array_equal(_bindings(back)["w2"].data, np.full((3, 2), 3.0))
        x = np.ones((3, 2), np.float32)
        np.testing.assert_array_equal(
            np.asarray(phasec.VirtualMachine(phasec.build(back))["main"](x)),
            np.asarray(phasec.VirtualMachine(phasec.build(out))["main"](x)))


def test_huge_fills_fold_without_being_evaluated():
    # 64M elements (256 MB as float32): a fill and its transpose fold to views
    mod = parse("""
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((8192, 8192), "float32")) -> R.Tensor((8192, 8192), "float32"):
        w = R.full(R.shape([8192, 8192]), R.const(0.5, "float32"), dtype="float16")
        wt = R.permute_dims(w, axes=[1, 0])
        w32 = R.astype(wt, "float32")
        r = R.add(x, w32)
        return r
""")
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant")(mod)
    got = _bindings(out)
    for name, dtype in (("w", "float16"), ("wt", "float16"), ("w32", "float32")):
        data = got[name].data
        assert isinstance(got[name], Constant) and data.shape == (8192, 8192)
        assert str(data.dtype) == dtype and not any(data.strides)
        assert float(data[0, 0]) == 0.5 and float(data[-1, -1]) == 0.5


def test_fold_constant_leaves_non_injective_ops_of_splats():
    # a reduction of a splat is not a splat candidate past the limit
    mod = parse("""
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        w = R.full(R.shape([4, 4]), R.const(0.5, "float32"), dtype="float32")
        m = R.matmul(w, w)
        r = R.add(x, m)
        return r
""")
    with PassContext(opt_level=3):
        out = get_pass("FoldConstant", max_elements=8)(mod)
    got = _bindings(out)
    assert isinstance(got["w"], Constant)  # the splat folds
    assert isinstance(got["m"], Call)      # 16 elements > 8 and a matmul: not a splat fold


# ---------------------------------------------------------------------------
# The constant pool

def test_constant_pool_keeps_splats_compact_and_shared():
    a = np.full((64, 128), 0.25, np.float32)
    b = np.full((64, 128), 0.25, np.float32)    # equal to a: shares its buffer
    c = np.full((64, 128), -0.25, np.float32)   # another value
    real = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    small = np.full((4,), 3.0, np.float32)      # below SPLAT_MIN_ELEMENTS: as it is
    pool = ConstantPool([a, b, c, real, small, (a, 1)])
    assert [pool.loaded(i) for i in range(6)] == [False, False, False, True, True, False]
    # a broadcast view (a folded splat Constant's data), small or not, is
    # materialized contiguous for the kernels
    view = np.broadcast_to(np.float32(2.0), (3, 5))
    (v,) = ConstantPool([view])
    assert v.flags.c_contiguous and v.shape == (3, 5) and (v == 2.0).all()
    assert pool.describe(0) == "float32[64, 128]" and not pool.loaded(0)
    got = [pool[i] for i in range(6)]
    assert got[0] is got[1] and got[0] is got[5][0] and got[0] is not got[2]
    np.testing.assert_array_equal(got[0], a)
    np.testing.assert_array_equal(got[2], c)
    assert got[3] is real and got[4] is small
    for arr in (got[0], got[2]):
        assert arr.flags.c_contiguous and not arr.flags.writeable
        assert arr.__array_interface__["data"][0] % CONSTANT_ALIGNMENT == 0


# ---------------------------------------------------------------------------
# End to end: ONNX ConstantOfShape weights, against onnxruntime

def _model() -> onnx.ModelProto:
    """conv(x, W) and z @ W2^T with W, W2 ConstantOfShape weights larger than
    FoldConstant's max_elements (1 << 20)."""
    w_shape, w2_shape = [1024, 128, 3, 3], [1000, 1100]
    nodes = [
        helper.make_node("ConstantOfShape", ["w_shape"], ["w"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.02])),
        helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["out"]),
        helper.make_node("ConstantOfShape", ["w2_shape"], ["w2"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [-0.5])),
        helper.make_node("Transpose", ["w2"], ["w2t"], perm=[1, 0]),
        helper.make_node("MatMul", ["z", "w2t"], ["out2"]),
    ]
    inits = [helper.make_tensor("w_shape", TensorProto.INT64, [4], w_shape),
             helper.make_tensor("w2_shape", TensorProto.INT64, [2], w2_shape)]
    graph = helper.make_graph(
        nodes, "splat_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 6, 6]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 1100])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1024, 6, 6]),
         helper.make_tensor_value_info("out2", TensorProto.FLOAT, [2, 1000])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def built():
    model = _model()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 128, 6, 6)).astype(np.float32),
             "z": rng.standard_normal((2, 1100)).astype(np.float32)}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    return phasec.build(from_onnx(model)), feeds, want


def test_onnx_splat_weights_match_onnxruntime(built, tmp_path):
    exe, feeds, want = built
    vm = VirtualMachine(exe)
    got = vm["main"](feeds["x"], feeds["z"])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4)
    # saved and loaded: the same results
    exe.save(tmp_path / "m.phx")
    got2 = VirtualMachine(Executable.load(tmp_path / "m.phx"))["main"](feeds["x"], feeds["z"])
    for g, w in zip(got2, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4)


def test_onnx_splat_weights_are_not_built_per_call(built):
    exe, feeds, _ = built
    # no kernel fills a weight: the weights are constants of the executable
    assert not [n for n in exe.prim_funcs if "full" in n]
    called: list[str] = []
    kernels = {name: (lambda name, k: lambda *a: (called.append(name), k(*a))[1])(name, k)
               for name, k in exe.kernels("llvm").items()}
    vm = VirtualMachine(exe, kernels=kernels)
    vm["main"](feeds["x"], feeds["z"])
    vm["main"](feeds["x"], feeds["z"])
    assert len(called) == 4, called  # the convolution and the matmul, twice
    # what a call allocates is its outputs (and the kernels' scratch), not
    # the 4.7 MB and 4.4 MB weights
    assert vm.peak_bytes < 1 << 20, vm.peak_bytes
