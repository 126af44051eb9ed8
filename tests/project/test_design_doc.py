"""DESIGN.md's contributor paths hold: every file they name exists, and each
kind of contribution is found where its path says -- checked over everything
registered today, so a contribution that needs a second place fails here.

(The layer table of DESIGN.md is checked by test_layering.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers.paths import REPO

from phasec.frontend.onnx import supported_ops
from phasec.frontend.onnx._registry import CONVERTERS
from phasec.op.registry import LEGALIZE, list_ops
from phasec.te.schedules import RULES
from phasec.transform import pass_entries
from phasec.verifier import all_rules

DESIGN = (REPO / "DESIGN.md").read_text(encoding="utf-8")
PATHS = DESIGN.split("## Contributor paths", 1)[1].split("\n## ", 1)[0]


def _module_file(module: str) -> Path:
    parts = module.split(".")
    folder = {"verifier": "verifier", "passes": "passes"}.get(parts[1], None)
    rel = Path(folder, *parts[2:]) if folder else Path(*parts)
    return REPO / (str(rel) + ".py") if (REPO / (str(rel) + ".py")).exists() else \
        REPO / rel / "__init__.py"


def test_every_file_a_path_names_exists():
    named = re.findall(r"`([\w./*-]+/[\w./*-]*|[\w./*-]+\.py)`", PATHS)
    assert len(named) > 10
    missing = [n for n in named if not list(REPO.glob(n.rstrip("/")))]
    assert not missing, f"DESIGN.md names files that do not exist: {missing}"


def test_every_operator_lives_in_one_family_module():
    """Its inference and its lowering are in one module under phasec/op/, a
    family (not a shared helper: those start with an underscore)."""
    stray = []
    for op in list_ops():
        family = op.infer.__module__
        if not family.startswith("phasec.op.") or family.rpartition(".")[2].startswith("_"):
            stray.append(f"{op.name}: inferred in {family}")
        lowering = LEGALIZE.get(op.name)
        if lowering is not None and lowering.__module__ not in (family, "phasec.op.unary"):
            # phasec.op.unary's kernel factory builds the elementwise lowerings of
            # nn.activation's relu/gelu/silu from functions defined in that family
            stray.append(f"{op.name}: inferred in {family}, lowered in {lowering.__module__}")
        assert _module_file(family).is_file(), family
    assert not stray, "\n".join(stray)


def test_every_onnx_converter_is_an_entry_of_a_family_module():
    assert CONVERTERS and set(supported_ops()) >= set(CONVERTERS)
    stray = {name: c.fn.__module__ for name, c in CONVERTERS.items()
             if not re.fullmatch(r"phasec\.frontend\.onnx\.ops_\w+", c.fn.__module__)}
    assert not stray, stray


def test_every_schedule_is_a_module_of_te_schedules_and_a_row_of_the_table():
    kinds = {rule.kind for rule in RULES}
    assert kinds == {"nest", "conv", "conv_transpose", "pool"}
    for rule in RULES:
        module = rule.take.__module__
        assert module.startswith("phasec.te.schedules."), (rule.schedule, module)
        assert _module_file(module).is_file()
    modules = {p.stem for p in (REPO / "phasec" / "te" / "schedules").glob("*.py")}
    helpers = {"__init__", "build_time", "workloads", "pool_window", "gemm_prepack",
               "gemm_operands", "gemm_prefetch", "gemm_windows", "gemm_amx", "gemm_plan",
               "gemm_tile", "gemm_by_panel", "transposed_weights"}
    unused = modules - helpers - {rule.take.__module__.rpartition(".")[2] for rule in RULES}
    assert not unused, f"schedule modules no row of RULES takes: {sorted(unused)}"


def test_every_builtin_pass_is_one_module_of_passes():
    modules = [e.module for e in pass_entries() if e.module.startswith("phasec.passes.")]
    assert len(modules) >= 14
    assert all(m.count(".") == 2 and _module_file(m).is_file() for m in modules), modules


def test_every_rule_is_one_class_with_its_tvm_classification_and_cases():
    cases = REPO / "tests" / "verifier" / "cases"
    edited = (REPO / "tests" / "verifier" / "test_verifier_rules.py").read_text(encoding="utf-8")
    for rule in all_rules():
        assert type(rule).__module__.startswith("phasec.verifier.rules."), rule.code
        assert rule.tvm is not None, rule.code
        assert list(cases.glob(f"{rule.code.lower()}_*.py")) or f'"{rule.code}"' in edited, \
            f"{rule.code} has no cases"
