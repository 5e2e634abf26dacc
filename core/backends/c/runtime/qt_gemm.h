/* qt_gemm.h: the int8 GEMM microkernels of the SIMD conv paths (core/backends/c/ops/conv.py),
 * included by qt_runtime.h. Which path a build takes is the compiler's choice of instruction set,
 * read from its feature macros (e.g. `-march=native`, codegen.cflags):
 *   QT_INT8_SIMD 2  AVX-512 VNNI (__AVX512VNNI__, __AVX512BW__, __AVX512VL__): vpdpbusd, 64 products per instruction
 *   QT_INT8_SIMD 1  AVX2 (__AVX2__): int8 widened to int16, vpmaddwd, 16 products per instruction
 *   QT_INT8_SIMD 0  neither, or -DQT_PORTABLE: the layers' plain C99 (no intrinsics at all)
 *
 * The GEMM: out[p][co] = clamp(requantize(sum_k a[p][k] * w[k][co] + offset[co]) + zero_point, low, high),
 * p < rows, co < co_count, int8 out rows co_count apart, requantize either TF2IR's floor(v / 2^shift) (tflite
 * NULL) or TFLite's MultiplyByQuantizedMultiplier, rounding twice, per output channel (tflite: per block of
 * 16 channels, [multiplier 16][left shift 16][right shift 16] int32; qt_tflite.h's qt_mbqm, lane by lane).
 *   a       rows of kp qt_a_t (kp % 4 == 0), readable up to the next multiple of QT_GEMM_ROWS rows; each
 *           the int8 activation x as QT_A(x): VNNI multiplies unsigned by signed bytes, so it takes the
 *           byte x + 128 (QT_A_BIAS; all bytes QT_A_BIAS is a row of zeros); AVX2 takes x as int16.
 *   packed  the weights at codegen time (conv.py conv_pack_c), per block of 16 output channels, zero
 *           past K and past Co: VNNI [kp / 4][16][4] int8 (a channel's k-quad in one 32-bit lane),
 *           AVX2 [kp / 2][16][2] int16 (a channel's k-pair in one 32-bit lane)
 *   offset  int32 per output channel (padded to whole blocks): bias << bias_shift + 2^(shift - 1), and
 *           for VNNI also - 128 * sum_k w[k][co], which takes the bias of `a` back out.
 * Exactness: vector int32 additions wrap (mod 2^32). Each path's sum is congruent mod 2^32 to the
 * kernel's sum_k x * w + offset; the layer's accumulator bound (<= 2^31 - 1, checked at codegen)
 * puts that sum in int32, so the wrapped int32 is exactly it. VNNI's byte products are exact in its
 * int16 intermediates (|255 x -128| < 2^15, 4 summed in 32 bits); vpmaddwd's pairs of int8 products
 * are exact in int32. The shift is arithmetic (floor), the clamp within int8: the same bytes as
 * the kernel, tested against the portable C for every path (tests/test_codegen.py, tests/test_tflite_c.py).
 * TFLite's requantization in vectors: the left shift wraps int32 as TFLite's does; the doubling high multiply
 * takes 64-bit products of the even and the odd lanes (the multiplier is never negative, so never INT32_MIN:
 * no saturation case), whose bits 31..62 after + 2^30 are its int32 result; the rounding right shift is
 * gemmlowp's own remainder test, free of overflow.
 */
#ifndef QT_GEMM_H
#define QT_GEMM_H

#if !defined(QT_PORTABLE) && defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define QT_INT8_SIMD 2
#define QT_A_BIAS 0x80
typedef uint8_t qt_a_t; /* x + 128: x's byte with its top bit flipped */
typedef int8_t qt_w_t;
#define QT_A(x) ((uint8_t)((uint8_t)(x) ^ QT_A_BIAS))
#elif !defined(QT_PORTABLE) && defined(__AVX2__)
#define QT_INT8_SIMD 1
#define QT_A_BIAS 0
typedef int16_t qt_a_t; /* x widened */
typedef int16_t qt_w_t;
#define QT_A(x) ((int16_t)(x))
#else
#define QT_INT8_SIMD 0
#define QT_A_BIAS 0
#endif

#define QT_GEMM_ROWS 4 /* rows per tile: `a` is read in whole tiles */

