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
    def scale_copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):  # <- WF302
        T.func_attr({"global_symbol": "scale"})
        for i in range(4):
            B[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):  # <- WF302
        R.func_attr({"global_symbol": "entry"})
        return x
