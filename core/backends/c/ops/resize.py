"""resize_bilinear as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import c_function, c_values, emits
from core.ir.ops.resize.record import RESIZE_FRAC_BITS, ResizeBilinearLayer


@emits("resize_bilinear")
def resize_emit_c(record: ResizeBilinearLayer, symbol: str) -> str:
    """resize_bilinear as C: `resize_bilinear_kernel` for one image. The source rows/columns and
    weights (record.coordinates, step 1-2) depend on the sizes only: they are baked in as tables;
    step 3 in int32 (each row's blend: |t| <= 2^25 at int16) and int64, step 4 with qt_round_shift64 (TF2IR: half up) or C's truncating
    division of value +- half (the tflite_int8 dialect's: half away from zero), and saturation."""
    h, w, c = record.shape_of_input(0)
    oh, ow = record.output_size.pair()
    align, half = record.align_corners, record.half_pixel_centers
    tables = {"y": record.coordinates("y"), "x": record.coordinates("x")}
    shift = record.output_shift
    one = 1 << RESIZE_FRAC_BITS

    def table(name: str, values) -> str:
        return f"static const int32_t {symbol}_{name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"

    declarations = "\n".join(table(f"{part}{axis}", values) for axis, parts in tables.items()
                              for part, values in zip(("lower", "upper", "weight"), parts))
    rounded = (f"qt_round_shift64(v, {shift})" if record.rounding == "half_up"
               else f"(v + (v > 0 ? INT64_C({1 << (shift - 1)}) : -INT64_C({1 << (shift - 1)}))) / INT64_C({1 << shift})")
    values = c_values(record)
    return f"""/* resize_bilinear {h}x{w}x{c} -> {oh}x{ow}, align_corners {int(align)}, half_pixel_centers {int(half)}; >> {shift} ({record.dialect}) */
{declarations}

{c_function(record, symbol, 1, prefix="QT_SIMD static")}    int oy, ox, c;
    for (oy = 0; oy < {oh}; oy++) {{
        const {values.type} *top = in0 + {symbol}_lowery[oy] * {w * c}, *bottom = in0 + {symbol}_uppery[oy] * {w * c};
        int32_t wy = {symbol}_weighty[oy];
        for (ox = 0; ox < {ow}; ox++) {{
            int32_t lx = {symbol}_lowerx[ox] * {c}, ux = {symbol}_upperx[ox] * {c}, wx = {symbol}_weightx[ox];
            {values.type} *o = out + (oy * {ow} + ox) * {c};
            for (c = 0; c < {c}; c++) {{
                int32_t t = top[lx + c] * ({one} - wx) + top[ux + c] * wx;
                int32_t b = bottom[lx + c] * ({one} - wx) + bottom[ux + c] * wx;
                int64_t v = (int64_t)t * ({one} - wy) + (int64_t)b * wy;
                o[c] = {values.saturate}({rounded});
            }}
        }}
    }}
}}
"""
