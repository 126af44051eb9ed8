"""The 8-bit dot product of the integer GEMM, ``T.dot4_u8s8``, in LLVM IR.

``acc + T.dot4_u8s8(a, b)`` (int32 words holding four bytes each) adds
``sum(a.byte[q] * b.byte[q] for q in 0..3)``, the bytes of ``a`` unsigned
and those of ``b`` signed: exactly what one 32-bit lane of x86's
``vpdpbusd`` computes (no saturation; int32 wraps, as TIR's int32 does).

The kernel calls the scalar helper ``phasec.dot4_u8s8(acc, a, b)``, which
declares vector variants of 4, 8 and 16 lanes (the call site's
``vector-function-abi-variant``): the loop vectorizer replaces a vectorized
loop's calls by the variant of its width, and an always-inline pass after
the optimization pipeline (``objworker.optimize``) puts the variant's body
in place, so a register tile's inner loop is one broadcast and one
``vpdpbusd`` per vector of accumulators.

The instructions are chosen from the features of the target the kernel is
compiled for (the host's, as the kernel cache key records; see
``PHASEC_CPU_FEATURES`` in :mod:`.jit` to compile for fewer): with
AVX512-VNNI (``+avx512vnni``; 128- and 256-bit lanes also need
``+avx512vl``) or AVX-VNNI (``+avxvnni``, 128 and 256 bits) ``vpdpbusd``;
otherwise, with AVX2 (SSE2 for 4 lanes, AVX512-BW for 16), two ``vpmaddwd``
on the bytes zero- and sign-extended to 16 bits in place (each sums two
products of at most 255 * 128 into 32 bits: exact; never ``vpmaddubsw``,
whose 16-bit sums saturate); on other targets the same arithmetic in
generic IR. (On a CPU with AMX-INT8 the integer GEMM's whole tiles are
AMX tiles instead: :mod:`.amx`.)
"""

from __future__ import annotations

__all__ = ["DOT4_FUNCTION", "DOT4_VARIANTS", "dot4_function"]

#: the scalar helper the kernels call
DOT4_FUNCTION = "phasec.dot4_u8s8"
#: the call-site attribute naming its vector variants (lanes 4, 8, 16)
DOT4_VARIANTS = ('"vector-function-abi-variant"="'
                 + ",".join(f"_ZGV_LLVM_N{n}vvv_{DOT4_FUNCTION}({DOT4_FUNCTION}.v{n})"
                            for n in (4, 8, 16)) + '"')

_VNNI = {4: "llvm.x86.avx512.vpdpbusd.128", 8: "llvm.x86.avx512.vpdpbusd.256",
         16: "llvm.x86.avx512.vpdpbusd.512"}
_AVXVNNI = {4: "llvm.x86.avx2.vpdpbusd.128", 8: "llvm.x86.avx2.vpdpbusd.256"}


def _scalar() -> str:
    """The scalar form (remainder loops, unvectorized code): four products."""
    return "\n".join([
        f"define internal i32 @{DOT4_FUNCTION}(i32 %acc, i32 %a, i32 %b) noinline nounwind "
        "willreturn memory(none) {",
        "  %va = bitcast i32 %a to <4 x i8>",
        "  %vb = bitcast i32 %b to <4 x i8>",
        "  %za = zext <4 x i8> %va to <4 x i32>",
        "  %sb = sext <4 x i8> %vb to <4 x i32>",
        "  %m = mul <4 x i32> %za, %sb",
        "  %r = call i32 @llvm.vector.reduce.add.v4i32(<4 x i32> %m)",
        "  %s = add i32 %acc, %r",
        "  ret i32 %s",
        "}"])


def _head(n: int) -> str:
    v = f"<{n} x i32>"
    return (f"define internal {v} @{DOT4_FUNCTION}.v{n}({v} %acc, {v} %a, {v} %b) "
            "alwaysinline nounwind willreturn memory(none) {")


def _vnni_variant(n: int, callee: str) -> str:
    v = f"<{n} x i32>"
    return "\n".join([_head(n), f"  %r = call {v} @{callee}({v} %acc, {v} %a, {v} %b)",
                      f"  ret {v} %r", "}"])


