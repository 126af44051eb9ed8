"""The blocked, packed GEMM schedule (phasec.te.schedules.gemm) and the
convolutions that take it: compiled with LLVM and checked against numpy on
odd, prime, symbolic and empty shapes; its structure per shape and tuning."""

import dataclasses

import numpy as np
import pytest

from phasec import te
from phasec.errors import InputError
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

from helpers.te_checks import PACK_ALWAYS, relu, run, walk


# ---------------------------------------------------------------------------
# the blocked, packed GEMM schedule (compiled with LLVM, checked against numpy)
# ---------------------------------------------------------------------------

def _gemm(M, K, N, *, epilogue="bias_relu", transposed=False, batch=None, dtype="float32"):
    """A tagged matmul (as legalize builds it) with an epilogue; returns the
    tensors and a numpy function computing the same in float64."""
    lead = () if batch is None else (batch,)
    X = te.placeholder(lead + (M, K), dtype, "X")
    W = te.placeholder(lead + ((N, K) if transposed else (K, N)), dtype, "W")
    bias = te.placeholder((N,), dtype, "bias")
    R = te.placeholder(lead + (M, N), dtype, "R")
    k = te.reduce_axis(K, "k")

    def mm_body(*idx):
        b, (i, j) = idx[:-2], idx[-2:]
        w = W[b + (j, k)] if transposed else W[b + (k, j)]
        return te.sum(X[b + (i, k)] * w, axis=[k])
    mm = te.compute(lead + (M, N), mm_body, name="mm", tag="matmul")
    one = T.FloatImm(1.0, dtype)
    half = T.FloatImm(0.5, dtype)

    def gelu(v):
        inner = T.BinaryOp("*", T.FloatImm(0.7978845608, dtype),
                           v + T.FloatImm(0.044715, dtype) * v * v * v)
        return half * v * (one + te.call("tanh", inner))
    if epilogue == "none":
        out, ins = mm, [X, W]
    elif epilogue == "bias_relu":
        out = te.compute(mm.shape, lambda *i: T.BinaryOp("max", mm[i] + bias[i[-1]],
                                                          T.FloatImm(0.0, dtype)), name="out")
        ins = [X, W, bias]
    else:  # gelu(mm + bias) + residual
        out = te.compute(mm.shape, lambda *i: gelu(mm[i] + bias[i[-1]]) + R[i], name="out")
        ins = [X, W, bias, R]

    def reference(x, w, b=None, r=None):
        w = np.swapaxes(w, -1, -2) if transposed else w
        y = x.astype("float64") @ w.astype("float64")
        if epilogue == "bias_relu":
            y = np.maximum(y + b, 0)
        elif epilogue == "gelu_res":
            z = y + b
            y = 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3))) + r
        return y
    return ins, out, reference


def _check_gemm(funcs, cases):
    from phasec.backend.llvm import compile_prim_funcs
    lib = compile_prim_funcs(funcs)
    for name, arrays, out_shape, dtype, reference in cases:
        got = np.zeros(out_shape, dtype)
        lib[name](*arrays, got)
        want = reference(*arrays)
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(initial=1.0),
                                   err_msg=name)


def _operands(ins, M, K, N, dtype="float32", batch=None):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    arrays = []
    for t in ins:
        shape = tuple(int(d.value) if isinstance(d, T.IntImm) else {"n": M}.get(d.name, M)
                      for d in t.shape)
        arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


GEMM_SHAPES = [(1, 7, 13), (7, 13, 1), (13, 97, 7), (97, 13, 257), (257, 7, 97), (2, 257, 33),
               (9, 3, 40), (17, 64, 96), (64, 300, 739), (1, 9, 4100), (2, 5, 2053),
               # matrix-vector products whose K takes the 4-row unrolled update
               (1, 64, 13), (2, 124, 37), (1, 8, 4100)]


