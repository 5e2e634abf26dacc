"""A layer graph under a tflite_int8 calibration table as a .tflite flatbuffer (core/backends/tflite/writer.py
says what each tensor holds; ops.py writes each layer)."""

from __future__ import annotations

from core.backends.tflite.ops import WRITERS
from core.backends.tflite.writer import ExportError, TfliteWriter
from core.frontend.layers import LayerGraph
from core.quantize.table import CalibrationTable


def export_tflite(layer_graph: LayerGraph, table: CalibrationTable) -> bytes:
    """The network of `layer_graph` quantized by `table` (a tflite_int8 one) as a .tflite flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    if table.float_layers:
        raise ExportError(f"layers {table.float_layers} are kept in float (calib.keep_float); the int8 .tflite writer keeps none")
    writer = TfliteWriter(layer_graph, table, schema)
    graph = layer_graph.graph
    network_input = writer.activation(graph.input_tensor, "input")
    for layer in layer_graph.layers:
        if layer.op not in WRITERS:
            raise ExportError(f"layer {layer.ir_name} ({layer.op}): the .tflite writer covers {', '.join(WRITERS)}")
        WRITERS[layer.op](writer, layer)
    outputs = [writer.activation(tensor) for tensor in graph.end_points]
    return writer.model_bytes([network_input], outputs)
