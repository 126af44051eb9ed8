"""Phase.parse: what names a phase, and the error for everything else."""

import pytest

from phasec.errors import InvalidPhaseError
from phasec.ir import Phase

CHOICES = "expected one of ingestion (0), optimization (1), lowering (2), build (3)"


@pytest.mark.parametrize("value, phase", [
    (Phase.LOWERING, Phase.LOWERING), (0, Phase.INGESTION), (3, Phase.BUILD),
    ("2", Phase.LOWERING), (" 1 ", Phase.OPTIMIZATION), ("build", Phase.BUILD),
    ("Optimization", Phase.OPTIMIZATION), (" INGESTION ", Phase.INGESTION),
])
def test_a_phase_its_number_or_its_name(value, phase):
    assert Phase.parse(value) is phase


@pytest.mark.parametrize("value, shown", [
    (True, "True"), (False, "False"), (4, "4"), (-1, "-1"), ("4", "4"), ("", "''"),
    ("lowered", "'lowered'"), (None, "None (NoneType)"), (1.0, "1.0 (float)"),
    ([1], "[1] (list)"),
])
def test_anything_else_is_an_invalid_phase_error(value, shown):
    with pytest.raises(InvalidPhaseError) as err:
        Phase.parse(value)
    assert isinstance(err.value, ValueError)
    assert str(err.value) == f"invalid phase {shown}: {CHOICES}"


def test_labels():
    assert [p.label for p in Phase] == ["ingestion", "optimization", "lowering", "build"]
    assert [int(p) for p in Phase] == [0, 1, 2, 3]
    assert str(Phase.LOWERING) == "lowering" and Phase.choices() == CHOICES
