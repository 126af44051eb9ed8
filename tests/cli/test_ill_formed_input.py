"""An ill-formed input as a newcomer meets it (issue 32, item 9).

``phasec run`` on a module that is ill-formed before any pass runs used to
blame (and then exonerate) Normalize, showed no source line, and its report
marked Normalize FAILED; a follow-on WF401 came before the real WF405. Now
the input's errors are reported as phasec-check reports them, naming no pass,
and consequences of an error are not reported before (or besides) it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import phasec
from phasec import verifier
from phasec.cli import main
from phasec.errors import WellFormedError
from phasec.ir import Call, Function, IRModule, Op, SeqExpr, Var
from phasec.ir.struct_info import TensorStructInfo
from phasec.script.json_format import to_json
from phasec.verifier.cli import main as check_main
from phasec.verifier.inputs import check_input

#: WF405 (shapes that do not broadcast); with a return annotation or without.
ILL_FORMED = '''\
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), z: R.Tensor((3,), "float32")){ret}:
        y = R.add(x, z)
        return y
'''
ANNOTATED = ' -> R.Tensor((4,), "float32")'


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def check_cli(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    status = check_main([str(path)], stdout=out, stderr=io.StringIO())
    return status, out.getvalue()


@pytest.fixture(params=["", ANNOTATED], ids=["unannotated", "annotated"])
def ill_formed(request, tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(ILL_FORMED.format(ret=request.param))
    return path


def test_run_reports_the_input_like_phasec_check(capsys, ill_formed: Path):
    code, out, err = run_cli(capsys, "run", ill_formed)
    assert code == 1
    assert "Normalize" not in out + err and "after pass" not in err and "to blame" not in err
    assert "FAILED" not in out and "passes (" not in out  # no pass ran, none is listed
    head, *diagnostic = err.rstrip("\n").splitlines()
    assert head == (f"phasec run: error: {ill_formed} is not well-formed at phase ingestion "
                    "(checked before any pass ran): 1 error")
    # the diagnostic, its source line and caret, and its help: phasec-check's very text
    status, checked = check_cli(ill_formed)
    assert status == 1
    assert diagnostic == checked.splitlines()[:-1]  # (phasec-check ends with its summary)
    assert diagnostic[0].startswith(f"{ill_formed}:9:13: error[WF405]: R.add(x, z)")
    assert diagnostic[1].strip() == "y = R.add(x, z)" and diagnostic[2].strip() == "^~~~~~~~~~~"
    assert diagnostic[3].startswith("  help: ")


def test_run_report_names_no_pass(capsys, ill_formed: Path, tmp_path: Path):
    report = tmp_path / "report.json"
    code, _, _ = run_cli(capsys, "run", ill_formed, "--report", report)
    assert code == 1
    doc = json.loads(report.read_text())
    assert doc["steps"] == []  # no pass ran, so none failed
    assert doc["error"]["kind"] == "WellFormedError" and doc["error"]["pass"] is None
    assert "error[WF405]" in doc["error"]["message"]


def test_the_real_error_comes_first_and_alone(ill_formed: Path):
    # the function's missing return struct info is a consequence of WF405
    diags = verifier.check(phasec.load(ill_formed))
    assert [d.code for d in diags] == ["WF405"]


def test_missing_return_struct_info_comes_after_what_it_follows_from():
    # IR built by hand: a body that is a call (not A-normal form) whose struct
    # info is unknown; the function's return is unknown as a consequence
    x = Var("x", TensorStructInfo((2,), "float32"))
    mod = IRModule({"main": Function([x], SeqExpr([], Call(Op("relax.add"), [x, x])), None)})
    diags = verifier.check(mod)
    assert [d.code for d in diags] == ["WF101", "WF401"]
    assert diags[1].message == "function has no return struct info"
    assert "-> R.Tensor" in diags[1].help  # advice that can be followed in TVMScript


def test_input_normalize_repairs_is_not_an_ill_formed_input(capsys, tmp_path: Path):
    # IR not in A-normal form (a nested call, as a JSON document may hold it)
    # is what Normalize is for: phasec run takes it as before.
    source = ILL_FORMED.format(ret=ANNOTATED).replace('z: R.Tensor((3,), "float32")',
                                                      'z: R.Tensor((4,), "float32")')
    doc = json.loads(to_json(phasec.parse(source, "m.py")))
    binding = doc["functions"]["main"]["body"]["blocks"][0]["bindings"][0]
    binding["value"]["args"][1] = {"node": "Call", "op": {"node": "Op", "name": "relax.add"},
                                   "args": list(binding["value"]["args"])}
    del binding["value"]["struct_info"]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(doc))
    mod = phasec.load(path)
    assert [d.code for d in verifier.check(mod)] == ["WF101"]
    check_input(mod, repair=phasec.transform.get_pass("Normalize"))  # no error
    with pytest.raises(WellFormedError, match="WF101"):
        check_input(mod)  # without the repair, it is what phasec-check says
    code, out, err = run_cli(capsys, "run", path, "--repeat", "1", "-q")
    assert code == 0, out + err
    assert "PASS" in out


def test_verify_off_leaves_the_input_to_the_passes(capsys, ill_formed: Path):
    code, out, err = run_cli(capsys, "run", ill_formed, "--verify", "off", "-q")
    assert code == 1 and "checked before any pass ran" not in err


def test_a_pass_not_to_blame_is_not_named_as_the_culprit_either():
    # Through the Python API (no pre-check): Normalize hands on a violation it
    # was given; the message used to add "... after pass Normalize".
    from phasec.ir import BindingBlock, VarBinding
    from phasec.op import call_op

    x = Var("x", TensorStructInfo((2,), "float32"))
    ghost = Var("ghost", TensorStructInfo((2,), "float32"))  # never defined: WF001
    y = Var("y", TensorStructInfo((2,), "float32"))
    body = SeqExpr([BindingBlock([VarBinding(y, call_op("add", x, ghost))])], y)
    with pytest.raises(WellFormedError) as info:
        phasec.build(IRModule({"main": Function([x], body, y.struct_info)}))
    message = str(info.value)
    assert "so Normalize is not to blame" in message and "after pass" not in message
    assert info.value.pass_name is None
    assert [d.code for d in info.value.diagnostics] == ["WF001"]
