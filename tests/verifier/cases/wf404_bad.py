# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), t: R.Tuple(R.Tensor((2, 3), "float32"), R.Shape([2]))) -> R.Tensor((2, 3), "float32"):
        y: R.Tensor((3, 3), "float32") = x  # <- WF404
        s: R.Tensor((2, 3), "float32") = t[1]  # <- WF404
        u = R.match_cast(t, R.Tensor((2, 3), "float32"))  # <- WF404
        return x
