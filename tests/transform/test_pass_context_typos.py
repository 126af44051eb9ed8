"""PassContext typos are errors with a "did you mean" (issue 32, item 8):
unknown pass names in disabled_pass/required_pass and unknown config keys
(TVM 0.27 rejects unknown config keys too), checked when the context is
made, against the passes and config options declared by then."""

from __future__ import annotations

import subprocess
import sys

import pytest

from phasec.transform import (
    REGISTRY, PassConfigError, PassContext, Sequential, config_options, module_pass,
    parse_pipeline, register_config_option, register_pass,
)


@pytest.mark.parametrize("setting", ["disabled_pass", "required_pass"])
def test_misspelled_pass_name_is_an_error(setting: str):
    with pytest.raises(PassConfigError) as info:
        PassContext(**{setting: ["FoldConstant", "LegalizeOp"]})
    message = str(info.value)
    # (passes other tests declare may be suggested too: LegalizeOps comes first)
    assert message.startswith(f"PassContext({setting}=...): unknown pass 'LegalizeOp' "
                              "(did you mean LegalizeOps")
    assert "known passes:" in message and "FuseOps" in message


def test_same_wording_as_pipeline_specs():
    with pytest.raises(PassConfigError) as spec:
        parse_pipeline("LegalizeOp")
    with pytest.raises(PassConfigError) as ctx:
        PassContext(disabled_pass="LegalizeOp")
    phrase = "unknown pass 'LegalizeOp' (did you mean LegalizeOps"
    assert phrase in str(spec.value) and phrase in str(ctx.value)


def test_misspelled_config_key_is_an_error():
    with pytest.raises(PassConfigError) as info:
        PassContext(config={"FuseOps.rulez": "tvm"})
    message = str(info.value)
    assert "unknown config option 'FuseOps.rulez' (did you mean FuseOps.rules?)" in message
    assert "register_config_option" in message
    with pytest.raises(PassConfigError, match="keys are option names"):
        PassContext(config={3: "x"})


def test_known_names_and_keys_are_accepted():
    ctx = PassContext(disabled_pass=["LegalizeOps"], required_pass="FoldConstant",
                      config={"FuseOps.rules": "tvm"})
    assert ctx.disabled_pass == {"LegalizeOps"} and dict(ctx.config) == {"FuseOps.rules": "tvm"}
    assert "FuseOps.rules" in config_options()
    # replace() re-checks, and keeps what was valid
    assert ctx.replace(opt_level=3).config["FuseOps.rules"] == "tvm"


def test_user_passes_and_options_declared_before_the_context():
    with pytest.raises(PassConfigError, match="unknown pass 'NewcomerLater'"):
        PassContext(disabled_pass=["NewcomerLater"])

    @module_pass(phases="all", name="NewcomerLater")
    def later(mod, ctx):
        return mod

    assert PassContext(disabled_pass=["NewcomerLater"]).disabled_pass == {"NewcomerLater"}

    with REGISTRY.scope():  # a factory function registered under a name
        register_pass(lambda: later, name="NewcomerLater")
        PassContext(required_pass=["NewcomerLater"])
    inner = Sequential([later], name="NewcomerInner")
    assert inner.info.name == "NewcomerInner"
    PassContext(disabled_pass=["NewcomerInner"])  # a Sequential by its name

    with pytest.raises(PassConfigError, match="unknown config option 'Newcomer.level'"):
        PassContext(config={"Newcomer.level": 2})
    assert register_config_option("Newcomer.level", "how hard") == "Newcomer.level"
    assert PassContext(config={"Newcomer.level": 2}).config["Newcomer.level"] == 2
    assert config_options()["Newcomer.level"] == "how hard"
    with pytest.raises(PassConfigError, match="non-empty str"):
        register_config_option("")


def test_a_default_context_does_not_import_the_passes():
    code = ("import sys\nfrom phasec.transform import PassContext\n"
            "PassContext(opt_level=3, verify='off')\n"
            "assert 'phasec.passes' not in sys.modules, 'imported the passes'\n"
            "PassContext(disabled_pass=['FuseOps'])\n"
            "assert 'phasec.passes' in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_rule_is_documented():
    doc = " ".join(PassContext.__doc__.split())
    assert "checked here, when the context is made" in doc
    assert "register_config_option" in doc
