"""A function's parameters bind their symbolic variables together (TVM's rule).

All parameters' whole-variable dimensions are bound first, then compound
dimensions (``n * n``) are checked, so a compound dimension may use a
variable that a LATER parameter binds. The verifier (WF006), the reference
interpreter and the VM's parameter checks must all agree on this; a compound
dimension whose variable no parameter binds as a whole dimension stays an
error everywhere.
"""

import numpy as np
import pytest

import phasec
from phasec import verifier
from phasec.backend.vm import VirtualMachine, VMCodegenError, codegen
from phasec.backend.vm import bytecode as bc
from phasec.errors import VMError
from phasec.interp import InterpError

# `a`'s shape uses n, which only the later parameter `x` binds.
_LATER_PARAM_BINDS = '''
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor(("n * n",), "float32"), x: R.Tensor(("n", "n"), "float32")) -> R.Tensor(("n * n",), "float32"):
        y = R.add(a, R.flatten(x))
        return y
'''

# No parameter binds n as a whole dimension.
_NOTHING_BINDS = _LATER_PARAM_BINDS.replace('x: R.Tensor(("n", "n")', 'x: R.Tensor(("m", "m")') \
    .replace("R.flatten(x)", "a")

_SAME_PARAM = '''
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor(("n * 2", "n"), "float32")) -> R.Tensor(("n * 2", "n"), "float32"):
        return a
'''

_MATCH_CAST = '''
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor("float32", ndim=2)) -> R.Tensor("float32", ndim=2):
        k = T.int64()
        b = R.match_cast(a, R.Tensor(("k * 2", "k"), "float32"))
        return b
'''

_BUILD_PHASE_NOTHING_BINDS = '''
@I.ir_module
class M:
    I.module_attrs({"phase": "build"})
    @R.function(pure=False)
    def main(a: R.Tensor(("n * n",), "float32"), x: R.Tensor(("m", "m"), "float32")) -> R.Tensor(("n * n",), "float32"):
        return a
'''


def codes(mod):
    return [d.code for d in verifier.check(mod) if d.is_error]


def ones(*shape):
    return np.ones(shape, np.float32)


# -- verifier -------------------------------------------------------------------

@pytest.mark.parametrize("source", [_LATER_PARAM_BINDS, _SAME_PARAM, _MATCH_CAST],
                         ids=["later-parameter", "later-dim-same-parameter", "match-cast"])
def test_verifier_binds_whole_dims_before_compound_dims(source):
    assert codes(phasec.parse(source)) == []


def test_verifier_reports_a_compound_dim_no_parameter_binds():
    diags = [d for d in verifier.check(phasec.parse(_NOTHING_BINDS)) if d.is_error]
    assert diags and {d.code for d in diags} == {"WF006"}
    assert "symbolic variable 'n'" in diags[0].message
    # one diagnostic per use site (parameter a, binding y, the return type),
    # not one per occurrence of n in n * n
    assert len(diags) == 3


def test_wf006_explanation_states_the_rule():
    from phasec.verifier.rules import get_rule

    text = " ".join(get_rule("WF006").explanation.split())
    assert "ALL parameters are bound first" in text


# -- interpreter ----------------------------------------------------------------

def test_interpreter_binds_later_parameters_first():
    mod = phasec.parse(_LATER_PARAM_BINDS)
    np.testing.assert_array_equal(phasec.interp.run(mod, ones(4), ones(2, 2)), 2 * ones(4))


def test_interpreter_checks_the_compound_dim_against_the_later_binding():
    mod = phasec.parse(_LATER_PARAM_BINDS)
    with pytest.raises(InterpError,
                       match=r"parameter 'a'.*dimension 0 is 3, expected \(n \* n\) = 4"):
        phasec.interp.run(mod, ones(3), ones(2, 2))


def test_interpreter_rejects_a_compound_dim_no_parameter_binds():
    mod = phasec.parse(_NOTHING_BINDS)
    with pytest.raises(InterpError, match="symbolic variable n in .* is not bound by any plain "
                                          "dimension"):
        phasec.interp.run(mod, ones(4), ones(2, 2))


def test_match_struct_infos_binds_nothing_on_failure():
    from phasec.interp.relax import match_struct_infos

    fn = phasec.parse(_LATER_PARAM_BINDS)["main"]
    bound = {}
    with pytest.raises(InterpError):
        match_struct_infos([(ones(3), fn.params[0].struct_info, "a"),
                            (ones(2, 2), fn.params[1].struct_info, "x")],
                           lambda v: None, bound.__setitem__)
    assert bound == {}
    match_struct_infos([(ones(4), fn.params[0].struct_info, "a"),
                        (ones(2, 2), fn.params[1].struct_info, "x")],
                       lambda v: None, bound.__setitem__)
    assert list(bound.values()) == [2]


# -- VM -------------------------------------------------------------------------

def test_vm_binds_later_parameters_first():
    exe = phasec.build(phasec.parse(_LATER_PARAM_BINDS), kernels="interp")
    vm = VirtualMachine(exe)
    np.testing.assert_array_equal(vm["main"](ones(4), ones(2, 2)), 2 * ones(4))
    with pytest.raises(VMError, match=r"parameter 'a'.*dimension 0 is 3, expected"):
        vm["main"](ones(3), ones(2, 2))
    with pytest.raises(VMError, match="parameter 'x'"):
        vm["main"](ones(4), ones(2, 3))


def test_vm_matches_a_parameter_again_after_the_later_bindings():
    exe = phasec.build(phasec.parse(_LATER_PARAM_BINDS), kernels="none")
    main = exe.functions[0]
    matches = [ins for ins in main.code if type(ins) is bc.Match]
    # a (its compound dim only bound to a scratch register), x, then a again
    assert [m.src for m in matches] == [0, 1, 0]
    assert matches[0].pattern[3][0][0] == "bind"
    assert matches[2].pattern[3][0][0] == "expr"


def test_vm_parameter_without_forward_reference_is_matched_once():
    exe = phasec.build(phasec.parse(_SAME_PARAM), kernels="none")
    assert sum(type(ins) is bc.Match for ins in exe.functions[0].code) == 1


def test_vm_codegen_rejects_a_compound_dim_no_parameter_binds():
    mod = phasec.parse(_BUILD_PHASE_NOTHING_BINDS)
    assert "WF006" in codes(mod)
    with pytest.raises(VMCodegenError, match="symbolic variable n in a compound dimension is not "
                                             "defined by any plain dimension"):
        codegen(mod, verify=False)


# -- end to end: lifted closures (the fuzzer's case) ---------------------------------

_CLOSURE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", "n"), "float32")) -> R.Tensor(("n * n",), "float32"):
        n = T.int64()
        v = R.flatten(x)
        @R.function
        def f(a: R.Tensor(("n * n",), "float32")) -> R.Tensor(("n * n",), "float32"):
            w = R.add(a, R.flatten(x))
            return w
        r = f(v)
        return r
'''


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_lifted_closure_with_compound_parameter_runs_on_the_vm(kernels):
    mod = phasec.parse(_CLOSURE)
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    expected = phasec.interp.run(mod, x)
    np.testing.assert_array_equal(expected, 2 * x.reshape(-1))
    vm = VirtualMachine(phasec.build(mod, kernels=kernels))
    np.testing.assert_allclose(vm["main"](x), expected)
