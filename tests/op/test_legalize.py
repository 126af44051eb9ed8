"""Legalization of every compute operator to TIR (phasec.op.legalize),
checked through the TIR interpreter against each operator's numpy reference;
symbolic shapes. Fused groups: test_legalize_fused.py; the softmax and transpose
schedules: test_legalize_schedules.py."""

import numpy as np
import pytest

from phasec.interp.tir import run_prim_func
from phasec.ir import (
    Constant, PrimValue, ShapeExpr, TensorStructInfo, Tuple, TupleStructInfo, Var, tir,
)
from phasec.op import call_op, list_ops
from phasec.op.legalize import (
    LEGALIZE, LegalizeError, has_legalization, legalize_call, legalize_fused, lower_call,
)

from helpers.legalize import RNG, check_call, rand, tvar
from helpers.legalize_cases.combine import COMBINE_LEGALIZE_CASES, COMBINE_VALUES
from helpers.legalize_cases.device_grad import DEVICE_GRAD_LEGALIZE_CASES
from helpers.legalize_cases.elementwise_math import EW_LEGALIZE_CASES, EW_VALUES
from helpers.legalize_cases.ext import BOOL_VALUES, EXT_LEGALIZE_CASES
from helpers.legalize_cases.image_ext import IMAGE_EXT_LEGALIZE_CASES
from helpers.legalize_cases.indexing import INDEXING_LEGALIZE_CASES, INDEXING_VALUES
from helpers.legalize_cases.layout_transform import LAYOUT_LEGALIZE_CASES
from helpers.legalize_cases.more import MORE_LEGALIZE_CASES, MORE_VALUES
from helpers.legalize_cases.onnx_ops import ONNX_OPS_LEGALIZE_CASES, ONNX_OPS_VALUES
from helpers.legalize_cases.rnn import RNN_LEGALIZE_CASES, RNN_VALUES
from helpers.legalize_cases.signal_vision import (
    SIGNAL_VISION_LEGALIZE_CASES, SIGNAL_VISION_VALUES,
)


# ---------------------------------------------------------------------------
# every operator
# ---------------------------------------------------------------------------

X = tvar("x", (2, 3))
Y = tvar("y", (3,))
XI = tvar("xi", (2, 3), "int32")
YI = tvar("yi", (3,), "int32")
Z = tvar("z", (2, 3, 4))
ZI = tvar("zi", (2, 3, 4), "int32")
G = tvar("g", (4,))
B = tvar("b", (4,))
G2 = tvar("g2", (3, 4))
B2 = tvar("b2", (3, 4))
M1 = tvar("m1", (5, 4))
M2 = tvar("m2", (4, 6))
V1 = tvar("v1", (4,))
BM = tvar("bm", (2, 1, 5, 4))
BN = tvar("bn", (3, 4, 6))
D = tvar("d", (2, 4, 7, 6))
DI = tvar("di", (1, 2, 5, 5), "int32")
W = tvar("w", (6, 4, 3, 3))
WG = tvar("wg", (6, 2, 3, 2))
S1 = tvar("s1", (2, 1, 4, 1))
Q = tvar("q", (2, 5, 4))
IX = tvar("ix", (2, 2), "int64")
C = tvar("c", (2, 1), "bool")
E0 = tvar("e0", ())
V5 = tvar("v5", (1, 2, 3, 4, 3))
NT = tvar("nt", (2, 4), "int64")

VALUES = {
    X: rand((2, 3)), Y: rand((3,)), XI: rand((2, 3), "int32"),
    # (a divisor of 0 is an error, not a result: test_integer_division_by_zero)
    YI: np.array([3, -2, 1], "int32"), Z: rand((2, 3, 4)), ZI: rand((2, 3, 4), "int32"),
    G: rand((4,)), B: rand((4,)), G2: rand((3, 4)), B2: rand((3, 4)), M1: rand((5, 4)),
    M2: rand((4, 6)), V1: rand((4,)), BM: rand((2, 1, 5, 4)), BN: rand((3, 4, 6)),
    D: rand((2, 4, 7, 6)), DI: rand((1, 2, 5, 5), "int32"), W: rand((6, 4, 3, 3)),
    WG: rand((6, 2, 3, 2)), S1: rand((2, 1, 4, 1)), Q: rand((2, 5, 4)),
    IX: np.array([[0, 2], [-1, 1]], "int64"), C: np.array([[True], [False]]), E0: rand(()),
    V5: rand((1, 2, 3, 4, 3)), NT: np.array([[0, 2, 1, 2], [1, 0, 0, 2]], "int64"),
}
POSITIVE = {**VALUES, X: np.abs(VALUES[X]) + 0.1}

