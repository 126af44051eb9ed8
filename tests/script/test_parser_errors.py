"""Bad TVMScript: every failure is a ParseError with file, line, column and a
message saying what was not understood; nothing in the input is ever run."""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import phasec
from phasec.errors import ParseError
from phasec.script import loader as loader_mod
from phasec.script.parser import driver as parser_mod

HEADER = '''@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
'''
# The body of `main` starts on this line:
BODY_LINE = 5

TIR_HEADER = '''@I.ir_module
class M:
    @T.prim_func
    def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
'''


def relax(*body: str) -> str:
    return HEADER + "".join(f"        {line}\n" for line in body)


def prim(*body: str) -> str:
    return TIR_HEADER + "".join(f"        {line}\n" for line in body)


def parse_error(text: str | bytes, filename: str = "bad.py") -> ParseError:
    with pytest.raises(ParseError) as info:
        phasec.parse(text, filename=filename)
    err = info.value
    assert err.span is not None and err.span.file == filename
    assert err.span.line >= 1 and err.span.col >= 0
    assert str(err).startswith(f"{filename}:{err.span.line}:")
    return err


def where(err: ParseError) -> tuple[int, int]:
    return err.span.line, err.span.col


# ---------------------------------------------------------------------------
# Python-level problems
# ---------------------------------------------------------------------------

def test_python_syntax_error_location():
    err = parse_error("@I.ir_module\nclass M:\n    def f(:\n        pass\n")
    assert "invalid Python syntax" in err.message
    assert err.span.line == 3 and err.span.col == 10


def test_empty_file():
    for text in ("", "   \n\n"):
        err = parse_error(text)
        assert "empty" in err.message and where(err) == (1, 0)


def test_no_ir_module_class():
    err = parse_error("# nothing but a comment\nimport numpy as np\n")
    assert err.message == "no @I.ir_module class found"
    err = parse_error("class M:\n    pass\n")
    assert "not an @I.ir_module class" in err.message and where(err) == (1, 0)


def test_more_than_one_module_class():
    text = "@I.ir_module\nclass A:\n    pass\n@I.ir_module\nclass B:\n    pass\n"
    err = parse_error(text)
    assert "more than one" in err.message and err.span.line == 5


def test_binary_garbage():
    err = parse_error(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "binary" in err.message
    err = parse_error(b"@I.ir_module\nclass M:\n    x = '\xff\xfe'\n")
    assert "not UTF-8" in err.message and where(err) == (3, 9)


def test_thousands_of_nested_parentheses():
    err = parse_error("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    assert "nested" in err.message


@pytest.mark.parametrize("text", [
    "x = " + "[" * 100_000 + "]" * 100_000,           # SyntaxError: too many nested parentheses
    "x = " + "+".join(["1"] * 50_000),                # RecursionError building the ast
    "x = " + "-" * 100_000 + "1",                     # MemoryError in Python's parser
    "x = y" + ".a" * 100_000,
], ids=["brackets", "sum", "unary", "attributes"])
def test_source_too_deep_for_pythons_parser(text: str):
    err = parse_error(text)
    assert "nested" in err.message and err.span.line == 1


def test_deeply_nested_expression_in_a_statement():
    # deep enough to get past Python's parser, too deep to walk recursively
    dims = "+".join(["n"] * 900)
    err = parse_error(relax("n = T.int64()", f"y = R.shape([{dims}])", "return x"))
    assert "nested too deeply" in err.message
    assert err.span.line == BODY_LINE + 1  # the statement being parsed


# ---------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("stmt, kind", [
    ("while x:\n            pass", "while"),
    ("for i in x:\n            pass", "for"),
    ("try:\n            pass\n        except E:\n            pass", "try"),
    ("del x", "del"),
    ("import os", "import"),
    ("x += x", "augmented assignment"),
    ("assert x", "assert"),
    ("class C:\n            pass", "class"),
])
def test_unsupported_statement_in_relax(stmt: str, kind: str):
    err = parse_error(relax(stmt, "return x"))
    assert err.message == f"unsupported statement '{kind}' in R.function"
    assert where(err) == (BODY_LINE, 8)


def test_unsupported_statement_in_tir():
    # (`while` is TIR: test_tvm_lowered_ops)
    err = parse_error(prim("try:", "    pass", "finally:", "    pass"))
    assert err.message == "unsupported statement 'try' in T.prim_func"
    assert where(err) == (BODY_LINE, 8)


