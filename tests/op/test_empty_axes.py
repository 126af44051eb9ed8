"""Empty axes in the operators that gather or resize (issue 27 #3): ONNX
Resize from a zero-size axis crashed or copied heap bytes into the outputs,
``R.take(mode="clip"|"wrap")`` over an empty axis returned heap garbage.
Now each is a correct (empty) result or the same clear error in the
reference interpreter, the compiled kernels and the TIR interpreter. (take's
modes over empty axes are also in the property of tests/pipeline/test_bounds.py.)
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.cli import main
from phasec.errors import IndexOutOfRangeError, PhasecError

MODULE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor({shape}, "float32"){extra}):
        a = {call}
        return a
'''


def _everywhere(text: str, *args):
    """The outcome on the reference interpreter, compiled kernels and the TIR
    interpreter: ("ok", array) or ("index", (value, extent)) of the
    IndexOutOfRangeError (the reference wraps it)."""
    mod = phasec.parse(text)
    exe = phasec.build(mod)
    out = []
    for run in (lambda: phasec.interp.run(mod, *args),
                lambda: phasec.VirtualMachine(exe)["main"](*args),
                lambda: phasec.VirtualMachine(exe, kernels="interp")["main"](*args)):
        try:
            out.append(("ok", np.asarray(run())))
        except PhasecError as exc:
            cause = exc if isinstance(exc, IndexOutOfRangeError) else exc.__cause__
            assert isinstance(cause, IndexOutOfRangeError), exc
            out.append(("index", (cause.value, cause.extent)))
    return out


@pytest.mark.parametrize("call, shape", [
    ('R.image.resize2d(x, R.shape([2, 4]), method="linear")', '(1, 1, "h", 4)'),
    ('R.image.resize2d(x, R.shape([2, 4]), method="nearest_neighbor")', '(1, 1, "h", 4)'),
    ('R.image.resize2d(x, R.shape([3, 4]), method="cubic")', '(1, 1, "h", 4)'),
    ('R.image.resize3d(x, R.shape([2, 2, 2]))', '(1, 1, "h", 2, 2)'),
])
def test_resizing_an_axis_that_is_empty_at_run_time(call, shape):
    """A symbolic axis that turns out empty: there is nothing to sample, so
    every engine stops with the error its tap index 0 into extent 0 gives
    (ONNX Runtime refuses the same resize: 'Input dim is zero but required
    output dim is non-zero')."""
    dims = [0 if d.strip() == '"h"' else int(d) for d in shape.strip("()").split(",")]
    x = np.zeros(dims, "float32")
    outcomes = _everywhere(MODULE.format(shape=shape, extra="", call=call), x)
    assert outcomes == [("index", (0, 0))] * 3
    # and a non-empty axis still resizes (numpy's nearest-neighbour formula)
    if "nearest" in call:
        y = np.arange(8, dtype="float32").reshape(1, 1, 2, 4)
        got = _everywhere(MODULE.format(shape=shape, extra="", call=call), y)
        for kind, value in got:
            assert kind == "ok"
            np.testing.assert_array_equal(value, y)


def _resize_model(in_shape, sizes, mode):
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, in_shape)
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode=mode)
    graph = helper.make_graph([node], "g", [X], [Y], initializer=[
        numpy_helper.from_array(np.array(sizes, np.int64), "sizes")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_onnx_resize_from_a_zero_size_axis_is_refused(tmp_path, capsys, mode):
    """The issue's 143-byte model: ONNX Runtime refuses it at run time;
    phasec refuses it at import (exit 2, the node named) and writes nothing."""
    model = _resize_model([1, 1, 0, 4], [1, 1, 2, 4], mode)
    with pytest.raises(Exception, match="Input dim is zero"):
        sess = ort.InferenceSession(model.SerializeToString())
        sess.run(None, {"X": np.zeros((1, 1, 0, 4), "float32")})
    path = tmp_path / "resize.onnx"
    path.write_bytes(model.SerializeToString())
    saved = tmp_path / "out.npz"
    assert main(["run", str(path), "-q", "--save-outputs", str(saved)]) == 2
    err = capsys.readouterr().err
    assert "Resize" in err and "cannot resize an empty axis" in err
    assert "Traceback" not in err and not saved.exists()


def test_onnx_resize_of_an_empty_tensor_to_an_empty_tensor():
    """An axis that stays empty is a correct empty result, as ONNX Runtime's."""
    model = _resize_model([1, 1, 0, 4], [1, 1, 0, 8], "linear")
    x = np.zeros((1, 1, 0, 4), "float32")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"X": x})[0]
    mod = phasec.frontend.onnx.from_onnx(model)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    assert got.shape == want.shape == (1, 1, 0, 8)


def test_grid_sample_over_an_empty_image_reads_nothing():
    """No pixel of an empty image is inside: every sample is 0 (the zeros,
    border and reflection paddings alike), in every engine."""
    grid = np.array([[[[-1.0, -1.0], [0.0, 0.0]], [[0.5, 0.5], [1.0, 1.0]]]], "float32")
    for padding in ("zeros", "border"):
        call = (f'R.image.grid_sample(x, g, method="bilinear", layout="NCHW", '
                f'padding_mode="{padding}")')
        text = MODULE.format(shape='(1, 1, "h", 4)', extra=', g: R.Tensor((1, 2, 2, 2), "float32")',
                             call=call)
        for kind, value in _everywhere(text, np.zeros((1, 1, 0, 4), "float32"), grid):
            assert kind == "ok"
            np.testing.assert_array_equal(value, np.zeros((1, 1, 2, 2), "float32"))


@pytest.mark.parametrize("mode", ["circular", "replicate"])
def test_padding_an_axis_that_is_empty_at_run_time(mode):
    """Circular and replicate padding copy from the axis: an empty one is an
    error in the kernels (a clear IndexOutOfRangeError, no division by zero)
    and in the reference."""
    text = MODULE.format(shape='(2, "w")', extra="",
                         call=f'R.nn.pad(x, pad_width=[0, 0, 2, 2], pad_mode="{mode}")')
    mod = phasec.parse(text)
    x = np.zeros((2, 0), "float32")
    with pytest.raises(PhasecError, match=f"{mode} padding of axis 1, which is empty"):
        phasec.interp.run(mod, x)
    exe = phasec.build(mod)
    for kernels in ("llvm", "interp"):
        with pytest.raises(IndexOutOfRangeError, match="extent 0 .the axis is empty"):
            phasec.VirtualMachine(exe, kernels=kernels)["main"](x)


@pytest.mark.parametrize("call, extra, args", [
    ("R.gather_elements(x, i, axis=1)", ', i: R.Tensor((2, 3), "int64")',
     [np.zeros((2, 3), "int64")]),
    ('R.scatter_elements(x, i, u, axis=1)',
     ', i: R.Tensor((2, 3), "int64"), u: R.Tensor((2, 3), "float32")',
     [np.zeros((2, 3), "int64"), np.ones((2, 3), "float32")]),
    ("R.take(x, i, axis=1)", ', i: R.Tensor((2,), "int64")', [np.zeros(2, "int64")]),
])
def test_data_indexed_operators_over_an_axis_empty_at_run_time(call, extra, args):
    """Index 0 into an axis of extent 0: the same error everywhere."""
    text = MODULE.format(shape='(2, "w")', extra=extra, call=call)
    assert _everywhere(text, np.zeros((2, 0), "float32"), *args) == [("index", (0, 0))] * 3
