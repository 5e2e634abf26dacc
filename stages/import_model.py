"""import: a TensorFlow model (frozen GraphDef, SavedModel, .keras, or a built-in
model, trained once per settings on a machine) into the project's graph, pruned to the end points, Identity-free, with shapes; and
refused here, before any later stage runs, if a node of it is one no IR layer can hold."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path

import numpy as np

from core.frontend.builtin_models import BuiltModel, build_builtin_model, read_built_model, write_builtin_model
from core.frontend.fake_quant import EXACT_PARAMETERS, FAKE_QUANT_OPS, bypass_fake_quant
from core.frontend.graph import Graph
from core.frontend.importer import ModelImportError, import_graph, load_graph_def
from core.frontend.refusals import unsupported_node
from core.frontend.layers import LayerError, LayerGraph
from core.frontend.prepare import prepare
from core.ir.layers import group_layers
from core.limits import MemoryBudget, check_activations
from pipeline.params import ModelFormat, to_plain


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    model = params.model
    budget = MemoryBudget(params.limits.memory_mb)
    metrics: dict[str, float] = {}
    layer_names = None
    if model.format is ModelFormat.builtin:
        built = _built_model(to_plain(model.builtin), ctx)
        graph_def, input_tensor, end_points = built.graph_def, built.input_tensor, built.end_points
        metrics.update(built.metrics)
        origin, source = f"builtin:{model.builtin.name}", {"format": "builtin", "builtin": to_plain(model.builtin)}
    else:
        loaded = load_graph_def(model.format.value, model.file.path, budget)
        graph_def = loaded.graph_def
        input_tensor = model.input_tensor or loaded.default_input_tensor
        end_points = list(model.end_points) or loaded.default_end_points or []
        origin, source = str(model.file.path), {"format": model.format.value, "sha256": model.file.sha256}
        if loaded.fake_quant_parameters:
            source[EXACT_PARAMETERS] = loaded.fake_quant_parameters
        layer_names = loaded.layer_names
    input_size = tuple(model.preprocess.size) if model.preprocess.size else None
    graph = import_graph(graph_def, input_tensor, end_points, origin=origin, source=source, budget=budget, layer_names=layer_names,
                         input_size=input_size)
    if "input_size_fixed" in graph.source:
        ctx.log(f"the input {', '.join(graph.input_tensors)}, of open size, fixed to {graph.source['input_size_fixed']} (model.preprocess.size "
                f"{list(model.preprocess.size)})")
    if graph.source.get("float16_casts_removed"):
        ctx.log(f"float16 (a mixed_float16 model): computed in float32, {graph.source['float16_casts_removed']} float32 <-> float16 "
                "Casts removed; the int8 model is calibrated on the float32 values")
    _check_finite_constants(graph, origin)
    check_activations(budget, graph.activation_bytes(), origin)  # before constant folding runs the graph
    layer_graph = expressible_layers(graph, origin, layer_names)
    graph.save(out_dir)
    report = import_report(graph)
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    inputs = ", ".join(f"{tensor} {shape}" for tensor, shape in report["inputs"].items())
    ctx.log(f"{report['nodes']} nodes, input{'s' if len(report['inputs']) > 1 else ''} {inputs}, {len(graph.end_points)} end point(s)")
    ctx.log(f"{len(layer_graph.layers)} IR layers after folding and canonical rewrites")
    metrics.update(
        nodes=report["nodes"],
        constants=len(graph.constants),
        fake_quant_nodes=report["fake_quant_nodes"],
        quantization_aware=float(report["fake_quant_nodes"] > 0),
    )
    return metrics


# the modules whose versions a built-in model's bytes depend on (its training's kernels, its data)
BUILT_WITH = ("tensorflow", "keras", "numpy", "sklearn")


def _built_model(settings: dict, ctx) -> BuiltModel:
    """The built-in model of `settings`, trained once per settings, code and libraries on this machine (kept in the
    download cache, ctx.built) and read from there by every store: a new store does not train it again."""
    trained = []

    def build(directory: Path) -> None:
        write_builtin_model(settings, directory, progress=ctx.progress)
        trained.append(directory)

    if ctx.built is None:
        return build_builtin_model(settings, progress=ctx.progress)
    material = {"builtin": settings, "libraries": {name: import_module(name).__version__ for name in BUILT_WITH}}
    directory = ctx.built(material, build)
    if not trained:
        ctx.log(f"the built-in model {settings.get('name', 'digits')}: as trained before on this machine, from {directory.parent}")
    return read_built_model(directory)


def _check_finite_constants(graph: Graph, origin: str) -> None:
    """A NaN or Inf weight makes every activation after it NaN: refused here naming the constant, not blamed on
    the data when calibration meets the first NaN activation."""
    for name, value in graph.constants.items():
        if np.issubdtype(value.dtype, np.floating) and not np.all(np.isfinite(value)):
            bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
            raise ModelImportError(f"{origin}: the constant {name} ({list(value.shape)} {value.dtype}) holds {bad} NaN or Inf "
                               "value(s); the model's weights are damaged or its training diverged: re-export it from a good "
                               "checkpoint")


def import_report(graph: Graph) -> dict:
    op_counts = graph.op_counts()
    return {
        "nodes": len(graph.nodes),
        "op_counts": op_counts,
        "inputs": {tensor: graph.shape(tensor) for tensor in graph.input_tensors},
        "end_points": {tensor: graph.shape(tensor) for tensor in graph.end_points},
        "fake_quant_nodes": sum(op_counts.get(op, 0) for op in sorted(FAKE_QUANT_OPS)),
        "source": graph.source,
    }


def expressible_layers(graph: Graph, origin: str, layer_names: dict[str, str] | None) -> LayerGraph:
    """The IR layers of the graph as fold_check will leave it (folded, canonical, FakeQuant
    bypassed), or the refusal of the first node no layer holds."""
    prepared = prepare(graph)
    float_graph, _ = bypass_fake_quant(prepared.graph)
    try:
        return group_layers(float_graph)
    except LayerError as error:
        unfolded = {item["name"]: item.get("reason") for item in prepared.folding.unfolded}
        reason = str(error)
        if error.node.name in unfolded:
            reason = f"a BatchNorm that cannot be folded into a conv: {unfolded[error.node.name]}"
        raise unsupported_node(origin, graph, float_graph, error.node.name, reason, layer_names) from error
