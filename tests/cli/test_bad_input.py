"""Bad input at every user-facing surface: each gives a phasec error (or, for
the command lines, a one-line message and a non-zero status) that says what
is wrong and where; never a raw traceback, a crash of the process or a hang.

Each test is the regression test of a defect found by an adversarial review
(input -> what used to happen, in the test's docstring).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import ParseError, PhasecError, SchemaError, VMError
from phasec.script.json_format import from_json, to_json

from helpers.paths import VERIFIER_CASES



def relax(params: str, *body: str, ret: str = "") -> str:
    """A module with one R.function ``main(params)`` whose body is ``body``."""
    lines = "".join(f"        {line}\n" for line in body)
    return ("@I.ir_module\nclass M:\n    @R.function\n"
            f"    def main({params}){ret}:\n{lines}")


def prim(params: str, *body: str, call: str = "(x,)",
         out: str = 'R.Tensor((4,), "float32")') -> str:
    """A module with one kernel ``k(params)`` and a ``main`` calling it."""
    lines = "".join(f"        {line}\n" for line in body)
    return ("@I.ir_module\nclass M:\n    @T.prim_func\n"
            f"    def k({params}):\n{lines}\n"
            "    @R.function\n"
            '    def main(x: R.Tensor((4,), dtype="float32")):\n'
            f"        y = R.call_tir(cls.k, {call}, out_sinfo={out})\n"
            "        return y\n")


AB = 'A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")'
X4 = 'x: R.Tensor((4,), dtype="float32")'


def parse_error(text: str, *fragments: str, line: int | None = None) -> ParseError:
    with pytest.raises(ParseError) as info:
        phasec.parse(text, filename="bad.py")
    err = info.value
    assert err.span is not None and err.span.file == "bad.py", err
    for fragment in fragments:
        assert fragment in err.message, err.message
    if line is not None:
        assert err.span.line == line, err
    return err


# ---------------------------------------------------------------------------
# TVMScript: values no phase could use are parse errors at their location
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dim, fragment", [
    ("4.5", "must be an integer, not a float32"),
    ("True", "must be an integer, not a bool"),
    ("-4", "cannot be negative (-4)"),
    ("n * 1.5", "contains a float32 value"),
    ("n < 2", "not a bool value"),
    ("T.float32(2)", "not a float32"),
    ("100000000000000000000000", "does not fit in int64"),
])
def test_tensor_dimensions_must_be_integers(dim, fragment):
    """``R.Tensor((4.5,))`` / ``((True,))`` / ``((-4,))`` were accepted; a float
    dimension then failed inside LegalizeOps with ``<FloatImm at 0x...>``."""
    err = parse_error(relax(f'x: R.Tensor(({dim},), "float32")', "return x"), fragment, line=4)
    assert "R.Tensor shape" in err.message or "integer literal" in err.message


@pytest.mark.parametrize("stmt, fragment", [
    ("y = R.zeros((2.5,), 'float32')", "shape operand 'shape'"),
    ("y = R.reshape(x, (2.5, 2))", "must be an integer"),
    ("y = R.shape([1.5])", "R.shape: a dimension must be an integer"),
])
def test_shape_values_must_be_integers(stmt, fragment):
    parse_error(relax(X4, stmt, "return x"), fragment, line=5)


def test_negative_shape_values_stay_allowed_where_meaningful():
    """reshape's ``-1`` is a shape *value*, not a tensor dimension."""
    mod = phasec.parse(relax(X4, "y = R.reshape(x, (2, -1))", "return y"))
    assert mod["main"].struct_info is not None


@pytest.mark.parametrize("text, fragment", [
    ('x: R.Shape(ndim=-5)', "ndim must be -1 (unknown) or >= 0"),
    ('x: R.Prim("int64", value=1.5)', "is float32, not int64"),
])
def test_bad_annotations(text, fragment):
    """``R.Shape(ndim=-5)`` and ``R.Prim("int64", value=1.5)`` were accepted."""
    parse_error(relax(text, "return x"), fragment, line=4)


