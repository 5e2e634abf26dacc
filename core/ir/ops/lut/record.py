"""The lut IR record, of both dialects: y = table[x + 128] element by element (params/<name>_table.npy, int8 [256]).
TF2IR's (an extension, 1.1): the region's float function evaluated at every int8 input and rounded to the output
scale. The tflite_int8 dialect's (1.2): each entry what TFLite's reference kernel of `function` gives for that
input at the layer's scales and zero points."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array
from core.ir.records import INPUT_GRID, OUTPUT_GRID, InputOutputGrids, IrLayer, OpSchema, SameShapeInput, Shift, grid_field, written_in
from core.quantize.grid import AffineGrid, Pow2Grid

TABLE_SIZE = 256  # one entry per int8 input, x = -128 .. 127 at index x + 128
TFLITE_FUNCTIONS = ("LOGISTIC", "TANH", "GELU", "EXP", "RSQRT", "HARD_SWISH", "LEAKY_RELU", "QUANTIZE", "MINIMUM", "MAXIMUM", "RELU", "RELU6", "RELU_N1_TO_1",
                    "RELU_0_TO_1")


@dataclass(frozen=True, kw_only=True)
class LutLayer(InputOutputGrids, SameShapeInput, IrLayer):
    operation: ClassVar[str] = "lut"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ('An element-wise int8 -> int8 function as a 256-entry table (an extension): y = table[x + 128], the '
                       'table in params/<name>_table.npy (int8[256]). table[q + 128] is the function of q * 2^-input_log2scale '
                       "(TensorFlow's float32 ops, `function`) rounded half up at 2^-output_log2scale and saturated, as "
                       'FakeQuantWithMinMaxVars rounds. No other rounding.'),
             "tflite_int8": ('An element-wise int8 -> int8 function on the tflite_int8 scheme as a lookup: out = table[in + 128] '
                             '(params/<name>_table.npy, int8 [256]), each entry what TFLite\'s reference kernel of `function` gives '
                             'for that input at the layer\'s scales and zero points. At int16 (activation_bits 16: LOGISTIC, '
                             'TANH, MINIMUM, MAXIMUM, RSQRT, GELU) the kernel\'s own arithmetic, `table` its constants: TFLite\'s '
                             'sigmoid table (int32 [256]), the clamp\'s scalar (int32 [1]) or the table LiteRT generates of the '
                             'function, read interpolated (int32 [513]); under `fixed_point` (RSQRT as TFLite Micro computes it) '
                             'each value\'s 1 / sqrt in fixed point, then the output multiplier and shift (int32 [2]).')},
        since={"tf2ir": "1.1", "tflite_int8": "1.2"},
        fields={'shape': {'type': 'array',
                          'items': {'type': 'integer', 'minimum': 1},
                          'minItems': 1,
                          'description': "One image's input and output shape."},
                'function': {'type': 'string',
                             'description': "The graph's element-wise ops the table stands for (x: the input)."}},
        fields_in={"tflite_int8": {
            "shape": shape_array("One image's input and output shape."),
            "function": {"enum": list(TFLITE_FUNCTIONS),
                         "description": ("The TFLite operator the table computes (QUANTIZE: an int8 requantization; MINIMUM, "
                                             "MAXIMUM: a clamp at a scalar constant of the input's quantization; the RELUs: "
                                             "a requantization and a clamp at the output's scale).")},
            "fixed_point": {"type": "boolean",
                            "description": ("At int16: the function computed per element in fixed point, as TFLite Micro's "
                                            "RSQRT (GetInvSqrtQuantizedMultiplierExp, then two requantizations), not read "
                                            "from a generated table. Omitted: false.")}}},
    )
    label_prefix: ClassVar[str] = "lut"
    elementwise: ClassVar[bool] = True

    # TF2IR's: the graph's element-wise ops the table stands for, x being the input; tflite_int8's: the TFLite operator
    function: str
    shape: tuple[int, ...]  # one image's input (and output) shape
    input_grid: Pow2Grid | AffineGrid = grid_field(INPUT_GRID)
    output_grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)
    dtype: str = written_in("tf2ir", "int8")
    # int16's RSQRT per element in fixed point (the runtime's Runtime.int16_rsqrt), not LiteRT's interpolated table
    fixed_point: bool = written_in("tflite_int8", False, omit_default=True)

    def macs(self) -> int:
        return 0

    def shifts(self) -> list[Shift]:
        return []  # the scales are in the table

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no arithmetic: a table read

    def fused_operators(self) -> list[str]:
        # a table of a TFLite operator is that operator; TF2IR's, of the graph's ops (`function`'s text), a lookup
        return [self.function.lower()] if self.function in TFLITE_FUNCTIONS else ["lookup_table"]

    def with_lanes(self, channels: int) -> "LutLayer":
        return dataclasses.replace(self, shape=(*self.shape[:-1], channels))
