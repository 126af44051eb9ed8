# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.add(x, x)  # <- PH202
        z = R.nn.relu(y)  # <- PH202
        return z
