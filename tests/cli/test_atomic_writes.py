"""Every file phasec writes is written whole or not at all (issue 15 #3).

A full disk is simulated two ways: in-process, by replacing the file object
the shared helper writes through with one that fails after a few bytes
(``ENOSPC``), and in a subprocess with a real limit on file sizes
(``RLIMIT_FSIZE``), so the operating system itself refuses the write halfway.
Each time the previous file must be byte-for-byte intact, and no partial or
temporary file may be left in the directory.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import phasec
from phasec import fileio
from phasec.backend.vm import Executable
from phasec.cli import main
from phasec.errors import FileAccessError

from helpers.paths import REPO

ROOT = REPO

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


class _DiskFull:
    """A file object that accepts ``budget`` bytes, then fails like a full disk."""

    def __init__(self, inner, budget: int) -> None:
        self._inner = inner
        self._budget = budget

    def write(self, data) -> int:
        if len(data) > self._budget:
            self._inner.write(bytes(data[: self._budget]))  # the part that fits lands
            self._inner.flush()
            self._budget = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._budget -= len(data)
        return self._inner.write(data)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._inner.close()


@pytest.fixture
def disk_full(monkeypatch):
    """After this, every atomic write fails after 40 bytes."""
    monkeypatch.setattr(fileio.writing, "_fdopen", lambda fd, mode: _DiskFull(os.fdopen(fd, mode), 40))


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# -- the helper ------------------------------------------------------------------------
def test_write_atomic_writes_bytes_text_and_streams(tmp_path):
    fileio.write_atomic(tmp_path / "a.bin", b"\x00\x01")
    fileio.write_atomic(tmp_path / "b.txt", "héllo")
    fileio.write_atomic(tmp_path / "c.npz", lambda fh: np.savez(fh, x=np.arange(3)))
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "b.txt").read_bytes() == "héllo".encode()
    with np.load(tmp_path / "c.npz") as data:
        assert data["x"].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.txt", "c.npz"]


def test_write_atomic_keeps_the_mode_and_refuses_links(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    fileio.write_atomic(target, "new")
    assert target.read_text() == "new"
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)
    # issue 27: a link is never written through (it used to be followed)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(FileAccessError, match="symbolic link"):
        fileio.write_atomic(link, "through the link")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        fileio.write_atomic(tmp_path / "n.txt", "x")
    finally:
        os.umask(old)
    assert oct((tmp_path / "n.txt").stat().st_mode & 0o777) == oct(0o640)


def test_a_failed_write_leaves_the_previous_file_and_nothing_else(tmp_path, disk_full):
    target = tmp_path / "out.txt"
    target.write_text("previous content")
    with pytest.raises(FileAccessError) as info:
        fileio.write_atomic(target, "x" * 10_000, what="output")
    assert str(target) in str(info.value)
    assert "no space left on device" in str(info.value)
    assert "previous file is unchanged" in str(info.value)
    assert _listing(tmp_path) == {"out.txt": b"previous content"}


def test_a_failed_first_write_leaves_no_file(tmp_path, disk_full):
    with pytest.raises(FileAccessError, match="nothing was written"):
        fileio.write_atomic(tmp_path / "new.txt", "x" * 10_000)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_midway_leaves_the_previous_file(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"previous")

    def writer(fh):
        fh.write(b"half of it")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fileio.write_atomic(target, writer)
    assert _listing(tmp_path) == {"out.bin": b"previous"}


@pytest.mark.parametrize("case", ["directory", "no-parent"])
def test_unwritable_targets_are_named(tmp_path, case):
    path = tmp_path if case == "directory" else tmp_path / "missing" / "x.txt"
    with pytest.raises(FileAccessError) as info:
        fileio.write_atomic(path, "x", what="output")
    text = str(info.value)
    assert str(path) in text
    assert ("it is a directory" if case == "directory" else "there is no directory") in text


def test_writing_to_an_existing_device_is_direct(tmp_path):
    fileio.write_atomic("/dev/null", "discarded")  # no temporary file next to /dev/null


# -- every writer ----------------------------------------------------------------------
def test_opt_output_survives_a_full_disk(tmp_path, capsys, disk_full):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    keep = tmp_path / "keep.py"
    keep.write_text("# the previous output\n")
    before = _listing(tmp_path)
    code, _, err = run_cli(capsys, "opt", src, "--passes", "LambdaLifting", "-o", keep)
    assert code == 2
    assert err.count("\n") == 1 and str(keep) in err and "no space left on device" in err
    assert _listing(tmp_path) == before


def test_build_output_survives_a_full_disk(tmp_path, capsys, disk_full):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    exe_path = tmp_path / "m.pvm"
    exe_path.write_bytes(b"previous executable")
    before = _listing(tmp_path)
    code, _, err = run_cli(capsys, "build", src, "-o", exe_path)
    assert code == 2 and str(exe_path) in err
    assert _listing(tmp_path) == before


def test_executable_save_is_atomic(tmp_path, monkeypatch):
    mod = phasec.parse(MODULE)
    exe = phasec.build(mod, kernels="none")
    path = tmp_path / "m.pvm"
    exe.save(path)
    good = path.read_bytes()
    monkeypatch.setattr(fileio.writing, "_fdopen", lambda fd, mode: _DiskFull(os.fdopen(fd, mode), 500))
    with pytest.raises(FileAccessError):
        exe.save(path)
    assert _listing(tmp_path) == {"m.pvm": good}
    Executable.load(path)  # still whole


def test_report_survives_a_full_disk(tmp_path, disk_full):
    rep = phasec.report(phasec.parse(MODULE), "LambdaLifting")
    path = tmp_path / "r.html"
    path.write_text("<p>previous report</p>")
    with pytest.raises(FileAccessError, match="r.html"):
        rep.save(path)
    assert _listing(tmp_path) == {"r.html": b"<p>previous report</p>"}


def test_fuzz_reproducers_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from phasec.testing.campaign import save_reproducer
    from phasec.testing.properties import Failure

    mod = phasec.parse(MODULE)
    seq = phasec.transform.parse_pipeline("LambdaLifting")
    failure = Failure(kind="crash", message="boom", pass_spec="LambdaLifting")
    x = np.ones((4, 8), "float32")
    saved = save_reproducer(tmp_path / "ok", 1, failure, mod, seq, (x, x))
    assert saved.path.read_text().startswith("# phasec fuzz reproducer")
    monkeypatch.setattr(fileio.writing, "_fdopen", lambda fd, mode: _DiskFull(os.fdopen(fd, mode), 40))
    with pytest.raises(FileAccessError):
        save_reproducer(tmp_path / "full", 1, failure, mod, seq, (x, x))
    assert list((tmp_path / "full").iterdir()) == []


# -- the same file as input and output ---------------------------------------------------
def test_build_refuses_to_overwrite_its_input(tmp_path, capsys):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    code, _, err = run_cli(capsys, "build", src, "-o", src)
    assert code == 2 and "is the input file" in err and "'m.pvm'" in err
    assert src.read_text() == MODULE
    # also through another spelling of the same path
    code, _, err = run_cli(capsys, "build", src, "-o", tmp_path / "." / "m.py")
    assert code == 2 and src.read_text() == MODULE


def test_build_refuses_a_module_suffix(tmp_path, capsys):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    code, _, err = run_cli(capsys, "build", src, "-o", tmp_path / "other.json")
    assert code == 2 and ".pvm" in err
    assert not (tmp_path / "other.json").exists()


def test_opt_may_rewrite_its_input_in_place(tmp_path, capsys):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    other = tmp_path / "other.py"
    assert run_cli(capsys, "opt", src, "--passes", "LambdaLifting", "-o", other)[0] == 0
    assert run_cli(capsys, "opt", src, "--passes", "LambdaLifting", "-o", src)[0] == 0
    # the input was read before the output replaced it: same result as elsewhere
    assert src.read_text() == other.read_text()
    assert phasec.load(str(src)).phase == phasec.ir.Phase.OPTIMIZATION
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py", "other.py"]


@pytest.mark.parametrize("command", ["opt", "run"])
def test_report_may_not_replace_the_input(tmp_path, capsys, command):
    src = tmp_path / "m.json"
    src.write_text(phasec.to_json(phasec.parse(MODULE)))
    before = src.read_bytes()
    extra = ["--passes", "LambdaLifting"] if command == "opt" else []
    code, _, err = run_cli(capsys, command, src, *extra, "--report", src)
    assert code == 2 and "--report" in err and "input file" in err
    assert src.read_bytes() == before


# -- a real full disk, in a subprocess ----------------------------------------------------
_LIMITED = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from phasec.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.parametrize("command,limit", [("opt", 300), ("build", 1000)])
def test_a_file_size_limit_midway_keeps_the_previous_output(tmp_path, command, limit):
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    out = tmp_path / ("keep.py" if command == "opt" else "keep.pvm")
    out.write_text("previous\n")
    before = _listing(tmp_path)
    argv = [sys.executable, "-c", _LIMITED, str(limit), command, str(src), "-o", str(out)]
    if command == "opt":
        argv[-2:-2] = ["--passes", "LambdaLifting"]
    env = dict(os.environ)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "cannot write" in proc.stderr and str(out) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _listing(tmp_path) == before


def test_fuzz_summary_is_written_atomically(tmp_path, monkeypatch):
    from phasec.testing import campaign

    calls = []
    real = campaign.write_atomic

    def spy(path, data, what="file", **kw):
        calls.append((Path(path).name, what))
        return real(path, data, what, **kw)

    monkeypatch.setattr(campaign, "write_atomic", spy)
    stats = campaign.run_campaign(seconds=0.01, seed=1, out_dir=tmp_path)
    assert ("summary.json", "fuzz summary") in calls
    assert json.loads((tmp_path / "summary.json").read_text())["programs"] == stats.programs
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
