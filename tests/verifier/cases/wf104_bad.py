# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(c: R.Prim("bool"), x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            if c:  # <- WF104
                z = R.add(x, x)
            else:
                z = x
            R.output(z)
        return z
