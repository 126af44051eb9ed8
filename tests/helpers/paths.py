"""The repository's folders the tests read files from."""

from __future__ import annotations

from pathlib import Path

#: the tests/ folder
TESTS = Path(__file__).resolve().parents[1]
#: the repository root (README.md, PHASES.md, pyproject.toml)
REPO = TESTS.parent
#: TVMScript modules and data files several test folders read
FIXTURES = TESTS / "fixtures"
#: one good and one bad TVMScript module per verifier rule
VERIFIER_CASES = TESTS / "verifier" / "cases"
#: before/after TVMScript cases of the passes (see helpers.pass_cases)
PASS_CASES = TESTS / "passes" / "cases"
#: the fuzzing properties as plain hypothesis tests, what HypoFuzz runs
FUZZ_TARGETS = TESTS / "testing" / "fuzz_targets.py"
