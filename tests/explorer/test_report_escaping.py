"""The report's inline JSON cannot change how the page parses (issue 27,
item 8): a name or a string with ``</script>`` or ``<!--<script`` in it is
written as ``\\u003c`` escapes and reads back unchanged."""

from __future__ import annotations

import json
import re

from phasec.explorer import report
from phasec.explorer.html import inline_json
from phasec.ir import BindingBlock, Function, IRModule, SeqExpr, TensorStructInfo, Var, VarBinding
from phasec.op import call_op

HOSTILE = "</script><!--<script>&\u2028\u2029"


def _hostile_module() -> IRModule:
    x = Var("x", TensorStructInfo((4,), "float32"))
    v = Var(f"v{HOSTILE}", TensorStructInfo((4,), "float32"))
    body = SeqExpr([BindingBlock([VarBinding(v, call_op("add", x, x))])], v)
    return IRModule({"main": Function([x], body, v.struct_info, attrs={"global_symbol": "main"})})


def _inline_data(page: str) -> str:
    match = re.search(r'<script type="application/json" class="phr-data">(.*?)</script>',
                      page, re.S)
    assert match is not None
    return match.group(1)


def test_hostile_names_and_title_stay_inside_the_inline_json():
    rep = report(_hostile_module(), "ConvertToDataflow,LegalizeOps", title=f"t{HOSTILE}")
    page = rep.to_html()
    data = _inline_data(page)
    for text in ("</script", "<!--", "<", ">", "&", "\u2028", "\u2029"):
        assert text not in data
    # the page has exactly the scripts it was written with
    assert page.count("</script>") == 2
    doc = json.loads(data)
    assert doc == json.loads(rep.to_json())
    assert doc["title"] == f"t{HOSTILE}"
    assert HOSTILE in json.dumps(doc, ensure_ascii=False)  # the variable's name, in a diff


def test_inline_json_reads_back_as_the_same_value():
    value = {"s": HOSTILE, "k<>": ["&amp;", "\u2028"]}
    assert json.loads(inline_json(json.dumps(value))) == value
