"""Outputs never write through a link; ``-o`` names what it says (issue 27,
findings 2 and 8).

A symbolic link at an output's name is refused (exit 2, the target
untouched) by every writer: ``-o`` of ``build``, ``opt`` and ``import``,
``--save-outputs``, ``--report`` and :func:`phasec.fileio.write_atomic`
itself; a link that appears while the data is written is replaced, never
its target. ``-o ""`` is a usage error; ``-o -`` and ``-o /dev/stdout``
write to standard output, also a pipe; ``-o /dev/null`` is accepted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import phasec
from phasec import fileio
from phasec.backend.vm import Executable
from phasec.cli import main
from phasec.errors import FileAccessError

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(R.add(y, R.const(1.0, "float32")))
            R.output(z)
        return z
"""


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return code, out, err


def run_process(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``phasec ARGV`` with standard output a pipe."""
    return subprocess.run([sys.executable, "-m", "phasec", *argv], capture_output=True,
                          timeout=600, cwd=cwd)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "m.py"
    path.write_text(MODULE)
    return path


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    import onnx  # the test extra installs it: never skipped
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


# -- links -------------------------------------------------------------------------------------
def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("do not overwrite\n")
    return victim


@pytest.mark.parametrize("command", ["build", "opt", "import"])
def test_a_link_as_output_is_refused_and_its_target_unchanged(tmp_path, capsys, src, command,
                                                              request):
    victim = _victim(tmp_path)
    suffix = {"build": ".pvm", "opt": ".py", "import": ".py"}[command]
    link = tmp_path / f"out{suffix}"
    link.symlink_to(victim)
    source = request.getfixturevalue("onnx_model") if command == "import" else src
    extra = ["--passes", "LambdaLifting"] if command == "opt" else []
    code, _, err = run_cli(capsys, command, source, *extra, "-o", link)
    assert code == 2
    assert "symbolic link" in err and str(link) in err and "precious.txt" in err
    assert victim.read_text() == "do not overwrite\n" and link.is_symlink()
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_a_dangling_link_creates_nothing_at_its_target(tmp_path, capsys, src):
    target = tmp_path / "victim" / "created.pvm"
    target.parent.mkdir()
    link = tmp_path / "out.pvm"
    link.symlink_to(target)
    code, _, err = run_cli(capsys, "build", src, "-o", link)
    assert code == 2 and "symbolic link" in err
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_link_in_a_sticky_world_writable_directory_is_refused(tmp_path, capsys, src):
    """The /tmp case: someone else's directory layout, a link planted under
    the name the user will write."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = _victim(tmp_path)
    (shared / "model.pvm").symlink_to(victim)
    code, _, err = run_cli(capsys, "build", src, "-o", shared / "model.pvm")
    assert code == 2 and victim.read_text() == "do not overwrite\n"


def test_save_outputs_and_report_refuse_links(tmp_path, capsys, src):
    victim = _victim(tmp_path)
    npz = tmp_path / "out.npz"
    npz.symlink_to(victim)
    code, _, err = run_cli(capsys, "run", src, "--save-outputs", npz)
    assert code == 2 and "symbolic link" in err
    report = tmp_path / "r.html"
    report.symlink_to(victim)
    code, _, err = run_cli(capsys, "opt", src, "--passes", "LambdaLifting", "--report", report)
    assert code == 2 and "symbolic link" in err
    assert victim.read_text() == "do not overwrite\n"


def test_links_in_the_directories_leading_to_the_output_are_followed(tmp_path, capsys, src):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    code, _, _ = run_cli(capsys, "build", src, "-o", tmp_path / "via" / "m.pvm")
    assert code == 0 and (real / "m.pvm").is_file()


def test_a_link_that_appears_during_the_write_is_replaced_not_its_target(tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "out.bin"
    out.write_bytes(b"previous")

    def writer(fh):
        fh.write(b"new content")
        out.unlink()
        out.symlink_to(victim)  # swapped in between the check and the rename

    fileio.write_atomic(out, writer)
    assert not out.is_symlink() and out.read_bytes() == b"new content"
    assert victim.read_text() == "do not overwrite\n"


def test_write_atomic_refuses_a_link_to_a_device_too(tmp_path):
    link = tmp_path / "null.txt"
    link.symlink_to("/dev/null")
    with pytest.raises(FileAccessError, match="symbolic link"):
        fileio.write_atomic(link, "x")


def test_write_atomic_never_creates_a_file_through_a_dangling_link(tmp_path):
    target = tmp_path / "elsewhere.txt"
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(FileAccessError, match="symbolic link"):
        fileio.write_atomic(link, "x")
    assert not target.exists()


# -- -o "" --------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["build", "opt", "import"])
def test_an_empty_output_path_is_a_usage_error(tmp_path, capsys, src, command, request,
                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = request.getfixturevalue("onnx_model") if command == "import" else src
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_cli(capsys, command, source, "-o", "")
    assert code == 2 and "-o ''" in err and "empty path" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no m.pvm, no c.pvm


def test_write_atomic_refuses_an_empty_path():
    with pytest.raises(FileAccessError, match="empty path"):
        fileio.write_atomic("", "x")


# -- standard output, pipes, /dev/null -----------------------------------------------------------
@pytest.mark.parametrize("spelling", ["-", "/dev/stdout"])
def test_build_writes_the_executable_to_a_pipe(tmp_path, src, spelling):
    proc = run_process("build", str(src), "-o", spelling, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout[:2] == b"PK"  # the zip archive, and only it
    assert b"wrote" in proc.stderr
    saved = tmp_path / "piped.pvm"
    saved.write_bytes(proc.stdout)
    exe = Executable.load(saved)
    assert exe.stats()["functions"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py", "piped.pvm"]  # no file '-'


@pytest.mark.parametrize("spelling", ["-", "/dev/stdout"])
def test_opt_writes_the_module_to_a_pipe(tmp_path, src, spelling):
    proc = run_process("opt", str(src), "--passes", "LambdaLifting", "-o", spelling, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert phasec.parse(proc.stdout.decode()).phase is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_import_writes_the_module_to_a_pipe(tmp_path, onnx_model):
    proc = run_process("import", str(onnx_model), "-o", "/dev/stdout", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert b"R.nn.relu" in proc.stdout


def test_build_to_a_pipe_whose_reader_went_away(tmp_path, src):
    """``phasec build m.py -o - | true``: not an error, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "phasec", "build", str(src), "-o", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before anything was written
    err = proc.stderr.read()
    assert proc.wait(timeout=600) == 0, err
    assert b"Traceback" not in err and b"internal error" not in err


@pytest.mark.parametrize("command", ["build", "opt"])
def test_dev_null_is_accepted(tmp_path, capsys, src, command):
    extra = ["--passes", "LambdaLifting"] if command == "opt" else []
    code, _, err = run_cli(capsys, command, src, *extra, "-o", "/dev/null")
    assert code == 0, err


def test_write_atomic_to_devices_and_streams_takes_zip_archives():
    import numpy as np

    fileio.write_atomic("/dev/null", lambda fh: np.savez(fh, x=np.arange(3)))
    script = ("import numpy as np\nfrom phasec import fileio\n"
              "fileio.write_atomic('/dev/fd/1', lambda fh: np.savez(fh, x=np.arange(3)))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import io

    assert np.load(io.BytesIO(proc.stdout))["x"].tolist() == [0, 1, 2]


def test_stream_descriptor_names():
    assert fileio.stream_descriptor("/dev/stdout") == 1
    assert fileio.stream_descriptor("/dev/stderr") == 2
    assert fileio.stream_descriptor("/dev/fd/7") == 7
    assert fileio.stream_descriptor("/proc/self/fd/3") == 3
    for other in ("-", "/dev/null", "/dev/stdout2", "out.pvm", "/proc/1/fd/1"):
        assert fileio.stream_descriptor(other) is None


def test_without_directory_descriptors_the_same_rules_hold(tmp_path, monkeypatch):
    """Systems that cannot open a directory (Windows) take the path-based
    steps: still atomic, still no link written through."""
    monkeypatch.setattr(fileio.writing, "_DIRECTORY_DESCRIPTORS", False)
    out = tmp_path / "out.txt"
    fileio.write_atomic(out, "one")
    fileio.write_atomic(out, b"two")
    assert out.read_text() == "two"
    victim = _victim(tmp_path)
    link = tmp_path / "link.txt"
    link.symlink_to(victim)
    with pytest.raises(FileAccessError, match="symbolic link"):
        fileio.write_atomic(link, "x")
    with pytest.raises(FileAccessError, match="there is no directory"):
        fileio.write_atomic(tmp_path / "missing" / "x.txt", "x")
    assert victim.read_text() == "do not overwrite\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "out.txt", "victim"]