#if QT_INT8_SIMD
#include <immintrin.h>

static inline int32_t qt_load32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4); /* unaligned, without breaking aliasing rules */
    return v;
}
#endif

#if QT_INT8_SIMD == 2
/* TFLite's MultiplyByQuantizedMultiplier (rounding twice) of 16 lanes; rq: [multiplier 16][left 16][right 16] */
static inline __attribute__((always_inline)) __m512i qt_vnni_tflite(__m512i v, const int32_t *rq)
{
    const __m512i m = _mm512_loadu_si512(rq), left = _mm512_loadu_si512(rq + 16), right = _mm512_loadu_si512(rq + 32);
    const __m512i nudge = _mm512_set1_epi64(INT64_C(1) << 30), one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
    __m512i even, odd, mask, remainder, threshold, shifted;
    v = _mm512_sllv_epi32(v, left);
    even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(v, m), nudge), 31);
    odd = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), _mm512_srli_epi64(m, 32)), nudge), 31);
    v = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    remainder = _mm512_and_si512(v, mask);
    threshold = _mm512_srai_epi32(mask, 1);
    threshold = _mm512_mask_add_epi32(threshold, _mm512_cmplt_epi32_mask(v, zero), threshold, one);
    shifted = _mm512_srav_epi32(v, right);
    return _mm512_mask_add_epi32(shifted, _mm512_cmpgt_epi32_mask(remainder, threshold), shifted, one);
}

/* requantize 16 int32 sums of block `block` and store `lanes` (1..16) bytes at out */
static inline __attribute__((always_inline)) void qt_vnni_store(__m512i acc, const int32_t *offset, const int32_t *tflite,
                                                              int zero_point, __m128i shift, int low, int high, int8_t *out,
                                                              int lanes)
{
    __m512i v = _mm512_add_epi32(acc, _mm512_loadu_si512(offset));
    v = tflite ? _mm512_add_epi32(qt_vnni_tflite(v, tflite), _mm512_set1_epi32(zero_point)) : _mm512_sra_epi32(v, shift);
    v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(high)), _mm512_set1_epi32(low));
    _mm_mask_storeu_epi8(out, (__mmask16)((1u << lanes) - 1u), _mm512_cvtepi32_epi8(v));
}

/* QT_GEMM_ROWS rows x 2 blocks (or 1, two == 0) of 16 output channels */
static inline __attribute__((always_inline)) void qt_vnni_tile(const uint8_t *a, int kp, const int8_t *w0, const int8_t *w1,
                                                             int two, const int32_t *offset, const int32_t *tflite, int zero_point,
                                                             __m128i shift, int low, int high, int8_t *out, int co_count, int rows,
                                                             int lanes0, int lanes1)
{
    const int32_t *tflite1 = tflite ? tflite + 48 : NULL;
    __m512i c00 = _mm512_setzero_si512(), c10 = c00, c20 = c00, c30 = c00;
    __m512i c01 = c00, c11 = c00, c21 = c00, c31 = c00;
    int k;
    for (k = 0; k < kp; k += 4) {
        __m512i b0 = _mm512_loadu_si512(w0 + 16 * k), b1 = two ? _mm512_loadu_si512(w1 + 16 * k) : b0;
        __m512i x0 = _mm512_set1_epi32(qt_load32(a + k)), x1 = _mm512_set1_epi32(qt_load32(a + kp + k));
        __m512i x2 = _mm512_set1_epi32(qt_load32(a + 2 * kp + k)), x3 = _mm512_set1_epi32(qt_load32(a + 3 * kp + k));
        c00 = _mm512_dpbusd_epi32(c00, x0, b0);
        c10 = _mm512_dpbusd_epi32(c10, x1, b0);
        c20 = _mm512_dpbusd_epi32(c20, x2, b0);
        c30 = _mm512_dpbusd_epi32(c30, x3, b0);
        if (two) {
            c01 = _mm512_dpbusd_epi32(c01, x0, b1);
            c11 = _mm512_dpbusd_epi32(c11, x1, b1);
            c21 = _mm512_dpbusd_epi32(c21, x2, b1);
            c31 = _mm512_dpbusd_epi32(c31, x3, b1);
        }
    }
    qt_vnni_store(c00, offset, tflite, zero_point, shift, low, high, out, lanes0);
    if (two)
        qt_vnni_store(c01, offset + 16, tflite1, zero_point, shift, low, high, out + 16, lanes1);
    if (rows > 1) {
        qt_vnni_store(c10, offset, tflite, zero_point, shift, low, high, out + co_count, lanes0);
        if (two)
            qt_vnni_store(c11, offset + 16, tflite1, zero_point, shift, low, high, out + co_count + 16, lanes1);
    }
    if (rows > 2) {
        qt_vnni_store(c20, offset, tflite, zero_point, shift, low, high, out + 2 * co_count, lanes0);
        if (two)
            qt_vnni_store(c21, offset + 16, tflite1, zero_point, shift, low, high, out + 2 * co_count + 16, lanes1);
    }
    if (rows > 3) {
        qt_vnni_store(c30, offset, tflite, zero_point, shift, low, high, out + 3 * co_count, lanes0);
        if (two)
            qt_vnni_store(c31, offset + 16, tflite1, zero_point, shift, low, high, out + 3 * co_count + 16, lanes1);
    }
}
/* 2 x QT_GEMM_ROWS whole rows x 1 block of 16 output channels: eight independent sums, where one block's four
 * would wait on vpdpbusd's latency (a layer of 16 channels or fewer, the last block of an odd count) */
