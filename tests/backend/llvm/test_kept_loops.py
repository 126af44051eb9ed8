"""``tir.KEEP_LOOP_ATTR``: a serial loop a schedule marks stays a loop in
LLVM (``llvm.loop.unroll.disable``) instead of being fully unrolled with
every loop inside it vectorized again; the values are the same (numpy, the
TIR interpreter), and a mark on anything but a serial loop changes nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs, runtime
from phasec.interp.tir import run_prim_func
from phasec.ir import tir as T
from phasec.te.stmt import kept_loop

from helpers.tir_build import buf, rand, store, var

#: channels (a parallel loop, as a pool's), rows (the loop kept or not) and
#: the columns of a row, read at a stride of 2: SqueezeNet's last pool's shape
CHANNELS, ROWS, COLS, PITCH = 64, 13, 13, 32


def _rows_of_maxima(kept: bool, channels: int = CHANNELS, rows: int = ROWS,
                    cols: int = COLS, copies: int = 1) -> T.PrimFunc:
    """``Y[c, r, x] = max(X[c, r*P + 2x + t] for t < 3)`` with the rows' loop
    kept or not: a strided vectorized loop (LLVM's vectorizer takes it) in
    a short serial loop in a parallel one."""
    X, Y = buf("X", (channels, rows * PITCH + 2)), buf("Y", (channels, rows, cols))
    c, r, x = var("c"), var("r"), var("x")
    value = X[c, r * PITCH + x * 2]
    for t in (1, 2):
        value = T.BinaryOp("max", value, X[c, r * PITCH + x * 2 + t])
    loop = T.For(r, 0, rows, "serial", T.For(x, 0, cols, "vectorized",
                                             store(Y, value, c, r, x)))
    return T.PrimFunc((X, Y), T.For(c, 0, channels, "parallel",
                                    kept_loop(loop, copies) if kept else loop))


def _reference(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    taps = [x[:, t:t + rows * PITCH].reshape(-1, rows, PITCH)[:, :, 0:2 * cols:2]
            for t in range(3)]
    return np.maximum(np.maximum(taps[0], taps[1]), taps[2])


def _compiled(func: T.PrimFunc):
    runtime.clear_cache()  # (the in-process cache is keyed by the TIR's hash)
    return compile_prim_funcs({"k": func})


def _unroll_disabled(ir: str) -> int:
    """The loops of ``ir`` whose metadata turns unrolling off."""
    props = re.findall(r'^(![0-9]+) = !\{!"llvm.loop.unroll.disable"\}$', ir, re.M)
    if not props:
        return 0
    return len(re.findall(r"^![0-9]+ = distinct !\{.*" + props[0] + r"\b", ir, re.M))


def _maxima(ir: str) -> int:
    return len(re.findall(r"@llvm\.maximum\.|@llvm\.maxnum\.|= fcmp |= select ", ir))


@pytest.mark.parametrize("copies", [1, 2, 3])
@pytest.mark.parametrize("channels,rows,cols", [(CHANNELS, ROWS, COLS), (3, 5, 7), (2, 7, 15)])
def test_a_kept_loop_has_the_same_values(channels: int, rows: int, cols: int,
                                         copies: int) -> None:
    x = rand((channels, rows * PITCH + 2))
    want = _reference(x, rows, cols)
    for kept in (False, True):
        func = _rows_of_maxima(kept, channels, rows, cols, copies)
        got = np.full(want.shape, np.nan, np.float32)
        _compiled(func)["k"](x, got)
        np.testing.assert_array_equal(got, want)
        if channels * rows <= 40:
            interp = np.full(want.shape, np.nan, np.float32)
            run_prim_func(func, [x, interp])
            np.testing.assert_array_equal(interp, want)


def test_a_kept_loop_is_not_unrolled_by_llvm() -> None:
    plain = _compiled(_rows_of_maxima(False))
    kept = _compiled(_rows_of_maxima(True))
    assert _unroll_disabled(kept.llvm_ir) == _unroll_disabled(plain.llvm_ir) + 1
    # LLVM unrolls the 13 rows of the plain loop, each a copy of the row's
    # vector code; the kept loop has one copy of it
    unrolled, once = _maxima(plain.optimized_ir), _maxima(kept.optimized_ir)
    assert once > 0 and unrolled >= 3 * once, (unrolled, once)


def test_a_kept_loop_of_two_copies_is_unrolled_by_two_only() -> None:
    plain = _compiled(_rows_of_maxima(False))
    once = _compiled(_rows_of_maxima(True))
    twice = _compiled(_rows_of_maxima(True, copies=2))
    assert '!"llvm.loop.unroll.count", i32 2' in twice.llvm_ir
    assert '"llvm.loop.unroll.count"' not in once.llvm_ir
    # (the two copies' vector code is not a fixed multiple of one's: LLVM's
    # vectorizer chooses its remainders per loop; far from the 13 copies)
    n1, n2, n13 = (_maxima(lib.optimized_ir) for lib in (once, twice, plain))
    assert 0 < n2 and 3 * n2 <= n13 and 3 * n1 <= n13, (n1, n2, n13)


@pytest.mark.parametrize("value", [0, -3])
def test_a_count_below_one_keeps_the_loop_whole(value: int) -> None:
    loop = _rows_of_maxima(True)
    attr = loop.body.body
    bad = T.PrimFunc(loop.params, T.For(loop.body.loop_var, 0, CHANNELS, "parallel", T.AttrStmt(
        T.KEEP_LOOP_ATTR, T.IntImm(value, "int32"), attr.body)))
    assert _compiled(bad).llvm_ir == _compiled(loop).llvm_ir


def test_a_mark_on_anything_but_a_serial_loop_changes_nothing() -> None:
    X, Y = buf("X", (ROWS, 2 * COLS)), buf("Y", (ROWS, COLS))
    r, x = var("r"), var("x")
    body = store(Y, X[r, x * 2] + X[r, x * 2 + 1], r, x)

    def mark(s: T.Stmt) -> T.Stmt:
        return T.AttrStmt(T.KEEP_LOOP_ATTR, T.IntImm(1, "int32"), s)

    def mark_by_a_variable(s: T.Stmt) -> T.Stmt:  # (a count that is not a constant)
        return T.AttrStmt(T.KEEP_LOOP_ATTR, var("n"), s)
    # around the vectorized loop, around a store, around a parallel loop; a
    # serial loop with a count that is not a number
    cases = [(lambda m: T.For(r, 0, ROWS, "serial", m(T.For(x, 0, COLS, "vectorized", body)))),
             (lambda m: T.For(r, 0, ROWS, "serial", T.For(x, 0, COLS, "serial", m(body)))),
             (lambda m: m(T.For(r, 0, ROWS, "parallel", T.For(x, 0, COLS, "serial", body)))),
             (lambda m: (m if m is not mark else mark_by_a_variable)(
                 T.For(r, 0, ROWS, "serial", T.For(x, 0, COLS, "vectorized", body))))]
    xs = rand((ROWS, 2 * COLS))
    want = xs[:, 0::2] + xs[:, 1::2]
    for nest in cases:
        lib = _compiled(T.PrimFunc((X, Y), nest(mark)))
        got = np.zeros(want.shape, np.float32)
        lib["k"](xs, got)
        np.testing.assert_array_equal(got, want)
        assert lib.llvm_ir == _compiled(T.PrimFunc((X, Y), nest(lambda s: s))).llvm_ir
