"""The lut layer's functions on int16 activations (TFLite's 16x8 mode), as TFLite's reference kernels compute them; no
table of every input (that would be 65536 entries a layer), the kernels' own arithmetic.

LOGISTIC and TANH (reference_integer_ops::Logistic / Tanh for int16, LiteRT's and TFLite Micro's alike): the input
rescaled onto 1/(3 x 4096) by an integer multiplier and a rounding right shift (Prepare: the scale x 3 x 4096 doubled
until above 2^14, truncated; an input scale that CheckedLog2 finds a power of two takes 3 << shift and no shift), then
TFLite's 256-entry sigmoid table (about sigmoid(i / 24) in 0.16) read at the rescaled magnitude's high bits
and interpolated linearly by its low 9 (logistic) or 8 (tanh, which is 2 sigmoid(2x) - 1) bits, mirrored for
negative inputs, rounded back to 16 bits; the output at 1/32768, zero point 0, which Prepare requires. MAXIMUM and
MINIMUM of the input and a scalar constant of its quantization: the integers compared as they are (maximum_minimum.cc).
RSQRT and GELU (LiteRT's elementwise.cc and activations.cc): the table Prepare generates of the float function at the
layer's scales (LUTPopulate<int16_t>: 513 entries), read interpolated (LUTLookup). `table` holds the layer's constants:
the sigmoid table (int32 [256]), the scalar (int32 [1]) or the generated table (int32 [513])."""

from __future__ import annotations

import numpy as np

from core.ir.ops.lut.affine import INT16_MAX, INT16_MIN, rsqrt_fixed_point
from core.quantize.tflite_math import LUT_STEPS, lut_lookup_int16

SIGMOID_TABLE_SIZE = 256
INPUT_INTEGER_BITS = 3  # Prepare's kInputIntegerBits: a power-of-two input scale of 2^-12 needs no shift
OUTPUT_SCALE, OUTPUT_ZERO_POINT = 1.0 / 32768, 0
# per function: the low bits interpolated between two entries, and Prepare's largest left shift of a power-of-two scale
INTERPOLATION_BITS = {"LOGISTIC": 9, "TANH": 8}
POWER_OF_TWO_SHIFTS = {"LOGISTIC": (0,), "TANH": (0, 1)}
CLAMPS = {"MAXIMUM": np.maximum, "MINIMUM": np.minimum}
GENERATED = ("RSQRT", "GELU")  # a table of the float function at the layer's scales (tflite.py fills it), interpolated
FUNCTIONS = (*INTERPOLATION_BITS, *CLAMPS, *GENERATED)
CONSTANTS_SHAPES = {**{name: (SIGMOID_TABLE_SIZE,) for name in INTERPOLATION_BITS}, **{name: (1,) for name in CLAMPS},
                    **{name: (LUT_STEPS + 1,) for name in GENERATED}}
# where a runtime's kernel computes the function per element in fixed point (the record's `fixed_point`), that arithmetic;
# its constants the output multiplier and shift
PER_ELEMENT = {"RSQRT": lambda inputs, multiplier, shift: rsqrt_fixed_point(inputs, multiplier, shift, 0, INT16_MIN, INT16_MAX)}
PER_ELEMENT_SHAPE = (2,)


def constants_shape(function: str, fixed_point: bool) -> tuple[int, ...]:
    if fixed_point and function not in PER_ELEMENT:
        raise ValueError(f"a lut of {function} on int16 in fixed point: the fixed-point int16 arithmetic is {', '.join(PER_ELEMENT)}'s")
    return PER_ELEMENT_SHAPE if fixed_point else CONSTANTS_SHAPES[function]


# TFLite's sigmoid_table_uint16 (kernels/internal/common.h, Apache-2.0): about 65536 sigmoid(i / 24), some entries one
# above that rounded (its values are data of the arithmetic, not a formula; tests/test_int16x8.py reads them back out of
# LiteRT's TANH)
SIGMOID_TABLE = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
)


def sigmoid_table() -> np.ndarray:
    return np.array(SIGMOID_TABLE, np.int32)