def test_duplicate_parameter_names():
    """Two parameters named ``x`` were accepted (Python's compiler rejects them,
    ``ast.parse`` does not), the body silently using the second one."""
    parse_error(relax(f"{X4}, {X4}", "return x"), "duplicate parameter name 'x'", line=4)
    parse_error(prim('A: T.Buffer((4,), "float32"), A: T.Buffer((4,), "float32")',
                     "A[0] = T.float32(1)"), "duplicate parameter name 'A'", line=4)
    nested = relax(X4, "@R.function",
                   "def g(a: R.Tensor((4,), 'float32'), a: R.Tensor((4,), 'float32')) "
                   "-> R.Tensor((4,), 'float32'):", "    return a", "return x")
    parse_error(nested, "function 'g': duplicate parameter name 'a'", line=6)


@pytest.mark.parametrize("body, fragment", [
    (["for i in T.serial(4):", "    B[i] = T.Cast('float32', T.int8(300))"],
     "T.int8(300): 300 does not fit in int8"),
    (["for i in range(4.0):", "    B[i] = A[i]"], "loop bounds must be integers"),
    (["for i in range(True):", "    B[i] = A[i]"], "got a bool value"),
    (["for i in range(100000000000000000000):", "    B[i] = A[i]"], "does not fit in int64"),
    (["t = T.alloc_buffer((-4,), 'float32')", "B[0] = A[0]"], "cannot be negative"),
    (["t = T.alloc_buffer((4.5,), 'float32')", "B[0] = A[0]"], "must be an integer"),
    (["for i in range(4):", "    with T.block('b'):", "        vi = T.axis.spatial(4.5, i)",
      "        B[vi] = A[vi]"], "T.axis.spatial domain"),
])
def test_tir_values_are_checked(body, fragment):
    """A wrapping ``T.int8(300)``, float/bool loop extents, negative or
    fractional buffer shapes and axis domains were accepted."""
    parse_error(prim(AB, *body), fragment)


@pytest.mark.parametrize("shape, fragment", [
    ("(4.0,)", "T.Buffer shape: a dimension must be an integer"),
    ("(-4,)", "cannot be negative"),
])
def test_buffer_shapes_are_checked(shape, fragment):
    parse_error(prim(f'A: T.Buffer({shape}, "float32"), B: T.Buffer((4,), "float32")',
                     "B[0] = A[0]"), fragment, line=4)


def test_big_tir_literals_become_int64_as_in_tvm():
    """A bare literal too big for int32 is an int64 (not an error, not wrapped)."""
    mod = phasec.parse(prim('A: T.Buffer((4,), "int64"), B: T.Buffer((4,), "int64")',
                            "for i in range(4):", "    B[i] = A[i] + 3000000000",
                            out='R.Tensor((4,), "int64")').replace('"float32"', '"int64"'))
    store = mod["k"].body.body
    assert store.value.rhs.dtype == "int64" and store.value.rhs.value == 3000000000


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------

def _doc() -> dict:
    mod = phasec.parse(relax('x: R.Tensor((2,), dtype="float32")',
                             'c = R.const([1.0, 2.0], "float32")', "y = R.add(x, c)",
                             "return y"))
    return json.loads(to_json(mod))


def _find(doc: dict, node: str) -> dict:
    stack: list = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if v.get("node") == node:
                return v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    raise AssertionError(node)


def schema_error(doc_or_text, *fragments: str) -> SchemaError:
    text = doc_or_text if isinstance(doc_or_text, (str, bytes)) else json.dumps(doc_or_text)
    with pytest.raises(SchemaError) as info:
        from_json(text)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize("name", ["a b", "", "class", "1x"])
def test_json_function_names_must_be_identifiers(name):
    """``"functions": {"a b": ...}`` loaded and printed ``def a b(...)``."""
    doc = _doc()
    doc["functions"] = {name: doc["functions"]["main"]}
    err = schema_error(doc, "is not a valid identifier")
    assert err.errors[0][0] == f"functions.{name}"


def test_json_bool_constant_data_must_be_0_or_1():
    """Bytes other than 0/1 made a numpy bool array holding 2."""
    doc = _doc()
    const = _find(doc, "Constant")
    const.update(dtype="bool", shape=[2], data="AgI=")
    schema_error(doc, "bool constant data must be bytes 0 or 1")


