"""avg_pool and max_pool of the tflite_int8 dialect as C99 (the contract: core/backends/c/emitter.py; the
arithmetic: runtime/qt_tflite.h)."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.pool.affine import mean_requantization
from core.ir.ops.pool.affine_record import AvgPoolAffineLayer, MaxPoolAffineLayer, PoolAffineLayer


def _pool(record: PoolAffineLayer, symbol: str, start: str, step: str, result: str) -> str:
    """Per output pixel and channel: `start` into `acc`, `step` over the window's elements inside the image
    (`x`, their count `n`), `result` stored."""
    height, width = record.input_size.pair()
    out_height, out_width = record.output_size.pair()
    kernel_h, kernel_w = record.kernel_size.pair()
    stride_h, stride_w = record.stride.pair()
    channels = record.input_channel_num
    return f"""/* {record.label()} {height}x{width}x{channels} -> {out_height}x{out_width} (tflite_int8) */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oy, ox, c, ky, kx;
    for (oy = 0; oy < {out_height}; oy++)
        for (ox = 0; ox < {out_width}; ox++)
            for (c = 0; c < {channels}; c++) {{
                int64_t acc = {start}, n = 0;
                for (ky = 0; ky < {kernel_h}; ky++) {{
                    int iy = oy * {stride_h} - {record.padding.top} + ky;
                    if (iy < 0 || iy >= {height})
                        continue;
                    for (kx = 0; kx < {kernel_w}; kx++) {{
                        int ix = ox * {stride_w} - {record.padding.left} + kx;
                        int64_t x;
                        if (ix < 0 || ix >= {width})
                            continue;
                        x = in0[(iy * {width} + ix) * {channels} + c];
                        {step}
                        n++;
                    }}
                }}
                out[(oy * {out_width} + ox) * {channels} + c] = (int8_t)({result});
            }}
}}
"""


@emits("avg_pool@tflite_int8")
def avg_pool_affine_emit_c(record: AvgPoolAffineLayer, symbol: str) -> str:
    """AVERAGE_POOL_2D: the sum divided by the count rounding half away from zero (C's truncating division
    of sum +- n / 2), clamped. MEAN: the sum less the zero point x count, requantized with 1 / count folded
    into the multiplier (mean_requantization), plus the output zero point, saturated."""
    if record.multiplier is None:
        result = (f"qt_clamp64((acc > 0 ? acc + n / 2 : acc - n / 2) / n, {record.output_min}, {record.output_max})")
        return _pool(record, symbol, "0", "acc += x;", result)
    count = record.kernel_size.height * record.kernel_size.width
    multiplier, shift = mean_requantization(count, record.multiplier, record.shift)
    result = (f"qt_clamp64(qt_mbqm(acc - ({record.input_zero_point}) * n, INT64_C({multiplier}), {shift}) + "
              f"({record.output_zero_point}), -128, 127)")
    return _pool(record, symbol, "0", "acc += x;", result)


@emits("max_pool@tflite_int8")
def max_pool_affine_emit_c(record: MaxPoolAffineLayer, symbol: str) -> str:
    return _pool(record, symbol, "-128", "acc = x > acc ? x : acc;", f"qt_clamp64(acc, {record.output_min}, {record.output_max})")
