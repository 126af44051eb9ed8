# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        m = T.int64()
        y = R.match_cast(x, R.Tensor((m, 3), "float32"))
        z: R.Tensor((m, 3), "float32") = R.add(y, y)
        return x
