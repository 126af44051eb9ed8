"""Vectorizable float32 math for kernels, as hand-written LLVM IR.

``phasec.expf`` / ``sigmoidf`` / ``siluf`` / ``erff`` / ``tanhf`` / ``logf`` / ``log2f`` are
written with arithmetic, selects and bit casts only, so the loop vectorizer turns
them into SIMD code (calls to libm's ``expf``/``erff`` would keep the
enclosing loop scalar). Polynomial coefficients were fitted for phasec
(weighted least squares on Chebyshev nodes, float64, rounded to float32;
erf's then adjusted by a few ulps each against a simulation of the float32
evaluation); measured maximum relative errors against float64 references:
exp 1.1e-7, erf 1.1e-7, tanh 1.4e-7, log 1.7e-7 (all below 4 float32 ulps;
erf below 1.8 ulps on every float32 in [2**-30, 4.5]); sigmoid 2.7e-7 (4.2
ulps; its subnormal results flushed, see :func:`_sigmoidf_ir`); siluf (``x *
sigmoid(x)`` as one quotient) within 4.5 ulps from x = -87.3 up.
"""

from __future__ import annotations

import struct

import numpy as np

from phasec.backend.llvm.amx import AMX_FUNCTION, amx_function
from phasec.backend.llvm.intdot import DOT4_FUNCTION, dot4_function

__all__ = ["MATH_FUNCTIONS", "MATH_DEPENDS", "math_function"]


def _f32(value: float) -> str:
    """A float32 constant in LLVM's hexadecimal (double) notation."""
    v = float(np.float32(value))
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"


# --------------------------------------------------------------------------
# Vectorizable float32 math
# --------------------------------------------------------------------------

# exp(r) on |r| <= ln(2)/2, degree 6.
_EXP_POLY = (1.0, 1.0, 0.49999991059303284, 0.16666419804096222, 0.04166822507977486,
             0.008374815806746483, 0.0013836839934810996)
# exp(r) on |r| <= ln(2)/2, degree 5 (relative error 1.3e-7 with the
# coefficients rounded to float32): sigmoid's, whose quotient adds its own
# roundings anyway
_SIGMOID_EXP_POLY = (1.0000001192092896, 0.9999997019767761, 0.49998894333839417,
                     0.16667574644088745, 0.04191538318991661, 0.008297651074826717)
# erf(x) = x + x * C(x*x) for |x| < 1.25: C as a polynomial in x*x.
_ERF_SMALL = (0.12837915122509003, -0.3761247992515564, 0.11282193660736084,
              -0.026804912835359573, 0.005109990946948528, -0.000742607400752604,
              6.202400254551321e-05)
# erfc(x) = g(u)**8 for 1.25 <= x <= 3.92, u = (x - 2.585) / 1.335 in [-1, 1]:
# g as a polynomial in u. The eighth root of erfc decays slowly enough for a
# low degree, and no exp is needed.
_ERFC_ROOT8 = (0.35573244094848633, -0.3272850215435028, 0.07554936408996582,
               0.02171831578016281, -0.012109961360692978, -0.00019482633797451854,
               0.0009748308802954853)
_ERF_SPLIT = 1.25
_ERF_CLAMP = 3.92  # erf(x) rounds to 1.0f from about 3.92 on
_ERF_U_SCALE = 0.7490636706352234   # 1 / 1.335
_ERF_U_OFFSET = -1.9363296031951904  # -2.585 / 1.335
# (tanh(x) / x - 1) / x**2 as a polynomial in x*x, for |x| < 0.625.
_TANH_SMALL = (-0.3333333432674408, 0.13333286345005035, -0.0539553202688694,
               0.0217379629611969, -0.008246270008385181, 0.0021862853318452835)

# (2 * atanh(s) - 2 * s) / s**3 as a polynomial in s*s, |s| <= 0.1716
# (log(1 + f) = 2 * atanh(f / (2 + f))).
_LOG_POLY = (0.6666666865348816, 0.39997386932373047, 0.28797033429145813, 0.17776767909526825)


