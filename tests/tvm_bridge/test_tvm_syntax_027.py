"""The rest of TVM 0.27's TVMScript that TVM's relax test suite uses (issue 12).

TVM 0.27 is the reference: every snippet is read by TVM, and phasec must read
both the snippet and TVM's own reprint of it to the module TVM reads
(phasec's module, handed back to TVM, is structurally equal to TVM's parse).
Each also round-trips through phasec in both spellings (``syntax="tvm"``,
the default, and ``syntax="legacy"``) and through the JSON format.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
import tvm

import phasec
from phasec.errors import ParseError
from phasec.ir import TensorStructInfo, assert_structural_equal
from phasec.script.json_format import from_json, json_schema, to_json
from phasec.tvm import to_tvm

HEADER = """
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T
"""

SNIPPETS = {
    "vdevices_in_global_infos_and_tensor_struct_info": """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [
        I.vdevice("llvm", 0, "global"),
        I.vdevice({"keys": ["cuda", "gpu"], "kind": "cuda", "arch": "sm_80"}, 0, "global"),
        I.vdevice("llvm", 1, "texture"),
    ]})

    @R.function
    def main(x: R.Tensor((2, 3), "float32", "llvm"),
             y: R.Tensor((2, 3), "float32", vdevice="cuda:0"),
             w: R.Tensor((2, 3), "float32", "llvm:1")) -> R.Tensor((2, 3), "float32", "llvm:0"):
        z: R.Tensor((2, 3), "float32", "llvm:0:global") = R.add(x, x)
        return z
