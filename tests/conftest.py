"""Shared pytest configuration: hypothesis profiles, a private kernel cache,
the test layout.

The test folders mirror phasec's packages (tests/op/ tests phasec.op, ...).
They are not packages: pytest's default import mode puts each test file's
folder on ``sys.path`` and imports the file by its basename, so basenames are
unique across folders (pytest refuses a second ``test_x.py``). Test modules
never import one another; what they share is in the ``helpers`` package,
importable because this file puts tests/ on ``sys.path``. For the same
reason no folder here bears the name of a package the tests import: the
bridge's tests are in tvm_bridge/, since a tests/tvm/ folder would import as
an empty namespace package ``tvm`` wherever TVM is not installed.

``ci`` (selected when the CI environment variable is set) bounds example
counts and disables deadlines so the suite stays within CI's time budget on
two cores; ``dev`` is the default for local runs.
"""

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# The tests exercise the *installed* phasec (`pip install ".[test]"`, or `-e`
# for development), never the source folders beside them: verifier/ and
# passes/ install as phasec.verifier and phasec.passes, which a plain
# `phasec/` folder on sys.path (what `python -m pytest` puts there) lacks.
_REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _REPO]

# `helpers` (tests/helpers/) for every test module, whatever folder it is in
# and whatever --import-mode: pytest's default mode would add tests/ for this
# conftest anyway, importlib mode adds nothing.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import pytest
from hypothesis import HealthCheck, settings

# Tests compile with their own persistent kernel cache (a fresh directory per
# session, subprocesses included), never with the user's. One directory for
# the whole session: pytest-xdist's workers inherit it from the controlling
# process (which runs this file first), so a kernel one worker compiled is
# not compiled again by the other (the cache is safe for concurrent
# processes: entries are written atomically). The process that made the
# directory removes it when the session ends (it holds 150-250 MB).
_OWN_SESSION_CACHE: str | None = None
if "PHASEC_TEST_SESSION_CACHE" not in os.environ:
    _OWN_SESSION_CACHE = tempfile.mkdtemp(prefix="phasec-test-kernels-")
    os.environ["PHASEC_TEST_SESSION_CACHE"] = _OWN_SESSION_CACHE
os.environ["PHASEC_CACHE_DIR"] = os.environ["PHASEC_TEST_SESSION_CACHE"]

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))



# -- progress: a line with counts, elapsed time and an estimate every minute --
# (dots say little on a 15-minute run; with pytest-xdist the workers' reports
# arrive in the controlling process, which prints the line)
PROGRESS_EVERY = float(os.environ.get("PHASEC_TEST_PROGRESS_EVERY", "60"))


class _Progress:
    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.total = self.done = self.failed = 0
        self.config = None

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        text = f"-- {self.done:,} of {self.total:,} tests"
        if self.total:
            text += f" ({100 * self.done // self.total}%)"
        text += f", {_minutes(elapsed)} elapsed"
        if 0 < self.done < self.total:
            text += f", about {_minutes(elapsed * (self.total - self.done) / self.done)} left"
        return text + (f"; {self.failed} failed" if self.failed else "")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


_progress = _Progress()


def pytest_configure(config) -> None:
    _progress.config = config


def pytest_unconfigure(config) -> None:
    if _OWN_SESSION_CACHE is not None:  # (the workers' sessions end before this one)
        shutil.rmtree(_OWN_SESSION_CACHE, ignore_errors=True)


def pytest_collection_finish(session) -> None:
    _progress.total = max(_progress.total, len(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    _progress.total = max(_progress.total, len(ids))


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _progress.done += 1
        _progress.failed += report.failed
    if time.monotonic() - _progress.last >= PROGRESS_EVERY and _progress.config is not None:
        _progress.last = time.monotonic()
        writer = _progress.config.get_terminal_writer()
        if writer.width_of_current_line:  # after a row of dots
            writer.line()
        writer.line(_progress.line())