BINARY = ["add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum",
          "minimum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
UNARY = ["negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
         "ceil", "round", "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu", "stop_fusion"]
POOLS = ["nn.max_pool2d", "nn.avg_pool2d"]

CASES = (
    [(f"{n}-f32", lambda n=n: call_op(n, X, Y)) for n in BINARY]
    + [(f"{n}-i32", lambda n=n: call_op(n, XI, YI))
       for n in BINARY + ["logical_and", "logical_or"]]
    + [(f"{n}-scalar-const", lambda n=n: call_op(n, X, Constant(np.array(1.5, "float32"))))
       for n in ["add", "multiply", "maximum"]]
    + [("add-0d", lambda: call_op("add", E0, E0))]
    + [(f"{n}-f32", lambda n=n: call_op(n, X)) for n in UNARY]
    + [(f"{n}-i32", lambda n=n: call_op(n, XI))
       for n in ["negative", "abs", "floor", "ceil", "round", "logical_not", "nn.relu"]]
    + [("astype-i32", lambda: call_op("astype", X, dtype="int32")),
       ("astype-bool", lambda: call_op("astype", X, dtype="bool")),
       ("astype-f64", lambda: call_op("astype", XI, dtype="float64")),
       ("clip-f32", lambda: call_op("clip", X, min=-0.5, max=0.5)),
       ("clip-i32", lambda: call_op("clip", XI, min=-2.5, max=3.7)),
       ("where", lambda: call_op("where", C, X, Y)),
       ("zeros", lambda: call_op("zeros", (2, 3), dtype="float32")),
       ("ones", lambda: call_op("ones", (2, 3), dtype="int32")),
       ("full-tensor", lambda: call_op("full", (2, 3), Constant(np.array(2.5, "float32")))),
       ("full-var", lambda: call_op("full", (2, 3), E0, dtype="float64")),
       ("full-prim", lambda: call_op("full", (3,), PrimValue(tir.IntImm(7, "int64")),
                                     dtype="int32")),
       ("zeros_like", lambda: call_op("zeros_like", X)),
       ("ones_like", lambda: call_op("ones_like", X, dtype="int32"))]
    + [(f"{n}-{axis}-{kd}", lambda n=n, axis=axis, kd=kd: call_op(n, Z, axis=axis, keepdims=kd))
       for n in ["sum", "mean", "max", "min", "prod"]
       for axis, kd in ((None, False), ((1,), False), ((0, 2), True), ((-1,), False), ((), False))]
    + [("mean-i32", lambda: call_op("mean", ZI, axis=(1,))),
       ("sum-i32", lambda: call_op("sum", ZI, axis=(2,), keepdims=True))]
    + [(f"{n}-axis{ax}", lambda n=n, ax=ax: call_op(n, Z, axis=ax))
       for n in ["nn.softmax", "nn.log_softmax"] for ax in (-1, 0, 1)]
    + [("layer_norm", lambda: call_op("nn.layer_norm", Z, G, B, axes=(-1,))),
       ("layer_norm-plain", lambda: call_op("nn.layer_norm", Z, G, B, axes=(-1,),
                                            center=False, scale=False)),
       ("layer_norm-2axes", lambda: call_op("nn.layer_norm", Z, G2, B2, axes=(1, 2))),
       ("rms_norm", lambda: call_op("nn.rms_norm", Z, G, axes=(-1,))),
       ("rms_norm-2axes", lambda: call_op("nn.rms_norm", Z, G2, axes=(1, 2), epsilon=0.1))]
    + [("matmul", lambda: call_op("matmul", M1, M2)),
       ("matmul-vec-mat", lambda: call_op("matmul", V1, M2)),
       ("matmul-mat-vec", lambda: call_op("matmul", M1, V1)),
       ("matmul-vec-vec", lambda: call_op("matmul", V1, V1)),
       ("matmul-batch-broadcast", lambda: call_op("matmul", BM, BN)),
       ("matmul-batch-mat", lambda: call_op("matmul", BM, M2)),
       ("matmul-out-dtype", lambda: call_op("matmul", M1, M2, out_dtype="float64"))]
    + [("conv2d", lambda: call_op("nn.conv2d", D, W)),
       ("conv2d-strided", lambda: call_op("nn.conv2d", D, W, strides=(2, 1),
                                          padding=(1, 2, 0, 1), dilation=(1, 2))),
       ("conv2d-groups", lambda: call_op("nn.conv2d", D, WG, groups=2, padding=1)),
       # D read as NHWC (2, 4 x 7, 6 channels): an HWIO / OHWI weight, out NHWC or NCHW
       ("conv2d-nhwc-hwio", lambda: call_op("nn.conv2d", D, tvar("wh", (3, 2, 6, 5)),
                                            data_layout="NHWC", kernel_layout="HWIO",
                                            padding=(1, 0, 0, 1), strides=(1, 2))),
       ("conv2d-nhwc-ohwi-nchw", lambda: call_op("nn.conv2d", D, tvar("wh", (4, 2, 3, 3)),
                                                 data_layout="NHWC", kernel_layout="OHWI",
                                                 out_layout="NCHW", groups=2, dilation=(1, 2))),
       ("conv2d-nhwc-depthwise", lambda: call_op("nn.conv2d", D, tvar("wh", (2, 2, 1, 6)),
                                                 data_layout="NHWC", kernel_layout="HWIO",
                                                 groups=6, padding=1)),
       ("conv2d-i32-hwio", lambda: call_op("nn.conv2d", DI, tvar("wi", (2, 2, 2, 3), "int32"),
                                           kernel_layout="HWIO", padding=1)),
       # packed layouts: D4 is NCHW4c (1, 2, 5, 4, 4): 8 channels
       ("conv2d-nchw4c-oihw4o", lambda: call_op("nn.conv2d", tvar("d4", (1, 2, 5, 4, 4)),
                                                tvar("w4", (2, 8, 3, 2, 4)), padding=1,
                                                data_layout="NCHW4c", kernel_layout="OIHW4o")),
       ("conv2d-nhwc4c-groups-nchw", lambda: call_op(
           "nn.conv2d", tvar("d4", (1, 5, 4, 2, 4)), tvar("w4", (1, 2, 2, 4, 4)), groups=2,
           data_layout="NHWC4c", kernel_layout="OHWI4o", out_layout="NCHW"))]
    + [(f"{p}-{k}", lambda p=p, kw=kw: call_op(p, D, **kw)) for p in POOLS
       for k, kw in (("pad", dict(pool_size=(3, 2), strides=(2, 2), padding=(1, 1))),
                     ("ceil", dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 0, 1, 1),
                                   ceil_mode=True)),
                     ("incl-pad", dict(pool_size=(2, 2), padding=(1, 1), count_include_pad=True,
                                       dilation=(2, 1))),
                     # D read as NHWC (2, 4 x 7, 6 channels), out NCHW; ceil_mode drops a
                     # last window that would start in the padding (TVM 0.27)
                     ("nhwc", dict(pool_size=(2, 3), strides=(2, 2), layout="NHWC",
                                   out_layout="NCHW", ceil_mode=True, padding=(0, 1, 1, 0))))]
    + [(f"{p}-nchw2c", lambda p=p: call_op(p, tvar("d2c", (1, 2, 5, 4, 2)), pool_size=2,
                                           strides=1, padding=1, layout="NCHW2c"))
       for p in POOLS]
    + [("avg_pool2d-i32", lambda: call_op("nn.avg_pool2d", DI, pool_size=(2, 2), padding=(1, 1))),
       ("max_pool2d-i32", lambda: call_op("nn.max_pool2d", DI, pool_size=(3, 3), padding=(1, 1)))]
    + [(f"{n}", lambda n=n, kw=kw: call_op(n, Z, **kw))
       for n, kw in (("nn.leakyrelu", dict(alpha=0.3)), ("nn.selu", {}),
                     ("nn.softplus", dict(beta=2.0, threshold=1.5)))]
    + [("prelu", lambda: call_op("nn.prelu", Z, tvar("al", (3,)), axis=1)),
       ("prelu-one-slope", lambda: call_op("nn.prelu", Z, tvar("al1", (1,)), axis=-1))]
    + [(f"batch_norm-{t}-{ax}", lambda t=t, ax=ax: call_op(
        "nn.batch_norm", D, *[tvar(f"bn{k}", (4 if ax == 1 else 6,)) for k in range(4)], axis=ax,
        training=t, momentum=0.25, center=ax == 1))
       for t in (True, False) for ax in (1, -1)]
    + [("group_norm", lambda: call_op("nn.group_norm", D, tvar("gg", (4,)), tvar("gb", (4,)),
                                      num_groups=2, channel_axis=1, axes=(2, 3))),
       ("group_norm-last", lambda: call_op("nn.group_norm", D, tvar("gg", (6,)), tvar("gb", (6,)),
                                           num_groups=3, channel_axis=-1, axes=(2,), scale=False)),
       ("instance_norm", lambda: call_op("nn.instance_norm", D, tvar("gg", (4,)),
                                         tvar("gb", (4,)), channel_axis=1, axes=(2, 3))),
       ("dropout", lambda: call_op("nn.dropout", Z, rate=0.1))]
    + [(f"{k}_pool{r}d-{tag}", lambda k=k, r=r, kw=kw: call_op(
        f"nn.{k}_pool{r}d", Z if r == 1 else V5, **kw))
       for k in ("max", "avg") for r, tag, kw in (
           (1, "pad", dict(pool_size=2, strides=2, padding=1, count_include_pad=True)),
           (1, "ceil-nwc", dict(pool_size=3, strides=2, padding=(1, 0), ceil_mode=True,
                                layout="NWC", dilation=1)),
           (3, "pad", dict(pool_size=(2, 1, 2), strides=(1, 2, 2), padding=(1, 0, 0, 0, 1, 1))),
           (3, "ceil-ndhwc", dict(pool_size=2, strides=2, ceil_mode=True, layout="NDHWC",
                                  out_layout="NCDHW")))]
    + [("avg_pool1d-i32", lambda: call_op("nn.avg_pool1d", ZI, pool_size=3, padding=1))]
    + [(f"adaptive_avg_pool{r}d-{tag}", lambda r=r, kw=kw: call_op(
        f"nn.adaptive_avg_pool{r}d", {1: Z, 2: D, 3: V5}[r], **kw))
       for r, tag, kw in ((1, "3", dict(output_size=3)), (1, "up", dict(output_size=6)),
                          (2, "global", dict(output_size=1)), (2, "nhwc", dict(layout="NHWC",
                                                                                output_size=(2, 4))),
                          (3, "odd", dict(output_size=(2, 3, 2))))]
    + [("conv1d", lambda: call_op("nn.conv1d", Z, tvar("w1", (6, 3, 2)), padding=1, strides=2)),
       ("conv1d-groups-dil", lambda: call_op("nn.conv1d", Z, tvar("w1", (6, 1, 2)), groups=3,
                                             dilation=2)),
       ("conv1d-nwc", lambda: call_op("nn.conv1d", Z, tvar("w1", (2, 4, 5)), data_layout="NWC",
                                      kernel_layout="WIO", padding=(0, 1))),
       ("conv1d-i32", lambda: call_op("nn.conv1d", ZI, tvar("w1", (2, 3, 2), "int32"))),
       ("conv3d", lambda: call_op("nn.conv3d", V5, tvar("w3", (4, 2, 2, 1, 2)), padding=1,
                                  strides=(1, 2, 1))),
       ("conv3d-ndhwc", lambda: call_op("nn.conv3d", V5, tvar("w3", (2, 2, 3, 3, 2)),
                                        data_layout="NDHWC", kernel_layout="DHWIO",
                                        out_layout="NCDHW", dilation=(1, 1, 1)))]
    + [("conv1d_transpose", lambda: call_op("nn.conv1d_transpose", Z, tvar("w1", (3, 2, 3)),
                                            strides=2, padding=(1, 0), output_padding=1)),
       ("conv2d_transpose-groups", lambda: call_op("nn.conv2d_transpose", D, tvar("w2", (4, 1, 2, 3)),
                                                   strides=(2, 1), padding=1, groups=2,
                                                   dilation=(1, 2))),
       ("conv2d_transpose-nhwc", lambda: call_op("nn.conv2d_transpose", D, tvar("w2", (2, 2, 3, 6)),
                                                 data_layout="NHWC", kernel_layout="HWOI",
                                                 out_layout="NCHW")),
       ("conv3d_transpose", lambda: call_op("nn.conv3d_transpose", V5,
                                            tvar("w3", (2, 2, 2, 1, 2)), strides=2,
                                            output_padding=(1, 0, 1), padding=(1, 0, 0, 0, 0, 1)))]
    + [(f"attention-{cm}", lambda cm=cm: call_op(
        "nn.attention", tvar("aq", (2, 3, 4, 5)), tvar("ak", (2, 6, 2, 5)), tvar("av", (2, 6, 4, 3)),
        causal_mask=cm)) for cm in (None, "TopLeft", "BottomRight")]
    + [("attention_bias", lambda: call_op(
        "nn.attention_bias", tvar("aq", (2, 4, 2, 5)), tvar("ak", (2, 3, 2, 5)),
        tvar("av", (2, 3, 2, 3)), tvar("ab", (1, 2, 4, 3)), scale=0.25, causal_mask="BottomRight")),
       ("cross_entropy", lambda: call_op("nn.cross_entropy_with_logits", Z, Z)),
       ("cross_entropy-1d", lambda: call_op("nn.cross_entropy_with_logits", Y, Y)),
       ("cross_entropy-i32", lambda: call_op("nn.cross_entropy_with_logits", XI, XI))]
    + [(f"nll_loss-{r}-{w}", lambda r=r, w=w: call_op(
        "nn.nll_loss", Z, NT, *([tvar("nw", (3,))] if w else []), reduction=r, ignore_index=1))
       for r in ("none", "sum", "mean") for w in (False, True)]
    + [("nll_loss-1d", lambda: call_op("nn.nll_loss", Y, tvar("nt0", (), "int32"),
                                       reduction="mean"))]
    + [(f"resize2d-{m}-{mode}", lambda m=m, mode=mode: call_op(
        "image.resize2d", D, (5, 9), method=m, coordinate_transformation_mode=mode,
        roi=(0.1, 0.0, 0.8, 1.0), rounding_method="" if m == "nearest_neighbor" else "round",
        extrapolation_value=-1.0))
       for m in ("nearest_neighbor", "linear", "cubic")
       for mode in ("half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")]
    + [("resize2d-nhwc-i32", lambda: call_op("image.resize2d", DI, (3, 4), layout="NHWC")),
       ("resize2d-cubic-exclude", lambda: call_op("image.resize2d", D, (9, 2), method="cubic",
                                                  cubic_exclude=1, out_dtype="float64"))]
    + [("quantize", lambda: call_op("quantize", Z, tvar("qs", (3,)), tvar("qz", (3,), "int8"),
                                    axis=1)),
       ("quantize-scalar-u8", lambda: call_op("quantize", Z, Constant(np.array(0.05, "float32")),
                                              Constant(np.array(7, "uint8")), out_dtype="uint8")),
       ("dequantize", lambda: call_op("dequantize", ZI, tvar("qs", (4,)), tvar("qz", (1,), "int32"))),
       ("dequantize-f16", lambda: call_op("dequantize", ZI, tvar("qs", (3,)),
                                          tvar("qz", (3,), "int32"), axis=-2,
                                          out_dtype="float16"))]
    + [("reshape", lambda: call_op("reshape", Z, (4, 6))),
       ("reshape-infer", lambda: call_op("reshape", Z, (2, -1))),
       ("reshape-flat", lambda: call_op("reshape", Z, (24,))),
       ("reshape-split-dims", lambda: call_op("reshape", Z, (2, 3, 2, 2))),
       ("flatten", lambda: call_op("flatten", Z)),
       ("permute_dims", lambda: call_op("permute_dims", Z, axes=(2, 0, 1))),
       ("permute_dims-reverse", lambda: call_op("permute_dims", Z)),
       ("expand_dims", lambda: call_op("expand_dims", Z, axis=(0, 3))),
       ("squeeze-all", lambda: call_op("squeeze", S1)),
       ("squeeze-axis", lambda: call_op("squeeze", S1, axis=(1,))),
       ("broadcast_to", lambda: call_op("broadcast_to", Y, (4, 2, 3))),
       ("concat", lambda: call_op("concat", [Z, Q, Z], axis=1)),
       ("concat-flat", lambda: call_op("concat", [Z, Q], axis=None)),
       ("split-sections", lambda: call_op("split", Z, indices_or_sections=2, axis=2)),
       ("split-indices", lambda: call_op("split", Z, indices_or_sections=(1, 2), axis=1)),
       ("split-clipped", lambda: call_op("split", Z, indices_or_sections=(2, 9), axis=-1)),
       ("strided_slice", lambda: call_op("strided_slice", Z, axes=(1, 2), begin=(0, 3),
                                         end=(3, 0), strides=(2, -1))),
       ("strided_slice-neg", lambda: call_op("strided_slice", Z, axes=(2,), begin=(-3,),
                                             end=(100,))),
       ("take-axis", lambda: call_op("take", Z, IX, axis=1)),
       ("take-flat", lambda: call_op("take", Z, IX)),
       # a scalar index (R.prim_value), negative from the end; symbolic below
       ("take-prim", lambda: call_op("take", Z, PrimValue(tir.IntImm(-2, "int64")), axis=1)),
       ("take-prim-i32", lambda: call_op("take", Z, PrimValue(tir.IntImm(3, "int32")), axis=2)),
       # split as TVM 0.27: ceildiv sections, clamped (also decreasing) points, one section
       ("split-uneven", lambda: call_op("split", tvar("s10", (10, 2)), indices_or_sections=4)),
       ("split-clamped", lambda: call_op("split", tvar("s10", (10, 2)),
                                         indices_or_sections=(3, 1, 12))),
       ("split-one", lambda: call_op("split", Z, indices_or_sections=1, axis=1))]
)


