"""Per-layer sensitivity (`sensitivity.enabled`), as TensorFlow Lite's QuantizationDebugger and
ONNX Runtime's qdq_loss_debug report it: for each layer, the end-point SQNR against the float
model with only that layer quantized (its output, weight and bias: what it costs alone), and
with every layer but that one quantized (what keeping it in float would buy). Ranked by the
first, the table says where the quantization error comes from and which layers to keep in float.

Each variant is the annotated graph of a subset of the calibration table, with each operation's
float op followed by its FakeQuant (no integer models: a layer's integer model needs its inputs
quantized, which "only this layer" does not do). The network input stays quantized in both,
as the IR requires.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from core.frontend.graph import Graph
from core.frontend.layers import Layer, LayerGraph
from core.frontend.tf_runtime import GraphRunner
from core.quantize.annotate import annotate_graph
from core.quantize.evaluation import ErrorSums
from core.quantize.table import CalibrationTable


@dataclass
class LayerSensitivity:
    layer: str
    only_this_sqnr_db: float  # end-point SQNR (min over end points) with only this layer quantized
    all_but_this_sqnr_db: float  # with every layer but this one quantized
    tensors: list[str]  # the table entries that are this layer's

    def to_dict(self) -> dict:
        return asdict(self)


def layer_entries(layer: Layer, table: CalibrationTable) -> list[str]:
    """The table entries a layer owns: its output's scale, its weight, its bias."""
    own = [layer.output, f"{layer.weight}:0" if layer.weight else None, f"{layer.bias}:0" if layer.bias else None]
    return [tensor for tensor in own if tensor is not None and tensor in table.tensors]


def analyze(layer_graph: LayerGraph, table: CalibrationTable, reference: Graph, images: np.ndarray, batch_size: int,
            progress: Callable[[int, int], None] = lambda done, total: None) -> list[LayerSensitivity]:
    """Every layer that owns table entries, in execution order."""
    with GraphRunner(reference) as runner:
        expected = runner.run(reference.end_points, images, batch_size)
    input_entries = {tensor: entry for tensor, entry in table.tensors.items() if tensor in layer_graph.graph.input_tensors}
    layers = [(layer, layer_entries(layer, table)) for layer in layer_graph.layers]
    layers = [(layer, own) for layer, own in layers if own]
    results = []
    for done, (layer, own) in enumerate(layers):
        only = {**input_entries, **{tensor: table.tensors[tensor] for tensor in own}}
        all_but = {tensor: entry for tensor, entry in table.tensors.items() if tensor not in own}
        results.append(LayerSensitivity(layer.ir_name, _end_point_sqnr(layer_graph, table, only, expected, images, batch_size),
                                        _end_point_sqnr(layer_graph, table, all_but, expected, images, batch_size), own))
        progress(done + 1, len(layers))
    return results


def ranked(results: list[LayerSensitivity]) -> list[LayerSensitivity]:
    """Most sensitive first: the lowest SQNR with only that layer quantized."""
    return sorted(results, key=lambda item: (item.only_this_sqnr_db, item.layer))


def _end_point_sqnr(layer_graph: LayerGraph, table: CalibrationTable, entries: dict, expected: list[np.ndarray],
                    images: np.ndarray, batch_size: int) -> float:
    subset = CalibrationTable(table.method, table.target, table.bits, entries, table.float_layers)
    annotated = annotate_graph(layer_graph, subset, allow_missing=True, integer_models=False)
    with GraphRunner(annotated) as runner:
        got = runner.run(annotated.end_points, images, batch_size)
    sums = [ErrorSums() for _ in expected]
    for end_sums, reference, value in zip(sums, expected, got):
        end_sums.add(reference, value.reshape(reference.shape))
    return min(end_sums.sqnr_db() for end_sums in sums)
