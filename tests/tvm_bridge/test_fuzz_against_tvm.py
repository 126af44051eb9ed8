"""``phasec fuzz --against tvm``: differential fuzzing against TVM 0.27.

Planted disagreements, each a TVM pass written here with TVM's own Python
API (registered by name for the campaign's pool): one changes results
(multiply becomes add, add subtract...), caught by comparing TVM's VM with phasec's
interpreter on the inputs; one adds a function with a nested function after
LambdaLift, which breaks the optimization phase (PH101) and is caught by
phasec.tvm.PhaseCheck. The verdict comparison is checked on a structural
violation both verifiers see (they agree) and on one only phasec can see in
TVMScript text (WF002: TVM's parser reads a variable bound twice as two
variables), which the mode reports as a disagreement.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm

from phasec.cli import main
from phasec.script.parser import parse
from phasec.testing.against_tvm import (
    AGREED, TVMSequence, check_against_tvm, register_tvm_pass, unregister_tvm_pass,
)
from phasec.testing.campaign import read_reproducer, run_campaign

NESTED = """
@I.ir_module
class Extra:
    @R.function
    def helper(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        @R.function
        def inner(y: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            z: R.Tensor((2,), dtype="float32") = R.add(y, y)
            return z

        r: R.Tensor((2,), dtype="float32") = inner(x)
        return r
"""


#: The planted bug's operator swaps (same operands, other results).
SWAPS = {"multiply": "add", "add": "subtract", "subtract": "multiply", "maximum": "minimum",
         "minimum": "maximum", "tanh": "sigmoid", "sigmoid": "tanh", "exp": "sin",
         "negative": "abs", "abs": "negative", "sqrt": "square", "square": "sqrt"}


def _swap_operators() -> tvm.transform.Pass:
    """A planted TVM bug: R.multiply becomes R.add, R.add R.subtract... (see
    SWAPS), through TVM's own printer and parser; modules with tensor
    constants, which TVM 0.27 cannot print with their values, are left
    alone."""
    pattern = re.compile(r"\bR\.(" + "|".join(SWAPS) + r")\(")

    @tvm.transform.module_pass(opt_level=0, name="PlantedSwapOperators")
    def planted(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        text = mod.script()
        if "metadata[" in text or not pattern.search(text):
            return mod
        return tvm.script.from_source(pattern.sub(lambda m: f"R.{SWAPS[m.group(1)]}(", text))

    return planted


def _add_nested_function() -> tvm.transform.Pass:
    """A planted TVM bug: adds a module-level function holding a nested
    function (results unchanged; the optimization phase forbids it)."""

    @tvm.transform.module_pass(opt_level=0, name="PlantedNestedFunction")
    def planted(mod: tvm.IRModule, ctx: tvm.transform.PassContext) -> tvm.IRModule:
        extra = tvm.script.from_source(NESTED)
        functions = dict(mod.functions.items())
        functions[extra.get_global_var("helper")] = extra["helper"]
        return tvm.IRModule(functions, attrs=mod.attrs)

    return planted


def _found(stats, kind, planted):
    """The first saved failure of ``kind`` whose TVM sequence ran the
    ``planted`` pass (for results, on a module calling an operator it swaps),
    or None: real TVM findings may come first."""
    def ours(saved):
        if saved.failure.kind != kind or planted not in saved.sequence:
            return False
        if kind != "tvm-results":
            return True
        first = saved.failure.message.splitlines()[0]
        called = first.rpartition(" calling ")[2].split(", ")
        return any(op in SWAPS for op in called)
    return next((s for s in stats.unique if ours(s)), None)


@pytest.fixture
def planted():
    register_tvm_pass("PlantedSwapOperators", _swap_operators)
    register_tvm_pass("PlantedNestedFunction", _add_nested_function)
    yield
    unregister_tvm_pass("PlantedSwapOperators")
    unregister_tvm_pass("PlantedNestedFunction")


def test_a_tvm_pass_that_changes_results_is_found_and_saved(tmp_path, planted, capsys):
    out = tmp_path / "out"
    # operators where TVM 0.27 and phasec agree, so the planted bug is what is found
    stats = run_campaign(300, seed=4, passes=["PlantedSwapOperators"], out_dir=out,
                         against="tvm", ops=list(SWAPS) + ["reshape", "permute_dims"], stop_when=lambda st: _found(st, "tvm-results", "PlantedSwapOperators"))
    # (real findings may come first: TVM 0.27's own differences, what phasec
    # cannot read back yet)
    saved = _found(stats, "tvm-results", "PlantedSwapOperators")
    assert saved is not None, stats.summary()
    # the first line (the signature) names the operators, the rest where the values differ
    first, _, rest = saved.failure.message.partition("\n")
    assert first.startswith("TVM's VM and phasec's interpreter differ on a module calling ")
    assert "differ" in rest
    text = saved.path.read_text()
    assert text.startswith("# phasec fuzz reproducer (against TVM 0.27)")
    assert re.search(r"^# sequence: tvm: .*PlantedSwapOperators.*tvm\.compile$", text, re.M)
    # the module is in TVM's syntax: TVM reads the file as it is, and it
    # calls an operator the planted pass swaps
    assert re.search(r"\bR\.(" + "|".join(SWAPS) + r")\(", text)
    tvm_mod = tvm.script.from_source(text)
    assert "main" in [gv.name_hint for gv in tvm_mod.get_global_vars()]
    # the replay finds the same
    rep = read_reproducer(saved.path)
    assert rep.inputs and rep.sequence.startswith("tvm:")
    assert main(["fuzz", "--replay", str(saved.path)]) == 1
    assert "[tvm-results]" in capsys.readouterr().out
    assert stats.as_dict()["against"] == "tvm"


def test_a_tvm_pass_that_breaks_its_phase_is_found_by_phase_check(tmp_path, planted):
    stats = run_campaign(300, seed=5, passes=["PlantedNestedFunction"], out_dir=tmp_path / "o",
                         against="tvm", ops=list(SWAPS), stop_when=lambda st: _found(st, "tvm-phase", "PlantedNestedFunction"))
    saved = _found(stats, "tvm-phase", "PlantedNestedFunction")
    assert saved is not None, stats.summary()
    failure = saved.failure
    assert failure.pass_spec == "PlantedNestedFunction"
    assert failure.message.startswith("PH101 in phase optimization")
    # LambdaLift ran first (the transition into optimization), in the coverage too
    assert stats.coverage.transitions["tvm.LambdaLift"] >= 1


def _simple_module():
    return parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        a: R.Tensor((2, 3), dtype="float32") = R.multiply(x, x)
        b: R.Tensor((2, 3), dtype="float32") = R.add(a, x)
        return b
""")


def test_verdicts_agree_on_a_shared_rule_and_differ_where_text_cannot_carry_it():
    mod = _simple_module()
    agreed = [code for code in AGREED if code in ("WF001", "WF301", "WF405")]
    assert agreed
    for code in agreed:
        report = check_against_tvm(mod, TVMSequence(mutation=code), None)
        assert report.failures == [] and report.static_refusal is None, code
    # WF002 (a variable bound twice) reads back in TVM as two variables: a
    # disagreement by design, which the mode reports when asked to compare it
    report = check_against_tvm(mod, TVMSequence(mutation="WF002"), None)
    assert [f.kind for f in report.failures] == ["tvm-verdict"]
    assert "phasec rejects WF002" in report.failures[0].message


def test_tvm_passes_and_vm_agree_with_the_interpreter_on_a_module():
    mod = _simple_module()
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    expected = x * x + x  # numpy's formula
    seq = TVMSequence(("FoldConstant", "CanonicalizeBindings"), compile=True)
    report = check_against_tvm(mod, seq, [x], expected)
    assert report.failures == [] and report.vm_ran and report.reached_build
    names = [name for name, _, _ in report.ran]
    for name in ("tvm.LambdaLift", "tvm.FoldConstant", "tvm.LegalizeOps",
                 "tvm.LowerRuntimeBuiltin"):
        assert name in names
    wrong = check_against_tvm(mod, seq, [x], expected + 1)  # TVM computes x*x+x, not that
    assert [f.kind for f in wrong.failures] == ["tvm-results"]


def test_command_line_against_tvm(tmp_path, capsys):
    assert main(["fuzz", "--against", "tvm", "--passes", "NoSuchPass", "--seconds", "5",
                 "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "'NoSuchPass' is not a pass of tvm.relax.transform" in err and "Traceback" not in err
    status = main(["fuzz", "--against", "tvm", "--seconds", "8", "--seed", "3",
                   "--out", str(tmp_path / "b")])
    text = capsys.readouterr().out
    assert "against tvm" in text and "left out" in text
    programs = int(re.search(r"programs generated\s+(\d+)", text).group(1))
    assert programs > 0 and status in (0, 1)


# What `phasec fuzz --against tvm` found in TVM 0.27 (10 minutes, seed 17),
# minimized by hypothesis; the tests pin TVM 0.27's behaviour.

def test_tvm_0_27_leaves_ewise_fma_unlegalized():
    """LegalizeOps has no lowering for R.ewise_fma: PhaseCheck reports it at
    once (PH202, a high-level operator in phase lowering); TVM itself only
    fails later, in VM codegen."""
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        v: R.Tensor((1,), dtype="float32") = R.ewise_fma(x, x, x)
        return v
""")
    x = np.array([0.5], dtype="float32")
    report = check_against_tvm(mod, TVMSequence(), [x], x * x + x)
    kinds = [(f.kind, f.pass_spec) for f in report.failures]
    assert kinds[0] == ("tvm-phase", "LegalizeOps")
    assert "PH202" in report.failures[0].message and "ewise_fma" in report.failures[0].message
    assert kinds[1][0] == "tvm-crash" and kinds[1][1].startswith("tvm.compile after ")


def test_tvm_0_27_cannot_legalize_rms_norm_of_a_vector():
    """R.nn.rms_norm over the only axis of a 1-D tensor: TVM's LegalizeOps
    fails inside TOPI (its 2-D form works)."""
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32"), w: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        v: R.Tensor((4,), dtype="float32") = R.nn.rms_norm(x, w, axes=[-1], epsilon=1e-05)
        return v
""")
    report = check_against_tvm(mod, TVMSequence(), None)
    assert [(f.kind, f.pass_spec) for f in report.failures] == [("tvm-crash", "LegalizeOps")]
    assert "Tensor dimension mismatch" in report.failures[0].message


def test_numpy_scalar_inputs_reach_tvms_vm_as_tensors():
    """inputs_for draws a 0-d bool input as a numpy scalar (np.bool_); TVM's
    VM needs a tensor (found in a --jobs 2 run: "expect a Tensor but get
    ffi.OpaquePyObject")."""
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), dtype="float32"), flag: R.Tensor((), dtype="bool")) -> R.Tensor((1,), dtype="float32"):
        if flag:
            r: R.Tensor((1,), dtype="float32") = R.add(x, x)
        else:
            r: R.Tensor((1,), dtype="float32") = x
        return r