CASES = (CASES + EXT_LEGALIZE_CASES + INDEXING_LEGALIZE_CASES + EW_LEGALIZE_CASES
         + COMBINE_LEGALIZE_CASES + MORE_LEGALIZE_CASES + LAYOUT_LEGALIZE_CASES
         + IMAGE_EXT_LEGALIZE_CASES + DEVICE_GRAD_LEGALIZE_CASES + RNN_LEGALIZE_CASES
         + SIGNAL_VISION_LEGALIZE_CASES + ONNX_OPS_LEGALIZE_CASES)
VALUES.update(INDEXING_VALUES)  # in-range indices for the data-indexed operators
VALUES.update(EW_VALUES)  # values in each math function's domain
VALUES.update(COMBINE_VALUES)  # fields of tuple operands
VALUES.update(MORE_VALUES)
VALUES.update(BOOL_VALUES)
VALUES.update(RNN_VALUES)  # lengths within the sequence
VALUES.update(SIGNAL_VISION_VALUES)  # rois, batch indices and boxes that mean something
VALUES.update(ONNX_OPS_VALUES)  # ties in max pooling windows


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_operator_matches_reference(make):
    call = make()
    values = POSITIVE if call.op.name in ("relax.log", "relax.sqrt", "relax.rsqrt") else VALUES
    extra = {a: (np.abs(rand(tuple(d.value for d in a.struct_info.shape), a.struct_info.dtype))
                + np.asarray(1, a.struct_info.dtype))
             for a in call.args if isinstance(a, Var) and a not in values}
    check_call(call, {**values, **extra} if extra else values, rtol=1e-4 if extra else 1e-5,
               atol=1e-5 if extra else 1e-6)


