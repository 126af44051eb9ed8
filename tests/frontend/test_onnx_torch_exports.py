"""Architectures exported from PyTorch (tests/fixtures/torch_exports/, see
its README.md), with their weights refilled from the recorded statistics,
against ONNX Runtime on the same weights and seeded inputs.

Every fixture imports (``from_onnx``, verified). Compiling one costs several
seconds of LLVM, so the suite compiles the ones with dynamic axes that
exercise what CNNs do not (symbolic ``Range``, ``Slice``, ``Expand``, masks
built from shapes, grouped-query attention, rotary embeddings, relative position
buckets): each is built once with its symbolic
dimensions and run at two sizes, equal to ORT at each.
``bench/bench_torch_exports.py`` compiles and checks every fixture, with
phasec/ORT time ratios.
"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo

from helpers import torch_exports as tx

#: compiled in the suite: one build each, run at two sizes of every dynamic axis
COMPILED = ["bert", "gpt2", "llama", "t5_encoder"]
SIZES = [{"batch": 1, "seq": 7}, {"batch": 3, "seq": 12}]


def test_the_corpus_holds_at_least_fifteen_architectures():
    assert len(tx.names()) >= 15


@pytest.mark.parametrize("name", tx.names())
def test_every_fixture_imports_with_its_output_shape(name):
    model = tx.load(name)
    main = from_onnx(model)["main"]
    sinfo = main.ret_struct_info
    assert isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
    # the declared dynamic axes stay symbolic parameters
    dims = tx.input_dims(model)
    for param, declared in zip(main.params, dims.values()):
        got = [d.name if isinstance(d, tir.Var) else int(d.value) for d in param.struct_info.shape]
        assert got == declared


@pytest.mark.parametrize("name", COMPILED)
def test_dynamic_model_compiled_once_matches_ort_at_each_size(name):
    model = tx.load(name)
    main = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"]
    sess = tx.session(model)
    for k, sizes in enumerate(SIZES):
        x = tx.inputs(model, sizes, seed=k)
        (expected,) = sess.run(None, x)
        got = np.asarray(main(*x.values()))
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert np.unique(expected).size > expected.size // 2  # not a degenerate output
        scale = float(np.max(np.abs(expected)))
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=f"{name} at {sizes}")
