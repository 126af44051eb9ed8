"""Winograd conv2d F(m x m, 3 x 3) (``phasec.op.nn_winograd``): the
transform matrices against the 1-D correlation they stand for; the
kernels' values against numpy's direct convolution (float64) on LLVM and
on the TIR interpreter, for odd, prime and uneven shapes, both tile sizes,
a batch, padding, an epilogue and float64; which calls take it; the weight
transform done once per build for a constant weight (PackConstantWeights,
against ONNX Runtime); and TVM reading the kernels."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from onnx import helper, numpy_helper

import phasec
import phasec.target.tuning as tuning_module
from phasec.backend.llvm import compile_prim_funcs, runtime
from phasec.backend.llvm.loops import LoopEmitter
from phasec.errors import InputError
from phasec.frontend.onnx import from_onnx
from phasec.interp.tir import run_prim_func
from phasec.ir import IRModule, TensorStructInfo, Var, tir
from phasec.ir.node import Node
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.op import call_op
from phasec.op.legalize import lower_fused
from phasec.te.schedules.winograd import WINOGRAD_MARK, transform_weight, winograd_matrices

from helpers.legalize import fused  # a Primitive function built by a BlockBuilder

RNG = np.random.default_rng(2026)
#: the weight's position among the fused functions' parameters, lowered as
#: a constant of the module (PackConstantWeights transforms it once): the
#: rule alone chooses Winograd; a weight passed per call is weighed by the
#: cost of its transform (tests/te/test_winograd_cost.py)
WEIGHT = (1,)


def _conv_ref(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """Direct cross-correlation in float64 (NCHW, OIHW, stride 1)."""
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (top, bottom), (left, right)])
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for r in range(kh):
        for s in range(kw):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + oh, s:s + ow], w[:, :, r, s])
    return out


@pytest.fixture
def winograd_tile(monkeypatch):
    """Set the host tuning's largest Winograd tile (0: off) for one test,
    with 128-bit vectors: 4 tiles are then enough to take it (a small
    image takes it too), and the AVX2/SSE-sized loops are exercised. (The
    largest tile that fills a vector, as on every profile but the Xeon's.)"""
    def use(m: int, vector_bits: int = 128) -> None:
        tuned = replace(tuning_module.host_tuning(), winograd_tile=m, vector_bits=vector_bits,
                        winograd_min_tile_vectors=1)
        monkeypatch.setattr(tuning_module, "host_tuning", lambda: tuned)
    return use


@pytest.mark.parametrize("m", [2, 4])
def test_the_matrices_compute_the_one_dimensional_correlation(m):
    at, g, bt = winograd_matrices(m)
    for _ in range(20):
        d, f = RNG.standard_normal(m + 2), RNG.standard_normal(3)
        want = np.array([d[i:i + 3] @ f for i in range(m)])
        np.testing.assert_allclose(at @ ((g @ f) * (bt @ d)), want, rtol=1e-12, atol=1e-12)


def test_the_weight_transform_is_g_w_gt_per_channel_pair():
    w = RNG.standard_normal((3, 5, 3, 3)).astype(np.float32)
    _, g, _ = winograd_matrices(4)
    u = transform_weight(w, 4)
    assert u.shape == (36, 3, 5) and u.dtype == np.float32
    for k, c in [(0, 0), (2, 4), (1, 3)]:
        np.testing.assert_allclose(u[:, k, c].reshape(6, 6), g @ w[k, c].astype(np.float64) @ g.T,
                                   rtol=1e-6, atol=1e-7)


def _conv_bias_relu(n, c, h, w, o, dtype="float32", residual=False, **attrs):
    d = Var("d", TensorStructInfo((n, c, h, w), dtype))
    wt = Var("w", TensorStructInfo((o, c, 3, 3), dtype))
    b = Var("b", TensorStructInfo((1, o, 1, 1), dtype))
    params = [d, wt, b]

    def build(bb):
        y = bb.emit(call_op("add", bb.emit(call_op("nn.conv2d", d, wt, **attrs)), b))
        if residual:
            y = bb.emit(call_op("add", y, d))
        return call_op("nn.relu", y)
    return fused(params, build)


def _tile(func: tir.PrimFunc) -> int | None:
    """The m of the kernel's weight transform mark (None: no Winograd)."""
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.AttrStmt) and s.key == WINOGRAD_MARK:
            return s.value.value
        stack.extend(tir.stmt_children(s))
    return None


