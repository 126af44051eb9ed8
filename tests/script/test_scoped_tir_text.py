"""Text round trip of TIR allocations and lets whose scope ends before their list does.

``Allocate(buf, body)`` / ``LetStmt(v, value, body)`` followed by statements
outside their scope print, in TVM 0.27's syntax (which has no scoped
allocation or let), as their concise spelling inside ``with
T.attr({"phasec.scope": T.bool(True)}):``; in the legacy syntax as ``with
T.decl_buffer(...) as buf:`` / ``with T.LetStmt(...) as v:`` (the non-concise
spellings of TVM before 0.27). At the end of a statement list they keep the
concise ``buf = T.alloc_buffer(...)`` / ``v: T.let[T.int64] = value``, whose
scope is the rest of the list. Kernels phasec generates never need a scope.
"""

import numpy as np
import pytest

import phasec
from phasec.errors import ParseError
from phasec.interp.tir import run_prim_func
from phasec.te import stmt as te_stmt
from phasec.ir import IRModule, structural_equal, tir
from phasec import te
from phasec.testing.properties import roundtrip_problem
from phasec.transform import PassContext, get_pass

from helpers.tir_kernels import A, B, i64, scoped_kernel


def test_scoped_allocation_and_let_print_as_with_blocks_in_the_legacy_syntax():
    text = IRModule({"kernel": scoped_kernel()}).script(syntax="legacy")
    assert 'with T.decl_buffer((T.int64(2),), "float32") as acc:' in text
    assert "with T.LetStmt(T.int64(1)) as v:" in text
    assert "with T.LetStmt(T.int32(0), T.int64) as w:" in text
    # the last statement of the list keeps the concise spelling
    assert 't = T.alloc_buffer((T.int64(1),), "float32")' in text


def test_scoped_allocation_and_let_print_in_a_scope_attribute_by_default():
    text = IRModule({"kernel": scoped_kernel()}).script()
    assert "T.decl_buffer" not in text and "T.LetStmt" not in text
    assert text.count('with T.attr({"phasec.scope": T.bool(True)}):') == 3
    assert 'acc = T.alloc_buffer((T.int64(2),), "float32")' in text
    assert "v: T.let[T.int64] = T.int64(1)" in text


@pytest.mark.parametrize("syntax", ["tvm", "legacy"])
def test_scoped_allocation_and_let_round_trip_exactly(syntax):
    mod = IRModule({"kernel": scoped_kernel()})
    text = mod.script(syntax=syntax)
    back = phasec.parse(text)
    assert structural_equal(back["kernel"], mod["kernel"])
    assert phasec.parse(back.script(syntax=syntax)).script(syntax=syntax) == text
    assert roundtrip_problem(mod) is None


def test_round_tripped_kernel_computes_the_same():
    f = scoped_kernel()
    g = phasec.parse(IRModule({"kernel": f}).script())["kernel"]
    for kernel in (f, g):
        a = np.array([1.0, 2.0], np.float32)
        b = np.zeros(2, np.float32)
        run_prim_func(kernel, [a, b])
        np.testing.assert_array_equal(b, [2.0, 4.0])


def test_allocation_ending_a_nested_sequence_keeps_its_scope():
    # SeqStmt[SeqStmt[x, Allocate(t, y)], z]: the text flattens the nested
    # sequence, but t's scope must not grow to cover z.
    t = tir.Buffer("t", (i64(1),), "float32")
    x = tir.BufferStore(B, tir.BufferLoad(A, (i64(0),)), (i64(0),))
    y = tir.BufferStore(t, tir.BufferLoad(A, (i64(1),)), (i64(0),))
    z = tir.BufferStore(B, tir.BufferLoad(A, (i64(1),)), (i64(1),))
    nested = tir.PrimFunc([A, B], tir.SeqStmt([tir.SeqStmt([x, tir.Allocate(t, y)]), z]))
    flat = tir.PrimFunc([A, B], tir.SeqStmt([x, tir.Allocate(t, y), z]))
    back = phasec.parse(IRModule({"kernel": nested}).script())["kernel"]
    assert structural_equal(back, flat)


_WITH_SOURCE = '''
@I.ir_module
class M:
    @T.prim_func
    def kernel(A: T.Buffer((2,), "float32"), B: T.Buffer((2,), "float32")):
        with T.decl_buffer((2,), "float32") as acc:
            for i in range(2):
                acc[i] = A[i]
            for i in range(2):
                B[i] = acc[i]
        with T.LetStmt(1) as v:
            B[v] = A[v]
        s = T.decl_buffer((1,), "float32")
        s[0] = A[0]
        B[0] = s[0]
'''


