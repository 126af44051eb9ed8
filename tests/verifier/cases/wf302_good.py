# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def scale(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] * T.float32(2)

    @T.prim_func
    def scale_copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        # a PrimFunc's global_symbol is its link name: it may differ from its name
        T.func_attr({"global_symbol": "scale_by_two"})
        for i in range(4):
            B[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        R.func_attr({"global_symbol": "main"})
        return x