static inline __attribute__((always_inline)) void qt_vnni_tile8(const uint8_t *a, int kp, const int8_t *w0, const int32_t *offset,
                                                              const int32_t *tflite, int zero_point, __m128i shift, int low,
                                                              int high, int8_t *out, int co_count, int lanes0)
{
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    int k;
    for (k = 0; k < kp; k += 4) {
        __m512i b0 = _mm512_loadu_si512(w0 + 16 * k);
        c0 = _mm512_dpbusd_epi32(c0, _mm512_set1_epi32(qt_load32(a + k)), b0);
        c1 = _mm512_dpbusd_epi32(c1, _mm512_set1_epi32(qt_load32(a + kp + k)), b0);
        c2 = _mm512_dpbusd_epi32(c2, _mm512_set1_epi32(qt_load32(a + 2 * kp + k)), b0);
        c3 = _mm512_dpbusd_epi32(c3, _mm512_set1_epi32(qt_load32(a + 3 * kp + k)), b0);
        c4 = _mm512_dpbusd_epi32(c4, _mm512_set1_epi32(qt_load32(a + 4 * kp + k)), b0);
        c5 = _mm512_dpbusd_epi32(c5, _mm512_set1_epi32(qt_load32(a + 5 * kp + k)), b0);
        c6 = _mm512_dpbusd_epi32(c6, _mm512_set1_epi32(qt_load32(a + 6 * kp + k)), b0);
        c7 = _mm512_dpbusd_epi32(c7, _mm512_set1_epi32(qt_load32(a + 7 * kp + k)), b0);
    }
    qt_vnni_store(c0, offset, tflite, zero_point, shift, low, high, out, lanes0);
    qt_vnni_store(c1, offset, tflite, zero_point, shift, low, high, out + co_count, lanes0);
    qt_vnni_store(c2, offset, tflite, zero_point, shift, low, high, out + 2 * co_count, lanes0);
    qt_vnni_store(c3, offset, tflite, zero_point, shift, low, high, out + 3 * co_count, lanes0);
    qt_vnni_store(c4, offset, tflite, zero_point, shift, low, high, out + 4 * co_count, lanes0);
    qt_vnni_store(c5, offset, tflite, zero_point, shift, low, high, out + 5 * co_count, lanes0);
    qt_vnni_store(c6, offset, tflite, zero_point, shift, low, high, out + 6 * co_count, lanes0);
    qt_vnni_store(c7, offset, tflite, zero_point, shift, low, high, out + 7 * co_count, lanes0);
}
#endif

#if QT_INT8_SIMD == 1
static QT_MAYBE_UNUSED int8_t qt_avx2_partial[16]; /* a block's bytes when fewer than 16 are stored (file scope: see qt_runtime.h) */

