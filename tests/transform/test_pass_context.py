"""PassContext: defaults, nesting, contextvar scoping, validation, instruments."""

from __future__ import annotations

import asyncio
import threading

import pytest

from phasec.ir import Phase
from phasec.transform import (
    PassConfigError, PassContext, PassInfo, PassInstrument, VERIFY_MODES, module_pass,
    register_config_option,
)

# Config keys are checked against the registered options (issue 32).
register_config_option("relax.FuseOps.max_depth")
register_config_option("key")
register_config_option("a")


def test_defaults():
    ctx = PassContext()
    assert ctx.opt_level == 2
    assert ctx.disabled_pass == frozenset() and ctx.required_pass == frozenset()
    assert ctx.instruments == ()
    assert dict(ctx.config) == {}
    assert ctx.verify == "each"
    assert VERIFY_MODES == ("each", "transitions", "off")


def test_current_outside_any_context_is_a_default():
    ctx = PassContext.current()
    assert ctx.opt_level == 2 and ctx.verify == "each"
    assert PassContext.current() is ctx


def test_nesting_and_reentry():
    outer = PassContext(opt_level=1)
    inner = PassContext(opt_level=3, verify="off")
    default = PassContext.current()
    with outer as got:
        assert got is outer and PassContext.current() is outer
        with inner:
            assert PassContext.current() is inner
            with outer:  # the same context entered again
                assert PassContext.current() is outer
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    assert PassContext.current() is default


def test_context_restored_after_exception():
    default = PassContext.current()
    with pytest.raises(RuntimeError):
        with PassContext(opt_level=0):
            raise RuntimeError("boom")
    assert PassContext.current() is default


def test_threads_do_not_share_the_current_context():
    seen = {}
    entered = threading.Event()
    release = threading.Event()

    def worker():
        with PassContext(opt_level=0):
            entered.set()
            release.wait(5)
            seen["worker"] = PassContext.current().opt_level

    t = threading.Thread(target=worker)
    t.start()
    entered.wait(5)
    seen["main"] = PassContext.current().opt_level
    release.set()
    t.join(5)
    assert seen == {"main": 2, "worker": 0}


def test_asyncio_tasks_have_their_own_context():
    async def task(level):
        with PassContext(opt_level=level):
            await asyncio.sleep(0)
            return PassContext.current().opt_level

    async def main():
        return await asyncio.gather(task(0), task(1), task(3))

    assert asyncio.run(main()) == [0, 1, 3]


@pytest.mark.parametrize("kwargs, match", [
    ({"opt_level": -1}, "opt_level"),
    ({"opt_level": "2"}, "opt_level"),
    ({"opt_level": True}, "opt_level"),
    ({"verify": "sometimes"}, "not a verify mode.*'each', 'transitions', 'off'"),
    ({"instruments": [object()]}, "takes PassInstrument objects"),
    ({"config": [1, 2]}, "must be a mapping"),
    ({"disabled_pass": [1]}, "takes pass names"),
    ({"disabled_pass": 3}, "takes a list of pass names"),
    ({"instruments": 3}, "takes a list of PassInstrument objects"),
])
def test_invalid_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(PassConfigError, match=match):
        PassContext(**kwargs)
    assert issubclass(PassConfigError, ValueError)


def test_verify_accepts_booleans_and_single_names():
    assert PassContext(verify=True).verify == "each"
    assert PassContext(verify=False).verify == "off"
    assert PassContext(disabled_pass="FuseOps").disabled_pass == {"FuseOps"}


def test_config_is_a_read_only_copy():
    cfg = {"relax.FuseOps.max_depth": 4}
    ctx = PassContext(config=cfg)
    cfg["other"] = 1
    assert dict(ctx.config) == {"relax.FuseOps.max_depth": 4}
    with pytest.raises(TypeError):
        ctx.config["x"] = 1  # type: ignore[index]


def test_passes_see_the_current_context():
    seen = []

    @module_pass(phases="all", name="Peek")
    def peek(mod, ctx):
        seen.append((ctx, ctx.config.get("key")))
        return mod

    from phasec.ir import IRModule

    ctx = PassContext(config={"key": "value"}, verify="off")
    with ctx:
        peek(IRModule())
    assert seen == [(ctx, "value")]


def test_pass_enabled_follows_tvm():
    info = PassInfo("P", opt_level=2, phases=Phase.OPTIMIZATION)
    assert PassContext(opt_level=2).pass_enabled(info) == (True, "")
    ok, why = PassContext(opt_level=1).pass_enabled(info)
    assert not ok and "opt_level 2 is above the context's opt_level 1" in why
    assert PassContext(opt_level=1, required_pass=["P"]).pass_enabled(info)[0]
    # disabled beats required
    assert not PassContext(disabled_pass=["P"], required_pass=["P"]).pass_enabled(info)[0]


def test_replace():
    ctx = PassContext(opt_level=1, config={"a": 1})
    new = ctx.replace(verify="off")
    assert new.verify == "off" and new.opt_level == 1 and dict(new.config) == {"a": 1}
    assert ctx.verify == "each"
    with pytest.raises(PassConfigError, match="no setting 'colour'"):
        ctx.replace(colour="red")


class Recorder(PassInstrument):
    def __init__(self, log, name, fail_enter=False):
        self.log, self.name, self.fail_enter = log, name, fail_enter

    def enter_pass_ctx(self):
        if self.fail_enter:
            raise RuntimeError("cannot enter")
        self.log.append(f"enter {self.name}")

    def exit_pass_ctx(self):
        self.log.append(f"exit {self.name}")


def test_instruments_entered_and_exited():
    log = []
    ctx = PassContext(instruments=[Recorder(log, "a"), Recorder(log, "b")])
    with ctx:
        log.append("body")
    assert log == ["enter a", "enter b", "body", "exit a", "exit b"]


def test_failing_enter_exits_the_entered_ones_and_restores_context():
    log = []
    default = PassContext.current()
    ctx = PassContext(instruments=[Recorder(log, "a"), Recorder(log, "b", fail_enter=True)])
    with pytest.raises(RuntimeError, match="cannot enter"):
        with ctx:
            log.append("body")
    assert log == ["enter a", "exit a"]
    assert PassContext.current() is default