CASES = {  # n, c, h, w, o, padding, largest m, vector bits, m taken
    "56x56_512bit": (1, 32, 56, 56, 32, 1, 4, 512, 4),
    "odd_prime": (1, 37, 13, 11, 41, 1, 4, 128, 4),
    "batch_3": (3, 32, 9, 10, 33, 1, 4, 128, 4),
    "uneven_padding": (1, 32, 7, 12, 32, (1, 0, 2, 1), 4, 128, 4),
    "no_padding": (2, 32, 5, 9, 35, 0, 4, 128, 4),
    "wide": (1, 32, 4, 70, 32, 1, 4, 128, 4),
    "odd_prime_m2": (1, 37, 13, 11, 41, 1, 2, 128, 2),
    "batch_2_m2": (2, 32, 6, 17, 32, (0, 2, 1, 0), 2, 128, 2),
    # 7x7 at 512 bits: 4 tiles of 4x4 are not a vector, 16 of 2x2 are
    "7x7_takes_2x2_tiles": (1, 32, 7, 7, 32, 1, 4, 512, 2),
    # few channels (Winograd's least), small enough for the TIR interpreter too
    "small_m4": (1, 8, 7, 9, 9, 1, 4, 128, 4),
    "small_uneven_padding": (1, 9, 7, 12, 8, (1, 0, 2, 1), 4, 128, 4),
    "small_batch_2_m2": (2, 8, 6, 7, 9, (0, 2, 1, 0), 2, 128, 2),
    "small_7x7_takes_2x2_tiles": (1, 8, 7, 7, 8, 1, 4, 512, 2),
}
#: the cases also run on the TIR interpreter (numpy checks every case; the
#: interpreter took 10-15 s on a 32-channel one)
INTERPRETED = 1000  # input elements