@pytest.mark.parametrize("dim, fragment", [
    ({"node": "tir.FloatImm", "value": 1.5, "dtype": "float32"}, "must be an integer"),
    ({"node": "tir.IntImm", "value": -3, "dtype": "int64"}, "cannot be negative"),
    ({"node": "tir.IntImm", "value": 300, "dtype": "int8"}, "does not fit in int8"),
    (2 ** 63, "does not fit in int64"),
])
def test_json_tensor_dimensions_are_checked(dim, fragment):
    doc = _doc()
    doc["struct_infos"][0]["shape"] = [dim]
    err = schema_error(doc, fragment)
    assert err.errors[0][0].startswith("struct_infos.0.shape.0")


def test_json_text_encodings():
    """A BOM (as files may start with) was 'expected value at line 1 column 1';
    bytes that are not UTF-8 gave the same puzzling message."""
    text = json.dumps(_doc())
    for data in ("\ufeff" + text, b"\xef\xbb\xbf" + text.encode()):
        assert from_json(data)["main"] is not None
    schema_error(b"\xff\xfe{}", "not UTF-8")


# ---------------------------------------------------------------------------
# Operators the pipeline cannot lower
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("call", ["R.add(x, x)", "R.subtract(x, x)", "R.nn.relu(x)",
                                  "R.matmul(x, x)", "R.maximum(x, x)"])
def test_arithmetic_on_bool_tensors_is_a_diagnostic(call):
    """Arithmetic on bool tensors passed inference and failed in the LLVM code
    generator ("cannot use a int32 value as the value stored into buffer
    'T_add' of dtype bool"), without the Relax location."""
    from phasec.verifier.checker import check

    mod = phasec.parse(relax('x: R.Tensor((3, 3), "bool")', f"r = {call}", "return r"), "b.py")
    diags = [d for d in check(mod, mod.phase) if d.code == "WF405"]
    assert diags and "does not compute on bool tensors" in diags[0].message
    assert diags[0].span.line == 5
    with pytest.raises(PhasecError):
        phasec.build(mod, kernels="none")


def test_logical_operators_still_take_bool_tensors():
    mod = phasec.parse(relax('x: R.Tensor((3,), "bool")', "r = R.logical_or(x, x)",
                             "s = R.astype(r, 'int32')", "return s"))
    x = np.array([True, False, True])
    out = phasec.VirtualMachine(phasec.build(mod))["main"](x)
    np.testing.assert_array_equal(out, x.astype("int32"))


# ---------------------------------------------------------------------------
# Native kernels: nothing the user writes may crash the process
# ---------------------------------------------------------------------------

def test_float64_to_float16_does_not_crash():
    """``R.astype(x_f64, "float16")`` segfaulted: LLVM lowered the conversion to
    a call of ``__truncdfhf2``, which the JIT resolved to address 0."""
    mod = phasec.parse(relax('x: R.Tensor((8,), "float64")', "r = R.astype(x, 'float16')",
                             "return r"))
    vm = phasec.VirtualMachine(phasec.build(mod))
    # values that round differently through float32 (double rounding) and edge cases
    h = np.array([1.0, 1.0009765625], np.float64)
    tie = (h[0] + h[1]) / 2  # exactly halfway between two halves
    x = np.array([tie, tie + 1e-12, 65519.99, 65520.0, 1e300, -0.0, np.nan, 3e-8])
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    np.testing.assert_array_equal(vm["main"](x), expected)


@pytest.mark.parametrize("body, fragment", [
    (["for i in range(8):", "    B[i] = A[i]"],
     "out-of-bounds read of buffer 'A': its index in dimension 0 takes the values 0..7"),
    (["for i in range(4):", "    B[i + 1] = A[i]"], "out-of-bounds write to buffer 'B'"),
    (["for i in range(10**20):", "    B[0] = A[i]"], "out-of-bounds read of buffer 'A'"),
    (["for i in range(2):", "    for j in range(3):", "        B[i * 2 - j] = A[0]"],
     "takes the values -2..2"),
])
def test_provably_out_of_bounds_kernels_are_refused(body, fragment):
    """A kernel looping past its buffer compiled, and running it segfaulted.
    The verifier reports it (WF504, so phasec-check says it too) before the
    pipeline runs, and the code generator refuses it when called directly."""
    mod = phasec.parse(prim(AB, *body), "k.py")
    with pytest.raises(PhasecError, match=r"k\.py:\d+:\d+: error\[WF504\]") as info:
        phasec.build(mod)
    assert fragment in str(info.value)
    with pytest.raises(PhasecError, match="kernel 'k' at k.py:") as info:
        compile_prim_funcs(dict(mod.prim_funcs()))
    assert fragment in str(info.value)