""",
    "meta_var_values_substituted_where_used": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32", ndim=4)) -> R.Tensor("float32", ndim=4):
        N, C, H, W = T.int64(), I.meta_var(T.int64(16)), T.int64(), T.int64()
        axis = I.meta_var(1)
        lv0 = R.match_cast(x, R.Tensor((N, C, H, W), "float32"))
        lv1 = R.nn.softmax(lv0, axis=axis)
        return lv1

    @T.prim_func(private=True)
    def add_k(A: T.Buffer((T.int64(4),), "int32")):
        K = T.meta_var(3)
        for i in range(T.int64(4)):
            A[i] = A[i] + K
""",
    "gpu_thread_bindings_and_scoped_buffers": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def gpu_copy(A: T.Buffer((T.int64(64),), "float32"), B: T.Buffer((T.int64(64),), "float32")):
        for bx in T.thread_binding(T.int64(2), thread="blockIdx.x"):
            for tx in T.thread_binding(T.int64(32), thread="threadIdx.x"):
                B[bx * T.int64(32) + tx] = A[bx * T.int64(32) + tx]

    @T.prim_func(private=True)
    def staged(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        S = T.alloc_buffer((T.int64(4),), scope="shared")
        L = T.alloc_local((T.int64(1),), "float32")
        for i in range(T.int64(4)):
            S[i] = T.exp(A[i], dtype="float32")
        for i in range(T.int64(4)):
            row: T.let[T.float32] = S[i]
            L[0] = T.max(row, T.float32(0))
            B[i] = L[0]
""",
    "assumptions": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def unpad(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(6),), "float32")):
        for i in range(T.int64(8)):
            T.assume(i < T.int64(6) or A[i] == T.float32(0))
        for i in range(T.int64(6)):
            B[i] = A[i] * T.float32(2)
""",
    "symbolic_comparisons_arithmetic_and_bools_as_relax_values": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        if n == 16:
            y = R.call_pure_packed("test.scale", x, n + 1, True, ty_args=R.Tensor((n,), "float32"))
        else:
            y = R.call_pure_packed("test.scale", x, n * 2, False, ty_args=R.Tensor((n,), "float32"))
        return y
""",
    "calls_through_the_relax_module_var_ty_and_folded_constants": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        a = relax.call_tir(cls.scale, (x,), out_ty=x.ty)
        b = relax.op.add(a, R.const(15.0 / 14.0, "float32"))
        c = R.call_pure_packed("test.f", b, ty_args=[b.ty])
        d = R.maximum(c, R.const(float("-inf"), "float32"))
        return d

    @T.prim_func(private=True)
    def scale(A: T.buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            B[i] = A[i] * T.float32(2)
""",
    "format_strings_on_print_and_assert": """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32"), c: R.Prim("bool")) -> R.Tensor((4,), "float32"):
        R.assert_op(c, format=R.str("bad {}"))
        R.assert_op(c, x, format="x = {}")
        R.print(x, format=R.str("x: {}"))
        return x
""",
    "prim_funcs_that_return_a_value": """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor(["N"], "float32")) -> R.Tensor(["N"], "float32"):
        N = T.int64()
        condition: R.Prim("bool") = Module.is_multiple(R.prim_value(N))
        _ = R.assert_op(condition)
        return A

    @T.prim_func(private=True)
    def is_multiple(N: T.int64) -> T.bool:
        T.func_attr({"tirx.is_host_func": True})
        return N % 16 == 0
""",
    "one_name_for_a_grids_loop_variables": """
@I.ir_module
class Module:
    @T.prim_func(private=True, s_tir=True)
    def product(A: T.Buffer((16, 8), "int32"), B: T.Buffer((16, 8), "int32"),
                C: T.Buffer((16, 8), "int32")):
        for iters in T.grid(*A.shape):
            with T.sblock("compute"):
                i, j = T.axis.remap("SS", iters)
                T.reads(A[i, j], B[i, j])
                T.writes(C[i, j])
                C[i, j] = A[i, j] * B[i, j]
""",
    "type_var_declarations_inside_a_function": """
@I.ir_module
class Module:
    @R.function
    def main(x1: R.Tensor((10, 5), "float32"), y1: R.Tensor((10, 5), "float32")) -> R.Tensor((10, 5), "float32"):
        m = TypeVar("m")
        n = TypeVar("n")

        @R.function
        def inner(x2: R.Tensor((n, m), "float32"), y2: R.Tensor((n, m), "float32")) -> R.Tensor((n, m), "float32"):
            s: R.Tensor((n, m), "float32") = R.add(x2, y2)
            return s

        out: R.Tensor((10, 5), "float32") = inner(x1, y1)
        return out
""",
    "if_branches_ending_in_a_dataflow_block_or_a_call_statement": """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32"), flag: R.Prim("bool")):
        if flag:
            with R.dataflow():
                w_t = R.permute_dims(w)
                out = R.matmul(x, w_t)
                R.output(out)
        else:
            with R.dataflow():
                out = R.matmul(x, w)
                R.output(out)
        if flag:
            R.print(out, format="then: {}")
        else:
            R.print(out, format="else: {}")
        return out
""",
    "a_buffers_shape_as_dimensions": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def copy(X: T.Buffer((T.int64(16), T.int64(32)), "float32"),
             Z: T.Buffer((T.int64(16), T.int64(32)), "float32")):
        Y = T.alloc_buffer(X.shape, "float32")
        for i in T.serial(T.int64(0), X.shape[0]):
            for j in range(X.shape[-1]):
                Y[i, j] = X[i, j]
                Z[i, j] = Y[i, j]
""",
    "attribute_statements": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def double(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
        with T.attr(0, "pragma_scope", "seq"):
            for i in T.parallel(T.int64(4)):
                B[i] = A[i] * T.float32(2)
        T.attr({"pragma_unroll": 1})
        for i in range(T.int64(4), T.int64(8)):
            B[i] = A[i] * T.float32(2)
""",
    "bare_symbolic_operands": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(dtype="int64", ndim=1):
        n = T.int64()
        y = R.arange(1, n, 2, dtype="int64")
        return y
""",
    "attention_with_a_bias_operand": """
@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((4, 16, 32, 8), "float32"), k: R.Tensor((4, 8, 32, 8), "float32"),
             v: R.Tensor((4, 8, 32, 16), "float32"), bias: R.Tensor((4, 32, 16, 8), "float32")):
        a = R.nn.attention(q, k, v, bias, scale=0.1, causal_mask="TopLeft")
        b = R.nn.attention(q, k, v, bias=bias)
        c = R.nn.attention(q, k, v, None, 0.5)
        return (a, b, c)
""",
    "node_constructors_as_scalars_and_meta_var_attributes": """
@I.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((4, 16, 32, 8), "float32"), k: R.Tensor((4, 8, 32, 8), "float32"),
             v: R.Tensor((4, 8, 32, 16), "float32"), bias: R.Tensor((4, 32, 16, 8), "float32")):
        scale = I.meta_var(T.FloatImm("float32", 0.1))
        gv = R.nn.attention(q, k, v, bias, scale=scale, causal_mask="TopLeft")
        return gv

    @T.prim_func(private=True)
    def fill(A: T.Buffer((T.int64(2),), "float32"), B: T.Buffer((T.int64(2),), "int32")):
        A[0] = T.FloatImm("float32", 0.25)
        B[1] = T.IntImm("int32", 7)
