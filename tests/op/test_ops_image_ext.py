"""image.resize3d, image.affine_grid and image.grid_sample
(phasec/op/image/resize.py, grid.py): inference
against TVM 0.27's, and results against TVM 0.27 itself (the same module
compiled by tvm.compile and run on TVM's VM: an independent implementation),
on the interpreter, the TIR interpreter (test_legalize's table) and LLVM."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.interp import run as interp_run
from phasec.ir import ShapeExpr, TensorStructInfo, Var, tir
from phasec.op import call_op

from helpers.op_infer import S, raises, tv


SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 3, 4, 5), "float32"), t: R.Tensor((2, 2, 3), "float32"),
             t3: R.Tensor((1, 3, 4), "float32"), xl: R.Tensor((1, 3, 4, 5, 2), "float32")):
        a = R.image.resize3d(x, (4, 6, 7), layout="NCDHW", method="linear",
                             coordinate_transformation_mode="half_pixel", rounding_method="")
        b = R.image.resize3d(x, R.shape([2, 5, 3]), layout="NCDHW", method="nearest_neighbor",
                             coordinate_transformation_mode="asymmetric", rounding_method="floor")
        c = R.image.affine_grid(t, size=(4, 5), align_corners=True)
        d = R.image.affine_grid(t, size=(4, 5), align_corners=False)
        e = R.image.affine_grid(t3, size=(2, 3, 4))
        f = R.image.resize3d(x, (5, 2, 8), layout="NCDHW", method="cubic",
                             coordinate_transformation_mode="align_corners", rounding_method="")
        g = R.image.resize3d(xl, (6, 3, 4), layout="NDHWC", method="linear",
                             coordinate_transformation_mode="align_corners", rounding_method="")
        return (a, b, c, d, e, f, g)
'''


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((1, 2, 3, 4, 5)).astype("float32"),
            rng.standard_normal((2, 2, 3)).astype("float32"),
            rng.standard_normal((1, 3, 4)).astype("float32"),
            rng.standard_normal((1, 3, 4, 5, 2)).astype("float32"))


@pytest.fixture(scope="module")
def tvm_results(inputs):
    import tvm
    from tvm import relax

    mod = tvm.script.from_source(SOURCE)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return [r.numpy() for r in vm["main"](*[tvm.runtime.tensor(a) for a in inputs])], mod


def test_inference_matches_tvm(tvm_results):
    _, tvm_mod = tvm_results
    text = tvm_mod.script()
    mod = phasec.parse(SOURCE)
    for b in mod["main"].body.blocks[0].bindings:
        assert f"{b.var.name_hint}: {S(b.value)} = " in text


def test_interpreter_and_llvm_match_tvm(tvm_results, inputs):
    expected, _ = tvm_results
    mod = phasec.parse(SOURCE)
    for got in (interp_run(mod, *inputs), phasec.VirtualMachine(phasec.build(mod))["main"](*inputs)):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)


def test_affine_grid_against_its_formula():
    # the identity transform gives the normalized pixel centres (align_corners=False)
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], "float32")
    call = call_op("image.affine_grid", Var("t", TensorStructInfo((1, 2, 3), "float32")),
                   ShapeExpr([2, 4]), align_corners=False)
    from phasec.op import get_op
    out = get_op("relax.image.affine_grid").reference(theta, (2, 4), **dict(call.attrs))
    xs = (2 * np.arange(4) + 1) / 4 - 1
    ys = (2 * np.arange(2) + 1) / 2 - 1
    np.testing.assert_allclose(out[0, 0], np.broadcast_to(xs, (2, 4)), atol=1e-6)
    np.testing.assert_allclose(out[0, 1], np.broadcast_to(ys[:, None], (2, 4)), atol=1e-6)


def test_errors():
    t = tv("t", (2, 2, 3))
    # TVM 0.27's InferTypeAffineGrid checks
    raises(["2-dim (H, W) or 3-dim"], call_op, "image.affine_grid", t, ShapeExpr([4]))
    raises(["dimension 1 of the matrices to be 3 for a 3-D grid, but it is 2"], call_op,
           "image.affine_grid", t, ShapeExpr([2, 3, 4]))
    raises(["3-D tensor"], call_op, "image.affine_grid", tv("m", (2, 6)), ShapeExpr([4, 4]))
    raises(["needs every target size > 1"], call_op, "image.affine_grid", t, ShapeExpr([1, 4]))
    x = tv("x", (1, 2, 3, 4, 5))
    # TVM 0.27's InferTypeResize3D checks
    raises(["3 entries (depth, height, width)"], call_op, "image.resize3d", x, ShapeExpr([4, 4]))
    raises(["5-D tensor"], call_op, "image.resize3d", tv("y", (1, 2, 3, 4)), ShapeExpr([1, 2, 3]))
    raises(["roi needs 1 or 6 numbers"], call_op, "image.resize3d", x, ShapeExpr([1, 2, 3]),
           roi=(0.0, 1.0))
    n = tir.Var("n")
    assert S(call_op("image.resize3d", tv("s", (n, 2, 3, 4, 5)), ShapeExpr([n, 2, 2]),
                     layout="NDHWC")) == 'R.Tensor((n, n, 2, 2, 5), dtype="float32")'


# ---------------------------------------------------------------------------
# grid_sample
# ---------------------------------------------------------------------------

GRID_COMBOS = [("bilinear", "zeros", False), ("bilinear", "reflection", True),
               ("nearest", "border", False), ("nearest", "reflection", False),
               ("bicubic", "zeros", True), ("bicubic", "border", False),
               ("bicubic", "reflection", True)]
GRID_COMBOS_3D = [("bilinear", "border", True), ("nearest", "zeros", False),
                  ("bilinear", "reflection", False)]


def _grid_source():
    lines = [f'        o{i} = R.image.grid_sample(x, g, method="{m}", layout="NCHW", '
             f'padding_mode="{p}", align_corners={a})' for i, (m, p, a) in enumerate(GRID_COMBOS)]
    lines += [f'        q{i} = R.image.grid_sample(v, g3, method="{m}", layout="NCDHW", '
              f'padding_mode="{p}", align_corners={a})'
              for i, (m, p, a) in enumerate(GRID_COMBOS_3D)]
    outs = [f"o{i}" for i in range(len(GRID_COMBOS))] + [f"q{i}" for i in range(len(GRID_COMBOS_3D))]
    return ("@I.ir_module\nclass Module:\n    @R.function\n"
            '    def main(x: R.Tensor((2, 3, 5, 4), "float32"), g: R.Tensor((2, 2, 3, 6), "float32"),\n'
            '             v: R.Tensor((1, 2, 3, 4, 5), "float32"),\n'
            '             g3: R.Tensor((1, 3, 2, 3, 2), "float32")):\n'
            + "\n".join(lines) + f"\n        return ({', '.join(outs)})\n")


def test_grid_sample_matches_tvm_on_the_interpreter_and_llvm():
    import tvm
    from tvm import relax

    rng = np.random.default_rng(1)
    args = (rng.standard_normal((2, 3, 5, 4)).astype("float32"),
            rng.uniform(-1.6, 1.6, (2, 2, 3, 6)).astype("float32"),   # some taps outside
            rng.standard_normal((1, 2, 3, 4, 5)).astype("float32"),
            rng.uniform(-1.6, 1.6, (1, 3, 2, 3, 2)).astype("float32"))
    text = _grid_source()
    vm = relax.VirtualMachine(tvm.compile(tvm.script.from_source(text), target="llvm"), tvm.cpu())
    expected = [r.numpy() for r in vm["main"](*[tvm.runtime.tensor(a) for a in args])]
    mod = phasec.parse(text)
    for got in (interp_run(mod, *args), phasec.VirtualMachine(phasec.build(mod))["main"](*args)):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False),
                                                ("nearest", "border", True),
                                                ("bicubic", "reflection", False)])
def test_grid_sample_matches_onnxruntime(mode, padding, align):
    import onnxruntime
    from onnx import TensorProto, helper

    from phasec.op import get_op
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 4, 5)).astype("float32")
    g = rng.uniform(-1.3, 1.3, (1, 3, 4, 2)).astype("float32")   # ONNX: [N, H, W, 2]
    onnx_mode = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}[mode]
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=onnx_mode,
                            padding_mode=padding, align_corners=int(align))
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("g", TensorProto.FLOAT, g.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x, "g": g})[0]
    got = get_op("relax.image.grid_sample").reference(
        x, np.ascontiguousarray(g.transpose(0, 3, 1, 2)), method=mode, padding_mode=padding,
        align_corners=align)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_grid_sample_hostile_grid_reads_nothing_outside():
    # NaN and huge coordinates: far outside, so zero padding (never a wild read)
    text = _grid_source()
    mod = phasec.parse(text)
    x = np.ones((2, 3, 5, 4), "float32")
    g = np.full((2, 2, 3, 6), np.nan, "float32")
    g[0, 0, 0, :3] = [np.inf, -np.inf, 3.0e38]
    v, g3 = np.ones((1, 2, 3, 4, 5), "float32"), np.full((1, 3, 2, 3, 2), np.nan, "float32")
    results = phasec.VirtualMachine(phasec.build(mod))["main"](x, g, v, g3)
    interp = interp_run(mod, x, g, v, g3)
    for (m, p, _), got, ref in zip(GRID_COMBOS + GRID_COMBOS_3D, results, interp):
        got = np.asarray(got)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, ref, atol=1e-5)
        if p == "zeros":
            assert not got.any()


def test_grid_sample_errors():
    x, g = tv("x", (2, 3, 5, 4)), tv("g", (2, 2, 3, 6))
    assert S(call_op("image.grid_sample", x, g)) == 'R.Tensor((2, 3, 3, 6), dtype="float32")'
    raises(["to hold 2 coordinates, but it is 3"], call_op,
           "image.grid_sample", x, tv("g3", (2, 3, 3, 6)))
    raises(["bicubic sampling is 2-D only"], call_op, "image.grid_sample",
           tv("v", (1, 2, 3, 4, 5)), tv("w", (1, 3, 2, 2, 2)), layout="NCDHW", method="bicubic")
    raises(["layout NCHW or NCDHW"], call_op, "image.grid_sample", x, g, layout="NHWC")
    raises(["expected one of"], call_op, "image.grid_sample", x, g, padding_mode="wrap")
    raises(["computes in floating point"], call_op, "image.grid_sample", tv("xi", (2, 3, 5, 4),
           "int32"), g)
