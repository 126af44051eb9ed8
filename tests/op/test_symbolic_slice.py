"""strided_slice with symbolic begin / end entries (TVM 0.27 takes PrimExprs
there: ``R.strided_slice(x, (0,), (index,), (index + 1,))``).

References: TVM 0.27's own inference on the same module (its printed shape
forms, and their values), Python's ``slice.indices`` for the length, numpy
slicing for the values (the interpreter, and LegalizeOps' kernels on the VM).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import phasec
from phasec import verifier
from phasec.errors import ParseError
from phasec.interp import run
from phasec.ir import Phase
from phasec.ir.structural import structural_equal
from phasec.script.printer import print_module, print_prim_expr

# (input shape, "axes, begin, end[, strides]", assume_inbound); n and index are
# symbolic shape variables of the function
CASES = [
    ("(16, 16)", "[0], [index], [index + 1]", True),
    ("(16, 16)", "[0], [index], [index + 1]", False),
    ("(n, 16)", "[0], [index], [index + 1]", False),
    ("(n, 16)", "[0], [index], [index + 1]", True),
    ("(n, 16)", "[0], [0], [index]", False),
    ("(16, 16)", "[0, 1], [index, 2], [index + 3, 10]", False),
    ("(n, 16)", "[0], [index], [n]", False),
    ("(16, n)", "[1], [index], [index * 2], [3]", True),
    ("(n * 3, 4)", "[0, 1], [0, 0], [2 * n + 1, 4]", False),
    ("(n + index, 4)", "[0], [index], [n + index]", False),
    ("(n + index, 4)", "[0], [0], [n]", False),
    ("(16, 16)", "[0], [0], [16], [index + 1]", False),  # a symbolic stride
    # below: forms that differ from TVM's text (same values, or phasec's clamp at 0)
    ("(n, 16)", "[0], [n], [index], [index + 1]", False),
    ("(n, 16)", "[0], [1], [index], [2]", False),  # TVM orders the terms "+ 1 - T.min(1, n)"
    ("(16, 16)", "[0], [index], [2], [-1]", False),
    ("(16, 16)", "[0], [index - 20], [index + 3]", False),
    ("(16, 16)", "[0], [5], [index], [2]", False),
    ("(16, 16)", "[0], [0 - index], [16]", False),
    ("(n, 16)", "[0], [index - 3], [n], [2]", False),
    ("(n, 16)", "[0], [n], [index], [-2]", False),
]
#: cases whose inferred dimensions print exactly as TVM 0.27 prints them
SAME_TEXT = 12


def _source(shape: str, slicing: str, inbound: bool) -> str:
    # symbolic dimensions of a parameter are strings ("n * 3"), for TVM's parser
    dims = [d.strip() for d in shape.strip("()").split(",")]
    shape = "(" + ", ".join(d if d.isdigit() else f'"{d}"' for d in dims) + ")"
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor({shape}, "float32"), B: R.Shape(["index", "n"])):
        n = T.int64()
        index = T.int64()
        gv = R.strided_slice(A, {slicing}, assume_inbound={inbound})
        return gv
'''


def _tvm_text(d) -> str:
    return re.sub(r"T\.int64\((-?\d+)\)", r"\1", str(d))


def _value(text: str, env: dict[str, int]) -> int:
    """A printed dimension evaluated (T.min / T.max / selects; // floors in both)."""
    text = text.replace("T.if_then_else", "T.Select")
    scope = {"T": type("T", (), {"min": staticmethod(min), "max": staticmethod(max),
                                 "Select": staticmethod(lambda c, a, b: a if c else b)})}
    return int(eval(text, scope, dict(env)))  # our own test strings, never input


def _numpy_len(shape: str, slicing: str, env: dict[str, int]) -> list[int]:
    parts = [eval(p, {}, dict(env)) for p in re.findall(r"\[[^\]]*\]", slicing)]
    axes, begin, end = parts[:3]
    strides = parts[3] if len(parts) > 3 else [1] * len(axes)
    dims = list(eval(shape, {}, dict(env)))
    for a, b, e, s in zip(axes, begin, end, strides):
        dims[a] = len(range(*slice(b, e, s).indices(dims[a])))
    return dims


def _ours(src: str):
    mod = phasec.parse(src)
    b = mod["main"].body.blocks[0].bindings[0]
    return mod, b.var.struct_info


@pytest.mark.parametrize("case", range(len(CASES)))
def test_inference_matches_tvm(case):
    from tvm.script import from_source

    shape, slicing, inbound = CASES[case]
    tvm_mod = from_source(_source(shape, slicing, inbound))
    theirs = [_tvm_text(d) for d in tvm_mod["main"].body.blocks[0].bindings[0].var.ty.shape.values]
    _, sinfo = _ours(_source(shape, slicing, inbound))
    ours = [print_prim_expr(d, tir_context=False) for d in sinfo.shape]
    if case < SAME_TEXT:
        assert ours == theirs
    for n, index in itertools.product(range(0, 24, 3), range(0, 24)):
        env = {"n": n, "index": index}
        want = [_value(t, env) for t in theirs]
        got = [_value(t, env) for t in ours]
        if inbound:  # the values TVM's promise covers: the slice is in bounds
            assert got == want
            continue
        exact = _numpy_len(shape, slicing, env)
        assert got == exact, (env, ours)
        # where TVM's length is not negative it is numpy's too (else phasec takes 0)
        assert [max(w, 0) for w in want] == exact, (env, theirs)


def test_relax_suite_forms():
    """The forms TVM's own tests use: prim_value entries, keyword attributes,
    and the result annotations TVM prints for them."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(state: R.Tensor((16,), "float32"), A: R.Tensor((16, 16), "float32"),
             B: R.Tensor((16, 16), "float32")):
        N1 = T.int64()
        M = T.int64()
        N2 = T.int64()
        a = R.match_cast(A, R.Tensor([N1, M], dtype="float32"))
        b = R.match_cast(B, R.Tensor([N2, M], dtype="float32"))
        c: R.Tensor((N1 + N2, M), "float32") = R.concat((a, b), axis=0)
        d = R.sum(c, axis=[1])
        pa = R.strided_slice(d, (R.prim_value(0),), (R.prim_value(0),), (R.prim_value(N1),))
        pb = R.strided_slice(d, axes=[0], begin=[R.prim_value(N1)], end=[N1 + N2])
        pc: R.Tensor((T.min(N1, N1 + N2),), "float32") = R.strided_slice(d, [0], [0], [N1])
        return (pa, pb, pc)
'''
    mod = phasec.parse(src)
    assert not [d for d in verifier.check(mod, Phase.INGESTION) if d.severity == "error"]
    text = print_module(mod)
    assert 'pa: R.Tensor((T.min(N1, N1 + N2),), dtype="float32")' in text
    assert 'pb: R.Tensor((N2,), dtype="float32")' in text
    assert "begin=(N1,), end=(N1 + N2,)" in text


def test_print_round_trips_and_tvm_reads_it():
    from tvm.script import from_source

    shape, slicing, inbound = CASES[5]
    mod, _ = _ours(_source(shape, slicing, inbound))
    for syntax in ("tvm", "legacy"):
        assert structural_equal(phasec.parse(print_module(mod, syntax)), mod)
    tvm_mod = from_source(print_module(mod))
    binding = tvm_mod["main"].body.blocks[0].bindings[0]
    assert [_tvm_text(d) for d in binding.var.ty.shape.values] == \
        ["T.min(index + 3, 16) - T.min(index, 16)", "8"]


def test_json_round_trip():
    from phasec.script.json_format import from_json, to_json

    mod, _ = _ours(_source(*CASES[12]))
    back = from_json(to_json(mod))
    assert structural_equal(back, mod)
    assert "prim_expr" in to_json(mod)


SLICES = '''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor(("m", 16), "float32"), B: R.Shape(["index", "k"])):
        m = T.int64()
        index = T.int64()
        k = T.int64()
        with R.dataflow():
            a = R.strided_slice(A, [0], [index], [index + 2])
            b = R.strided_slice(A, [0, 1], [index - 3, 1], [k, 16], [2, 3])
            c = R.strided_slice(A, [0], [k], [index], [-1])
            d = R.exp(a)
            e = R.strided_slice(A, [1], [0 - index], [k + 1], assume_inbound=False)
            f = R.strided_slice(A, [0, 1], [k, 1], [m, 16], [index + 1, k + 2])
            gv = (d, b, c, e, f)
            R.output(gv)
        return gv
'''

#: (m, index, k): in range, at the ends, negative after the offset, out of range
VALUES = [(10, 3, 7), (10, 0, 10), (10, 9, 20), (10, 12, 2), (5, 2, 0), (10, 1, 8), (3, 30, 40)]


def _expected(A, index, k):
    return (np.exp(A[index:index + 2]), A[index - 3:k:2, 1:16:3], A[k:index:-1],
            A[:, -index:k + 1], A[k::index + 1, 1:16:k + 2])


def test_values_interpreter_and_vm_against_numpy():
    mod = phasec.parse(SLICES)
    vm = phasec.VirtualMachine(phasec.build(mod))  # LegalizeOps' kernels (FuseOps groups them)
    rng = np.random.default_rng(0)
    for m, index, k in VALUES:
        A = rng.random((m, 16), dtype=np.float32)
        want = _expected(A, index, k)
        for got in (run(mod, A, (index, k)), vm["main"](A, (index, k))):
            for w, g in zip(want, got):
                g = np.asarray(g)
                assert g.shape == w.shape, (m, index, k)
                np.testing.assert_allclose(g, w, rtol=1e-6)


def test_lambda_lifting_renames_symbolic_attributes():
    """The lifted function takes index as a parameter and its own copy of it
    (the build verifies after every pass: WF006 / WF007 would fail it)."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((16, 4), "float32"), B: R.Shape(["index"])):
        index = T.int64()

        @R.function
        def inner(x: R.Tensor((16, 4), "float32")) -> R.Tensor((2, 4), "float32"):
            y = R.strided_slice(x, [0], [index], [index + 2], assume_inbound=True)
            return y

        r = inner(A)
        return r
'''
    mod = phasec.parse(src)
    A = np.arange(64, dtype="float32").reshape(16, 4)
    vm = phasec.VirtualMachine(phasec.build(mod))
    np.testing.assert_array_equal(np.asarray(vm["main"](A, (5,))), A[5:7])


BAD = [
    ("[k]", "", "name 'k' is not defined"),
    ("[1.5]", "", "expected an integer or a symbolic integer expression, got 1.5"),
    ("[i]", "", "'i' is a Relax variable"),
    ("[index > 1]", "", "expected an integer expression, got index > 1 of dtype bool"),
    ("[T.float32(1)]", "", "of dtype float32"),
    ("[*x]", "", "*args are not supported"),
    ("[R.prim_value(index, 2)]", "", "R.prim_value takes one value"),
    ("[i + 1]", "", "'i' is a Relax variable whose value is not known"),
]


@pytest.mark.parametrize("begin,strides,message", BAD)
def test_bad_entries_are_parse_errors_with_a_location(begin, strides, message):
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((16, 16), "float32"), B: R.Shape(["index"]), i: R.Prim("int64")):
        index = T.int64()
        gv = R.strided_slice(A, [0], {begin}, [16]{strides})
        return gv
'''
    with pytest.raises(ParseError) as info:
        phasec.parse(src, "f.py")
    assert message in str(info.value)
    assert str(info.value).startswith("f.py:7:")


def test_symbolic_stride_and_undefined_variable_are_diagnostics():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((16, 16), "float32"), B: R.Shape(["index"])) -> R.Tensor(ndim=2):
        index = T.int64()
        k = T.int64()
        a = R.strided_slice(A, [0], [0], [16], [0 - index])
        b = R.strided_slice(A, [0], [k], [16])
        return b
