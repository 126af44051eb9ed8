# pipeline: LambdaLifting
# results: no
# Mutual recursion: is_odd (nested in is_even) calls is_even. Both capture
# `one` and `zero` (is_odd through is_even, a fixpoint); each lifted body
# builds the closure of the function it calls from its own captured values.
# (Results are compared in test_pass_lambda_lifting.py on chosen inputs.)
@I.ir_module
class Module:
    @R.function
    def main(n: R.Tensor((), "int64"), one: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
        zero = R.const(0, "int64")
        @R.function
        def is_even(k: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
            @R.function
            def is_odd(j: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
                if R.equal(j, zero):
                    r = R.const(False, "bool")
                else:
                    r = is_even(R.subtract(j, one))
                return r
            if R.equal(k, zero):
                s = R.const(True, "bool")
            else:
                s = is_odd(R.subtract(k, one))
            return s
        res = is_even(n)
        return res
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(n: R.Tensor((), "int64"), one: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
        zero = R.const(0, "int64")
        is_even = R.make_closure(cls.main_is_even, (one, zero))
        res = R.invoke_pure_closure(is_even, (n,), sinfo_args=R.Tensor((), "bool"))
        return res

    @R.function(private=True)
    def main_is_even(k: R.Tensor((), "int64"), one: R.Tensor((), "int64"), zero: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
        is_odd = R.make_closure(cls.main_is_even_is_odd, (one, zero))
        lv2 = R.equal(k, zero)
        if lv2:
            s = R.const(True, "bool")
        else:
            lv3 = R.subtract(k, one)
            s = R.invoke_pure_closure(is_odd, (lv3,), sinfo_args=R.Tensor((), "bool"))
        return s

    @R.function(private=True)
    def main_is_even_is_odd(j: R.Tensor((), "int64"), one: R.Tensor((), "int64"), zero: R.Tensor((), "int64")) -> R.Tensor((), "bool"):
        is_even = R.make_closure(cls.main_is_even, (one, zero))
        lv = R.equal(j, zero)
        if lv:
            r = R.const(False, "bool")
        else:
            lv1 = R.subtract(j, one)
            r = R.invoke_pure_closure(is_even, (lv1,), sinfo_args=R.Tensor((), "bool"))
        return r
