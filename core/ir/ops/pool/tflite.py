"""A .tflite's AVERAGE_POOL_2D, MAX_POOL_2D, and MEAN, SUM (of a 1x1 map) and REDUCE_MAX over height and width (global pools: the window is the image)
as pool layers of the tflite_int8 dialect (TF2IR 1.2). A pool's input and output share a scale and zero point; MEAN's
may differ (its multiplier and shift rescale them)."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.quantize.runtimes import RUNTIMES, Runtime
from core.ir.tflite_dialect import clamp_fields, constant, input_output, nhwc, window_fields
from core.quantize.tflite_math import quantize_multiplier


def pool_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    kernel = (operator.option("filterHeight"), operator.option("filterWidth"))
    fields = {**input_output(model, operator), **clamp_fields(model, operator),
              **window_fields(operator, nhwc(model, operator.inputs[0]), nhwc(model, operator.outputs[0]), kernel)}
    del fields["dilations"]
    if (fields["input_scale"], fields["input_zero_point"]) != (fields["output_scale"], fields["output_zero_point"]):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its input and output are quantized differently; "
                          "TFLite's int8 pools keep the input's scale and zero point")
    return fields, {}


def _global_fields(model: TfliteModel, operator: TfliteOperator) -> dict:
    """A reduction over height and width as the pool whose window is the image."""
    input_shape = nhwc(model, operator.inputs[0])
    axes = sorted(int(axis) % len(input_shape) for axis in np.atleast_1d(constant(model, operator, 1)))
    if axes != [1, 2] or len(input_shape) != 4:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) over axes {axes} of a {list(input_shape)} tensor; "
                          "the tflite_int8 IR takes a reduction over height and width (a global pool)")
    return {**input_output(model, operator), **clamp_fields(model, operator),
            "input_size": {"height": input_shape[1], "width": input_shape[2]}, "input_channel_num": input_shape[3],
            "kernel_size": {"height": input_shape[1], "width": input_shape[2]}, "stride": {"height": 1, "width": 1},
            "padding": {"top": 0, "bottom": 0, "left": 0, "right": 0}, "output_size": {"height": 1, "width": 1},
            "output_channel_num": input_shape[3]}


def mean_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    fields = _global_fields(model, operator)
    fields["multiplier"], fields["shift"] = quantize_multiplier(float(np.float32(fields["input_scale"])) /
                                                                float(np.float32(fields["output_scale"])))
    return fields, {}


def sum_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """SUM over height and width of a 1x1 map (litert-torch's global average pool of a 1x1 map): of one element, the sum
    is the mean, and TFLite's SUM and MEAN compute the same requantization of it."""
    fields = _global_fields(model, operator)
    if fields["kernel_size"] != {"height": 1, "width": 1}:
        raise TfliteError(f"{model.path}: operator {operator.index} (SUM) over a {fields['kernel_size']['height']}x"
                          f"{fields['kernel_size']['width']} map; the tflite_int8 IR takes SUM over a 1x1 map (a mean of one element), "
                          "else a MEAN (convert the pooling as a mean)")
    rescales = (fields["input_scale"], fields["input_zero_point"]) != (fields["output_scale"], fields["output_zero_point"])
    if rescales and not runtime.computes_rescaling_sum:
        others = [other.name for other in RUNTIMES.values() if other.dialect == runtime.dialect and other.computes_rescaling_sum]
        raise TfliteError(f"{model.path}: operator {operator.index} (SUM) requantizes its input to another scale or zero point, which "
                          f"{runtime.name}'s kernel does not compute (it leaves the output unwritten); set target.scheme.runtime to "
                          f"{' or '.join(others)}, or quantize the SUM's output as its input")
    return mean_from_tflite(model, operator, runtime)


def reduce_max_from_tflite(model: TfliteModel, operator: TfliteOperator, runtime: Runtime) -> tuple[dict, dict]:
    """REDUCE_MAX over height and width (Keras' GlobalMaxPooling2D as the converter writes it): a max pool of the image."""
    fields = _global_fields(model, operator)
    if (fields["input_scale"], fields["input_zero_point"]) != (fields["output_scale"], fields["output_zero_point"]):
        raise TfliteError(f"{model.path}: operator {operator.index} (REDUCE_MAX): its input and output are quantized differently; "
                          "TFLite's int8 REDUCE_MAX keeps the input's scale and zero point")
    return fields, {}
