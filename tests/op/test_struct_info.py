"""Struct-info inference of what is not an operator call (calls of functions,
closures and packed functions, tuples, ifs, functions) and the struct-info
lattice: equality, is_base_of, join, the shape variables, the text form."""

from phasec.ir import (
    Call, ExternFunc, FuncStructInfo, Function, GlobalVar, If, ObjectStructInfo,
    PrimStructInfo, SeqExpr, ShapeStructInfo, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, tir,
)
from phasec.arith.lattice import collect_shape_vars, is_base_of, join, struct_info_equal, unify
from phasec.ir.text import sinfo_to_str
from phasec.op.infer import context_from_module, infer_struct_info
from phasec.op import InferContext

from helpers.op_infer import T, raises, tv

n = tir.Var("n")
m = tir.Var("m")


# ---------------------------------------------------------------------------
# infer_struct_info on non-op expressions
# ---------------------------------------------------------------------------

def test_infer_calls_to_functions_and_packed():
    x = tv("x", (3, 4))
    fn = tir.Var("fn")
    f_sinfo = FuncStructInfo([T((fn, 4))], T((fn, 8)))
    ctx = InferContext({"f": f_sinfo, "k": FuncStructInfo(None, TupleStructInfo([]), False)})
    call = Call(GlobalVar("f"), [x])
    assert sinfo_to_str(infer_struct_info(call, ctx)) == 'R.Tensor((3, 8), dtype="float32")'
    # prim func callee: sinfo_args[0] if given, else an empty tuple
    assert sinfo_to_str(infer_struct_info(Call(GlobalVar("k"), [x]), ctx)) == "R.Tuple()"
    assert infer_struct_info(Call(GlobalVar("k"), [x], sinfo_args=[T((2,))]), ctx).ndim == 1
    raises(["cls.f takes 1 argument but 2 were given"], infer_struct_info,
           Call(GlobalVar("f"), [x, x]), ctx)
    raises(["cannot match parameter struct info"], infer_struct_info,
           Call(GlobalVar("f"), [tv("y", (3, 5))]), ctx)
    # a variable of the callee's result that the arguments do not bind is erased
    k = tir.Var("k")
    g_sinfo = FuncStructInfo([T((fn, 4))], T((k, 4)))
    got = infer_struct_info(Call(GlobalVar("g"), [x]), InferContext({"g": g_sinfo}))
    assert sinfo_to_str(got) == 'R.Tensor(ndim=2, dtype="float32")'
    # closure variable
    clo = Var("clo", f_sinfo)
    assert sinfo_to_str(infer_struct_info(Call(clo, [x]))) == 'R.Tensor((3, 8), dtype="float32")'
    raises(["is not callable"], infer_struct_info, Call(x, [x]))
    # call_packed: an ExternFunc callee
    assert isinstance(infer_struct_info(Call(ExternFunc("f"), [x])), ObjectStructInfo)
    assert infer_struct_info(Call(ExternFunc("f"), [x], sinfo_args=[T((2,))])).ndim == 1


def test_infer_tuples_if_seq_function():
    x = tv("x", (n, 4))
    y = tv("y", (n, 5))
    tup = Tuple([x, y])
    assert sinfo_to_str(infer_struct_info(tup)) == \
        'R.Tuple(R.Tensor((n, 4), dtype="float32"), R.Tensor((n, 5), dtype="float32"))'
    tv_ = Var("t", tup.struct_info)
    assert infer_struct_info(TupleGetItem(tv_, 1)) is y.struct_info
    raises(["index 2 is out of range"], infer_struct_info, TupleGetItem(tv_, 2))
    raises(["indexing needs a tuple"], infer_struct_info, TupleGetItem(x, 0))
    cond = Var("c", TensorStructInfo((), "bool"))
    branch = If(cond, SeqExpr([], x), SeqExpr([], tv("z", (m, 4))))
    assert sinfo_to_str(infer_struct_info(branch)) == 'R.Tensor(ndim=2, dtype="float32")'
    same = If(cond, SeqExpr([], x), SeqExpr([], x))
    assert infer_struct_info(same) is x.struct_info or struct_info_equal(infer_struct_info(same), x.struct_info)
    raises(["condition of an if must be a boolean scalar"], infer_struct_info,
           If(x, SeqExpr([], x), SeqExpr([], x)))
    f = Function([x], SeqExpr([], x))
    assert sinfo_to_str(infer_struct_info(f)) == \
        'R.Callable((R.Tensor((n, 4), dtype="float32"),), R.Tensor((n, 4), dtype="float32"), purity=True)'


