"""An int8 `.tflite` model (core/frontend/tflite.py) run operator by operator with the tflite_int8
scheme's kernels (core/ir/ops/*/affine.py), every tensor kept: what the simulator of the tflite_int8
target computes, compared tensor by tensor with TensorFlow Lite's reference kernels
(core/quantize/tflite_reference.py). Every operator runs as the tflite_int8 IR's record of it
(core/ir/tflite_ir.py: its parameters derived from the tensors' quantization exactly as TFLite's Prepare
does), but the float boundaries a converted model may have (a float32 input QUANTIZE, a DEQUANTIZE); an
operator without either is refused naming it and its index."""

from __future__ import annotations

from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from core.frontend.tflite import TfliteError, TfliteModel, TfliteOperator
from core.ir.simulator import WORKERS, shared_pool
from core.ir.tflite_dialect import ACTIVATION_BITS, scale_and_zero_point
from core.ir.tflite_ir import builders, run_operator
from core.quantize.runtimes import DEFAULT_TFLITE_RUNTIME, Runtime
from core.quantize.tflite_math import affine_quantize, dequantize

Values = dict[int, np.ndarray]


def _quantize(model, operator, values, runtime: Runtime):
    """float32 -> int8 (a model that quantizes its own input), or int8 -> int8 at another scale (the converter's
    requantization before a concatenation: the IR's lut)."""
    if model.tensor(operator.inputs[0]).dtype != "FLOAT32":
        return run_operator(model, operator, values, runtime)
    output = operator.outputs[0]
    return affine_quantize(values[operator.inputs[0]], *scale_and_zero_point(model, output), ACTIVATION_BITS[model.tensor(output).dtype])


def _dequantize(model, operator, values, runtime: Runtime):
    return dequantize(values[operator.inputs[0]], *scale_and_zero_point(model, operator.inputs[0]))


KERNELS: dict[str, Callable[[TfliteModel, TfliteOperator, Values, Runtime], np.ndarray]] = {
    **{name: run_operator for name in builders()},  # every operator the tflite_int8 IR has a record for, as that record
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
}


def run_int8(model: TfliteModel, inputs: np.ndarray, runtime: Runtime = DEFAULT_TFLITE_RUNTIME) -> Values:
    """Every tensor (by index) after running `model` on `inputs` (a batch in the model's input type: int8,
    or float32 for a model that quantizes its input itself) as `runtime` computes it. A batch of at least two images per core is
    split among the cores, each share through every operator with single-threaded BLAS, as the
    simulator splits its batches (core/ir/simulator.py)."""
    missing = [f"{operator.name} (operator {operator.index})" for operator in model.operators if operator.name not in KERNELS]
    if missing:
        raise TfliteError(f"{model.path}: no int8 kernel yet for {', '.join(missing)}; the tflite_int8 kernels cover "
                          f"{', '.join(KERNELS)}")
    inputs = np.asarray(inputs, model.tensor(model.inputs[0]).numpy_dtype)
    workers = min(WORKERS, len(inputs) // 2)
    if workers < 2:
        return _run_share(model, inputs, runtime)
    with threadpool_limits(1, user_api="blas"):
        shares = list(shared_pool().map(lambda share: _run_share(model, share, runtime), np.array_split(inputs, workers)))
    return {index: np.concatenate([share[index] for share in shares]) for index in shares[0]}


def _run_share(model: TfliteModel, inputs: np.ndarray, runtime: Runtime) -> Values:
    values: Values = {model.inputs[0]: inputs}
    for operator in model.operators:
        values[operator.outputs[0]] = KERNELS[operator.name](model, operator, values, runtime)
    return values