def _horner(prefix: str, coeffs: tuple[float, ...], t: str) -> tuple[list[str], str]:
    """IR lines evaluating sum(coeffs[k] * t**k); returns (lines, result)."""
    lines = []
    acc = _f32(coeffs[-1])
    for k in range(len(coeffs) - 2, -1, -1):
        lines.append(f"  %{prefix}.m{k} = fmul contract float {acc}, {t}")
        lines.append(f"  %{prefix}.a{k} = fadd contract float %{prefix}.m{k}, {_f32(coeffs[k])}")
        acc = f"%{prefix}.a{k}"
    return lines, acc


def _expf_ir(scalef: bool = False) -> str:
    """exp of a float32: Cody-Waite reduction to ``r`` and ``n``, a degree-6
    polynomial, then the product with ``2**n``.

    ``scalef``: multiply by ``2**n`` with ``llvm.ldexp``, which LLVM turns
    into one ``vscalefps`` on AVX-512 (exact, like the two-factor product it
    replaces, so results are bitwise the same: checked on 44M float32 bit
    patterns spread over the whole range); the portable form builds two
    power-of-two factors from integer bits (seven vector operations more;
    softmax of 4 x 128 x 128: 27 -> 24 us on one core). Without AVX-512
    ``llvm.ldexp`` is a scalar libm call, so only AVX-512 targets use it.
    """
    poly, p = _horner("p", _EXP_POLY, "%r")
    if scalef:
        scale = [
            "  %ni0 = fptosi float %n to i32",
            "  %ni = freeze i32 %ni0",
            f"  %y = call float @llvm.ldexp.f32.i32(float {p}, i32 %ni)",
        ]
    else:
        scale = [
            # 2**n as two factors 2**n1 * 2**n2, so that n in [-150, 128] works.
            "  %ni0 = fptosi float %n to i32",
            "  %ni = freeze i32 %ni0",
            "  %n1 = ashr i32 %ni, 1",
            "  %n2 = sub i32 %ni, %n1",
            "  %e1 = add i32 %n1, 127",
            "  %b1 = shl i32 %e1, 23",
            "  %s1 = bitcast i32 %b1 to float",
            "  %e2 = add i32 %n2, 127",
            "  %b2 = shl i32 %e2, 23",
            "  %s2 = bitcast i32 %b2 to float",
            f"  %y0 = fmul float {p}, %s1",
            "  %y = fmul float %y0, %s2",
        ]
    return "\n".join([
        "define internal float @phasec.expf(float %x) alwaysinline nounwind memory(none) {",
        "entry:",
        # Clamp (NaN passes through the selects): results overflow to inf or
        # underflow to 0 exactly like expf, without out-of-range exponents.
        f"  %hi = fcmp ogt float %x, {_f32(89.0)}",
        f"  %x1 = select i1 %hi, float {_f32(89.0)}, float %x",
        f"  %lo = fcmp olt float %x1, {_f32(-104.0)}",
        f"  %x2 = select i1 %lo, float {_f32(-104.0)}, float %x1",
        f"  %t = fmul float %x2, {_f32(1.4426950408889634)}",
        "  %n = call float @llvm.roundeven.f32(float %t)",
        # Cody-Waite reduction: ln2_hi has few bits, so n * ln2_hi is exact;
        # contracted into multiply-adds (two instructions fewer, the products
        # unrounded: SiLU over 1x96x112x112, 377 -> 350 us on one core)
        f"  %nh = fmul contract float %n, {_f32(-0.693359375)}",
        "  %r0 = fadd contract float %x2, %nh",
        f"  %nl = fmul contract float %n, {_f32(2.12194440e-4)}",
        "  %r = fadd contract float %r0, %nl",
        *poly,
        *scale,
        "  ret float %y",
        "}",
    ])


