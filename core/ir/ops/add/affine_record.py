"""add in the tflite_int8 dialect (TF2IR 1.2): the record read from a .tflite's ADD of two int8 tensors of
one shape, and its kernel (affine.py: TFLite's arithmetic, as a 256 x 256 table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.add.affine import LEFT_SHIFT, add_affine, add_requantization
from core.ir.fields import shape_array
from core.ir.records import OpSchema
from core.ir.tflite_dialect import AffineInputGrids, AffineLayer, clamp_fields, scale_and_zero_point

_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


@dataclass(frozen=True, kw_only=True)
class AddAffineLayer(AffineInputGrids, AffineLayer):
    operation: ClassVar[str] = "add"
    label_prefix: ClassVar[str] = "add"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Element-wise sum on the tflite_int8 scheme (reference_integer_ops::Add): each input less its zero point, '
             'shifted left by left_shift and rescaled by its multiplier and shift (to twice the larger input scale), '
             'summed, rescaled by output_multiplier and output_shift, plus output_zero_point, clamped to [output_min, '
             'output_max]. The operands are previous_layer in order (the first input, then the second).'),
        since="1.2",
        fields={"shape": shape_array("One image's shape of both inputs and the output."),
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer", "minimum": -128, "maximum": 127}},
                "input_multipliers": {**_PAIR, "items": {"type": "integer"}},
                "input_shifts": {**_PAIR, "items": {"type": "integer"}},
                "left_shift": {"const": LEFT_SHIFT, "description": "Headroom of the rescaled inputs in int32 (add.cc: 20 for int8)."},
                "output_multiplier": {"type": "integer"},
                "output_shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."}},
    )

    shape: tuple[int, ...]
    input_scales: tuple[float, ...]
    input_zero_points: tuple[int, ...]
    input_multipliers: tuple[int, ...]
    input_shifts: tuple[int, ...]
    left_shift: int
    output_multiplier: int
    output_shift: int
    output_min: int
    output_max: int

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.shape)

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> int:
        return 2 * 255 << self.left_shift

    def fused_operators(self) -> list[str]:
        return ["add", "requantize", "clamp"]


def add_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    shapes = [tuple(model.tensor(index).shape[1:]) for index in (*operator.inputs, operator.outputs[0])]
    if len(set(shapes)) != 1 or any(model.tensor(index).data is not None for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} (ADD) of shapes {[list(shape) for shape in shapes]}; the tflite_int8 "
                          "IR adds two computed tensors of one shape")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*operator.inputs, operator.outputs[0]))
    (first_multiplier, first_shift), (second_multiplier, second_shift), (multiplier, shift) = add_requantization(
        first_scale, second_scale, output_scale)
    return {"shape": [int(v) for v in shapes[0]], "input_scales": [first_scale, second_scale], "input_zero_points": [first_zero, second_zero],
            "input_multipliers": [first_multiplier, second_multiplier], "input_shifts": [first_shift, second_shift],
            "left_shift": LEFT_SHIFT, "output_multiplier": multiplier, "output_shift": shift, "output_scale": output_scale,
            "output_zero_point": output_zero, **clamp_fields(model, operator)}, {}


def add_affine_kernel(layer: AddAffineLayer, params: dict, inputs: list) -> np.ndarray:
    requantization = (*zip(layer.input_multipliers, layer.input_shifts), (layer.output_multiplier, layer.output_shift))
    return add_affine(*inputs, layer.input_zero_points, requantization, layer.output_zero_point, (layer.output_min, layer.output_max))