def _pairs_variant(n: int) -> str:
    """Without VNNI: 16-bit operands, products summed in pairs (vpmaddwd), then pairs."""
    b4 = 4 * n
    evens = ", ".join(f"i32 {2 * i}" for i in range(2 * n))
    odds = ", ".join(f"i32 {2 * i + 1}" for i in range(2 * n))
    pe = ", ".join(f"i32 {2 * i}" for i in range(n))
    po = ", ".join(f"i32 {2 * i + 1}" for i in range(n))
    w, h = f"<{2 * n} x i32>", f"<{b4} x i16>"
    return "\n".join([
        _head(n),
        f"  %va = bitcast <{n} x i32> %a to <{b4} x i8>",
        f"  %vb = bitcast <{n} x i32> %b to <{b4} x i8>",
        f"  %za = zext <{b4} x i8> %va to {h}",
        f"  %sb = sext <{b4} x i8> %vb to {h}",
        f"  %ae = shufflevector {h} %za, {h} poison, <{2 * n} x i32> <{evens}>",
        f"  %ao = shufflevector {h} %za, {h} poison, <{2 * n} x i32> <{odds}>",
        f"  %be = shufflevector {h} %sb, {h} poison, <{2 * n} x i32> <{evens}>",
        f"  %bo = shufflevector {h} %sb, {h} poison, <{2 * n} x i32> <{odds}>",
        f"  %ae32 = sext <{2 * n} x i16> %ae to {w}",
        f"  %ao32 = sext <{2 * n} x i16> %ao to {w}",
        f"  %be32 = sext <{2 * n} x i16> %be to {w}",
        f"  %bo32 = sext <{2 * n} x i16> %bo to {w}",
        f"  %me = mul nsw {w} %ae32, %be32",
        f"  %mo = mul nsw {w} %ao32, %bo32",
        f"  %p = add nsw {w} %me, %mo",  # vpmaddwd: |each product| <= 32640, the pair fits
        f"  %pe = shufflevector {w} %p, {w} poison, <{n} x i32> <{pe}>",
        f"  %po = shufflevector {w} %p, {w} poison, <{n} x i32> <{po}>",
        f"  %q = add <{n} x i32> %pe, %po",
        f"  %r = add <{n} x i32> %acc, %q",
        f"  ret <{n} x i32> %r", "}"])


#: x86's vpmaddwd by lanes of the result (and the feature it needs)
_PMADDWD = {4: ("llvm.x86.sse2.pmadd.wd", "+sse2"), 8: ("llvm.x86.avx2.pmadd.wd", "+avx2"),
            16: ("llvm.x86.avx512.pmaddw.d.512", "+avx512bw")}


def _madd_variant(n: int, callee: str) -> str:
    """Without VNNI, with vpmaddwd: the bytes of each 32-bit lane taken in
    place as 16-bit values, those at even positions (0, 2: ``a & 0xff``,
    ``(b << 8) >> 8`` sign-filled) and at odd ones (1, 3: ``a >> 8``,
    ``b >> 8`` sign-filled), then two vpmaddwd (each sums two products of
    at most 255 * 128 into 32 bits: exact) and two additions."""
    v, h = f"<{n} x i32>", f"<{2 * n} x i16>"

    def splat(x: int) -> str:
        return f"<{', '.join(f'i16 {x}' for _ in range(2 * n))}>"
    return "\n".join([
        _head(n),
        f"  %a16 = bitcast {v} %a to {h}",
        f"  %b16 = bitcast {v} %b to {h}",
        f"  %ae = and {h} %a16, {splat(255)}",
        f"  %ao = lshr {h} %a16, {splat(8)}",
        f"  %bs = shl {h} %b16, {splat(8)}",
        f"  %be = ashr {h} %bs, {splat(8)}",
        f"  %bo = ashr {h} %b16, {splat(8)}",
        f"  %pe = call {v} @{callee}({h} %ae, {h} %be)",
        f"  %po = call {v} @{callee}({h} %ao, {h} %bo)",
        f"  %p = add {v} %pe, %po",
        f"  %r = add {v} %acc, %p",
        f"  ret {v} %r", "}"])


def dot4_function(features: str = "") -> tuple[str, dict[str, str]]:
    """The IR text of the dot4 helper and its variants, and the declarations
    they need, for a target with LLVM feature string ``features``."""
    flags = set(features.split(","))
    decls = {"llvm.vector.reduce.add.v4i32":
             "declare i32 @llvm.vector.reduce.add.v4i32(<4 x i32>)"}
    parts = [_scalar()]
    for n in (4, 8, 16):
        callee = None
        if "+avx512vnni" in flags and (n == 16 or "+avx512vl" in flags):
            callee = _VNNI[n]
        elif "+avxvnni" in flags and n in _AVXVNNI:
            callee = _AVXVNNI[n]
        madd, needs = _PMADDWD[n]
        if callee is None and needs in flags:
            h, v = f"<{2 * n} x i16>", f"<{n} x i32>"
            decls[madd] = f"declare {v} @{madd}({h}, {h})"
            parts.append(_madd_variant(n, madd))
        elif callee is None:  # not x86 (or no AVX2): generic IR, exact all the same
            parts.append(_pairs_variant(n))
        else:
            v = f"<{n} x i32>"
            decls[callee] = f"declare {v} @{callee}({v}, {v}, {v})"
            parts.append(_vnni_variant(n, callee))
    # kept until the loop vectorizer has used them (nothing calls them before)
    used = ", ".join(f"ptr @{DOT4_FUNCTION}.v{n}" for n in (4, 8, 16))
    parts.append(f"@llvm.compiler.used = appending global [3 x ptr] [{used}], "
                 'section "llvm.metadata"')
    return "\n".join(parts), decls