def test_every_compute_operator_is_legalized_and_tested():
    tested = {make().op.name for _, make in CASES}
    compute_ops = {op.name for op in list_ops()
                   if op.category == "compute" and op.reference is not None}
    from phasec.op.legalize import LEGALIZE_RELAX  # lowered to VM builtins, no kernel

    assert compute_ops - set(LEGALIZE) - set(LEGALIZE_RELAX) == set(), \
        "operators without a legalization"
    assert set(LEGALIZE) - tested == set(), "legalizations without a test case"
    assert has_legalization("R.nn.conv2d") and not has_legalization("relax.call_tir")


def test_lowered_call_describes_the_call_tir():
    call = call_op("add", X, Constant(np.array(2.0, "float32")))
    low = lower_call(call)
    assert low.args == (X,)                      # the 0-d constant is folded into the kernel
    assert [p.name for p in low.prim_func.params] == ["x", "T_add"]
    assert low.tir_vars == () and low.out_sinfo is call.struct_info
    tup = tvar("big", (3,))
    low = lower_call(call_op("add", tup, Constant(np.arange(3, dtype="float32"))))
    assert isinstance(low.args[1], Constant) and len(low.prim_func.params) == 3
    split = lower_call(call_op("split", Z, indices_or_sections=2, axis=0))
    assert [p.name for p in split.prim_func.params] == ["z", "T_split0", "T_split1"]
    assert isinstance(split.out_sinfo, TupleStructInfo)


