"""One-operator int8 (or 16x8) .tflite files at chosen quantization, for tests that drive a kernel to the extremes of its
arithmetic (scales whose multipliers shift left and right, zero points at -128 and 127, biases near int32's
ends), which no converter produces on demand. Written with TensorFlow's flatbuffer bindings (TFLite's schema's
object API), as core/backends/tflite writes a network."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils

TYPES = {np.dtype(np.int8): schema.TensorType.INT8, np.dtype(np.int16): schema.TensorType.INT16, np.dtype(np.int32): schema.TensorType.INT32,
         np.dtype(np.int64): schema.TensorType.INT64, np.dtype(np.float32): schema.TensorType.FLOAT32, np.dtype(np.bool_): schema.TensorType.BOOL}


@dataclass
class Tensor:
    """A tensor of the model: its shape, dtype, per-tensor or per-channel (`axis`) quantization, and data when it
    is a constant."""

    shape: tuple[int, ...]
    dtype: type = np.int8
    scale: float | list[float] | None = None
    zero_point: int | list[int] = 0
    axis: int = 0
    data: np.ndarray | None = None


def one_operator_model(operator: str, inputs: list[Tensor], output: Tensor, options: tuple[str, dict] | None = None) -> bytes:
    """A model of `operator` reading `inputs` (constants among them) and writing `output`; its computed inputs are the
    model's inputs, in order. `options`: ("Conv2DOptions", {"padding": ..., ...})."""
    tensors = [*inputs, output]
    return model_bytes(tensors, [(operator, list(range(len(inputs))), len(inputs), options)],
                       [index for index, spec in enumerate(inputs) if spec.data is None], [len(inputs)])


def model_bytes(specs: list[Tensor], operators: list[tuple[str, list[int], int | list[int], tuple[str, dict] | None]], inputs: list[int],
                outputs: list[int]) -> bytes:
    """A model of the tensors `specs` and the operators (builtin name, input tensor indices, output tensor index or indices
    (a SPLIT's), options), in order; `inputs` and `outputs` are tensor indices."""
    buffers, tensors = [schema.BufferT()], []
    for position, spec in enumerate(specs):
        tensor = schema.TensorT()
        tensor.name, tensor.shape, tensor.type, tensor.buffer = f"tensor_{position}", list(spec.shape), TYPES[np.dtype(spec.dtype)], 0
        if spec.data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(spec.data, spec.dtype).tobytes(), np.uint8)
            buffers.append(buffer)
            tensor.buffer = len(buffers) - 1
        if spec.scale is not None:
            quantization = schema.QuantizationParametersT()
            scales = np.atleast_1d(np.asarray(spec.scale, np.float32))
            quantization.scale = [float(value) for value in scales]
            quantization.zeroPoint = [int(value) for value in np.broadcast_to(np.atleast_1d(spec.zero_point), scales.shape)]
            quantization.quantizedDimension = spec.axis
            tensor.quantization = quantization
        tensors.append(tensor)
    codes: dict[str, int] = {}
    built = []
    for name, operator_inputs, operator_output, options in operators:
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs = codes.setdefault(name, len(codes)), list(operator_inputs)
        op.outputs = list(operator_output) if isinstance(operator_output, list) else [operator_output]
        if options is not None:
            kind, values = options
            option_object = getattr(schema, f"{kind}T")()
            for key, value in values.items():
                setattr(option_object, key, value)
            op.builtinOptionsType, op.builtinOptions = getattr(schema.BuiltinOptions, kind), option_object
        built.append(op)
    subgraph = schema.SubGraphT()
    subgraph.tensors, subgraph.operators, subgraph.name, subgraph.inputs, subgraph.outputs = tensors, built, "main", inputs, outputs
    model = schema.ModelT()
    model.version, model.subgraphs, model.buffers, model.description = 3, [subgraph], buffers, "quanttool test model"
    model.operatorCodes = []
    for name in codes:
        code = schema.OperatorCodeT()
        code.builtinCode = getattr(schema.BuiltinOperator, name)
        code.deprecatedBuiltinCode, code.version = min(code.builtinCode, 127), 1
        model.operatorCodes.append(code)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
