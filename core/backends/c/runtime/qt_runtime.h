/* qt_runtime.h: the integer helpers every generated TF2IR network (core/backends/program.py) uses,
 * the C transcription of core/ir/fixedpoint.py.
 *
 * C99, no implementation-defined behaviour:
 *   - int32_t / int64_t are two's complement (C99 7.18.1.1: the exact-width types have no
 *     padding bits and a two's complement representation), so `~v == -v - 1` exactly.
 *   - `v >> s` of a negative v is implementation-defined (C99 6.5.7p5) and `v << s` of a
 *     negative v is undefined (6.5.7p4): neither is ever written. Floor shifts go through
 *     qt_floor_shift*, left shifts of signed values are multiplications by 2^s.
 *   - `/` truncates towards zero (C99 6.5.5p6, no longer implementation-defined as in C89):
 *     floor division corrects the quotient explicitly (qt_floor_div64).
 *
 * QT_SIMD: on GCC >= 11, x86-64, glibc, each layer function is compiled three times
 * (x86-64-v4 = AVX-512, x86-64-v3 = AVX2, baseline SSE2) and the loader picks the one the CPU
 * runs (target_clones / ifunc). The arithmetic is integer and exact, so every clone gives the
 * same bytes; -DQT_PORTABLE (or any other compiler/platform) gives a single plain C99 build.
 * A build for a SIMD host (the compiler defines __AVX2__, e.g. codegen.cflags -march=native) is
 * one build for that host: no clones, and conv takes qt_gemm.h's int8 microkernels.
 * A QT_SIMD function keeps its arrays at file scope, never on its stack: GCC 12.2 miscompiles
 * leaf functions built for x86-64-v4 that place an array in the red zone (a 16-byte aligned
 * vector store to an address that is 8 mod 16 after the prologue's pushes: SIGSEGV).
 */
#ifndef QT_RUNTIME_H
#define QT_RUNTIME_H

#include <stdint.h>
#include <string.h>

#if !defined(QT_PORTABLE) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && !defined(__AVX2__)
#define QT_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define QT_SIMD
#endif

/* GCC 12.2 at -O2 computed wrong bytes in a ViT's transpose of its keys ([4, 65, 8] -> [4, 8, 65]: its output read
 * stale), where -O1, -O2 -fno-ipa-cp, or the same function without `restrict` give the simulator's: the interprocedural
 * constant propagation that clones a function for its constant pointer arguments (every layer is called once, with
 * qt_arena + constant offsets). The clones buy nothing here, so the pass is off for the program. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-ipa-cp")
#endif

/* a constant that one build reads and another does not (the IR's weights beside their SIMD packing) */
#if defined(__GNUC__)
#define QT_MAYBE_UNUSED __attribute__((unused))
#else
#define QT_MAYBE_UNUSED
#endif

/* floor(v / 2^s), 0 <= s < 32: an arithmetic right shift written without shifting a negative
 * value. For v < 0, u = ~v = -v - 1 >= 0 and floor(v / 2^s) = -floor(u / 2^s) - 1 = ~(u >> s)
 * (as ceil((u + 1) / 2^s) = floor(u / 2^s) + 1). GCC and Clang compile it to one `sar`. */
static inline int32_t qt_floor_shift32(int32_t v, int s)
{
    return v < 0 ? ~(~v >> s) : v >> s;
}

/* the same for int64_t, 0 <= s < 64 */
static inline int64_t qt_floor_shift64(int64_t v, int s)
{
    return v < 0 ? ~(~v >> s) : v >> s;
}

/* v * 2^s, 0 <= s < 63, for |v * 2^s| < 2^63: a left shift of a signed value as a product */
static inline int64_t qt_shl64(int64_t v, int s)
{
    return v * ((int64_t)1 << s);
}

/* core/ir/fixedpoint.py round_shift: s > 0 is floor(v / 2^s + 1/2) = (v + 2^(s-1)) >> s (round half
 * up: -2.5 -> -2, 2.5 -> 3); s <= 0 is the exact v * 2^-s. |v| < 2^31, -31 <= s <= 62. */
static inline int64_t qt_round_shift64(int64_t v, int s)
{
    return s > 0 ? qt_floor_shift64(v + ((int64_t)1 << (s - 1)), s) : qt_shl64(v, -s);
}

/* floor(a / b) for b > 0: C99's `/` truncates towards zero, so a negative inexact quotient is
 * one too large. */
static inline int64_t qt_floor_div64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* clamp to [lo, hi] */
static inline int32_t qt_clamp32(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static inline int64_t qt_clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* saturate to int8 */
static inline int8_t qt_sat8(int64_t v)
{
    return (int8_t)qt_clamp64(v, -128, 127);
}

/* clamp to [-32768, 32767] and narrow: TFLite's 16x8 mode's int16 activations */
static inline int16_t qt_sat16(int64_t v)
{
    return (int16_t)qt_clamp64(v, -32768, 32767);
}

#include "qt_gemm.h"
#include "qt_tflite.h"

#endif /* QT_RUNTIME_H */
