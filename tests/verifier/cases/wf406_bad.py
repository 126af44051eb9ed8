# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @T.prim_func(private=True)
    def add(A: T.Buffer((T.int64(2), T.int64(3)), "float32"), B: T.Buffer((T.int64(2), T.int64(3)), "float32"), C: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            C[i, j] = A[i, j] + B[i, j]

    @T.prim_func(private=True)
    def dup(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n * T.int64(2),))
        for i in range(n):
            B[i] = A[i]
            B[i + n] = A[i]

    @T.prim_func(private=True)
    def scale(A: T.Buffer((T.int64(4),), "float32"), s: T.float32, B: T.Buffer((T.int64(4),), "float32")):
        for i in range(T.int64(4)):
            B[i] = A[i] * s

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), k: R.Tensor((2, 3), "int32"), v: R.Tensor((4,), "float32")) -> R.Tensor((2, 4), "float32"):
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((2, 4), "float32"))  # <- WF406
        z = R.call_tir(cls.add, (x, k), out_sinfo=R.Tensor((2, 3), "float32"))  # <- WF406
        w = R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((2, 3), "float32"))  # <- WF406
        d = R.call_tir(cls.dup, (v,), out_sinfo=R.Tensor((7,), "float32"))  # <- WF406
        s = R.call_tir(cls.scale, (v, v), out_sinfo=R.Tensor((4,), "float32"))  # <- WF406
        return y
