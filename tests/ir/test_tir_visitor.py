"""The IR's traversal (children read off the node fields), the TIR visitor and
mutator, and the printer hook through which the IR prints itself."""

from __future__ import annotations

import subprocess
import sys

from phasec.ir import IRModule, StmtExprMutator, StmtExprVisitor, tir
from phasec.ir import node as node_mod
from phasec.ir.node import children
from phasec.ir.tir_visitor import walk


def _kernel():
    n = tir.Var("n")
    i = tir.Var("i")
    a = tir.Buffer("A", (n,), "float32")
    b = tir.Buffer("B", (n,), "float32")
    store = tir.BufferStore(b, tir.BinaryOp("*", a[i], tir.FloatImm(2.0)), (i,))
    loop = tir.For(i, 0, n, "serial", store)
    return tir.PrimFunc((a, b), tir.SeqStmt([loop, tir.Evaluate(tir.IntImm(0, "int32"))])), n, i


def test_children_follow_the_fields():
    x, y = tir.Var("x"), tir.Var("y")
    a = tir.Buffer("A", (x,))
    assert tir.expr_children(tir.BinaryOp("+", x, y)) == (x, y)
    assert tir.expr_children(tir.Select(tir.BinaryOp("<", x, y), x, y))[1:] == (x, y)
    assert tir.expr_children(a[y]) == (y,)  # the indices, not the buffer
    assert tir.expr_children(x) == () and tir.expr_children(tir.IntImm(1)) == ()
    body = tir.Evaluate(tir.IntImm(0))
    assert tir.stmt_children(tir.IfThenElse(x, body)) == (body,)
    assert tir.stmt_children(tir.IfThenElse(x, body, body)) == (body, body)
    loop = tir.For(x, 0, y, "serial", body)
    assert tir.stmt_children(loop) == (body,)
    assert tir.stmt_exprs(loop)[0] is x  # the loop variable, then its bounds
    # every node: the buffer of a load, a buffer's shape
    assert children(a[y]) == (a, y) and children(a) == (x,)
    # not a statement / not an expression: nothing
    assert tir.stmt_children(x) == () and tir.expr_children(body) == ()


def test_visitor_walks_in_field_order_and_can_prune():
    func, n, i = _kernel()
    kinds = [type(x).__name__ for x in walk(func.body.stmts[0])]
    assert kinds[:4] == ["For", "Var", "IntImm", "Var"]  # loop_var, min, extent

    class Loads(StmtExprVisitor):
        def __init__(self) -> None:
            self.loads = []

        def visit_buffer_load_(self, load):
            self.loads.append(load.buffer.name)

    v = Loads()
    v.visit(func)
    assert v.loads == ["A"]

    class NoLoops(Loads):
        def visit_for_(self, loop):
            return False

    v = NoLoops()
    v.visit(func)
    assert v.loads == []


def test_mutator_rebuilds_only_what_changed_and_shares_replacements():
    func, n, i = _kernel()
    m = tir.Var("m")

    class Rename(StmtExprMutator):
        def visit_var_(self, var):
            return m if var is n else var

    new = Rename().visit(func)
    assert new is not func and new.params[0].shape[0] is m
    load = new.body.stmts[0].body.value.lhs
    assert load.buffer is new.params[0]  # one replacement for every use of A
    assert new.body.stmts[1] is func.body.stmts[1]  # untouched statement kept
    assert StmtExprMutator().visit(func) is func


def test_long_sequences_and_deep_expressions_meet_no_recursion_limit():
    x = tir.Var("x")
    e = x
    for k in range(sys.getrecursionlimit() * 3):
        e = tir.BinaryOp("+", e, tir.IntImm(k))
    seq = tir.SeqStmt([tir.Evaluate(e)] + [tir.Evaluate(tir.IntImm(0))] * 50000)

    class Count(StmtExprVisitor):
        count = 0

        def visit_var_(self, var):
            self.count += 1

    c = Count()
    c.visit(seq)
    assert c.count == 1

    class Swap(StmtExprMutator):
        def visit_var_(self, var):
            return tir.Var("y")

    out = Swap().visit(seq)
    assert out.stmts[1] is seq.stmts[1] and out.stmts[0] is not seq.stmts[0]


def test_without_a_printer_the_ir_shows_a_short_form(monkeypatch):
    monkeypatch.setattr(node_mod, "_printer", None)
    assert repr(tir.IntImm(3)).startswith("<IntImm at 0x")
    func, _, _ = _kernel()
    assert IRModule({"main": func}).script() == "<IRModule: main>"


def test_the_ir_never_imports_the_printer_yet_prints_itself():
    code = ("import sys\n"
            "from phasec.ir import IRModule, tir\n"
            "assert not [m for m in sys.modules if m.startswith('phasec.script')]\n"
            "text = str(IRModule({}))\n"
            "assert text.startswith('# from tvm.script import ir as I'), text\n"
            "assert 'phasec.script.printer' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