""",
}


def _tvm_parse(text: str):
    """TVM's parse, with ``relax`` (TVM's Python module) in scope as in TVM's tests."""
    from typing import TypeVar

    return tvm.script.from_source(text, extra_vars={
        "relax": tvm.relax, "I": tvm.script.ir, "R": tvm.script.relax, "T": tvm.script.tirx,
        "TypeVar": TypeVar})


def _text(name: str) -> str:
    return HEADER + SNIPPETS[name]


def _same_as_tvm(mod: phasec.IRModule, reference) -> None:
    again = to_tvm(mod).without_attr("phase")
    tvm.ir.assert_structural_equal(again, reference, map_free_vars=True)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_phasec_reads_the_snippet_and_tvms_reprint_as_tvm_does(name: str) -> None:
    reference = _tvm_parse(_text(name))  # TVM 0.27 accepts the snippet
    _same_as_tvm(phasec.parse(_text(name)), reference)
    _same_as_tvm(phasec.parse(reference.script()), reference)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
@pytest.mark.parametrize("syntax", ["tvm", "legacy"])
def test_both_spellings_and_json_round_trip(name: str, syntax: str) -> None:
    mod = phasec.parse(_text(name))
    text = mod.script(syntax=syntax)
    again = phasec.parse(text)
    assert_structural_equal(again, mod)
    assert again.script(syntax=syntax) == text
    doc = to_json(mod)
    jsonschema.Draft202012Validator(json_schema()).validate(json.loads(doc))
    assert_structural_equal(from_json(doc), mod)


def test_vdevice_is_kept_and_compared_as_tvm_prints_it() -> None:
    mod = phasec.parse(_text("vdevices_in_global_infos_and_tensor_struct_info"))
    kinds = [d.kind for d in mod.vdevices]
    assert kinds == ["llvm", "cuda", "llvm"]
    params = mod["main"].params
    # TVM prints "<kind>:<index among that kind>:<memory scope of the device>"
    assert [p.struct_info.vdevice for p in params] == [
        "llvm:0:global", "cuda:0:global", "llvm:1:texture"]
    reference = tvm.script.from_source(_text("vdevices_in_global_infos_and_tensor_struct_info"))
    assert 'vdevice="llvm:1:texture"' in reference.script()
    assert 'vdevice="llvm:1:texture"' in mod.script()
    # The device takes part in structural equality and hashing.
    other = TensorStructInfo((2, 3), "float32", vdevice="llvm:1:texture")
    plain = TensorStructInfo((2, 3), "float32")
    assert not phasec.ir.structural_equal(other, plain)
    assert phasec.ir.structural_hash(other) != phasec.ir.structural_hash(plain)
    assert phasec.ir.structural_equal(
        other, TensorStructInfo((2, 3), "float32", vdevice="llvm:1:texture"))


@pytest.mark.parametrize("annotation, message", [
    ('R.Tensor((2,), "float32", "cuda:0")', "no virtual devices"),
])
def test_vdevice_without_global_infos_is_a_clear_error(annotation: str, message: str) -> None:
    text = HEADER + f"""
@I.ir_module
class Module:
    @R.function
    def main(x: {annotation}) -> R.Tensor((2,), "float32"):
        return x
"""
    with pytest.raises(ParseError, match=message):
        phasec.parse(text)


def test_vdevice_of_a_missing_kind_is_a_clear_error() -> None:
    text = HEADER + """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm")]})

    @R.function
    def main(x: R.Tensor((2,), "float32", "cuda:0")) -> R.Tensor((2,), "float32"):
        return x
"""
    with pytest.raises(ParseError, match=r"0 virtual device\(s\) of kind 'cuda'"):
        phasec.parse(text)


def test_device_meshes_are_refused_as_unsupported_dist() -> None:
    text = HEADER + """
@I.ir_module
class Module:
    I.module_global_infos({"mesh": [R.device_mesh((2,), I.Range(0, 2))]})

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
"""
    tvm.script.from_source(text)  # TVM reads it (relax.dist)
    with pytest.raises(ParseError, match=r"relax\.dist.*not supported"):
        phasec.parse(text)


