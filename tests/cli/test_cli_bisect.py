"""phasec bisect: a planted miscompiling pass in the default pipeline is found
by bisection, against ONNX Runtime for ONNX models and against the
interpreter for TVMScript; the default pipeline is not blamed."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

import phasec.pipeline
from helpers.planted import planted_pipeline
from phasec.cli import main
from phasec.cli.run import example_source


def _model(nodes, inputs, output, inits, path):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _onnx_models(tmp_path):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((16, 8)) / 4).astype("float32")
    b = rng.standard_normal(8).astype("float32")
    k = (rng.standard_normal((4, 3, 3, 3)) / 5).astype("float32")
    mlp = _model([helper.make_node("MatMul", ["x", "w"], ["h"]),
                  helper.make_node("Sub", ["h", "b"], ["s"]),
                  helper.make_node("Relu", ["s"], ["y"])],
                 [("x", [4, 16])], ("y", [4, 8]), {"w": w, "b": b}, tmp_path / "mlp.onnx")
    conv = _model([helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
                   helper.make_node("Div", ["c", "d"], ["y"])],
                  [("x", [1, 3, 6, 6])], ("y", [1, 4, 6, 6]),
                  {"k": k, "d": np.array([2.0], "float32")}, tmp_path / "conv.onnx")
    gemm = _model([helper.make_node("Gemm", ["x", "w", "b"], ["g"]),
                   helper.make_node("Sub", ["g", "m"], ["s"]),
                   helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
                  [("x", [2, 16])], ("y", [2, 8]),
                  {"w": w, "b": b, "m": np.full(8, 0.5, "float32")}, tmp_path / "gemm.onnx")
    return {"mlp": mlp, "conv": conv, "gemm": gemm}


def _plant(monkeypatch, kind):
    monkeypatch.setattr(phasec.pipeline, "default_pipeline",
                        lambda opt_level=2: planted_pipeline(kind, opt_level))


def test_default_pipeline_agrees_with_onnx_runtime(tmp_path, capsys):
    for path in _onnx_models(tmp_path).values():
        assert main(["bisect", path]) == 0
        out = capsys.readouterr().out
        assert "ONNX Runtime" in out and "agrees" in out


@pytest.mark.parametrize("model,kind,blamed", [
    ("mlp", "swap", "PlantedSwapInFused"),
    ("conv", "off_by_one", "PlantedOffByOne"),
    ("gemm", "wrong_fold", "PlantedWrongFold"),
])
def test_planted_pass_found_against_onnx_runtime(tmp_path, monkeypatch, capsys, model, kind,
                                                 blamed):
    path = _onnx_models(tmp_path)[model]
    _plant(monkeypatch, kind)
    assert main(["bisect", path]) == 1
    out = capsys.readouterr().out
    assert "the compiled model differs" in out
    assert f"first pass introducing the difference:\npass {blamed} (#" in out
    # O(log passes) interpreter runs: 15 passes -> start, end and at most 4 probes
    runs = int(re.search(r"(\d+) interpreter run\(s\)", out).group(1))
    assert runs <= 6


def _module_lines(path):
    return [t for t in path.read_text().splitlines() if t.strip() and not t.startswith("#")]


def test_minimized_reproducer_replays(tmp_path, monkeypatch, capsys):
    from phasec.testing.reproducers import read_reproducer, replay
    from phasec.transform import REGISTRY, register_pass
    from helpers.planted import swap_in_fused

    path = _onnx_models(tmp_path)["gemm"]
    _plant(monkeypatch, "swap")
    out_dir = tmp_path / "repro"
    assert main(["bisect", path, "--reproducer", str(out_dir)]) == 1
    out = capsys.readouterr().out
    assert "minimized reproducer" in out and "phasec fuzz --replay" in out
    (repro,) = out_dir.glob("*.py")
    text = repro.read_text()
    assert "# sequence: PlantedSwapInFused" in text and "# kind: results" in text
    rep = read_reproducer(repro)
    # the softmax after the fused subtract was cut away, shapes made small
    assert "softmax" not in rep.module.script() and "16" not in rep.module.script()
    assert len(_module_lines(repro)) <= 20
    with REGISTRY.scope():
        register_pass(swap_in_fused)
        failures = replay(repro, kernels="interp")
    assert [f.kind for f in failures] == ["results"]


def test_bundled_example_reproducer_is_small(tmp_path, monkeypatch, capsys):
    """A pass blamed in the lowering phase: the kernel it ran on is
    re-derived from the shrunk starting module and simplified."""
    example, kind = "mlp", "off_by_one"
    from phasec.interp import run
    from phasec.testing.reproducers import read_reproducer
    from helpers.planted import PLANTED

    path = tmp_path / f"{example}.py"
    path.write_text(example_source(example))
    _plant(monkeypatch, kind)
    assert main(["bisect", str(path), "--reproducer", str(tmp_path / "r")]) == 1
    (repro,) = (tmp_path / "r").glob("*.py")
    blamed = PLANTED[kind][0]
    out = capsys.readouterr().out
    assert f"pass {blamed.info.name} (#" in out and "float64" in out
    assert len(_module_lines(repro)) <= 20
    rep = read_reproducer(repro)
    # the planted pass changes the reproducer's results (numpy: not phasec's own verdict)
    before = run(rep.module, *rep.inputs)
    after = run(blamed(rep.module), *rep.inputs)
    assert not np.allclose(before, after, rtol=1e-3, atol=1e-4)
