"""The report highlights the line the command line shows (issue 32, item
12): for a diagnostic about a statement that binds nothing (WF403, a
``return`` whose type differs from the annotation) the report used to
highlight the function's header while phasec-check showed the return."""

from __future__ import annotations

import io
import json
from pathlib import Path

from phasec.cli import main
from phasec.verifier.cli import main as check_main

WF403 = '''\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "int32"):
        y = R.add(x, x)
        return y  # the annotation says int32
'''


def test_report_highlights_the_line_phasec_check_shows(capsys, tmp_path: Path) -> None:
    path = tmp_path / "wf403.py"
    path.write_text(WF403)
    report = tmp_path / "report.json"
    assert main(["opt", str(path), "--report", str(report)]) == 1
    capsys.readouterr()
    checked = io.StringIO()
    assert check_main([str(path)], stdout=checked, stderr=io.StringIO()) == 1
    shown = checked.getvalue().splitlines()[1].strip()  # the source line under the message
    assert shown.startswith("return y")
    doc = json.loads(report.read_text())
    (diag,) = doc["error"]["diagnostics"]
    assert diag["code"] == "WF403"
    highlighted = doc["texts"][diag["text"]].splitlines()[diag["line"] - 1]
    assert highlighted.strip() == shown.split("#")[0].strip()
