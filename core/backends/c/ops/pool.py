"""avg_pool and max_pool as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import CodegenError, emits
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer, PoolLayer


def _c_pool_geometry(record: PoolLayer) -> dict:
    window = record.window
    return {"H": window.height, "W": window.width, "C": record.input_channel_num, "OH": window.out_height,
            "OW": window.out_width, "KH": window.kernel[0], "KW": window.kernel[1], "SH": window.stride[0],
            "SW": window.stride[1], "PT": window.pad_top, "PL": window.pad_left}


def _c_pool(symbol: str, g: dict, note: str, scratch: str, start: str, step: str, result: str) -> str:
    """A pool over one image: per output pixel, the window's in-range rows [h0, h1) and columns
    [w0, w1) (padding excluded), `scratch[c]` set to `start`, updated by `step` (C in `x[c]` and
    `scratch[c]`) over the window, and `result` (C in `scratch[c]` and the count `n`) stored."""
    kind = note.split()[0]
    return f"""/* {kind} {g['H']}x{g['W']}x{g['C']} -> {g['OH']}x{g['OW']}, kernel {g['KH']}x{g['KW']}, stride {g['SH']}x{g['SW']}, pad top {g['PT']} left {g['PL']}; {note.split(maxsplit=1)[1]} */
static {scratch} {symbol}_scratch[{g['C']}]; /* file scope: see the note on stack arrays in core/backends/c/ops/conv.py */

QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    {scratch} *scratch = {symbol}_scratch;
    int oh, ow;
    for (oh = 0; oh < {g['OH']}; oh++)
        for (ow = 0; ow < {g['OW']}; ow++) {{
            int h0 = oh * {g['SH']} - {g['PT']}, w0 = ow * {g['SW']} - {g['PL']};
            int h1 = h0 + {g['KH']} < {g['H']} ? h0 + {g['KH']} : {g['H']}, w1 = w0 + {g['KW']} < {g['W']} ? w0 + {g['KW']} : {g['W']};
            int8_t *o = out + (oh * {g['OW']} + ow) * {g['C']};
            int ih, iw, c;
            int64_t n;
            if (h0 < 0)
                h0 = 0;
            if (w0 < 0)
                w0 = 0;
            n = (int64_t)(h1 - h0) * (w1 - w0);
            for (c = 0; c < {g['C']}; c++)
                scratch[c] = {start};
            for (ih = h0; ih < h1; ih++)
                for (iw = w0; iw < w1; iw++) {{
                    const int8_t *x = in0 + (ih * {g['W']} + iw) * {g['C']};
                    for (c = 0; c < {g['C']}; c++)
                        scratch[c] = {step};
                }}
            for (c = 0; c < {g['C']}; c++)
                o[c] = {result};
            (void)n;
        }}
}}
"""


@emits("avg_pool")
def avg_pool_emit_c(record: AvgPoolLayer, symbol: str) -> str:
    """`avg_pool_kernel` for one image. Per channel the int32 sum of the window's in-range
    elements (|sum| <= 128 * window), then, in int64, out = floor((2 * (sum << input_pre_ls) + n)
    / (2 * n)) with qt_floor_div64 (C's `/` truncates; floor matters for negative sums), n the
    in-range element count; saturate."""
    pre_ls = int(record.input_pre_ls)
    if not 0 <= pre_ls <= 31:
        raise CodegenError(f"avg_pool {symbol}: input_pre_ls {pre_ls} outside [0, 31]")
    return _c_pool(symbol, _c_pool_geometry(record), f"avg_pool << {pre_ls}", "int32_t", "0", "scratch[c] + x[c]",
                   f"qt_sat8(qt_floor_div64(2 * qt_shl64(scratch[c], {pre_ls}) + n, 2 * n))")


@emits("max_pool")
def max_pool_emit_c(record: MaxPoolLayer, symbol: str) -> str:
    """`max_pool_kernel` for one image: the max of the window's in-range elements (padding never
    wins; the IR has no window without one), moved to the output scale with qt_round_shift64
    (right: rounded half up; left: exact), saturated."""
    return _c_pool(symbol, _c_pool_geometry(record), f"max_pool shift {record.rescale}", "int8_t", "-128",
                   "x[c] > scratch[c] ? x[c] : scratch[c]", f"qt_sat8(qt_round_shift64(scratch[c], {record.rescale}))")
