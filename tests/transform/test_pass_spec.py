"""The pass registry and textual pipelines (parse_pipeline / Sequential.spec)."""

from __future__ import annotations

import sys
import textwrap

import pytest
from hypothesis import given, strategies as st

from phasec.ir import Phase
from phasec.transform import (
    REGISTRY, PassConfigError, PassRegistry, Sequential, get_pass, get_pass_entry, list_passes,
    module_pass, parse_pipeline, register_pass,
)
from phasec.transform import registry as registry_module


@module_pass(phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION, name="SpecLift")
def spec_lift(mod, ctx):
    """Lift (test)."""
    return mod


@module_pass(opt_level=1, phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="SpecFold")
def spec_fold(mod, ctx):
    return mod


@module_pass(opt_level=2, phases=Phase.OPTIMIZATION, name="SpecFuse")
class SpecFuse:
    """Fuse (test) with options of every kind."""

    fuse_opt_level: int = -1
    ratio: float = 0.5
    mode: str = "auto"
    enabled: bool = True
    targets: tuple = ()
    until: Phase = Phase.OPTIMIZATION

    def transform_module(self, mod, ctx):
        return mod


@module_pass(phases=Phase.OPTIMIZATION, transition_to=Phase.LOWERING, name="SpecLegalize")
def spec_legalize(mod, ctx):
    return mod


@pytest.fixture(autouse=True)
def registry():
    with REGISTRY.scope() as reg:
        for p in (spec_lift, spec_fold, SpecFuse, spec_legalize):
            register_pass(p)
        yield reg


# -- parsing and printing --------------------------------------------------------
def test_round_trip():
    text = "SpecLift,SpecFold,SpecFuse{fuse_opt_level=2},SpecLegalize"
    seq = parse_pipeline(text)
    assert isinstance(seq, Sequential)
    assert [p.info.name for p in seq] == ["SpecLift", "SpecFold", "SpecFuse", "SpecLegalize"]
    assert seq.passes[2] == SpecFuse(fuse_opt_level=2)
    assert seq.spec() == text
    assert seq.validate(Phase.INGESTION) == Phase.LOWERING


def test_whitespace_and_normalisation():
    seq = parse_pipeline("  SpecLift ,\n SpecFuse { fuse_opt_level = 2 , mode = 'fast' } ")
    assert seq.spec() == "SpecLift,SpecFuse{fuse_opt_level=2,mode=fast}"


def test_option_values_are_converted_to_the_default_type():
    seq = parse_pipeline('SpecFuse{ratio=1, mode="a b", enabled=false, targets=[x86, "arm v8", 3],'
                         ' until=lowering}')
    p = seq.passes[0]
    assert p.ratio == 1.0 and isinstance(p.ratio, float)
    assert p.mode == "a b" and p.enabled is False
    assert p.targets == ("x86", "arm v8", 3)
    assert p.until is Phase.LOWERING
    assert seq.spec() == 'SpecFuse{ratio=1.0,mode="a b",enabled=false,targets=[x86,"arm v8",3],until=lowering}'
    assert parse_pipeline(seq.spec()).passes[0] == p


def test_empty_pipeline():
    seq = parse_pipeline("")
    assert len(seq) == 0 and seq.spec() == ""
    assert parse_pipeline("   ").spec() == ""


def test_defaults_are_not_printed():
    assert SpecFuse(fuse_opt_level=-1).spec() == "SpecFuse"
    assert SpecFuse(mode="auto", ratio=0.25).spec() == "SpecFuse{ratio=0.25}"


@given(level=st.integers(-10**6, 10**6),
       ratio=st.floats(allow_nan=False, allow_infinity=False),
       mode=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
       enabled=st.booleans())
def test_spec_round_trips_any_option_values(level, ratio, mode, enabled):
    with REGISTRY.scope():
        register_pass(SpecFuse, override=True)
        p = SpecFuse(fuse_opt_level=level, ratio=ratio, mode=mode, enabled=enabled)
        assert parse_pipeline(p.spec()).passes[0] == p


# -- errors ---------------------------------------------------------------------
def test_unknown_pass_lists_known_ones():
    with pytest.raises(PassConfigError) as err:
        parse_pipeline("SpecLift,SpecFus,SpecLegalize")
    msg = str(err.value)
    assert "column 10" in msg and "unknown pass 'SpecFus'" in msg
    assert "did you mean SpecFuse" in msg
    assert "known passes:" in msg and "SpecFold" in msg and "SpecLegalize" in msg
    assert msg.splitlines()[-1] == "           ^"  # caret under the name
    assert isinstance(err.value, ValueError)


def test_unknown_option_lists_options():
    with pytest.raises(PassConfigError) as err:
        parse_pipeline("SpecFuse{fuse_level=2}")
    msg = str(err.value)
    assert "pass SpecFuse has no option 'fuse_level'" in msg
    assert "fuse_opt_level=-1" in msg and 'mode="auto"' not in msg and "mode=auto" in msg
    with pytest.raises(PassConfigError, match="SpecFold has no option 'x'; its options: \\(none\\)"):
        parse_pipeline("SpecFold{x=1}")