/* TFLite's MultiplyByQuantizedMultiplier (rounding twice) of 8 lanes, the per-lane multipliers, left and right
 * shifts at m, m + 16 and m + 32 (a block's [multiplier 16][left 16][right 16]) */
static inline __attribute__((always_inline)) __m256i qt_avx2_tflite(__m256i v, const int32_t *rq)
{
    const __m256i m = _mm256_loadu_si256((const __m256i *)rq), left = _mm256_loadu_si256((const __m256i *)(rq + 16));
    const __m256i right = _mm256_loadu_si256((const __m256i *)(rq + 32)), one = _mm256_set1_epi32(1);
    const __m256i nudge = _mm256_set1_epi64x(INT64_C(1) << 30), zero = _mm256_setzero_si256();
    __m256i even, odd, mask, remainder, threshold;
    v = _mm256_sllv_epi32(v, left);
    even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(v, m), nudge), 31);
    odd = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), _mm256_srli_epi64(m, 32)), nudge), 31);
    v = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    remainder = _mm256_and_si256(v, mask);
    threshold = _mm256_add_epi32(_mm256_srai_epi32(mask, 1), _mm256_and_si256(_mm256_cmpgt_epi32(zero, v), one));
    return _mm256_add_epi32(_mm256_srav_epi32(v, right), _mm256_and_si256(_mm256_cmpgt_epi32(remainder, threshold), one));
}

/* 16 int32 sums (channels 0-7, 8-15) requantized, `lanes` (1..16) bytes stored at out */
static inline __attribute__((always_inline)) void qt_avx2_store(__m256i lo, __m256i hi, const int32_t *offset, const int32_t *tflite,
                                                              int zero_point, __m128i shift, __m256i low, __m256i high, int8_t *out,
                                                              int lanes)
{
    __m256i packed16;
    __m128i bytes;
    lo = _mm256_add_epi32(lo, _mm256_loadu_si256((const __m256i *)offset));
    hi = _mm256_add_epi32(hi, _mm256_loadu_si256((const __m256i *)(offset + 8)));
    if (tflite) {
        lo = _mm256_add_epi32(qt_avx2_tflite(lo, tflite), _mm256_set1_epi32(zero_point));
        hi = _mm256_add_epi32(qt_avx2_tflite(hi, tflite + 8), _mm256_set1_epi32(zero_point));
    } else {
        lo = _mm256_sra_epi32(lo, shift);
        hi = _mm256_sra_epi32(hi, shift);
    }
    lo = _mm256_max_epi32(_mm256_min_epi32(lo, high), low);
    hi = _mm256_max_epi32(_mm256_min_epi32(hi, high), low);
    /* packs works within 128-bit halves: [lo 0-3, hi 0-3 | lo 4-7, hi 4-7]; the permute puts them in order */
    packed16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    bytes = _mm_packs_epi16(_mm256_castsi256_si128(packed16), _mm256_extracti128_si256(packed16, 1));
    if (lanes == 16) {
        _mm_storeu_si128((__m128i *)out, bytes);
    } else {
        _mm_storeu_si128((__m128i *)qt_avx2_partial, bytes);
        memcpy(out, qt_avx2_partial, (size_t)lanes);
    }
}

/* QT_GEMM_ROWS rows x 1 block of 16 output channels: each pair of a row's int16 activations
 * broadcast against the block's k-pair ([16][2] int16), vpmaddwd summing the pair per channel */
