"""resize_nearest as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import c_function, emits
from core.ir.ops.resize.record import ResizeNearestLayer


@emits("resize_nearest")
def resize_nearest_emit_c(record: ResizeNearestLayer, symbol: str) -> str:
    """`resize_nearest_kernel` for one image: the source rows and columns (they depend on the
    sizes and flags only) baked in as tables; each output pixel's channels copied."""
    h, w, c = record.shape_of_input(0)
    oh, ow = record.output_size.pair()
    rows, columns = record.indices("y"), record.indices("x")

    def table(name: str, values) -> str:
        return f"static const int32_t {symbol}_{name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"

    return f"""/* resize_nearest {h}x{w}x{c} -> {oh}x{ow}, align_corners {int(record.align_corners)}, half_pixel_centers {int(record.half_pixel_centers)} ({record.dialect}) */
{table("rows", rows)}
{table("columns", columns)}

{c_function(record, symbol, 1)}    int oy, ox;
    for (oy = 0; oy < {oh}; oy++) {{
        for (ox = 0; ox < {ow}; ox++) {{
            memcpy(out + (oy * {ow} + ox) * {c}, in0 + ({symbol}_rows[oy] * {w} + {symbol}_columns[ox]) * {c}, {c} * sizeof *out);
        }}
    }}
}}
"""
