# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    I.module_attrs({"phase": "build"})

    @T.prim_func(private=True)
    def add(A: T.Buffer((T.int64(2), T.int64(3)), "float32"), B: T.Buffer((T.int64(2), T.int64(3)), "float32"), C: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            C[i, j] = A[i, j] + B[i, j]

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        storage: R.Object = R.vm.alloc_storage(R.shape([24]), runtime_device_index=0, dtype="uint8")
        out: R.Tensor((2, 3), "float32") = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([2, 3]), dtype="float32")
        _ = cls.add(x, x, out)
        y = R.call_packed("my.func", out, sinfo_args=R.Tensor((2, 3), "float32"))
        return y

    @R.function
    def helper(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        R.func_attr({"relax.force_pure": True})
        y = R.call_packed("my.func", x, sinfo_args=R.Tensor((2, 3), "float32"))
        return y
