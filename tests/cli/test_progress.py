"""Progress lines for long steps (phasec.console): on a terminal only,
redrawn in place and erased at the end; never in a pipe; -q silences them.

The child processes show a step at once (``SHOW_AFTER_SECONDS = 0``) so a
small build is enough; by default a step shows after half a second."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys

from phasec import console

MODULE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 16), "float32"), w: R.Tensor((16, 4), "float32")):
        y = R.nn.relu(R.matmul(x, w))
        return y
'''

CHILD = ("import sys; from phasec import console; console.SHOW_AFTER_SECONDS = 0; "
         "from phasec.cli import main; sys.exit(main(sys.argv[1:]))")


def _build(tmp_path, *flags: str) -> tuple[int, str, str]:
    """Run ``phasec build`` with standard error on a pseudo-terminal: (exit
    status, standard output, what the terminal received)."""
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    argv = [sys.executable, "-c", CHILD, "build", str(src), "-o", str(tmp_path / "m.pvm"), *flags]
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    received = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                received += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read().decode()
        status = proc.wait(timeout=300)
    finally:
        os.close(master)
        proc.stdout.close()
    return status, out, received.decode("utf-8", "replace")


def test_progress_on_a_terminal_is_redrawn_and_erased(tmp_path) -> None:
    status, out, tty = _build(tmp_path)
    assert status == 0, tty
    assert "wrote" in out
    assert "\rphasec: running passes" in tty
    assert re.search(r"\rphasec: compiling \d+ kernels? with LLVM \d+ s", tty), tty
    # every write starts with a carriage return (a redraw), and the last one
    # leaves the cursor at the start of an erased line
    assert tty.startswith("\r") and tty.endswith("\r")
    last_line = tty.rstrip("\r").rsplit("\r", 1)[-1]
    assert last_line.strip() == ""


def test_no_progress_with_quiet(tmp_path) -> None:
    """(In a pipe there is none either: tests/backend/llvm/test_llvm_diagnostics.py
    finds standard error empty after a build.)"""
    status, out, tty = _build(tmp_path, "-q")
    assert status == 0 and "wrote" in out
    assert tty == ""


class _FakeTerminal:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_a_message_erases_the_progress_line_first(monkeypatch) -> None:
    monkeypatch.setattr(console, "SHOW_AFTER_SECONDS", 0)
    terminal = _FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert console.enable_progress(terminal)
    try:
        with console.erasing_progress():
            with console.step("importing model.onnx", total=3) as step:
                step.update(2, "node Conv_7")
                drawn = terminal.text
                print("a warning", file=sys.stderr)
    finally:
        console.disable_progress()
    assert drawn.startswith("\rphasec: importing model.onnx 0/3 0 s")
    assert drawn.endswith("\rphasec: importing model.onnx 2/3 (node Conv_7) 0 s")
    # the warning starts on a clean line: the progress line was overwritten first
    after = terminal.text[len(drawn):]
    erase = after.split("a warning", 1)[0]
    assert erase == "\r" + " " * len("phasec: importing model.onnx 2/3 (node Conv_7) 0 s") + "\r"


def test_quiet_turns_progress_off(monkeypatch) -> None:
    terminal = _FakeTerminal()
    console.set_verbosity(console.QUIET)
    try:
        assert not console.enable_progress(terminal)
    finally:
        console.set_verbosity(console.NORMAL)
    assert not console.enable_progress(_NotATerminal())


class _NotATerminal(_FakeTerminal):
    def isatty(self) -> bool:
        return False


def test_quiet_and_verbose_together_is_a_usage_error(capsys) -> None:
    from phasec.cli import main

    assert main(["passes", "-q", "-v"]) == 2
    assert "-q (--quiet) and -v (--verbose) contradict" in capsys.readouterr().err
    assert console.verbosity() == console.NORMAL


def test_a_forked_worker_draws_no_progress(monkeypatch) -> None:
    """fuzz --jobs forks workers that compile kernels: only the command's
    own process draws the line."""
    monkeypatch.setattr(console, "SHOW_AFTER_SECONDS", 0)
    terminal = _FakeTerminal()
    assert console.enable_progress(terminal)
    try:
        pid = os.fork()
        if pid == 0:  # the worker: its steps must not write
            with console.step("in a worker") as step:
                step.update(1)
            os._exit(0 if "worker" not in terminal.text else 1)
        _, status = os.waitpid(pid, 0)
        with console.step("in the command"):
            pass
    finally:
        console.disable_progress()
    assert os.waitstatus_to_exitcode(status) == 0
    assert "in the command" in terminal.text
