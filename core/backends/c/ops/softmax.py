"""softmax as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.softmax.record import SoftmaxLayer, exp_table


@emits("softmax")
def softmax_emit_c(record: SoftmaxLayer, symbol: str) -> str:
    """`softmax_model` (core/ir/ops/softmax/kernel.py) for one image, row by row: d = max - x, e = exp_table[d] (baked in, it
    depends on input_log2scale only), the int64 sum, and (e * 2^(output_log2scale + 1) + sum) /
    (2 sum) -- non-negative, so C's division is the floor --, saturated to 127."""
    classes, rows = record.classes, record.rows()
    table = ", ".join(str(int(v)) for v in exp_table(record.input_log2scale))
    numerator_scale = 1 << (record.output_log2scale + 1)
    return f"""/* softmax over {classes} values, {rows} row(s); exp table at input log2scale {record.input_log2scale} */
static const int32_t {symbol}_exp[256] = {{{table}}};

static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int row, i;
    for (row = 0; row < {rows}; row++) {{
        const int8_t *x = in0 + row * {classes};
        int8_t *y = out + row * {classes};
        int32_t largest = x[0];
        int64_t total = 0;
        for (i = 1; i < {classes}; i++) {{
            if (x[i] > largest) largest = x[i];
        }}
        for (i = 0; i < {classes}; i++) {{
            total += {symbol}_exp[largest - x[i]];
        }}
        for (i = 0; i < {classes}; i++) {{
            int64_t q = ((int64_t){symbol}_exp[largest - x[i]] * INT64_C({numerator_scale}) + total) / (2 * total);
            y[i] = (int8_t)(q > 127 ? 127 : q);
        }}
    }}
}}
"""
