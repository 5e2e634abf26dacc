"""A layer graph under a tflite_int8 calibration table as a .tflite flatbuffer (core/backends/tflite/writer.py
says what each tensor holds; ops.py writes each layer)."""

from __future__ import annotations

import numpy as np

from core.backends.tflite.ops import WRITERS
from core.backends.tflite.writer import ExportError, TfliteWriter
from core.frontend.layers import LayerGraph
from core.frontend.signals import SIGNAL_INPUT
from core.quantize.table import CalibrationTable


def _signal_input(writer: TfliteWriter, image: int, tensor: str, signal: list[int]) -> int:
    """A 1-D network's file input: the model's own [1, L, C] (core/frontend/signals.py), RESHAPEd to the image [1, 1, L, C]
    its layers read (the same bytes), as TensorFlow Lite's converter writes a Conv1D model."""
    entry = writer.entry(tensor)
    writer.tensors[image].name = "input/image"
    file_input = writer.add_tensor("input", [1, *signal], writer.activation_type, entry.scale, entry.zero_point)
    shape = [-1, 1, *signal]
    target = writer.add_tensor("input/image_shape", [len(shape)], writer.schema.TensorType.INT32, data=np.array(shape, np.int32))
    writer.operator("RESHAPE", [file_input, target], [image], *writer.options("ReshapeOptions", newShape=shape))
    return file_input


def _ids_input(writer: TfliteWriter, tensor: str, ids: list[int]) -> int:
    """A text model's file input: its token ids [1, L], INT32 and not quantized (core/frontend/embedding.py), RESHAPEd to the
    [1, 1, L] its gather reads, as _signal_input does a signal."""
    shape = writer.layer_graph.graph.shape(tensor)
    image = writer.add_tensor("input/image", [1, *shape[1:]], writer.schema.TensorType.INT32)
    writer.by_graph_tensor[tensor] = image
    file_input = writer.add_tensor("input", [1, *ids], writer.schema.TensorType.INT32)
    target = writer.add_tensor("input/image_shape", [len(shape)], writer.schema.TensorType.INT32,
                               data=np.array([-1, *shape[1:]], np.int32))
    writer.operator("RESHAPE", [file_input, target], [image], *writer.options("ReshapeOptions", newShape=[-1, *shape[1:]]))
    return file_input


def export_tflite(layer_graph: LayerGraph, table: CalibrationTable) -> bytes:
    """The network of `layer_graph` quantized by `table` (a tflite_int8 one) as a .tflite flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    if table.float_layers:
        raise ExportError(f"layers {table.float_layers} are kept in float (calib.keep_float); the int8 .tflite writer keeps none")
    writer = TfliteWriter(layer_graph, table, schema)
    graph = layer_graph.graph
    signal = graph.source.get(SIGNAL_INPUT)
    if layer_graph.input_is_ids():
        network_input = _ids_input(writer, graph.input_tensor, signal or graph.shape(graph.input_tensor)[1:])
    else:
        network_input = writer.activation(graph.input_tensor, "input")
        if signal is not None:
            network_input = _signal_input(writer, network_input, graph.input_tensor, signal)
    for layer in layer_graph.layers:
        if layer.op not in WRITERS:
            raise ExportError(f"layer {layer.ir_name} ({layer.op}): the .tflite writer covers {', '.join(WRITERS)}")
        WRITERS[layer.op](writer, layer)
    outputs = [writer.activation(tensor) for tensor in graph.end_points]
    return writer.model_bytes([network_input], outputs)