def test_parser_reads_the_scoped_and_the_concise_forms():
    body = phasec.parse(_WITH_SOURCE)["kernel"].body
    assert type(body) is tir.SeqStmt and len(body.stmts) == 3
    alloc, let, rest = body.stmts
    assert type(alloc) is tir.Allocate and alloc.buffer.name == "acc"
    assert type(alloc.body) is tir.SeqStmt and len(alloc.body.stmts) == 2
    assert type(let) is tir.LetStmt and let.var.dtype == "int32"
    assert type(rest) is tir.Allocate and type(rest.body) is tir.SeqStmt  # to the end of the list


@pytest.mark.parametrize("snippet, message", [
    ('with T.decl_buffer((2,), "float32"):\n            A[0] = 1.0',
     "needs `as name`"),
    ("with T.LetStmt(1, T.vector) as v:\n            A[0] = 1.0",
     "expected a scalar type"),
    ('with T.decl_buffer((2,), "float32") as acc:\n            acc[0] = 1.0\n        A[0] = acc[0]',
     "'acc' is not defined"),
    ("with T.LetStmt(1) as v:\n            A[v] = 1.0\n        A[v] = 2.0",
     "'v' is not defined"),
    ("with T.allocate([2], \"float32\") as p:\n            A[0] = 1.0",
     "unsupported statement 'with"),
])
def test_parser_errors_for_bad_scoped_statements(snippet, message):
    source = ("@I.ir_module\nclass M:\n    @T.prim_func\n"
              "    def kernel(A: T.Buffer((2,), \"float32\")):\n        " + snippet + "\n")
    with pytest.raises(ParseError, match=message):
        phasec.parse(source)


def test_te_sequences_extend_a_scope_to_the_end_of_the_list():
    t = tir.Buffer("t", (i64(1),), "float32")
    v = tir.Var("v", "int64")
    x = tir.Evaluate(tir.IntImm(0, "int32"))
    got = te_stmt.seq([tir.Allocate(t, tir.SeqStmt([x, tir.LetStmt(v, i64(1), x)])), x, x])
    want = tir.Allocate(t, tir.SeqStmt([x, tir.LetStmt(v, i64(1), tir.SeqStmt([x, x, x]))]))
    assert structural_equal(got, want)


def _scoped_not_last(stmt):
    """Paths of Allocate/LetStmt nodes followed by statements outside their scope."""
    found, stack = [], [stmt]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is tir.SeqStmt:
            found += [x for x in s.stmts[:-1] if type(x) in (tir.Allocate, tir.LetStmt)]
            stack.extend(s.stmts)
        elif t in (tir.Allocate, tir.LetStmt, tir.For):
            stack.append(s.body)
        elif t is tir.Block:
            stack.extend(x for x in (s.body, s.init) if x is not None)
        elif t is tir.IfThenElse:
            stack.extend(x for x in (s.then_case, s.else_case) if x is not None)
    return found


_OPS = [
    "R.nn.softmax(x, axis=-1)", "R.nn.log_softmax(x, axis=-1)", "R.sum(x, axis=[-1])",
    "R.mean(x, axis=[0])", "R.matmul(x, R.permute_dims(x))", "R.max(x, axis=[-1])",
    "R.nn.rms_norm(x, w, axes=[-1])", "R.nn.layer_norm(x, w, w, axes=[-1])",
]


@pytest.mark.parametrize("shape", [(4, 37), (3, 1000)])
def test_generated_kernels_keep_allocations_at_the_end_of_their_lists(shape):
    n, m = shape
    lines = ["@I.ir_module", "class M:", "    @R.function",
             f'    def main(x: R.Tensor(({n}, {m}), "float32"), w: R.Tensor(({m},), "float32")):',
             *[f"        y{i} = {op}" for i, op in enumerate(_OPS)],
             "        return (" + ", ".join(f"y{i}" for i in range(len(_OPS))) + ")"]
    mod = phasec.parse("\n".join(lines))
    with PassContext(verify="off"):
        lowered = get_pass("LegalizeOps")(get_pass("FuseOps")(get_pass("LambdaLifting")(mod)))
    kernels = dict(lowered.prim_funcs())
    assert kernels
    for name, f in kernels.items():
        assert _scoped_not_last(f.body) == [], name
    text = lowered.script()
    assert "T.decl_buffer" not in text and "T.LetStmt" not in text
    assert roundtrip_problem(lowered) is None