def test_unsupported_expressions():
    # x + x is R.add(x, x), as in TVM; x % x has no Relax operator
    add = phasec.parse(relax("y = x + x", "return y"))["main"].body.blocks[0].bindings[0].value
    assert add.op.name == "relax.add"
    err = parse_error(relax("y = x % x", "return y"))
    assert "'%' is not supported on Relax values" in err.message
    assert where(err) == (BODY_LINE, 12)
    err = parse_error(relax("y = lambda: x", "return y"))
    assert "lambda" in err.message
    err = parse_error(relax("y = R.add(x, None)", "return y"))
    assert "Python literal" in err.message and where(err) == (BODY_LINE, 21)


def test_unknown_operator_with_suggestion():
    err = parse_error(relax("y = R.foo(x)", "return y"))
    assert err.message == "unknown operator R.foo (did you mean R.floor?)"
    assert where(err) == (BODY_LINE, 12)
    err = parse_error(relax("y = R.nn.rleu(x)", "return y"))
    assert "unknown operator R.nn.rleu (did you mean R.nn.relu?)" == err.message


def test_unknown_tir_function():
    err = parse_error(prim("B[0] = T.exq(A[0])"))
    assert err.message == "unknown TIR function T.exq (did you mean T.exp?)"


def test_undefined_names():
    err = parse_error(relax("y = R.add(x, z)", "return y"))
    assert err.message == "name 'z' is not defined" and where(err) == (BODY_LINE, 21)
    err = parse_error(relax("y = R.shape([n])", "return x"))
    assert "name 'n' is not defined" in err.message
    err = parse_error(relax("y = cls.nope(x)", "return y"))
    assert "module has no function 'nope'" in err.message
    err = parse_error(prim("for i in range(4):", "    B[j] = A[i]"))
    assert err.message == "name 'j' is not defined" and where(err) == (BODY_LINE + 1, 14)


def test_dataflow_block_structure():
    # without R.output nothing leaves the block (TVM 0.27 reads it as R.output())
    err = parse_error(relax("with R.dataflow():", "    y = R.add(x, x)", "return y"))
    assert err.message.startswith("'y' is a dataflow variable: it is bound inside a dataflow "
                                  "block but not listed in its R.output(...)")
    assert where(err) == (BODY_LINE + 2, 15)
    err = parse_error(relax("with R.dataflow():", "    y = R.add(x, x)", "    R.output(z)",
                            "return y"))
    assert "'z' is not assigned in this dataflow block" in err.message
    # dataflow variables are not visible after the block
    err = parse_error(relax("with R.dataflow():", "    y = R.add(x, x)", "    z = R.add(y, y)",
                            "    R.output(z)", "return y"))
    assert err.message.startswith("'y' is a dataflow variable")
    err = parse_error(relax("R.output(x)", "return x"))
    assert "last statement of a dataflow block" in err.message


def test_function_structure():
    err = parse_error(relax("y = R.add(x, x)"))
    assert "must end with `return <expr>`" in err.message
    err = parse_error(relax("return x", "y = x"))
    assert "`return` must be the last statement" in err.message
    err = parse_error(relax("if x:", "    y = x", "return y"))
    assert "needs an else branch" in err.message
    err = parse_error(relax("if x:", "    y = x", "else:", "    z = x", "return y"))
    assert "must assign the same variable" in err.message
    text = HEADER.replace('(x: R.Tensor((4,), dtype="float32"))', "(x)") + "        return x\n"
    err = parse_error(text)
    assert "needs a struct info annotation" in err.message


def test_recursive_nested_function_needs_return_annotation():
    err = parse_error(relax("@R.function", "def g(y: R.Tensor((4,), dtype=\"float32\")):",
                            "    z = g(y)", "    return z", "return x"))
    assert "needs a return annotation" in err.message


def test_wrong_operand_count_and_attributes():
    err = parse_error(relax("y = R.add(x)", "return y"))
    assert err.message == "R.add expects 2 operands (x1, x2), got 1; missing x2"
    err = parse_error(relax("y = R.add(x, x, x)", "return y"))
    assert "R.add takes 2 operands" in err.message
    err = parse_error(relax("y = R.add(x, x, axis=1)", "return y"))
    assert err.message.startswith("unknown keyword attribute 'axis' for R.add")
    assert where(err) == (BODY_LINE, 29)
    err = parse_error(relax("y = R.sum(x, keepdim=True)", "return y"))
    assert "unknown keyword attribute 'keepdim' for R.sum" in err.message
    assert "keepdims" in err.message
    err = parse_error(relax("y = R.nn.layer_norm(x, x, x)", "return y"))
    assert err.message == "R.nn.layer_norm requires the attribute 'axes'"
    err = parse_error(relax("y = R.add(x, x1=x)", "return y"))
    assert "given twice" in err.message
    err = parse_error(relax("y = R.call_tir(cls.main)", "return y"))
    assert "missing the argument 'args'" in err.message
    err = parse_error(relax("y = R.call_tir(cls.main, (x,))", "return y"))
    assert "needs out_sinfo=" in err.message


