"""Constants of 2 MB and more lie in whole huge pages of their allocation
(``phasec.ir.expr.aligned_empty``): their first byte on a 2 MB boundary and
their allocation running to the next one past their last byte, so that the
transparent huge pages NumPy asks Linux for back every byte of them; smaller
ones on a 64-byte boundary as before. The values are the source's (odd and
prime sizes, a model's weight through the whole pipeline against numpy)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.backend.vm import VirtualMachine
from phasec.frontend.onnx import from_onnx
from phasec.ir import Constant
from phasec.ir.expr import CONSTANT_ALIGNMENT, HUGE_PAGE, HUGE_PAGE_MIN_BYTES, aligned_empty

RNG = np.random.default_rng(29)


def _address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _allocation(arr: np.ndarray) -> tuple[int, int]:
    """(first, past-the-end) address of the buffer ``arr`` is a view of."""
    base = arr
    while isinstance(base.base, np.ndarray):
        base = base.base
    return _address(base), _address(base) + base.nbytes


@pytest.mark.parametrize("shape,dtype", [
    ((HUGE_PAGE // 4,), "float32"),          # exactly one huge page
    ((HUGE_PAGE + 4,), "uint8"),             # 4 bytes more: a second one
    ((524309,), "float32"),                  # a prime count of elements, 2 MB + 84 bytes
    ((1000, 1280), "float32"),               # MobileNetV2's classifier: 2.44 huge pages
    ((3, 7, 101, 353), "float64"),           # odd dimensions, 5.99 MB
])
def test_large_constants_lie_in_whole_huge_pages(shape, dtype):
    arr = aligned_empty(shape, np.dtype(dtype))
    assert arr.shape == shape and arr.dtype == dtype and arr.flags.c_contiguous
    start, end = _address(arr), _address(arr) + arr.nbytes
    assert arr.nbytes >= HUGE_PAGE_MIN_BYTES
    assert start % HUGE_PAGE == 0
    first, past = _allocation(arr)
    last_page_end = -(-end // HUGE_PAGE) * HUGE_PAGE
    assert first <= start and last_page_end <= past, (first, start, end, past)
    arr[...] = 1  # every byte writable, inside the allocation
    assert np.all(arr == 1)


@pytest.mark.parametrize("shape", [(7,), (HUGE_PAGE // 4 - 1,), (33, 65)])
def test_smaller_constants_keep_the_cache_line_alignment(shape):
    arr = aligned_empty(shape, np.dtype("float32"))
    assert arr.shape == shape and _address(arr) % CONSTANT_ALIGNMENT == 0
    first, past = _allocation(arr)
    # (no huge page's worth of slack for a small one)
    assert past - first < arr.nbytes + 2 * CONSTANT_ALIGNMENT


def test_a_large_constant_keeps_its_values():
    src = RNG.standard_normal((1013, 521)).astype(np.float32)  # prime sizes, 2.1 MB
    data = Constant(src).data
    arr = np.asarray(data)
    assert _address(arr) % HUGE_PAGE == 0
    np.testing.assert_array_equal(arr, src)


def test_a_models_large_weight_in_huge_pages_gives_numpys_result():
    """A Gemm over a 1280 x 1000 weight (+ bias): built, the weight's
    constants of 2 MB and more aligned to huge pages, the result numpy's."""
    w = RNG.standard_normal((1000, 1280)).astype(np.float32) * 0.03
    b = RNG.standard_normal(1000).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1280])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    exe = phasec.build(from_onnx(model))
    large = [np.asarray(c) for c in exe.constants
             if isinstance(c, np.ndarray) and c.nbytes >= HUGE_PAGE_MIN_BYTES]
    assert large and all(_address(c) % HUGE_PAGE == 0 for c in large)
    x = RNG.standard_normal((1, 1280)).astype(np.float32)
    got = VirtualMachine(exe)["main"](x)
    np.testing.assert_allclose(np.asarray(got), x @ w.T + b, rtol=1e-4, atol=1e-4)