@pytest.mark.parametrize("body", [
    ["for i in range(8):", "    if i < 4:", "        B[i] = A[i]"],
    ["for i in range(8):", "    B[T.min(i, 3)] = T.Select(i < 4, A[T.min(i, 3)], T.float32(0))"],
    ["for i in range(4):", "    for j in range(0):", "        B[i + 9] = A[i]", "    B[i] = A[i]"],
    ["for i in range(4):", "    B[i] = A[3 - i]"],
])
def test_in_bounds_or_guarded_accesses_compile(body):
    """The check never refuses a kernel that could be correct."""
    mod = phasec.parse(prim(AB, *body))
    phasec.build(mod)


def test_bool_indices_are_refused_like_in_the_interpreter():
    """``A[i < 2]`` compiled (reading A[0] or A[1]) but the interpreter refused it."""
    mod = phasec.parse(prim(AB, "for i in range(4):", "    B[i] = A[i < 2]"))
    with pytest.raises(PhasecError, match="has dtype bool; indices must be integers"):
        phasec.build(mod)


# ---------------------------------------------------------------------------
# Hangs
# ---------------------------------------------------------------------------

def test_symbolic_power_does_not_hang():
    """``R.Tensor(("n", "n ** 100000000"))`` made the interpreter (and the VM)
    compute 3 ** 100000000 with Python integers: hours."""
    mod = phasec.parse(relax('x: R.Tensor(("n", "n ** 100000000"), "float32")', "return x"))
    with pytest.raises(PhasecError, match="dimension 1 is 1"):
        phasec.interp.run(mod, np.ones((3, 1), "float32"))
    with pytest.raises(PhasecError, match="dimension 1 is 1"):
        phasec.VirtualMachine(phasec.build(mod, kernels="none"))["main"](np.ones((3, 1), "float32"))


def test_tir_integer_power_does_not_hang():
    mod = phasec.parse(prim('A: T.Buffer((4,), "int64"), B: T.Buffer((4,), "int64")',
                            "for i in range(4):", "    B[i] = T.pow(A[i], T.int64(100000000))",
                            out='R.Tensor((4,), "int64")').replace('x: R.Tensor((4,), dtype="float32")',
                                                                    'x: R.Tensor((4,), dtype="int64")'))
    x = np.array([3, -3, 1, 0], np.int64)
    expected = np.array([pow(3, 10**8, 1 << 64), pow(-3, 10**8, 1 << 64), 1, 0],
                        dtype=np.uint64).astype(np.int64)
    np.testing.assert_array_equal(phasec.interp.run(mod, x), expected)


# ---------------------------------------------------------------------------
# The library API
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_exe():
    mod = phasec.parse(relax('x: R.Tensor((2,), "float32"), p: R.Prim("int64")',
                             "y = R.add(x, x)", "return y"))
    return mod, phasec.build(mod)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"kernels": 5}, "takes 'llvm', 'interp' or a mapping"),
    ({"kernels": {"add": 3}}, "is not callable"),
    ({"max_call_depth": -1}, "max_call_depth must be an int >= 1"),
    ({"max_call_depth": "a"}, "max_call_depth must be an int >= 1"),
])
def test_virtual_machine_arguments(small_exe, kwargs, fragment):
    """``kernels=5`` raised TypeError ('int' object is not iterable); a bad
    ``max_call_depth`` was accepted silently."""
    _, exe = small_exe
    if isinstance(kwargs.get("kernels"), dict):
        kwargs = {"kernels": {name: 3 for name in exe.prim_funcs}}
    with pytest.raises(VMError, match=fragment):
        phasec.VirtualMachine(exe, **kwargs)


def test_interpreter_max_call_depth():
    mod, _ = phasec.parse(relax(X4, "return x")), None
    with pytest.raises(PhasecError, match="max_call_depth must be an int >= 1"):
        phasec.interp.run(mod, np.ones(4, "float32"), max_call_depth=0)


