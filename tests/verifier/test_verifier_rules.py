"""Every verifier rule: a minimal violating module, a conforming twin, and
the diagnostic's code and line.

Most rules are written as TVMScript fixtures in tests/verifier/cases/
(``<code>_bad.py`` marks each line that must be reported with
``# <- CODE``; ``<code>_good.py`` is the twin that must be clean). Violations
the parser cannot produce (it normalizes and resolves names) start from a
parsed TVMScript twin and are made by editing its JSON document: spans survive
the round trip, so the diagnostics still point at the TVMScript lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import phasec
from phasec import verifier
from phasec.errors import WellFormedError
from phasec.ir import BindingBlock, ExprMutator, Function, IRModule, VarBinding, tir
from phasec.ir.phase import Phase

from helpers.paths import VERIFIER_CASES

CASES = VERIFIER_CASES
BAD_FILES = sorted(CASES.glob("*_bad.py"))
MARKER = re.compile(r"#\s*<-\s*([A-Z]{2}\d{3}(?:\s+[A-Z]{2}\d{3})*)\s*$")


def markers(text: str) -> set[tuple[str, int]]:
    """``(code, line)`` for every ``# <- CODE ...`` comment."""
    out = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = MARKER.search(line)
        if m:
            out.update((code, lineno) for code in m.group(1).split())
    return out


def errors(mod: IRModule, phase: Any = None) -> set[tuple[str, int | None]]:
    return {(d.code, d.span.line if d.span else None)
            for d in verifier.check(mod, phase) if d.severity == "error"}


def line_of(text: str, snippet: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if snippet in line]
    assert len(lines) == 1, f"{snippet!r} occurs on lines {lines}"
    return lines[0]


# ---------------------------------------------------------------------------
# TVMScript fixtures
# ---------------------------------------------------------------------------

def _twin(bad: Path) -> Path:
    return bad.with_name(bad.name.replace("_bad.py", "_good.py"))


@pytest.mark.parametrize("bad", BAD_FILES, ids=lambda p: p.stem)
def test_fixture_violations_are_reported_at_the_marked_lines(bad: Path) -> None:
    text = bad.read_text()
    want = markers(text)
    code = bad.stem.split("_")[0].upper()
    assert code in {c for c, _ in want}, f"{bad.name} marks no {code} line"
    mod = phasec.parse(text, str(bad))
    assert errors(mod) == want


@pytest.mark.parametrize("bad", BAD_FILES, ids=lambda p: _twin(p).stem)
def test_conforming_twin_is_clean(bad: Path) -> None:
    good = _twin(bad)
    mod = phasec.parse(good.read_text(), str(good))
    assert verifier.check(mod) == []


def test_every_fixture_has_a_twin_and_nothing_else_is_there() -> None:
    names = {p.name for p in CASES.iterdir() if p.suffix == ".py"}
    for bad in BAD_FILES:
        assert _twin(bad).name in names
    assert all(n.endswith(("_bad.py", "_good.py")) for n in names)


# ---------------------------------------------------------------------------
# Violations made by editing the JSON of a conforming module
# ---------------------------------------------------------------------------

HEAD = """# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
"""

RELAX_TWIN = HEAD + """    @R.function
    def main(x: R.Tensor((2, 3), "float32"), c: R.Prim("bool")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            lv = R.add(x, x)
            gv = R.multiply(lv, x)
            R.output(gv)
        y = R.add(gv, x)
        u = cls.other(y)
        if c:
            t = R.add(y, u)
            r = t
        else:
            r = y
        s = R.add(r, x)
        return s

    @R.function
    def other(a: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        b = R.add(a, a)
        return b

    @R.function
    def other2(a2: R.Tensor(("m", 3), "float32")) -> R.Tensor(("m", 3), "float32"):
        b2 = R.add(a2, a2)
        return b2
"""

