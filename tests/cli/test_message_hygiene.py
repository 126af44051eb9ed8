"""Messages on stderr are safe to show on a terminal (issue 27, item 8):
control characters from model text are escaped, over-long lines clipped,
and an invalid ``PHASEC_*`` value is a usage error naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from onnx import TensorProto, helper, save

from phasec.errors import MESSAGE_LINE_LIMIT, printable

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


def test_message_streams_escape_stdout_and_clip_only_stderr():
    import io

    from phasec.cli import MessageStream

    out, err = io.StringIO(), io.StringIO()
    MessageStream(out, clip=False).write("a\x1b]0;title\x07" + "y" * 10_000)
    MessageStream(err).write("\rprogress\x1b[K")
    assert out.getvalue() == "a\\x1b]0;title\\x07" + "y" * 10_000
    assert err.getvalue() == "\rprogress\\x1b[K"