def _sigmoidf_ir(silu: bool = False) -> str:
    """sigmoid of a float32, ``1 / (1 + exp(-x))``: exp's reduction with a
    degree-5 polynomial, in 16 vector operations on AVX-512 where
    ``1 / (1 + expf(-|x|))`` with a select by sign took 20 (one core: SiLU
    over 1x96x112x112 388 -> 331 us, a 1x1 conv 16 -> 96 + SiLU over
    112x112 875 -> 744 us):

    - ``x`` clamped to [-88.72, 18]: above 18, ``exp(-x)`` is below half an
      ulp of 1 (the result rounds to 1); from -88.72 down, ``2**n`` is
      infinite and the result 0. NaN passes the clamps (and the rest).
    - ``n = round(-x * log2(e))`` by adding a "magic" ``1.5 * 2**23 + 127``
      (one multiply-add: the sum's last bits are ``n + 127``), so ``2**n``
      is those bits shifted into the exponent field (no conversions to and
      from integers, and exact: ``n`` is within [-26, 128], 128 giving
      +inf).
    - the polynomial of exp in ``r' = x + n * ln2 = -r`` (its odd
      coefficients negated), so no negation of ``x`` either.

    Results that would be subnormal (x below about -87.3) are the quotient's
    rounding of them down to x = -88.38 and 0 below it (an absolute error
    under 2**-126, as with flush-to-zero); the others are within a few ulps
    (tests/backend/llvm/test_llvm_intrinsics.py states the bound).

    ``silu``: ``phasec.siluf``, SiLU ``x * sigmoid(x)`` as ``x / (1 + exp(-x))``
    (what the code generator emits for that product, see
    ``expressions._silu_operand``): one quotient instead of a reciprocal and a
    product, and ``e * 2**n + 1`` one multiply-add (one core, a 1x1 conv
    16 -> 96 + SiLU over 112x112: ~700 -> ~660 us; the sigmoid keeps its
    multiply and add: fused, a SiLU then mean over 1x1280x7x7 took 27 ->
    29 us, the same alternation twice). Its lower
    clamp is -88 (``2**n`` stays finite), also for the numerator: below
    x = -88 the result is SiLU(-88), under 6e-37 in magnitude; at -inf it
    is NaN, as ``-inf * sigmoid(-inf)`` is (numpy, the reference
    interpreter, ONNX Runtime), at the cost of one multiply-add."""
    odd_negated = tuple(c if k % 2 == 0 else -c for k, c in enumerate(_SIGMOID_EXP_POLY))
    poly, p = _horner("p", odd_negated, "%r")
    magic = 12582912.0 + 127.0  # 1.5 * 2**23 + the exponent bias
    # SiLU: x / (1 + exp(-x)), x clamped below as exp's operand is (its
    # value there is below 6e-37 in magnitude)
    if silu:
        name, fuse, result = "siluf", "contract ", "fdiv float %xl, %d"
        # (x * 0 - 88: -88, but NaN at -inf, as x * sigmoid(x) is there)
        clamps = [f"  %lo = fcmp olt float %x, {_f32(-88.0)}",
                  "  %x0 = fmul contract float %x, 0.0",
                  f"  %low = fadd contract float %x0, {_f32(-88.0)}",
                  "  %xl = select i1 %lo, float %low, float %x",
                  f"  %hi = fcmp ogt float %xl, {_f32(18.0)}",
                  f"  %x2 = select i1 %hi, float {_f32(18.0)}, float %xl"]
    else:
        name, fuse, result = "sigmoidf", "", "fdiv float 1.0, %d"
        clamps = [f"  %hi = fcmp ogt float %x, {_f32(18.0)}",
                  f"  %x1 = select i1 %hi, float {_f32(18.0)}, float %x",
                  f"  %lo = fcmp olt float %x1, {_f32(-88.72)}",
                  f"  %x2 = select i1 %lo, float {_f32(-88.72)}, float %x1"]
    return "\n".join([
        f"define internal float @phasec.{name}(float %x) alwaysinline nounwind "
        "memory(none) {",
        "entry:",
        *clamps,
        f"  %t = fmul contract float %x2, {_f32(-1.4426950408889634)}",
        f"  %s = fadd contract float %t, {_f32(magic)}",
        f"  %n = fsub float %s, {_f32(magic)}",
        f"  %nh = fmul contract float %n, {_f32(0.693359375)}",
        "  %r0 = fadd contract float %x2, %nh",
        f"  %nl = fmul contract float %n, {_f32(-2.12194440e-4)}",
        "  %r = fadd contract float %r0, %nl",
        *poly,
        "  %sb = bitcast float %s to i32",
        "  %eb = shl i32 %sb, 23",
        "  %scale = bitcast i32 %eb to float",
        f"  %e = fmul {fuse}float {p}, %scale",
        f"  %d = fadd {fuse}float %e, 1.0",
        f"  %y = {result}",
        "  ret float %y",
        "}",
    ])


