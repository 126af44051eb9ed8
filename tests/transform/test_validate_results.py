"""ValidateResults: the first pass that changes a module's results is named,
rounding differences are not blamed, and the tolerance can be tightened."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.planted import planted_pipeline
from phasec import transform as T
from phasec.errors import InputError
from phasec.ir import Phase
from phasec.pipeline import lower
from phasec.script.parser import parse
from phasec.transform.results import Tolerance, compare_outputs, rounding_length, widen

SOURCE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32"),
             b: R.Tensor((4, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.subtract(y, b)
            s = R.multiply(z, R.const(0.5, "float32"))
            t = R.nn.softmax(s, axis=-1)
            R.output(t)
        return t
'''


def _numpy(x, w, b, half=0.5):
    s = (x.astype(np.float64) @ w - b) * half
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _inputs():
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype("float32") for s in ((4, 8), (8, 8), (4, 8))]


def _lower(kind=None, **kw):
    check = T.ValidateResults(**kw)
    pipeline = planted_pipeline(kind) if kind else None
    mod = parse(SOURCE)
    lowered = lower(mod, 2, pipeline=pipeline, instruments=[check])
    return check, lowered


def test_default_pipeline_is_not_blamed():
    inputs = _inputs()
    check, _ = _lower(inputs=inputs)
    assert check.change is None
    # every pass that changed the module was checked, and the reference is float64
    assert len(check.checks) >= 8
    assert "float64" in check.summary()
    assert all(c.ok and c.ratio < 1 for c in check.checks)


@pytest.mark.parametrize("kind,blamed,phase", [
    ("swap", "PlantedSwapInFused", Phase.OPTIMIZATION),
    ("off_by_one", "PlantedOffByOne", Phase.LOWERING),
    ("wrong_fold", "PlantedWrongFold", Phase.LOWERING),
])
def test_planted_miscompilation_is_named(kind, blamed, phase):
    x, w, b = inputs = _inputs()
    with pytest.raises(T.ResultsChangedError) as info:
        _lower(kind, inputs=inputs)
    change = info.value.change
    assert change.pass_name == blamed and change.phase_after == phase
    m = change.mismatch
    assert m.output == "output" and m.count >= 1
    # the expected value is the true result (numpy, float64) at the index reported
    assert m.expected == pytest.approx(_numpy(x, w, b)[m.index], rel=1e-6)
    assert not abs(m.got - m.expected) <= 1e-3  # (NaN: a skipped iteration left storage unset)
    assert change.functions  # the functions the pass changed, shown before/after
    text = str(info.value)
    assert blamed in text and "before" in text and "not expected to change" in text


def test_sparse_checks_localize_the_same_pass_by_bisection():
    for every in (3, "transitions"):
        check = T.ValidateResults(inputs=_inputs(), every=every)
        with pytest.raises(T.ResultsChangedError) as info:
            lower(parse(SOURCE), 2, pipeline=planted_pipeline("wrong_fold"), instruments=[check])
        change = info.value.change
        assert change.pass_name == "PlantedWrongFold"
        assert "bisection" in change.localized_by
        assert len(check.checks) < check.passes_run + 1  # fewer runs than passes


def test_recording_without_raising():
    check, lowered = _lower("swap", inputs=_inputs(), raise_on_change=False)
    assert lowered.phase == Phase.BUILD
    assert check.change is not None and check.change.pass_name == "PlantedSwapInFused"
    assert "PlantedSwapInFused" in check.summary()


def test_tolerance_separates_rounding_from_miscompilation():
    mod = parse(SOURCE)
    x, w, b = _inputs()
    truth = _numpy(x, w, b)
    ref32 = truth.astype("float32")
    length = rounding_length(mod)
    assert length >= 8  # the matmul's 8 terms at least
    rounded = (truth * (1 + 4e-7)).astype("float32")  # a few ulps: rounding
    assert compare_outputs(rounded, ref32, truth, Tolerance(), length) is None
    # tightened to nothing, the same difference is reported
    tight = Tolerance(rtol=0, atol=0, noise=0, growth=0)
    assert compare_outputs(rounded, ref32, truth, tight, length) is not None
    wrong = ref32.copy()
    wrong[2, 3] += 1e-2
    miss = compare_outputs(wrong, ref32, truth, Tolerance(), length)
    assert miss.index == (2, 3) and miss.count == 1
    assert miss.error == pytest.approx(abs(wrong[2, 3] - truth[2, 3]), rel=1e-6)
    # where the float32 evaluation overflowed (float64 did not), any inf/NaN
    # is the same result; a finite value there, or an inf elsewhere, is not
    big = np.array([1e39, 2.0])
    r32 = np.array([np.inf, 2], "float32")  # big in float32
    assert compare_outputs(np.array([np.nan, 2], "float32"), r32, big, Tolerance(), 1) is None
    assert compare_outputs(np.array([5, 2], "float32"), r32, big, Tolerance(), 1).index == (0,)
    assert compare_outputs(np.array([np.inf, np.inf], "float32"), r32, big, Tolerance(),
                           1).index == (1,)
    ints = np.arange(6, dtype="int32")
    assert compare_outputs(ints + (np.arange(6) == 4), ints, None, Tolerance(), 1).index == (4,)


def test_widen_evaluates_in_float64():
    from phasec import interp

    mod = parse(SOURCE)
    x, w, b = _inputs()
    out = interp.run(widen(mod), *(a.astype(np.float64) for a in (x, w, b)))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, _numpy(x, w, b), rtol=1e-12, atol=1e-15)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(T.PassConfigError, match="every"):
        T.ValidateResults(every=0)
    with pytest.raises(InputError, match="rtol"):
        T.ValidateResults(rtol=-1)
    with pytest.raises(InputError, match="not a parameter"):
        _lower(inputs={"nope": np.zeros(3)})
    with pytest.raises(InputError, match="takes 3 arguments"):
        _lower(inputs=[np.zeros((4, 8), "float32")])


def test_llvm_kernels_take_the_interpreters_non_contiguous_values():
    from phasec import interp
    from phasec.backend.kernel_runner import llvm_kernel_runner

    lowered = lower(parse(SOURCE), 2)
    x, w, b = _inputs()
    wt = np.asfortranarray(w)  # the same values, not C-contiguous
    out = interp.run(lowered, x, wt, np.broadcast_to(b[:1], b.shape),
                     kernel_runner=llvm_kernel_runner())
    np.testing.assert_allclose(out, _numpy(x, w, np.broadcast_to(b[:1], b.shape)),
                               rtol=1e-5, atol=1e-6)
