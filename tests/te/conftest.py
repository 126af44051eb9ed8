"""Fixtures of the schedule tests: the host's tuning pinned, so that a test of
the form a profile chooses checks that form on any machine (its results are
checked against the reference wherever it runs)."""

from __future__ import annotations

import pytest

from phasec.target import tuning


@pytest.fixture(params=[False, True], ids=["rows", "plane"])
def narrow_plane(request, monkeypatch) -> bool:
    """Both settings of the host's ``depthwise_narrow_plane`` (which forms
    narrow depthwise rows take), whatever the machine: the other hosts'
    form stays tested too."""
    monkeypatch.setenv("PHASEC_TUNING", f"depthwise_narrow_plane={int(request.param)}")
    tuning.host_tuning.cache_clear()
    yield request.param
    monkeypatch.delenv("PHASEC_TUNING")
    tuning.host_tuning.cache_clear()


@pytest.fixture
def xeon(monkeypatch) -> tuning.TargetTuning:
    """The Xeon profile (``avx512_xeon``) as the host's, whatever the machine."""
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon")
    monkeypatch.delenv("PHASEC_WINOGRAD", raising=False)
    monkeypatch.delenv("PHASEC_VECTOR_BITS", raising=False)
    tuning.host_tuning.cache_clear()
    yield tuning.host_tuning()
    tuning.host_tuning.cache_clear()
