"""Random ONNX graphs (phasec.frontend.onnx.fuzz), judged against ONNX Runtime.

Hypothesis draws the graphs through the fuzzer's ``Source`` (so it shrinks a
failure to a small graph): phasec must never crash or say "internal
error", and where it has a verdict it must be ONNX Runtime's (both refuse,
or both run with matching outputs). Few examples under CI=true (each
compiles a model); ``python -m phasec.frontend.onnx.fuzz --minutes 10`` is
the long campaign.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from phasec.frontend.onnx.fuzz import FUZZ_OPS, Case, draw_case, judge

_EXAMPLES = 10 if os.environ.get("CI") else 40


class _HypothesisSource:
    """The fuzzer's choices, drawn by hypothesis."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integers(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))


def _describe(case: Case) -> str:
    import onnx.printer

    return f"{case.note}\n{onnx.printer.to_text(case.model.graph)}"


@settings(max_examples=_EXAMPLES, deadline=None)
@given(st.data())
def test_random_graphs_agree_with_onnxruntime(data):
    try:
        case = draw_case(_HypothesisSource(data))
    except Exception as exc:  # noqa: BLE001 - only the fuzzer's "nothing drawn"
        assert type(exc).__name__ == "_Skip", exc
        return
    outcome, detail = judge(case)
    assert outcome in ("agree-ok", "agree-refused", "unsupported", "stricter"), (
        f"{outcome}: {detail}\n{_describe(case)}")


def test_the_fuzzer_draws_from_the_registry():
    from phasec.frontend.onnx import supported_ops

    ops = FUZZ_OPS()
    assert set(ops) <= set(supported_ops())
    # all of the default domain but a handful documented in fuzz._SKIP and
    # those newer than the fuzzer's opset (TensorScatter, BitCast...); other
    # domains (com.microsoft) are not drawn
    import onnx.defs

    from phasec.frontend.onnx.fuzz import OPSET

    default_domain = [op for op in supported_ops() if ":" not in op]
    left_out = [op for op in default_domain if op not in ops]
    newer = [op for op in left_out
             if onnx.defs.get_schema(op, onnx.defs.onnx_opset_version(), "").since_version
             > OPSET]
    assert len(left_out) - len(newer) <= 8, sorted(set(left_out) - set(newer))


def test_near_valid_graphs_are_refused_like_onnxruntime():
    """The fuzzer's structural mutations, each from a fixed seed: both refuse."""
    from phasec.frontend.onnx.fuzz import RandomSource

    seen = set()
    for seed in range(400):
        case = draw_case(RandomSource(seed), ["Relu", "Add", "Neg"])
        if not case.note or case.note in seen:
            continue
        seen.add(case.note)
        outcome, detail = judge(case)
        assert outcome == "agree-refused", f"seed {seed} ({case.note}): {outcome} {detail}"
    assert len(seen) >= 4