def test_meta_var_names_read_as_their_values() -> None:
    mod = phasec.parse(_text("meta_var_values_substituted_where_used"))
    cast = mod["main"].body.blocks[0].bindings[0]
    n, c, h, w = cast.struct_info.shape
    assert int(c.value) == 16 and c.dtype == "int64"
    assert mod["main"].body.blocks[0].bindings[1].value.attrs["axis"] == 1
    store = mod["add_k"].body.body
    assert store.value.rhs.value == 3 and store.value.rhs.dtype == "int32"


@pytest.mark.parametrize("body", [
    # TVM's source spelling (the class derives from BasePyModule) ...
    """
@I.ir_module
class Module(BasePyModule):
    @I.pyfunc
    def add(self, x, y):
        return x + y
""",
    # ... and how TVM 0.27 prints such a module.
    """
@I.ir_module
class Module:
    I.module_attrs({"base_py_module": True})
    add = R.ExternFunc("add")

    @R.function
    def main(x: R.Tensor((5,), "float32")) -> R.Tensor((5,), "float32"):
        return x
""",
])
def test_base_py_modules_are_one_clear_error(body: str) -> None:
    with pytest.raises(ParseError, match="BasePyModule"):
        phasec.parse(HEADER + body)


def test_thread_bindings_are_kept_and_refused_by_the_cpu_backends() -> None:
    import numpy as np

    from phasec.backend.llvm import compile_prim_funcs
    from phasec.errors import PhasecError
    from phasec.interp.tir import run_prim_func

    mod = phasec.parse(_text("gpu_thread_bindings_and_scoped_buffers"))
    outer = mod["gpu_copy"].body
    assert (outer.kind, outer.thread, outer.body.thread) == (
        "thread_binding", "blockIdx.x", "threadIdx.x")
    assert 'T.thread_binding(T.int64(2), thread="blockIdx.x")' in mod.script()
    with pytest.raises(PhasecError, match="GPU thread axis 'blockIdx.x'"):
        compile_prim_funcs({"gpu_copy": mod["gpu_copy"]})
    a = np.arange(64, dtype="float32")
    with pytest.raises(PhasecError, match="GPU thread axis 'blockIdx.x'"):
        run_prim_func(mod["gpu_copy"], [a, np.zeros_like(a)])


def test_scoped_buffer_let_and_dtype_keywords_compute_as_numpy() -> None:
    import numpy as np

    from phasec.backend.llvm import compile_prim_funcs

    mod = phasec.parse(_text("gpu_thread_bindings_and_scoped_buffers"))
    assert mod["staged"].body.buffer.scope == "shared"
    assert mod["staged"].body.body.buffer.scope == "local"
    assert 'scope="shared"' in mod.script()
    a = np.array([-1.0, 0.5, 2.0, -3.0], dtype="float32")
    out = np.zeros(4, dtype="float32")
    compile_prim_funcs({"staged": mod["staged"]})["staged"](a, out)
    np.testing.assert_allclose(out, np.maximum(np.exp(a), 0), rtol=1e-6)


def test_if_then_else_keywords_read_as_tvm_reads_them() -> None:
    def text(call: str) -> str:
        return HEADER + f"""
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def relu(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            B[i] = {call}
"""
    plain = text("T.if_then_else(A[i] > T.float32(0), A[i], T.float32(0))")
    spelled = [text('T.if_then_else(A[i] > T.float32(0), A[i], T.float32(0), dtype="float32")'),
               text("T.if_then_else(cond=A[i] > T.float32(0), t=A[i], f=T.float32(0))")]
    for other in spelled:
        # TVM reads the keyword spellings as the positional call ...
        tvm.ir.assert_structural_equal(tvm.script.from_source(other),
                                       tvm.script.from_source(plain))
        # ... and so does phasec.
        assert_structural_equal(phasec.parse(other), phasec.parse(plain))


def test_assumptions_are_stated_not_evaluated() -> None:
    import numpy as np

    from phasec.backend.llvm import compile_prim_funcs
    from phasec.interp.tir import run_prim_func

    mod = phasec.parse(_text("assumptions"))
    assert "        T.assume(i < T.int64(6) or A[i] == T.float32(0.0))" in mod.script()
    a = np.arange(8, dtype="float32")  # the assumption does not hold: nothing checks it
    for run in (lambda f, args: run_prim_func(f, args),
                lambda f, args: compile_prim_funcs({"unpad": f})["unpad"](*args)):
        out = np.zeros(6, dtype="float32")
        run(mod["unpad"], [a, out])
        np.testing.assert_array_equal(out, a[:6] * 2)


