"""The TVMScript parser's spellings and conveniences: dialect aliases, what TVM
prints, operator operands and attributes, semantic problems left to the
verifier, fresh names, bytes input; and long modules parsed iteratively."""

from __future__ import annotations

import phasec
from phasec.ir import DataflowVar, ObjectStructInfo, ShapeExpr, Var, tir

from helpers.parsed import bindings, sinfo_eq, tensor


# ---------------------------------------------------------------------------
# Spellings and conveniences
# ---------------------------------------------------------------------------

ALIASED = '''
from tvm.script import ir as IR
from tvm.script import relax as Rx
from tvm.script import tirx as Tx

@IR.ir_module
class Aliased:
    """A docstring."""
    IR.module_attrs({"phase": "ingestion"})

    @Tx.prim_func
    def copy(a: Tx.handle, b: Tx.handle):
        A = Tx.match_buffer(a, (4,), "float32")
        B = Tx.match_buffer(b, (4,), "float32")
        for i in Tx.serial(4):
            B[i] = A[i]

    @Rx.function
    def main(x: Rx.Tensor((4,), "float32")) -> Rx.Tensor((4,), "float32"):
        """Docstrings are skipped."""
        y = Rx.call_tir(cls.copy, (x,), out_ty=Rx.Tensor((4,), "float32"))
        z = Rx.call_pure_packed("f", y, ty_args=Rx.Tensor((4,), "float32"))
        return z
'''


def test_dialect_aliases_and_alternative_spellings():
    mod = phasec.parse(ALIASED)
    copy = mod["copy"]
    assert copy.attrs["global_symbol"] == "copy"  # not private
    assert copy.body.extent.dtype == "int32" and copy.params[0].shape[0].dtype == "int32"
    main = mod["main"]
    y, z = bindings(main)
    assert sinfo_eq(y.var.struct_info, tensor((4,), "float32"))
    assert z.value.sinfo_args and sinfo_eq(z.var.struct_info, tensor((4,), "float32"))


TVM_STYLE = '''
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

@tvm.script.ir_module
class Expected:
    @R.function
    def main(x: R.Tensor([4], "float32"), o: R.Any, t: R.Tensor("float32", ndim=1)) -> R.Tensor((4,), "float32"):
        cls = Expected
        gv = R.call_tir(cls.add, (x,), R.Tensor((4,), dtype="float32"))
        gv2 = R.call_tir(Expected.add, (gv,), R.Tensor((4,), dtype="float32"))
        return gv2

    @T.prim_func(private=True, s_tir=True)
    def add(a: T.Buffer((T.int64(4),), "float32"), out: T.Buffer((T.int64(4),), "float32")):
        T.func_attr({"tirx.noalias": T.bool(True)})
        for i in range(T.int64(4)):
            with T.sblock("out"):
                vi = T.axis.spatial(T.int64(4), i)
                out[vi] = a[vi] + T.float32(1)
'''


def test_tvm_printed_spellings():
    """What TVM's own printer writes: `cls = Module`, `Module.f`, positional
    out_sinfo, R.Any, T.sblock, s_tir=, T.bool(True) attributes."""
    mod = phasec.parse(TVM_STYLE)
    main = mod["main"]
    assert isinstance(main.params[1].struct_info, ObjectStructInfo)
    assert main.params[2].struct_info.ndim == 1
    gv, gv2 = bindings(main)
    assert gv.value.args[0].name_hint == "add" and gv2.value.args[0].name_hint == "add"
    assert sinfo_eq(gv2.var.struct_info, tensor((4,), "float32"))
    add = mod["add"]
    assert add.attrs["tirx.noalias"] is True and "global_symbol" not in add.attrs
    block = add.body.body
    assert isinstance(block, tir.Block) and block.name == "out"
    assert block.body.value.rhs.value == 1.0


OPS = '''
@I.ir_module
class Ops:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), g: R.Tensor((3,), dtype="float32")):
        n = T.int64()
        a = R.nn.softmax(x, 0)
        b = R.sum(x, axis=[1], keepdims=True)
        c = R.nn.layer_norm(data=x, gamma=g, beta=g, axes=[-1])
        d = R.reshape(x, (3, 2))
        e = R.add(x, g)
        return e
'''


def test_operator_operands_and_attributes():
    main = phasec.parse(OPS)["main"]
    a, b, c, d, e = bindings(main)
    assert a.value.attrs["axis"] == 0  # trailing positional attribute
    assert b.value.attrs["axis"] == (1,) and b.value.attrs["keepdims"] is True  # list -> tuple
    assert sinfo_eq(b.var.struct_info, tensor((2, 1), "float32"))
    assert c.value.op.name == "relax.nn.layer_norm" and c.value.attrs["axes"] == (-1,)
    assert c.value.attrs["epsilon"] == 1e-05  # default filled in
    assert [arg.name_hint for arg in c.value.args] == ["x", "g", "g"]
    assert isinstance(d.value.args[1], ShapeExpr)
    assert sinfo_eq(d.var.struct_info, tensor((3, 2), "float32"))
    assert sinfo_eq(e.var.struct_info, tensor((2, 3), "float32"))


SEMANTIC = '''
@I.ir_module
class Bad:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), y: R.Tensor((4,), dtype="int32")) -> R.Tensor((2, 3), dtype="float32"):
        a: R.Tensor((2, 3), dtype="float32") = R.add(x, y)
        b = R.matmul(x, x)
        c = cls.main(x)
        return a
'''


def test_semantic_problems_are_left_to_the_verifier():
    main = phasec.parse(SEMANTIC)["main"]
    a, b, c = bindings(main)
    assert a.value.struct_info is None  # inference failed
    assert sinfo_eq(a.var.struct_info, tensor((2, 3), "float32"))  # the annotation
    assert b.value.struct_info is None and b.var.struct_info is None
    assert c.value.struct_info is None  # wrong argument count for main


def test_fresh_names_avoid_the_files_names():
    text = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")):
        lv = R.add(x, x)
        lv1 = R.add(R.add(lv, x), R.multiply(lv, x))
        return lv1
'''
    names = [b.var.name_hint for b in bindings(phasec.parse(text)["main"])]
    assert names[0] == "lv" and names[-1] == "lv1"
    temps = names[1:-1]
    assert len(temps) == 2 and not set(temps) & {"lv", "lv1", "x"}


def test_bytes_input_and_filename_in_spans():
    mod = phasec.parse(ALIASED.encode("utf-8"), filename="aliased.py")
    assert mod["main"].span.file == "aliased.py"
    assert str(mod["main"].span).startswith("aliased.py:")


# ---------------------------------------------------------------------------
# Size
# ---------------------------------------------------------------------------

def _chain(n: int) -> str:
    lines = ["@I.ir_module", "class Big:", "    @R.function",
             '    def main(x: R.Tensor((4, 4), dtype="float32")) -> R.Tensor((4, 4), dtype="float32"):',
             "        with R.dataflow():"]
    prev = "x"
    for i in range(n):
        lines.append(f'            v{i}: R.Tensor((4, 4), dtype="float32") = R.add({prev}, x)')
        prev = f"v{i}"
    lines += [f"            R.output({prev})", f"        return {prev}", ""]
    return "\n".join(lines)


def test_many_bindings_parse_iteratively():
    n = 5_000  # beyond the recursion limit: the parser loops over bindings
    mod = phasec.parse(_chain(n))
    (block,) = mod["main"].body.blocks
    assert len(block.bindings) == n
    assert type(block.bindings[-1].var) is Var and type(block.bindings[0].var) is DataflowVar
