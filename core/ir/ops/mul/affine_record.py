"""mul in the tflite_int8 dialect (TF2IR 1.2): a .tflite's MUL of two int8 tensors, broadcasting as numpy does
(a squeeze-excitation's [H, W, C] x [1, 1, C]), one of them possibly a constant (params/<name>_constant.npy,
always the second factor: the product commutes), and its kernel (affine.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.mul.affine import mul_affine, mul_requantization
from core.ir.fields import shape_array
from core.ir.records import OpSchema
from core.ir.tflite_dialect import AffineInputGrids, AffineLayer, clamp_fields, scale_and_zero_point

_SHAPE = shape_array()
_PAIR = {"type": "array", "minItems": 2, "maxItems": 2}


@dataclass(frozen=True, kw_only=True)
class MulAffineLayer(AffineInputGrids, AffineLayer):
    operation: ClassVar[str] = "mul"
    label_prefix: ClassVar[str] = "mul"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Element-wise product on the tflite_int8 scheme (reference_integer_ops::Mul, broadcasting): (q0 - z0) x '
             '(q1 - z1) rescaled by multiplier and shift (rounding twice), plus output_zero_point, clamped to '
             '[output_min, output_max]. The operands are previous_layer in order; with load_constant, the second factor is '
             'params/<name>_constant.npy (int8, its shape input_shapes[1], broadcast).'),
        since="1.2",
        fields={"shape": shape_array("One image's output shape."),
                "input_shapes": {**_PAIR, "items": _SHAPE, "description": "Each input's shape, broadcasting to `shape`."},
                "input_scales": {**_PAIR, "items": {"type": "number", "exclusiveMinimum": 0}},
                "input_zero_points": {**_PAIR, "items": {"type": "integer", "minimum": -128, "maximum": 127}},
                "multiplier": {"type": "integer", "description": "input_scale0 x input_scale1 / output_scale, Q31"},
                "shift": {"type": "integer", "description": "TFLite's convention: positive shifts left."},
                "load_constant": {"type": "boolean", "description": "Whether the second factor is a constant."}},
    )

    shape: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    input_scales: tuple[float, ...]
    input_zero_points: tuple[int, ...]
    multiplier: int
    shift: int
    output_min: int
    output_max: int
    load_constant: bool

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shapes[position])

    def macs(self) -> int:
        return int(np.prod(self.shape))

    def accumulator_bound(self, params: dict | None = None) -> int:
        return 256 * 256

    def fused_operators(self) -> list[str]:
        return ["mul", "requantize", "clamp"]


def mul_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    inputs = sorted(operator.inputs, key=lambda index: model.tensor(index).data is not None)  # a constant second
    constant = model.tensor(inputs[1]).data
    if model.tensor(inputs[0]).data is not None:
        raise TfliteError(f"{model.path}: operator {operator.index} (MUL) of two constants; the converter folds those")
    (first_scale, first_zero), (second_scale, second_zero), (output_scale, output_zero) = (
        scale_and_zero_point(model, index) for index in (*inputs, operator.outputs[0]))
    multiplier, shift = mul_requantization(first_scale, second_scale, output_scale)
    output_shape = [int(v) for v in model.tensor(operator.outputs[0]).shape[1:]]
    fields = {"shape": output_shape, "input_shapes": [[int(v) for v in model.tensor(inputs[0]).shape[1:]], per_image(model, inputs[1], output_shape)],
              "input_scales": [first_scale, second_scale], "input_zero_points": [first_zero, second_zero], "multiplier": multiplier,
              "shift": shift, "output_scale": output_scale, "output_zero_point": output_zero, "load_constant": constant is not None,
              **clamp_fields(model, operator)}
    return fields, ({} if constant is None else {"constant": np.ascontiguousarray(constant, np.int8).reshape(fields["input_shapes"][1])})


def per_image(model: TfliteModel, index: int, output_shape: list[int]) -> list[int]:
    """A factor's shape against one image's output: a computed tensor's without its batch, a constant's
    aligned from the right (its leading 1s dropped or added)."""
    shape = [int(v) for v in model.tensor(index).shape]
    if model.tensor(index).data is None:
        return shape[1:]
    while len(shape) > len(output_shape) and shape[0] == 1:
        shape = shape[1:]
    return [1] * (len(output_shape) - len(shape)) + shape


def mul_affine_kernel(layer: MulAffineLayer, params: dict, inputs: list) -> np.ndarray:
    factors = [*inputs, params["constant"][np.newaxis]] if layer.load_constant else inputs
    return mul_affine(*factors, layer.input_zero_points, (layer.multiplier, layer.shift), layer.output_zero_point,
                      (layer.output_min, layer.output_max))