TIR_TWIN = HEAD + """    @T.prim_func(private=True)
    def k(A: T.Buffer((T.int64(4), T.int64(4)), "float32"), B: T.Buffer((T.int64(4), T.int64(4)), "float32")):
        for i, j in T.grid(T.int64(4), T.int64(4)):
            B[i, j] = A[i, j]
        for p in range(T.int64(4)):
            B[p, 0] = A[p, 0] + T.float32(1.0)

    @T.prim_func(private=True)
    def k2(D: T.Buffer((T.int64(4),), "float32")):
        for q in range(T.int64(4)):
            D[q] = T.float32(0.0)
"""


def walk(obj: Any) -> Iterator[dict]:
    """Every JSON object in a document (depth-first)."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            yield o
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)


class Doc:
    """A module's JSON document with helpers to find and edit its nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.doc = json.loads(phasec.to_json(phasec.parse(text, "twin.py")))

    def var(self, name: str) -> int:
        return next(v["id"] for v in self.doc["vars"] if v["name"] == name)

    def ref(self, name: str) -> Any:
        """A reference to a Relax variable, in the form the document uses
        (learnt from a function result, which is always a variable here)."""
        sample = next(f["body"]["body"] for f in self.doc["functions"].values()
                      if f.get("node") == "Function")
        vid = self.var(name)
        return vid if isinstance(sample, int) else {**sample, "id": vid}

    def var_entry(self, name: str) -> dict:
        return next(v for v in self.doc["vars"] if v["name"] == name)

    def tir_var(self, name: str) -> int:
        return next(v["id"] for v in self.doc["tir_vars"] if v["name"] == name)

    def buffer(self, name: str) -> int:
        return next(b["id"] for b in self.doc["buffers"] if b["name"] == name)

    def binding(self, name: str) -> dict:
        vid = self.var(name)
        return next(b for b in walk(self.doc["functions"])
                    if b.get("node") in ("VarBinding", "MatchCast") and b["var"] == vid)

    def function(self, name: str) -> dict:
        return self.doc["functions"][name]

    def module(self) -> IRModule:
        return phasec.from_json(json.dumps(self.doc))

    def line(self, snippet: str) -> int:
        return line_of(self.text, snippet)


def _retarget(obj: Any, kind: str, old: int, new: int, key: str = "id") -> None:
    """Make every ``{"node": kind, key: old}`` reference under ``obj`` refer to ``new``."""
    for o in walk(obj):
        if o.get("node") == kind and o.get(key) == old:
            o[key] = new


def _wf001(d: Doc) -> set:
    d.binding("lv")["value"]["args"][1] = d.ref("gv")
    return {("WF001", d.line("lv = R.add(x, x)"))}


def _wf002(d: Doc) -> set:
    d.binding("s")["var"] = d.var("y")
    d.function("main")["body"]["body"] = d.ref("y")
    return {("WF002", d.line("s = R.add(r, x)"))}


def _wf003(d: Doc) -> set:
    d.function("main")["body"]["body"] = d.ref("lv")
    return {("WF003", d.line("return s"))}


def _wf004(d: Doc) -> set:
    d.var_entry("y")["dataflow"] = True
    return {("WF004", d.line("y = R.add(gv, x)"))}


def _wf005(d: Doc) -> set:
    d.binding("s")["value"]["args"][0] = d.ref("t")
    return {("WF005", d.line("s = R.add(r, x)"))}


def _wf007(d: Doc) -> set:
    # only other2 mentions m: make all of it use other's n
    _retarget(d.doc, "tir.Var", d.tir_var("m"), d.tir_var("n"))
    return {("WF007", d.line("def other2("))}


def _wf008(d: Doc) -> set:
    d.function("other2")["params"] = [d.var("a")]
    d.binding("b2")["value"]["args"] = [d.ref("a"), d.ref("a")]
    # the rest of other2 still uses its own m, which a (of shape (n, 3)) does not define
    _retarget(d.doc, "tir.Var", d.tir_var("m"), d.tir_var("n"))
    line = d.line("def other2(")
    return {("WF008", line), ("WF007", line)}