def _erff_ir() -> str:
    """erf of a float32 without exp: two short polynomials, both evaluated
    (SIMD lanes cannot branch) and one selected.

    |x| < 1.25: x + x * C(x*x), the form whose rounding errors are scaled by
    the small correction C (|C| <= 0.27). 1.25 <= |x| <= 3.92: 1 - g(u)**8
    with erfc ~ g**8 (three squarings). |x| is clamped to 3.92, where erf
    already rounds to 1; NaN passes through (the comparisons are ordered, so
    it selects the large branch, which keeps it). About 25 vector operations,
    a third of the former exp-based version; measured error below 2 ulps
    (dense grids against float64)."""
    small, ps = _horner("s", _ERF_SMALL, "%t")
    large, pl = _horner("l", _ERFC_ROOT8, "%u")
    return "\n".join([
        "define internal float @phasec.erff(float %x) alwaysinline nounwind memory(none) {",
        "entry:",
        "  %ax = call float @llvm.fabs.f32(float %x)",
        f"  %hi = fcmp ogt float %ax, {_f32(_ERF_CLAMP)}",
        f"  %a = select i1 %hi, float {_f32(_ERF_CLAMP)}, float %ax",
        "  %t = fmul float %a, %a",
        *small,
        f"  %sm = fmul contract float %a, {ps}",
        "  %small = fadd contract float %sm, %a",
        f"  %us = fmul contract float %a, {_f32(_ERF_U_SCALE)}",
        f"  %u = fadd contract float %us, {_f32(_ERF_U_OFFSET)}",
        *large,
        f"  %g2 = fmul float {pl}, {pl}",
        "  %g4 = fmul float %g2, %g2",
        "  %g8 = fmul float %g4, %g4",
        f"  %big = fsub float {_f32(1.0)}, %g8",
        f"  %issmall = fcmp olt float %a, {_f32(_ERF_SPLIT)}",
        "  %r = select i1 %issmall, float %small, float %big",
        "  %y = call float @llvm.copysign.f32(float %r, float %x)",
        "  ret float %y",
        "}",
    ])


def _tanhf_ir() -> str:
    small, ps = _horner("s", _TANH_SMALL, "%x2")
    return "\n".join([
        "define internal float @phasec.tanhf(float %x) alwaysinline nounwind memory(none) {",
        "entry:",
        "  %ax = call float @llvm.fabs.f32(float %x)",
        "  %x2 = fmul float %x, %x",
        "  %x3 = fmul float %x, %x2",
        *small,
        f"  %sp = fmul contract float %x3, {ps}",
        "  %small = fadd contract float %x, %sp",
        # 1 - 2 / (exp(2|x|) + 1): exp overflows to inf for large |x|, giving 1.
        f"  %ax2 = fmul float %ax, {_f32(2.0)}",
        "  %e = call float @phasec.expf(float %ax2)",
        f"  %d = fadd float %e, {_f32(1.0)}",
        f"  %q = fdiv float {_f32(2.0)}, %d",
        f"  %big0 = fsub float {_f32(1.0)}, %q",
        "  %big = call float @llvm.copysign.f32(float %big0, float %x)",
        f"  %issmall = fcmp olt float %ax, {_f32(0.625)}",
        "  %y = select i1 %issmall, float %small, float %big",
        "  ret float %y",
        "}",
    ])