@pytest.mark.parametrize("text, match", [
    ("SpecFuse{fuse_opt_level=high}", "fuse_opt_level of SpecFuse expects an integer"),
    ("SpecFuse{fuse_opt_level=1.5}", "expects an integer"),
    ("SpecFuse{enabled=1}", "expects true or false"),
    ("SpecFuse{mode=3}", "expects a string"),
    ("SpecFuse{targets=x}", "expects a list"),
    ("SpecFuse{until=later}", "expects a phase"),
    ("SpecFuse{fuse_opt_level=1,fuse_opt_level=2}", "given twice"),
    ("SpecLift,,SpecFold", "column 10: expected a pass name, found ','"),
    ("SpecLift SpecFold", "expected ',' between passes, found 'SpecFold'"),
    ("SpecFuse{fuse_opt_level=}", "expected a value, found '}'"),
    ("SpecFuse{fuse_opt_level=1", "expected ',' or '}' after an option, found 'end of text'"),
    ("SpecFuse{fuse_opt_level 1}", "expected '=' after option fuse_opt_level"),
    ("SpecLift;SpecFold", "column 9: unexpected character ';'"),
    ("SpecFuse{mode='open}", "unexpected character"),
    ("SpecLift,", "expected a pass name, found 'end of text'"),
])
def test_syntax_and_type_errors(text, match):
    with pytest.raises(PassConfigError, match=match):
        parse_pipeline(text)


def test_spec_must_be_a_string():
    with pytest.raises(PassConfigError, match="is a string"):
        parse_pipeline(["SpecLift"])


# -- registry -------------------------------------------------------------------
def test_get_pass_and_list():
    assert {"SpecLift", "SpecFuse", "PrintIR"} <= set(list_passes())
    assert list_passes() == sorted(list_passes())
    assert get_pass("SpecFuse", fuse_opt_level=3) == SpecFuse(fuse_opt_level=3)
    assert get_pass("SpecLift") is spec_lift
    entry = get_pass_entry("SpecFuse")
    assert entry.info.opt_level == 2
    assert entry.doc == "Fuse (test) with options of every kind."
    assert entry.option_defaults["fuse_opt_level"] == -1


def test_get_pass_errors():
    with pytest.raises(PassConfigError, match="unknown pass 'Nope'.*known passes: .*SpecFuse"):
        get_pass("Nope")
    with pytest.raises(PassConfigError, match="has no option 'bogus'; its options: fuse_opt_level=-1"):
        get_pass("SpecFuse", bogus=1)
    with pytest.raises(PassConfigError, match="takes no options|has no option"):
        get_pass("SpecLift", x=1)


def test_register_duplicates_and_override():
    @module_pass(phases="all", name="SpecFold")
    def other_fold(mod, ctx):
        return mod

    with pytest.raises(PassConfigError, match="already registered"):
        register_pass(other_fold)
    register_pass(other_fold, override=True)
    assert get_pass("SpecFold") is other_fold
    register_pass(SpecFuse)  # the same object again is fine


def test_register_checks_names_and_kinds():
    with pytest.raises(PassConfigError, match="registered name must be the pass's info.name"):
        register_pass(SpecFuse, name="Other")
    with pytest.raises(PassConfigError, match="not a pass class"):
        register_pass(int)
    with pytest.raises(PassConfigError, match="needs name=..."):
        register_pass(lambda: spec_fold)


def test_register_factory_functions():
    @register_pass(name="SpecFold", override=True)
    def make_fold():
        return spec_fold

    assert get_pass_entry("SpecFold").factory is make_fold
    assert get_pass("SpecFold") is spec_fold
    register_pass(lambda: 3, name="Bad", override=True)
    with pytest.raises(PassConfigError, match="returned int, not a Pass"):
        get_pass("Bad")
    register_pass(lambda: spec_fold, name="Mismatch")
    with pytest.raises(PassConfigError, match="made a pass named SpecFold"):
        get_pass("Mismatch")


def test_decorator_form_of_register_pass():
    @register_pass
    @module_pass(phases="all", name="SpecDecorated")
    class SpecDecorated:
        def transform_module(self, mod, ctx):
            return mod

    assert isinstance(get_pass("SpecDecorated"), SpecDecorated)


# -- lazy loading of the passes package ---------------------------------------------
def _write_package(tmp_path, name, body):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))


def test_passes_package_is_loaded_on_first_query(tmp_path, monkeypatch):
    _write_package(tmp_path, "fake_passes_pkg", """
        from phasec.transform import module_pass
        from phasec.transform import registry
        @module_pass(phases="all", name="FromPackage")
        def from_package(mod, ctx):
            return mod
        registry._TEST_TARGET.register(from_package)
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = PassRegistry(package="fake_passes_pkg")
    monkeypatch.setattr(registry_module, "_TEST_TARGET", reg, raising=False)
    assert "fake_passes_pkg" not in sys.modules
    assert reg.names() == ["FromPackage"]
    assert "fake_passes_pkg" in sys.modules
    monkeypatch.delitem(sys.modules, "fake_passes_pkg")


def test_missing_passes_package_is_not_an_error():
    assert PassRegistry(package="no_such_package_anywhere").names() == []


def test_broken_pass_module_fails_loudly(tmp_path, monkeypatch):
    _write_package(tmp_path, "broken_passes_pkg", "import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = PassRegistry(package="broken_passes_pkg")
    for _ in range(2):  # and again on the next query, not an empty registry
        with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
            reg.names()


def test_passes_package_exports_every_registered_pass_by_name():
    # `from phasec import passes; passes.LambdaLifting()` reads like TVM's relax.transform.LambdaLift().
    from phasec import passes

    from phasec.transform import get_pass, pass_entries

    builtin = [e.name for e in pass_entries() if e.module.startswith("phasec.passes.")]
    assert len(builtin) >= 14
    for name in builtin + ["PrintIR"]:
        made = getattr(passes, name)()
        assert made.info.name == name
        assert made.spec() == get_pass(name).spec()
    assert passes.FuseOps(fuse_opt_level=2).spec() == "FuseOps{fuse_opt_level=2}"
    assert set(builtin) <= set(passes.__all__)
