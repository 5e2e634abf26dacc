"""concat in the tflite_int8 dialect (TF2IR 1.2): a .tflite's CONCATENATION, every input quantized as the
output (TFLite's converter, and the .tflite writer, requantize the others first with an int8 QUANTIZE: a lut
layer), so the bytes are copied unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.concat.affine import concat_affine
from core.ir.fields import shape_array
from core.ir.records import OpSchema
from core.ir.tflite_dialect import AffineLayer, OutputGrid, scale_and_zero_point

_SHAPE = shape_array()


@dataclass(frozen=True, kw_only=True)
class ConcatAffineLayer(OutputGrid, AffineLayer):
    operation: ClassVar[str] = "concat"
    label_prefix: ClassVar[str] = "cat"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Concatenation on the tflite_int8 scheme along `axis` of each image\'s shape (0: the first axis after the '
             'batch), every input quantized as the output: the bytes copied unchanged. The operands are previous_layer '
             'in order.'),
        since="1.2",
        fields={"axis": {"type": "integer", "minimum": 0, "description": "The axis of one image's shape."},
                "input_shapes": {"type": "array", "minItems": 1, "items": _SHAPE},
                "shape": shape_array("One image's output shape.")},
    )

    axis: int
    input_shapes: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shapes[position])

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # a copy

    def fused_operators(self) -> list[str]:
        return ["concat"]


def concat_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    output = scale_and_zero_point(model, operator.outputs[0])
    rescaled = [index for index in operator.inputs if scale_and_zero_point(model, index) != output]
    if rescaled or operator.activation != "NONE" or any(model.tensor(index).data is not None for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} (CONCATENATION): inputs {rescaled} at another scale or zero point "
                          "than the output, a constant input or a fused activation; TFLite's converter requantizes the inputs first")
    shape = [int(v) for v in model.tensor(operator.outputs[0]).shape]
    return {"axis": operator.option("axis", 0) % len(shape) - 1, "shape": shape[1:],
            "input_shapes": [[int(v) for v in model.tensor(index).shape[1:]] for index in operator.inputs],
            "output_scale": output[0], "output_zero_point": output[1]}, {}


def concat_affine_kernel(layer: ConcatAffineLayer, params: dict, inputs: list) -> np.ndarray:
    return concat_affine(inputs, layer.axis + 1)