def _wf101(d: Doc) -> set:
    nested = d.binding("lv")["value"]
    d.binding("gv")["value"]["args"][0] = nested
    d.binding("lv")["value"] = d.ref("x")
    return {("WF101", d.line("gv = R.multiply(lv, x)"))}


def _wf101_condition(d: Doc) -> set:
    if_node = d.binding("r")["value"]
    if_node["cond"] = {"node": "Call", "op": "relax.add",
                       "args": [if_node["cond"], if_node["cond"]]}
    return {("WF101", d.line("if c:"))}


def _wf102(d: Doc) -> set:
    d.binding("y")["value"] = {"node": "SeqExpr", "blocks": [],
                               "body": d.binding("y")["value"]["args"][0]}
    return {("WF102", d.line("y = R.add(gv, x)"))}


def _wf301(d: Doc) -> set:
    for o in walk(d.binding("u")):
        if o.get("node") == "GlobalVar":
            o["name"] = "missing"
    return {("WF301", d.line("u = cls.other(y)"))}


def _wf401(d: Doc) -> set:
    del d.var_entry("u")["struct_info"]
    return {("WF401", d.line("u = cls.other(y)"))}


def _wf401_param(d: Doc) -> set:
    del d.var_entry("x")["struct_info"]
    return {("WF401", d.line("def main("))}


def _wf407(d: Doc) -> set:
    call = d.binding("gv")["value"]
    if isinstance(call["op"], dict):
        call["op"]["name"] = "relax.multiplyy"
    else:
        call["op"] = "relax.multiplyy"
    return {("WF407", d.line("gv = R.multiply(lv, x)"))}


def _wf501(d: Doc) -> set:
    store = next(o for o in walk(d.function("k")) if o.get("node") == "tir.BufferStore"
                 and any(i.get("id") == d.tir_var("p") for i in o["indices"] if isinstance(i, dict)))
    store["indices"][0] = {"node": "tir.Var", "id": d.tir_var("i")}
    return {("WF501", d.line("B[p, 0] = A[p, 0]"))}


def _wf502(d: Doc) -> set:
    store = next(o for o in walk(d.function("k")) if o.get("node") == "tir.BufferStore"
                 and any(i.get("id") == d.tir_var("p") for i in o["indices"] if isinstance(i, dict)))
    store["buffer"] = d.buffer("D")
    store["indices"] = store["indices"][:1]
    return {("WF502", d.line("B[p, 0] = A[p, 0]"))}


def _wf503(d: Doc) -> set:
    inner = next(o for o in walk(d.function("k")) if o.get("node") == "tir.For"
                 and o["loop_var"] == d.tir_var("j"))
    inner["loop_var"] = d.tir_var("i")
    _retarget(inner, "tir.Var", d.tir_var("j"), d.tir_var("i"))
    return {("WF503", d.line("for i, j in T.grid"))}


def _wf505(d: Doc) -> set:
    # the second nest's loop binds the first nest's ``i`` again (a sibling, not inside it)
    loop = next(o for o in walk(d.function("k")) if o.get("node") == "tir.For"
                and o["loop_var"] == d.tir_var("p"))
    loop["loop_var"] = d.tir_var("i")
    _retarget(loop, "tir.Var", d.tir_var("p"), d.tir_var("i"))
    return {("WF505", d.line("for p in range"))}


