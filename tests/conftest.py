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
import sys
import tempfile
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

from hypothesis import HealthCheck, settings

# Tests compile with their own persistent kernel cache (a fresh directory per
# session, subprocesses included), never with the user's.
os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-test-kernels-")

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
