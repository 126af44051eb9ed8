"""PHASES.md is generated from the code and must not drift from it."""

from __future__ import annotations

import pytest

from phasec import phases_doc
from phasec.ir import Phase
from phasec.transform import REGISTRY, module_pass, pass_entries, register_pass

from helpers.paths import REPO


PHASES_MD = REPO / "PHASES.md"


def test_phases_md_is_up_to_date():
    path = PHASES_MD
    assert path.exists(), f"{path} is missing: run `{phases_doc.REGENERATE_COMMAND}`"
    current = path.read_text(encoding="utf-8")
    if phases_doc.render(current) != current:
        pytest.fail(f"PHASES.md is out of date with the pass registry or the verifier's "
                    f"rules: regenerate it with `{phases_doc.REGENERATE_COMMAND}`")


def test_documents_every_registered_pass_and_every_phase():
    text = PHASES_MD.read_text(encoding="utf-8")
    for entry in pass_entries():
        assert f"| `{entry.name}` |" in text
    for phase in Phase:
        assert f"`{phase.label}`" in text
    for marker in ("phases", "transitions", "passes", "rules"):
        assert f"<!-- BEGIN GENERATED: {marker} -->" in text


def test_pass_rows_show_phases_transition_opt_level_required_and_options():
    with REGISTRY.scope():
        @register_pass
        @module_pass(opt_level=2, phases=[Phase.OPTIMIZATION, Phase.LOWERING],
                     required=["PrintIR"], name="DocDemo")
        class DocDemo:
            """Demonstrates the passes table."""

            depth: int = 3

            def transform_module(self, mod, ctx):
                return mod

        @register_pass
        @module_pass(phases=Phase.OPTIMIZATION, transition_to=Phase.LOWERING,
                     name="DocLegalize")
        def doc_legalize(mod, ctx):
            """Legalize (doc test)."""
            return mod

        sections = phases_doc.generate_sections()
    row = next(line for line in sections["passes"].splitlines() if "`DocDemo`" in line)
    assert row == ("| `DocDemo` | module | optimization or lowering | - | 2 | `PrintIR` | "
                   "`depth=3` | Demonstrates the passes table. |")
    row = next(line for line in sections["passes"].splitlines() if "`DocLegalize`" in line)
    assert "| -> lowering | 0 |" in row
    assert "| `DocLegalize` | optimization | lowering | 0 | registered |" in sections["transitions"]
    assert "`DocLegalize`" in sections["phases"]


def test_rules_section_lists_the_verifier_rules():
    from phasec import verifier

    rows = verifier.rules_table()
    section = phases_doc.generate_sections()["rules"]
    for code, _phase, _title in rows:
        assert f"| `{code}` |" in section


def test_regeneration_keeps_prose_and_appends_missing_sections():
    fresh = phases_doc.render(None)
    edited = fresh.replace("## Passes\n", "## Passes\n\nFusion is not inlining: prose.\n")
    edited = edited.replace("| `PrintIR` |", "| `Stale` |")
    regenerated = phases_doc.render(edited)
    assert "Fusion is not inlining: prose." in regenerated
    assert "`Stale`" not in regenerated and "| `PrintIR` |" in regenerated
    start = regenerated.index("<!-- BEGIN GENERATED: rules -->")
    end = regenerated.index("<!-- END GENERATED: rules -->") + len("<!-- END GENERATED: rules -->")
    without_rules = regenerated[:start] + regenerated[end:]
    restored = phases_doc.render(without_rules)
    assert restored.count("<!-- BEGIN GENERATED: rules -->") == 1
    assert phases_doc.render(restored) == restored  # stable


def test_command_line_check_and_write(tmp_path):
    target = tmp_path / "PHASES.md"
    messages = []
    assert phases_doc.main(["--check", "--output", str(target)], out=messages.append) == 1
    assert "regenerate it with `python -m phasec.phases_doc`" in messages[-1]
    assert phases_doc.main(["--output", str(target)], out=messages.append) == 0
    assert target.exists()
    assert phases_doc.main(["--check", "--output", str(target)], out=messages.append) == 0
    target.write_text(target.read_text().replace("PrintIR", "Gone"))
    assert phases_doc.main(["--check", "--output", str(target)], out=messages.append) == 1


def test_documents_every_operator_with_its_family_and_lowering():
    from phasec.op import list_ops

    text = PHASES_MD.read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].removeprefix("| ").strip("`"): line
            for line in text.splitlines() if line.startswith("| `R.")}
    for op in list_ops():
        assert op.script_name in rows, op.name
    assert "| create |" in rows["R.arange"] and "kernel (TE)" in rows["R.arange"]
    assert "VM builtin / packed call" in rows["R.shape_of"]
    assert "| no |" in rows["R.print"]
    assert "stays (a vm builtin" in rows["R.vm.alloc_storage"]