""")
    x = np.array([0.5], dtype="float32")
    for flag, expected in ((np.bool_(True), x + x), (np.bool_(False), x)):
        report = check_against_tvm(mod, TVMSequence(), [x, flag], expected)
        assert report.failures == [] and report.vm_ran


def test_tvm_parser_errors_are_reported_by_their_message():
    """TVMScript's parser says "error: ..." and then draws the line with a
    caret; the finding quotes the message, not the drawing."""
    from phasec.testing.against_tvm import _first_line

    with pytest.raises(Exception) as info:
        tvm.script.from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")):
        v = R.add(x, y)
        return v
""")
    assert _first_line(info.value) == "error: Undefined variable: y"


def _multinomial_probabilities(mod):
    """(function params, first operand) of every multinomial_from_uniform call."""
    from phasec.ir import Call, Function

    out = []
    for func in mod.functions.values():
        if not isinstance(func, Function):
            continue
        for block in func.body.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, Call) and getattr(v.op, "name", "") == \
                        "relax.multinomial_from_uniform":
                    out.append((func.params, v.args[0]))
    return out


def test_generated_multinomial_calls_agree_with_tvm():
    """The generator draws multinomial_from_uniform's probabilities
    non-negative (never a raw input, drawn from [-2, 2]; a made operand goes
    through exp): with a negative one the running sum is not monotone and the
    category is not defined (TVM 0.27's kernel keeps the last j with
    c[j-1] <= u < c[j], phasec counts the c[j] <= u; 13 of 30 random such
    calls differed). Programs drawn with the operator as the pool run on
    TVM's VM as on phasec's interpreter."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import phasec
    from phasec.testing import inputs_for, modules

    calls = []

    @settings(max_examples=8, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(modules(max_bindings=3, ops=["relax.multinomial_from_uniform"], closures=False,
                   control_flow=False, packed=False), st.data())
    def prop(mod, data):
        found = _multinomial_probabilities(mod)
        for params, prob in found:
            assert not any(prob is p for p in params), mod.script()
        calls.extend(found)
        args = data.draw(inputs_for(mod))
        expected = phasec.interp.run(mod, *args)
        report = check_against_tvm(mod, TVMSequence((), True), args, expected, isolate=False)
        assert not report.failures, (mod.script(), report.failures[0])

    prop()
    assert len(calls) >= 4
