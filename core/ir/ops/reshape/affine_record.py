"""reshape in the tflite_int8 dialect (TF2IR 1.2): a .tflite's RESHAPE, the same bytes in another shape,
the same scale and zero point."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.fields import shape_array
from core.ir.records import OpSchema
from core.ir.tflite_dialect import AffineLayer, OutputGrid, scale_and_zero_point



@dataclass(frozen=True, kw_only=True)
class ReshapeAffineLayer(OutputGrid, AffineLayer):
    operation: ClassVar[str] = "reshape"
    label_prefix: ClassVar[str] = "rshp"
    schema: ClassVar[OpSchema] = OpSchema(
        doc="Reshape on the tflite_int8 scheme: each image's bytes in C order, input and output quantized alike.",
        since="1.2",
        fields={"input_shape": shape_array("One image's input shape."),
                "output_shape": shape_array("One image's output shape.")},
    )

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    def shape_of_output(self) -> tuple[int, ...]:
        return tuple(self.output_shape)

    def shape_of_input(self, position: int) -> tuple[int, ...]:
        return tuple(self.input_shape)

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None

    def fused_operators(self) -> list[str]:
        return ["reshape"]


def reshape_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    source, result = (model.tensor(index) for index in (operator.inputs[0], operator.outputs[0]))
    quantization = scale_and_zero_point(model, source.index)
    if quantization != scale_and_zero_point(model, result.index):
        raise TfliteError(f"{model.path}: operator {operator.index} (RESHAPE): its input and output are quantized differently")
    return {"input_shape": [int(v) for v in source.shape[1:]], "output_shape": [int(v) for v in result.shape[1:]],
            "output_scale": quantization[0], "output_zero_point": quantization[1]}, {}


def reshape_affine_kernel(layer: ReshapeAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    return values.reshape(len(values), *layer.output_shape)
