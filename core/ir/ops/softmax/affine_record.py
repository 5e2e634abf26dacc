"""softmax in the tflite_int8 dialect (TF2IR 1.2): a .tflite's SOFTMAX over the last axis, and its kernel
(affine.py: TFLite's float32 table arithmetic). TFLite fixes its output at scale 1/256, zero point -128."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteModel, TfliteOperator
from core.ir.ops.softmax.affine import softmax_affine, softmax_table
from core.ir.fields import shape_array
from core.ir.records import OpSchema, SameShapeInput
from core.ir.tflite_dialect import AffineGrids, AffineLayer, input_output


@dataclass(frozen=True, kw_only=True)
class SoftmaxAffineLayer(AffineGrids, SameShapeInput, AffineLayer):
    operation: ClassVar[str] = "softmax"
    label_prefix: ClassVar[str] = "smax"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Softmax over the last axis on the tflite_int8 scheme (TFLite\'s int8 SOFTMAX): a float32 table t[255 - d] '
             '= expf(-input_scale x beta x d); per row the float32 sum s of t over (x - row max) in order; each value '
             't x (1 / (s x output_scale)) rounded half away from zero, plus output_zero_point, saturated.'),
        since="1.2",
        fields={"shape": shape_array("One image's input and output shape; normalized over its last axis."),
                "beta": {"type": "number", "exclusiveMinimum": 0}},
    )

    shape: tuple[int, ...]
    input_scale: float
    input_zero_point: int
    beta: float

    def macs(self) -> int:
        return 0

    def accumulator_bound(self, params: dict | None = None) -> None:
        return None  # float32 arithmetic on a table, no integer accumulator

    def fused_operators(self) -> list[str]:
        return ["softmax", "requantize"]


def softmax_from_tflite(model: TfliteModel, operator: TfliteOperator) -> tuple[dict, dict]:
    return {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], **input_output(model, operator),
            "beta": float(operator.option("beta", 1.0))}, {}


@lru_cache(maxsize=64)
def _table(input_scale: float, beta: float) -> np.ndarray:
    return softmax_table(input_scale, beta)


def softmax_affine_kernel(layer: SoftmaxAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    return softmax_affine(values, _table(layer.input_scale, layer.beta), layer.output_scale, layer.output_zero_point)
