"""A layer graph under a tflite_int8 calibration table as a .tflite flatbuffer (core/backends/tflite/writer.py
says what each tensor holds; ops.py writes each layer)."""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from core.backends.tflite.ops import WRITERS
from core.backends.tflite.writer import ExportError, TfliteWriter
from core.frontend.layers import LayerGraph
from core.frontend.graph import tensor_node
from core.frontend.signals import SIGNAL_INPUT
from core.quantize.table import CalibrationTable


def _signal_input(writer: TfliteWriter, image: int, tensor: str, signal: list[int], name: str) -> int:
    """A 1-D network's file input: the model's own [1, L, C] (core/frontend/signals.py), RESHAPEd to the image [1, 1, L, C]
    its layers read (the same bytes), as TensorFlow Lite's converter writes a Conv1D model."""
    entry = writer.entry(tensor)
    writer.tensors[image].name = f"{name}/image"
    file_input = writer.add_tensor(name, [1, *signal], writer.activation_type, entry.scale, entry.zero_point)
    shape = [-1, 1, *signal]
    target = writer.add_tensor(f"{name}/image_shape", [len(shape)], writer.schema.TensorType.INT32, data=np.array(shape, np.int32))
    writer.operator("RESHAPE", [file_input, target], [image], *writer.options("ReshapeOptions", newShape=shape))
    return file_input


def _ids_input(writer: TfliteWriter, tensor: str, name: str) -> int:
    """A text model's file input: its token ids [1, L], INT32 and not quantized (core/frontend/embedding.py), RESHAPEd to the
    [1, 1, L] its gather reads, as _signal_input does a signal."""
    shape = writer.layer_graph.graph.shape(tensor)
    image = writer.add_tensor(f"{name}/image", [1, *shape[1:]], writer.schema.TensorType.INT32)
    writer.by_graph_tensor[tensor] = image
    file_input = writer.add_tensor(name, [1, *shape[2:]], writer.schema.TensorType.INT32)
    target = writer.add_tensor(f"{name}/image_shape", [len(shape)], writer.schema.TensorType.INT32,
                               data=np.array([-1, *shape[1:]], np.int32))
    writer.operator("RESHAPE", [file_input, target], [image], *writer.options("ReshapeOptions", newShape=[-1, *shape[1:]]))
    return file_input


def _file_inputs(writer: TfliteWriter, layer_graph: LayerGraph) -> list[int]:
    """The file's inputs in the model's order: `input`, or each named as the model names it where it has several."""
    graph = layer_graph.graph
    signal = graph.source.get(SIGNAL_INPUT)  # set for a network of one input
    inputs = []
    for tensor in graph.input_tensors:
        name = tensor_node(tensor) if len(graph.input_tensors) > 1 else "input"
        if layer_graph.is_ids(tensor):
            inputs.append(_ids_input(writer, tensor, name))
        elif signal is not None:
            inputs.append(_signal_input(writer, writer.activation(tensor, name), tensor, signal, name))
        else:
            inputs.append(writer.activation(tensor, name))
    return inputs


def export_tflite(layer_graph: LayerGraph, table: CalibrationTable) -> bytes:
    """The network of `layer_graph` quantized by `table` (a tflite_int8 one) as a .tflite flatbuffer."""
    if table.float_layers:
        raise ExportError(f"layers {table.float_layers} are kept in float (calib.keep_float); the int8 .tflite writer keeps none")
    writer = TfliteWriter(layer_graph, table, schema)
    graph = layer_graph.graph
    network_inputs = _file_inputs(writer, layer_graph)
    for layer in layer_graph.layers:
        if layer.op not in WRITERS:
            raise ExportError(f"layer {layer.ir_name} ({layer.op}): the .tflite writer covers {', '.join(WRITERS)}")
        WRITERS[layer.op].write(writer, layer)
    outputs = [writer.activation(tensor) for tensor in graph.end_points]
    return writer.model_bytes(network_inputs, outputs)
