"""A .tflite's CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED (a dense layer: the 1x1 conv of a 1x1 image) as a conv
or dwconv layer of the tflite_int8 dialect (TF2IR 1.2). Constants: weight int8 OHWI (TFLite's layout; dwconv 1HWC,
dense [O, 1, 1, K]), bias int32 [O] (int64 in the 16x8 mode), multiplier and shift int32 [O] (the requantization of input scale x weight scale /
output scale, per output channel, as TFLite's Prepare derives it)."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import DOUBLE_ROUNDING, REDUCED_ROUNDING, Runtime
from core.ir.ops.conv.affine import requantization, sum_bounds
from core.ir.tflite_dialect import activation_bits, clamp_fields, input_output, nhwc, window_fields

INT32_MAX = 2**31 - 1
REDUCED_INPUT_LIMIT = 2**47  # the 16x8 kernels' int64 MultiplyByQuantizedMultiplier assumes |sum| < 2^47
SINGLE_ROUNDING_LIMIT = 2**32  # a sum rounded once with a multiplier below 2^31: the product within int64


def conv_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """The fields and constants of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED operator; the runtime says how
    FULLY_CONNECTED rounds its requantization (the convolutions round twice on every runtime, int8; 16x8's reduce
    the multiplier, measured against both interpreters, whose 16x8 FULLY_CONNECTED differ: runtimes.py)."""
    weight = model.tensor(operator.inputs[1])
    if weight.data is None or weight.quantization is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its weight {weight.name} is not a quantized constant")
    dense = operator.name == "FULLY_CONNECTED"
    input_shape, output_shape = nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0])
    if dense:  # any input shape: its K values per image are the 1x1 image's channels
        input_shape = (input_shape[0], 1, 1, int(weight.shape[1]))
    weights = weight.data.reshape(len(weight.data), 1, 1, -1) if dense else weight.data
    wide = activation_bits(model, operator) == 16  # 16x8: int64 sums and biases; a convolution's multiplier reduced to 16 bits
    if dense:
        rounding = runtime.wide_fully_connected_rounding if wide else runtime.fully_connected_rounding
    else:
        rounding = REDUCED_ROUNDING if wide else DOUBLE_ROUNDING
    fields = {**input_output(model, operator), **clamp_fields(model, operator),
              **window_fields(operator, input_shape, output_shape, weights.shape[1:3]),
              "rounding": rounding, "load_bias": len(operator.inputs) > 2 and operator.inputs[2] >= 0}
    multipliers, shifts = requantization(fields["input_scale"], weight.quantization.scale, fields["output_scale"])
    channels = output_shape[3]
    params: dict[str, np.ndarray] = {"weight": np.ascontiguousarray(weights, np.int8),
              "multiplier": np.broadcast_to(multipliers, (channels,)).astype(np.int32),
              "shift": np.broadcast_to(shifts, (channels,)).astype(np.int32)}
    if fields["load_bias"]:
        params["bias"] = np.ascontiguousarray(model.tensor(operator.inputs[2]).data, np.int64 if wide else np.int32)
    bias_magnitude = np.abs(params["bias"].astype(np.int64)) if fields["load_bias"] else 0
    bound = int((sum_bounds(weights, operator.name == "DEPTHWISE_CONV_2D", 16 if wide else 8) + bias_magnitude).max())
    if not wide:
        limit, accumulators = INT32_MAX, "int32 accumulators"
    elif rounding == REDUCED_ROUNDING:
        limit, accumulators = REDUCED_INPUT_LIMIT - 1, "int64 sums the 16x8 kernels rescale"
    else:  # one rounding of the sum x the 32-bit multiplier in int64
        limit, accumulators = SINGLE_ROUNDING_LIMIT - 1, f"int64 products of sum and multiplier {runtime.name}'s 16x8 dense layer forms"
    if bound > limit:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its sums can reach {bound}, beyond the "
                          f"{accumulators} TFLite's kernels (and the generated C) sum in; smaller weights or fewer of them per output")
    return fields, params