'''
    diags = [d for d in verifier.check(phasec.parse(src, "f.py"), Phase.INGESTION)
             if d.severity == "error"]
    by_code = {d.code: str(d) for d in diags}
    assert "a symbolic stride must be a non-negative expression of shape variables (k, " \
        "2 * k), got 0 - index, whose sign is not known" in by_code["WF405"]
    assert "symbolic variable 'k' is used before it is defined" in by_code["WF006"]
    assert "f.py:9:" in by_code["WF006"]


def test_prim_variable_of_known_value_stands_for_it():
    """An R.Prim variable whose value is known (LambdaLifting passes captured
    symbolic variables so: n_value: R.Prim(value=n)) reads as that value."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((16, 4), "float32"), B: R.Shape(["n"]), i: R.Prim(value="n")):
        n = T.int64()
        y = R.strided_slice(A, [0], [i], [i + 2], assume_inbound=True)
        return y
'''
    mod = phasec.parse(src)
    expected = phasec.parse(src.replace("[i], [i + 2]", "[n], [n + 2]"))
    assert structural_equal(mod, expected) and _clean(mod)
    A = np.arange(64, dtype="float32").reshape(16, 4)
    np.testing.assert_array_equal(np.asarray(run(mod, A, (5,), np.int64(5))), A[5:7])


def _clean(mod) -> bool:
    return not [d for d in verifier.check(mod, Phase.INGESTION) if d.severity == "error"]
