"""The ONNX backend conformance suite over phasec's backend
(``phasec.frontend.onnx.backend``): every CPU case of
``onnx.backend.test.BackendTest`` (node cases, and the simple, pytorch-operator
and pytorch-converted model cases; the light "real" models are compiled by
test_onnx_models.py with the same data), run as the runner runs it, against
the expected outputs shipped with onnx.

A case the backend reports as unsupported (``unittest.SkipTest``) must be
listed in ``tests/fixtures/onnx_unsupported.txt``; every other case must
pass. So a newly unsupported case fails here, and so does a listed case that
starts passing (remove it from the list). Nothing is skipped: the SkipTest is
caught and checked. ``python -m phasec.frontend.onnx.conformance`` prints the
results by operator and regenerates the list.
"""

from __future__ import annotations

import os
import warnings

import pytest

from phasec.frontend.onnx.conformance import load_cases, main, read_list, run_case

from helpers.paths import FIXTURES

FIXTURE = str(FIXTURES / "onnx_unsupported.txt")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators' numpy warnings
    CASES = load_cases()
UNSUPPORTED = read_list(FIXTURE)


def test_the_suite_is_the_expected_size():
    # onnx 1.16+ generate about 1,900 node cases; a broken loader would pass vacuously
    assert len(CASES) > 1500
    assert sum(c.category == "NodeModel" for c in CASES.values()) > 1500
    stale = sorted(set(UNSUPPORTED) - set(CASES))
    assert not stale, f"listed cases that no longer exist: {stale[:10]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_case(CASES[name])
    if result.status == "unsupported":
        assert name in UNSUPPORTED, (
            f"{name} is newly unsupported (not in {os.path.basename(FIXTURE)}):\n"
            f"{result.message}")
    elif result.status == "pass":
        assert name not in UNSUPPORTED, (
            f"{name} passes now: remove it from {os.path.basename(FIXTURE)}")
    else:
        pytest.fail(f"{name} fails:\n{result.message}")


def test_backend_module_interface():
    import unittest

    import numpy as np
    from onnx import TensorProto, helper

    import phasec.frontend.onnx.backend as backend

    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    (c,) = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, a + b)
    # a shape input given at run time: compiled for its value, recompiled for another
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = backend.prepare(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert rep.run([x, np.array([3, 2])])[0].shape == (3, 2)
    assert rep.run({"x": x, "s": np.array([6, 1])})[0].shape == (6, 1)
    # an unsupported operator: SkipTest from prepare, naming the node
    bad = helper.make_model(helper.make_graph(
        [helper.make_node("Bernoulli", ["x"], ["y"], name="bern")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(unittest.SkipTest, match="'bern' \\(Bernoulli, opset 17\\)"):
        backend.prepare(bad)


def test_the_list_is_written_atomically_never_through_a_planted_link(tmp_path, capsys):
    # (it was written to PATH.tmp, following a link planted there, then renamed)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    out = tmp_path / "unsupported.txt"
    (tmp_path / "unsupported.txt.tmp").symlink_to(victim)
    assert main(["-k", "no case is named this", "--write-unsupported", str(out)]) == 0
    assert victim.read_text() == "keep\n"
    assert not out.is_symlink()
    assert out.read_text().startswith("# ONNX backend conformance cases phasec reports")
    assert read_list(out) == {}
