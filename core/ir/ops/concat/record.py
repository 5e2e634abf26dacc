"""The concat records: concat2 (seed 000 ConcatV2 of two NHWC tensors) and concat (a TF2IR extension: any number of
inputs; of both dialects), each input moved to the output's grid, joined along H, W or C (the tflite_int8 dialect's:
along an axis of any shape)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.ir.fields import shape_array, size_object
from core.ir.records import OUTPUT_GRID, AnyDialect, IrLayer, OpSchema, Shift, Size, grid_field, omitted_when, written_in
from core.quantize.grid import AffineGrid, Pow2Grid

DIM_AXES = {"H": 1, "W": 2, "C": 3}  # the NHWC axis of each `dim`


class ConcatOperands:
    """What both records answer alike from their inputs' shapes and scales."""

    @property
    def image_axis(self) -> int:
        """The axis of one image's shape the inputs are joined along."""
        return DIM_AXES[self.dim] - 1

    def shape_of_output(self) -> tuple[int, ...]:
        return self.output_size.height, self.output_size.width, self.output_channel_num

    def log2scale_of_output(self) -> int:
        return self.output_log2scale

    def rescale(self, position: int) -> int:
        """input_k_log2scale - output_log2scale: the right shift (negative: left) moving input k to the output scale."""
        return self.log2scale_of_input(position) - self.log2scale_of_output()

    def shifts(self) -> list[Shift]:
        return [Shift(f"input{k}_log2scale - output_log2scale", self.rescale(k), signed=True) for k in range(len(self.operands()))]

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # no accumulator: each element moved by one shift

    def fused_operators(self) -> list[str]:
        return [self.operation, "requantize"]


@dataclass(frozen=True, kw_only=True)
class Concat2Layer(ConcatOperands, IrLayer):
    operation: ClassVar[str] = "concat2"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Concatenation along H, W or C; each input is first shifted to output_log2scale (right shifts round '
             'half up) and saturated.'),
        fields={'output_log2scale': {'type': 'integer',
                                     'description': 'Each input is shifted to the output scale first (right shifts '
                                                    'round half up), saturated, then concatenated.'},
                'input0_channel_num': {'type': 'integer', 'minimum': 1},
                'input0_size': size_object(),
                'input0_dtype': {'const': 'int8'},
                'input1_channel_num': {'type': 'integer', 'minimum': 1},
                'input1_size': size_object(),
                'input1_dtype': {'const': 'int8'},
                'input0_name': {'type': 'string',
                                'minLength': 1,
                                'x-since': '1.1',
                                'description': 'The producer of input0 (previous_layer lists producers in processing '
                                               "order); absent in 1.0 IRs, where previous_layer's order is the "
                                               "inputs'."},
                'input1_name': {'type': 'string',
                                'minLength': 1,
                                'x-since': '1.1',
                                'description': 'The producer of input1 (previous_layer lists producers in processing '
                                               "order); absent in 1.0 IRs, where previous_layer's order is the "
                                               "inputs'."}},
    )
    label_prefix: ClassVar[str] = "cat"

    dim: str
    output_channel_num: int
    output_size: Size
    output_log2scale: int
    output_dtype: str = "int8"
    input0_channel_num: int
    input0_size: Size
    input0_log2scale: int
    input0_dtype: str = "int8"
    input1_channel_num: int
    input1_size: Size
    input1_log2scale: int
    input1_dtype: str = "int8"
    # the producers of input0 and input1 (previous_layer lists them in processing order); absent in
    # IRs written before they existed, where previous_layer's order is theirs
    input0_name: str | None = omitted_when(None)
    input1_name: str | None = omitted_when(None)

    def operands(self) -> tuple[str, ...]:
        if self.input0_name is None or self.input1_name is None:
            return tuple(self.previous_layer)
        return self.input0_name, self.input1_name

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        size: Size = getattr(self, f"input{position}_size")
        return size.height, size.width, getattr(self, f"input{position}_channel_num")

    def log2scale_of_input(self, position: int) -> int:
        return getattr(self, f"input{position}_log2scale")


