"""Pipeline reports in a real browser (issue 19): headless Chromium driven by
selenium opens the HTML report from file:// and the test checks what a person
sees: the pass rows in order, their phase colours, a diff holding the changed
binding, the diagnostic text, and no console errors. Screenshots are saved to
test-artifacts/ (or $PHASEC_TEST_ARTIFACTS).

Chromium and its driver come from Debian's packages (chromium,
chromium-driver); .ci/run installs them when absent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

import phasec
from phasec.explorer import PipelineRecorder, PipelineReport, report
from phasec.explorer.html import PHASE_COLOURS, render_fragment
from phasec.pipeline import lower, lower_context, pipeline_from, run_pipeline
from phasec.transform import PassTrace

from helpers.paths import REPO
from helpers.sample_modules import add_chain_module, folded_weights_module

EXAMPLES = Path(phasec.__file__).parent / "examples"
ARTIFACTS = Path(os.environ.get("PHASEC_TEST_ARTIFACTS") or REPO / "test-artifacts")
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--window-size=1280,1200")


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(f"none of {', '.join(names)} is installed: install Debian's chromium and "
                       "chromium-driver (.ci/run does)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = Options()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium')}")
    options.binary_location = _binary("chromium", "chromium-browser")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(_binary("chromedriver")), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def _open(browser, path: Path, shot: str):
    browser.get(path.as_uri())
    browser.find_element(By.CSS_SELECTOR, "button.expand").click()
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"report-{shot}.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _css_rgb(value: str) -> tuple[int, int, int]:
    """``rgb(1, 2, 3)`` or ``rgba(1, 2, 3, 1)`` (browsers differ) -> (1, 2, 3)."""
    inside = value[value.index("(") + 1:value.index(")")]
    return tuple(int(float(v)) for v in inside.split(",")[:3])


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_bundled_example_report_as_a_person_sees_it(browser, tmp_path, name):
    mod = phasec.load(EXAMPLES / f"{name}.py")
    path = tmp_path / f"{name}.html"
    report(mod, title=f"{name}.py").save(path)
    _open(browser, path, name)
    trace = PassTrace()
    lower(mod, instruments=[trace])
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.step")
    names = [r.find_element(By.CSS_SELECTOR, "td.name").text.split()[0] for r in rows]
    assert names == [e.name for e in trace.entries]
    for row, entry in zip(rows, trace.entries):
        badge = row.find_element(By.CSS_SELECTOR, "td.phase span")
        assert badge.text == entry.phase_after.label
        assert _css_rgb(badge.value_of_css_property("background-color")) == \
            _rgb(PHASE_COLOURS[entry.phase_after.label])
    transitions = [r.find_element(By.CSS_SELECTOR, "td.name").text for r in rows
                   if r.find_elements(By.CSS_SELECTOR, ".badge")]
    assert [t.split("→")[0].strip() for t in transitions] == ["LambdaLifting", "LegalizeOps",
                                                    "VMBuiltinLower"]
    # LegalizeOps' diff shows the bindings it rewrote into call_tir.
    details = browser.find_elements(By.CSS_SELECTOR, "tr.detail")
    assert any("R.call_tir(" in d.text for d in details)
    added = browser.find_elements(By.CSS_SELECTOR, "tr.detail .add")
    assert added and all(a.text.startswith("+") for a in added[:50])
    summary = browser.find_element(By.CSS_SELECTOR, ".summary").text
    assert "build" in summary and "ingestion → optimization → lowering → build" in summary


def test_report_with_a_phase_error(browser, tmp_path):
    bad = phasec.parse('''
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
''')
    path = tmp_path / "phase_error.html"
    report(bad, title="phase_error.py").save(path)
    _open(browser, path, "phase-error")
    error = browser.find_element(By.CSS_SELECTOR, ".error").text
    assert error.startswith("WellFormedError")
    diags = browser.find_elements(By.CSS_SELECTOR, ".diags .diag")
    texts = [d.text for d in diags]
    assert any(t.startswith("PH201 dataflow block in phase lowering") for t in texts)
    assert any("PH202" in t and "R.add" in t for t in texts)
    highlighted = browser.find_elements(By.CSS_SELECTOR, ".diags .hl")
    assert any("R.add(x, x)" in h.text for h in highlighted)


def test_misordered_pipeline_report_names_pass_phase_and_fix(browser, tmp_path):
    mod = phasec.load(EXAMPLES / "mlp.py")
    path = tmp_path / "misordered.html"
    report(mod, "LambdaLifting,LambdaLifting", title="misordered").save(path)
    _open(browser, path, "misordered")
    error = browser.find_element(By.CSS_SELECTOR, ".error").text
    assert "PhaseError in LambdaLifting" in error
    assert "needs phase ingestion; the module is in" in error
    fix = next(line for line in error.splitlines() if line.startswith("fix: "))
    assert fix.endswith("remove this LambdaLifting")


def test_notebook_fragments_coexist(browser, tmp_path):
    mod = phasec.load(EXAMPLES / "mlp.py")
    one = report(mod, "LambdaLifting")
    two = report(mod, "LambdaLifting,FuseOps")
    page = tmp_path / "notebook.html"
    page.write_text("<!doctype html><meta charset='utf-8'><body>" + one._repr_html_()
                    + two._repr_html_() + "</body>")
    browser.get(page.as_uri())
    tables = browser.find_elements(By.CSS_SELECTOR, ".phr tbody")
    assert [len(t.find_elements(By.CSS_SELECTOR, "tr.step")) for t in tables] == [1, 2]
    assert render_fragment(one.doc, "x") != render_fragment(one.doc, "y")


def test_large_module_report_opens_and_scrolls(browser, tmp_path):
    mod = add_chain_module(10_000)
    path = tmp_path / "large.html"
    report(mod, "LambdaLifting,ConvertToDataflow,ToNonDataflow", title="10k").save(path)
    browser.get(path.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.step")
    assert len(rows) == 3
    rows[1].click()  # ConvertToDataflow: a diff over 10,000 bindings
    detail = browser.find_element(By.CSS_SELECTOR, "tr.detail")
    assert "with R.dataflow():" in detail.text
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert browser.execute_script("return window.scrollY") > 0
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_report_within_size_limits_says_what_it_left_out(browser, tmp_path):
    """Large constants as metadata references and the budgets of
    tests/explorer/test_report_limits.py, as a person sees them."""
    mod = folded_weights_module()
    recorder = PipelineRecorder(snapshot_chars=900)
    spec = "LambdaLifting,ConvertToDataflow,FoldConstant,FuseOps"
    run_pipeline(pipeline_from(spec, 2), mod, lower_context(2, "each", [recorder]))
    path = tmp_path / "limits.html"
    PipelineReport(recorder.document("limits", start=mod)).save(path)
    _open(browser, path, "limits")
    banner = browser.find_element(By.CSS_SELECTOR, "div.limits").text
    assert banner.startswith("Size limits applied: 2 constants of more than 64 elements")
    assert "module texts were cut at 900 characters each" in banner
    notes = [d.text for d in browser.find_elements(By.CSS_SELECTOR, "tr.detail p.limits")]
    assert notes and all(n.startswith("diff not shown: a module text was cut") for n in notes)