# ---------------------------------------------------------------------------
# symbolic shapes
# ---------------------------------------------------------------------------

N = tir.Var("n")
SYM = [
    ("add-broadcast", lambda: call_op("add", tvar("a", (N, 4)), tvar("bb", (4,)))),
    ("softmax", lambda: call_op("nn.softmax", tvar("a", (N, 8)))),
    ("layer_norm", lambda: call_op("nn.layer_norm", tvar("a", (N, 2, 8)), tvar("ga", (8,)),
                                   tvar("be", (8,)), axes=(-1,))),
    ("matmul", lambda: call_op("matmul", tvar("a", (N, 4)), tvar("w", (4, 3)))),
    ("matmul-reduce-n", lambda: call_op("matmul", tvar("a", (3, N)), tvar("w", (N, 2)))),
    ("sum", lambda: call_op("sum", tvar("a", (N, 4)), axis=(0,))),
    ("mean-all", lambda: call_op("mean", tvar("a", (N, 4)))),
    ("conv2d", lambda: call_op("nn.conv2d", tvar("a", (N, 2, 5, 5)), tvar("w", (3, 2, 3, 3)),
                               padding=1)),
    ("conv2d-nhwc", lambda: call_op("nn.conv2d", tvar("a", (1, N, 5, 2)), tvar("w", (3, 3, 2, 3)),
                                    data_layout="NHWC", kernel_layout="HWIO", padding=1,
                                    strides=2)),
    ("max_pool2d", lambda: call_op("nn.max_pool2d", tvar("a", (1, 2, N, 6)), pool_size=(2, 2),
                                   strides=(2, 2), ceil_mode=True)),
    ("reshape", lambda: call_op("reshape", tvar("a", (N, 4)), (-1, 2))),
    ("permute_dims", lambda: call_op("permute_dims", tvar("a", (N, 3)))),
    ("concat", lambda: call_op("concat", [tvar("a", (N, 3)), tvar("c", (2, 3))], axis=0)),
    ("split", lambda: call_op("split", tvar("a", (N, 3)), indices_or_sections=(1,), axis=0)),
    ("strided_slice", lambda: call_op("strided_slice", tvar("a", (N, 3)), axes=(0,), begin=(1,),
                                      end=(2 ** 31 - 1,))),
    ("take", lambda: call_op("take", tvar("a", (5, 3)), tvar("i", (N,), "int64"), axis=0)),
    ("take-prim-symbolic", lambda: call_op("take", tvar("a", (N, 3)),
                                           PrimValue(tir.BinaryOp("-", N, tir.IntImm(1))), axis=0)),
    ("split-uneven-symbolic", lambda: call_op("split", tvar("a", (N, 3)), indices_or_sections=2)),
    ("broadcast_to", lambda: call_op("broadcast_to", tvar("a", (3,)), ShapeExpr((N, 3)))),
    ("zeros", lambda: call_op("zeros", ShapeExpr((N, 2)), dtype="float32")),
    ("batch_norm", lambda: call_op("nn.batch_norm", tvar("a", (N, 3, 2)),
                                   *[tvar(f"p{k}", (3,)) for k in range(4)], axis=1)),
    ("group_norm", lambda: call_op("nn.group_norm", tvar("a", (2, 4, N)), tvar("g", (4,)),
                                   tvar("b", (4,)), num_groups=2, channel_axis=1, axes=(2,))),
    ("instance_norm", lambda: call_op("nn.instance_norm", tvar("a", (N, 3, 4)), tvar("g", (3,)),
                                      tvar("b", (3,)), channel_axis=1, axes=(2,))),
    ("max_pool1d-ceil-select", lambda: call_op("nn.max_pool1d", tvar("a", (1, 2, N)),
                                               pool_size=2, strides=2, padding=1,
                                               ceil_mode=True)),
    ("avg_pool3d", lambda: call_op("nn.avg_pool3d", tvar("a", (1, 2, N, 3, 3)), pool_size=2,
                                   padding=1)),
    ("adaptive_avg_pool1d", lambda: call_op("nn.adaptive_avg_pool1d", tvar("a", (1, 2, N)),
                                            output_size=3)),
    ("adaptive_avg_pool2d-keep", lambda: call_op("nn.adaptive_avg_pool2d",
                                                 tvar("a", (1, 2, N, 3)))),
    ("conv1d", lambda: call_op("nn.conv1d", tvar("a", (N, 2, 6)), tvar("w", (3, 2, 3)),
                               padding=1)),
    ("conv1d-width", lambda: call_op("nn.conv1d", tvar("a", (1, 2, N)), tvar("w", (3, 2, 2)),
                                     strides=2, padding=(1, 0))),
    ("conv3d", lambda: call_op("nn.conv3d", tvar("a", (1, 2, N, 3, 3)), tvar("w", (2, 2, 2, 2, 2)))),
    ("attention", lambda: call_op("nn.attention", tvar("a", (1, N, 2, 4)), tvar("k", (1, N, 2, 4)),
                                  tvar("v", (1, N, 2, 3)), causal_mask="TopLeft")),
    ("nll_loss", lambda: call_op("nn.nll_loss", tvar("a", (N, 3)), tvar("t", (N,), "int64"),
                                 reduction="sum")),
    ("resize2d", lambda: call_op("image.resize2d", tvar("a", (1, 2, N, 3)), ShapeExpr((4, N)))),
    ("quantize", lambda: call_op("quantize", tvar("a", (N, 3)), tvar("s", (3,)),
                                 tvar("z", (3,), "int32"))),
    ("conv2d_transpose", lambda: call_op("nn.conv2d_transpose", tvar("a", (1, 2, N, 3)),
                                         tvar("w", (2, 3, 3, 2)), strides=2, padding=1,
                                         output_padding=1)),
]


