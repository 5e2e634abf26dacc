/* qt_isa.h: the reference simulator of the accelerator's instruction set (core/backends/accel/isa.py
 * has the specification and the encoder), compiled into the generated program so that every
 * accelerator function runs on a CPU exactly as the hardware would run it.
 *
 * The including file defines the machine first:
 *   QT_ISA_BLOCK      the GEMM block (channels per vector, B)
 *   QT_ISA_INP_BYTES  QT_ISA_WGT_BYTES  QT_ISA_ACC_BYTES   the on-chip buffers, in bytes
 * Where each field of an instruction lies comes from qt_isa_layout.h, which the code generator
 * writes from the same table its encoder uses (isa.py's LAYOUT).
 *
 * Arithmetic is that of the hardware, written without undefined or implementation-defined C:
 * the accumulators wrap modulo 2^32 (uint32_t; the code generator proves they never need to),
 * RSHR, SHL, RMUL and RSHRA are computed in int64 (qt_runtime.h's helpers), LSL in uint32, STORE
 * keeps the low 8 bits.
 * Every instruction is checked against the buffers and the DRAM segments; a violation stops
 * the program naming the function, the instruction index and what it addressed (exit 3).
 */
#ifndef QT_ISA_H
#define QT_ISA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qt_runtime.h"
#include "qt_isa_layout.h"

#define QT_ISA_WORDS 16
#define QT_ISA_B QT_ISA_BLOCK
#define QT_ISA_INP_UNITS (QT_ISA_INP_BYTES / QT_ISA_B)
#define QT_ISA_WGT_UNITS (QT_ISA_WGT_BYTES / (QT_ISA_B * QT_ISA_B))
#define QT_ISA_ACC_UNITS (QT_ISA_ACC_BYTES / (4 * QT_ISA_B))

static int8_t qt_isa_inp[QT_ISA_INP_UNITS][QT_ISA_B];
static int8_t qt_isa_wgt[QT_ISA_WGT_UNITS][QT_ISA_B][QT_ISA_B];
#define QT_ISA_WGTV_UNITS (QT_ISA_WGT_UNITS * QT_ISA_B) /* WGT as B-int8 vectors (WGTV loads, depthwise GEMMs) */
#define QT_ISA_WGTV(v) (&qt_isa_wgt[0][0][0] + (v) * QT_ISA_B)
static int32_t qt_isa_acc[QT_ISA_ACC_UNITS][QT_ISA_B];

typedef struct {
    const char *function;
    long pc;
} qt_isa_where;

static void qt_isa_fail(qt_isa_where at, const char *what, long value, long limit)
{
    fprintf(stderr, "accelerator function %s, instruction %ld: %s (%ld, limit %ld)\n", at.function, at.pc, what, value, limit);
    exit(3);
}