JSON_CASES: dict[str, tuple[str, Callable[[Doc], set]]] = {
    "WF001": (RELAX_TWIN, _wf001),
    "WF002": (RELAX_TWIN, _wf002),
    "WF003": (RELAX_TWIN, _wf003),
    "WF004": (RELAX_TWIN, _wf004),
    "WF005": (RELAX_TWIN, _wf005),
    "WF007": (RELAX_TWIN, _wf007),
    "WF008": (RELAX_TWIN, _wf008),
    "WF101": (RELAX_TWIN, _wf101),
    "WF101-condition": (RELAX_TWIN, _wf101_condition),
    "WF102": (RELAX_TWIN, _wf102),
    "WF301": (RELAX_TWIN, _wf301),
    "WF401": (RELAX_TWIN, _wf401),
    "WF401-param": (RELAX_TWIN, _wf401_param),
    "WF407": (RELAX_TWIN, _wf407),
    "WF501": (TIR_TWIN, _wf501),
    "WF502": (TIR_TWIN, _wf502),
    "WF503": (TIR_TWIN, _wf503),
    "WF505": (TIR_TWIN, _wf505),
}


@pytest.mark.parametrize("twin", [RELAX_TWIN, TIR_TWIN], ids=["relax", "tir"])
def test_json_twins_are_clean(twin: str) -> None:
    mod = Doc(twin).module()
    assert verifier.check(mod) == []


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_json_edited_violation(case: str) -> None:
    twin, mutate = JSON_CASES[case]
    d = Doc(twin)
    want = mutate(d)
    assert errors(d.module()) == want


# ---------------------------------------------------------------------------
# Violations only a program can build (nodes of the wrong kind)
# ---------------------------------------------------------------------------

PRIM_TWIN = HEAD + """    @T.prim_func(private=True)
    def k(A: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            A[i, j] = T.float32(0.0)

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.add(x, x)
        z = R.multiply(y, x)
        return z
"""


def _replace_value(mod: IRModule, var_name: str, value: Any) -> IRModule:
    class Swap(ExprMutator):
        def visit_binding(self, b):  # type: ignore[override]
            if b.var.name_hint == var_name:
                return VarBinding(b.var, value, span=b.span)
            return super().visit_binding(b)

    return mod.update({"main": Swap().visit_expr(mod["main"])})


def test_wf103_inline_prim_func() -> None:
    mod = phasec.parse(PRIM_TWIN, "twin.py")
    assert verifier.check(mod) == []
    bad = _replace_value(mod, "y", mod["k"])
    assert errors(bad) == {("WF103", line_of(PRIM_TWIN, "y = R.add(x, x)"))}


def test_wf100_node_of_the_wrong_kind() -> None:
    mod = phasec.parse(PRIM_TWIN, "twin.py")
    bad = _replace_value(mod, "y", tir.IntImm(3))
    assert errors(bad) == {("WF100", line_of(PRIM_TWIN, "y = R.add(x, x)"))}


def test_wf100_unexpected_tir_statement() -> None:
    mod = phasec.parse(PRIM_TWIN, "twin.py")
    k = mod["k"]
    bad = mod.update({"k": tir.PrimFunc(k.params, tir.SeqStmt([k.body, "junk"]), k.attrs,
                                        span=k.span)})  # type: ignore[list-item]
    assert {c for c, _ in errors(bad)} == {"WF100"}


def test_checker_failure_inside_a_function_becomes_wf100() -> None:
    """A node whose fields have the wrong types must not crash the verifier."""
    mod = phasec.parse(PRIM_TWIN, "twin.py")
    main = mod["main"]
    block = main.body.blocks[0]
    weird = BindingBlock([*block.bindings, object()])  # type: ignore[list-item]
    bad_body = type(main.body)([weird], main.body.body, span=main.body.span)
    bad = mod.update({"main": Function(main.params, bad_body, main.ret_struct_info,
                                       attrs=main.attrs, span=main.span)})
    assert "WF100" in {d.code for d in verifier.check(bad)}


# ---------------------------------------------------------------------------
# Coverage of the rule table, documentation
# ---------------------------------------------------------------------------

def _covered_codes() -> set[str]:
    codes = {c for bad in BAD_FILES for c, _ in markers(bad.read_text())}
    codes |= {case.split("-")[0] for case in JSON_CASES}
    codes |= {"WF100", "WF103"}
    return codes


