"""Shared pytest configuration: hypothesis profiles, a private kernel cache.

``ci`` (selected when the CI environment variable is set) bounds example
counts and disables deadlines so the suite stays within CI's time budget on
two cores; ``dev`` is the default for local runs.
"""

import os
import tempfile

from hypothesis import HealthCheck, settings

# Tests compile with their own persistent kernel cache (a fresh directory per
# session, subprocesses included), never with the user's.
os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-test-kernels-")

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
