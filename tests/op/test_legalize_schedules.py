"""The schedules legalization picks for softmax, transposes and im2col:
softmax over the last axis computes exp once per element in a row buffer,
its row maximum (te.fast_max) keeps NaN and infinities, permute_dims of the
last two axes takes the transposing schedule, and a stride-1 im2col whose
rows keep the image's width copies each tap's rows as one run; against
numpy on the TIR interpreter and LLVM."""

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs as compile_kernels
from phasec.interp.tir import run_prim_func
from phasec.ir import Constant, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import legalize_fused, lower_call

from helpers.legalize import fused, nests, rand, tvar, walk

N = tir.Var("n")


# ---------------------------------------------------------------------------
# softmax over the last axis: exp once per element (a row buffer)
# ---------------------------------------------------------------------------

def count_calls(root, name):
    """How many tir.Call nodes named ``name`` the tree under ``root`` holds
    (by position: a node reached twice counts twice)."""
    import dataclasses

    from phasec.ir.node import Node

    count, stack = 0, [root]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(n)
            continue
        if not isinstance(n, Node):
            continue
        if isinstance(n, tir.Call) and n.name == name:
            count += 1
        stack.extend(getattr(n, f.name) for f in dataclasses.fields(n))
    return count


def allocated(func):
    return {s.buffer.name: s.buffer for s in walk(func.body) if isinstance(s, tir.Allocate)}


def softmax_ref(a):
    return get_op("relax.nn.softmax").reference(a, axis=-1)


@pytest.mark.parametrize("shape", [(4, 32), (3, 100), (2, 4, 16), (1, 4096)])
def test_softmax_over_rows_computes_exp_once_per_element(shape):
    low = lower_call(call_op("nn.softmax", tvar("a", shape)))
    func = low.prim_func
    assert count_calls(func.body, "exp") == 1
    row = allocated(func)["T_softmax_exp_local"]     # one row of exp values
    assert [int(d.value) for d in row.shape] == [shape[-1]]
    assert len(nests(func)) == 1
    a = rand(shape) * 5
    out = np.zeros(shape, "float32")
    run_prim_func(func, [a, out])
    np.testing.assert_allclose(out, softmax_ref(a), rtol=1e-5, atol=1e-7)


