"""Pass instruments: hook order, printing, timing (verification shown
separately), tracing, the pass_instrument decorator and PrintIR."""

from __future__ import annotations

import io

import pytest

from phasec import PassError, WellFormedError
from phasec.ir import Function, IRModule, Phase, SeqExpr, TensorStructInfo, Var
from phasec.transform import (
    PassContext, PassInstrument, PassTiming, PassTrace, PrintAfterAll, PrintBeforeAll, PrintIR,
    Sequential, module_pass, pass_instrument, verification,
)

T4 = TensorStructInfo((4,), "float32")


def make_module(phase=Phase.INGESTION):
    x = Var("x", T4)
    main = Function([x], SeqExpr([], x), attrs={"global_symbol": "main"},
                    is_pure=phase < Phase.BUILD)
    return IRModule({"main": main}).with_phase(phase)


@pytest.fixture(autouse=True)
def stub_printer_and_verifier(monkeypatch):
    """Deterministic module text and a verifier whose time is observable."""
    monkeypatch.setattr(IRModule, "script", lambda self: f"<module {self.phase.label}>")
    calls = []

    def fake_verify(mod, phase=None, pass_name=None):
        calls.append(pass_name)
        if mod.attrs.get("broken"):
            raise WellFormedError(f"broken after {pass_name}", ["d"], pass_name)

    monkeypatch.setattr(verification, "load_verifier", lambda: fake_verify)
    verification.forget_verified()
    yield calls
    verification.forget_verified()


@module_pass(phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION, name="Lift")
def lift(mod, ctx):
    return mod


@module_pass(phases="all", name="Touch")
def touch(mod, ctx):
    return mod.with_attr("touched", True)


@module_pass(opt_level=3, phases="all", name="Fancy")
def fancy(mod, ctx):
    return mod


class Log(PassInstrument):
    def __init__(self):
        self.events = []

    def enter_pass_ctx(self):
        self.events.append("enter")

    def exit_pass_ctx(self):
        self.events.append("exit")

    def should_run(self, mod, info):
        self.events.append(f"should_run {info.name}")
        return True

    def run_before_pass(self, mod, info):
        self.events.append(f"before {info.name} {mod.phase.label}")

    def run_after_pass(self, mod, info):
        self.events.append(f"after {info.name} {mod.phase.label}")

    def run_after_verify(self, mod, info, seconds, stage):
        assert seconds >= 0
        self.events.append(f"verify {info.name} {stage}")

    def run_on_skip(self, mod, info, reason):
        self.events.append(f"skip {info.name}")

    def run_on_error(self, mod, info, error):
        self.events.append(f"error {info.name} {type(error).__name__}")


def test_hook_order():
    log = Log()
    with PassContext(instruments=[log]):
        Sequential([lift, fancy, touch])(make_module())
    assert log.events == [
        "enter",
        "should_run Lift", "verify Lift input", "before Lift ingestion",
        "after Lift optimization", "verify Lift output",
        "skip Fancy",
        "should_run Touch", "before Touch optimization", "after Touch optimization",
        "verify Touch output",
        "exit",
    ]


def test_error_hook_replaces_after_pass():
    @module_pass(phases="all", name="Fails")
    def fails(mod, ctx):
        raise RuntimeError("no")

    log = Log()
    with PassContext(instruments=[log], verify="off"):
        with pytest.raises(PassError):
            fails(make_module())
    assert log.events[-3:] == ["before Fails ingestion", "error Fails PassError", "exit"]


def test_print_before_and_after_all():
    before, after = io.StringIO(), io.StringIO()
    with PassContext(instruments=[PrintBeforeAll(before), PrintAfterAll(after)]):
        Sequential([lift, touch])(make_module())
    assert before.getvalue() == ("# Before Lift (phase ingestion)\n<module ingestion>\n"
                                 "# Before Touch (phase optimization)\n<module optimization>\n")
    assert after.getvalue() == ("# After Lift (phase optimization)\n<module optimization>\n"
                                "# After Touch (phase optimization)\n<module optimization>\n")


def test_print_after_all_shows_the_bad_module_before_the_error():
    @module_pass(phases="all", name="Breaks")
    def breaks(mod, ctx):
        return mod.with_attr("broken", True)

    out = io.StringIO()
    with PassContext(instruments=[PrintAfterAll(out)]):
        with pytest.raises(WellFormedError):
            breaks(make_module())
    assert "# After Breaks" in out.getvalue()


def test_print_ir_pass(capsys):
    mod = make_module()
    with PassContext(verify="off"):
        assert PrintIR("checkpoint")(mod) is mod
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout is for the command's result alone
    assert captured.err == "# PrintIR checkpoint (phase ingestion)\n<module ingestion>\n"
    assert PrintIR(header="x").spec() == "PrintIR{header=x}"
    assert PrintIR().spec() == "PrintIR"


