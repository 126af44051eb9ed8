# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((2, 3), "int32"), c: R.Prim("int64")) -> R.Tensor((2, 3), "float32"):
        y: R.Tensor((2, 3), "float32") = R.add(x, w)  # <- WF405
        z: R.Tensor((2, 3), "float32") = cls.helper(w)  # <- WF405
        if c:  # <- WF405
            r: R.Tensor((2, 3), "float32") = y
        else:
            r: R.Tensor((2, 3), "float32") = x
        return r

    @R.function(private=True)
    def helper(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return a