def test_context_from_module():
    from phasec.ir import IRModule
    x = tv("x", (2,))
    f = Function([x], SeqExpr([], x))
    prim = tir.PrimFunc([], tir.Evaluate(tir.IntImm(0, "int32")))
    ctx = context_from_module(IRModule({"f": f, "p": prim}))
    assert isinstance(ctx.globals["f"], FuncStructInfo)
    assert ctx.globals["p"].params is None


# ---------------------------------------------------------------------------
# the lattice
# ---------------------------------------------------------------------------

def test_struct_info_equal():
    assert struct_info_equal(T((n * 4, 2)), T((4 * n, 2)))
    assert not struct_info_equal(T((n, 2)), T((m, 2)))
    assert not struct_info_equal(T((2, 2)), T((2, 2), "int32"))
    assert not struct_info_equal(T((2, 2)), T(ndim=2))
    assert struct_info_equal(T(ndim=2), T(ndim=2))
    assert struct_info_equal(ShapeStructInfo([n + 1]), ShapeStructInfo([1 + n]))
    assert struct_info_equal(PrimStructInfo("int64", n), PrimStructInfo("int64", n))
    assert not struct_info_equal(PrimStructInfo("int64", n), PrimStructInfo("int64"))
    assert struct_info_equal(TupleStructInfo([T((2,))]), TupleStructInfo([T((2,))]))
    assert not struct_info_equal(TupleStructInfo([T((2,))]), TupleStructInfo([]))
    assert struct_info_equal(FuncStructInfo([T((2,))], T((2,))), FuncStructInfo([T((2,))], T((2,))))
    assert not struct_info_equal(FuncStructInfo([T((2,))], T((2,))),
                                 FuncStructInfo([T((2,))], T((2,)), purity=False))
    assert struct_info_equal(ObjectStructInfo(), ObjectStructInfo())
    assert not struct_info_equal(ObjectStructInfo(), T())


def test_is_base_of():
    assert is_base_of(T(ndim=2, dtype="void"), T((2, 3)))
    assert is_base_of(T(dtype="void"), T((2, 3), "int32"))
    assert not is_base_of(T((2, 3)), T(ndim=2))
    assert not is_base_of(T(ndim=3), T((2, 3)))
    assert not is_base_of(T((2, 3), "int32"), T((2, 3)))
    assert is_base_of(T((n * 2, 3)), T((2 * n, 3)))
    assert not is_base_of(T((n, 3)), T((3, 3)))  # not provable statically
    for s in (T((2,)), ShapeStructInfo([2]), PrimStructInfo("int64"), TupleStructInfo([]),
              FuncStructInfo(None, ObjectStructInfo())):
        assert is_base_of(ObjectStructInfo(), s)
        assert is_base_of(s, s)
    assert not is_base_of(T((2,)), ObjectStructInfo())
    assert is_base_of(ShapeStructInfo(ndim=2), ShapeStructInfo([n, 2]))
    assert not is_base_of(ShapeStructInfo([n, 2]), ShapeStructInfo(ndim=2))
    assert is_base_of(PrimStructInfo("int64"), PrimStructInfo("int64", n))
    assert is_base_of(TupleStructInfo([T(ndim=1)]), TupleStructInfo([T((4,))]))
    assert not is_base_of(TupleStructInfo([T(ndim=1)]), TupleStructInfo([T((4,)), T((4,))]))
    opaque = FuncStructInfo(None, ObjectStructInfo(), purity=False)
    f = FuncStructInfo([T(ndim=1)], T((4,)))
    assert is_base_of(opaque, f)
    assert not is_base_of(FuncStructInfo(None, ObjectStructInfo(), purity=True),
                          FuncStructInfo([T(ndim=1)], T((4,)), purity=False))
    # parameters are contravariant
    assert is_base_of(FuncStructInfo([T((4,))], T(ndim=1)), f)
    assert not is_base_of(FuncStructInfo([T(ndim=1)], T((4,))),
                          FuncStructInfo([T((4,))], T((4,))))