static uint32_t qt_isa_word(const uint8_t *p, int k)
{
    p += 4 * k;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* two's complement reading of a 32-bit word, without an out-of-range conversion */
static int32_t qt_isa_signed(uint32_t w)
{
    return w <= (uint32_t)INT32_MAX ? (int32_t)w : (int32_t)(w - 2147483648u) - INT32_MAX - 1;
}

/* field F of an instruction of kind K (qt_isa_layout.h): unsigned, and sign-extended */
#define QT_FIELD(insn, K, F) qt_isa_field((insn), QT_##K##_##F##_WORD, QT_##K##_##F##_SHIFT, QT_##K##_##F##_BITS)
#define QT_SFIELD(insn, K, F) qt_isa_sfield((insn), QT_##K##_##F##_WORD, QT_##K##_##F##_SHIFT, QT_##K##_##F##_BITS)

static uint32_t qt_isa_field(const uint8_t *insn, int word, int shift, int bits)
{
    uint32_t value = qt_isa_word(insn, word) >> shift;
    return bits >= 32 ? value : value & ((1u << bits) - 1u);
}

static long qt_isa_sfield(const uint8_t *insn, int word, int shift, int bits)
{
    uint32_t value = qt_isa_field(insn, word, shift, bits);
    if (bits >= 32)
        return qt_isa_signed(value);
    return value >> (bits - 1) ? (long)value - (1L << bits) : (long)value;
}

static int8_t qt_isa_low8(int32_t v)
{
    uint32_t low = (uint32_t)v & 0xFFu;
    return (int8_t)(low > 127u ? (int32_t)low - 256 : (int32_t)low);
}

/* the lowest and highest value of base + i . f over the loop nest (every extent >= 1) */
static void qt_isa_range(long base, const long *f, const long *e, long *low, long *high)
{
    int k;
    *low = *high = base;
    for (k = 0; k < 3; k++) {
        long reach = (e[k] - 1) * f[k];
        if (reach < 0)
            *low += reach;
        else
            *high += reach;
    }
}

/* that range checked against [0, units) */
static void qt_isa_check_index(qt_isa_where at, const char *what, long base, const long *f, const long *e, long units)
{
    long low, high;
    qt_isa_range(base, f, e, &low, &high);
    if (low < 0)
        qt_isa_fail(at, what, low, 0);
    if (high >= units)
        qt_isa_fail(at, what, high, units - 1);
}

/* the bytes a 3-D DMA box of `unit`-byte units touches, checked against [0, segment_bytes) */
static void qt_isa_check_dram(qt_isa_where at, const char *what, long dram, long unit, long y, long x, long c, long sy, long sx,
                              long sc, long segment_bytes)
{
    long e[3], f[3], low, high;
    if (y <= 0 || x <= 0 || c <= 0)
        return;
    e[0] = y, e[1] = x, e[2] = c, f[0] = sy, f[1] = sx, f[2] = sc;
    qt_isa_range(0, f, e, &low, &high);
    if (dram + low * unit < 0)
        qt_isa_fail(at, what, dram + low * unit, 0);
    if (dram + (high + 1) * unit > segment_bytes)
        qt_isa_fail(at, what, dram + (high + 1) * unit, segment_bytes);
}

/* a Rice run of a compressed stream (compression.py): `count` codes, each its quotient by 2^k in unary (1 bits, then a
 * 0), then its low k bits, low bit first, from byte *position; *position advanced past the run's last byte */
static void qt_isa_unrice(qt_isa_where at, const uint8_t *src, long stream, long *position, long count, long k, int8_t *dst,
                          long *out, long length)
{
    long bit = 0, n, b;
    for (n = 0; n < count; n++, (*out)++) {
        uint32_t quotient = 0, code;
        for (;;) {
            uint32_t one;
            if (*position + bit / 8 >= stream)
                qt_isa_fail(at, "compressed LOAD: a Rice run past the stream's end", *position + bit / 8, stream);
            one = (uint32_t)(src[*position + bit / 8] >> (bit % 8)) & 1u;
            bit++;
            if (!one)
                break;
            if (++quotient > 255u)
                qt_isa_fail(at, "compressed LOAD: a Rice code past the int8s' 255", (long)quotient, 255);
        }
        code = quotient << k;
        for (b = 0; b < k; b++, bit++) {
            if (*position + bit / 8 >= stream)
                qt_isa_fail(at, "compressed LOAD: a Rice run past the stream's end", *position + bit / 8, stream);
            code |= (uint32_t)((src[*position + bit / 8] >> (bit % 8)) & 1u) << b;
        }
        if (code > 255u)
            qt_isa_fail(at, "compressed LOAD: a Rice code past the int8s' 255", (long)code, 255);
        if (*out < length)
            dst[*out] = (int8_t)(code & 1u ? -(int32_t)((code + 1u) / 2u) : (int32_t)(code / 2u));
    }
    *position += (bit + 7) / 8;
}

/* a compressed LOAD's stream (core/backends/accel/compression.py: groups of QT_ISA_GROUP values, each a header byte, its
 * low 4 bits a width 0..8 and its top bit MASKED, then the values zigzag-coded in that many bits, low bit first; a masked
 * group: a 16-bit mask of the values not zero first, and those values alone; a header with bit QT_ISA_RICE: bits 3-5 the
 * groups it covers less one, its low 3 bits k, then their values Rice-coded) decoded into `length` int8s */
static void qt_isa_unpack_weights(qt_isa_where at, const uint8_t *src, long stream, int8_t *dst, long length)
{
    long position = 0, out = 0;
    while (out < length) {
        long width, present = 0, size, bit = 0, header;
        uint32_t mask = 0xFFFFu;
        int v;
        if (position >= stream)
            qt_isa_fail(at, "compressed LOAD: the stream ends before its units are decoded", position, stream);
        header = src[position++];
        if (header & QT_ISA_RICE) {
            if (header & 0x80)
                qt_isa_fail(at, "compressed LOAD: a Rice header with the mask bit", header, 0x7F);
            qt_isa_unrice(at, src, stream, &position, (((header >> 3) & 7) + 1) * QT_ISA_GROUP, header & 7, dst, &out, length);
            continue;
        }
        width = header & 0x0F;
        if (width > 8 || (header & 0x70))
            qt_isa_fail(at, "compressed LOAD: a group header of width above 8 or unknown bits", header, 0x88);
        if (header & 0x80) {
            if (position + 2 > stream)
                qt_isa_fail(at, "compressed LOAD: a mask past the stream's end", position + 2, stream);
            mask = (uint32_t)src[position] | (uint32_t)src[position + 1] << 8;
            position += 2;
        }
        for (v = 0; v < QT_ISA_GROUP; v++)
            present += (long)(mask >> v & 1u);
        size = (present * width + 7) / 8;
        if (position + size > stream)
            qt_isa_fail(at, "compressed LOAD: a group past the stream's end", position + size, stream);
        for (v = 0; v < QT_ISA_GROUP; v++, out++) {
            uint32_t code = 0;
            long b;
            if (mask >> v & 1u)
                for (b = 0; b < width; b++, bit++)
                    code |= (uint32_t)((src[position + bit / 8] >> (bit % 8)) & 1u) << b;
            if (out < length)
                dst[out] = (int8_t)(code & 1u ? -(int32_t)((code + 1u) / 2u) : (int32_t)(code / 2u));
        }
        position += size;
    }
}

static void qt_isa_load(qt_isa_where at, const uint8_t *insn, const int8_t *data, long data_bytes, const int8_t *consts,
                        long const_bytes)
{
    int buffer = (int)QT_FIELD(insn, LOAD, SUB), is_const = (int)(QT_FIELD(insn, LOAD, FLAGS) & QT_FLAG_CONST);
    long dram = (long)QT_FIELD(insn, LOAD, DRAM), base = (long)QT_FIELD(insn, LOAD, BASE);
    long y = (long)QT_FIELD(insn, LOAD, Y), x = (long)QT_FIELD(insn, LOAD, X), c = (long)QT_FIELD(insn, LOAD, C);
    long top = (long)QT_FIELD(insn, LOAD, PAD_TOP), bottom = (long)QT_FIELD(insn, LOAD, PAD_BOTTOM);
    long left = (long)QT_FIELD(insn, LOAD, PAD_LEFT), right = (long)QT_FIELD(insn, LOAD, PAD_RIGHT);
    int32_t pad = (int32_t)QT_SFIELD(insn, LOAD, PAD_VALUE);
    long sy = QT_SFIELD(insn, LOAD, S0), sx = QT_SFIELD(insn, LOAD, S1), sc = QT_SFIELD(insn, LOAD, S2);
    long narrow = (long)QT_FIELD(insn, LOAD, NARROW);
    long rows = top + y + bottom, cols = left + x + right, units, unit, r, q, k, lane;
    const int8_t *segment = is_const ? consts : data;
    long segment_bytes = is_const ? const_bytes : data_bytes;
    switch (buffer) {
    case QT_BUF_INP: units = QT_ISA_INP_UNITS; unit = QT_ISA_B; break;
    case QT_BUF_WGT: units = QT_ISA_WGT_UNITS; unit = QT_ISA_B * QT_ISA_B; break;
    case QT_BUF_ACC: units = QT_ISA_ACC_UNITS; unit = 4 * QT_ISA_B; break;
    case QT_BUF_ACC8: units = QT_ISA_ACC_UNITS; unit = QT_ISA_B; break;
    case QT_BUF_WGTV: units = QT_ISA_WGTV_UNITS; unit = QT_ISA_B; break;
    default: qt_isa_fail(at, "LOAD into an unknown buffer", buffer, 3); return;
    }
    if (narrow) { /* units of `narrow` bytes in DRAM, the other lanes pad */
        if ((buffer != QT_BUF_INP && buffer != QT_BUF_ACC8) || narrow > QT_ISA_B)
            qt_isa_fail(at, "a narrow LOAD reads at most B bytes a unit into INP or ACC8", narrow, QT_ISA_B);
        unit = narrow;
    }
    if (base + rows * cols * c > units)
        qt_isa_fail(at, "LOAD past the end of its buffer", base + rows * cols * c, units);
    if (QT_FIELD(insn, LOAD, FLAGS) & QT_FLAG_COMPRESSED) {
        long stream = (long)QT_FIELD(insn, LOAD, STREAM);
        int8_t *weights = buffer == QT_BUF_WGT ? qt_isa_wgt[base][0] : QT_ISA_WGTV(base);
        if (!is_const || (buffer != QT_BUF_WGT && buffer != QT_BUF_WGTV) || rows != y || cols != x)
            qt_isa_fail(at, "a compressed LOAD reads weights from CONST without padding", buffer, QT_BUF_WGTV);
        if (dram + stream > segment_bytes)
            qt_isa_fail(at, "compressed LOAD outside the CONST segment", dram + stream, segment_bytes);
        if (y > 0 && x > 0 && c > 0)
            qt_isa_unpack_weights(at, (const uint8_t *)segment + dram, stream, weights, y * x * c * unit);
        return;
    }
    qt_isa_check_dram(at, "LOAD outside its DRAM segment", dram, unit, y, x, c, sy, sx, sc, segment_bytes);
    for (r = 0; r < rows; r++)
        for (q = 0; q < cols; q++)
            for (k = 0; k < c; k++) {
                long u = base + (r * cols + q) * c + k;
                int inside = r >= top && r < top + y && q >= left && q < left + x;
                const int8_t *src = inside ? segment + dram + ((r - top) * sy + (q - left) * sx + k * sc) * unit : NULL;
                switch (buffer) {
                case QT_BUF_INP:
                    memset(qt_isa_inp[u], (int)(pad & 0xFF), QT_ISA_B);
                    if (inside)
                        memcpy(qt_isa_inp[u], src, (size_t)unit);
                    break;
                case QT_BUF_WGT:
                    if (inside)
                        memcpy(qt_isa_wgt[u], src, QT_ISA_B * QT_ISA_B);
                    else
                        memset(qt_isa_wgt[u], (int)(pad & 0xFF), QT_ISA_B * QT_ISA_B);
                    break;
                case QT_BUF_WGTV:
                    if (inside)
                        memcpy(QT_ISA_WGTV(u), src, QT_ISA_B);
                    else
                        memset(QT_ISA_WGTV(u), (int)(pad & 0xFF), QT_ISA_B);
                    break;
                case QT_BUF_ACC:
                    for (lane = 0; lane < QT_ISA_B; lane++) {
                        const uint8_t *b = (const uint8_t *)src + 4 * lane;
                        qt_isa_acc[u][lane] = inside ? qt_isa_signed((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                                                     (uint32_t)b[3] << 24)
                                                     : pad;
                    }
                    break;
                default: /* QT_BUF_ACC8: int8 sign-extended (a narrow unit's other lanes pad) */
                    for (lane = 0; lane < QT_ISA_B; lane++)
                        qt_isa_acc[u][lane] = inside && lane < unit ? src[lane] : pad;
                    break;
                }
            }
}

static void qt_isa_store(qt_isa_where at, const uint8_t *insn, int8_t *data, long data_bytes)
{
    long dram = (long)QT_FIELD(insn, STORE, DRAM), base = (long)QT_FIELD(insn, STORE, BASE);
    long y = (long)QT_FIELD(insn, STORE, Y), x = (long)QT_FIELD(insn, STORE, X), c = (long)QT_FIELD(insn, STORE, C);
    long sy = QT_SFIELD(insn, STORE, S0), sx = QT_SFIELD(insn, STORE, S1), sc = QT_SFIELD(insn, STORE, S2);
    long r, q, k;
    int lane;
    if (base + y * x * c > QT_ISA_ACC_UNITS)
        qt_isa_fail(at, "STORE past the end of ACC", base + y * x * c, QT_ISA_ACC_UNITS);
    if (dram % QT_ISA_B != 0)
        qt_isa_fail(at, "STORE to an address not a multiple of the block", dram, QT_ISA_B);
    qt_isa_check_dram(at, "STORE outside the DATA segment", dram, QT_ISA_B, y, x, c, sy, sx, sc, data_bytes);
    for (r = 0; r < y; r++)
        for (q = 0; q < x; q++)
            for (k = 0; k < c; k++) {
                const int32_t *v = qt_isa_acc[base + (r * x + q) * c + k];
                int8_t *dst = data + dram + (r * sy + q * sx + k * sc) * QT_ISA_B;
                for (lane = 0; lane < QT_ISA_B; lane++)
                    dst[lane] = qt_isa_low8(v[lane]);
            }
}

/* a depthwise GEMM: each micro-op `lanes` pixels (p) of every channel (c), weights as B-int8 vectors */
static void qt_isa_gemm_depthwise(qt_isa_where at, const uint8_t *insn, long d0, long s0, long w0, const long *e, const long *fd,
                                  const long *fs, const long *fw)
{
    long lanes = (long)QT_FIELD(insn, GEMM, LANES), acc_lane = (long)QT_FIELD(insn, GEMM, ACC_LANE);
    long inp_lane = (long)QT_FIELD(insn, GEMM, INP_LANE), i0, i1, i2, p;
    int c;
    if (lanes < 1 || lanes > QT_ISA_B)
        qt_isa_fail(at, "depthwise GEMM lanes outside 1..B", lanes, QT_ISA_B);
    qt_isa_check_index(at, "GEMM accumulator index", d0, fd, e, QT_ISA_ACC_UNITS - (lanes - 1) * acc_lane);
    qt_isa_check_index(at, "GEMM input index", s0, fs, e, QT_ISA_INP_UNITS - (lanes - 1) * inp_lane);
    qt_isa_check_index(at, "GEMM weight vector index", w0, fw, e, QT_ISA_WGTV_UNITS);
    for (i0 = 0; i0 < e[0]; i0++)
        for (i1 = 0; i1 < e[1]; i1++)
            for (i2 = 0; i2 < e[2]; i2++) {
                long d = d0 + i0 * fd[0] + i1 * fd[1] + i2 * fd[2], s = s0 + i0 * fs[0] + i1 * fs[1] + i2 * fs[2];
                const int8_t *w = QT_ISA_WGTV(w0 + i0 * fw[0] + i1 * fw[1] + i2 * fw[2]);
                for (p = 0; p < lanes; p++) {
                    int32_t *acc = qt_isa_acc[d + p * acc_lane];
                    const int8_t *x = qt_isa_inp[s + p * inp_lane];
                    for (c = 0; c < QT_ISA_B; c++)
                        acc[c] = qt_isa_signed((uint32_t)acc[c] + (uint32_t)(int32_t)(x[c] * w[c]));
                }
            }
}

static void qt_isa_gemm(qt_isa_where at, const uint8_t *insn)
{
    int reset = (int)(QT_FIELD(insn, GEMM, FLAGS) & QT_FLAG_RESET);
    int depthwise = (int)(QT_FIELD(insn, GEMM, FLAGS) & QT_FLAG_DEPTHWISE);
    long d0 = (long)QT_FIELD(insn, GEMM, ACC), s0 = (long)QT_FIELD(insn, GEMM, INP), w0 = (long)QT_FIELD(insn, GEMM, WGT);
    long e[3], fd[3], fs[3], fw[3], i0, i1, i2;
    e[0] = (long)QT_FIELD(insn, GEMM, E0), e[1] = (long)QT_FIELD(insn, GEMM, E1), e[2] = (long)QT_FIELD(insn, GEMM, E2);
    fd[0] = QT_SFIELD(insn, GEMM, ACC_F0), fd[1] = QT_SFIELD(insn, GEMM, ACC_F1), fd[2] = QT_SFIELD(insn, GEMM, ACC_F2);
    fs[0] = QT_SFIELD(insn, GEMM, INP_F0), fs[1] = QT_SFIELD(insn, GEMM, INP_F1), fs[2] = QT_SFIELD(insn, GEMM, INP_F2);
    fw[0] = QT_SFIELD(insn, GEMM, WGT_F0), fw[1] = QT_SFIELD(insn, GEMM, WGT_F1), fw[2] = QT_SFIELD(insn, GEMM, WGT_F2);
    if (e[0] <= 0 || e[1] <= 0 || e[2] <= 0)
        return;
    if (depthwise && !reset) {
        qt_isa_gemm_depthwise(at, insn, d0, s0, w0, e, fd, fs, fw);
        return;
    }
    qt_isa_check_index(at, "GEMM accumulator index", d0, fd, e, QT_ISA_ACC_UNITS);
    if (!reset) {
        qt_isa_check_index(at, "GEMM input index", s0, fs, e, QT_ISA_INP_UNITS);
        qt_isa_check_index(at, "GEMM weight index", w0, fw, e, QT_ISA_WGT_UNITS);
    }
    for (i0 = 0; i0 < e[0]; i0++)
        for (i1 = 0; i1 < e[1]; i1++)
            for (i2 = 0; i2 < e[2]; i2++) {
                int32_t *acc = qt_isa_acc[d0 + i0 * fd[0] + i1 * fd[1] + i2 * fd[2]];
                const int8_t *x = qt_isa_inp[s0 + i0 * fs[0] + i1 * fs[1] + i2 * fs[2]];
                const int8_t(*w)[QT_ISA_B] = qt_isa_wgt[w0 + i0 * fw[0] + i1 * fw[1] + i2 * fw[2]];
                int o, k;
                if (reset) {
                    memset(acc, 0, sizeof(int32_t) * QT_ISA_B);
                    continue;
                }
                for (o = 0; o < QT_ISA_B; o++) {
                    uint32_t sum = (uint32_t)acc[o];
                    for (k = 0; k < QT_ISA_B; k++)
                        sum += (uint32_t)(int32_t)(x[k] * w[o][k]);
                    acc[o] = qt_isa_signed(sum);
                }
            }
}

/* RSHRA: a / 2^n to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT), n in 0..31. */
static int32_t qt_isa_rshra(int32_t a, int32_t n)
{
    if (n == 0)
        return a;
    return (int32_t)qt_floor_shift64((int64_t)a + ((int64_t)1 << (n - 1)) - (a < 0 ? 1 : 0), n);
}

static int32_t qt_isa_alu_lane(int op, int32_t a, int32_t b, int round)
{
    switch (op) {
    case QT_ALU_MOV: return b;
    case QT_ALU_ADD: return qt_isa_signed((uint32_t)a + (uint32_t)b);
    case QT_ALU_MAX: return a > b ? a : b;
    case QT_ALU_MIN: return a < b ? a : b;
    case QT_ALU_RSHR: return (int32_t)qt_floor_shift64((int64_t)a + ((int64_t)1 << (b - 1)), b);
    case QT_ALU_SHL: return (int32_t)qt_clamp64(qt_shl64(a, b), INT32_MIN, INT32_MAX);
    case QT_ALU_RMUL:
        return (int32_t)qt_clamp64(qt_floor_shift64((int64_t)a * b + ((int64_t)1 << (round - 1)), round), INT32_MIN, INT32_MAX);
    case QT_ALU_RSHRA: return qt_isa_rshra(a, b);
    default: /* QT_ALU_LSL, modulo 2^32 */ return qt_isa_signed((uint32_t)a << b);
    }
}

/* A per-lane shift amount from a vector operand must be within the operation's range too. */
static void qt_isa_check_shift(qt_isa_where at, int op, int32_t amount)
{
    if (amount < (op == QT_ALU_RSHR ? 1 : 0) || amount > 31)
        qt_isa_fail(at, "shift amount out of range", amount, 31);
}

/* the leading zeros of a uint32, 32 for 0 */
static int32_t qt_isa_clz(uint32_t v)
{
    int32_t n = 0;
    if (v == 0u)
        return 32;
    while (!(v & 0x80000000u)) {
        v <<= 1;
        n++;
    }
    return n;
}

/* MAXR, SUMR, LUT, CLZ: of the vector acc[s] alone, its lanes 0..lanes-1 (isa.py) */
static void qt_isa_alu_vector(qt_isa_where at, const uint8_t *insn, int op)
{
    long d0 = (long)QT_FIELD(insn, ALU, DST), s0 = (long)QT_FIELD(insn, ALU, SRC), table = QT_SFIELD(insn, ALU, IMM);
    long lanes = (long)QT_FIELD(insn, ALU, LANES), e[3], fd[3], fs[3], i0, i1, i2;
    int lane;
    e[0] = (long)QT_FIELD(insn, ALU, E0), e[1] = (long)QT_FIELD(insn, ALU, E1), e[2] = (long)QT_FIELD(insn, ALU, E2);
    fd[0] = QT_SFIELD(insn, ALU, DST_F0), fd[1] = QT_SFIELD(insn, ALU, DST_F1), fd[2] = QT_SFIELD(insn, ALU, DST_F2);
    fs[0] = QT_SFIELD(insn, ALU, SRC_F0), fs[1] = QT_SFIELD(insn, ALU, SRC_F1), fs[2] = QT_SFIELD(insn, ALU, SRC_F2);
    if (QT_FIELD(insn, ALU, FLAGS) & QT_FLAG_IMM)
        qt_isa_fail(at, "MAXR, SUMR, LUT and CLZ read a vector, not an immediate", 1, 0);
    if (lanes == 0)
        lanes = QT_ISA_B;
    if (lanes > QT_ISA_B)
        qt_isa_fail(at, "ALU lanes past the block", lanes, QT_ISA_B);
    if (op == QT_ALU_LUT && (table < 0 || table + (256 + QT_ISA_B - 1) / QT_ISA_B > QT_ISA_ACC_UNITS))
        qt_isa_fail(at, "LUT table outside ACC", table, QT_ISA_ACC_UNITS - (256 + QT_ISA_B - 1) / QT_ISA_B);
    if (e[0] <= 0 || e[1] <= 0 || e[2] <= 0)
        return;
    qt_isa_check_index(at, "ALU destination index", d0, fd, e, QT_ISA_ACC_UNITS);
    qt_isa_check_index(at, "ALU source index", s0, fs, e, QT_ISA_ACC_UNITS);
    for (i0 = 0; i0 < e[0]; i0++)
        for (i1 = 0; i1 < e[1]; i1++)
            for (i2 = 0; i2 < e[2]; i2++) {
                int32_t *dst = qt_isa_acc[d0 + i0 * fd[0] + i1 * fd[1] + i2 * fd[2]];
                const int32_t *src = qt_isa_acc[s0 + i0 * fs[0] + i1 * fs[1] + i2 * fs[2]];
                int32_t result[QT_ISA_B], reduced = src[0];
                uint32_t sum = 0u;
                for (lane = 0; lane < QT_ISA_B; lane++) {
                    if (lane < lanes) {
                        reduced = src[lane] > reduced ? src[lane] : reduced;
                        sum += (uint32_t)src[lane];
                    }
                    if (op == QT_ALU_CLZ)
                        result[lane] = qt_isa_clz((uint32_t)src[lane]);
                    else if (op == QT_ALU_LUT && lane >= lanes)
                        result[lane] = 0;
                    else if (op == QT_ALU_LUT) {
                        int32_t k = src[lane];
                        if (k < 0 || k > 255)
                            qt_isa_fail(at, "LUT index outside 0..255", k, 255);
                        result[lane] = qt_isa_acc[table + k / QT_ISA_B][k % QT_ISA_B];
                    }
                }
                for (lane = 0; lane < QT_ISA_B; lane++)
                    dst[lane] = op == QT_ALU_MAXR ? reduced : op == QT_ALU_SUMR ? qt_isa_signed(sum) : result[lane];
            }
}

static void qt_isa_alu(qt_isa_where at, const uint8_t *insn)
{
    int op = (int)QT_FIELD(insn, ALU, SUB), immediate = (int)(QT_FIELD(insn, ALU, FLAGS) & QT_FLAG_IMM), lane;
    long d0 = (long)QT_FIELD(insn, ALU, DST), s0 = (long)QT_FIELD(insn, ALU, SRC);
    int32_t imm = (int32_t)QT_SFIELD(insn, ALU, IMM);
    long e[3], fd[3], fs[3], i0, i1, i2;
    e[0] = (long)QT_FIELD(insn, ALU, E0), e[1] = (long)QT_FIELD(insn, ALU, E1), e[2] = (long)QT_FIELD(insn, ALU, E2);
    fd[0] = QT_SFIELD(insn, ALU, DST_F0), fd[1] = QT_SFIELD(insn, ALU, DST_F1), fd[2] = QT_SFIELD(insn, ALU, DST_F2);
    fs[0] = QT_SFIELD(insn, ALU, SRC_F0), fs[1] = QT_SFIELD(insn, ALU, SRC_F1), fs[2] = QT_SFIELD(insn, ALU, SRC_F2);
    int round = (int)QT_FIELD(insn, ALU, ROUND), shifts = op == QT_ALU_RSHR || op == QT_ALU_SHL || op == QT_ALU_RSHRA || op == QT_ALU_LSL;
    if (op > QT_ALU_CLZ)
        qt_isa_fail(at, "unknown ALU operation", op, QT_ALU_CLZ);
    if (op >= QT_ALU_MAXR) {
        qt_isa_alu_vector(at, insn, op);
        return;
    }
    if ((op == QT_ALU_RSHR || op == QT_ALU_SHL) && !immediate)
        qt_isa_fail(at, "a shift takes an immediate amount", 0, 1);
    if (shifts && immediate)
        qt_isa_check_shift(at, op, imm);
    if (op == QT_ALU_RMUL && (round < 1 || round > 62))
        qt_isa_fail(at, "RMUL rounding shift out of range", round, 62);
    if (e[0] <= 0 || e[1] <= 0 || e[2] <= 0)
        return;
    qt_isa_check_index(at, "ALU destination index", d0, fd, e, QT_ISA_ACC_UNITS);
    if (!immediate)
        qt_isa_check_index(at, "ALU source index", s0, fs, e, QT_ISA_ACC_UNITS);
    for (i0 = 0; i0 < e[0]; i0++)
        for (i1 = 0; i1 < e[1]; i1++)
            for (i2 = 0; i2 < e[2]; i2++) {
                int32_t *dst = qt_isa_acc[d0 + i0 * fd[0] + i1 * fd[1] + i2 * fd[2]];
                const int32_t *src = immediate ? NULL : qt_isa_acc[s0 + i0 * fs[0] + i1 * fs[1] + i2 * fs[2]];
                for (lane = 0; lane < QT_ISA_B; lane++) {
                    if (shifts && !immediate)
                        qt_isa_check_shift(at, op, src[lane]);
                    dst[lane] = qt_isa_alu_lane(op, dst[lane], immediate ? imm : src[lane], round);
                }
            }
}

/* One instruction, as its unit runs it. */
static void qt_isa_execute(qt_isa_where at, const uint8_t *insn, int8_t *data, long data_bytes, const int8_t *consts, long const_bytes)
{
    switch (QT_FIELD(insn, FINISH, OPCODE)) {
    case QT_OP_LOAD: qt_isa_load(at, insn, data, data_bytes, consts, const_bytes); break;
    case QT_OP_STORE: qt_isa_store(at, insn, data, data_bytes); break;
    case QT_OP_GEMM: qt_isa_gemm(at, insn); break;
    case QT_OP_ALU: qt_isa_alu(at, insn); break;
    default: qt_isa_fail(at, "unknown opcode", (long)QT_FIELD(insn, FINISH, OPCODE), QT_OP_FINISH);
    }
}

/* The units (isa.py: units and dependency tokens): the including file defines QT_ISA_UNITS and each opcode's unit
 * QT_ISA_UNIT_<opcode>; without them, one unit. QT_ISA_SCHEDULE chooses the order the simulator runs them in:
 *   0  program order, the tokens ignored (the reference the other two are tested against);
 *   1  the lowest-numbered unit that can go on first (the target lists its load unit first: the loads run as far
 *      ahead of the computation as the tokens allow, so a missing token shows as a buffer overwritten too soon);
 *   2  the highest-numbered first (the stores and the computation as early as the tokens allow, so a missing token
 *      shows as a buffer read too soon).
 * Tokens are the machine's state across calls: a layer-by-layer run (QT_DUMP_LAYERS) keeps what an earlier layer
 * pushed for a later one. */
#ifndef QT_ISA_UNITS
#define QT_ISA_UNITS 1
#define QT_ISA_UNIT_LOAD 0
#define QT_ISA_UNIT_STORE 0
#define QT_ISA_UNIT_GEMM 0
#define QT_ISA_UNIT_ALU 0
#endif
#ifndef QT_ISA_SCHEDULE
#define QT_ISA_SCHEDULE 1
#endif
#if QT_ISA_UNITS > QT_ISA_MAX_UNITS
#error "QT_ISA_UNITS exceeds the units the instruction's token fields encode"
#endif

static long qt_isa_tokens[QT_ISA_UNITS][QT_ISA_UNITS]; /* [from][to]: pushed, not yet popped */

static int qt_isa_unit_of(qt_isa_where at, const uint8_t *insn)
{
    switch (QT_FIELD(insn, FINISH, OPCODE)) {
    case QT_OP_LOAD: return QT_ISA_UNIT_LOAD;
    case QT_OP_STORE: return QT_ISA_UNIT_STORE;
    case QT_OP_GEMM: return QT_ISA_UNIT_GEMM;
    case QT_OP_ALU: return QT_ISA_UNIT_ALU;
    default: qt_isa_fail(at, "unknown opcode", (long)QT_FIELD(insn, FINISH, OPCODE), QT_OP_FINISH); return 0;
    }
}

/* the token masks sit in the header, where every kind has them: LOAD's names serve all */
static uint32_t qt_isa_pops(const uint8_t *insn) { return QT_FIELD(insn, LOAD, POP); }
static uint32_t qt_isa_pushes(const uint8_t *insn) { return QT_FIELD(insn, LOAD, PUSH); }

/* the tokens of instruction `insn` of `unit` name only other units of the machine */
static void qt_isa_check_tokens(qt_isa_where at, const uint8_t *insn, int unit)
{
    uint32_t masks = qt_isa_pops(insn) | qt_isa_pushes(insn);
    if ((masks >> QT_ISA_UNITS) != 0u || (masks >> unit & 1u))
        qt_isa_fail(at, "a token from or to its own unit or a unit the machine lacks", (long)masks, QT_ISA_UNITS);
}

static int qt_isa_ready(const uint8_t *insn, int unit)
{
    int other;
    for (other = 0; other < QT_ISA_UNITS; other++)
        if ((qt_isa_pops(insn) >> other & 1u) && qt_isa_tokens[other][unit] == 0)
            return 0;
    return 1;
}

static void qt_isa_run_unit(qt_isa_where at, const uint8_t *insn, int unit, int8_t *data, long data_bytes, const int8_t *consts,
                            long const_bytes)
{
    int other;
    for (other = 0; other < QT_ISA_UNITS; other++)
        if (qt_isa_pops(insn) >> other & 1u)
            qt_isa_tokens[other][unit]--;
    qt_isa_execute(at, insn, data, data_bytes, consts, const_bytes);
    for (other = 0; other < QT_ISA_UNITS; other++)
        if (qt_isa_pushes(insn) >> other & 1u)
            qt_isa_tokens[unit][other]++;
}

/* the position of the next instruction of `unit` from `pc` on, `end` if none */
static long qt_isa_next(const char *function, const uint8_t *program, long pc, long end, int unit)
{
    for (; pc < end; pc++) {
        qt_isa_where at;
        at.function = function;
        at.pc = pc;
        if (qt_isa_unit_of(at, program + pc * 4 * QT_ISA_WORDS) == unit)
            break;
    }
    return pc;
}

/* FINISH: every unit has finished, and every token pushed has been popped */
static void qt_isa_finish(qt_isa_where at)
{
    int from, to;
    for (from = 0; from < QT_ISA_UNITS; from++)
        for (to = 0; to < QT_ISA_UNITS; to++) {
            if (qt_isa_tokens[from][to] != 0 && QT_ISA_SCHEDULE != 0)
                qt_isa_fail(at, "FINISH with tokens pushed and never popped (from unit, count)", from, qt_isa_tokens[from][to]);
            qt_isa_tokens[from][to] = 0;
        }
}

/* Run one accelerator function: `count` instructions of 64 bytes, up to its FINISH. */
static inline void qt_isa_run(const char *function, const uint8_t *program, long count, int8_t *data, long data_bytes,
                       const int8_t *consts, long const_bytes)
{
    long end, next[QT_ISA_UNITS];
    int unit, remaining;
    qt_isa_where at;
    at.function = function;
    for (end = 0; end < count && QT_FIELD(program + end * 4 * QT_ISA_WORDS, FINISH, OPCODE) != QT_OP_FINISH; end++) {
        at.pc = end;
        qt_isa_check_tokens(at, program + end * 4 * QT_ISA_WORDS, qt_isa_unit_of(at, program + end * 4 * QT_ISA_WORDS));
    }
    if (QT_ISA_SCHEDULE == 0) {
        for (at.pc = 0; at.pc < end; at.pc++)
            qt_isa_execute(at, program + at.pc * 4 * QT_ISA_WORDS, data, data_bytes, consts, const_bytes);
    } else {
        for (unit = 0; unit < QT_ISA_UNITS; unit++)
            next[unit] = qt_isa_next(function, program, 0, end, unit);
        for (remaining = 1; remaining;) {
            int k, chosen = -1;
            remaining = 0;
            for (k = 0; k < QT_ISA_UNITS; k++) {
                unit = QT_ISA_SCHEDULE == 1 ? k : QT_ISA_UNITS - 1 - k;
                if (next[unit] >= end)
                    continue;
                remaining = 1;
                if (chosen < 0 && qt_isa_ready(program + next[unit] * 4 * QT_ISA_WORDS, unit))
                    chosen = unit;
            }
            if (!remaining)
                break;
            if (chosen < 0) {
                at.pc = next[0];
                qt_isa_fail(at, "deadlock: the next instruction of every unit waits for a token never pushed (unit 0's next)",
                            next[0], end);
            }
            at.pc = next[chosen];
            qt_isa_run_unit(at, program + at.pc * 4 * QT_ISA_WORDS, chosen, data, data_bytes, consts, const_bytes);
            next[chosen] = qt_isa_next(function, program, at.pc + 1, end, chosen);
        }
    }
    if (end < count) {
        at.pc = end;
        qt_isa_finish(at);
    }
}

/* Host side of the boundary (seed 004 [0055]): the host layout HWC <-> the accelerator's blocked
 * layout, whose vector (h, w, cb) (channels cb * B .. cb * B + B - 1) is at byte
 * (h * sh + w * sw + cb * sc) * B. Packing zero-fills the lanes past C. */
static inline void qt_pack(const int8_t *restrict hwc, int8_t *restrict packed, long H, long W, long C, long sh, long sw, long sc)
{
    long h, w, c, blocks = (C + QT_ISA_B - 1) / QT_ISA_B;
    for (h = 0; h < H; h++)
        for (w = 0; w < W; w++) {
            const int8_t *pixel = hwc + (h * W + w) * C;
            for (c = 0; c < blocks * QT_ISA_B; c++)
                packed[(h * sh + w * sw + c / QT_ISA_B * sc) * QT_ISA_B + c % QT_ISA_B] = c < C ? pixel[c] : 0;
        }
}

static inline void qt_unpack(const int8_t *restrict packed, int8_t *restrict hwc, long H, long W, long C, long sh, long sw, long sc)
{
    long h, w, c;
    for (h = 0; h < H; h++)
        for (w = 0; w < W; w++) {
            int8_t *pixel = hwc + (h * W + w) * C;
            for (c = 0; c < C; c++)
                pixel[c] = packed[(h * sh + w * sw + c / QT_ISA_B * sc) * QT_ISA_B + c % QT_ISA_B];
        }
}

#endif /* QT_ISA_H */
