"""Messages on stderr are safe to show on a terminal (issue 27, item 8):
control characters from model text are escaped, over-long lines clipped,
and an invalid ``PHASEC_*`` value is a usage error naming the variable."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from onnx import TensorProto, helper, save

from phasec.errors import MESSAGE_LINE_LIMIT, MessageStream, printable

HOSTILE = "\x1b[31m\x07"


def _model(path, op_type: str, name: str) -> str:
    node = helper.make_node(op_type, ["x"], ["y"], name=name)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def _phasec(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phasec", *argv], capture_output=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_control_characters_from_a_model_are_escaped(tmp_path):
    path = _model(tmp_path / "m.onnx", f"Bad{HOSTILE}Op", f"node{HOSTILE}name")
    result = _phasec("import", path)
    assert result.returncode == 2
    assert b"\x1b" not in result.stderr and b"\x07" not in result.stderr
    err = result.stderr.decode()
    assert "Bad\\x1b[31m\\x07Op" in err and "node\\x1b[31m\\x07name" in err
    assert "Traceback" not in err


def test_a_huge_message_is_clipped(tmp_path):
    path = _model(tmp_path / "m.onnx", "Q" * 200_000, "n")
    result = _phasec("import", path)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert len(err) < 4 * MESSAGE_LINE_LIMIT
    assert "more characters)" in err


def test_printable_keeps_structure_and_escapes_data():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b[2J\x9b\x7f\r") == "\\x1b[2J\\x9b\\x7f\\x0d"
    clipped = printable("x" * 10_000 + "\nshort")
    assert clipped.endswith("... (5904 more characters)\nshort")


@pytest.mark.parametrize("variable, value, accepted", [
    ("PHASEC_VECTOR_BITS", "100", "128, 256, 512"),
    ("PHASEC_WINOGRAD", "3", "0, 2, 4"),
    ("PHASEC_PARALLEL_RUNTIME", "threads", "'spawn'"),
    ("PHASEC_MAX_INPUT_SIZE", "lots", "512M"),
    ("PHASEC_BUFFER_CACHE", "lots", "512M"),
])
def test_an_invalid_environment_value_is_a_usage_error(variable, value, accepted):
    result = _phasec("run", env={variable: value})
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert variable in err and accepted in err and repr(value) in err
    assert "Traceback" not in err and "internal error" not in err


def test_message_streams_escape_stdout_as_json_does_and_clip_only_stderr():
    out, err = io.StringIO(), io.StringIO()
    MessageStream(out, data=True).write(json.dumps("a\x1b]0;title\x07\x7f\x9b" + "y" * 10_000,
                                                   ensure_ascii=False))
    MessageStream(err).write("\rprogress\x1b[K")
    assert json.loads(out.getvalue()) == "a\x1b]0;title\x07\x7f\x9b" + "y" * 10_000
    assert "\x1b" not in out.getvalue() and "\\u001b]0;title" in out.getvalue()
    assert err.getvalue() == "\rprogress\\x1b[K"


def test_phasec_check_shows_a_hostile_source_line_escaped(tmp_path):
    from phasec.verifier.cli import main as check_main

    path = tmp_path / "m.py"
    path.write_text("from phasec.script import ir as I, relax as R\n\n@I.ir_module\n"
                    "class Module:\n    @R.function\n"
                    "    def main(x: R.Tensor((4,), dtype=\"float32\")):\n"
                    f"        y{HOSTILE} = R.add(x, x)\n        return y\n")
    out, err = io.StringIO(), io.StringIO()
    assert check_main([str(path)], stdout=out, stderr=err) == 2
    text = out.getvalue() + err.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "y\\u001b[31m\\u0007 = R.add" in text
