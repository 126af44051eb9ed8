"""TVMScript forms from TVM's own relax test suite that phasec reads.

Each snippet is accepted by TVM 0.27 (checked here), and phasec must read
it to the module TVM reads: phasec's module, handed back to TVM, is
structurally equal to TVM's parse of the same text (TVM's equality is the
reference)."""

from __future__ import annotations

import pytest
import tvm

import phasec
from phasec.ir import tir
from phasec.tvm import to_tvm

HEADER = """
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T
"""

SNIPPETS = {
    "python_operators_on_relax_values": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = x * y + x
        w = -z
        return w
""",
    "list_as_tuple_and_prim_annotation": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: T.bool) -> R.Tensor((8,), "float32"):
        c = R.concat([x, x], axis=0)
        return c
""",
    "symbolic_variable_as_value": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Prim("int64"):
        n = T.int64()
        return n
""",
    "grid_over_a_buffer_shape_and_tuple_declarations": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def copy(a: T.handle, b: T.handle):
        m, n = T.int64(), T.int64()
        A = T.match_buffer(a, (m, n))
        B = T.match_buffer(b, (m, n))
        for i, j in T.grid(*A.shape):
            B[i, j] = A[i, j]
""",
    "extremes_and_infinities": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def fill(A: T.Buffer((T.int64(3),), "float32"), B: T.Buffer((T.int64(1),), "int32")):
        A[0] = T.min_value("float32")
        A[1] = T.float32("inf")
        A[2] = T.float32("-inf")
        B[0] = T.max_value("int32")
""",
    "integer_division_spelt_for_tvm": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def divide(A: T.Buffer((T.int64(4),), "int32"), B: T.Buffer((T.int64(4),), "int32")):
        for i in range(T.int64(4)):
            B[i] = T.truncdiv(A[i], 3) + T.floordiv(A[i], 3) + T.Div(A[i], 2)
""",
    "opaque_handle_parameter": """
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def noop(A: T.handle, n: T.int64):
        T.evaluate(0)
""",
    "relax_tuple_declarations_and_scalar_operands": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", "n"), "float32")) -> R.Tensor(("m", "n"), "float32"):
        m, n = T.int64(), T.int64()
        y = R.call_pure_packed("test.scale", x, T.float32(2.0), ty_args=(R.Tensor((m, n), "float32"),))
        return y
""",
    "take_mode_and_strided_slice_assume_inbound": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3), "float32"), i: R.Tensor((2,), "int64")) -> R.Tensor((2, 3), "float32"):
        a = R.take(x, i, axis=0, mode="clip")
        b = R.strided_slice(a, axes=[1], begin=[0], end=[3], assume_inbound=True)
        return b
""",
    "r_tuple_function_spelling": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tuple, R.Tensor((2, 3), "float32")):
        b = R.tuple(x, R.tuple())
        gv = R.tuple(R.tuple(), b[0])
        return gv
""",
    "conv2d_nhwc_hwio_and_layout_transform": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 8, 3), "float32"), w: R.Tensor((3, 3, 3, 8), "float32")):
        y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO")
        z = R.layout_transform(y, index_map=lambda n, h, w, c: (n, c // 4, h, w, c % 4))
        p = R.layout_transform(x, index_map=T.index_map(lambda n, h, w, c: (n, h // 3, w, c, h % 3)),
                               pad_value=0.5)
        return (y, z, p)
""",
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_phasec_reads_what_tvm_reads(name: str) -> None:
    text = HEADER + SNIPPETS[name]
    reference = tvm.script.from_source(text)  # TVM 0.27 accepts the snippet
    mod = phasec.parse(text)
    again = to_tvm(mod).without_attr("phase")
    tvm.ir.assert_structural_equal(again, reference, map_free_vars=True)


def test_extremes_are_tvms_finite_values() -> None:
    mod = phasec.parse(HEADER + SNIPPETS["extremes_and_infinities"])
    stores = mod["fill"].body.stmts
    values = [s.value.value for s in stores]
    assert values[0] == float(-3.4028234663852886e38)  # numpy.finfo("float32").min
    assert values[1] == float("inf") and values[2] == float("-inf")
    assert values[3] == 2**31 - 1


def test_opaque_handle_reads_but_does_not_compile() -> None:
    mod = phasec.parse(HEADER + SNIPPETS["opaque_handle_parameter"])
    assert mod["noop"].params[0].dtype == "handle"
    assert isinstance(mod["noop"].params[0], tir.Var)
    from phasec.backend.llvm import compile_prim_funcs
    from phasec.errors import PhasecError

    with pytest.raises(PhasecError, match="opaque handle"):
        compile_prim_funcs({"noop": mod["noop"]})


ROUND_AND_INVERT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6,), "float32"), i: R.Tensor((6,), "int32")):
        r = R.round(x)
        n = R.bitwise_not(i)
        m = R.mod(i, R.const([3, -3, 5, -7, 10, 9], "int32"))
        return (r, n, m)
"""


def test_tvm_legalized_round_invert_and_mod_compute_as_numpy() -> None:
    """TVM legalizes R.round to T.nearbyint, R.bitwise_not to `~v` and integer
    R.mod to T.truncmod; all read back and compute numpy's rint (ties to even
    included), invert and fmod (the remainder with the dividend's sign)."""
    import numpy as np
    from tvm import relax

    from phasec.pipeline import lower
    from phasec.tvm import from_tvm

    legalized = relax.transform.LegalizeOps()(tvm.script.from_source(ROUND_AND_INVERT))
    text = legalized.script()
    assert "T.nearbyint(" in text and "~" in text and "T.truncmod(" in text
    mod = from_tvm(legalized)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.7, 3.2], "float32")
    i = np.array([0, 1, -1, 7, 2**31 - 1, -2**31], "int32")
    r, n, m = phasec.VirtualMachine(phasec.build(lower(mod)))["main"](x, i)
    np.testing.assert_array_equal(np.asarray(r), np.rint(x))
    np.testing.assert_array_equal(np.asarray(n), np.invert(i))
    np.testing.assert_array_equal(np.asarray(m), np.fmod(i, [3, -3, 5, -7, 10, 9]))


FORWARD_SCALAR = """
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor((1, "m", "m", 2), dtype="int32")):
        m = T.int64()
        v = R.nn.batch_flatten(y)
        w = R.reshape(v, R.shape([1, m * m * 2]))
        return w
"""


def test_a_buffer_shape_may_name_a_scalar_parameter_declared_after_it() -> None:
    """TVM's LegalizeOps writes `v: T.Buffer((1, "m * m * 2")), m: T.int64`:
    the m of the shape is the parameter (not the module-level TypeVar m), so
    the kernel verifies clean and computes numpy's reshape."""
    import numpy as np
    from tvm import relax

    from phasec import verifier
    from phasec.pipeline import lower
    from phasec.tvm import from_tvm

    legalized = relax.transform.LegalizeOps()(tvm.script.from_source(FORWARD_SCALAR))
    assert '"m * m * T.int64(2)"), "int32"), m: T.int64' in legalized.script()
    mod = from_tvm(legalized)
    assert [d for d in verifier.check(mod, "optimization") if d.severity == verifier.ERROR] == []
    y = np.arange(18, dtype="int32").reshape(1, 3, 3, 2)
    got = phasec.VirtualMachine(phasec.build(lower(mod)))["main"](y)
    np.testing.assert_array_equal(np.asarray(got), y.reshape(1, 18))