def test_integer_scalar_arguments_must_fit_their_dtype(small_exe):
    """``2**70`` for an ``R.Prim("int64")`` parameter was accepted."""
    mod, exe = small_exe
    x = np.ones(2, "float32")
    with pytest.raises(VMError, match="does not fit in int64"):
        phasec.VirtualMachine(exe)["main"](x, 2 ** 70)
    with pytest.raises(PhasecError, match="does not fit in int64"):
        phasec.interp.run(mod, x, 2 ** 70)


# ---------------------------------------------------------------------------
# Executables from files
# ---------------------------------------------------------------------------

def _tampered(tmp_path: Path, small_exe, edit) -> Path:
    _, exe = small_exe
    path = tmp_path / "m.pvm"
    exe.save(path)
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(files["executable.json"])
    edit(doc["functions"][0]["code"])
    files["executable.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _set_first(code: list, op: str, index: int, value) -> None:
    next(ins for ins in code if ins[0] == op)[index] = value


@pytest.mark.parametrize("edit, fragment", [
    (lambda code: _set_first(code, "match", 2, ["tensor"]), "field 'pattern' is not a pattern"),
    (lambda code: _set_first(code, "match", 2, ["tensor", "float33", 1, [["imm", 2]]]),
     "bad tensor dtype"),
    (lambda code: _set_first(code, "match", 2, ["tensor", "float32", 3, [["imm", 2]]]),
     "does not match its dimensions"),
    (lambda code: _set_first(code, "call", 4, [1, "x"]), "field 'args' must be a list of integers"),
    (lambda code: _set_first(code, "call", 1, "r1"), "field 'dst' must be an integer"),
    (lambda code: _set_first(code, "call", 2, 9), "field 'kind' must be a callee kind"),
    (lambda code: code.insert(1, ["goto", "x"]), "field 'offset' must be an integer"),
    (lambda code: code.insert(1, ["make_prim", 1, ["bin", "**", ["imm", 1], ["imm", 2]], "int64"]),
     "is not an expression code"),
])
def test_damaged_bytecode_is_a_format_error(tmp_path, small_exe, edit, fragment):
    """Malformed instruction fields in a .pvm file raised TypeError/IndexError/
    ValueError from inside Executable.load or VirtualMachine()."""
    from phasec.backend.vm import ExecutableFormatError

    path = _tampered(tmp_path, small_exe, edit)
    with pytest.raises(ExecutableFormatError, match="damaged executable") as info:
        phasec.Executable.load(path)
    assert fragment in str(info.value)


def test_deeply_nested_executable_json(tmp_path):
    path = tmp_path / "deep.pvm"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("executable.json", "[" * 100000 + "]" * 100000)
    from phasec.backend.vm import ExecutableFormatError

    with pytest.raises(ExecutableFormatError, match="nested too deeply|not a phasec executable"):
        phasec.Executable.load(path)


# ---------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------

def _run(args: list[str], stdin: bytes | None = b"", close_stdin: bool = False
         ) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", "import sys; from phasec.cli import main; "
                           "sys.exit(main())", *args],
                          input=None if close_stdin else stdin,
                          stdin=subprocess.DEVNULL if close_stdin else None,
                          capture_output=True, env=env, timeout=120)


def test_phasec_binary_stdin_is_a_clear_error():
    """Binary standard input gave "cannot parse the file: 'utf-8' codec can't
    encode character '\\udc90'"; closed standard input a traceback."""
    r = _run(["opt", "-"], stdin=b"@I.ir_module\n\x90\x91")
    assert r.returncode == 2
    assert "not UTF-8 text" in r.stderr.decode() and "Traceback" not in r.stderr.decode()


def test_phasec_closed_stdin_is_a_clear_error(monkeypatch, capsys):
    from phasec.cli import main

    monkeypatch.setattr(sys, "stdin", None)
    assert main(["opt", "-"]) == 2
    err = capsys.readouterr().err
    assert "cannot read standard input" in err and "Traceback" not in err


def test_phasec_schema_indent_is_checked():
    """``phasec schema --indent 999999999999`` died with a MemoryError traceback."""
    r = _run(["schema", "--indent", "999999999999"])
    assert r.returncode == 2
    assert "must be between 0 and 16" in r.stderr.decode()


