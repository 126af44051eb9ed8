"""The switches of phasec's LLVM pipeline (objworker.pass_builder): on from O2
but for a small library (test_small_library_pipeline.py); turned off, LLVM no
longer unrolls a loop on its own but still does what the loop's metadata
forces; an unknown switch is refused."""

from __future__ import annotations

import llvmlite.binding as llvm
import pytest

from phasec.backend.llvm import objworker
from phasec.backend.llvm.jit import host_target_info

# b[i] = 3 * a[i] for i < 5: a loop LLVM's full unrolling takes on its own
_LOOP = """
define void @f(ptr noalias %a, ptr noalias %b) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %n, %loop ]
  %pa = getelementptr float, ptr %a, i64 %i
  %x = load float, ptr %pa
  %y = fmul float %x, 3.0
  %pb = getelementptr float, ptr %b, i64 %i
  store float %y, ptr %pb
  %n = add nuw nsw i64 %i, 1
  %c = icmp ult i64 %n, 5
  br i1 %c, label %loop, label %exit, !llvm.loop !0
exit:
  ret void
}
!0 = distinct !{!0, !1}
!1 = !{!"LOOP_PROPERTY"}
"""
_NO_VECTORS = ("loop_vectorization", "slp_vectorization")  # (scalar stores, to count)


def _optimized(prop: str, off: tuple[str, ...]) -> str:
    target = host_target_info()
    tm = objworker.target_machine(target.triple, target.cpu, target.features)
    mod = llvm.parse_assembly(_LOOP.replace("LOOP_PROPERTY", prop))
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    objworker.optimize(mod, tm, 3, off)
    return str(mod)


def test_unrolling_off_keeps_the_loop() -> None:
    unrolled = _optimized("llvm.loop.mustprogress", _NO_VECTORS)
    assert "phi " not in unrolled and unrolled.count("store float") == 5
    kept = _optimized("llvm.loop.mustprogress", (*_NO_VECTORS, "loop_unrolling"))
    assert "phi " in kept and kept.count("store float") == 1


def test_unrolling_off_still_unrolls_a_loop_marked_full() -> None:
    text = _optimized("llvm.loop.unroll.full", (*_NO_VECTORS, "loop_unrolling"))
    assert "phi " not in text and text.count("store float") == 5


def test_an_unknown_switch_is_refused() -> None:
    target = host_target_info()
    tm = objworker.target_machine(target.triple, target.cpu, target.features)
    with pytest.raises(ValueError, match="loop_fusion"):
        objworker.pass_builder(tm, 3, ("loop_fusion",))