EXTERN_CALLS = HEADER + """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor((4096,), "float32")) -> R.Tensor((64, 64), "float32"):
        B: R.Tensor((64, 64), "float32") = R.ExternFunc(
            "runtime.TVMTensorCreateView",
            R.Callable(derive_func="tvm.relax.type.infer_view_ty", purity=False),
        )(A, R.shape([64, 64]), R.dtype("float32"), R.prim_value(0))
        C: R.Tensor((64, 64), "float32") = R.ExternFunc("test.g")(B)
        return C
"""


def test_calls_of_extern_funcs_read_as_tvm_reads_them() -> None:
    # TVM prints such a call as R.call_packed (the derive_func name is not
    # printed): phasec reads that text to TVM's module.
    source = tvm.script.from_source(EXTERN_CALLS)
    reprinted = tvm.script.from_source(source.script())
    _same_as_tvm(phasec.parse(source.script()), reprinted)
    # The source spelling: the same callees, operands and results as TVM's
    # parse (phasec keeps the callee's own R.Callable, without derive_func,
    # a TVM-registered function it cannot run), and it round-trips.
    mod = phasec.parse(EXTERN_CALLS)
    ours = mod["main"].body.blocks[0].bindings
    theirs = source["main"].body.blocks[0].bindings
    assert [(b.value.op.global_symbol, len(b.value.args)) for b in ours] == [
        (b.value.op.global_symbol, len(b.value.args)) for b in theirs]
    assert all([int(d.value) for d in b.var.struct_info.shape] == [64, 64] for b in ours)
    for syntax in ("tvm", "legacy"):
        assert_structural_equal(phasec.parse(mod.script(syntax=syntax)), mod)


def test_tvms_printed_infinity_constant_and_buffer_alignment_read() -> None:
    reference = _tvm_parse(_text("calls_through_the_relax_module_var_ty_and_folded_constants"))
    assert 'R.const("-inf", "float32")' in reference.script()  # how TVM prints it
    mod = phasec.parse(reference.script())
    const = mod["main"].body.blocks[0].bindings[-1].value.args[1]
    assert const.data.dtype == "float32" and const.data == float("-inf")
    # offset_factor / align are alignment facts TVM's buffers may carry; phasec's
    # buffers have no element offset, so they read as the plain buffer.
    aligned = HEADER + """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def f(a: T.handle, B: T.Buffer((T.int64(4),), "float32", offset_factor=16, align=64)):
        A = T.match_buffer(a, (T.int64(4),), "float32", offset_factor=1)
        for i in range(T.int64(4)):
            B[i] = A[i]
"""
    reprint = _tvm_parse(aligned).script()
    assert "elem_offset=" in reprint  # TVM gives such buffers a free element offset
    for text in (aligned, reprint):
        f = phasec.parse(text)["f"]
        assert [[int(d.value) for d in p.shape] for p in f.params] == [[4], [4]]


def test_prim_funcs_that_return_a_value_are_read_and_not_run() -> None:
    from phasec.backend.llvm import compile_prim_funcs
    from phasec.errors import PhasecError
    from phasec.interp.tir import run_prim_func
    from phasec.ir import PrimStructInfo

    mod = phasec.parse(_text("prim_funcs_that_return_a_value"))
    f = mod["is_multiple"]
    assert f.ret_dtype == "bool"
    assert "def is_multiple(N: T.int64) -> T.bool:" in mod.script()
    # called from Relax, it gives the scalar it returns (as TVM infers)
    call = mod["main"].body.blocks[0].bindings[0].value
    assert isinstance(phasec.op.infer.infer_struct_info(
        call, phasec.op.infer.context_from_module(mod)), PrimStructInfo)
    with pytest.raises(PhasecError, match="returns a value"):
        compile_prim_funcs({"is_multiple": f})
    with pytest.raises(PhasecError, match="returns a value"):
        run_prim_func(f, [32])


SHAPE_VARIABLE_AS_TENSOR_SHAPE = HEADER + """
@I.ir_module
class Module:
    @R.function
    def main(shape: R.Tensor((2,), "int64"), known: R.Shape([2, 3]), any_shape: R.Shape):
        R.func_attr({"relax.force_pure": True})
        lv1: R.Shape(ndim=2) = R.tensor_to_shape(shape)
        a: R.Tensor(lv1, dtype="float32") = R.zeros(lv1, dtype="float32")
        b = R.call_packed("test.f", a, ty_args=R.Tensor(known, dtype="float32"))
        c = R.call_packed("test.f", a, ty_args=R.Tensor(any_shape, dtype="float32"))
        return (a, b, c)
"""