def test_phasec_last_resort_handler(monkeypatch, capsys):
    """An unexpected exception inside a subcommand (a phasec bug) is one
    "internal error, please report" line, not a traceback."""
    from phasec.cli import main, schema

    def boom(args):
        raise KeyError("something internal")

    monkeypatch.setattr(schema, "run", boom)
    monkeypatch.delenv("PHASEC_TRACEBACK", raising=False)
    assert main(["schema"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("phasec schema: internal error, please report: KeyError")
    assert "Traceback" not in err and err.count("\n") == 1


def test_phasec_broken_pipe_is_quiet():
    env = dict(os.environ)
    code = ("import sys; from phasec.cli import main; sys.exit(main(['schema']))")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    p.stdout.read(10)
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0 and b"Traceback" not in err and b"error" not in err


def _check(args: list[str], stdin) -> tuple[int, str]:
    from phasec.verifier.cli import main

    out = io.StringIO()
    status = main(args, stdout=out, stderr=out, stdin=stdin)
    return status, out.getvalue()


def test_phasec_check_reads_stdin():
    """``phasec-check -`` said "no such file or directory"."""
    text = relax(X4, "return x")
    status, out = _check(["-"], io.BytesIO(text.encode()))
    assert status == 0 and "checked 1 module" in out
    doc = to_json(phasec.parse(text))
    status, out = _check(["-"], io.StringIO(doc))
    assert status == 0, out
    status, out = _check(["-"], io.BytesIO(b"@I.ir_module\nclass M:\n    x = 1\n"))
    assert status == 2 and out.startswith("<stdin>:3:5: error[IN002]:")
    status, out = _check(["-"], io.BytesIO(b"\xff\xfe"))
    assert status == 2 and "<stdin>: error[IN001]: not UTF-8 text" in out


def test_phasec_check_last_resort_handler(monkeypatch):
    from phasec.verifier import cli

    def boom(*args, **kwargs):
        raise AttributeError("oops")

    monkeypatch.setattr(cli, "_print_text", boom)
    status, out = _check([str(VERIFIER_CASES / "ph101_good.py")], None)
    assert status == 2
    assert "phasec-check: internal error, please report: AttributeError: oops" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_phasec_check_directory_skips_named_pipes(tmp_path):
    """A named pipe called ``x.py`` in a checked directory blocked phasec-check forever."""
    (tmp_path / "good.py").write_text(relax(X4, "return x"))
    os.mkfifo(tmp_path / "pipe.py")
    status, out = _check([str(tmp_path)], None)
    assert status == 0 and "checked 1 module" in out


def test_invalid_phase_attribute_is_a_phasec_error():
    """``IRModule(attrs={"phase": "foo"})`` raised a bare ValueError."""
    from phasec.errors import InvalidPhaseError, PhaseError

    with pytest.raises(PhaseError, match="invalid phase 'foo'") as info:
        phasec.IRModule({}, {"phase": "foo"})
    assert isinstance(info.value, (InvalidPhaseError, ValueError))


def test_phasec_run_huge_dim_is_an_input_error(capsys):
    """``phasec run --example transformer --dim n=99999999999999999999999`` was
    "internal error ... ValueError: Maximum allowed dimension exceeded"."""
    from phasec.cli import main

    assert main(["run", "--example", "transformer", "--dim", "n=99999999999999999999999",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "parameter 'x' would be a float32 array of shape (99999999999999999999999" in err
    assert "internal error" not in err


def test_pass_api_argument_types():
    """``get_pass(5)`` raised TypeError from difflib; ``build(mod, instruments=5)``
    'int' object is not iterable."""
    from phasec.transform import PassConfigError, get_pass

    with pytest.raises(PassConfigError, match="a pass name must be a string"):
        get_pass(5)
    mod = phasec.parse(relax(X4, "return x"))
    with pytest.raises(PassConfigError, match="instruments=... takes a list"):
        phasec.build(mod, instruments=5)


def test_load_path_forms(tmp_path):
    """A NUL in the path raised "ValueError: embedded null byte" from pathlib;
    a bytes path a TypeError."""
    path = tmp_path / "m.py"
    path.write_text(relax(X4, "return x"))
    assert "main" in phasec.load(os.fsencode(path))
    with pytest.raises(ParseError, match="cannot contain NUL"):
        phasec.load(str(path) + "\x00.py")