@pytest.mark.parametrize("make", [c[1] for c in SYM], ids=[c[0] for c in SYM])
def test_symbolic_shapes_with_two_sizes(make):
    call = make()
    for size in (2, 5):
        values = {}
        for a in call.args:
            for f in (a.fields if isinstance(a, Tuple) else [a]):
                si = f.struct_info
                if isinstance(f, Var) and isinstance(si, TensorStructInfo):
                    shape = tuple(size if d is N else d.value for d in si.shape)
                    values[f] = (RNG.integers(-5, 5, shape).astype(si.dtype)
                                 if si.dtype == "int64" else rand(shape, si.dtype))
        check_call(call, values, hints=(True,), dims={N: size})


def test_output_dims_are_bound_by_the_output_buffer():
    # as TVM 0.27's LegalizeOps: the output buffer's shape binds n, no scalar
    low = lower_call(call_op("zeros", ShapeExpr((N, 2)), dtype="float32"))
    (out,) = low.prim_func.params
    assert isinstance(out, tir.Buffer) and out.shape[0].name == "n" and out.shape[0] is not N
    assert low.tir_vars == ()
    out_arr = np.ones((5, 2), "float32")
    run_prim_func(low.prim_func, [out_arr])      # n read from the array's shape
    np.testing.assert_array_equal(out_arr, np.zeros((5, 2), "float32"))
    low = lower_call(call_op("add", tvar("a", (N, 4)), tvar("bb", (4,))))
    assert low.tir_vars == ()                    # n is bound by the input buffer