@pytest.mark.parametrize("tuning_name", ["host", "host packing", "avx2", "generic"])
def test_gemm_schedule_matches_numpy_on_odd_and_prime_shapes(tuning_name):
    from phasec.target import tuning as tn
    tuning = {"host": tn.host_tuning(), "host packing": PACK_ALWAYS,
              "avx2": dataclasses.replace(tn.avx2_tuning(), gemm_pack_min_bytes=0),
              "generic": tn.generic_tuning()}[tuning_name]
    opts = te.ScheduleOptions(tuning=tuning)
    shapes = GEMM_SHAPES if tuning_name.startswith("host") else GEMM_SHAPES[2:6]
    funcs, cases = {}, []
    for n, (M, K, N) in enumerate(shapes):
        for epilogue in ("none", "bias_relu", "gelu_res"):
            ins, out, ref = _gemm(M, K, N, epilogue=epilogue)
            name = f"g{n}_{epilogue}"
            funcs[name] = te.create_prim_func(ins + [out], schedule_hints=opts)
            cases.append((name, _operands(ins, M, K, N), (M, N), "float32", ref))
    _check_gemm(funcs, cases)


def test_gemm_schedule_structure_per_shape():
    from phasec.target import tuning as tn
    tuning = host_tuning()
    if tuning.name == "avx512_xeon":  # (its 6 x 4 tiles: test_tuning_profiles.py)
        tuning = tn.avx512_tuning()
    mr, nr = tuning.gemm_rows, tuning.gemm_cols(32)
    # enough rows: W packed, full tiles, plus remainder rows and columns
    ins, out, _ = _gemm(3 * mr + 1, 40, 2 * nr + 3)
    func = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(
        tuning=dataclasses.replace(tuning, gemm_pack_min_bytes=0)))
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    packs = [b for b in names if b.name.startswith("mm_bpack")]
    accs = sorted(tuple(int(d.value) for d in b.shape) for b in names
                  if b.name.startswith("mm_acc"))
    assert len(packs) == 1 and tuple(int(d.value) for d in packs[0].shape)[1:] == (40, nr)
    # full tiles, balanced so that no last tile has under half the rows (a
    # tile of one row would wait on the multiply-add's latency): 25 rows are
    # 3 x 7 + 4 (AVX-512), 13 are 3 x 4 + 1 (AVX2: no 3 or 2 leaves 2 or
    # more); the 3 remainder columns join the last micro-panel in one tile
    # of nr + 3 columns and half the rows (its accumulators stay within the
    # full tile's), then the last row
    M = 3 * mr + 1
    full = {8: [(7, nr), (4, nr)], 4: [(4, nr), (1, nr)]}[mr]
    assert accs == sorted(full + [(mr // 2, nr + 3), (M % (mr // 2), nr + 3)])
    # a matrix-vector product: no packing, one wide accumulator row
    ins, out, _ = _gemm(1, 64, 1000)
    func = te.create_prim_func(ins + [out])
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    assert not [b for b in names if b.name.startswith("mm_bpack")]
    assert {int(b.shape[1].value) for b in names} == {min(1000, tuning.gemv_acc_bytes // 4)}
    # rows longer than the accumulator budget: strips of it, then the rest
    cols = tuning.gemv_acc_bytes // 4
    ins, out, _ = _gemm(1, 8, cols + 5)
    func = te.create_prim_func(ins + [out])
    names = [s.buffer for s in walk(func.body) if isinstance(s, T.Allocate)]
    assert sorted(int(b.shape[1].value) for b in names) == [5, cols]


def test_gemm_schedule_symbolic_rows_batch_transposed_and_float64():
    n = T.Var("n")
    funcs, cases = {}, []
    ins, out, ref = _gemm(n, 24, 70, epilogue="gelu_res")
    funcs["sym"] = te.create_prim_func(ins + [out])
    funcs["sym_packed"] = te.create_prim_func(
        ins + [out], schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
    ins_b, out_b, ref_b = _gemm(13, 7, 33, epilogue="bias_relu", batch=3)
    funcs["batch"] = te.create_prim_func(ins_b + [out_b])
    ins_t, out_t, ref_t = _gemm(19, 31, 45, epilogue="bias_relu", transposed=True)
    funcs["transposed"] = te.create_prim_func(ins_t + [out_t])
    ins_d, out_d, ref_d = _gemm(11, 29, 37, epilogue="gelu_res", dtype="float64")
    funcs["f64"] = te.create_prim_func(ins_d + [out_d])
    for rows in (1, 2, 7, 8, 9, 97):
        for name in ("sym", "sym_packed"):
            cases.append((name, _operands(ins, rows, 24, 70), (rows, 70), "float32", ref))
    arrays = _operands(ins_b, 13, 7, 33)
    cases.append(("batch", arrays, (3, 13, 33), "float32", ref_b))
    cases.append(("transposed", _operands(ins_t, 19, 31, 45), (19, 45), "float32", ref_t))
    cases.append(("f64", _operands(ins_d, 11, 29, 37, "float64"), (11, 37), "float64", ref_d))
    _check_gemm(funcs, cases)
    # the interpreter (the reference semantics of TIR) agrees on the symbolic kernel
    x = _operands(ins, 9, 24, 70)
    got = run(funcs["sym"], *x, np.zeros((9, 70), "float32"))
    np.testing.assert_allclose(got, ref(*x), rtol=1e-4, atol=1e-4)


def _conv_nchw(n, c, h, w, o, kh, kw, groups=1):
    """conv2d (NCHW/OIHW, stride 1, no padding) + bias + relu as legalize builds it."""
    X = te.placeholder((n, c, h, w), "float32", "X")
    cg = c // groups
    W = te.placeholder((o, cg, kh, kw), "float32", "W")
    bias = te.placeholder((o,), "float32", "bias")
    rc, ry, rx = te.reduce_axis(cg, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    og = o // groups

    def body(b, oc, y, x):
        ch = rc.var if groups == 1 else (oc // og) * cg + rc.var
        return te.sum(X[b, ch, y + ry.var, x + rx.var] * W[oc, rc.var, ry.var, rx.var],
                      axis=[rc, ry, rx])
    conv = te.compute((n, o, h - kh + 1, w - kw + 1), body, name="conv", tag="conv2d")
    out = te.compute(conv.shape, lambda b, oc, y, x: relu(conv[b, oc, y, x] + bias[oc]),
                     name="out")
    return [X, W, bias], out


def _conv_reference(x, w, b, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for oc in range(o):
        g = oc // og
        for dy in range(kh):
            for dx in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, dy:dy + out.shape[2], dx:dx + out.shape[3]]
                out[:, oc] += np.einsum("nchw,c->nhw", patch.astype("float64"), w[oc, :, dy, dx])
    return np.maximum(out + b[None, :, None, None], 0)


def test_conv2d_takes_the_gemm_schedule_and_grouped_conv_keeps_its_own():
    rng = np.random.default_rng(3)
    funcs, cases = {}, []
    for name, (n, c, h, w, o, kh, kw, groups) in {
            "conv": (2, 5, 11, 70, 19, 3, 3, 1), "conv1x1": (1, 7, 4, 77, 33, 1, 1, 1),
            "grouped": (1, 6, 9, 10, 9, 3, 2, 3), "depthwise": (1, 8, 7, 40, 8, 3, 3, 8)}.items():
        ins, out = _conv_nchw(n, c, h, w, o, kh, kw, groups)
        func = te.create_prim_func(ins + [out],
                                   schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
        packed = [s for s in walk(func.body) if isinstance(s, T.Allocate)
                  and s.buffer.name.startswith("conv_bpack")]
        accs = [s for s in walk(func.body) if isinstance(s, T.Allocate)
                and s.buffer.name.startswith("conv_acc")]
        if groups == 1:   # output channels x positions register tiles
            rows = max(host_tuning().gemm_rows, host_tuning().gemm_narrow_rows)
            assert accs and all(1 <= int(a.buffer.shape[0].value) <= rows for a in accs)
            assert packed or o < 2 * host_tuning().gemm_rows
        else:             # the input channel depends on the output channel: no GEMM split
            assert not packed
        funcs[name] = func
        arrays = [rng.standard_normal((n, c, h, w)).astype("float32"),
                  rng.standard_normal((o, c // groups, kh, kw)).astype("float32"),
                  rng.standard_normal(o).astype("float32")]
        cases.append((name, arrays, (n, o, h - kh + 1, w - kw + 1), "float32",
                      lambda x, wt, b, g=groups: _conv_reference(x, wt, b, g)))
    _check_gemm(funcs, cases)


def test_a_window_sliding_along_one_row_is_read_in_place_not_packed():
    """1 x K (a 1-D convolution's row form): every tap reads the same input
    rows shifted, so B is not packed even where the tuning packs any size
    (a K x K window still is, test above); the values against numpy."""
    rng = np.random.default_rng(5)
    funcs, cases = {}, []
    for name, (n, c, h, w, o, kh, kw) in {
            "row9": (1, 5, 1, 131, 19, 1, 9), "rows2_k5": (2, 3, 2, 67, 17, 1, 5)}.items():
        ins, out = _conv_nchw(n, c, h, w, o, kh, kw)
        func = te.create_prim_func(ins + [out],
                                   schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
        assert not [s for s in walk(func.body) if isinstance(s, T.Allocate)
                    and s.buffer.name.startswith("conv_bpack")]
        assert [s for s in walk(func.body) if isinstance(s, T.Allocate)
                and s.buffer.name.startswith("conv_acc")]
        funcs[name] = func
        arrays = [rng.standard_normal((n, c, h, w)).astype("float32"),
                  rng.standard_normal((o, c, kh, kw)).astype("float32"),
                  rng.standard_normal(o).astype("float32")]
        cases.append((name, arrays, (n, o, h - kh + 1, w - kw + 1), "float32",
                      lambda x, wt, b: _conv_reference(x, wt, b, 1)))
    _check_gemm(funcs, cases)


def _acc_shapes(func, prefix="conv_acc"):
    return sorted({tuple(int(d.value) for d in s.buffer.shape) for s in walk(func.body)
                   if isinstance(s, T.Allocate) and s.buffer.name.startswith(prefix)})


@pytest.mark.parametrize("tuning_name", ["avx512", "avx2"])
def test_conv2d_gemm_tiles_on_odd_prime_and_wide_tail_widths(tuning_name):
    """Output widths that are no multiple of the register tile: the columns
    left over become vectors of powers of two plus 1-3 columns (7, 13, 29,
    61), joined with the last micro-panel into one wider tile of fewer rows
    when that stays within four registers a row (56 = 32 + 24 -> one 56-wide
    tile); a symbolic height is a batch loop. Checked against numpy."""
    from phasec.target import tuning as tn
    tuning = {"avx512": tn.avx512_tuning(), "avx2": tn.avx2_tuning()}[tuning_name]
    opts = te.ScheduleOptions(tuning=tuning)
    lanes, mr, nr = tuning.lanes(32), tuning.gemm_rows, tuning.gemm_cols(32)
    rng = np.random.default_rng(5)
    funcs, cases = {}, []
    h = T.Var("h")
    for name, (c, height, width, o, k) in {
            "w7": (3, 6, 9, 19, 3), "w13": (4, 5, 15, 9, 3), "w28": (5, 4, 30, 16, 3),
            "w29": (2, 4, 31, 11, 3), "w56": (3, 3, 58, 17, 3), "w61": (2, 3, 63, 8, 3),
            "w37_1x1": (5, 2, 37, 13, 1), "sym_h": (3, h, 58, 10, 3)}.items():
        ins, out = _conv_nchw(1, c, height, width, o, k, k)
        funcs[name] = te.create_prim_func(ins + [out], schedule_hints=opts)
        for hh in ((5, 3) if name == "sym_h" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, width)).astype("float32"),
                      rng.standard_normal((o, c, k, k)).astype("float32"),
                      rng.standard_normal(o).astype("float32")]
            cases.append((name, arrays, (1, o, hh - k + 1, width - k + 1), "float32",
                          lambda x, wt, b: _conv_reference(x, wt, b, 1)))
    _check_gemm(funcs, cases)
    # the TIR interpreter (the reference semantics of the kernels) agrees
    for name, arrays, out_shape, _, reference in cases:
        if name in ("w7", "w13", "w56", "sym_h"):
            got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
            np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4,
                                       err_msg=name)
    # 56 columns: the 24 (avx512; 8 on avx2) past the last whole micro-panel
    # are no whole vectors, and 56 columns are four registers a row on avx512
    # (3 x 16 + 8): one tile of all 56 columns, half the rows, balanced (17
    # rows: 5 x 3 + 2, not 4 x 4 + 1)
    accs = _acc_shapes(funcs["w56"])
    if tuning_name == "avx512":
        assert accs == [(2, 56), (3, 56)]
        # 61 = 3 x 16 + 8 + 4 + 1: five registers a row, too many to join:
        # a 32-column micro-panel, then 29 = 16 + 8 + 4 + 1 in four rows
        assert _acc_shapes(funcs["w61"]) == sorted([(mr, nr), (mr // 2, 29)])
    else:  # avx2: 56 = 3 micro-panels of 16, then 8 = a whole vector; 17
        # rows balanced as 5 x 3 + 2
        assert accs == [(2, 8), (2, nr), (3, 8), (3, nr)]
    assert all(w % lanes == 0 or w > lanes for _, w in _acc_shapes(funcs["w28"]))


def test_grouped_conv2d_takes_the_gemm_when_groups_hold_whole_row_tiles(monkeypatch):
    """A grouped convolution reads its input channel as (oc // og) * cg + rc:
    every register tile's output channels are in one group (tiles of the
    plan's rows, at most og, then each group's last rows in a smaller tile
    when they do not divide og: 3 = 2 + 1) and it reads the input at its
    first row; a depthwise one (og = 1) keeps the old schedule. Against
    numpy (LLVM) and the TIR interpreter; a symbolic height too."""
    from phasec.te.schedules import gemm as gemm_module
    plan = gemm_module.plan_gemm
    rng = np.random.default_rng(11)
    h = T.Var("h")
    funcs, cases = {}, []
    for name, (c, height, w, o, groups, gemm) in {
            "og16": (12, 5, 23, 32, 2, True), "og4": (8, 4, 19, 16, 4, True),
            "og2": (6, 4, 13, 6, 3, True), "og3": (6, 4, 13, 9, 3, True),
            "depthwise": (8, 4, 21, 8, 8, False), "og8_sym": (4, h, 37, 16, 2, True)}.items():
        ins, out = _conv_nchw(1, c, height, w, o, 3, 3, groups)
        plans = []
        monkeypatch.setattr(gemm_module, "plan_gemm",
                            lambda nest, anchor: plans.append(plan(nest, anchor)) or plans[-1])
        funcs[name] = te.create_prim_func(ins + [out])
        taken = [p for p in plans if p is not None]
        og = o // groups
        if gemm:   # one plan, B read per group of rows
            tuned = host_tuning()
            narrow = w - 2 <= tuned.lanes(32) and tuned.gemm_narrow_rows
            rows = tuned.gemm_narrow_rows if narrow else tuned.gemm_rows
            rows = 1 << (rows.bit_length() - 1)  # (a power of two, halved to fit og)
            while rows > og:
                rows //= 2
            assert len(taken) == 1 and taken[0].row_group == og and taken[0].rows == rows
        else:
            assert not taken, name
        for hh in ((6, 3) if name == "og8_sym" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, w)).astype("float32"),
                      rng.standard_normal((o, c // groups, 3, 3)).astype("float32"),
                      rng.standard_normal(o).astype("float32")]
            cases.append((name, arrays, (1, o, hh - 2, w - 2), "float32",
                          lambda x, wt, b, g=groups: _conv_reference(x, wt, b, g)))
    _check_gemm(funcs, cases)
    for name, arrays, out_shape, _, reference in cases:
        if name in ("og16", "og2", "og3", "og8_sym"):
            got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
            np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4,
                                       err_msg=name)


def test_strided_conv2d_packs_its_gathered_input_columns():
    """A stride-2 convolution reads every other input column: its panels,
    the last narrower one too, are packed (gathered once per output row)
    so the register tiles load whole vectors; values against numpy on LLVM
    and the interpreter, odd and prime sizes, a symbolic height."""
    rng = np.random.default_rng(13)
    h = T.Var("h")
    funcs, cases = {}, []
    for name, (c, height, w, o, k, s) in {
            "s2_3x3": (5, 9, 75, 11, 3, 2), "s2_1x1": (7, 6, 29, 16, 1, 2),
            "s3_narrow": (4, 7, 23, 9, 3, 3), "s2_sym": (3, h, 41, 8, 3, 2)}.items():
        X = te.placeholder((1, c, height, w), "float32", "X")
        W = te.placeholder((o, c, k, k), "float32", "W")
        rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
        oh = (height - k) // s + 1
        ow = (w - k) // s + 1
        conv = te.compute((1, o, oh, ow), lambda b, q, y, x: te.sum(
            X[b, rc.var, y * s + ry.var, x * s + rx.var] * W[q, rc.var, ry.var, rx.var],
            axis=[rc, ry, rx]), name="conv", tag="conv2d")
        out = te.compute(conv.shape, lambda b, q, y, x: relu(conv[b, q, y, x]), name="out")
        func = te.create_prim_func([X, W, out])
        packs = [a for a in walk(func.body) if isinstance(a, T.Allocate)
                 and a.buffer.name.startswith("conv_bpack")]
        assert packs, name
        funcs[name] = func

        def reference(x, wt, s=s, k=k):
            hh, ww = x.shape[2], x.shape[3]
            y = np.zeros((1, wt.shape[0], (hh - k) // s + 1, (ww - k) // s + 1))
            for dy in range(k):
                for dx in range(k):
                    patch = x[0, :, dy:dy + s * (y.shape[2] - 1) + 1:s,
                              dx:dx + s * (y.shape[3] - 1) + 1:s].astype("float64")
                    y[0] += np.einsum("chw,qc->qhw", patch, wt[:, :, dy, dx])
            return np.maximum(y, 0)
        for hh in ((9, 4) if name == "s2_sym" else (height,)):
            arrays = [rng.standard_normal((1, c, hh, w)).astype("float32"),
                      rng.standard_normal((o, c, k, k)).astype("float32")]
            cases.append((name, arrays, reference(*arrays).shape, "float32", reference))
    _check_gemm(funcs, cases)
    for name, arrays, out_shape, _, reference in cases[:2]:
        got = run(funcs[name], *arrays, np.zeros(out_shape, "float32"))
        np.testing.assert_allclose(got, reference(*arrays), rtol=1e-4, atol=1e-4, err_msg=name)


def test_host_tuning_follows_the_cpu_flags_and_the_width_cap(monkeypatch):
    from phasec.target import tuning as tn
    cases = [({"avx512f", "avx2", "fma"}, "avx512", 512), ({"avx2", "fma"}, "avx2", 256),
             ({"sse2"}, "generic", 128), (set(), "generic", 128)]
    try:
        monkeypatch.setattr(tn, "_host_cpu_name", lambda: "znver4")  # (not a Xeon's profile)
        monkeypatch.delenv("PHASEC_TUNING", raising=False)
        for flags, name, bits in cases:
            monkeypatch.setattr(tn, "_cpu_flags", lambda flags=flags: flags)
            monkeypatch.delenv("PHASEC_VECTOR_BITS", raising=False)
            tn.host_tuning.cache_clear()
            t = tn.host_tuning()
            assert (t.name, t.vector_bits, t.lanes(32), t.lanes(64)) == (name, bits, bits // 32,
                                                                         bits // 64)
        monkeypatch.setattr(tn, "_cpu_flags", lambda: {"avx512f"})
        for cap, bits in (("256", 256), ("128", 128), ("512", 512), ("", 512)):
            monkeypatch.setenv("PHASEC_VECTOR_BITS", cap)
            tn.host_tuning.cache_clear()
            assert tn.host_tuning().vector_bits == bits
        for bad in ("1024", "wide"):  # a typo is refused, naming the variable, not ignored
            monkeypatch.setenv("PHASEC_VECTOR_BITS", bad)
            tn.host_tuning.cache_clear()
            with pytest.raises(InputError, match=f"PHASEC_VECTOR_BITS.*{bad!r}"):
                tn.host_tuning()
    finally:
        tn.host_tuning.cache_clear()


def test_gemm_schedule_on_empty_extents():
    # no rows, no reduction (the sum is its init, 0: the epilogue sees bias only), no columns
    n = T.Var("n")
    funcs, cases = {}, []
    for name, (M, K, N) in {"m0": (0, 5, 7), "k0": (40, 0, 40), "n0": (5, 3, 0)}.items():
        ins, out, ref = _gemm(M, K, N)
        funcs[name] = te.create_prim_func(ins + [out])
        cases.append((name, _operands(ins, M, K, N), (M, N), "float32", ref))
    ins, out, ref = _gemm(n, 5, 40)
    funcs["sym"] = te.create_prim_func(ins + [out],
                                       schedule_hints=te.ScheduleOptions(tuning=PACK_ALWAYS))
    for rows in (0, 1, 3):
        cases.append(("sym", _operands(ins, rows, 5, 40), (rows, 40), "float32", ref))
    _check_gemm(funcs, cases)
