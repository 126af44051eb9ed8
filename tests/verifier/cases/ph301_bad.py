# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    I.module_attrs({"phase": "build"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):  # <- PH301
        y = R.call_pure_packed("my.func", x, sinfo_args=R.Tensor((2, 3), "float32"))  # <- PH302
        return y
