"""avg_pool and max_pool, of both dialects, as C99 (the contract: core/backends/c/emitter.py; MEAN's arithmetic:
runtime/qt_tflite.h)."""

from __future__ import annotations

from core.backends.c.emitter import CodegenError, c_function, c_values, emits
from core.backends.c.geometry import WindowGeometry
from core.ir.ops.pool.affine import mean_requantization
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer, RescaledMean, WindowMean


def _c_pool(record, symbol: str, geometry: WindowGeometry, note: str, scratch: str, start: str, step: str, result: str) -> str:
    """A pool over one image: per output pixel, the window's in-range rows [h0, h1) and columns
    [w0, w1) (padding excluded), `scratch[c]` set to `start`, updated by `step` (C in `x[c]` and
    `scratch[c]`) over the window, and `result` (C in `scratch[c]` and the count `n`) stored."""
    kind, values = note.split()[0], c_values(record)
    return f"""/* {kind} {geometry.height}x{geometry.width}x{geometry.in_channels} -> {geometry.out_height}x{geometry.out_width}, kernel {geometry.kernel_h}x{geometry.kernel_w}, stride {geometry.stride_h}x{geometry.stride_w}, pad top {geometry.pad_top} left {geometry.pad_left}; {note.split(maxsplit=1)[1]} */
static {scratch} {symbol}_scratch[{geometry.in_channels}]; /* file scope: see the note on stack arrays in core/backends/c/ops/conv.py */

{c_function(record, symbol, 1, "QT_SIMD static")}    {scratch} *scratch = {symbol}_scratch;
    int oh, ow;
    for (oh = 0; oh < {geometry.out_height}; oh++)
        for (ow = 0; ow < {geometry.out_width}; ow++) {{
            int h0 = oh * {geometry.stride_h} - {geometry.pad_top}, w0 = ow * {geometry.stride_w} - {geometry.pad_left};
            int h1 = h0 + {geometry.kernel_h} < {geometry.height} ? h0 + {geometry.kernel_h} : {geometry.height}, w1 = w0 + {geometry.kernel_w} < {geometry.width} ? w0 + {geometry.kernel_w} : {geometry.width};
            {values.type} *o = out + (oh * {geometry.out_width} + ow) * {geometry.in_channels};
            int ih, iw, c;
            int64_t n;
            if (h0 < 0)
                h0 = 0;
            if (w0 < 0)
                w0 = 0;
            n = (int64_t)(h1 - h0) * (w1 - w0);
            for (c = 0; c < {geometry.in_channels}; c++)
                scratch[c] = {start};
            for (ih = h0; ih < h1; ih++)
                for (iw = w0; iw < w1; iw++) {{
                    const {values.type} *x = in0 + (ih * {geometry.width} + iw) * {geometry.in_channels};
                    for (c = 0; c < {geometry.in_channels}; c++)
                        scratch[c] = {step};
                }}
            for (c = 0; c < {geometry.in_channels}; c++)
                o[c] = {result};
            (void)n;
        }}
}}
"""


@emits("avg_pool")
def avg_pool_emit_c(record: AvgPoolLayer, symbol: str) -> str:
    """`avg_pool_kernel` for one image. Per channel the int32 sum of the window's in-range
    elements (|sum| <= 255 * window), n the in-range element count, then in int64 the mean as the record's
    averaging rounds it (C_MEANS), clamped to [output_min, output_max]."""
    averaging = record.averaging
    mean, note = C_MEANS[type(averaging)](averaging, record)
    return _c_pool(record, symbol, WindowGeometry.of(record), f"avg_pool {note} ({record.dialect})", "int32_t", "0", "scratch[c] + x[c]",
                   f"({c_values(record).type})qt_clamp64({mean}, {record.output_min}, {record.output_max})")


def _window_mean(averaging: WindowMean, record: AvgPoolLayer) -> tuple[str, str]:
    """half_up: floor((2 * (sum << pre_shift) + n) / (2 * n)) with qt_floor_div64 (C's `/` truncates; floor
    matters for negative sums); half_away: C's truncating division of sum +- n / 2."""
    pre_shift = averaging.pre_shift
    if not 0 <= pre_shift <= 31:
        raise CodegenError(f"avg_pool {record.name}: input_pre_ls {pre_shift} outside [0, 31]")
    if averaging.rounding == "half_up":
        return f"qt_floor_div64(2 * qt_shl64(scratch[c], {pre_shift}) + n, 2 * n)", f"<< {pre_shift}"
    return "(scratch[c] > 0 ? scratch[c] + n / 2 : scratch[c] - n / 2) / n", "rounded half away"


def _rescaled_mean(averaging: RescaledMean, record: AvgPoolLayer) -> tuple[str, str]:
    """MEAN: the sum less the zero point x n, requantized with 1 / count folded into the multiplier
    (mean_requantization), plus the output zero point."""
    multiplier, shift = mean_requantization(record.window.taps, averaging.multiplier, averaging.shift)
    return (f"qt_mbqm(scratch[c] - ({averaging.input_zero_point}) * n, INT64_C({multiplier}), {shift}) + "
            f"({averaging.output_zero_point})", "mean")


# how each kind of averaging (core/ir/ops/pool/record.py) is computed in C: (the mean, a note)
C_MEANS = {WindowMean: _window_mean, RescaledMean: _rescaled_mean}


@emits("max_pool")
def max_pool_emit_c(record: MaxPoolLayer, symbol: str) -> str:
    """`max_pool_kernel` for one image: the max of the window's in-range elements (padding never
    wins; the IR has no window without one), moved to the output grid with qt_round_shift64
    (right: rounded half up; left: exact), clamped to [output_min, output_max]."""
    values = c_values(record)
    return _c_pool(record, symbol, WindowGeometry.of(record), f"max_pool shift {record.rescale} ({record.dialect})", values.type,
                   str(-(1 << (record.activation_bits - 1))), "x[c] > scratch[c] ? x[c] : scratch[c]",
                   f"({values.type})qt_clamp64(qt_round_shift64(scratch[c], {record.rescale}), {record.output_min}, {record.output_max})")
