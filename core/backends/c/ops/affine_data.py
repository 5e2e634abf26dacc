"""concat and resize_bilinear of the tflite_int8 dialect as C99 (the contract:
core/backends/c/emitter.py): moves of bytes, and TFLite's integer interpolation. Index and weight tables
that depend on the shapes only are computed here by the kernels' own functions and baked in."""

from __future__ import annotations

import math

from core.backends.c.emitter import emits
from core.ir.ops.concat.affine_record import ConcatAffineLayer
from core.ir.ops.resize.affine import interpolation
from core.ir.ops.resize.affine_record import ResizeBilinearAffineLayer


def _ints(values) -> str:
    return ", ".join(str(int(v)) for v in values)


@emits("concat@tflite_int8")
def concat_affine_emit_c(record: ConcatAffineLayer, symbol: str) -> str:
    """In C order the output is `outer` blocks (the product of the dimensions before the axis), each the
    inputs' next blocks in order, copied unchanged (every input is quantized as the output)."""
    outer = math.prod(record.shape[: record.axis])
    blocks = [math.prod(shape[record.axis :]) for shape in record.input_shapes]
    pointers = ", ".join(f"const int8_t *restrict in{k}" for k in range(len(blocks)))
    copies, offset = [], 0
    for k, block in enumerate(blocks):
        copies.append(f"        memcpy(o + {offset}, in{k} + (long)b * {block}, {block});")
        offset += block
    return f"""/* concat along axis {record.axis} of {[list(shape) for shape in record.input_shapes]} (tflite_int8) */
static void {symbol}({pointers}, int8_t *restrict out)
{{
    long b;
    for (b = 0; b < {outer}; b++) {{
        int8_t *o = out + b * {offset};
{chr(10).join(copies)}
    }}
}}
"""


def _resize(record: ResizeBilinearAffineLayer, symbol: str, tables: str, value: str) -> str:
    height, width = record.input_size.pair()
    out_height, out_width = record.output_size.pair()
    channels = record.input_channel_num
    return f"""/* {record.operation} {height}x{width}x{channels} -> {out_height}x{out_width} (tflite_int8) */
{tables}
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oy, ox, c;
    for (oy = 0; oy < {out_height}; oy++)
        for (ox = 0; ox < {out_width}; ox++)
            for (c = 0; c < {channels}; c++)
                out[(oy * {out_width} + ox) * {channels} + c] = {value};
}}
"""


def _at(width: int, channels: int, row: str, column: str) -> str:
    return f"(int64_t)in0[({row} * {width} + {column}) * {channels} + c]"


@emits("resize_bilinear@tflite_int8")
def resize_bilinear_affine_emit_c(record: ResizeBilinearAffineLayer, symbol: str) -> str:
    """reference_ops::ResizeBilinearInteger: the four taps weighted in 2^-20 units, rounded half away from zero
    (C's division truncates, as TFLite's does)."""
    (height, width), (out_height, out_width), channels = record.input_size.pair(), record.output_size.pair(), record.input_channel_num
    tables = []
    for axis, size, source in (("y", out_height, height), ("x", out_width, width)):
        position, lower, upper = interpolation(size, source, record.align_corners, record.half_pixel_centers)
        tables += [f"static const int32_t {symbol}_{axis}0[{size}] = {{{_ints(lower)}}};",
                   f"static const int32_t {symbol}_{axis}1[{size}] = {{{_ints(upper)}}};",
                   f"static const int64_t {symbol}_d{axis}[{size}] = {{{_ints(position - (lower << 10))}}};"]
    y0, y1, x0, x1 = (f"{symbol}_{name}[{index}]" for name, index in (("y0", "oy"), ("y1", "oy"), ("x0", "ox"), ("x1", "ox")))
    dy, dx = f"{symbol}_dy[oy]", f"{symbol}_dx[ox]"
    total = (f"{_at(width, channels, y0, x0)} * (1024 - {dy}) * (1024 - {dx}) + {_at(width, channels, y1, x0)} * {dy} * (1024 - {dx})"
             f" + {_at(width, channels, y0, x1)} * (1024 - {dy}) * {dx} + {_at(width, channels, y1, x1)} * {dy} * {dx}")
    value = f"{symbol}_round(({total}))"
    rounding = f"""static int8_t {symbol}_round(int64_t total)
{{
    return (int8_t)((total + (total > 0 ? (INT64_C(1) << 19) : -(INT64_C(1) << 19))) / (INT64_C(1) << 20));
}}"""
    return _resize(record, symbol, "\n".join(tables) + "\n" + rounding, value)