def test_softmax_row_buffer_on_llvm():
    from phasec.backend.llvm import compile_prim_funcs

    func = lower_call(call_op("nn.softmax", tvar("a", (64, 200)))).prim_func
    assert count_calls(func.body, "exp") == 1
    a = rand((64, 200)) * 10
    out = np.zeros((64, 200), "float32")
    compile_prim_funcs({"softmax": func})["softmax"](a, out)
    np.testing.assert_allclose(out, softmax_ref(a), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("last", [N, 5000])
def test_softmax_without_a_row_buffer_stays_correct(last):
    # No row buffer when the row's length is unknown (symbolic: exp(x - max)
    # is kept in the output row instead) or longer than ScheduleOptions.max_row
    # (exp is inlined into the sum and the division).
    from phasec.backend.llvm import compile_prim_funcs

    low = lower_call(call_op("nn.softmax", tvar("a", (3, last))))
    func = low.prim_func
    assert "T_softmax_exp_local" not in allocated(func)
    assert "T_softmax_exp" not in allocated(func)    # inlined, not a global buffer
    # symbolic: exp once per element (written twice: whole vectors, then the rest)
    assert (count_calls(func.body, "exp") == 2) if last is N else (count_calls(func.body, "exp") >= 2)
    cols = 7 if last is N else last
    a = rand((3, cols)) * 5
    if last is N:  # the interpreter, for the small case
        out = np.zeros((3, cols), "float32")
        run_prim_func(func, [a, out])
        np.testing.assert_allclose(out, softmax_ref(a), rtol=1e-5, atol=1e-7)
    kernel = compile_prim_funcs({"softmax": func})["softmax"]
    for x in [a] + ([rand((3, 300)) * 5] if last is N else []):
        out = np.zeros(x.shape, "float32")
        kernel(x, out)
        np.testing.assert_allclose(out, softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_softmax_over_a_leading_axis_and_without_hints_is_unchanged():
    for call, hints in ((call_op("nn.softmax", tvar("a", (6, 5)), axis=0), True),
                        (call_op("nn.softmax", tvar("a", (6, 5))), False)):
        func = lower_call(call, hints).prim_func
        assert "T_softmax_exp_local" not in allocated(func)
        a = rand((6, 5))
        out = np.zeros((6, 5), "float32")
        run_prim_func(func, [a, out])
        np.testing.assert_allclose(
            out, get_op("relax.nn.softmax").reference(a, axis=call.attrs["axis"]),
            rtol=1e-5, atol=1e-7)


# softmax's row maximum uses te.fast_max (the CPU's max, partial lanes): a NaN
# or an infinity anywhere in a row must still give numpy's row
@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("shape", [(7, 127), (5, 131), (3, 1, 64), (2, 13)])
def test_softmax_rows_with_nan_and_infinities_match_the_reference(op, shape):
    from phasec.backend.llvm import compile_prim_funcs

    func = lower_call(call_op(op, tvar("a", shape))).prim_func
    # its own stream: the data must not change with the tests drawn before it
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype("float32") * 5
    rows = a.reshape(-1, shape[-1])
    last = shape[-1] - 1
    rows[0, 0] = np.nan                    # first element
    rows[1, last] = np.nan                 # last element (the tail of the lanes)
    rows[-1, last // 2] = np.inf           # inf - inf: NaN, as in numpy
    if rows.shape[0] > 3:
        rows[2, :] = -np.inf               # a row of -inf
        rows[3, 1:3] = (np.nan, 1e30)      # NaN beside a huge value
    with np.errstate(all="ignore"):
        ref = get_op("relax." + op).reference(a, axis=-1)
    kernel = compile_prim_funcs({"k": func})["k"]
    for run in (lambda out: run_prim_func(func, [a, out]), lambda out: kernel(a, out)):
        out = np.zeros(shape, "float32")
        with np.errstate(all="ignore"):
            run(out)
        np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
        # log_softmax near 0 is x - max - log(sum): float32 rounding of log(sum)
        # (up to log(131) ~ 4.9, an ulp of 4.8e-7) bounds its absolute error
        atol = 1e-6 if op == "nn.log_softmax" else 1e-7
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=atol)


def test_softmax_with_a_symbolic_row_length_and_nan():
    from phasec.backend.llvm import compile_prim_funcs

    func = lower_call(call_op("nn.softmax", tvar("a", (3, N)))).prim_func
    kernel = compile_prim_funcs({"k": func})["k"]
    for cols in (1, 67, 257):
        a = rand((3, cols)) * 5
        a[1, cols - 1] = np.nan
        with np.errstate(all="ignore"):
            ref = softmax_ref(a)
        out = np.zeros((3, cols), "float32")
        kernel(a, out)
        np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)


# permute_dims swapping the last two axes: the transposing schedule
# (phasec/te/schedules/transpose.py: four columns interleaved into a row buffer,
# then copied out in rows), remainders of every size, against numpy on the
# TIR interpreter and on LLVM
def _row_buffers(func):
    return [b for name, b in allocated(func).items() if name.endswith("_rows")]


@pytest.mark.parametrize("shape,perm", [
    ((3, 67, 131), (0, 2, 1)),       # out 131 x 67 (primes): 2 blocks of 8 groups, 3 columns
    ((2, 5, 9), (0, 2, 1)),          # out 9 x 5: one group and one column
    ((41, 13), (1, 0)),              # 2-D, out 13 x 41: a block, a partial one, a column
    ((1, 4, 8), (0, 2, 1)),          # out 8 x 4: exactly one group of eight rows
    ((2, 3, 11, 9), (0, 1, 3, 2)),   # two batch axes
    ((2, 11, 3, 64), (0, 2, 3, 1)),  # BERT's key split: out 3 x 64 x 11, a batch axis moves
])
def test_last_two_axes_transpose_schedule_on_odd_and_prime_shapes(shape, perm):
    from phasec.backend.llvm import compile_prim_funcs

    func = lower_call(call_op("permute_dims", tvar("a", shape), axes=perm)).prim_func
    assert len(_row_buffers(func)) == 1
    a = rand(shape)
    want = np.transpose(a, perm)
    out = np.zeros(want.shape, "float32")
    run_prim_func(func, [a, out])
    np.testing.assert_array_equal(out, want)
    out = np.zeros(want.shape, "float32")
    compile_prim_funcs({"t": func})["t"](a, out)
    np.testing.assert_array_equal(out, want)


def test_transpose_schedule_with_a_symbolic_batch_and_fused_elementwise_ops():
    from phasec.backend.llvm import compile_prim_funcs

    x = tvar("x", (N, 37, 19))
    func = fused([x], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "multiply", bb.emit(call_op("permute_dims", x, axes=(0, 2, 1))),
        Constant(np.array(2.0, "float32"))))))
    prim = legalize_fused(func)
    assert len(_row_buffers(prim)) == 1
    kernel = compile_prim_funcs({"t": prim})["t"]
    for batch in (1, 3):
        a = rand((batch, 37, 19))
        want = np.maximum(np.transpose(a, (0, 2, 1)) * 2, 0)
        for run in (lambda o: run_prim_func(prim, [a, o]), lambda o: kernel(a, o)):
            out = np.zeros((batch, 19, 37), "float32")
            run(out)
            np.testing.assert_array_equal(out, want)