def _logf_ir(base2: bool) -> str:
    """log (or log2) of a float32: x = 2**e * m with m in [sqrt(1/2), sqrt(2))."""
    name = "phasec.log2f" if base2 else "phasec.logf"
    poly, p = _horner("p", _LOG_POLY, "%u")
    if base2:  # e + log(m) * log2(e): exact for powers of two
        tail = [f"  %rl = fmul contract float %r, {_f32(1.4426950408889634)}",
                "  %y0 = fadd float %ef, %rl"]
    else:  # e * ln2 split in two parts, as in exp
        tail = [f"  %eh = fmul float %ef, {_f32(0.693359375)}",
                f"  %el = fmul float %ef, {_f32(-2.12194440e-4)}",
                "  %rel = fadd float %r, %el",
                "  %y0 = fadd float %eh, %rel"]
    return "\n".join([
        f"define internal float @{name}(float %x) alwaysinline nounwind memory(none) {{",
        "entry:",
        # Subnormals: scale into the normal range first.
        f"  %den = fcmp olt float %x, {_f32(1.1754943508222875e-38)}",
        f"  %xsc = fmul float %x, {_f32(8388608.0)}",
        "  %xs = select i1 %den, float %xsc, float %x",
        "  %eadj = select i1 %den, i32 -23, i32 0",
        "  %bits = bitcast float %xs to i32",
        "  %ebits = lshr i32 %bits, 23",
        "  %eraw = and i32 %ebits, 255",
        "  %e0 = sub i32 %eraw, 127",
        "  %e1 = add i32 %e0, %eadj",
        "  %mb0 = and i32 %bits, 8388607",
        "  %mb = or i32 %mb0, 1065353216",
        "  %m0 = bitcast i32 %mb to float",
        f"  %big = fcmp ogt float %m0, {_f32(1.4142135623730951)}",
        f"  %mh = fmul float %m0, {_f32(0.5)}",
        "  %m = select i1 %big, float %mh, float %m0",
        "  %einc = zext i1 %big to i32",
        "  %e = add i32 %e1, %einc",
        "  %ef = sitofp i32 %e to float",
        f"  %f = fsub float %m, {_f32(1.0)}",
        f"  %f2 = fadd float %f, {_f32(2.0)}",
        "  %s = fdiv float %f, %f2",
        "  %u = fmul float %s, %s",
        *poly,
        "  %su = fmul float %s, %u",
        f"  %tail = fmul contract float %su, {p}",
        f"  %s2 = fmul float %s, {_f32(2.0)}",
        "  %r = fadd contract float %s2, %tail",
        *tail,
        # Special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN -> NaN.
        f"  %iszero = fcmp oeq float %x, {_f32(0.0)}",
        f"  %y1 = select i1 %iszero, float {_f32(float('-inf'))}, float %y0",
        f"  %isneg = fcmp olt float %x, {_f32(0.0)}",
        f"  %y2 = select i1 %isneg, float {_f32(float('nan'))}, float %y1",
        f"  %isinf = fcmp oeq float %x, {_f32(float('inf'))}",
        "  %y3 = select i1 %isinf, float %x, float %y2",
        "  %isnan = fcmp uno float %x, %x",
        "  %y = select i1 %isnan, float %x, float %y3",
        "  ret float %y",
        "}",
    ])


#: name -> (IR text, declarations it needs)
MATH_FUNCTIONS = {
    "phasec.expf": (_expf_ir(), {"llvm.roundeven.f32": "declare float @llvm.roundeven.f32(float)"}),
    "phasec.erff": (_erff_ir(), {"llvm.fabs.f32": "declare float @llvm.fabs.f32(float)",
                                 "llvm.copysign.f32":
                                     "declare float @llvm.copysign.f32(float, float)"}),
    "phasec.tanhf": (_tanhf_ir(), {"llvm.fabs.f32": "declare float @llvm.fabs.f32(float)",
                                   "llvm.copysign.f32":
                                       "declare float @llvm.copysign.f32(float, float)"}),
    "phasec.sigmoidf": (_sigmoidf_ir(), {}),
    "phasec.siluf": (_sigmoidf_ir(silu=True), {}),
    "phasec.logf": (_logf_ir(False), {}),
    "phasec.log2f": (_logf_ir(True), {}),
}
#: which math functions each one calls
MATH_DEPENDS = {"phasec.tanhf": ("phasec.expf",)}

_SCALEF_DECLS = {"llvm.roundeven.f32": "declare float @llvm.roundeven.f32(float)",
                 "llvm.ldexp.f32.i32": "declare float @llvm.ldexp.f32.i32(float, i32)"}
#: the AVX-512 forms (``scalef``), by name
_SCALEF = {"phasec.expf": (_expf_ir(scalef=True), _SCALEF_DECLS)}


def math_function(name: str, features: str = "") -> tuple[str, dict[str, str]]:
    """The IR text of math function ``name`` and the declarations it needs,
    for a target with LLVM feature string ``features`` ("+avx512f,..."; empty:
    the portable form of every function)."""
    if name == DOT4_FUNCTION:
        return dot4_function(features)
    if name.startswith(AMX_FUNCTION):
        return amx_function(name)
    if name in _SCALEF and "+avx512f" in features.split(","):
        return _SCALEF[name]
    return MATH_FUNCTIONS[name]