def test_malformed_annotations():
    err = parse_error(relax("y: R.Tensr((4,)) = x", "return y"))
    assert "expected a struct info annotation" in err.message
    err = parse_error(relax('y: R.Tensor((4,), "float33") = x', "return y"))
    assert "unknown dtype 'float33'" in err.message
    err = parse_error(relax('y: R.Tensor((4,), ndim=2) = x', "return y"))
    assert "does not match" in err.message
    err = parse_error(relax('y: R.Tensor(("n +",)) = x', "return y"))
    assert "invalid dimension expression" in err.message
    err = parse_error(relax('y: R.Tensor(4) = x', "return y"))
    assert "must be a tuple or list" in err.message


def test_tvm_metadata_constants_are_explained():
    text = relax('y = R.add(x, metadata["ir.GenericConst"][1])', "return y")
    err = parse_error(text)
    assert "refers to TVM's metadata section" in err.message and "phasec.tvm.from_tvm" in err.message
    assert where(err) == (BODY_LINE, 21)
    with pytest.raises(ParseError, match=r"has 1 entries; index 1 is out of range"):
        phasec.parse(text, metadata={"ir.GenericConst": [np.zeros(4, "float32")]})
    err = parse_error(relax('y = R.add(x, metadata["ir.GenericConst"][x])', "return y"))
    assert 'expected metadata["<kind>"][<index>]' in err.message


def test_module_level_problems():
    err = parse_error("@I.ir_module\nclass M:\n    I.module_attrs({'phase': 'nonsense'})\n")
    assert "invalid phase 'nonsense'" in err.message and where(err) == (3, 29)
    err = parse_error("@I.ir_module\nclass M:\n    x = 1\n")
    assert "unsupported assignment statement in an @I.ir_module class" in err.message
    err = parse_error("@I.ir_module\nclass M:\n    def f(x):\n        return x\n")
    assert "needs a @R.function or @T.prim_func decorator" in err.message
    err = parse_error("@I.ir_module\nclass M:\n    @R.function\n    def f(x: R.Object):\n"
                      "        return x\n    @R.function\n    def f(x: R.Object):\n        return x\n")
    assert "defined twice" in err.message and err.span.line == 7


def test_tir_structure():
    err = parse_error(prim("T.reads(A[0])"))
    assert "only allowed directly inside a T.block" in err.message
    err = parse_error(prim("v = T.axis.spatial(4, 0)"))
    assert "only allowed directly inside a T.block" in err.message
    # a handle without T.match_buffer is an opaque handle parameter (as in TVM), not an error
    text = "@I.ir_module\nclass M:\n    @T.prim_func\n    def f(a: T.handle):\n        T.evaluate(0)\n"
    assert phasec.parse(text)["f"].params[0].dtype == "handle"
    err = parse_error(prim("for i, j in T.grid(4, 4, 4):", "    B[i] = A[i]"))
    assert "3 extent(s) but the loop has 2 variable(s)" in err.message
    # one name for all of a grid's variables is TVM's spelling for T.axis.remap only
    err = parse_error(prim("for i in T.grid(4, 4):", "    B[i] = A[i]"))
    assert "names the 2 loop variables of a T.grid" in err.message
    err = parse_error(prim("for i in T.thread_binding(4):", "    B[i] = A[i]"))
    assert "needs its thread axis" in err.message  # TVM needs it too
    err = parse_error(prim("for i in T.spin(4):", "    B[i] = A[i]"))
    assert "unsupported loop" in err.message
    err = parse_error(prim("B[0] = A"))
    assert "used as a scalar" in err.message


# ---------------------------------------------------------------------------
# Never run the input
# ---------------------------------------------------------------------------

