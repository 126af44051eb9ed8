"""Winograd chosen by cost when the weight is a parameter
(``te.schedules.winograd.estimate_ns``): ``U = G w G^T`` then runs on every
call, and a convolution whose estimate with it is above the direct one's
keeps the direct schedule, while a constant weight (transformed once per
build) keeps Winograd. The values against numpy's direct convolution
(float64) on LLVM and on the TIR interpreter, for odd, prime and symbolic
shapes, whichever schedule the estimate picks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import phasec.target.tuning as tuning_module
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.op.legalize import lower_fused
from phasec.te.schedules.winograd import WINOGRAD_MARK, estimate_ns

from helpers.legalize import fused, walk

RNG = np.random.default_rng(29)


@pytest.fixture
def host(monkeypatch):
    """The host tuning with Winograd tiles up to 4 and ``bits``-bit vectors
    (and one-vector tiles whatever the weight's size: the Xeon's limit on a
    constant weight is tested in test_tuning_profiles.py)."""
    def use(bits: int) -> None:
        tuned = replace(tuning_module.host_tuning(), winograd_tile=4, vector_bits=bits,
                        winograd_narrow_max_weight_bytes=0)
        monkeypatch.setattr(tuning_module, "host_tuning", lambda: tuned)
    return use


def _conv(n, c, h, w, o):
    d = Var("d", TensorStructInfo((n, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((o, c, 3, 3), "float32"))
    return fused([d, wt], lambda bb: call_op("nn.conv2d", d, wt, padding=1))


def _tile(func: tir.PrimFunc) -> int | None:
    return next((s.value.value for s in walk(func.body)
                 if isinstance(s, tir.AttrStmt) and s.key == WINOGRAD_MARK), None)


def test_a_parameter_weight_keeps_the_direct_schedule_where_its_transform_costs_more(host):
    host(512)
    # 512 channels on 7x7 (ResNet's last stage): F(2x2) needs 16 x 512 x 512
    # transformed weights a call, more than it saves
    wino, direct = estimate_ns(1, 512, 512, 7, 7, 2, weight_per_call=True)
    assert wino > direct > estimate_ns(1, 512, 512, 7, 7, 2, weight_per_call=False)[0]
    assert _tile(lower_fused(_conv(1, 512, 7, 7, 512)).prim_func) is None
    assert _tile(lower_fused(_conv(1, 512, 7, 7, 512), constant_params=(1,)).prim_func) == 2
    # a larger image repays the transform: Winograd either way
    assert estimate_ns(1, 64, 64, 28, 28, 4, weight_per_call=True)[0] < \
        estimate_ns(1, 64, 64, 28, 28, 4, weight_per_call=True)[1]
    assert _tile(lower_fused(_conv(1, 64, 28, 28, 64)).prim_func) == 4


@pytest.mark.parametrize("c,h,w,o", [(64, 28, 28, 64), (37, 13, 11, 41), (96, 14, 14, 96),
                                     (256, 8, 8, 256)])
def test_the_choice_follows_the_estimate(c, h, w, o, host):
    host(512)
    taken = _tile(lower_fused(_conv(1, c, h, w, o)).prim_func)
    # the plans the rule allows (a vector of 16 tiles at 512 bits), cheapest first
    plans = [m for m in (4, 2) if -(-h // m) * -(-w // m) >= 16]
    costs = {m: estimate_ns(1, c, o, h, w, m, weight_per_call=True) for m in plans}
    best = min(plans, key=lambda m: costs[m][0])
    assert taken == (best if costs[best][0] <= costs[best][1] else None)


def _check(low, n, c, h, w, o, interp):
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    want = np.zeros((n, o, h, w))
    for r in range(3):
        for s in range(3):
            want += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + h, s:s + w], wa[:, :, r, s])
    tol = {"rtol": 1e-5, "atol": 1e-5 * np.abs(want).max(initial=1)}
    got = np.full(want.shape, np.nan, np.float32)
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, got)
    np.testing.assert_allclose(got, want, **tol)
    if interp:
        again = np.full(want.shape, np.nan, np.float32)
        run_prim_func(low.prim_func, [x, wa, again])
        np.testing.assert_allclose(again, want, **tol)


@pytest.mark.parametrize("n,c,h,w,o,interp", [
    (1, 31, 29, 31, 37, False),  # prime: Winograd repays its weight transform
    (1, 37, 13, 11, 41, False),  # odd and prime: the estimate says direct
    (2, 5, 7, 3, 3, True),       # few channels: direct by the rule
])
def test_parameter_weights_match_the_direct_convolution(n, c, h, w, o, interp, host):
    host(128)
    low = lower_fused(_conv(n, c, h, w, o))
    wino, direct = estimate_ns(n, c, o, h, w, 4, weight_per_call=True)
    if c >= 32:  # (the rule's channel threshold)
        assert (_tile(low.prim_func) is not None) == (wino <= direct)
    _check(low, n, c, h, w, o, interp)


def test_a_symbolic_batch_with_a_parameter_weight(host):
    host(128)
    low = lower_fused(_conv(tir.Var("n", "int64"), 33, 9, 10, 35))
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    wa = (RNG.standard_normal((35, 33, 3, 3)) / np.sqrt(9 * 33)).astype(np.float32)
    for n in (1, 3):
        x = RNG.standard_normal((n, 33, 9, 10)).astype(np.float32)
        xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
        want = sum(np.einsum("nchw,kc->nkhw", xp[:, :, r:r + 9, s:s + 10], wa[:, :, r, s])
                   for r in range(3) for s in range(3))
        got = np.full(want.shape, np.nan, np.float32)
        kernel(x, wa, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
