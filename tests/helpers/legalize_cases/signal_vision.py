"""Legalization cases of the operators the ONNX conformance work added:
signal.dft/stft, vision.onnx_roi_align/onnx_nms and round_to_format (their
ONNX-level tests against numpy.fft, ml_dtypes and ONNX Runtime are in
tests/op/test_ops_signal.py, tests/frontend/test_onnx_vision.py and
tests/frontend/test_onnx_narrow.py)."""

from __future__ import annotations

import numpy as np

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op


def _v(name, shape, dtype="float32"):
    return Var(name, TensorStructInfo(shape, dtype))


_REAL = _v("sv_real", (2, 6, 3, 1))
_COMPLEX = _v("sv_complex", (2, 5, 2))
_SIGNAL, _WINDOW = _v("sv_signal", (2, 11, 1)), _v("sv_window", (4,))
_DATA = _v("sv_data", (2, 3, 6, 5))
_ROIS, _BATCH = _v("sv_rois", (3, 4)), _v("sv_batch", (3,), "int64")
_BOXES, _SCORES = _v("sv_boxes", (1, 5, 4)), _v("sv_scores", (1, 2, 5))
_MAX, _IOU, _SCORE_MIN = (_v("sv_max", (1,), "int64"), _v("sv_iou", (1,)),
                          _v("sv_score_min", (1,)))
_WIDE = _v("sv_wide", (2, 7))

SIGNAL_VISION_VALUES = {
    _ROIS: np.array([[0.5, 0.5, 3.5, 4.0], [1.0, 0.0, 4.5, 2.5], [0.0, 1.5, 2.0, 5.0]],
                    "float32"),
    _BATCH: np.array([1, 0, 1], "int64"),
    # overlapping boxes (some suppressed), a score below the threshold
    _BOXES: np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0.05, 0, 1, 1],
                       [3, 3, 4, 4]]], "float32"),
    _SCORES: np.array([[[0.9, 0.75, 0.6, 0.95, 0.1], [0.2, 0.8, 0.3, 0.5, 0.7]]], "float32"),
    _MAX: np.array([3], "int64"),
    _IOU: np.array([0.5], "float32"),
    _SCORE_MIN: np.array([0.15], "float32"),
    # values across bfloat16's and float8's rounding steps, and past float8's range
    _WIDE: np.array([[1.0, 1.0078125, -2.7182817, 3.0e-3, 500.0, -1e5, 0.0],
                     [7.1, -7.3, 448.0, 465.0, 1e-9, 123.456, -0.33]], "float32"),
}

SIGNAL_VISION_LEGALIZE_CASES = [
    ("signal.dft-real-onesided", lambda: call_op("signal.dft", _REAL, axis=1, n=8,
                                                 onesided=True)),
    ("signal.dft-complex-inverse", lambda: call_op("signal.dft", _COMPLEX, axis=1, n=4,
                                                   inverse=True)),
    ("signal.stft", lambda: call_op("signal.stft", _SIGNAL, _WINDOW, frame_step=3)),
    ("vision.onnx_roi_align-avg", lambda: call_op("vision.onnx_roi_align", _DATA, _ROIS, _BATCH,
                                                  output_height=2, output_width=3,
                                                  sampling_ratio=2)),
    ("vision.onnx_nms", lambda: call_op("vision.onnx_nms", _BOXES, _SCORES, _MAX, _IOU,
                                        _SCORE_MIN)),
    ("round_to_format-bfloat16", lambda: call_op("round_to_format", _WIDE, format="bfloat16",
                                                 saturate=False)),
    ("round_to_format-float8", lambda: call_op("round_to_format", _WIDE,
                                               format="float8_e4m3fn", saturate=True)),
]
