"""Detection operators with ONNX's semantics: ``vision.onnx_roi_align`` and
``vision.onnx_nms``. (TVM 0.27's ``vision.roi_align`` reads ``[batch, x1,
y1, x2, y2]`` rows and its ``all_class_non_max_suppression`` has its own
ordering; these follow ONNX's RoiAlign and NonMaxSuppression, as ONNX
Runtime computes them, so they have their own names.)

* ``vision.onnx_roi_align(data, rois, batch_indices, output_height,
  output_width, sampling_ratio, spatial_scale, mode, half_pixel)``: data
  ``[N, C, H, W]``, rois ``[R, 4]`` as (x1, y1, x2, y2), batch_indices
  ``[R]`` (int64, checked: a bad one is an IndexOutOfRangeError); output
  ``[R, C, output_height, output_width]``. Each bin averages (``mode`` "avg")
  or takes the largest of (``"max"``, ONNX Runtime's: the largest weighted
  corner) bilinear samples on a grid of ``sampling_ratio`` squared points,
  or ``ceil(roi size / output size)`` points per axis when it is 0 (a grid
  that depends on the data: the kernel's loops run to it). ``half_pixel``
  shifts coordinates by -0.5; without it a roi is at least 1 x 1.
* ``vision.onnx_nms(boxes, scores, max_output, iou_threshold,
  score_threshold, center_point_box, has_score_threshold)``: boxes ``[B, N,
  4]``, scores ``[B, C, N]``, the three thresholds ``[1]`` tensors (read at
  run time). Output ``[B * C * N, 3]`` int64: the selected (batch, class,
  box) rows first, batch by batch and class by class, each class's in
  selection order (score descending, ties by box index), then rows of -1.
  A box is a candidate when its score is above the threshold (when there is
  one); it is kept unless its IoU with a box already kept in its class is
  above ``iou_threshold``; at most ``max_output`` per class. The ONNX
  converter cuts the -1 rows off (a data-dependent count).

Both kernels are hand-written TIR (``te.extern``) compiled by LLVM. NMS
sorts a class's candidates by insertion (quadratic in the candidates left
after the score threshold, which detection models keep few).
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferStore, Cast, IfThenElse, LetStmt, PrimExpr, Select, Var,
    While,
)
from phasec.op._common import (
    OpPattern, as_bool, as_float, as_int, attrs_of, check_indices, define, err, one_of,
    tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import _const, _out, _tensor, legalizes
from phasec.op._tirgen import checked, i64, nest, seq
from phasec.op.draw import declares_draw

__all__: list[str] = []


def _and(*conds: PrimExpr) -> PrimExpr:
    out = conds[0]
    for c in conds[1:]:
        out = BinaryOp("and", out, c)
    return out


def _let(name: str, value: PrimExpr, body) -> tir.Stmt:
    """``let name = value in body(var)``."""
    v = Var(name, value.dtype)
    return LetStmt(v, value, body(v))


def _loop(extent: PrimExpr, body, name: str) -> tir.Stmt:
    return nest((extent,), lambda i: body(i[0]), name)


def _float_check(call, s: TensorStructInfo, what: str) -> None:
    if s.dtype != "void" and s.dtype not in ("float32", "float64"):
        raise err(call, f"{call.op.name.removeprefix('relax.')} computes in float32 or float64, "
                        f"but the {what} is {s.dtype}")


# ---------------------------------------------------------------------------
# roi_align
# ---------------------------------------------------------------------------

def _infer_roi_align(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    rois = tensor_arg(call, 1, ctx, "rois")
    idx = tensor_arg(call, 2, ctx, "batch_indices")
    a = attrs_of(call)
    _float_check(call, data, "data")
    if rois.dtype not in ("void", data.dtype):
        raise err(call, f"roi_align's rois are {rois.dtype} but the data is {data.dtype}")
    if idx.dtype != "void" and idx.dtype != "int64":
        raise err(call, f"roi_align's batch_indices must be int64, got {idx.dtype}")
    for s, n, what in ((data, 4, "data"), (rois, 2, "rois"), (idx, 1, "batch_indices")):
        if s.ndim not in (-1, n):
            raise err(call, f"roi_align expects {n}-D {what}, but it has ndim {s.ndim}")
    if a["output_height"] < 1 or a["output_width"] < 1 or a["sampling_ratio"] < 0:
        raise err(call, "roi_align needs output sizes >= 1 and a sampling_ratio >= 0")
    if data.shape is None or rois.shape is None:
        return TensorStructInfo(None, data.dtype, 4)
    if arith.const_int(rois.shape[1]) not in (None, 4):
        raise err(call, "roi_align's rois are [num_rois, 4] (x1, y1, x2, y2)")
    if idx.shape is not None and not arith.prove_equal(idx.shape[0], rois.shape[0]):
        raise err(call, "roi_align needs one batch index per roi")
    return tensor_sinfo((rois.shape[0], data.shape[1], i64(a["output_height"]),
                         i64(a["output_width"])), data.dtype)


def _roi_align_ref(data, rois, batch_indices, output_height=1, output_width=1,
                   sampling_ratio=0, spatial_scale=1.0, mode="avg", half_pixel=True):
    x = np.asarray(data)
    f = x.dtype.type
    n_img, ch, h, w = x.shape
    idx = np.asarray(batch_indices).astype(np.int64)
    check_indices(idx, n_img, "roi_align")
    out = np.zeros((len(idx), ch, output_height, output_width), x.dtype)
    off = f(0.5 if half_pixel else 0.0)
    for r, roi in enumerate(np.asarray(rois)):
        sw, sh, ew, eh = (f(v) * f(spatial_scale) - off for v in roi)
        rw, rh = ew - sw, eh - sh
        if not half_pixel:
            rw, rh = max(rw, f(1)), max(rh, f(1))
        bh, bw = rh / f(output_height), rw / f(output_width)
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / f(output_height)))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / f(output_width)))
        img = x[idx[r]]
        for ph in range(output_height):
            for pw in range(output_width):
                vals = []
                for iy in range(gh):
                    y = sh + f(ph) * bh + (f(iy) + f(0.5)) * bh / f(gh)
                    for ix in range(gw):
                        xx = sw + f(pw) * bw + (f(ix) + f(0.5)) * bw / f(gw)
                        vals.append(_bilinear(img, y, xx, h, w, mode))
                if mode == "avg":
                    total = np.zeros(ch, x.dtype)
                    for v in vals:
                        total = total + v
                    out[r, :, ph, pw] = total / f(max(gh * gw, 1))
                elif vals:
                    out[r, :, ph, pw] = np.max(vals, axis=0)
    return out


def _bilinear(img, y, x, h, w, mode):
    f = img.dtype.type
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(img.shape[0], img.dtype)
    y, x = max(y, f(0)), max(x, f(0))
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = f(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = f(xl)
    else:
        xh = xl + 1
    ly, lx = y - f(yl), x - f(xl)
    hy, hx = f(1) - ly, f(1) - lx
    terms = [hy * hx * img[:, yl, xl], hy * lx * img[:, yl, xh], ly * hx * img[:, yh, xl],
             ly * lx * img[:, yh, xh]]
    if mode == "avg":
        return terms[0] + terms[1] + terms[2] + terms[3]
    return np.max(terms, axis=0)


define("vision.onnx_roi_align", ("data", "rois", "batch_indices"), _infer_roi_align,
       attrs={"output_height": (1, as_int), "output_width": (1, as_int),
              "sampling_ratio": (0, as_int), "spatial_scale": (1.0, as_float),
              "mode": ("avg", one_of("avg", "max")), "half_pixel": (True, as_bool)},
       reference=_roi_align_ref, pattern=OpPattern.OPAQUE,
       doc="ONNX RoiAlign: bilinear samples averaged (or maxed) per bin of each roi.")


@legalizes("vision.onnx_roi_align")
def _roi_align_te(call, inputs):
    data, rois, bidx = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    a = attrs_of(call)
    dt = out.dtype
    oh, ow, sr = a["output_height"], a["output_width"], a["sampling_ratio"]
    is_avg = a["mode"] == "avg"

    def c(v):
        return _const(v, dt)

    def build(ins, o):
        xb, rb, ib = ins
        n_img, _, h, w = xb.shape
        hf, wf = Cast(dt, h), Cast(dt, w)
        acc = Buffer("roi_acc", (i64(1),), dt)

        def per_roi(r):
            def geometry(b):
                off = c(0.5 if a["half_pixel"] else 0.0)
                corner = [BinaryOp("-", BinaryOp("*", rb[r, i64(k)], c(a["spatial_scale"])), off)
                          for k in range(4)]
                rw = BinaryOp("-", corner[2], corner[0])
                rh = BinaryOp("-", corner[3], corner[1])
                if not a["half_pixel"]:
                    rw, rh = BinaryOp("max", rw, c(1.0)), BinaryOp("max", rh, c(1.0))
                return _let("sw", corner[0], lambda sw: _let("sh", corner[1], lambda sh: _let(
                    "bw", BinaryOp("/", rw, c(float(ow))), lambda bw: _let(
                        "bh", BinaryOp("/", rh, c(float(oh))), lambda bh: _let(
                            "gw", _grid(rw, ow), lambda gw: _let(
                                "gh", _grid(rh, oh), lambda gh: bins(r, b, sw, sh, bw, bh,
                                                                     gw, gh)))))))
            return _let("b", checked(ib[r], n_img), geometry)

        def _grid(size, bins_):
            if sr > 0:
                return i64(sr)
            return Cast("int64", te.call("ceil", BinaryOp("/", size, c(float(bins_)))))

        def bins(r, b, sw, sh, bw, bh, gw, gh):
            def cell(ch, ph, pw):
                def sample(iy, ix):
                    y = BinaryOp("+", BinaryOp("+", sh, BinaryOp("*", Cast(dt, ph), bh)),
                                 BinaryOp("/", BinaryOp("*", BinaryOp("+", Cast(dt, iy), c(0.5)),
                                                        bh), Cast(dt, gh)))
                    x = BinaryOp("+", BinaryOp("+", sw, BinaryOp("*", Cast(dt, pw), bw)),
                                 BinaryOp("/", BinaryOp("*", BinaryOp("+", Cast(dt, ix), c(0.5)),
                                                        bw), Cast(dt, gw)))
                    return _let("y", y, lambda yv: _let("x", x, lambda xv: accumulate(
                        ch, b, yv, xv, BinaryOp("and", BinaryOp("==", iy, i64(0)),
                                                BinaryOp("==", ix, i64(0))))))
                grid = _loop(gh, lambda iy: _loop(gw, lambda ix: sample(iy, ix), "ix"), "iy")
                cnt = Cast(dt, BinaryOp("max", BinaryOp("*", gh, gw), i64(1)))
                result = BinaryOp("/", acc[i64(0)], cnt) if is_avg else acc[i64(0)]
                return seq(BufferStore(acc, c(0.0), (i64(0),)), grid,
                           BufferStore(o, result, (r, ch, ph, pw)))
            return nest((o.shape[1], i64(oh), i64(ow)), lambda i: cell(*i), "bin")

        def accumulate(ch, b, y, x, first):
            outside = BinaryOp("or", BinaryOp("or", BinaryOp("<", y, c(-1.0)), BinaryOp(">", y, hf)),
                               BinaryOp("or", BinaryOp("<", x, c(-1.0)), BinaryOp(">", x, wf)))
            # a point outside reads nothing (its coordinates may be huge: no cast of them)
            yc = Select(outside, c(0.0), BinaryOp("max", y, c(0.0)))
            xc = Select(outside, c(0.0), BinaryOp("max", x, c(0.0)))

            def corners(yl0, xl0):
                ytop = BinaryOp(">=", yl0, BinaryOp("-", h, i64(1)))
                xtop = BinaryOp(">=", xl0, BinaryOp("-", w, i64(1)))
                yl = Select(ytop, BinaryOp("-", h, i64(1)), yl0)
                xl = Select(xtop, BinaryOp("-", w, i64(1)), xl0)
                yh = Select(ytop, yl, BinaryOp("+", yl, i64(1)))
                xh = Select(xtop, xl, BinaryOp("+", xl, i64(1)))
                ly = Select(ytop, c(0.0), BinaryOp("-", yc, Cast(dt, yl)))
                lx = Select(xtop, c(0.0), BinaryOp("-", xc, Cast(dt, xl)))
                hy, hx = BinaryOp("-", c(1.0), ly), BinaryOp("-", c(1.0), lx)
                zero = c(0.0)
                terms = [Select(outside, zero, BinaryOp("*", BinaryOp("*", wy, wx),
                                                        xb[b, ch, yy, xx]))
                         for wy, wx, yy, xx in ((hy, hx, yl, xl), (hy, lx, yl, xh),
                                                (ly, hx, yh, xl), (ly, lx, yh, xh))]
                if is_avg:
                    v = BinaryOp("+", BinaryOp("+", terms[0], terms[1]),
                                 BinaryOp("+", terms[2], terms[3]))
                    return BufferStore(acc, BinaryOp("+", acc[i64(0)], v), (i64(0),))
                v = BinaryOp("max", BinaryOp("max", terms[0], terms[1]),
                             BinaryOp("max", terms[2], terms[3]))
                return BufferStore(acc, Select(first, v, BinaryOp("max", acc[i64(0)], v)),
                                   (i64(0),))
            return _let("yl", Cast("int64", yc), lambda yl0: _let(
                "xl", Cast("int64", xc), lambda xl0: corners(yl0, xl0)))

        return Allocate(acc, _loop(o.shape[0], per_roi, "r"))
    return te.extern(out.shape, dt, [data, rois, bidx], build, name="T_roi_align")


def _draw_roi_align(ctx):
    n, _, h, w = ctx.shape
    r = ctx.integers(1, 3)
    rois = ctx.const((r, 4), 0.0, float(max(h, w)), ctx.dtype)
    idx = ctx.indices((r,), n)
    mode = ctx.choose(["avg", "max"])
    if mode == "max":  # weighted corners: within the data's hull and 0
        lo, hi = ctx.hull()
        ctx.result_in(min(lo, 0.0), max(hi, 0.0))
    return (ctx.x, rois, idx.astype(np.int64)), {
        "output_height": ctx.integers(1, 3), "output_width": ctx.integers(1, 3),
        "sampling_ratio": ctx.integers(0, 2), "spatial_scale": ctx.choose([1.0, 0.5]),
        "mode": mode, "half_pixel": ctx.choose([True, False])}


declares_draw("vision.onnx_roi_align", ranks=(4,), build=_draw_roi_align,
              out=lambda ctx: (min(ctx.hull()[0], 0.0), max(ctx.hull()[1], 0.0)))


# ---------------------------------------------------------------------------
# nms
# ---------------------------------------------------------------------------

def _infer_nms(call, ctx):
    boxes = tensor_arg(call, 0, ctx, "boxes")
    scores = tensor_arg(call, 1, ctx, "scores")
    limits = [tensor_arg(call, k, ctx, what) for k, what in
              ((2, "max_output"), (3, "iou_threshold"), (4, "score_threshold"))]
    _float_check(call, boxes, "boxes")
    if scores.dtype not in ("void", boxes.dtype):
        raise err(call, f"nms's scores are {scores.dtype} but the boxes are {boxes.dtype}")
    for s, want, what in zip(limits, ("int64", boxes.dtype, boxes.dtype),
                             ("max_output", "iou_threshold", "score_threshold")):
        if s.dtype not in ("void", want) or s.ndim not in (-1, 1):
            raise err(call, f"nms's {what} must be a [1] {want} tensor")
    if boxes.ndim not in (-1, 3) or scores.ndim not in (-1, 3):
        raise err(call, "nms expects boxes [batch, boxes, 4] and scores [batch, classes, boxes]")
    if boxes.shape is None or scores.shape is None:
        return TensorStructInfo(None, "int64", 2)
    b, n, four = boxes.shape
    if arith.const_int(four) not in (None, 4):
        raise err(call, "nms's boxes have 4 coordinates each")
    if not (arith.prove_equal(b, scores.shape[0]) and arith.prove_equal(n, scores.shape[2])):
        raise err(call, "nms's scores must be [batch, classes, boxes] for boxes [batch, boxes, 4]")
    rows = arith.simplify(BinaryOp("*", BinaryOp("*", b, scores.shape[1]), n))
    return tensor_sinfo((rows, i64(3)), "int64")


def _corners(box, center: bool):
    """(y_min, x_min, y_max, x_max) of a box (any two opposite corners, or
    centre and size)."""
    if center:
        xc, yc, w, h = box
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = box
    return min(y1, y2), min(x1, x2), max(y1, y2), max(x1, x2)


def _suppresses(a, b, threshold, center: bool) -> bool:
    ay0, ax0, ay1, ax1 = _corners(a, center)
    by0, bx0, by1, bx1 = _corners(b, center)
    ix0, ix1, iy0, iy1 = max(ax0, bx0), min(ax1, bx1), max(ay0, by0), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def _nms_ref(boxes, scores, max_output, iou_threshold, score_threshold, center_point_box=0,
             has_score_threshold=True):
    bx, sc = np.asarray(boxes), np.asarray(scores)
    limit = max(int(np.asarray(max_output).reshape(-1)[0]), 0)
    iou = np.asarray(iou_threshold).reshape(-1)[0]
    thr = np.asarray(score_threshold).reshape(-1)[0]
    b_n, c_n, n = sc.shape
    rows = []
    for b in range(b_n):
        for c in range(c_n):
            cand = [i for i in range(n) if not has_score_threshold or sc[b, c, i] > thr]
            cand.sort(key=lambda i: (-sc[b, c, i], i))
            kept: list[int] = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if not any(_suppresses(bx[b, i], bx[b, k], iou, bool(center_point_box))
                           for k in kept):
                    kept.append(i)
            rows += [(b, c, i) for i in kept]
    out = np.full((b_n * c_n * n, 3), -1, np.int64)
    if rows:
        out[:len(rows)] = rows
    return out


define("vision.onnx_nms", ("boxes", "scores", "max_output", "iou_threshold",
                           "score_threshold"), _infer_nms,
       attrs={"center_point_box": (0, as_int), "has_score_threshold": (True, as_bool)},
       reference=_nms_ref, pattern=OpPattern.OPAQUE,
       doc="ONNX NonMaxSuppression: the selected (batch, class, box) rows, then rows of -1.")


@legalizes("vision.onnx_nms")
def _nms_te(call, inputs):
    boxes, scores, limit, iou_t, score_t = (_tensor(inputs, k, call) for k in range(5))
    out = _out(call)
    a = attrs_of(call)
    center = a["center_point_box"] == 1
    dt = boxes.dtype

    def c(v):
        return _const(v, dt)

    def build(ins, o):
        bb, sb, lb, ib, tb = ins
        b_n, c_n, n = sb.shape
        order = Buffer("nms_order", (n,), "int64")
        kept = Buffer("nms_kept", (n,), "int64")
        # counters: candidates, kept in the class, rows written, a sort position, a flag
        cnt = Buffer("nms_count", (i64(5),), "int64")
        ncand, nkept, total, pos, keep = (i64(k) for k in range(5))
        limit_v = BinaryOp("max", lb[i64(0)], i64(0))

        def corners(b, i):
            v = [bb[b, i, i64(k)] for k in range(4)]
            if center:
                hw, hh = BinaryOp("/", v[2], c(2.0)), BinaryOp("/", v[3], c(2.0))
                return (BinaryOp("-", v[1], hh), BinaryOp("-", v[0], hw),
                        BinaryOp("+", v[1], hh), BinaryOp("+", v[0], hw))
            return (BinaryOp("min", v[0], v[2]), BinaryOp("min", v[1], v[3]),
                    BinaryOp("max", v[0], v[2]), BinaryOp("max", v[1], v[3]))

        def suppresses(b, i, j) -> PrimExpr:
            ay0, ax0, ay1, ax1 = corners(b, i)
            by0, bx0, by1, bx1 = corners(b, j)
            ix0, ix1 = BinaryOp("max", ax0, bx0), BinaryOp("min", ax1, bx1)
            iy0, iy1 = BinaryOp("max", ay0, by0), BinaryOp("min", ay1, by1)
            inter = BinaryOp("*", BinaryOp("-", ix1, ix0), BinaryOp("-", iy1, iy0))
            area_a = BinaryOp("*", BinaryOp("-", ax1, ax0), BinaryOp("-", ay1, ay0))
            area_b = BinaryOp("*", BinaryOp("-", bx1, bx0), BinaryOp("-", by1, by0))
            union = BinaryOp("-", BinaryOp("+", area_a, area_b), inter)
            return _and(BinaryOp(">", ix1, ix0), BinaryOp(">", iy1, iy0),
                        BinaryOp(">", inter, c(0.0)), BinaryOp(">", area_a, c(0.0)),
                        BinaryOp(">", area_b, c(0.0)), BinaryOp(">", union, c(0.0)),
                        BinaryOp(">", BinaryOp("/", inter, union), ib[i64(0)]))

        def per_class(b, k):
            def score(i):
                return sb[b, k, i]

            def better(i, j) -> PrimExpr:  # i before j: higher score, then lower index
                return BinaryOp("or", BinaryOp(">", score(i), score(j)), BinaryOp(
                    "and", BinaryOp("==", score(i), score(j)), BinaryOp("<", i, j)))

            def gather(i):
                store = seq(BufferStore(order, i, (cnt[ncand],)),
                            BufferStore(cnt, BinaryOp("+", cnt[ncand], i64(1)), (ncand,)))
                if not a["has_score_threshold"]:
                    return store
                return IfThenElse(BinaryOp(">", score(i), tb[i64(0)]), store)

            def insert(p):  # order[0:p] sorted; put order[p] in its place
                def shift(key):
                    at = cnt[pos]
                    prev = order[BinaryOp("max", BinaryOp("-", at, i64(1)), i64(0))]
                    move = _and(BinaryOp(">", at, i64(0)), better(key, prev))
                    return seq(BufferStore(cnt, p, (pos,)), While(move, seq(
                        BufferStore(order, prev, (at,)),
                        BufferStore(cnt, BinaryOp("-", at, i64(1)), (pos,)))),
                        BufferStore(order, key, (cnt[pos],)))
                return _let("key", order[p], shift)

            def select(p):
                def visit(cand):
                    check = _loop(cnt[nkept], lambda q: IfThenElse(
                        suppresses(b, cand, kept[q]), BufferStore(cnt, i64(0), (keep,))), "q")
                    row = cnt[total]
                    take = seq(BufferStore(kept, cand, (cnt[nkept],)),
                               BufferStore(cnt, BinaryOp("+", cnt[nkept], i64(1)), (nkept,)),
                               BufferStore(o, b, (row, i64(0))), BufferStore(o, k, (row, i64(1))),
                               BufferStore(o, cand, (row, i64(2))),
                               BufferStore(cnt, BinaryOp("+", row, i64(1)), (total,)))
                    return seq(BufferStore(cnt, i64(1), (keep,)), check,
                               IfThenElse(BinaryOp("==", cnt[keep], i64(1)), take))
                return IfThenElse(BinaryOp("<", cnt[nkept], limit_v), _let("cand", order[p], visit))

            return seq(BufferStore(cnt, i64(0), (ncand,)), BufferStore(cnt, i64(0), (nkept,)),
                       _loop(n, gather, "g"), _loop(cnt[ncand], insert, "s"),
                       _loop(cnt[ncand], select, "p"))

        fill = nest(o.shape, lambda i: BufferStore(o, i64(-1), i), "f")
        body = seq(fill, BufferStore(cnt, i64(0), (total,)),
                   nest((b_n, c_n), lambda i: per_class(*i), "bc"))
        return Allocate(order, Allocate(kept, Allocate(cnt, body)))
    return te.extern(out.shape, "int64", [boxes, scores, limit, iou_t, score_t], build,
                     name="T_nms")


def _draw_nms(ctx):
    b, n, _ = ctx.shape
    classes = ctx.integers(1, 2)
    scores = ctx.const((b, classes, n), 0.0, 1.0, ctx.dtype)
    return (ctx.x, scores, np.array([ctx.integers(0, n)], np.int64),
            np.array([ctx.choose([0.0, 0.3, 0.7])], np.float32),
            np.array([ctx.choose([0.0, 0.4])], np.float32)), {
        "center_point_box": ctx.choose([0, 1]),
        "has_score_threshold": ctx.choose([True, False])}


declares_draw("vision.onnx_nms", ranks=(3,), build=_draw_nms, fits=lambda s: s[2] == 4,
              shape=lambda pick: (pick([1, 2]), pick([3, 5]), 4),
              out=lambda ctx: (-1.0, float(max(ctx.shape))))
