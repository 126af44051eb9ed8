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

from helpers.tir_kernels import scoped_kernel
from helpers.tvm_stages import tvm_text

EXAMPLES = sorted((Path(phasec.__file__).parent / "examples").glob("*.py"))


class _Stages(transform.PassInstrument):
    """The module after every pass."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, phasec.IRModule]] = []

    def run_after_pass(self, mod, info) -> None:
        self.stages.append((info.name, mod))



def _tvm_accepts(text: str) -> None:
    mod = tvm.script.from_source(text)
    assert relax.analysis.check_well_formed(mod), "TVM's check_well_formed returned False"


#: Operators that index by data: their kernels check every index read from a
#: tensor (phasec's checked_index, which TVM's syntax spells as an external call).
DATA_INDEXED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 5), "float32"), i: R.Tensor((3,), "int64"),
             j: R.Tensor((4, 2), "int64")):
        a = R.take(x, i, axis=1)
        b = R.gather_elements(x, j, axis=1)
        c = R.scatter_elements(x, j, R.multiply(b, R.const(2.0, "float32")), axis=1)
        return (a, c)
"""
#: What once printed in a form TVM 0.27 refuses: R.meshgrid of one tensor (a
#: one-field tuple result: TVM's call_tir gives one output a tensor result),
#: R.zeros of a shape only the output names (tir_vars, which TVM's call_tir
#: lacks; n * 2 needs a scalar kernel parameter), batch_norm (a row accumulator
#: whose scope ended before the kernel's list), R.stop_fusion (no TVM operator).
ONCE_REFUSED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), s: R.Tensor((2, 3, 4), "float32"),
             g: R.Tensor((3,), "float32")):
        n = T.int64()
        grid = R.meshgrid((x,), indexing="ij")
        z = R.zeros(R.shape([n]), "float32")
        z2 = R.zeros(R.shape([n * 2]), "float32")
        bn = R.nn.batch_norm(s, g, g, g, g, axis=1)
        barrier = R.stop_fusion(z)
        return (grid, z2, bn, barrier)
"""
MODULES = {p.stem: p for p in EXAMPLES} | {"data_indexed": DATA_INDEXED,
                                            "once_refused": ONCE_REFUSED}


def _load(name: str) -> phasec.IRModule:
    source = MODULES[name]
    return phasec.load(str(source)) if isinstance(source, Path) else phasec.parse(source)


@pytest.mark.parametrize("name", MODULES)
def test_every_pipeline_stage_is_accepted_by_tvm(name: str) -> None:
    mod = _load(name)
    grab = _Stages()
    grab.stages.append(("input", mod))
    lower(mod, instruments=[grab])
    assert len(grab.stages) > 10  # every pass of the default pipeline
    failures, read_texts, read_kernels = [], set(), set()
    for name, stage in grab.stages:
        text = stage.script()
        if text in read_texts:
            continue  # a pass that changed nothing: TVM has read this text already
        read_texts.add(text)
        try:  # (kernels TVM read whole in an earlier stage as signatures)
            _tvm_accepts(tvm_text(stage, read_kernels))
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


def test_checked_indices_survive_the_tvm_spelling() -> None:
    """TVM's syntax spells checked_index as T.call_pure_extern(...): read back,
    the kernel still refuses an index out of range, and both spellings give
    the same module."""
    import numpy as np

    low = lower(_load("data_indexed"))
    text = low.script()
    assert '"phasec_checked_index"' in text and "T.checked_index(" not in text
    assert "T.checked_index(" in low.script(syntax="legacy")
    back = phasec.parse(text)
    phasec.ir.assert_structural_equal(back, phasec.parse(low.script(syntax="legacy")))
    vm = phasec.VirtualMachine(phasec.build(back))["main"]
    x = np.arange(20, dtype="float32").reshape(4, 5)
    j = np.array([[0, 4], [1, 3], [2, 2], [4, 0]], "int64")
    i = np.array([4, 0, -1])
    want_c = x.copy()
    np.put_along_axis(want_c, j, 2 * np.take_along_axis(x, j, axis=1), axis=1)
    a, c = vm(x, i, j)
    np.testing.assert_array_equal(np.asarray(a), x[:, i])
    np.testing.assert_array_equal(np.asarray(c), want_c)
    with pytest.raises(phasec.errors.PhasecError, match="index 5 is out of range"):
        vm(x, np.array([0, 5, 1]), j)


def test_tvm_reads_a_scoped_allocation_and_let_inside_the_scope_attribute() -> None:
    # A TIR allocation or let that statements outside its scope follow:
    # TVM 0.27 has no scoped form (it refuses `with T.decl_buffer(...) as b:`
    # and `with T.LetStmt(...)`); phasec's text puts it in a phasec.scope
    # attribute statement, which TVM parses, and keeps it inside.
    text = phasec.IRModule({"kernel": scoped_kernel(mixed_dtype_let=False)}).script()
    assert text.count('with T.attr({"phasec.scope": T.bool(True)}):') == 2
    mod = tvm.script.from_source(text)
    assert tvm.tirx.analysis.verify_well_formed(mod["kernel"])
    printed = mod.script()
    assert printed.index('T.attr({"phasec.scope": T.bool(True)})') < printed.index("acc = T.alloc_buffer")
    # and phasec reads TVM's print of it back as the kernel it printed
    back = phasec.parse(printed)["kernel"]
    assert phasec.IRModule({"kernel": back}).script() == text