@dataclass(frozen=True, kw_only=True)
class ConcatLayer(AnyDialect, ConcatOperands, IrLayer):
    """concat of any number of inputs, of both dialects. TF2IR's (an extension): input k's fields are item k of each
    input_* list, joined along dim H, W or C, each moved to the output's log2scale. The tflite_int8 dialect's: a
    .tflite's CONCATENATION along `axis` of each image's shape, every input on the output's grid (TFLite's converter,
    and the .tflite writer, requantize the others first with an int8 QUANTIZE: a lut layer), the bytes copied."""

    operation: ClassVar[str] = "concat"
    schema: ClassVar[OpSchema] = OpSchema(
        doc={"tf2ir": ("Concatenation of any number of inputs along H, W or C (an extension; concat2 stays the spec's "
                       'two-input form): input k, described by item k of each input_* list, is shifted by its log2scale - '
                       'output_log2scale (right shifts round half up, negative shifts are exact left shifts) and saturated, '
                       'then the inputs are joined in order.'),
             "tflite_int8": ('Concatenation on the tflite_int8 scheme along `axis` of each image\'s shape (0: the first axis after the '
                             'batch), every input quantized as the output: the bytes copied unchanged. The operands are previous_layer '
                             'in order.')},
        since={"tf2ir": "1.1", "tflite_int8": "1.2"},
        fields={'input_names': {'type': 'array', 'items': {'type': 'string', 'minLength': 1}, 'minItems': 3},
                'input_channel_nums': {'type': 'array', 'items': {'type': 'integer', 'minimum': 1}, 'minItems': 3},
                'input_sizes': {'type': 'array',
                                'items': size_object(),
                                'minItems': 3},
                'input_log2scales': {'type': 'array',
                                     'items': {'type': 'integer',
                                               'description': 'real value = int8 value * 2^-log2scale'},
                                     'minItems': 3},
                "axis": {"type": "integer", "minimum": 0, "description": "The axis of one image's shape."},
                "input_shapes": {"type": "array", "minItems": 1, "items": shape_array()},
                "shape": shape_array("One image's output shape.")},
    )
    label_prefix: ClassVar[str] = "cat"

    dim: str | None = written_in("tf2ir", None)
    output_channel_num: int | None = written_in("tf2ir", None)
    output_size: Size | None = written_in("tf2ir", None)
    grid: Pow2Grid | AffineGrid = grid_field(OUTPUT_GRID)  # the output's
    dtype: str = written_in("tf2ir", "int8")
    input_names: tuple[str, ...] = written_in("tf2ir", ())
    input_channel_nums: tuple[int, ...] = written_in("tf2ir", ())
    input_sizes: tuple[Size, ...] = written_in("tf2ir", ())
    input_log2scales: tuple[int, ...] = written_in("tf2ir", ())
    axis: int | None = written_in("tflite_int8", None)  # of one image's shape
    input_shapes: tuple[tuple[int, ...], ...] = written_in("tflite_int8", ())
    shape: tuple[int, ...] = written_in("tflite_int8", ())  # one image's output shape

    @property
    def image_axis(self) -> int:
        return ConcatOperands.image_axis.fget(self) if self.on_pow2_grids else self.axis

    def operands(self) -> tuple[str, ...]:
        return tuple(self.input_names) if self.on_pow2_grids else tuple(self.previous_layer)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        if not self.on_pow2_grids:
            return tuple(self.input_shapes[position])
        return self.input_sizes[position].height, self.input_sizes[position].width, self.input_channel_nums[position]

    def shape_of_output(self) -> tuple[int, ...]:
        return ConcatOperands.shape_of_output(self) if self.on_pow2_grids else tuple(self.shape)

    def grid_of_input(self, position: int) -> Pow2Grid | AffineGrid:
        return Pow2Grid(self.input_log2scales[position]) if self.on_pow2_grids else self.grid

    def grid_of_output(self) -> Pow2Grid | AffineGrid:
        return self.grid

    def rescale(self, position: int) -> int:
        return ConcatOperands.rescale(self, position) if self.on_pow2_grids else 0

    def shifts(self) -> list[Shift]:
        return ConcatOperands.shifts(self) if self.on_pow2_grids else []

    def fused_operators(self) -> list[str]:
        return ConcatOperands.fused_operators(self) if self.on_pow2_grids else ["concat"]
