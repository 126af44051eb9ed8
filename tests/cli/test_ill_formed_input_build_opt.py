"""``phasec build`` and ``phasec opt`` check an ill-formed input as ``phasec
run`` does (issue 32, item 9): the input's error as phasec-check reports it,
with its source line and caret, naming no pass."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from phasec.cli import main
from phasec.verifier.cli import main as check_main

ILL_FORMED = '''\
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), z: R.Tensor((3,), "float32")):
        y = R.add(x, z)
        return y
'''


@pytest.mark.parametrize("command", [["build", "-o", "{out}.pvm"], ["opt"],
                                     ["opt", "--passes", "LambdaLifting"]])
def test_build_and_opt_report_the_input_like_phasec_check(capsys, tmp_path: Path, command):
    path = tmp_path / "model.py"
    path.write_text(ILL_FORMED)
    argv = [c.format(out=tmp_path / "model") for c in command]
    code = main([argv[0], str(path), *argv[1:]])
    out, err = capsys.readouterr()
    assert code == 1
    assert "Normalize" not in err and "after pass" not in err and "Traceback" not in err
    head, *diagnostic = err.rstrip("\n").splitlines()
    assert head == (f"phasec {argv[0]}: error: {path} is not well-formed at phase ingestion "
                    "(checked before any pass ran): 1 error")
    checked = io.StringIO()
    assert check_main([str(path)], stdout=checked, stderr=io.StringIO()) == 1
    assert diagnostic == checked.getvalue().splitlines()[:-1]
    assert not (tmp_path / "model.pvm").exists()