def test_transpose_schedule_with_symbolic_columns():
    """out[b, i, j] = x[b, j, i] * 2 with j of run-time length (a key
    transposed over a symbolic sequence): blocks, groups and the last
    columns counted at run time, each count 0 somewhere below."""
    from phasec.backend.llvm import compile_prim_funcs

    x = tvar("x", (2, N, 16))
    func = fused([x], lambda bb: call_op("multiply", bb.emit(call_op(
        "permute_dims", x, axes=(0, 2, 1))), Constant(np.array(2.0, "float32"))))
    prim = legalize_fused(func)
    assert len(_row_buffers(prim)) == 1
    kernel = compile_prim_funcs({"t": prim})["t"]
    for n in (0, 1, 3, 4, 5, 31, 32, 33, 67):
        a = rand((2, n, 16))
        want = np.transpose(a, (0, 2, 1)) * 2
        runs = [lambda o: kernel(a, o)] + ([lambda o: run_prim_func(prim, [a, o])]
                                           if n in (5, 33) else [])
        for run in runs:
            out = np.full((2, 16, n), np.nan, "float32")
            run(out)
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("make", [
    lambda: call_op("permute_dims", tvar("a", (4, 7))),                 # fewer than 8 rows
    lambda: call_op("permute_dims", tvar("a", (64, 3))),                # fewer than 4 columns
    lambda: call_op("permute_dims", tvar("a", (9, 3000))),              # rows too long
    lambda: call_op("permute_dims", tvar("a", (16, 16), "float64")),    # not 32-bit
    lambda: call_op("permute_dims", tvar("a", (16, N))),                # symbolic rows
    lambda: call_op("permute_dims", tvar("a", (3, 16, 16)), axes=(1, 0, 2)),  # last axis kept
])
def test_transpose_schedule_only_where_it_applies(make):
    func = lower_call(make()).prim_func
    assert _row_buffers(func) == []


# ---------------------------------------------------------------------------
# im2col: a stride-1 tap over rows as wide as the image's is one flat copy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,attrs", [
    ((1, 3, 5, 7), dict(kernel_size=(3, 3), padding=(1, 1, 1, 1), pad_value=131.0)),
    ((2, 2, 7, 11), dict(kernel_size=(5, 5), padding=(2, 2, 2, 2), pad_value=3.0)),
    ((1, 2, 13, 17), dict(kernel_size=(3, 3), padding=(4, 2, 0, 0), dilation=(2, 1))),
    ((1, 1, 3, 2), dict(kernel_size=(5, 3), padding=(2, 1, 2, 1), pad_value=255.0)),
    ((1, 2, 5, 31), dict(kernel_size=(1, 9), padding=(0, 4, 0, 4), pad_value=7.0)),
    ((N, 3, 6, 5), dict(kernel_size=(3, 3), padding=(1, 1, 1, 1), pad_value=128.0)),
])
def test_stride_one_im2col_on_llvm_matches_the_reference(shape, attrs):
    func = lower_call(call_op("nn.im2col", tvar("img", shape, "uint8"), **attrs)).prim_func
    kernel = compile_kernels({"k": func})["k"]
    ref = get_op("relax.nn.im2col").reference
    for batch in ((1, 3) if shape[0] is N else (shape[0],)):
        x = np.random.default_rng(batch).integers(
            0, 256, (batch, *shape[1:])).astype("uint8")
        want = ref(x, **attrs)
        got = np.zeros(want.shape, "uint8")
        kernel(x, got)
        np.testing.assert_array_equal(got, want)