def checked_log2(scale: float) -> tuple[int, bool]:
    """TFLite's CheckedLog2 in float32: (log2 of the scale rounded, whether the scale is within 1e-3 of that power)."""
    log2 = np.float32(np.log(np.float32(scale))) * np.float32(1.0 / np.log(np.float32(2.0)))
    rounded = np.float32(np.sign(log2) * np.floor(np.abs(log2) + np.float32(0.5)))  # TfLiteRound: half away from zero
    return int(rounded), bool(abs(np.float32(log2 - rounded)) < np.float32(1e-3))


def input_scaling(function: str, input_scale: float) -> tuple[int, int]:
    """(multiplier, right shift) onto the table's 1/(3 x 4096), as Prepare computes them and the kernel applies them
    (the power-of-two case's multiplier 3 << shift with no shift)."""
    log2, power_of_two = checked_log2(input_scale)
    shift = (15 - INPUT_INTEGER_BITS) + log2
    if power_of_two and shift in POWER_OF_TWO_SHIFTS[function]:
        return 3 << shift, 0
    multiplier, shift = float(np.float32(input_scale)) * 4096.0 * 3.0, 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift, multiplier = shift + 1, multiplier * 2.0
    return int(multiplier), shift


def logistic_or_tanh(function: str, inputs: np.ndarray, input_scale: float, table: np.ndarray) -> np.ndarray:
    """int16 -> int16: the reference kernel's integers for every input."""
    multiplier, shift = input_scaling(function, input_scale)
    rounding = (1 << (shift - 1)) if shift > 0 else 0
    scaled = (np.asarray(inputs, np.int64) * multiplier + rounding) >> shift  # int32 in the kernel: |x| x 2^15 at most
    magnitude, bits = np.abs(scaled), INTERPOLATION_BITS[function]
    index = magnitude >> bits
    low, high = np.asarray(table, np.int64)[np.minimum(index, 254)], np.asarray(table, np.int64)[np.minimum(index, 254) + 1]
    interpolated = (low << bits) + (magnitude & ((1 << bits) - 1)) * (high - low)
    if function == "LOGISTIC":
        value = np.where(index >= 255, 0x7FFF << 10, interpolated)
        value = np.where(scaled >= 0, value + (1 << 9), (1 << 25) - value + (1 << 9) - 1)
        return (value >> 10).astype(np.int16)
    value = np.where(index >= 255, 0xFFFF << 8, interpolated)
    value = np.where(scaled >= 0, value - (1 << 23) + (1 << 7), -value + (1 << 23) + (1 << 7) - 1)
    return (value >> 8).astype(np.int16)


def int16_function(function: str, inputs: np.ndarray, input_scale: float, table: np.ndarray, fixed_point: bool = False) -> np.ndarray:
    """The lut layer's int16 output: `function` of `inputs` (int16) with the layer's constants `table`, `fixed_point` as
    the record has it."""
    if function not in FUNCTIONS:
        raise ValueError(f"a lut of {function} on int16: its int16 arithmetic is {', '.join(FUNCTIONS)}'s")
    if np.shape(table) != (expected := constants_shape(function, fixed_point)):
        raise ValueError(f"a lut of {function} on int16 with constants of shape {list(np.shape(table))}; expected {list(expected)}")
    if fixed_point:
        multiplier, shift = (int(value) for value in np.asarray(table).reshape(-1))
        return PER_ELEMENT[function](inputs, multiplier, shift).astype(np.int16)
    if function in CLAMPS:
        return CLAMPS[function](np.asarray(inputs, np.int16), np.int16(np.asarray(table).reshape(-1)[0]))
    if function in GENERATED:
        return lut_lookup_int16(inputs, table).astype(np.int16)
    return logistic_or_tanh(function, inputs, input_scale, table)


def int16_table(function: str, bound: int | None = None) -> np.ndarray:
    """The layer's constants for `function`: the sigmoid table, or the scalar a clamp compares with."""
    return sigmoid_table() if function in INTERPOLATION_BITS else np.array([bound], np.int32)
