"""phasec ships no top-level name but ``phasec``: a user's own ``passes.py`` or
``verifier/`` beside their script cannot change what phasec runs.

Before the layout change, ``verifier`` and ``passes`` were installed as
top-level packages, and a script directory holding either (the natural name
after reading "Writing a pass") broke ``import phasec`` with misleading
messages ("unknown pass 'Normalize'").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = '''
import numpy as np
import phasec
from phasec import passes, transform, verifier

mod = phasec.parse("""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
""")
assert verifier.check(mod) == []
seq = transform.parse_pipeline("LambdaLifting,Normalize,FuseOps,LegalizeOps")
assert seq(mod).phase.name == "LOWERING"
assert passes.FuseOps(fuse_opt_level=2).spec() == "FuseOps{fuse_opt_level=2}"
x = np.arange(6, dtype="float32").reshape(2, 3)
out = phasec.VirtualMachine(phasec.build(mod))["main"](x)
np.testing.assert_array_equal(np.asarray(out), x + x)
print("phasec unaffected")
'''


def _user_project(tmp_path: Path) -> Path:
    """A user's folder: their script beside their own passes.py and verifier/."""
    (tmp_path / "passes.py").write_text("raise SystemExit('the user passes.py was imported')\n")
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "__init__.py").write_text(
        "raise SystemExit('the user verifier/ was imported')\n")
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def test_users_passes_and_verifier_beside_the_script_do_not_affect_phasec(tmp_path):
    project = _user_project(tmp_path)
    proc = subprocess.run([sys.executable, "script.py"], cwd=project, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "phasec unaffected"


def test_the_checker_ignores_a_users_verifier_folder(tmp_path):
    project = _user_project(tmp_path)
    (project / "model.py").write_text(SCRIPT.split('mod = phasec.parse("""', 1)[1]
                                      .split('""")', 1)[0])
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", "model.py"], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_top_level_name_but_phasec_is_installed():
    """The installed distribution's top-level names (its RECORD) are phasec's only."""
    from importlib import metadata

    files = metadata.distribution("phasec").files or []
    tops = {f.parts[0] for f in files if not f.parts[0].endswith((".dist-info", ".pth"))
            and f.parts[0] not in ("..", "__pycache__") and not f.parts[0].startswith("__editable__")}
    assert tops <= {"phasec"}, tops
