"""A Redis server that trickles bytes cannot hold a campaign past its time
(issue 27, item 6): every command to the example database has a total
deadline, not only a per-read timeout that one byte a second keeps alive."""

from __future__ import annotations

import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import redis  # noqa: F401  (the test extra installs it: a missing client fails, never skips)


class _Trickle(socketserver.BaseRequestHandler):
    """Accepts, then sends one byte a second (never a whole reply)."""

    def handle(self) -> None:
        try:
            while not self.server.stopping.is_set():  # type: ignore[attr-defined]
                self.request.sendall(b"+")
                time.sleep(1.0)
        except OSError:
            pass


@pytest.fixture
def trickle_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def test_a_trickling_server_cannot_hold_a_campaign(trickle_port, tmp_path):
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "phasec", "fuzz", "--database",
         f"redis://127.0.0.1:{trickle_port}/0", "--seconds", "5", "--out", str(tmp_path)],
        capture_output=True, timeout=180)  # the server trickles forever: a hang is a failure
    elapsed = time.monotonic() - start
    err = result.stderr.decode()
    # ~12 s on a quiet machine (a 10 s deadline per Redis command); the bound only
    # separates "gives up" from "trickles on", with room for a loaded CI machine
    assert elapsed < 120, (elapsed, err)
    assert result.returncode == 2, err
    assert f"127.0.0.1:{trickle_port}" in err and "does not answer" in err
    assert "Traceback" not in err


def test_open_database_gives_up_within_its_deadline(trickle_port):
    from phasec.testing.databases import FuzzDatabaseError, open_database

    start = time.monotonic()
    with pytest.raises(FuzzDatabaseError, match="does not answer"):
        open_database(f"redis://127.0.0.1:{trickle_port}/0")
    assert time.monotonic() - start < 60  # a 10 s deadline; room for a loaded machine


class _HostileError(socketserver.BaseRequestHandler):
    """Answers the first command with an error full of terminal controls."""

    def handle(self) -> None:
        self.request.recv(1000)
        self.request.sendall(b"-ERR bad\x1b[2J\x07 thing\r\n")


def test_a_servers_error_reaches_the_terminal_escaped(tmp_path):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _HostileError)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "phasec", "fuzz", "--database",
             f"redis://127.0.0.1:{server.server_address[1]}/0", "--seconds", "2",
             "--out", str(tmp_path)], capture_output=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2
    assert b"\x1b" not in result.stderr and b"\x07" not in result.stderr
    assert b"bad\\x1b[2J\\x07 thing" in result.stderr