def test_dims_no_buffer_binds_become_scalar_params_before_the_outputs():
    # n appears only as 2 * n: a scalar parameter after the inputs, before the
    # outputs (TVM 0.27's order: call_tir passes it in its argument tuple)
    x = tvar("x", (1,))
    low = lower_call(call_op("broadcast_to", x, ShapeExpr((N * 2,))))
    a, n, out = low.prim_func.params
    assert isinstance(a, tir.Buffer) and isinstance(n, tir.Var) and isinstance(out, tir.Buffer)
    assert n.name == "n" and n is not N and low.tir_vars == (N,)
    out_arr = np.zeros((6,), "float32")
    run_prim_func(low.prim_func, [np.array([2.5], "float32"), 3, out_arr])
    np.testing.assert_array_equal(out_arr, np.full((6,), 2.5, "float32"))


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------

def test_unknown_shape_is_a_clear_error():
    x = Var("x", TensorStructInfo(None, "float32", 2))
    with pytest.raises(LegalizeError, match="known shape"):
        legalize_call(call_op("exp", x))


def test_non_operator_calls_are_rejected():
    x = tvar("x", (2,))
    packed = call_op("call_pure_packed", "my.func", x, sinfo_args=TensorStructInfo((2,), "float32"))
    with pytest.raises(LegalizeError, match="no legalization"):
        legalize_call(packed)
    with pytest.raises(LegalizeError, match="expects a Relax Function"):
        legalize_fused(packed)


