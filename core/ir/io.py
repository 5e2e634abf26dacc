"""The TF2IR layer IR (seed 000): build it from the layers and the calibration
table, write it (`net_def.json` + `params/<layer>_<kind>.npy`), read it back,
and validate it against the JSON Schema shipped in `schemas/`.

The JSON is written sorted and indented, and arrays with `np.save`, so emitting
twice gives byte-identical files and the store's digests stay stable.
`previous_layer` lists a layer's producers in the order of the operation's
inputs (add: pl, then add; concat2: input0, then input1), which is the order
the integer kernels take them in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.frontend.layers import LayerGraph
from core.ir.ops import IR_OPS
from core.ir.ops.registry import IrContext, IrError

NET_DEF_FILE = "net_def.json"
PARAMS_DIR = "params"
NETWORK_INPUT = "input"
END_POINT = "endpoint"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "tf2ir_ir.schema.json"


@dataclass
class Ir:
    layers: list[dict[str, Any]]  # the JSON layer list, in execution order
    params: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # layer -> kind -> int8 constants

    def layer(self, name: str) -> dict[str, Any]:
        for layer in self.layers:
            if layer["name"] == name:
                return layer
        raise KeyError(f"no layer {name!r} in the IR")

    @property
    def end_point_layers(self) -> list[str]:
        return [layer["name"] for layer in self.layers if END_POINT in layer["next_layer"]]

    @property
    def input_log2scale(self) -> int:
        """The network input's log2scale, as the layers that read it declare it."""
        values = {input_log2scale_of(layer, position)
                  for layer in self.layers for position, name in enumerate(layer["previous_layer"]) if name == NETWORK_INPUT}
        if len(values) != 1:
            raise IrError(f"the layers reading the network input disagree on its log2scale: {sorted(values)}")
        return values.pop()


def input_log2scale_of(layer: dict[str, Any], position: int) -> int:
    """The log2scale a layer expects on its input at `position` (previous_layer order)."""
    operation = layer["operation"]
    if operation == "add":
        return layer["pl_log2scale"] if position == 0 else layer["add_log2scale"]
    if operation == "concat2":
        return layer[f"input{position}_log2scale"]
    if operation == "reshape":
        return layer["log2scale"]
    return layer["input_log2scale"]


def output_log2scale_of(layer: dict[str, Any]) -> int:
    return layer["log2scale"] if layer["operation"] == "reshape" else layer["output_log2scale"]


def build_ir(layer_graph: LayerGraph, table, min_shift: int = 0, max_shift: int = 31, input_log2scale: int = 7) -> Ir:
    context = IrContext(layer_graph, table, min_shift, max_shift, input_log2scale)
    producer = {layer.output: layer.ir_name for layer in layer_graph.layers}
    producer[layer_graph.graph.input_tensor] = NETWORK_INPUT
    readers: dict[str, list[str]] = {}
    for layer in layer_graph.layers:
        for tensor in layer.inputs:
            readers.setdefault(tensor, []).append(layer.ir_name)
    end_points = set(layer_graph.graph.end_points)
    ir = Ir(layers=[])
    for layer in layer_graph.layers:
        op = IR_OPS[layer.op]
        if op.ir_fields is None or op.kernel is None:
            raise IrError(f"layer {layer.ir_name}: operation {layer.op} has no IR description or kernel yet")
        fields = {"name": layer.ir_name, "operation": layer.op, **op.ir_fields(layer, context)}
        fields["previous_layer"] = [producer[tensor] for tensor in layer.inputs]
        # like the original tool: an end point's consumers (if any) are not followed
        fields["next_layer"] = [END_POINT] if layer.output in end_points else readers.get(layer.output, [])
        if not fields["next_layer"]:
            raise IrError(f"layer {layer.ir_name}: its output {layer.output} is read by no layer and is not an end point")
        ir.layers.append(fields)
        if op.ir_params is not None:
            ir.params[layer.ir_name] = op.ir_params(layer, context)
    return ir


def write_ir(ir: Ir, directory: Path, tensors: dict[str, dict[str, np.ndarray]] | None = None) -> None:
    """net_def.json and params/<layer>_<kind>.npy (constants, plus the test tensors in `tensors`)."""
    directory = Path(directory)
    (directory / PARAMS_DIR).mkdir(parents=True, exist_ok=True)
    (directory / NET_DEF_FILE).write_text(json.dumps(ir.layers, indent=2, sort_keys=True) + "\n")
    for source in (ir.params, tensors or {}):
        for layer, arrays in source.items():
            for kind, array in arrays.items():
                np.save(directory / PARAMS_DIR / f"{layer}_{kind}.npy", np.asarray(array, order="C"), allow_pickle=False)


def read_ir(directory: Path) -> Ir:
    directory = Path(directory)
    path = directory / NET_DEF_FILE
    if not path.is_file():
        raise IrError(f"{path}: no IR here; expected the output directory of the emit_ir stage")
    layers = json.loads(path.read_text())
    validate_ir(layers, origin=str(path))
    params = {}
    for layer in layers:
        kinds = [kind for kind in ("weight", "bias") if (directory / PARAMS_DIR / f"{layer['name']}_{kind}.npy").is_file()]
        params[layer["name"]] = {kind: np.load(directory / PARAMS_DIR / f"{layer['name']}_{kind}.npy") for kind in kinds}
    return Ir(layers, params)


def validate_ir(layers: list[dict[str, Any]], origin: str = "IR") -> None:
    """Against schemas/tf2ir_ir.schema.json, plus the one rule a schema cannot state:
    every layer reads only layers before it."""
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    if not isinstance(layers, list) or not layers:
        raise IrError(f"{origin}: expected a non-empty JSON list of layers")
    # one branch per operation: validating against the layer's own gives messages that name the field
    branches = {branch["properties"]["operation"]["const"]: branch for branch in schema["items"]["oneOf"]}
    for position, layer in enumerate(layers):
        name = layer.get("name", f"#{position}") if isinstance(layer, dict) else f"#{position}"
        operation = layer.get("operation") if isinstance(layer, dict) else None
        if operation not in branches:
            raise IrError(f"{origin}: layer {name}: operation {operation!r} is not one of {', '.join(branches)}")
        errors = sorted(jsonschema.Draft202012Validator(branches[operation]).iter_errors(layer), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(part) for part in errors[0].absolute_path) or "(layer)"
            raise IrError(f"{origin}: layer {name} ({operation}), {where}: {errors[0].message}")
    seen = {NETWORK_INPUT}
    for layer in layers:
        missing = [name for name in layer["previous_layer"] if name not in seen]
        if missing:
            raise IrError(f"{origin}: layer {layer['name']} reads {missing}, which are not earlier layers")
        seen.add(layer["name"])