def test_every_rule_has_a_violating_case_and_a_twin() -> None:
    all_codes = {r.code for r in verifier.all_rules()}
    assert all_codes - _covered_codes() == set()


def test_rule_table_is_well_formed() -> None:
    table = verifier.rules_table()
    codes = [code for code, _, _ in table]
    assert len(codes) == len(set(codes))
    for code, phase, title in table:
        assert re.fullmatch(r"(WF\d{3}|PH[123]\d{2})", code)
        Phase.parse(phase)
        assert title and "\n" not in title
        if code.startswith("PH"):
            assert int(Phase.parse(phase)) == int(code[2]), code  # PH1xx optimization ...
        else:
            assert phase == "ingestion"
    for rule in verifier.all_rules():
        assert rule.explanation.count(".") >= 2, rule.code  # several sentences
        assert rule.help, rule.code
        assert rule.severity in ("error", "warning")


def test_phase_rules_name_a_pass_and_a_phase_in_their_help() -> None:
    passes = ("LambdaLifting", "ToNonDataflow", "LegalizeOps", "RemovePurityChecking",
              "CallTIRRewrite", "VMBuiltinLower")
    for rule in verifier.all_rules():
        if rule.code.startswith("PH"):
            assert any(p in rule.help for p in passes), rule.code
            assert "declare phase" in rule.help, rule.code


def test_explain() -> None:
    text = verifier.explain("ph101")
    assert text.startswith("PH101: ")
    assert "optimization" in text and "LambdaLifting" in text and "Codegen" in text
    with pytest.raises(KeyError, match="PH101"):
        verifier.explain("PH10")


# ---------------------------------------------------------------------------
# Diagnostics and verify()
# ---------------------------------------------------------------------------

def test_diagnostic_fields() -> None:
    path = CASES / "wf202_bad.py"
    [diag] = verifier.check(phasec.parse(path.read_text(), str(path)))
    assert diag.code == "WF202" and diag.severity == "error" and diag.is_error
    assert diag.function == "main" and diag.binding == "y"
    assert diag.span.file == str(path)
    assert "pure=False" in diag.help
    text = str(diag)
    assert text.startswith(f"{path}:{diag.span.line}:{diag.span.col + 1}: error[WF202]: ")
    assert "in function 'main', binding 'y'" in text and "help: " in text


def test_diagnostic_is_slotted_and_immutable() -> None:
    d = verifier.Diagnostic("WF001", "error", "m")
    assert not hasattr(d, "__dict__")
    with pytest.raises(AttributeError):
        d.code = "WF002"  # type: ignore[misc]


def test_verify_raises_with_every_diagnostic_and_names_the_pass() -> None:
    path = CASES / "wf406_bad.py"
    mod = phasec.parse(path.read_text(), str(path))
    with pytest.raises(WellFormedError) as info:
        verifier.verify(mod, pass_name="LegalizeOps")
    err = info.value
    assert err.pass_name == "LegalizeOps"
    expected = len(markers(path.read_text()))  # every "# <- WF406" line
    assert len(err.diagnostics) == expected and {d.code for d in err.diagnostics} == {"WF406"}
    message = str(err)
    assert "after pass LegalizeOps" in message and f"{expected} errors" in message
    assert message.count("error[WF406]") == expected


def test_verify_message_is_bounded() -> None:
    text = HEAD + "    @R.function\n    def main(x: R.Tensor((2, 3), \"float32\")) -> R.Tensor((2, 3), \"float32\"):\n"
    text += "".join(f"        y{i}: R.Tensor((2, 4), \"float32\") = R.add(x, x)\n" for i in range(12))
    text += "        return x\n"
    with pytest.raises(WellFormedError) as info:
        verifier.verify(phasec.parse(text, "many.py"))
    assert len(info.value.diagnostics) == 12
    assert "12 errors" in str(info.value) and "... and 7 more" in str(info.value)


