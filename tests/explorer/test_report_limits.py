"""Reports that scale (issue 32): large constants printed as TVM's metadata
references with a legend (shape, dtype, digest), and size budgets per module
text and per report, stated in the report when they apply.

The digests are recomputed here with hashlib from the numpy values; the
texts are read back by phasec's parser with the values supplied as TVM's
metadata, which must give the same module."""

from __future__ import annotations

import hashlib
import json
import re

import jsonschema
import numpy as np

from phasec.explorer import PipelineRecorder, PipelineReport, report, report_json_schema
from phasec.ir import IRModule, assert_structural_equal
from phasec.pipeline import lower_context, pipeline_from, run_pipeline
from phasec.script.parser import parse

from helpers.sample_modules import folded_weights, folded_weights_module

SPEC = "LambdaLifting,ConvertToDataflow,FoldConstant"
REFERENCE = re.compile(r'metadata\["relax\.expr\.Constant"\]\[(\d+)\]')


def _digest(arr: np.ndarray) -> str:
    h = hashlib.sha256(f"{arr.dtype}{arr.shape}".encode())
    h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:12]


def test_large_constants_print_as_metadata_references_with_a_legend() -> None:
    w, b = folded_weights()
    rep = report(folded_weights_module(), SPEC, title="weights")
    doc = rep.doc
    assert doc.limits.constants_elided == 2  # w, and w * 2 once folded
    assert doc.limits.constant_bytes_elided == 2 * w.nbytes
    first, last = doc.texts[doc.steps[0].before], doc.texts[doc.steps[-1].after]
    for text in (first, last):
        assert "R.Tensor((64, 48), \"float32\")" in text.split("\n@I.ir_module")[0]
        assert "-3.0, -2.0" not in text  # no value of the weights is printed
        assert REFERENCE.search(text)
        assert "R.const([-1.0, " in text  # the 48-element bias is small: printed
    # the legend gives the digest of the value each reference stands for
    assert f"[0] R.Tensor((64, 48), \"float32\"), 12.0 kB, sha256 {_digest(w)}" in first
    assert f"sha256 {_digest(w * 2)}" in last
    # FoldConstant's diff shows the reference change, not 3,072 numbers
    fold = next(s for s in doc.steps if s.pass_ == "FoldConstant")
    changed = [line for d in fold.diff for line in d.lines if line[:1] in "+-"]
    assert changed and sum(len(line) for line in changed) < 2000
    assert 'Size limits applied:</b> 2 constants of more than 64 elements' in rep.to_html()
    jsonschema.validate(json.loads(rep.to_json()), report_json_schema())


def _run(mod: IRModule, recorder: PipelineRecorder) -> IRModule:
    return run_pipeline(pipeline_from(SPEC, 2), mod, lower_context(2, "each", [recorder]))


def test_a_text_with_references_reads_back_with_the_values_as_metadata() -> None:
    recorder = PipelineRecorder()
    final = _run(folded_weights_module(), recorder)
    text = recorder.texts[recorder.text_id(final)]
    assert REFERENCE.search(text)
    again = parse(text, "<report>", metadata={"relax.expr.Constant": recorder.elision.values})
    assert_structural_equal(again, final)


def test_budgets_cut_and_omit_and_the_report_says_so() -> None:
    mod = folded_weights_module()
    # a module text of this model is ~1,100 characters: cut at 700
    recorder = PipelineRecorder(snapshot_chars=700)
    _run(mod, recorder)
    doc = recorder.document("cut", start=mod)
    assert doc.limits.snapshots_cut >= 2 and doc.limits.snapshots_omitted == 0
    assert all(len(t) < 900 for t in doc.texts)
    assert any("# ... cut: this module text has" in t for t in doc.texts)
    changed = [s for s in doc.steps if s.changed]
    assert changed and all(s.diff == [] and "size budget" in s.diff_note for s in changed)
    assert doc.limits.diffs_omitted == len(changed)

    # the whole report's budget: the first text fits, then only notes
    first_len = len(report(mod, SPEC).doc.texts[0])
    recorder = PipelineRecorder(report_chars=first_len + 10)
    _run(mod, recorder)
    doc = recorder.document("omitted", start=mod)
    assert doc.limits.snapshots_omitted >= 1
    assert any(t.startswith("# module text ") and "omitted" in t for t in doc.texts)
    page = PipelineReport(doc).to_html()
    assert "module texts were left out: the report keeps at most" in page
    jsonschema.validate(json.loads(PipelineReport(doc).to_json()), report_json_schema())


def test_reused_function_texts_keep_their_legend_and_match_the_printer() -> None:
    """The recorder reuses the printed lines of functions a pass left alone
    (print_module's function_texts): a new module object holding the same
    function prints the same text, legend included."""
    from phasec.script.printer import ConstantElision, elide_constants

    mod = folded_weights_module()
    recorder = PipelineRecorder()
    first = recorder.texts[recorder.text_id(mod)]
    renamed = mod.with_attr("note", "same functions")
    second = recorder.texts[recorder.text_id(renamed)]
    assert second.split("@I.ir_module")[0] == first.split("@I.ir_module")[0]  # the legend
    assert "sha256" in first
    with elide_constants(ConstantElision(64)):
        plain = renamed.script()
    assert second.endswith(plain)
