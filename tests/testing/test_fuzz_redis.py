"""Campaigns sharing their findings through a real Redis server.

The test starts ``redis-server`` (Debian's package; ``.ci/run`` installs it
when absent) on a free port, with no persistence, and stops it afterwards.
Two campaigns with separate output folders (two machines, as far as files
go) and different seeds share only the Redis database: the planted failure
the first finds is the very first example the second runs.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from phasec import transform as T
from phasec.cli import main
from phasec.ir import Op, Phase
from phasec.ir.visitor import ExprVisitor
from phasec.testing.campaign import pass_pool, pool_focus, run_campaign
from phasec.testing.databases import REDIS_KEY_PREFIX, FuzzDatabaseError, open_database


class _HasMultiply(ExprVisitor):
    found = False

    def visit_call_(self, call):
        super().visit_call_(call)
        if isinstance(call.op, Op) and call.op.name == "relax.multiply":
            self.found = True


#: one entry per call of the planted pass: did the module multiply?
CALLS: list[bool] = []


@T.module_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="RedisCrashOnMultiply")
def crash_on_multiply(mod, ctx):
    """A planted bug: crashes on any module that multiplies."""
    found = False
    for _, func in mod.relax_functions():
        v = _HasMultiply()
        v.visit_expr(func)
        found = found or v.found
    CALLS.append(found)
    if found:
        raise ValueError("multiply is not supported")
    return mod


def _probe_calls(planted: str) -> int:
    """How many times a campaign's probe of the named pass (before any search
    or replay: see phasec.testing.steering) calls it."""
    CALLS.clear()
    pool_focus(pass_pool(planted))
    count = len(CALLS)
    CALLS.clear()
    return count


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A real redis-server on a free port of 127.0.0.1, without persistence."""

    def __init__(self, workdir) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is required (apt-get install redis-server; .ci/run does)"
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/3"
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=self.port)
        try:
            for _ in range(200):  # up to 10 s for the server to listen
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
            self.stop()
            raise AssertionError("redis-server did not start")
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def server(tmp_path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def redis_url(server) -> str:
    return server.url


@pytest.fixture
def planted():
    CALLS.clear()
    with T.REGISTRY.scope():
        T.register_pass(crash_on_multiply)
        yield "RedisCrashOnMultiply"


def test_two_campaigns_share_a_finding_through_redis(tmp_path, redis_url, planted):
    first = run_campaign(120, seed=1, passes=planted, out_dir=tmp_path / "machine-a",
                         kernels="interp", roundtrip=False, database=redis_url,
                         stop_after_failures=1)
    assert [s.failure.kind for s in first.unique] == ["crash"]
    assert first.replayed == 0  # an empty database: nothing to replay
    assert not (tmp_path / "machine-a" / "hypothesis").exists()  # nothing went to a directory
    # the examples are in the server, under phasec's key prefix, in database 3
    client = redis.Redis.from_url(redis_url)
    keys = client.keys(REDIS_KEY_PREFIX + b"*")
    assert keys and sum(client.scard(k) for k in keys) >= 1
    assert redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/0").keys("*") == []

    probed = _probe_calls(planted)
    second = run_campaign(120, seed=999, passes=planted, out_dir=tmp_path / "machine-b",
                          kernels="interp", roundtrip=False, database=redis_url,
                          stop_after_failures=1)
    assert second.replayed >= 1
    # after the probe, the first module the planted pass saw was the saved failure
    assert CALLS[probed] is True
    assert [s.failure.kind for s in second.unique] == ["crash"]
    assert "multiply is not supported" in second.unique[0].failure.message
    summary = json.loads((tmp_path / "machine-b" / "summary.json").read_text())
    assert summary["database"] == redis_url and summary["replayed"] >= 1


def test_the_command_line_takes_a_redis_url(tmp_path, redis_url, planted, capsys):
    status = main(["fuzz", "--seconds", "120", "--max-failures", "1", "--seed", "3",
                   "--out", str(tmp_path / "a"),
                   "--kernels", "interp", "--passes", planted, "--no-roundtrip",
                   "--database", redis_url])
    out = capsys.readouterr().out
    assert status == 1 and "multiply is not supported" in (
        next((tmp_path / "a" / "failures").glob("*.py")).read_text())
    assert f"examples from the database {redis_url}" in out
    client = redis.Redis.from_url(redis_url)
    assert client.keys(REDIS_KEY_PREFIX + b"*")


def test_a_directory_database_stays_supported(tmp_path, planted):
    db = tmp_path / "shared-db"
    first = run_campaign(120, seed=1, passes=planted, out_dir=tmp_path / "a", kernels="interp",
                         roundtrip=False, database=str(db), stop_after_failures=1)
    assert first.unique and any(db.rglob("*"))
    probed = _probe_calls(planted)
    second = run_campaign(120, seed=5, passes=planted, out_dir=tmp_path / "b", kernels="interp",
                          roundtrip=False, database=str(db), stop_after_failures=1)
    assert second.replayed >= 1 and CALLS[probed] is True


@pytest.mark.parametrize("url, words", [
    ("redis://127.0.0.1:{closed}/0", "does not answer"),
    ("redis://127.0.0.1:notaport/0", "not a Redis URL"),
    ("redis://127.0.0.1:{closed}/notadb", "not a Redis URL"),
    ("mongodb://localhost/x", "unsupported scheme 'mongodb'"),
])
def test_a_bad_url_or_a_server_down_is_a_clear_error(tmp_path, capsys, url, words):
    url = url.format(closed=_free_port())  # nothing listens there
    with pytest.raises(FuzzDatabaseError, match=words):
        open_database(url)
    for jobs in ("1", "2"):
        status = main(["fuzz", "--seconds", "5", "--out", str(tmp_path / "o"), "--jobs", jobs,
                       "--database", url])
        err = capsys.readouterr().err
        assert status == 2
        assert words in err and "--database" in err
        assert "Traceback" not in err and "internal error" not in err


def test_a_password_is_not_shown(tmp_path, capsys):
    url = f"redis://:s3cret@127.0.0.1:{_free_port()}/0"
    assert main(["fuzz", "--seconds", "5", "--out", str(tmp_path / "o"),
                 "--database", url]) == 2
    err = capsys.readouterr().err
    assert "does not answer" in err and "s3cret" not in err and "***@127.0.0.1" in err


def test_a_server_that_goes_away_ends_the_campaign_with_its_numbers(tmp_path, server,
                                                                   planted):
    db = open_database(server.url)  # it answered when the campaign started...
    server.stop()  # ...and is gone before the first example is fetched
    with pytest.raises(FuzzDatabaseError, match="example database .*Connection"):
        run_campaign(60, seed=1, passes=planted, out_dir=tmp_path / "o", kernels="interp",
                     roundtrip=False, database=db, stop_after_failures=1)
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["seconds"] >= 0
