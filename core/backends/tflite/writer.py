"""The flatbuffer a .tflite export builds (TfliteWriter): a layer graph under a tflite_int8 calibration table,
written as a TFLite int8 flatbuffer: int8 input and outputs, each activation at its entry's scale and zero
point, weights int8 per output channel (narrow, rounded half up at the channel's scale, as the annotated graph's FakeQuant rounds them), biases int32 at
input scale x weight scale (their correction included), rounded half away from zero. Under a tflite_int16x8 table, the
16x8 mode's file: activations int16 (zero point 0), biases int64, weights as int8's. TFLite's kernels
derive every multiplier and shift from these scales themselves, exactly as core/ir/tflite_interpreter.py
does. Written with TensorFlow's flatbuffer bindings (the object API of TFLite's schema)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from ai_edge_litert.tools import flatbuffer_utils

from core.frontend.layers import Layer, LayerGraph
from core.ir.records import IrError
from core.quantize.grid import AffineGrid
from core.quantize.table import CalibrationTable, TensorEntry

SCHEMA_VERSION = 3


class ExportError(IrError):
    """A layer the .tflite writer cannot express; the message names it and what would work."""


class Unwritable(ExportError):
    """A layer no TFLite operator the writer knows computes, whatever its calibration: `reason` says why."""

    def __init__(self, layer_name: str, operation: str, reason: str):
        super().__init__(f"layer {layer_name} ({operation}): {reason}")
        self.reason = reason


@dataclass
class TfliteWriter:
    """The flatbuffer being built: tensors, buffers, operator codes and operators, by the schema's object API."""

    layer_graph: LayerGraph
    table: CalibrationTable
    schema: object  # ai_edge_litert.schema_py_generated
    tensors: list = field(default_factory=list)
    buffers: list = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)
    operators: list = field(default_factory=list)
    by_graph_tensor: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self.buffers.append(self.schema.BufferT())  # buffer 0: the empty one every activation points to

    def entry(self, tensor: str) -> TensorEntry:
        entry = self.table.entry(self.layer_graph.scale_source(tensor))
        if entry.grid.dialect != AffineGrid.dialect:
            raise ExportError(f"tensor {tensor}: its entry has no zero point (target {self.table.target}); the .tflite writer "
                              "takes a tflite_int8 table")
        return entry

    def add_tensor(self, name: str, shape, dtype: int, scales=None, zero_points=None, axis: int = 0, data: np.ndarray | None = None) -> int:
        tensor = self.schema.TensorT()
        tensor.name, tensor.shape, tensor.type = name, [int(v) for v in shape], dtype
        tensor.buffer = 0
        if data is not None:
            buffer = self.schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            self.buffers.append(buffer)
            tensor.buffer = len(self.buffers) - 1
        if scales is not None:
            quantization = self.schema.QuantizationParametersT()
            quantization.scale = [float(np.float32(v)) for v in np.atleast_1d(scales)]
            quantization.zeroPoint = [int(v) for v in np.atleast_1d(zero_points)]
            quantization.quantizedDimension = axis
            tensor.quantization = quantization
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    @property
    def activation_type(self) -> int:
        """The activations' tensor type: INT8, or INT16 under a 16-bit table (TFLite's 16x8 mode)."""
        return self.schema.TensorType.INT16 if self.table.bits == 16 else self.schema.TensorType.INT8

    @property
    def integer_type(self) -> type:
        """The activations' NumPy type."""
        return np.int16 if self.table.bits == 16 else np.int8

    @property
    def bias_type(self) -> tuple[int, type]:
        """The biases' tensor type and its NumPy type: INT32, or INT64 in the 16x8 mode."""
        return (self.schema.TensorType.INT64, np.int64) if self.table.bits == 16 else (self.schema.TensorType.INT32, np.int32)

    def constant_values(self, index: int) -> np.ndarray | None:
        """The integers of tensor `index` when it is a constant (a constant layer's), else None."""
        tensor = self.tensors[index]
        if tensor.buffer == 0:
            return None
        return np.frombuffer(self.buffers[tensor.buffer].data.tobytes(), self.integer_type).reshape(tensor.shape)

    def activation(self, tensor: str, name: str | None = None) -> int:
        """The int8 (int16) tensor of a graph tensor (its entry's scale and zero point), made once."""
        if tensor not in self.by_graph_tensor:
            shape = self.layer_graph.graph.shape(tensor)
            entry = self.entry(tensor)
            self.by_graph_tensor[tensor] = self.add_tensor(name or tensor, [1, *shape[1:]], self.activation_type, entry.scale,
                                                           entry.zero_point)
        return self.by_graph_tensor[tensor]

    def operator(self, name: str, inputs: list[int], outputs: list[int], options_type: int = 0, options=None) -> None:
        self.codes.setdefault(name, len(self.codes))
        operator = self.schema.OperatorT()
        operator.opcodeIndex, operator.inputs, operator.outputs = self.codes[name], inputs, outputs
        operator.builtinOptionsType, operator.builtinOptions = options_type, options
        self.operators.append(operator)

    def options(self, kind: str, **values):
        """(BuiltinOptions code, the options object) of `kind` ("Conv2DOptions") with `values` set."""
        options = getattr(self.schema, f"{kind}T")()
        for key, value in values.items():
            setattr(options, key, value)
        return getattr(self.schema.BuiltinOptions, kind), options

    def fused(self, layer: Layer) -> int:
        names = {"None": "NONE", "Relu": "RELU", "Relu6": "RELU6"}
        if layer.activation not in names:
            raise ExportError(f"layer {layer.ir_name}: fused activation {layer.activation}; TFLite fuses {', '.join(names)}")
        return getattr(self.schema.ActivationFunctionType, names[layer.activation])

    def model_bytes(self, inputs: list[int], outputs: list[int]) -> bytes:
        subgraph = self.schema.SubGraphT()
        subgraph.tensors, subgraph.inputs, subgraph.outputs, subgraph.operators, subgraph.name = (
            self.tensors, inputs, outputs, self.operators, "main")
        model = self.schema.ModelT()
        model.version, model.subgraphs, model.buffers, model.description = SCHEMA_VERSION, [subgraph], self.buffers, "quanttool tflite_int8"
        model.operatorCodes = [None] * len(self.codes)
        for name, position in self.codes.items():
            operator_code = self.schema.OperatorCodeT()
            code = getattr(self.schema.BuiltinOperator, name)
            operator_code.builtinCode, operator_code.deprecatedBuiltinCode, operator_code.version = code, min(code, 127), 1
            model.operatorCodes[position] = operator_code
        return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


