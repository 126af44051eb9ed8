"""Property 4: the verifier catches every injected violation, with its rule's code."""

import pytest
from hypothesis import HealthCheck, Phase as HPhase, given, settings
from hypothesis import strategies as st

import phasec
from phasec import verifier
from phasec.ir import Phase, structural_equal
from phasec.testing import advance_to_phase, modules
from phasec.testing.mutations import MUTATIONS, UNINJECTABLE, mutate, mutation_for

from helpers.mutation_modules import RICH_MODULE

# No shrinking: a failure's message already names the rule and the mutation,
# and shrinking a module the verifier wrongly accepts took minutes under CI.
SETTINGS = settings(max_examples=min(settings.default.max_examples, 12), deadline=None,
                    phases=[HPhase.explicit, HPhase.reuse, HPhase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])

EXAMPLE = RICH_MODULE


def codes_of(mod):
    return {d.code for d in verifier.check(mod)}


def test_every_rule_has_a_mutation_or_a_reason():
    rules = {r.code for r in verifier.all_rules()}
    assert set(MUTATIONS) | set(UNINJECTABLE) == rules
    assert not set(MUTATIONS) & set(UNINJECTABLE)
    for code, m in MUTATIONS.items():
        assert m.since == verifier.get_rule(code).since, code
        assert m.description


def test_unknown_code_is_a_clear_error():
    with pytest.raises(KeyError, match="no mutation operator for XY999"):
        mutation_for("XY999")


@pytest.mark.parametrize("phase", list(Phase))
def test_mutations_of_a_fixed_module(phase):
    """Every operator that applies at ``phase``, on a module with something to
    edit everywhere (dataflow blocks, an if, a helper, a nested function)."""
    mod = advance_to_phase(phasec.parse(EXAMPLE), phase)
    assert not [d for d in verifier.check(mod) if d.is_error]
    for code, m in MUTATIONS.items():
        if m.since > phase:
            continue
        for choice in range(3):  # different functions / bindings / places
            mutant = mutate(mod, code, lambda n, c=choice: c % n)
            assert not structural_equal(mutant, mod), code
            assert code in codes_of(mutant), (code, phase, choice, mutant.script())


@pytest.mark.parametrize("phase", list(Phase))
def test_mutations_are_caught_on_random_modules(phase):
    @SETTINGS
    @given(modules(phase, max_bindings=5), st.data())
    def prop(mod, data):
        choose = lambda n: data.draw(st.integers(0, n - 1))  # noqa: E731
        for code, m in MUTATIONS.items():
            if m.since > mod.phase:
                continue
            mutant = m(mod, choose)
            found = codes_of(mutant)
            assert code in found, f"{code} ({m.description}) not reported; got {sorted(found)}"
    prop()


def test_mutation_does_not_touch_its_input():
    mod = phasec.parse(EXAMPLE)
    text = mod.script()
    for code in MUTATIONS:
        if MUTATIONS[code].since == Phase.INGESTION:
            mutate(mod, code)
    assert mod.script() == text
    assert not [d for d in verifier.check(mod) if d.is_error]


_KEPT_LOOP_KERNEL = """
@I.ir_module
class Module:
    @T.prim_func
    def copy(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        with T.attr({"phasec.keep_loop": 1}):
            for i in range(4):
                b[i] = a[i]
"""


def test_a_loop_under_an_attribute_is_mutated_and_caught():
    """The only loop under an AttrStmt (a kept loop, a marked weight
    transform): each operator that picks a loop edits it, and the verifier
    reports the operator's code (it once picked the loop and left the module
    as it was: WF503 went unreported on a recurrent layer's kernel)."""
    mod = phasec.parse(_KEPT_LOOP_KERNEL)
    assert not [d for d in verifier.check(mod) if d.is_error]
    for code in ("WF503", "WF505"):
        mutant = mutate(mod, code, lambda n: 0)
        assert sorted(mutant.functions) == ["copy"], code  # this kernel's loop, none added
        assert not structural_equal(mutant, mod), code
        assert code in codes_of(mutant), (code, mutant.script())
