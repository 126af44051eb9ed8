# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y: R.Tensor((2, 4), "float32") = R.add(x, x)  # <- WF402
        z: R.Tensor((2, 3), "int32") = R.multiply(x, x)  # <- WF402
        return x
