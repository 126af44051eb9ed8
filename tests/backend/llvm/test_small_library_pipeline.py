"""The LLVM pipeline of a small library (work.library_pipeline): a library
whose kernels store at most SMALL_LIBRARY_WORK elements, every extent
static, is optimized at O2 without LLVM's own loop transformations; LLVM
then keeps a short loop it would unroll at O3, still vectorizes a loop phasec
marks, and the results are numpy's."""

from __future__ import annotations

import numpy as np

from phasec.backend.llvm import compile_prim_funcs
from phasec.backend.llvm.objworker import PIPELINE_SWITCHES
from phasec.backend.llvm.work import SMALL_LIBRARY_WORK, library_pipeline
from phasec.ir import tir as T

from helpers.tir_build import buf, loops, store, var


def _triple(n, kind: str = "serial") -> T.PrimFunc:
    """``Y[i] = 3 * X[i]`` over ``n`` elements (``n`` an int or a TIR variable)."""
    x, y = buf("X", (n,)), buf("Y", (n,))
    return T.PrimFunc((x, y), loops([n], lambda i: store(y, x[i] * 3.0, i), [kind]))


def _pipeline(*funcs: T.PrimFunc, opt_level: int = 3) -> tuple[int, tuple[str, ...]]:
    return library_pipeline((f.body for f in funcs), opt_level)


def test_the_pipeline_follows_the_library_s_total_work() -> None:
    small = (2, PIPELINE_SWITCHES)
    assert _pipeline(_triple(60)) == small
    assert _pipeline(_triple(SMALL_LIBRARY_WORK)) == small
    assert _pipeline(_triple(SMALL_LIBRARY_WORK + 1)) == (3, ())
    half = SMALL_LIBRARY_WORK // 2 + 1  # each small, together over the limit
    assert _pipeline(_triple(half), _triple(half)) == (3, ())
    assert _pipeline(_triple(var("n"))) == (3, ())  # its size is not known at build time
    assert _pipeline(_triple(60), opt_level=2) == small
    assert _pipeline(_triple(60), opt_level=1) == (1, ())
    assert _pipeline(_triple(60), opt_level=0) == (0, ())


def _keeps_a_loop(lib, name: str) -> bool:
    """Whether ``name``'s optimized function still has a loop (a phi)."""
    text = lib.optimized_ir
    start = text.index(f"@phasec.k.{name}(")
    return "phi " in text[start:text.index("\n}\n", start)]


def test_llvm_keeps_a_short_loop_of_a_small_library() -> None:
    x = np.arange(5, dtype="float32") - 2.5
    alone = compile_prim_funcs({"short": _triple(5)}, use_cache=False)
    beside_large = compile_prim_funcs({"short": _triple(5), "large": _triple(SMALL_LIBRARY_WORK)},
                                      use_cache=False)
    assert _keeps_a_loop(alone, "short")
    assert not _keeps_a_loop(beside_large, "short")  # O3 unrolls it
    for lib in (alone, beside_large):
        y = np.zeros_like(x)
        lib["short"](x, y)
        np.testing.assert_array_equal(y, x * np.float32(3))


def test_a_marked_loop_of_a_small_library_is_still_vectorized() -> None:
    lib = compile_prim_funcs({"vec": _triple(64, "vectorized")}, use_cache=False)
    assert " x float>" in lib.optimized_ir
    x = np.linspace(-4, 4, 64, dtype="float32")
    y = np.zeros_like(x)
    lib["vec"](x, y)
    np.testing.assert_array_equal(y, x * np.float32(3))