class FakeClock:
    """Advances by a fixed step on every reading."""

    def __init__(self, step=0.001):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_pass_timing_table():
    timing = PassTiming(clock=FakeClock())
    with PassContext(instruments=[timing]):
        Sequential([lift, touch, touch])(make_module())
    rows = {r.name: r for r in timing.rows()}
    assert list(rows) == ["Lift", "Touch"]
    assert rows["Lift"].calls == 1 and rows["Touch"].calls == 2
    assert rows["Lift"].phases == [Phase.INGESTION]
    assert rows["Touch"].phases == [Phase.OPTIMIZATION]
    assert rows["Lift"].seconds == pytest.approx(0.001)
    assert rows["Touch"].seconds == pytest.approx(0.002)
    assert rows["Touch"].share == pytest.approx(2 / 3)
    assert rows["Lift"].verify_calls == 2  # its fresh input, then its output
    assert rows["Touch"].verify_calls == 2
    assert timing.verify_seconds > 0
    assert timing.total_seconds == pytest.approx(0.003)
    text = timing.render()
    header = text.splitlines()[0].split()
    assert header[:4] == ["pass", "phase", "calls", "time"]
    assert "verify" in text.splitlines()[0]
    assert "Touch  optimization" in text
    assert "66.7%" in text and "verification:" in text.splitlines()[-1]


def test_pass_timing_counts_nested_calls_inside_their_caller():
    @module_pass(phases="all", name="Outer")
    def outer(mod, ctx):
        return touch(mod)

    timing = PassTiming(clock=FakeClock())
    with PassContext(instruments=[timing], verify="off"):
        outer(make_module())
    rows = {r.name: r for r in timing.rows()}
    assert rows["Outer"].seconds == pytest.approx(0.003)  # includes Touch's 0.001
    assert timing.total_seconds == pytest.approx(0.003)
    assert rows["Outer"].share == pytest.approx(1.0)


def test_pass_timing_survives_failures_and_resets_on_enter():
    @module_pass(phases="all", name="Fails")
    def fails(mod, ctx):
        raise ValueError("x")

    timing = PassTiming(clock=FakeClock())
    with PassContext(instruments=[timing], verify="off"):
        with pytest.raises(PassError):
            fails(make_module())
        touch(make_module())
    assert {r.name: r.calls for r in timing.rows()} == {"Fails": 1, "Touch": 1}
    with PassContext(instruments=[timing], verify="off"):
        pass
    assert timing.rows() == []


def test_pass_trace():
    trace = PassTrace()

    @module_pass(phases="all", name="Outer")
    def outer(mod, ctx):
        return touch(mod)

    with PassContext(instruments=[trace], verify="off"):
        Sequential([lift, fancy, outer])(make_module())
    assert [(e.name, e.status, e.phase_before, e.phase_after, e.depth) for e in trace.entries] == [
        ("Lift", "ran", Phase.INGESTION, Phase.OPTIMIZATION, 0),
        ("Fancy", "skipped", Phase.OPTIMIZATION, Phase.OPTIMIZATION, 0),
        ("Outer", "ran", Phase.OPTIMIZATION, Phase.OPTIMIZATION, 0),
        ("Touch", "ran", Phase.OPTIMIZATION, Phase.OPTIMIZATION, 1),
    ]
    assert trace.ran() == ["Lift", "Outer", "Touch"]
    assert trace.skipped() == [("Fancy", "opt_level 3 is above the context's opt_level 2")]
    text = trace.render()
    assert "ingestion -> optimization" in text and "skipped: opt_level 3" in text


def test_pass_trace_records_failures():
    trace = PassTrace()

    @module_pass(phases="all", name="Breaks")
    def breaks(mod, ctx):
        return mod.with_attr("broken", True)

    with PassContext(instruments=[trace]):
        with pytest.raises(WellFormedError):
            Sequential([touch, breaks])(make_module().with_attr("broken", True))
    # the input was already broken: Touch fails verifying its input, before running
    assert [(e.name, e.status) for e in trace.entries] == [("Touch", "failed")]
    assert "WellFormedError" in trace.entries[0].reason
    # a well-formed input: Breaks runs, then its result fails verification
    with PassContext(instruments=[trace]):
        with pytest.raises(WellFormedError):
            Sequential([touch, breaks])(make_module())
    assert [(e.name, e.status) for e in trace.entries] == [
        ("Touch", "ran"), ("Breaks", "ran"), ("Breaks", "failed")]
    assert "broken after Breaks" in trace.entries[-1].reason


def test_pass_instrument_decorator():
    @pass_instrument
    class SkipNamed:
        def __init__(self, name):
            self.name = name

        def should_run(self, mod, info):
            return info.name != self.name

    inst = SkipNamed("Touch")
    assert isinstance(inst, PassInstrument)
    mod = make_module()
    with PassContext(instruments=[inst]):
        assert touch(mod) is mod
    with pytest.raises(TypeError, match="defines none of the hooks"):
        pass_instrument(type("Empty", (), {}))