def test_warnings_do_not_fail_verification() -> None:
    text = HEAD + """    @R.function
    def main(x: R.Tensor(("n", 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        y: R.Tensor((4, 3), "float32") = R.add(x, x)
        return x
"""
    mod = phasec.parse(text, "warn.py")
    [diag] = verifier.check(mod)
    assert diag.code == "WF402" and diag.severity == "warning"
    assert diag.span.line == line_of(text, "y: R.Tensor((4, 3)")
    assert "match_cast" in diag.help
    verifier.verify(mod)  # no exception


def test_reports_every_problem_not_just_the_first() -> None:
    d = Doc(RELAX_TWIN)
    want = _wf001(d) | _wf301(d) | _wf407(d)
    assert errors(d.module()) == want


def test_follow_on_missing_struct_info_is_counted_not_reported():
    # Issue 18 #9: one wrong parameter shape gave the real WF405 plus one WF401
    # per downstream binding, each with advice that would not fix it.
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((6, 8), dtype="float32"),
             b: R.Tensor((8,), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            lv = R.matmul(x, w)
            lv1 = R.add(lv, b)
            lv2 = R.nn.relu(lv1)
            t = (lv2, lv1)
            gv = R.multiply(t[0], lv2)
            R.output(gv)
        return gv
'''
    import phasec
    from phasec import verifier

    diags = verifier.check(phasec.parse(src))
    assert [d.code for d in diags] == ["WF405"]
    assert diags[0].binding == "lv"
    # lv1, lv2, t, the tuple_getitem binding and gv depend on lv
    assert "more bindings depend on it and are not reported" in diags[0].message


def test_independent_missing_struct_info_is_still_reported():
    from phasec.ir import BindingBlock, Function, SeqExpr, Var, VarBinding, IRModule
    from phasec.op import call_op
    from phasec.ir.struct_info import TensorStructInfo
    from phasec import verifier

    x = Var("x", TensorStructInfo((2,), "float32"))
    y = Var("y", None)  # built by hand without struct info: its own root cause
    z = Var("z", None)
    body = SeqExpr([BindingBlock([VarBinding(y, call_op("add", x, x)),
                                  VarBinding(z, call_op("nn.relu", x))])], x)
    mod = IRModule({"main": Function([x], body, x.struct_info)})
    codes = [(d.code, d.binding) for d in verifier.check(mod)]
    assert ("WF401", "y") in codes and ("WF401", "z") in codes


def test_attribute_values_are_checked_even_where_inference_does_not_read_them():
    # R.nn.leakyrelu's inference never reads alpha, R.scatter_nd's never its
    # reduction, R.hint_on_device's never the device: a bad value passed the
    # verifier and surfaced only when LegalizeOps (or nothing) used it
    import phasec
    from phasec import verifier

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), i: R.Tensor((1, 1), "int64"),
             u: R.Tensor((1, 3), "float32")):
        a = R.nn.leakyrelu(x, alpha=ALPHA)
        b = R.scatter_nd(x, i, u, reduction=REDUCTION)
        c = R.hint_on_device(x, R.device(device_type=DEVICE, index=0), "global")
        return (a, b, c)
'''
    good = src.replace("ALPHA", "0.1").replace("REDUCTION", '"add"').replace("DEVICE", "1")
    assert verifier.check(phasec.parse(good)) == []
    for name, bad in (("alpha", ("ALPHA", '"a"')), ("reduction", ("REDUCTION", '"bogus"')),
                      ("device_type", ("DEVICE", '"cpu"'))):
        text = good.replace({"alpha": "0.1", "reduction": '"add"',
                             "device_type": "device_type=1"}[name],
                            bad[1] if name != "device_type" else f"device_type={bad[1]}")
        diags = verifier.check(phasec.parse(text))
        assert [d.code for d in diags] == ["WF405"], text
        assert f"attribute {name!r}" in diags[0].message
