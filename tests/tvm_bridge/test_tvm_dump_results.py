"""phasec bisect DUMP_DIR: the stages TVM 0.27's DumpIR instrument writes
are run in phasec's interpreter and the TVM pass that changed the results is
named (the grouped-query attention defect: LegalizeOps); stages it cannot
run are listed with the reason."""

from __future__ import annotations

import numpy as np
import tvm
from tvm.ir.instrument import DumpIR

from phasec.cli import main
from phasec.script.parser import parse
from phasec.tvm import check_dump_results, to_tvm

from helpers.tvm_defects import GQA


def _attention(q, k, v, pair):
    """numpy attention, query head h reading key/value head pair(h)."""
    out = np.empty_like(q, dtype=np.float64)
    for h in range(q.shape[2]):
        s = q[0, :, h] @ k[0, :, pair(h)].T / np.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        out[0, :, h] = (p / p.sum(-1, keepdims=True)) @ v[0, :, pair(h)]
    return out


def test_dump_directory_names_legalize_ops(tmp_path, capsys):
    dump = tmp_path / "dump"
    with tvm.transform.PassContext(opt_level=3, instruments=[DumpIR(dump)]):
        exe = tvm.compile(to_tvm(parse(GQA)), target="llvm")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype("float32")
               for s in ((1, 3, 4, 2), (1, 3, 2, 2), (1, 3, 2, 2)))
    # TVM's compiled model pairs query head h with key head h % 2, not h // 2
    got = tvm.relax.VirtualMachine(exe, tvm.cpu())["main"](
        *(tvm.runtime.tensor(a) for a in (q, k, v))).numpy()
    np.testing.assert_allclose(got, _attention(q, k, v, lambda h: h % 2), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, _attention(q, k, v, lambda h: h // 2), atol=1e-3)

    start = tmp_path / "gqa.py"
    start.write_text(GQA)
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    assert main(["bisect", str(dump), "--start", str(start),
                 "--inputs", str(tmp_path / "in.npz")]) == 1
    out = capsys.readouterr().out
    assert "first TVM pass that changed the results: LegalizeOps" in out

    found = check_dump_results(str(dump))  # reference: the first stage that runs
    files = sorted(p.name for p in dump.glob("*.py"))
    assert len(found.verdicts) == len(files)  # one verdict per file, none skipped
    assert found.first_change is not None and found.first_change.pass_name == "LegalizeOps"
    cannot = [v for v in found.verdicts if v.status == "cannot run"]
    assert cannot and all(v.detail for v in cannot)
    assert "could not run" in found.report()


def test_bad_dump_directory_is_an_input_error(tmp_path, capsys):
    assert main(["bisect", str(tmp_path)]) == 2
    assert "no file of TVM's DumpIR" in capsys.readouterr().err