static inline __attribute__((always_inline)) void qt_avx2_tile(const int16_t *a, int kp, const int16_t *w, const int32_t *offset,
                                                             const int32_t *tflite, int zero_point, __m128i shift, __m256i low,
                                                             __m256i high, int8_t *out, int co_count, int rows, int lanes)
{
    __m256i c0l = _mm256_setzero_si256(), c0h = c0l, c1l = c0l, c1h = c0l, c2l = c0l, c2h = c0l, c3l = c0l, c3h = c0l;
    int k;
    for (k = 0; k < kp; k += 2) {
        __m256i bl = _mm256_loadu_si256((const __m256i *)(w + 16 * k)), bh = _mm256_loadu_si256((const __m256i *)(w + 16 * k + 16));
        __m256i x0 = _mm256_set1_epi32(qt_load32(a + k)), x1 = _mm256_set1_epi32(qt_load32(a + kp + k));
        __m256i x2 = _mm256_set1_epi32(qt_load32(a + 2 * kp + k)), x3 = _mm256_set1_epi32(qt_load32(a + 3 * kp + k));
        c0l = _mm256_add_epi32(c0l, _mm256_madd_epi16(x0, bl));
        c0h = _mm256_add_epi32(c0h, _mm256_madd_epi16(x0, bh));
        c1l = _mm256_add_epi32(c1l, _mm256_madd_epi16(x1, bl));
        c1h = _mm256_add_epi32(c1h, _mm256_madd_epi16(x1, bh));
        c2l = _mm256_add_epi32(c2l, _mm256_madd_epi16(x2, bl));
        c2h = _mm256_add_epi32(c2h, _mm256_madd_epi16(x2, bh));
        c3l = _mm256_add_epi32(c3l, _mm256_madd_epi16(x3, bl));
        c3h = _mm256_add_epi32(c3h, _mm256_madd_epi16(x3, bh));
    }
    qt_avx2_store(c0l, c0h, offset, tflite, zero_point, shift, low, high, out, lanes);
    if (rows > 1)
        qt_avx2_store(c1l, c1h, offset, tflite, zero_point, shift, low, high, out + co_count, lanes);
    if (rows > 2)
        qt_avx2_store(c2l, c2h, offset, tflite, zero_point, shift, low, high, out + 2 * co_count, lanes);
    if (rows > 3)
        qt_avx2_store(c3l, c3h, offset, tflite, zero_point, shift, low, high, out + 3 * co_count, lanes);
}
#endif

#if QT_INT8_SIMD
/* The GEMM above over `rows` rows of `a` and `blocks` blocks of 16 output channels (unused by a network
 * without an int32 conv). */
static QT_MAYBE_UNUSED void qt_gemm_s8(const qt_a_t *a, int rows, int kp, const qt_w_t *packed, int blocks, const int32_t *offset,
                                       const int32_t *tflite, int zero_point, int shift, int low, int high, int8_t *out, int co_count)
{
    __m128i count = _mm_cvtsi32_si128(shift);
    int p, b;
#if QT_INT8_SIMD == 2
    for (b = 0; b < blocks; b += 2) {
        const int8_t *w0 = packed + (long)b * 16 * kp;
        int lanes0 = co_count - 16 * b < 16 ? co_count - 16 * b : 16;
        int lanes1 = co_count - 16 * (b + 1) < 16 ? co_count - 16 * (b + 1) : 16;
        for (p = 0; p < rows; p += QT_GEMM_ROWS) {
            const uint8_t *x = a + (long)p * kp;
            int8_t *o = out + (long)p * co_count + 16 * b;
            int left = rows - p;
            const int32_t *rq = tflite ? tflite + 48 * b : NULL;
            if (b + 1 < blocks) {
                qt_vnni_tile(x, kp, w0, w0 + 16 * kp, 1, offset + 16 * b, rq, zero_point, count, low, high, o, co_count, left, lanes0,
                             lanes1);
            } else if (left >= 2 * QT_GEMM_ROWS) {
                qt_vnni_tile8(x, kp, w0, offset + 16 * b, rq, zero_point, count, low, high, o, co_count, lanes0);
                p += QT_GEMM_ROWS;
            } else {
                qt_vnni_tile(x, kp, w0, w0, 0, offset + 16 * b, rq, zero_point, count, low, high, o, co_count, left, lanes0, 0);
            }
        }
    }
#else
    __m256i lo = _mm256_set1_epi32(low), hi = _mm256_set1_epi32(high);
    for (b = 0; b < blocks; b++) {
        const int16_t *w = packed + (long)b * 16 * kp;
        int lanes = co_count - 16 * b < 16 ? co_count - 16 * b : 16;
        for (p = 0; p < rows; p += QT_GEMM_ROWS)
            qt_avx2_tile(a + (long)p * kp, kp, w, offset + 16 * b, tflite ? tflite + 48 * b : NULL, zero_point, count, lo, hi,
                         out + (long)p * co_count + 16 * b, co_count, rows - p, lanes);
    }
#endif
}
#endif

#endif /* QT_GEMM_H */
