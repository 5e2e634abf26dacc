"""lut as C99 (the contract: core/backends/c/emitter.py): int8 a table read; int16 (TFLite's 16x8 mode) the function's
arithmetic (core/ir/ops/lut/int16.py), the layer's constants (`<symbol>_table`) its sigmoid table, its scalar or its
generated table."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_function, emits
from core.ir.ops.lut.int16 import CLAMPS, GENERATED, INTERPOLATION_BITS, PER_ELEMENT, input_scaling
from core.ir.ops.lut.record import TABLE_SIZE, LutLayer

# per int16 function: the saturated value beyond the table, and the two ends of the mirror (int16.py: logistic_or_tanh)
MIRRORS = {"LOGISTIC": ("0x7FFF << 10", "value + (1 << 9)", "(1 << 25) - value + (1 << 9) - 1", 10),
           "TANH": ("0xFFFF << 8", "value - (1 << 23) + (1 << 7)", "-value + (1 << 23) + (1 << 7) - 1", 8)}


def _int8_table(record: LutLayer, symbol: str, count: int, function: str) -> str:
    """`lut_kernel` for one image: out[i] = table[in[i] + 128], the table being the layer's params."""
    return f"""/* lut over {count} elements: {function} ({record.dialect}) */
QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int i;
    for (i = 0; i < {count}; i++) {{
        out[i] = {symbol}_table[in0[i] + {TABLE_SIZE // 2}];
    }}
}}
"""


def _int16_clamp(record: LutLayer, symbol: str, count: int) -> str:
    compare = ">" if record.function == "MAXIMUM" else "<"
    return f"""/* lut over {count} elements: {record.function} at the constant (int16) */
{c_function(record, symbol, 1)}    long i;
    for (i = 0; i < {count}; i++)
        out[i] = in0[i] {compare} {symbol}_table[0] ? in0[i] : (int16_t){symbol}_table[0];
}}
"""


def _int16_interpolated(record: LutLayer, symbol: str, count: int) -> str:
    multiplier, shift = input_scaling(record.function, record.input_grid.step)
    bits, (saturated, upper, lower, back) = INTERPOLATION_BITS[record.function], MIRRORS[record.function]
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    return f"""/* lut over {count} elements: {record.function} (int16: TFLite's sigmoid table, interpolated) */
{c_function(record, symbol, 1)}    long i;
    for (i = 0; i < {count}; i++) {{
        int64_t scaled = qt_floor_shift64((int64_t)in0[i] * {multiplier} + {rounding}, {shift});
        int64_t magnitude = scaled < 0 ? -scaled : scaled, index = magnitude >> {bits}, value;
        value = index >= 255 ? (int64_t)({saturated}) : ((int64_t){symbol}_table[index] << {bits}) +
            (magnitude & {(1 << bits) - 1}) * ({symbol}_table[index + 1] - {symbol}_table[index]);
        out[i] = (int16_t)qt_floor_shift64(scaled >= 0 ? {upper} : {lower}, {back});
    }}
}}
"""


def _int16_generated(record: LutLayer, symbol: str, count: int) -> str:
    """LUTLookup of each element in its generated table (the runtime header's qt_lut_lookup_int16)."""
    return f"""/* lut over {count} elements: {record.function} (int16: its generated table, interpolated) */
{c_function(record, symbol, 1)}    long i;
    for (i = 0; i < {count}; i++)
        out[i] = (int16_t)qt_lut_lookup_int16(in0[i], {symbol}_table);
}}
"""


# the runtime header's function of each int16.PER_ELEMENT function: (value, multiplier, shift, zero point, low, high)
PER_ELEMENT_CALLS = {"RSQRT": "qt_rsqrt"}


def _int16_fixed_point(record: LutLayer, symbol: str, count: int) -> str:
    """A function per element in fixed point, the constants its output multiplier and shift."""
    return f"""/* lut over {count} elements: {record.function} (int16: each value in fixed point) */
{c_function(record, symbol, 1)}    long i;
    for (i = 0; i < {count}; i++)
        out[i] = (int16_t){PER_ELEMENT_CALLS[record.function]}(in0[i], {symbol}_table[0], (int){symbol}_table[1], 0, -32768, 32767);
}}
"""


if set(PER_ELEMENT_CALLS) != set(PER_ELEMENT):
    raise ValueError(f"lut's C: the int16 fixed-point functions {sorted(PER_ELEMENT)} are rendered by {sorted(PER_ELEMENT_CALLS)}")
INT16_EMITTERS = {**dict.fromkeys(CLAMPS, _int16_clamp), **dict.fromkeys(INTERPOLATION_BITS, _int16_interpolated),
                  **dict.fromkeys(GENERATED, _int16_generated)}


@emits("lut")
def lut_emit_c(record: LutLayer, symbol: str) -> str:
    count = math.prod(record.shape)
    if record.activation_bits == 16:
        return (_int16_fixed_point if record.fixed_point else INT16_EMITTERS[record.function])(record, symbol, count)
    return _int8_table(record, symbol, count, record.function.replace("*/", "* /"))  # an IR's free text: never the comment's end
