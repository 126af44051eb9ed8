"""What phasec prints is what TVM 0.27 parses: every stage of phasec's default
pipeline, for every bundled example, is read by TVM's own TVMScript parser and
passes TVM's well-formedness check (TVM is the independent reference here;
the test extra installs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import phasec
from phasec import transform
from phasec.pipeline import lower

import tvm  # the test extra installs apache-tvm (phasec[tvm]): no silent skip
from tvm import relax

EXAMPLES = sorted((Path(phasec.__file__).parent / "examples").glob("*.py"))


class _StageTexts(transform.PassInstrument):
    """The module text after every pass."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, str]] = []

    def run_after_pass(self, mod, info) -> None:
        self.stages.append((info.name, mod.script()))


def _tvm_accepts(text: str) -> None:
    mod = tvm.script.from_source(text)
    assert relax.analysis.check_well_formed(mod), "TVM's check_well_formed returned False"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_pipeline_stage_is_accepted_by_tvm(example: Path) -> None:
    mod = phasec.load(str(example))
    grab = _StageTexts()
    grab.stages.append(("input", mod.script()))
    lower(mod, instruments=[grab])
    assert len(grab.stages) > 10  # every pass of the default pipeline
    failures = []
    for name, text in grab.stages:
        try:
            _tvm_accepts(text)
        except Exception as exc:  # noqa: BLE001 - collect every stage's verdict
            failures.append(f"after {name}: {str(exc).strip().splitlines()[-1][:300]}")
    assert not failures, "\n".join(failures)


def test_tvm_reads_the_module_the_cli_writes(tmp_path: Path) -> None:
    out = tmp_path / "low.py"
    example = next(p for p in EXAMPLES if p.stem == "mlp")
    subprocess.run([sys.executable, "-m", "phasec", "opt", str(example), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    _tvm_accepts(out.read_text())


def test_cli_legacy_syntax_prints_the_pre_027_spelling(tmp_path: Path) -> None:
    example = next(p for p in EXAMPLES if p.stem == "mlp")
    legacy = subprocess.run([sys.executable, "-m", "phasec", "opt", str(example),
                             "--syntax", "legacy"], check=True, capture_output=True,
                            text=True).stdout
    assert "# from tvm.script import tir as T" in legacy
    assert 'with T.block("' in legacy and "T.sblock" not in legacy
    assert '"tir.noalias"' in legacy and "s_tir" not in legacy
    # Both spellings read back to the same module.
    default = subprocess.run([sys.executable, "-m", "phasec", "opt", str(example)], check=True,
                             capture_output=True, text=True).stdout
    assert default != legacy
    phasec.ir.assert_structural_equal(phasec.parse(legacy), phasec.parse(default))
