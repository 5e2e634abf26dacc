"""simulate: the emitted IR run in integer arithmetic on the evaluation data, against the float graph
(accuracy, SQNR) and, layer by layer, against the reference path of its dialect: a TF2IR IR against the
annotated graph (fed the same integer inputs, the fake-quant value must be the integer one); a
tflite_int8 IR against the interpreter of its runtime (target.scheme.runtime: LiteRT's reference kernels or
TensorFlow Lite for Microcontrollers) running the .tflite emit_ir wrote, every operator's output (any
layer that differs stops the stage, naming the first).

`end_point_agreement` means one thing on every target: the fraction of the integer end-point values equal to
the reference path's (on tflite_int8 also reported as `reference_agreement`). `fake_quant_end_point_agreement`
is the fraction equal to the fake-quantized graph's (annotate's): on tf2ir the same figure; on tflite_int8
a measure of how closely float fake-quantization models the runtime's integers, not a fault. The float and
annotated end points are annotate's, kept in its artifact, when it kept them."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.frontend.fake_quant import bypass_fake_quant
from core.frontend.graph import Graph, as_input, canonical_tensor, tensor_node
from core.frontend.tf_runtime import GraphRunner
from core.frontend.tflite import read_tflite
from core.ir.fixedpoint import dequantize
from core.ir.io import read_ir
from core.ir.records import IrError
from core.ir.layers import group_layers
from core.limits import MemoryBudget, check_activations
from core.ir.op import input_names
from core.ir.simulator import IntegerSimulator, shared_pool
from core.ir.tflite_ir import ir_layer_sources, source_tensor
from core.quantize.evaluation import ErrorSums, KeptEndPoints, class_labels, grid_agreement
from core.quantize.runtimes import Runtime
from core.quantize.schemes import runtime_of
from core.quantize.tflite_reference import runner_of
from core.reports.layers import plot_layer_sqnr
from core.reports.series import series_rows, write_series
from stages.evaluation import evaluation_split
from pipeline.params import Task
from stages.emit_ir import TFLITE_FILE

BATCH_SIZE = 64


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    ir = read_ir(inputs["emit_ir"])
    float_graph, _ = bypass_fake_quant(Graph.load(inputs["fold_check"]))  # the model, as the user gave it
    layer_graph = group_layers(Graph.load(inputs["calibrate"]))  # the layers the IR was emitted from
    annotated = Graph.load(inputs["annotate"])
    budget = MemoryBudget(params.limits.memory_mb)
    evaluation = evaluation_split(params, budget)
    # each batch: the float and annotated graphs, and the simulator keeping every layer's output
    per_image = 3 * check_activations(budget, annotated.activation_bytes(), "simulate")
    labels, why_not = class_labels(float_graph, evaluation.labels if params.model.task is Task.classification else None,
                                   params.model.num_classes)
    if why_not:
        ctx.log(why_not)
    producers = {layer.output: layer.ir_name for layer in layer_graph.layers}
    end_layers = [producers[tensor] for tensor in float_graph.end_points]
    probe = PROBES[ir.dialect](annotated, layer_graph, ir, Path(inputs["emit_ir"]), runtime_of(params.target))
    simulator = IntegerSimulator(ir)
    tally = Tally(end_layers, probe.layers)
    kept = KeptEndPoints.load(Path(inputs["annotate"]), len(evaluation.images), evaluation.images.content, len(float_graph.end_points))
    ctx.log("the float and annotated end points: annotate's (end_points/)" if kept else
            "the float and annotated end points: annotate kept none, running both graphs")
    with GraphRunner(annotated) as annotated_runner, contextlib.ExitStack() as stack:
        float_runner = None if kept else stack.enter_context(GraphRunner(float_graph))
        batch_size = annotated_runner.fixed_batch or budget.batch_size(BATCH_SIZE, per_image, "the simulation")  # SSD: 1
        for start in range(0, len(evaluation.images), batch_size):
            images = evaluation.images[start : start + batch_size]
            integer = simulator.run(images, keep_all=True)
            if kept:
                float_ends, annotated_ends = kept.batch(start, len(images))
            else:
                float_ends = float_runner.run(float_graph.end_points, images, len(images))
                annotated_ends = annotated_runner.run(annotated.end_points, images, len(images))
            # a dense layer's [N, 1, 1, C] is the graph's [N, C]: the same values
            integer_ends = [ir.layer(name).grid_of_output().dequantize(integer[name]).reshape(end.shape)
                            for name, end in zip(end_layers, float_ends)]
            tally.add_end_points(float_ends, annotated_ends, integer_ends, None if labels is None else labels[start : start + len(images)])
            tally.add_layers(probe.compare(annotated_runner, integer))
            ctx.progress(min(start + batch_size, len(evaluation.images)), len(evaluation.images))
    report = tally.report()
    reference_metrics = probe.finish(tally, end_layers)
    report.update(reference_metrics)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if params.pictures:
        plot_layer_sqnr(dict(report["layer_agreement"]), out_dir / "layer_agreement.png",
                        f"integer simulator == {probe.reference}\nper layer, fed the same int8 inputs ({tally.images} images)",
                        y_label="fraction of elements equal")
    write_series(out_dir, "layer_agreement", series_rows("layer_index", "layer", {
        "agreement": dict(report["layer_agreement"]), "max_lsb_difference": dict(report["layer_max_lsb_difference"])}))
    probe.check(tally)
    return {**tally.metrics(labels is not None), **reference_metrics}


class LayerProbe:
    """Each quantized layer of the annotated graph, fed the integer simulator's inputs.

    Every FakeQuant output is fed the dequantized integer value of the layer that
    produces it, which cuts the graph into independent layers; a second FakeQuant
    (a probe) on what each layer's FakeQuant reads (its float output, or its integer
    model's) then gives what the annotated layer computes from exactly the integer inputs,
    in one graph execution per batch."""

    def __init__(self, annotated: Graph, layer_graph, ir, ir_dir: Path, runtime: Runtime):
        self.reference = runtime.reference
        quantized = annotated.source.get("annotation", {}).get("activations", {})
        by_name = annotated.by_name()
        self.feeds = {tensor: fake_quant for tensor, fake_quant in quantized.items()}
        self.layers = [layer for layer in layer_graph.layers if layer.output in quantized]
        self.ir_names = {layer.output: layer.ir_name for layer in layer_graph.layers}
        self.inputs = input_names(layer_graph.graph)  # each input tensor -> its IR name
        self.ir_names.update(self.inputs)
        # a power of two, or token ids (IndexGrid: fed as they are)
        self.input_grids = {name: ir.grid_of_network_input(name) for name in self.inputs.values()}
        self.log2scales = {layer.output: ir.layer(layer.ir_name).log2scale_of_output() for layer in self.layers}
        self.ranges = {layer.output: _fake_quant_range(annotated, by_name, quantized[layer.output]) for layer in self.layers}
        self.shapes = {tensor: annotated.shape(fake_quant) for tensor, fake_quant in self.feeds.items()}
        # what each FakeQuant reads: the layer's float output, or its integer model's
        self.quantizes = {tensor: by_name[tensor_node(fake_quant)].inputs[0] for tensor, fake_quant in self.feeds.items()}
        self.probe_names: list[str] | None = None

    def _build(self, runner: GraphRunner) -> list[str]:
        def build(tf_graph):
            import tensorflow as tf

            return [tf.quantization.fake_quant_with_min_max_vars(tf_graph.get_tensor_by_name(canonical_tensor(self.quantizes[layer.output])),
                                                                 *self.ranges[layer.output])
                    for layer in self.layers]

        return runner.extend(build)

    def compare(self, runner: GraphRunner, integer: dict[str, np.ndarray]) -> list[tuple[int, int, int]]:
        """(equal elements, elements, largest |difference| in LSB) per layer."""
        if self.probe_names is None:
            self.probe_names = self._build(runner)
        # the per-layer conversions and counts release the GIL: on the pool they use the cores the graph leaves idle
        tensors = list(self.feeds)
        values = shared_pool().map(lambda tensor: self._fed_value(tensor, integer), tensors)
        feed = {self.feeds[tensor]: value for tensor, value in zip(tensors, values)}
        for tensor, name in self.inputs.items():
            feed[tensor] = as_input(self.input_grids[name].dequantize(integer[name]), runner.graph, tensor)
        probes = runner.session_run(self.probe_names, feed)
        return list(shared_pool().map(lambda pair: self._agreement(pair[0], pair[1], integer), zip(self.layers, probes)))

    def finish(self, tally: "Tally", end_layers: list[str]) -> dict[str, float]:
        """The annotated graph is the reference path: end_point_agreement is the fake-quant one (every layer is checked by
        layer_agreement_min)."""
        return {"end_point_agreement": tally.fake_quant_agreement()}

    def check(self, tally: "Tally") -> None:
        pass  # a layer below 1 is a finding of layer_agreement_min (pipeline/quality.py), not a crash

    def _fed_value(self, tensor: str, integer: dict[str, np.ndarray]) -> np.ndarray:
        """What the FakeQuant of `tensor` is fed: the dequantized integer value of the layer producing it."""
        if tensor in self.inputs:
            return self._shaped(tensor, self.input_grids[self.inputs[tensor]].dequantize(integer[self.inputs[tensor]]))
        return self._shaped(tensor, dequantize(integer[self.ir_names[tensor]], self.log2scales[tensor]))

    def _agreement(self, layer, value: np.ndarray, integer: dict[str, np.ndarray]) -> tuple[int, int, int]:
        scale = np.asarray(2.0 ** self.log2scales[layer.output], dtype=value.dtype)
        equal, largest = grid_agreement(np.ascontiguousarray(value).ravel(), scale[()], np.ascontiguousarray(integer[layer.ir_name]).ravel())
        return int(equal), value.size, int(largest)

    def _shaped(self, tensor: str, value: np.ndarray) -> np.ndarray:
        """A layer's output batch in its graph tensor's shape (a dense layer's [N, 1, 1, C] is [N, C])."""
        return value.reshape(len(value), *self.shapes[tensor][1:])


class SimulationMismatch(IrError):
    """The integer simulator and the reference path of its dialect disagree."""


@dataclass(frozen=True)
class ComparedLayer:
    ir_name: str


class TfliteReferenceProbe:
    """Every layer of a tflite_int8 IR against the tensor the runtime's interpreter computes for the same operator of
    the .tflite emit_ir wrote (the IR's layers are its operators, in order), on the same int8 inputs."""

    def __init__(self, annotated: Graph, layer_graph, ir, ir_dir: Path, runtime: Runtime):
        self.model_path = ir_dir / TFLITE_FILE
        model = read_tflite(self.model_path)
        sources, input_names, _ = ir_layer_sources(model)
        self.inputs = [input_names[index] for index in model.inputs]  # the IR's names of the file's inputs, in its order
        if len(sources) != len(ir.layers):
            raise IrError(f"{self.model_path}: {len(sources)} operators and constant operands for the IR's {len(ir.layers)} layers; run "
                          "emit_ir again")
        self.layers = [ComparedLayer(layer.name) for layer in ir.layers]
        self.tensors = [source_tensor(source) for source in sources]
        # a constant layer against the file's values, which no runtime gives as a batch
        self.constants = {index: model.tensor(index).data for index in self.tensors if model.tensor(index).data is not None}
        self.runtime, self.reference = runtime.name, runtime.reference
        self.runner = runner_of(runtime.name, self.model_path)

    def compare(self, runner: GraphRunner, integer: dict[str, np.ndarray]) -> list[tuple[int, int, int]]:
        reference = self.runner.tensors([integer[name] for name in self.inputs])
        counts = []
        for layer, tensor in zip(self.layers, self.tensors):
            computed = integer[layer.ir_name]
            constant = self.constants.get(tensor)
            theirs = reference[tensor] if constant is None else np.broadcast_to(constant.reshape(1, -1), (len(computed), constant.size))
            ours, theirs = computed.reshape(-1).astype(np.int16), theirs.reshape(-1).astype(np.int16)
            difference = np.abs(ours - theirs)
            counts.append((int(np.count_nonzero(difference == 0)), ours.size, int(difference.max(initial=0))))
        return counts

    def finish(self, tally: "Tally", end_layers: list[str]) -> dict[str, float]:
        """end_point_agreement (and reference_agreement, the same figure): the fraction of end-point values equal to the
        runtime's."""
        names = [layer.ir_name for layer in self.layers]
        positions = [names.index(name) for name in end_layers]
        equal, total = sum(tally.layer_equal[i] for i in positions), sum(tally.layer_total[i] for i in positions)
        return {"reference_agreement": equal / max(total, 1), "end_point_agreement": equal / max(total, 1)}

    def check(self, tally: "Tally") -> None:
        """Any layer that differs from the runtime's stops the stage, naming the first (the report is written)."""
        agreement = dict(tally.layer_agreement())
        differing = [name for name, value in agreement.items() if value < 1.0]
        if differing:
            index = [layer.ir_name for layer in self.layers].index(differing[0])
            raise SimulationMismatch(
                f"layer {differing[0]} (operator {index} of {self.model_path}) differs from {self.reference} (target.scheme.runtime="
                f"{self.runtime}) on "
                f"{1 - agreement[differing[0]]:.2%} of its values (up to {tally.layer_max_lsb[index]} LSB) over {tally.images} images; "
                f"{len(differing)} layer(s) differ in all. The simulator must compute the runtime's integers: report this with the model")


# each dialect's reference path, layer by layer
PROBES = {"tf2ir": LayerProbe, "tflite_int8": TfliteReferenceProbe}


def _fake_quant_range(graph: Graph, by_name, fake_quant_tensor: str) -> tuple[float, float]:
    node = by_name[tensor_node(fake_quant_tensor)]
    low, high = (float(graph.constants[tensor_node(tensor)].reshape(-1)[0]) for tensor in node.inputs[1:3])
    return low, high


class Tally:
    """Sums over batches: constant memory in the number of images."""

    def __init__(self, end_layers: list[str], layers):
        self.end_layers, self.layers = end_layers, layers
        self.images = self.correct_float = self.correct_annotated = self.correct_integer = 0
        self.end_sums = [ErrorSums() for _ in end_layers]
        self.end_equal = self.end_total = 0
        self.layer_equal = [0] * len(layers)
        self.layer_total = [0] * len(layers)
        self.layer_max_lsb = [0] * len(layers)

    def add_end_points(self, float_ends, annotated_ends, integer_ends, labels) -> None:
        self.images += len(float_ends[0])
        for sums, reference, integer, fake in zip(self.end_sums, float_ends, integer_ends, annotated_ends):
            sums.add(reference, integer)
            self.end_equal += int(np.count_nonzero(integer.reshape(fake.shape) == fake))
            self.end_total += fake.size
        if labels is not None:
            top = [end.reshape(len(labels), -1).argmax(axis=1) for end in (float_ends[0], annotated_ends[0], integer_ends[0])]
            self.correct_float += int(np.sum(top[0] == labels))
            self.correct_annotated += int(np.sum(top[1] == labels))
            self.correct_integer += int(np.sum(top[2] == labels))

    def add_layers(self, per_layer: list[tuple[int, int, int]]) -> None:
        for index, (equal, total, max_lsb) in enumerate(per_layer):
            self.layer_equal[index] += equal
            self.layer_total[index] += total
            self.layer_max_lsb[index] = max(self.layer_max_lsb[index], max_lsb)

    def fake_quant_agreement(self) -> float:
        """The fraction of the integer end-point values equal to the fake-quantized graph's."""
        return self.end_equal / max(self.end_total, 1)

    def layer_agreement(self) -> list[tuple[str, float]]:
        return [(layer.ir_name, self.layer_equal[i] / max(self.layer_total[i], 1)) for i, layer in enumerate(self.layers)]

    def report(self) -> dict:
        return {
            "images": self.images,
            "end_points": [{"layer": name, "sqnr_db": sums.sqnr_db(), "cosine": sums.cosine()} for name, sums in zip(self.end_layers, self.end_sums)],
            "fake_quant_end_point_agreement": self.fake_quant_agreement(),
            "layer_agreement": self.layer_agreement(),
            "layer_max_lsb_difference": [(layer.ir_name, value) for layer, value in zip(self.layers, self.layer_max_lsb)],
            "top1": self._top1(),
        }

    def _top1(self) -> dict:
        if not self.correct_float and not self.correct_integer:
            return {}
        return {"float": self.correct_float / self.images, "annotated": self.correct_annotated / self.images,
                "integer": self.correct_integer / self.images}

    def metrics(self, classifier: bool) -> dict[str, float]:
        agreement = [value for _, value in self.layer_agreement()]
        metrics = {
            "images": self.images,
            "sqnr_db_min": min(sums.sqnr_db() for sums in self.end_sums),
            "cosine_min": min(sums.cosine() for sums in self.end_sums),
            "fake_quant_end_point_agreement": self.fake_quant_agreement(),
            "layer_agreement_min": min(agreement) if agreement else 1.0,
            "layer_max_lsb_difference": max(self.layer_max_lsb, default=0),
        }
        for index, sums in enumerate(self.end_sums):
            metrics[f"sqnr_db.end_point_{index}"] = sums.sqnr_db()
        if classifier:
            metrics.update(top1_float=self.correct_float / self.images, top1_annotated=self.correct_annotated / self.images,
                           top1=self.correct_integer / self.images)
        return metrics
