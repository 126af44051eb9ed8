"""A TVMScript module with a bit of everything the verifier's rules and their
mutations look at: a private function, a dataflow block, an if, a closure
capturing a parameter and a symbolic dimension (tests/testing/test_mutations.py
and test_mutation_choices.py)."""

RICH_MODULE = '''
@I.ir_module
class M:
    @R.function(private=True)
    def scale(a: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        b = R.multiply(a, R.const(2.0, "float32"))
        return b

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"),
             flag: R.Tensor((), "bool")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        with R.dataflow():
            y = R.add(x, x)
            z = R.exp(y)
            R.output(z)
        if flag:
            t = cls.scale(z)
            r = t
        else:
            r = z
        @R.function
        def inner(v: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
            w = R.add(v, x)
            return w
        out = inner(r)
        return out
'''
