"""``phasec run --max-call-depth N``: the recursion guard of the VM, of the
reference interpreter and of ``--profile``'s VMs, said by the error that
stops a recursion deeper than it (a recursion in tail position never
counts: tests/backend/vm/test_vm_tail_calls.py)."""

from __future__ import annotations

import numpy as np

from phasec.cli import main

_T = 'R.Tensor((), dtype="int64")'
SCRIPT = f'''
@I.ir_module
class Depth:
    @R.function
    def main(n: {_T}) -> {_T}:
        done: R.Tensor((), dtype="bool") = R.less_equal(n, R.const(0, "int64"))
        if done:
            r: {_T} = n
        else:
            m: {_T} = R.subtract(n, R.const(1, "int64"))
            d: {_T} = cls.main(m)
            r: {_T} = R.add(d, R.const(2, "int64"))
        return r
'''


def _run(capsys, tmp_path, *options):
    src, inputs = tmp_path / "depth.py", tmp_path / "n.npz"
    src.write_text(SCRIPT)
    np.savez(inputs, n=np.array(300, np.int64))
    code = main(["run", str(src), "--inputs", str(inputs), "--repeat", "1", "-q", *options])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_a_recursion_deeper_than_the_limit_says_how_to_raise_it(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path, "--max-call-depth", "100")
    assert code != 0
    assert "call depth exceeded 100 calling 'main'" in err
    assert "--max-call-depth N" in err


def test_a_raised_limit_runs_it_on_the_vm_and_the_interpreter(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path, "--max-call-depth", "400", "--profile")
    assert code == 0, err
    assert "first [600]" in out  # 2 * 300
    assert "PASS" in out


def test_the_limit_must_be_positive(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path, "--max-call-depth", "0")
    assert code != 0
    assert "--max-call-depth must be at least 1, not 0" in err
