"""A flat GEMM's constant A packed into row panels (``gemm_prepack.row_panels``):
a 1x1 convolution over a small image whose weight is a constant reads it as
``Ap[r // mr, k, r % mr]``, one contiguous run a row tile. Without
PackConstantWeights the kernel copies the panels itself on each call; with it
(:func:`prepacked_kernel`) it reads :func:`pack_rows` of the weight, computed
once. Both against numpy on LLVM with bounds checks (and the TIR interpreter
for the small ones), on odd and prime shapes; each asserting whether the
panels are made, so that the shapes the tuning declines stay declined."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.frontend.onnx import from_onnx
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec import te
from phasec.passes.pack_constant_weights import prepacked_kernel
from phasec.target import tuning
from phasec.te.schedules.gemm_prepack import (
    ROW_PACK_ATTR, ROW_PACK_MARK, ROW_PACK_ROWS_ATTR, pack_rows,
)

from helpers.legalize import fused
from helpers.te_checks import walk

RNG = np.random.default_rng(29)

#: the Xeon's profile (whatever the host), row panels as it takes them
XEON = tuning.avx512_xeon_tuning()


def _conv(n, c, h, w, o, residual=False):
    """conv2d(d, w) + b (+ r), the weight ``w`` the function's second parameter."""
    d = Var("d", TensorStructInfo((n, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((o, c, 1, 1), "float32"))
    b = Var("b", TensorStructInfo((1, o, 1, 1), "float32"))
    params = [d, wt, b]
    if residual:
        params.append(Var("r", TensorStructInfo((n, o, h, w), "float32")))

    def body(bb):
        y = bb.emit(call_op("add", bb.emit(call_op("nn.conv2d", d, wt)), b))
        return call_op("add", y, params[-1]) if residual else y
    return fused(params, body)


def _lower(n, c, h, w, o, residual=False, constant=True, **fields):
    opts = te.ScheduleOptions(tuning=dataclasses.replace(XEON, **fields))
    return lower_fused(_conv(n, c, h, w, o, residual), schedule_hints=opts,
                       constant_params=(1,) if constant else ()).prim_func


def _marks(prim) -> list[tir.AttrStmt]:
    return [s for s in walk(prim.body) if isinstance(s, tir.AttrStmt) and s.key == ROW_PACK_MARK]


def _args(n, c, h, w, o, residual):
    args = [RNG.standard_normal((n, c, h, w)).astype("float32"),
            RNG.standard_normal((o, c, 1, 1)).astype("float32"),
            RNG.standard_normal((1, o, 1, 1)).astype("float32")]
    want = (get_op("relax.nn.conv2d").reference(args[0].astype("float64"),
                                                args[1].astype("float64")) + args[2])
    if residual:
        args.append(RNG.standard_normal(want.shape).astype("float32"))
        want = want + args[-1]
    return args, want


def _check(prim, args, want, interp=False) -> None:
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": prim}, check_bounds=True)["k"](*args, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        got = np.zeros(want.shape, "float32")
        run_prim_func(prim, [a.copy() for a in args] + [got])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


TAKEN = {  # n, c, h, w, o, residual
    "131_to_1009_over_7x7": (1, 131, 7, 7, 1009, False),     # K prime, 1009 = 168 x 6 + 1
    "512_to_2048_residual": (1, 512, 7, 7, 2048, True),      # ResNet-50's, 2048 = 341 x 6 + 2
    "509_to_263_over_7x7": (1, 509, 7, 7, 263, False),       # K = 509 <= 512, 263 = 43 x 6 + 5
    "383_to_347_batch_2_over_5x5": (2, 383, 5, 5, 347, True),  # 25 columns a matrix, 50 a call
    "160_to_960_over_7x7": (1, 160, 7, 7, 960, False),       # MobileNetV2's
}


@pytest.mark.parametrize("name", list(TAKEN))
def test_row_panels_per_call_and_prepacked_match_numpy(xeon, name):
    # (the host too: prepacking plans by its tuning; row panels are the Xeon's)
    n, c, h, w, o, residual = TAKEN[name]
    prim = _lower(n, c, h, w, o, residual)
    assert len(_marks(prim)) == 1
    mr = prim.attrs[ROW_PACK_ROWS_ATTR]
    assert prim.attrs[ROW_PACK_ATTR] == "w" and 4 <= mr <= XEON.gemm_rows  # (_balanced_rows)
    assert prove_accesses(prim).counts()[1] == 0
    args, want = _args(n, c, h, w, o, residual)
    _check(prim, args, want)  # the panels copied on each call
    made = prepacked_kernel(prim)
    assert made is not None
    new, index, keeps, pack = made
    assert index == 1 and not keeps and not _marks(new)
    assert ROW_PACK_ATTR not in new.attrs
    assert prove_accesses(new).counts()[1] == 0
    assert [d.value for d in new.params[1].shape] == [-(-o // mr), c, mr]
    packed = pack(args[1])
    # each row tile one contiguous run: w[i*mr + r, k] at packed[i, k, r], zero past o
    assert packed.flags.c_contiguous and packed.shape == (-(-o // mr), c, mr)
    np.testing.assert_array_equal(packed[1, :, 2], args[1][mr + 2, :, 0, 0])
    if o % mr:
        assert not packed[-1, :, o % mr:].any()
    _check(new, [args[0], packed, *args[2:]], want)


def test_row_panels_on_the_interpreter():
    # small sizes (the bound on the weight lowered): 23 -> 29 over 3x7, 21
    # columns, 29 = 4 x 6 + 5 rows; and 13 -> 7 over 3x6 + residual, two images
    for n, c, h, w, o, residual in ((1, 23, 3, 7, 29, False), (2, 13, 3, 6, 7, True)):
        prim = _lower(n, c, h, w, o, residual, gemm_pack_a_min_bytes=0)
        assert len(_marks(prim)) == 1
        args, want = _args(n, c, h, w, o, residual)
        _check(prim, args, want, interp=True)
        new, _, _, pack = prepacked_kernel(prim)
        _check(new, [args[0], pack(args[1]), *args[2:]], want, interp=True)


DECLINED = {  # n, c, h, w, o, constant weight, tuning fields
    "K_521_over_512": (1, 521, 7, 7, 263, True, {}),
    "81_columns": (1, 131, 9, 9, 1009, True, {}),
    "weight_under_512_KB": (1, 136, 7, 7, 544, True, {}),
    "weight_a_parameter": (1, 131, 7, 7, 1009, False, {}),
    "switched_off": (1, 131, 7, 7, 1009, True, {"gemm_pack_a_max_columns": 0}),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_shapes_the_tuning_declines_read_a_in_place(xeon, name):
    n, c, h, w, o, constant, fields = DECLINED[name]
    prim = _lower(n, c, h, w, o, constant=constant, **fields)
    assert not _marks(prim) and ROW_PACK_ATTR not in (prim.attrs or {})
    assert prepacked_kernel(prim) is None
    args, want = _args(n, c, h, w, o, False)
    _check(prim, args, want)


def test_a_symbolic_batch_is_declined():
    nv = tir.Var("n")
    prim = _lower(nv, 131, 7, 7, 1009)
    assert not _marks(prim)


def test_pack_rows():
    w = np.arange(7 * 5, dtype="float32").reshape(7, 5, 1, 1)
    p = pack_rows(w, 3)
    assert p.shape == (3, 5, 3)
    for r in range(9):
        for k in range(5):
            assert p[r // 3, k, r % 3] == (w[r, k, 0, 0] if r < 7 else 0)


def test_a_model_built_with_row_panels_matches_onnxruntime(monkeypatch):
    # the whole pipeline (PackConstantWeights included) on any host, with the
    # Xeon's row panels: 509 -> 263 over 7x7 + residual (prime channels)
    monkeypatch.setenv("PHASEC_TUNING", "gemm_pack_a_max_columns=64,gemm_pack_a_max_k=512,"
                       "gemm_pack_a_min_bytes=524288")
    tuning.host_tuning.cache_clear()
    try:
        c, o = 509, 263
        wt = RNG.standard_normal((o, c, 1, 1)).astype("float32")
        bias = RNG.standard_normal(o).astype("float32")
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w", "b"], ["y"]),
             helper.make_node("Add", ["y", "r"], ["z"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 7, 7]),
             helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, o, 7, 7])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, o, 7, 7])],
            [onnx.numpy_helper.from_array(wt, "w"), onnx.numpy_helper.from_array(bias, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        exe = phasec.build(from_onnx(model))
        x = RNG.standard_normal((1, c, 7, 7)).astype("float32")
        r = RNG.standard_normal((1, o, 7, 7)).astype("float32")
        got = np.asarray(phasec.VirtualMachine(exe)["main"](x, r))
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x, "r": r})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert any(name.endswith("_prepacked") for name in exe.kernels("llvm"))
    finally:
        tuning.host_tuning.cache_clear()
