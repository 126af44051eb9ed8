"""The mutation operators at the ends of their choices: always the first
option and always the last, on a function with no bindings and on a module
with something to edit everywhere. Each must inject its own rule's violation
and nothing else but the follow-ons its construction implies.

(test_mutations.py checks that the code is reported; mutation testing of the
verifier, bench/bench_core_mutation.py, showed that injectors could then
drift into other violations or other choices unnoticed.)
"""

import pytest

import phasec
from phasec import verifier
from phasec.ir import Phase
from phasec.testing import advance_to_phase
from phasec.testing.mutations import MUTATIONS
from phasec.transform import PassContext, get_pass

from helpers.mutation_modules import RICH_MODULE

BARE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
'''

RICH = RICH_MODULE

#: scalar and shape parameters beside a tensor (injectors read tensor shapes only)
OTHER_PARAMS = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), s: R.Shape(["n", 4]),
             k: R.Prim("int64")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        y = R.add(x, x)
        c = R.exp(R.const(1.5, "float32"))
        return y
'''

#: a build-phase module whose only function is impure
IMPURE_BUILD = '''
@I.ir_module
class M:
    I.module_attrs({"phase": "build"})

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.call_packed("my.func", x, sinfo_args=R.Tensor((2, 3), "float32"))
        return y
'''

#: main calls itself (an injector must never delete the entry function)
RECURSIVE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32"), n: R.Tensor((), "int64")) -> R.Tensor((2,), "float32"):
        cond = R.greater(n, R.const(0, "int64"))
        if cond:
            m = R.subtract(n, R.const(1, "int64"))
            z = cls.zeta(x)
            r = cls.main(z, m)
        else:
            r = x
        return r

    @R.function
    def zeta(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.add(x, x)
        return y
'''

#: what an injected violation brings along, by construction
FOLLOW_ONS = {
    # a dataflow block is the only place these violations can be written,
    # and there is none from lowering on
    "WF003": {"PH201"}, "WF104": {"PH201"}, "WF201": {"PH201", "WF202"},
    # the injection calls a high-level operator (none from lowering on)
    "WF101": {"PH202"}, "WF405": {"PH202"},
    # call_tir (none in build)
    "WF402": {"PH303"}, "WF406": {"PH303"},
    # a second parameter use shares its symbolic dimensions as well
    "WF008": {"WF007"},
    # a wrong struct info flows into the binding's declared struct info
    "WF203": {"WF202"}, "WF403": {"WF402"},
    # purity and the declared purity of the function disagree
    "WF202": {"PH301"}, "PH301": {"WF202"},
}


CASES = [(source, phase) for source in (BARE, RICH) for phase in Phase] + [
    (OTHER_PARAMS, Phase.INGESTION), (IMPURE_BUILD, Phase.BUILD), (RECURSIVE, Phase.INGESTION)]


@pytest.mark.parametrize("source, phase", CASES,
                         ids=[f"{i}-{p.label}" for i, (_, p) in enumerate(CASES)])
def test_first_and_last_choices_inject_their_rule(source, phase):
    mod = advance_to_phase(phasec.parse(source), phase)
    assert not [d for d in verifier.check(mod) if d.is_error]
    for code, mutation in MUTATIONS.items():
        if mutation.since > phase:
            continue
        for end, choose in (("first", lambda n: 0), ("last", lambda n: n - 1)):
            found = {d.code for d in verifier.check(mutation(mod, choose)) if d.is_error}
            assert code in found, (code, end)
            assert found - {code} <= FOLLOW_ONS.get(code, set()), (code, end, found)


def test_an_edited_binding_keeps_its_place_in_the_source():
    mod = phasec.parse(RICH, "rich.py")
    # the first candidate: the multiply in scale
    line = RICH.splitlines().index(
        '        b = R.multiply(a, R.const(2.0, "float32"))') + 1
    [diag] = verifier.check(MUTATIONS["WF101"](mod, lambda n: 0))
    assert diag.code == "WF101" and diag.span is not None and diag.span.line == line


#: a shape operand before the tensor operand
SHAPE_FIRST = '''
@I.ir_module
class M:
    @R.function
    def main(s: R.Shape([2, 3]), v: R.Tensor((), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.full(s, v, "float32")
        return y
'''


def test_nested_call_injection_is_undone_by_normalize():
    # WF101's help: bind the inner expression to a variable first. Normalize does
    # exactly that; the module is then well-formed, so the injector nested a
    # well-typed call (R.negative of the tensor operand, not of the shape before it)
    mod = phasec.parse(SHAPE_FIRST)
    nested = MUTATIONS["WF101"](mod, lambda n: 0)
    assert [d.code for d in verifier.check(nested)] == ["WF101"]
    with PassContext(verify="off"):
        fixed = get_pass("Normalize")(nested)
    assert verifier.check(fixed) == []
