"""softmax in the tflite_int8 dialect (TF2IR 1.2): a .tflite's SOFTMAX over the last axis, and its kernel
(affine.py: TFLite's reference fixed-point arithmetic). TFLite fixes its output at scale 1/256, zero point -128;
a file with another is refused, as TFLite's Prepare refuses it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import Runtime
from core.ir.ops.softmax.affine import OUTPUT_SCALE, OUTPUT_ZERO_POINT, SoftmaxScaling, exp_table, softmax_affine
from core.ir.fields import shape_array
from core.ir.records import OpSchema, SameShapeInput
from core.ir.tflite_dialect import AffineGrids, AffineLayer, input_output


@dataclass(frozen=True, kw_only=True)
class SoftmaxAffineLayer(AffineGrids, SameShapeInput, AffineLayer):
    operation: ClassVar[str] = "softmax"
    label_prefix: ClassVar[str] = "smax"
    schema: ClassVar[OpSchema] = OpSchema(
        doc=('Softmax over the last axis on the tflite_int8 scheme (TFLite\'s int8 SOFTMAX, reference_ops::Softmax), in gemmlowp '
             'fixed point: each d = x - row max rescaled by input_scale x beta onto Q5.26 (PreprocessSoftmaxScaling\'s '
             'multiplier and left shift), exp(d) in Q0 where d >= diff_min (else 0), the sum of exp(d) / 2^12 rounded '
             '(Q12.19), its reciprocal by GetReciprocal, each output RoundingDivideByPOT(reciprocal x exp(d), bits over one '
             '+ 23) - 128, saturated. Output scale 1/256, zero point -128.'),
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


def softmax_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    fields = input_output(model, operator)
    if (float(np.float32(fields["output_scale"])), fields["output_zero_point"]) != (float(np.float32(OUTPUT_SCALE)), OUTPUT_ZERO_POINT):
        raise TfliteError(f"{model.path}: operator {operator.index} (SOFTMAX): its output is quantized at scale "
                          f"{fields['output_scale']}, zero point {fields['output_zero_point']}; TFLite's int8 softmax writes scale "
                          "1/256, zero point -128 (convert the model again)")
    return {"shape": [int(v) for v in model.tensor(operator.inputs[0]).shape[1:]], **fields, "beta": float(operator.option("beta", 1.0))}, {}


@lru_cache(maxsize=64)
def softmax_exp_table(input_scale: float, beta: float) -> np.ndarray:
    """exp_table of the layer's scaling (affine.py), read-only: the kernel and the C emitter share it."""
    table = exp_table(SoftmaxScaling.of(input_scale, beta))
    table.setflags(write=False)
    return table


def softmax_affine_kernel(layer: SoftmaxAffineLayer, params: dict, inputs: list) -> np.ndarray:
    (values,) = inputs
    return softmax_affine(values, softmax_exp_table(layer.input_scale, layer.beta))
