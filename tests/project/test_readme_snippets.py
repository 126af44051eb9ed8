"""Every Python snippet of the README runs verbatim.

Each snippet runs on its own, in a directory holding the files they name
(``model.py``, ``model.pvm``, ``resnet50.onnx``, ``bert.onnx``) and with the
names they take as given (``numpy_arrays``, ``x``, ``w``, ``MyPass``,
``tvm``, and ``mod``: model.py in phase optimization, as the pass snippet
says). Results are checked against numpy where a snippet computes one.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import phasec

from helpers.paths import REPO

README = REPO / "README.md"

MODEL = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 4), dtype="float32")) -> R.Tensor((4, 4), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
"""


def snippets() -> list[tuple[int, str]]:
    """(line, code) of every ```python block, list-item indentation removed."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^([ \t]*)```python\n(.*?)^\1```", text, re.M | re.S):
        out.append((text[:m.start()].count("\n") + 1, textwrap.dedent(m.group(2))))
    return out


def _onnx_models(folder: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    weight = helper.make_tensor("k", TensorProto.FLOAT, [4, 3, 3, 3],
                                rng.standard_normal(108).astype("float32").tolist())
    conv = helper.make_graph(
        [helper.make_node("Conv", ["data", "k"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["out"])], "tiny_resnet",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], [weight])
    onnx.save(helper.make_model(conv, opset_imports=[helper.make_opsetid("", 17)]),
              folder / "resnet50.onnx")
    ids = helper.make_graph(
        [helper.make_node("Relu", ["ids"], ["out"])], "tiny_bert",
        [helper.make_tensor_value_info("ids", TensorProto.FLOAT, ["batch", 128])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 128])])
    onnx.save(helper.make_model(ids, opset_imports=[helper.make_opsetid("", 17)]),
              folder / "bert.onnx")


def test_the_readme_has_the_snippets_this_test_knows() -> None:
    assert len(snippets()) >= 6


def test_every_python_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tvm

    from phasec.ir import Phase
    from phasec.transform import module_pass

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(MODEL)
    phasec.build(phasec.parse(MODEL)).save(str(tmp_path / "model.pvm"))
    _onnx_models(tmp_path)

    @module_pass(opt_level=1, phases=Phase.OPTIMIZATION)
    class MyPass:
        """A pass that changes nothing (what check_pass is shown on)."""

        def transform_module(self, mod, ctx):
            return mod

    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype("float32")
    w = rng.standard_normal((8, 4)).astype("float32")
    from phasec import transform

    given = {"numpy_arrays": [x, w], "x": x, "w": w, "MyPass": MyPass, "tvm": tvm,
             "phasec": phasec, "mod": transform.get_pass("LambdaLifting")(phasec.load("model.py"))}
    want = np.maximum(x @ w, 0)
    for line, code in snippets():
        namespace = dict(given)
        # a snippet's @register_pass (the README's DropUnusedParams) is undone
        # afterwards: later tests see the registry the project defines
        with transform.REGISTRY.scope():
            try:
                exec(compile(code, f"README.md:{line}", "exec"), namespace)  # noqa: S102
                for name, value in list(namespace.items()):  # a snippet's tests run too
                    if name.startswith("test_") and callable(value) and name not in given:
                        value()
            except Exception as exc:
                raise AssertionError(f"the README snippet at line {line} fails: "
                                     f"{type(exc).__name__}: {exc}\n{code}") from exc
        if "out" in namespace and 'vm["main"]' in code:
            np.testing.assert_allclose(np.asarray(namespace["out"]), want, rtol=1e-5, atol=1e-6)