PAYLOADS = {
    "module level": "import os\nos.system('touch /tmp/pwned')\n",
    "module level import": "__import__('os').system('touch /tmp/pwned')\n",
    "class body": "@I.ir_module\nclass M:\n    os.system('touch /tmp/pwned')\n",
    "class decorator": "@os.system('touch /tmp/pwned')\nclass M:\n    pass\n",
    "function body": relax("os.system('touch /tmp/pwned')", "return x"),
    "function body value": relax("y = __import__('os').system('touch /tmp/pwned')", "return y"),
    "decorator": HEADER.replace("@R.function", "@R.function(pure=os.system('x'))") + "        return x\n",
    "other decorator": HEADER.replace("@R.function", "@os.system('x')") + "        return x\n",
    "default argument": HEADER.replace('dtype="float32"))', 'dtype="float32") = os.system("x"))', 1)
    + "        return x\n",
    "annotation": HEADER.replace('R.Tensor((4,), dtype="float32"))', "__import__('os').system('x'))", 1)
    + "        return x\n",
    "return annotation": HEADER.replace('-> R.Tensor((4,), dtype="float32")', "-> os.system('x')")
    + "        return x\n",
    "shape dim": relax("y: R.Tensor((os.system('x'),)) = x", "return y"),
    "string dim": relax("y: R.Tensor((\"__import__('os').system('x')\",)) = x", "return y"),
    "attribute": relax("y = R.sum(x, axis=os.system('x'))", "return y"),
    "constant": relax("y = R.const(os.system('x'))", "return y"),
    "func_attr": relax("R.func_attr({'a': os.system('x')})", "return x"),
    "module_attrs": "@I.ir_module\nclass M:\n    I.module_attrs({'a': os.system('x')})\n",
    "tir expression": prim("B[0] = os.system('x')"),
    "tir loop": prim("for i in os.system('x'):", "    pass"),
    "eval": relax("y = eval('1')", "return y"),
    "exec in tir": prim("T.evaluate(exec('1'))"),
}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_input_is_never_executed(name: str, monkeypatch, tmp_path: Path):
    calls: list = []

    def spy(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the parser ran code from its input")

    monkeypatch.setattr(os, "system", spy)
    monkeypatch.setattr(subprocess, "Popen", spy)
    for fn in ("eval", "exec", "compile"):
        original = getattr(builtins, fn)

        def guarded(*args, _original=original, _fn=fn, **kwargs):
            source = args[0] if args else kwargs.get("source")
            flags = args[3] if len(args) > 3 else kwargs.get("flags", 0)
            parse_only = _fn == "compile" and flags & ast.PyCF_ONLY_AST  # ast.parse
            if isinstance(source, str) and "system" in source and not parse_only:
                calls.append(args)
            return _original(*args, **kwargs)
        monkeypatch.setattr(builtins, fn, guarded)
    path = tmp_path / "payload.py"
    path.write_text(PAYLOADS[name])
    with pytest.raises(ParseError) as info:
        phasec.load(path)
    assert info.value.span is not None and info.value.span.file == str(path)
    assert calls == []


def test_parser_source_has_no_eval_or_exec():
    for module in (parser_mod, loader_mod):
        source = Path(module.__file__).read_text()
        for pattern in (r"(?<![.\w])eval\(", r"(?<![.\w])exec\(", r"(?<![.\w])compile\(",
                        r"__import__", r"importlib", r"literal_eval"):
            assert not re.search(pattern, source), (module.__name__, pattern)


# ---------------------------------------------------------------------------
# Never a raw traceback
# ---------------------------------------------------------------------------

def test_internal_errors_become_parse_errors(monkeypatch):
    def broken(self, stmt):
        raise KeyError("boom")

    monkeypatch.setattr(parser_mod._RelaxFunctionParser, "_assign", broken)
    err = parse_error(relax("y = R.add(x, x)", "return y"))
    assert "internal error" in err.message and "boom" in err.message
    assert where(err) == (BODY_LINE, 8)


def test_inference_crash_is_not_a_parse_error(monkeypatch):
    """An operator whose inference raises leaves the call without struct info."""
    from phasec.op import infer

    def crash(expr, ctx=None):
        raise ZeroDivisionError("bug in an inference function")

    monkeypatch.setattr(infer, "infer_struct_info", crash)
    mod = phasec.parse(relax("y: R.Tensor((4,), dtype=\"float32\") = R.add(x, x)", "return y"))
    binding = mod["main"].body.blocks[0].bindings[0]
    assert binding.value.struct_info is None and binding.var.struct_info is not None


# ---------------------------------------------------------------------------
# Loading files
# ---------------------------------------------------------------------------

def test_load_errors(tmp_path: Path):
    with pytest.raises(ParseError, match="no such file"):
        phasec.load(tmp_path / "missing.py")
    with pytest.raises(ParseError, match="unknown file type '.txt'"):
        phasec.load(tmp_path / "module.txt")
    with pytest.raises(ParseError, match="no suffix"):
        phasec.load(tmp_path / "module")
    directory = tmp_path / "dir.py"
    directory.mkdir()
    with pytest.raises(ParseError, match="directory"):
        phasec.load(directory)
    binary = tmp_path / "binary.py"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ParseError, match="binary") as info:
        phasec.load(binary)
    assert info.value.span.file == str(binary)
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes("# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ParseError, match="not UTF-8") as info:
        phasec.load(latin1)
    assert (info.value.span.line, info.value.span.col) == (1, 5)


def test_load_reports_the_path(tmp_path: Path):
    path = tmp_path / "bad.py"
    path.write_text(relax("y = R.foo(x)", "return y"))
    with pytest.raises(ParseError) as info:
        phasec.load(path)
    assert str(info.value).startswith(f"{path}:{BODY_LINE}:13: unknown operator R.foo")


def test_load_accepts_a_utf8_bom(tmp_path: Path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + relax("return x").encode())
    assert "main" in phasec.load(path)


def test_dataflow_variable_used_after_its_block_names_the_cause():
    # Issue 18 #12: this said "name 'lv2' is not defined".
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        with R.dataflow():
            lv = R.add(x, x)
            lv2 = R.multiply(lv, x)
            R.output(lv)
        return lv2
'''
    with pytest.raises(ParseError) as info:
        phasec.parse(src)
    assert "'lv2' is a dataflow variable" in info.value.message
    assert "add it to R.output" in info.value.message and "WF003" in info.value.message
    assert info.value.span.line == 10


# ---------------------------------------------------------------------------
# Integers stay integers; long lines are clipped
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dim, shown", [
    ("10 ** 10 ** 10", "10 ** 10000000000"),
    ("2 ** 64 + 4", str(2**64)),
    ("2 ** 63", str(2**63)),
    ("9223372036854775807 + 5", str(2**63 + 4)),
    ("-9223372036854775807 - 5", str(-(2**63) - 4)),
    ("3 * 4611686018427387904", str(3 * 2**62)),
])
def test_shape_arithmetic_past_int64_is_an_error_not_a_wrap(dim: str, shown: str) -> None:
    text = relax(f"y = R.reshape(x, R.shape([{dim}]))", "return x")
    err = parse_error(text)
    # the JSON reader's wording: "<value> does not fit in int64"
    assert f"{shown} does not fit in int64" in err.message
    assert where(err)[0] == BODY_LINE


def test_shape_arithmetic_within_int64_is_kept() -> None:
    from phasec import arith

    mod = phasec.parse(relax("y = R.reshape(x, R.shape([4611686018427387904 // 1152921504606846976]))",
                             "return y"))
    dim = mod["main"].body.blocks[0].bindings[0].value.struct_info.shape[0]
    assert arith.const_int(dim) == 4


def test_negative_constant_dimension_is_an_error() -> None:
    err = parse_error(HEADER.replace("R.Tensor((4,)", "R.Tensor((2 - 5,)", 1) + "        return x\n")
    assert "a dimension cannot be negative (-3)" in err.message


def test_excerpt_of_a_very_long_line_is_clipped_around_the_column(tmp_path) -> None:
    import subprocess
    import sys

    filler = "y" * 400_000
    path = tmp_path / "long.py"
    path.write_text(relax(f"y = R.nope(x, {filler!r})", "return y"))
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    assert all(len(line) < 400 for line in lines), max(len(line) for line in lines)
    excerpt = next(i for i, line in enumerate(lines) if "R.nope" in line and line.startswith("  "))
    caret = lines[excerpt + 1].index("^")
    assert lines[excerpt][caret:].startswith("R.nope")


@pytest.mark.parametrize("call, message", [
    ('R.call_pure_packed("phasec.stop_fusion", x, x, ty_args=R.Tensor((4,), "float32"))',
     "takes exactly one operand"),
    ('R.call_pure_packed("phasec.stop_fusion", x, ty_args=R.Tensor((5,), "float32"))',
     "ty_args must be the operand's struct info"),
])
def test_tvm_spelling_of_stop_fusion_is_checked(call, message):
    err = parse_error(relax(f"y = {call}", "return y"))
    assert message in err.message and where(err) == (BODY_LINE, 12)


def test_tvm_spelling_of_stop_fusion_reads_as_stop_fusion():
    mod = phasec.parse(relax(
        'y = R.call_pure_packed("phasec.stop_fusion", x, ty_args=R.Tensor((4,), "float32"))',
        "return y"))
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.stop_fusion" and call.args == (mod["main"].params[0],)
