# pipeline: LambdaLifting
# Functions with a Codegen or Composite attribute stay nested (BYOC); an
# impure nested function is invoked with R.invoke_closure.
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def ext(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            R.func_attr({"Codegen": "dnnl"})
            b = R.add(a, a)
            return b
        @R.function
        def pattern(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            R.func_attr({"Composite": "dnnl.relu"})
            b = R.nn.relu(a)
            return b
        @R.function(pure=False)
        def log(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            b = R.call_packed("vm.builtin.copy", a, sinfo_args=R.Tensor((3,), "float32"))
            c = R.add(b, x)
            return c
        y = ext(x)
        z = pattern(y)
        r = log(z)
        return r
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def ext(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            R.func_attr({"Codegen": "dnnl"})
            b = R.add(a, a)
            return b
        @R.function
        def pattern(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            R.func_attr({"Composite": "dnnl.relu"})
            b = R.nn.relu(a)
            return b
        log = R.make_closure(cls.main_log, (x,))
        y = ext(x)
        z = pattern(y)
        r = R.invoke_closure(log, (z,), sinfo_args=R.Tensor((3,), "float32"))
        return r

    @R.function(private=True, pure=False)
    def main_log(a: R.Tensor((3,), "float32"), x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        b = R.call_packed("vm.builtin.copy", a, sinfo_args=R.Tensor((3,), "float32"))
        c = R.add(b, x)
        return c
