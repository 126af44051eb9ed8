"""PhaseCheck(check_results=True): every stage of TVM's pipeline runs in
phasec's interpreter; the TVM pass that changes results is named (TVM
0.27's grouped-query attention defect, documented in README), and stages
the interpreter cannot run are reported as such."""

from __future__ import annotations

import numpy as np
import tvm

from phasec.script.parser import parse
from phasec.tvm import PhaseCheck, to_tvm

from helpers.tvm_defects import GQA


PLAIN = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")) -> R.Tensor((2, 4), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
'''


def _attention(q, k, v, pair):
    """numpy attention, query head h reading key/value head pair(h)."""
    out = np.empty_like(q, dtype=np.float64)
    scale = 1 / np.sqrt(q.shape[-1])
    for h in range(q.shape[2]):
        g = pair(h)
        s = q[0, :, h] @ k[0, :, g].T * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        out[0, :, h] = (p / p.sum(-1, keepdims=True)) @ v[0, :, g]
    return out


def _compile(source, check, inputs=None):
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        return tvm.compile(to_tvm(parse(source)), target="llvm")


def test_tvm_legalize_ops_is_named_for_grouped_query_attention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype("float32")
               for s in ((1, 3, 4, 2), (1, 3, 2, 2), (1, 3, 2, 2)))
    check = PhaseCheck(check_results=True, inputs=[q, k, v])
    exe = _compile(GQA, check)
    change = check.first_result_change
    assert change is not None and change.pass_name == "LegalizeOps"
    # the passes before it kept the results; the reference is the grouped-query
    # formula (head h reads h // 2), what TVM's compiled model computes pairs h % 2
    statuses = {v.pass_name: v.status for v in check.result_verdicts}
    assert statuses["NormalizeGlobalVar"] == "same"
    tvm_out = tvm.relax.VirtualMachine(exe, tvm.cpu())["main"](
        *(tvm.runtime.tensor(a) for a in (q, k, v))).numpy()
    np.testing.assert_allclose(tvm_out, _attention(q, k, v, lambda h: h % 2), rtol=1e-5,
                               atol=1e-6)
    assert not np.allclose(tvm_out, _attention(q, k, v, lambda h: h // 2), atol=1e-3)
    assert "first TVM pass that changed the results: LegalizeOps" in check.results_report()


def test_no_blame_and_unrunnable_stages_are_reported():
    check = PhaseCheck(check_results=True)
    _compile(PLAIN, check)
    verdicts = check.result_verdicts
    assert check.first_result_change is None
    assert verdicts[0].status == "reference" and verdicts[0].detail == "float64"
    # one verdict per stage PhaseCheck saw, none skipped
    assert len(verdicts) == len(check.verdicts) + 1
    cannot = [v for v in verdicts if v.status == "cannot run"]
    assert cannot and all(v.detail for v in cannot)
    assert {v.status for v in verdicts} <= {"reference", "same", "cannot run"}