def test_a_shape_variable_as_a_tensor_shape_reads_as_its_known_shape() -> None:
    reference = _tvm_parse(SHAPE_VARIABLE_AS_TENSOR_SHAPE)
    mod = phasec.parse(SHAPE_VARIABLE_AS_TENSOR_SHAPE)
    tvm_vars = [b.var.ty for b in reference["main"].body.blocks[0].bindings[1:]]
    ours = [b.var.struct_info for b in mod["main"].body.blocks[0].bindings[1:]]
    for theirs, mine in zip(tvm_vars, ours):
        # TVM keeps the shape variable itself; phasec what its struct info knows
        assert (mine.ndim, mine.dtype) == (theirs.ndim, "float32")
    assert [int(d.value) for d in ours[1].shape] == [2, 3]
    assert ours[0].shape is None and ours[2].shape is None
    for syntax in ("tvm", "legacy"):
        assert_structural_equal(phasec.parse(mod.script(syntax=syntax)), mod)


def test_attribute_statements_are_kept_and_transparent_when_run() -> None:
    import numpy as np

    from phasec.backend.llvm import compile_prim_funcs
    from phasec.interp.tir import run_prim_func

    mod = phasec.parse(_text("attribute_statements"))
    assert 'T.attr({"pragma_unroll": 1})' in mod.script()
    assert 'with T.attr(0, "pragma_scope", "seq"):' in mod.script(syntax="legacy")
    a = np.arange(8, dtype="float32")
    for run in (lambda f, args: run_prim_func(f, args),
                lambda f, args: compile_prim_funcs({"double": f})["double"](*args)):
        out = np.zeros(8, dtype="float32")
        run(mod["double"], [a, out])
        np.testing.assert_array_equal(out, a * 2)


def test_json_refuses_a_vdevice_the_module_does_not_declare() -> None:
    from phasec.errors import SchemaError

    doc = json.loads(to_json(phasec.parse(_text("vdevices_in_global_infos_and_tensor_struct_info"))))
    doc["global_infos"]["vdevice"] = doc["global_infos"]["vdevice"][:1]  # only llvm:0 left
    with pytest.raises(SchemaError, match="'cuda:0:global' is not one of the module's virtual"):
        from_json(json.dumps(doc))


ON_A_VDEVICE = HEADER + """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(x: R.Tensor((2, 3), "float32", "llvm"),
             y: R.Tensor((2, 3), "float32", "llvm")) -> R.Tensor((2, 3), "float32", "llvm"):
        with R.dataflow():
            z = R.add(x, y)
            w = R.multiply(z, x)
            R.output(w)
        return w
"""


def test_a_module_on_a_vdevice_goes_through_the_pipeline_tvm_reading_every_stage() -> None:
    import numpy as np
    from tvm import relax

    from phasec import transform
    from phasec.backend.vm import VirtualMachine
    from phasec.pipeline import build

    class Stages(transform.PassInstrument):
        def __init__(self) -> None:
            self.texts: list[tuple[str, str]] = []

        def run_after_pass(self, mod, info) -> None:
            self.texts.append((info.name, mod.script()))

    mod = phasec.parse(ON_A_VDEVICE)
    stages = Stages()
    exe = build(mod, instruments=[stages])
    assert len(stages.texts) > 10
    for name, text in stages.texts:
        assert 'I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})' in text, name
        assert relax.analysis.check_well_formed(tvm.script.from_source(text)), name
    x = np.arange(6, dtype="float32").reshape(2, 3)
    y = np.ones((2, 3), dtype="float32")
    np.testing.assert_allclose(VirtualMachine(exe)["main"](x, y), (x + y) * x)


@pytest.mark.parametrize("statement", [
    # (T.call_packed, T.tvm_struct_get... are read: test_tvm_lowered_ops)
    'T.evaluate(T.tvm_stack_alloca("shape", 1))',
    "T.tvm_struct_set(A.data, 0, 5, 1)",
])
def test_tvms_host_side_tir_builtins_are_one_clear_error(statement: str) -> None:
    text = HEADER + f"""
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def host(A: T.Buffer((T.int64(4),), "float32")):
        {statement}
"""
    _tvm_parse(text)  # TVM reads it
    with pytest.raises(ParseError, match="host-side TIR builtins"):
        phasec.parse(text)