def test_join():
    assert struct_info_equal(join(T((2, n)), T((2, n))), T((2, n)))
    assert sinfo_to_str(join(T((2, n)), T((2, m)))) == 'R.Tensor(ndim=2, dtype="float32")'
    assert sinfo_to_str(join(T((2,)), T((2, 3), "int32"))) == "R.Tensor"
    assert isinstance(join(T((2,)), ShapeStructInfo([2])), ObjectStructInfo)
    assert sinfo_to_str(join(TupleStructInfo([T((2,))]), TupleStructInfo([T((3,))]))) == \
        'R.Tuple(R.Tensor(ndim=1, dtype="float32"))'
    assert sinfo_to_str(join(ShapeStructInfo([2]), ShapeStructInfo([3]))) == "R.Shape(ndim=1)"
    assert sinfo_to_str(join(PrimStructInfo("int64", n), PrimStructInfo("int64", m))) == 'R.Prim("int64")'
    assert unify is join
    for a, b in ((T((2, n)), T((2, m))), (T((2,)), ShapeStructInfo([2]))):
        j = join(a, b)
        assert is_base_of(j, a) and is_base_of(j, b)


def test_collect_shape_vars():
    s = TupleStructInfo([T((n, m * 2)), ShapeStructInfo([m, n + 1]), PrimStructInfo("int64", n),
                         FuncStructInfo([T((m,))], T((n,)))])
    assert collect_shape_vars(s) == [n, m]
    assert collect_shape_vars(T(ndim=2)) == []


def test_sinfo_to_str():
    assert sinfo_to_str(T((n, 4))) == 'R.Tensor((n, 4), dtype="float32")'
    assert sinfo_to_str(T((n + 1,), "int32")) == 'R.Tensor((n + 1,), dtype="int32")'
    assert sinfo_to_str(T(ndim=2)) == 'R.Tensor(ndim=2, dtype="float32")'
    assert sinfo_to_str(T(dtype="void")) == "R.Tensor"
    assert sinfo_to_str(T((), "bool")) == 'R.Tensor((), dtype="bool")'
    assert sinfo_to_str(ShapeStructInfo([n, 4])) == "R.Shape([n, 4])"
    assert sinfo_to_str(ShapeStructInfo(ndim=2)) == "R.Shape(ndim=2)"
    assert sinfo_to_str(PrimStructInfo("int64")) == 'R.Prim("int64")'
    assert sinfo_to_str(PrimStructInfo("int64", n)) == "R.Prim(value=n)"
    assert sinfo_to_str(TupleStructInfo([])) == "R.Tuple()"
    assert sinfo_to_str(ObjectStructInfo()) == "R.Object"
    assert sinfo_to_str(FuncStructInfo(None, ObjectStructInfo())) == "R.Callable()"
    assert sinfo_to_str(T(((n + 1) * 2, tir.BinaryOp("//", n, tir.IntImm(2))))) == \
        'R.Tensor(((n + 1) * 2, n // 2), dtype="float32")'
    assert sinfo_to_str(T((n - (m - 1),))) == 'R.Tensor((n - (m - 1),), dtype="float32")'