@pytest.mark.parametrize("name", list(CASES))
def test_winograd_conv_matches_the_direct_convolution(name, winograd_tile):
    n, c, h, w, o, pad, m, bits, taken = CASES[name]
    winograd_tile(m, bits)
    pads = (pad,) * 4 if isinstance(pad, int) else pad
    func = _conv_bias_relu(n, c, h, w, o, padding=pad)
    low = lower_fused(func, constant_params=WEIGHT)
    assert _tile(low.prim_func) == taken
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
    want = np.maximum(_conv_ref(x, wa, pads) + ba, 0)
    got = np.full(want.shape, np.nan, np.float32)
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, ba, got)
    # float32 rounding of the transforms: a few ulps of the largest output
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    if n * c * h * w <= INTERPRETED:
        interp = np.full(want.shape, np.nan, np.float32)
        run_prim_func(low.prim_func, [x, wa, ba, interp])
        np.testing.assert_allclose(interp, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_float64_and_a_residual_epilogue(winograd_tile):
    winograd_tile(4)
    n, c, h, w = 1, 32, 10, 10
    low = lower_fused(_conv_bias_relu(n, c, h, w, c, "float64", residual=True, padding=1),
                      constant_params=WEIGHT)
    assert _tile(low.prim_func) == 4
    x = RNG.standard_normal((n, c, h, w))
    wa = RNG.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)
    ba = RNG.standard_normal((1, c, 1, 1))
    want = np.maximum(_conv_ref(x, wa, (1, 1, 1, 1)) + ba + x, 0)
    got = np.zeros(want.shape)
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs,c,tile", [
    ({"padding": 1}, 4, 4),                        # too few channels (below 8)
    ({"padding": 1, "strides": 2}, 32, 4),         # strided
    ({"padding": 2, "dilation": 2}, 32, 4),        # dilated
    ({"padding": 1, "groups": 2}, 32, 4),          # grouped
    ({"padding": 1}, 32, 0),                       # turned off (PHASEC_WINOGRAD=0)
])
def test_other_convolutions_keep_the_direct_schedule(attrs, c, tile, winograd_tile):
    winograd_tile(tile)
    d = Var("d", TensorStructInfo((1, c, 12, 12), "float32"))
    wt = Var("w", TensorStructInfo((32, c // attrs.get("groups", 1), 3, 3), "float32"))
    low = lower_fused(fused([d, wt], lambda bb: call_op("nn.conv2d", d, wt, **attrs)),
                      constant_params=WEIGHT)
    assert None is _tile(low.prim_func)


def test_a_symbolic_batch_takes_one_gemm_per_image(winograd_tile):
    winograd_tile(4)
    c, h, w, o = 33, 9, 10, 35
    func = _conv_bias_relu(tir.Var("n", "int64"), c, h, w, o, padding=1)
    low = lower_fused(func, constant_params=WEIGHT)
    assert _tile(low.prim_func) == 4
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
    for n in (1, 3, 0, 2):
        x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
        want = np.maximum(_conv_ref(x, wa, (1, 1, 1, 1)) + ba, 0)
        got = np.full(want.shape, np.nan, np.float32)
        kernel(x, wa, ba, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(initial=1))
    # the same schedule with fewer channels on the interpreter, one image (at
    # 33 -> 35 channels it took 30 s there)
    c, o = 8, 9
    small = lower_fused(_conv_bias_relu(tir.Var("n", "int64"), c, h, w, o, padding=1),
                        constant_params=WEIGHT).prim_func
    assert _tile(small) == 4
    x = RNG.standard_normal((1, c, h, w)).astype(np.float32)
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
    interp = np.full((1, o, h, w), np.nan, np.float32)
    run_prim_func(small, [x, wa, ba, interp])
    np.testing.assert_allclose(interp, np.maximum(_conv_ref(x, wa, (1, 1, 1, 1)) + ba, 0),
                               rtol=1e-5, atol=1e-5 * np.abs(interp).max())


def test_a_tiny_image_or_a_5x5_kernel_keeps_the_direct_schedule(winograd_tile):
    winograd_tile(4)
    wt = Var("w", TensorStructInfo((32, 32, 3, 3), "float32"))
    # a 2x2 output: one tile of 4x4 or of 2x2 (at 128 bits, four needed)
    d3 = Var("d", TensorStructInfo((1, 32, 2, 2), "float32"))
    assert None is _tile(lower_fused(fused([d3, wt], lambda bb: call_op(
        "nn.conv2d", d3, wt, padding=1)), constant_params=WEIGHT).prim_func)
    d5 = Var("d", TensorStructInfo((1, 32, 12, 12), "float32"))
    w5 = Var("w", TensorStructInfo((32, 32, 5, 5), "float32"))
    assert None is _tile(lower_fused(fused([d5, w5], lambda bb: call_op(
        "nn.conv2d", d5, w5, padding=2)), constant_params=WEIGHT).prim_func)


def test_the_environment_variable_chooses_the_tile(monkeypatch):
    tuning_module.host_tuning.cache_clear()
    try:
        for value, tile in (("0", 0), ("2", 2), ("4", 4), ("", 4)):
            monkeypatch.setenv("PHASEC_WINOGRAD", value)
            tuning_module.host_tuning.cache_clear()
            assert tuning_module.host_tuning().winograd_tile == tile
        for bad in ("3", "no"):  # refused, naming the variable, not silently the default
            monkeypatch.setenv("PHASEC_WINOGRAD", bad)
            tuning_module.host_tuning.cache_clear()
            with pytest.raises(InputError, match=f"PHASEC_WINOGRAD.*{bad!r}"):
                tuning_module.host_tuning()
    finally:
        monkeypatch.delenv("PHASEC_WINOGRAD")
        tuning_module.host_tuning.cache_clear()


def _resnet_block_onnx(c: int, hw: int) -> tuple[onnx.ModelProto, np.ndarray]:
    """relu(conv(relu(conv(x))) + x), 3x3 padding 1, with bias: weights as initializers."""
    inits, nodes = [], []
    for i in range(2):
        inits.append(numpy_helper.from_array(
            (RNG.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(
            (RNG.standard_normal(c) * 0.1).astype(np.float32), f"b{i}"))
    nodes.append(helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c0"], ["r0"]))
    nodes.append(helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Add", ["c1", "x"], ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    shape = [1, c, hw, hw]
    graph = helper.make_graph(nodes, "block",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, RNG.standard_normal(shape).astype(np.float32)


def test_a_constant_weight_is_transformed_once_per_build(winograd_tile):
    winograd_tile(4)
    model, x = _resnet_block_onnx(32, 20)
    exe = phasec.build(from_onnx(model))
    convs = [f for n, f in exe.prim_funcs.items() if "conv2d" in n]
    assert len(convs) == 2
    for f in convs:  # the transformed weight is a parameter; no transform per call
        assert None is _tile(f)
        assert any(isinstance(p, tir.Buffer) and p.name.endswith("_winograd")
                   and [int(d.value) for d in p.shape] == [36, 32, 32] for p in f.params)
    got = np.asarray(phasec.VirtualMachine(exe)["main"](x))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_tvm_reads_a_winograd_kernel(winograd_tile):
    winograd_tile(4)
    low = lower_fused(_conv_bias_relu(1, 32, 8, 8, 32, padding=1), constant_params=WEIGHT)
    text = IRModule({"k": low.prim_func}).script()
    parsed = tvm.script.from_source(text)
    assert "k" in [g.name_hint for g in parsed.get_global_vars()]


def _floor_divisions(func: tir.PrimFunc) -> int:
    """The ``//`` and ``%`` nodes of ``func`` (every occurrence in the tree)."""
    count, stack = 0, [func.body]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple):
            stack.extend(x)
        elif isinstance(x, Node):
            count += type(x) is tir.BinaryOp and x.op in ("//", "%")
            stack.extend(getattr(x, f) for f in type(x)._fields)
    return count


class _InlineLets(StmtExprMutator):
    """The form the transforms had before they bound the image and channel
    of a parallel iteration: each let of ``names`` substituted into its body."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def visit_let_stmt_(self, s: tir.LetStmt) -> tir.Stmt:
        if s.var.name not in self.names:
            return s
        return _Substitute({id(s.var): s.value}).visit(s.body)


class _Substitute(StmtExprMutator):
    def __init__(self, values: dict[int, tir.PrimExpr]) -> None:
        self.values = values

    def visit_var_(self, v: tir.Var) -> tir.PrimExpr:
        return self.values.get(id(v), v)


def _functions(ir: str) -> dict[str, str]:
    """Each function of optimized LLVM IR, its values and blocks renamed in
    order of appearance and metadata numbers left out (names follow the
    emitter's counter, which fewer emitted instructions shift)."""
    out = {}
    for m in re.finditer(r'^define [^\n]*?@"?([\w.$]+)"?\(.*?^}', ir, re.M | re.S):
        names: dict[str, str] = {}
        body = re.sub(r"!\d+", "!", re.sub(r"[ \t]*(;.*)?$", "", m.group(0), flags=re.M))
        body = re.sub(r'%"[^"]*"|%[\w.$-]+|^[\w.$-]+(?=:)',
                      lambda t: names.setdefault(t.group(0), f"v{len(names)}"), body, flags=re.M)
        out[m.group(1)] = body
    return out


def test_the_transforms_bind_each_iterations_image_and_channel_once(winograd_tile):
    # (compile time: the output transform of a 55x55 image wrote a floor
    # division into each of its 92 accesses, half of the kernel's LLVM IR,
    # which LLVM merged again: the machine code is the one of the old form)
    winograd_tile(4, 512)
    low = lower_fused(_conv_bias_relu(1, 32, 56, 56, 32, padding=1), constant_params=WEIGHT)
    assert _tile(low.prim_func) == 4
    old = _InlineLets(("n", "c", "k")).visit(low.prim_func)
    assert _floor_divisions(low.prim_func) <= 8 < 40 < _floor_divisions(old)
    new_ir = compile_prim_funcs({"k": low.prim_func}, use_cache=False).optimized_ir
    old_ir = compile_prim_funcs({"k": old}, use_cache=False).optimized_ir
    assert len(_functions(new_ir)) >= 4 and _functions(new_ir) == _functions(old_ir)


def _last_dim(func: tir.PrimFunc, name: str) -> int | None:
    """The static last dimension of the kernel's intermediate buffer ``name``
    (None: no such buffer)."""
    found = re.search(rf"\b{name} = T\.sblock_alloc_buffer\(\((.*?)\), \"", IRModule(
        {"k": func}).script())
    return None if found is None else int(re.findall(r"T\.int64\((\d+)\)", found.group(1))[-1])


@pytest.mark.parametrize("n", [1, 2, "symbolic"])
def test_the_epilogue_is_applied_in_the_output_transform(n, winograd_tile):
    # (stored through: no output-sized intermediate, no nest of its own for
    # the bias and activation; values against numpy and the interpreter)
    winograd_tile(4)
    c, h, w, o = 8, 7, 9, 11
    func = _conv_bias_relu(tir.Var("n", "int64") if n == "symbolic" else n, c, h, w, o,
                           padding=1)
    prim = lower_fused(func, constant_params=WEIGHT).prim_func
    assert _tile(prim) == 4
    script = IRModule({"k": prim}).script()
    assert "T_conv2d_winograd" not in script and "T_winograd_gemm" in script
    images = 2 if n == "symbolic" else n
    x = RNG.standard_normal((images, c, h, w)).astype(np.float32)
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
    want = np.maximum(_conv_ref(x, wa, (1, 1, 1, 1)) + ba, 0)
    for run in (lambda out: compile_prim_funcs({"k": prim})["k"](x, wa, ba, out),
                lambda out: run_prim_func(prim, [x, wa, ba, out])):
        got = np.full(want.shape, np.nan, np.float32)
        run(got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# n, c, h, w, o, vector bits, m, the GEMM's columns per image (written + zeros)
ROUNDED = {
    # 6 x 6 tiles of 2x2: 36 + 2 written, 40 with two zero columns (4 lanes)
    "11x11_m2": (1, 8, 11, 11, 9, 128, 2, 40),
    "batch_2": (2, 8, 11, 11, 9, 128, 2, 40),
    "symbolic_batch": (None, 8, 11, 11, 9, 128, 2, 40),
    # ResNet's and Inception's 56x56: 14 x 14 tiles of 4x4, 196 + 2 -> 208 (16 lanes)
    "56x56_m4": (1, 8, 56, 56, 8, 512, 4, 208),
    # 7 x 7 tiles: 49 + 1 written; 64 would add 14, more than an eighth
    "28x28_kept": (1, 8, 28, 28, 8, 512, 4, 50),
    # 3 x 3 tiles of 4x4: 9 + 1 written; 12 would add 2, more than an eighth
    "9x10_kept": (1, 9, 9, 10, 9, 128, 4, 10),
}


@pytest.mark.parametrize("name", list(ROUNDED))
def test_the_gemm_columns_of_an_image_are_rounded_up_to_whole_vectors(name, winograd_tile):
    n, c, h, w, o, bits, m, stride = ROUNDED[name]
    winograd_tile(m, bits)
    prim = lower_fused(_conv_bias_relu(tir.Var("n", "int64") if n is None else n, c, h, w, o,
                                       padding=1), constant_params=WEIGHT).prim_func
    assert _tile(prim) == m
    assert _last_dim(prim, "T_winograd_input") == (stride if n is None else n * stride)
    images = 3 if n is None else n
    x = RNG.standard_normal((images, c, h, w)).astype(np.float32)
    wa = (RNG.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(np.float32)
    want = np.maximum(_conv_ref(x, wa, (1, 1, 1, 1)) + ba, 0)
    got = np.full(want.shape, np.nan, np.float32)
    compile_prim_funcs({"k": prim})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    if images * c * h * w <= 2 * INTERPRETED:
        interp = np.full(want.shape, np.nan, np.float32)
        run_prim_func(prim, [x, wa, ba, interp])
        np.testing.assert_allclose(interp, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_the_transforms_sums_start_from_a_positive_term(winograd_tile):
    # (a sum starting ``0 - x`` is one subtraction more; only G's all-negative
    # rows, in the weight transform, need one)
    winograd_tile(4)
    prim = lower_fused(_conv_bias_relu(1, 8, 12, 12, 8, padding=1),
                       constant_params=WEIGHT).prim_func
    assert _tile(prim) == 4
    stores = [line for line in IRModule({"k": prim}).script().splitlines()
              if re.match(r"\s*(wino_t|wino_o1|wino_r|T_winograd_input)\[", line)]
    assert len(stores) > 12
    assert not [line for line in stores if "T.float32(0.0) -" in line]


@pytest.mark.parametrize("name", ["odd_prime", "odd_prime_m2", "56x56_512bit", "batch_3"])
def test_the_input_rows_and_the_output_rows_stay_loops(name, winograd_tile, monkeypatch):
    # the a input rows of a row of tiles (copied, padded, de-interleaved)
    # and the m output rows (gathered from the transform's phases) each in
    # one loop LLVM does not unroll (unrolled, their loops were vectorized a
    # or m times over: a quarter to a third of the kernel's LLVM time, no
    # run time), and so is the row transform's loop over the m phases when
    # a de-interleaved row is several vectors; the values of every case are
    # test_winograd_conv_matches_the_direct_convolution's
    n, c, h, w, o, pad, m, bits, taken = CASES[name]
    winograd_tile(m, bits)
    low = lower_fused(_conv_bias_relu(n, c, h, w, o, padding=pad), constant_params=WEIGHT)
    kept, stack, row_length = [], [low.prim_func.body], None
    while stack:
        s = stack.pop()
        if isinstance(s, tir.AttrStmt) and s.key == tir.KEEP_LOOP_ATTR:
            kept.append(s)
        if isinstance(s, tir.Allocate) and s.buffer.name == "wino_rows":
            row_length = s.buffer.shape[-1].value
        stack.extend(tir.stmt_children(s))
    loops = {frozenset(b.name for b in _stored(s.body)): s for s in kept}
    several = row_length > bits // 32
    assert name != "56x56_512bit" or several  # (rows of 32: the case of SqueezeNet's 55x55)
    assert set(loops) == {frozenset({"wino_pad", "wino_rows"}), frozenset({"T_relu"}),
                          *([frozenset({"wino_t"})] if several else [])}
    for names, mark in loops.items():
        rows = taken + 2 if "wino_pad" in names else taken
        assert mark.value.value == 1
        assert mark.body.kind == "serial" and mark.body.extent.value == rows
    # both reach LLVM as loops it may not unroll (two more than without the marks)
    kept_ir = compile_prim_funcs({"k": low.prim_func}).llvm_ir
    # (compiled again with the marks ignored: not from the caches, keyed by
    # the TIR, nor into them)
    runtime.clear_cache()
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "0")
    monkeypatch.setattr(LoopEmitter, "keep", lambda self, loop, copies=1: None)
    plain_ir = compile_prim_funcs({"k": low.prim_func}).llvm_ir
    runtime.clear_cache()
    assert _unroll_disabled(kept_ir) == _unroll_disabled(plain_ir) + len(loops)


def _unroll_disabled(ir: str) -> int:
    """The loops of ``ir`` whose metadata turns unrolling off."""
    props = re.findall(r'^(![0-9]+) = !\{!"llvm.loop.unroll.disable"\}$', ir, re.M)
    if not props:
        return 0
    return len(re.findall(r"^![0-9]+ = distinct !\{.*" + props[0] + r"\b", ir, re.M))


def _stored(s: tir.Stmt) -> list[tir.Buffer]:
    """The buffers ``s`` stores to, at any depth."""
    out, stack = [], [s]
    while stack:
        x = stack.pop()
        if isinstance(x, tir.BufferStore):
            out.append(x.buffer)
        stack.extend(tir.stmt_children(x))
    return out
