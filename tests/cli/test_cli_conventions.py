"""One convention across subcommands (issue 32, item 10): -q/-v everywhere,
--max-input-size only where an input is read, --format, '-' for standard
input (import too), the opt-level range in --help and its check, and exit 2
for a missing optional package (TVM as onnx and redis)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from phasec.cli import READ_NOTHING, SUBCOMMANDS, _is_usage_error, build_parser, main
from phasec.transform import list_passes
from phasec.tvm import TVMNotAvailableError


def _options(name: str) -> set[str]:
    parser = build_parser([name])
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {s for a in sub.choices[name]._actions for s in a.option_strings}


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_takes_quiet_and_verbose(name):
    options = _options(name)
    assert {"-q", "--quiet", "-v", "--verbose"} <= options
    assert ("--max-input-size" in options) == (name not in READ_NOTHING)


def test_passes_format_json_is_the_json_list(capsys):
    assert main(["passes", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["passes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == listed
    assert sorted(p["pass"] for p in listed) == sorted(list_passes())
    assert main(["passes", "--json", "--format", "table"]) == 2


def _add_model() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


class _Stdin(io.TextIOWrapper):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))


def test_import_reads_standard_input_as_it_reads_a_file(capsys, monkeypatch, tmp_path):
    path = tmp_path / "add.onnx"
    path.write_bytes(_add_model())
    assert main(["import", str(path)]) == 0
    from_file = capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", _Stdin(path.read_bytes()))
    assert main(["import", "-"]) == 0
    assert capsys.readouterr().out == from_file
    assert "R.add(x, x)" in from_file
    monkeypatch.setattr("sys.stdin", _Stdin(b""))
    assert main(["import", "-"]) == 2
    assert "standard input is empty" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["build", "run", "opt"])
def test_opt_level_range_is_in_help_and_checked(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "0 to 4" in " ".join(capsys.readouterr().out.split())
    assert main([command, "-", "--opt-level", "5"]) == 2
    err = capsys.readouterr().err
    assert "--opt-level must be from 0 to 4, not 5" in err and "FuseOps" not in err


def test_opt_help_names_onnx_input(capsys):
    with pytest.raises(SystemExit):
        main(["opt", "--help"])
    assert ".onnx" in capsys.readouterr().out


def test_a_missing_tvm_is_a_usage_error_like_onnx():
    assert _is_usage_error(TVMNotAvailableError("TVM is not installed"))


def test_example_writes_the_bundled_model(capsys, tmp_path):
    """``phasec example -o model.py``: the file the README's snippets load."""
    from pathlib import Path

    import phasec
    from phasec.ir import assert_structural_equal

    bundled = Path(phasec.__file__).parent / "examples" / "cnn.py"
    assert main(["example", "cnn"]) == 0
    assert capsys.readouterr().out == bundled.read_text()
    assert main(["example", "cnn", "-o", str(tmp_path / "model.json")]) == 0
    assert "phasec run" in capsys.readouterr().err
    assert_structural_equal(phasec.load(tmp_path / "model.json"), phasec.load(bundled))
    with pytest.raises(SystemExit) as info:  # argparse: usage and the choices
        main(["example", "resnet"])
    assert info.value.code == 2


def test_pass_descriptions_show_no_rest_markup(capsys):
    assert main(["passes", "-v"]) == 0
    table = capsys.readouterr().out
    assert "description: Remove trivial rebindings (`y = x`" in table
    assert "``" not in table and ":func:" not in table and ":class:" not in table
    assert main(["passes", "-v", "--format", "json"]) == 0
    assert "``" not in capsys.readouterr().out


def test_pass_descriptions_are_whole_sentences(capsys):
    """``passes -v`` showed the first line of each docstring, cut
    mid-sentence ("... into a generated"); now the first paragraph."""
    assert main(["passes", "-v", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records and all(r["description"].endswith(".") for r in records), \
        [r["description"][-40:] for r in records if not r["description"].endswith(".")]
    legalize = next(r for r in records if r["pass"] == "LegalizeOps")
    assert legalize["description"].endswith("into a generated PrimFunc.")


@pytest.mark.parametrize("option", ["--passes", "--timing", "--trace", "--check-bounds",
                                    "--unchecked", "--load", "--report"])
def test_build_and_run_take_the_same_pipeline_options(option):
    assert option in _options("build") and option in _options("run")


def test_run_takes_a_pipeline_and_traces_it(capsys, tmp_path):
    model = tmp_path / "m.py"
    assert main(["example", "mlp", "-o", str(model)]) == 0
    capsys.readouterr()
    spec = "LambdaLifting,ToNonDataflow,LegalizeOps,VMBuiltinLower"
    status = main(["run", str(model), "--passes", spec, "--timing", "--trace", "--repeat", "1",
                   "-q"])
    out, err = capsys.readouterr()
    assert status == 0 and "PASS" in out, out + err
    trace = err[err.index("pass trace:"):]
    ran = [name for name in spec.split(",") if name in trace]
    assert ran == spec.split(","), trace  # the given pipeline, in its order
    assert "FuseOps" not in trace  # not the default one


def _choices(name: str, option: str) -> tuple[str, ...]:
    parser = build_parser([name])
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    action = next(a for a in sub.choices[name]._actions if option in a.option_strings)
    return tuple(action.choices)


def test_kernels_means_the_same_two_things_on_build_and_run(tmp_path, capsys):
    assert _choices("build", "--kernels") == _choices("run", "--kernels") == ("llvm", "interp")
    model = tmp_path / "m.py"
    model.write_text(
        "from phasec.script import ir as I, relax as R\n"
        "@I.ir_module\nclass M:\n    @R.function\n"
        "    def main(x: R.Tensor((3,), 'float32')) -> R.Tensor((3,), 'float32'):\n"
        "        return R.subtract(R.exp(x), x)\n")
    exe = tmp_path / "m.pvm"
    # build --kernels interp does not compile (the old spelling "none" still works)
    for spelling in ("interp", "none"):
        assert main(["build", str(model), "-o", str(exe), "--kernels", spelling, "-q"]) == 0
    npz = tmp_path / "out.npz"
    x = np.array([0.5, -1.0, 2.0], "float32")
    np.savez(tmp_path / "in.npz", x=x)
    assert main(["run", str(exe), "--kernels", "interp", "--inputs", str(tmp_path / "in.npz"),
                 "--save-outputs", str(npz), "-q"]) == 0
    np.testing.assert_allclose(np.load(npz)["output"], np.exp(x) - x, rtol=1e-6)
    capsys.readouterr()


def test_threads_sets_the_kernels_thread_count_and_is_checked(capsys):
    from phasec.backend.llvm import get_num_threads, set_num_threads

    before = get_num_threads()
    try:
        assert main(["run", "--example", "mlp", "--threads", "3", "-q"]) == 0
        assert get_num_threads() == 3
        assert "compiled with LLVM (3 threads)" in capsys.readouterr().out
    finally:
        set_num_threads(before)
    for bad in ("0", "257", "two"):
        with pytest.raises(SystemExit) as exit_:
            main(["run", "--example", "mlp", "--threads", bad])
        assert exit_.value.code == 2
        assert "--threads: expected a number of threads from 1 to 256" in capsys.readouterr().err
