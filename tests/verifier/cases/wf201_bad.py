# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            y = R.call_packed("my.func", x, sinfo_args=R.Tensor((2, 3), "float32"))  # <- WF201
            R.output(y)
        return y
