"""emit-IR: the TF2IR layer IR of seed 000 (net_def.json + params/*.npy), validated
against the shipped JSON Schema, carrying the tensors of one test image; its output
tensors are the integer simulator's, i.e. what the hardware must produce.

A table of the tflite_int8 scheme is written first as the int8 .tflite it defines (model.tflite, in the
artifact: TFLite's reference kernels run it in simulate, and codegen ships it), and the IR, in the
tflite_int8 dialect, is read from that file (core/ir/tflite_ir.py) as `target.scheme.runtime` computes it: the IR and the
file compute the same integers on that runtime by construction, which simulate checks against its interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from core.backends.accel.target import scheme_settings
from core.backends.tflite.export import export_tflite
from core.backends.capability import refusal
from core.data.datasets import Preprocess, load_image, load_split, preprocess
from core.frontend.graph import Graph, canonical_tensor
from core.frontend.layers import Layer, LayerGraph
from core.frontend.tflite import parse_tflite
from core.ir.emit import build_ir
from core.ir.io import validate_ir, write_ir
from core.ir.layers import group_layers
from core.ir.network import Ir
from core.ir.op import operation_of
from core.ir.simulator import IntegerSimulator
from core.ir.tflite_ir import ir_of_tflite, layer_name
from core.quantize.runtimes import DEFAULT_TFLITE_RUNTIME, Runtime
from core.quantize.schemes import SCHEMES, runtime_of, scheme_of
from core.quantize.table import CalibrationTable
from pipeline.params import to_plain

TFLITE_FILE = "model.tflite"


def tf2ir_ir(params, layer_graph: LayerGraph, table: CalibrationTable, runtime: Runtime | None) -> tuple[Ir, bytes | None]:
    return build_ir(layer_graph, table, params.target.scheme.min_shift, params.target.scheme.max_shift), None


def tflite_int8_ir(params, layer_graph: LayerGraph, table: CalibrationTable, runtime: Runtime | None) -> tuple[Ir, bytes | None]:
    """The IR of the .tflite the table defines, as `runtime` computes it (None: the scheme's default), and the file's
    bytes; each layer named as the graph's."""
    data = export_tflite(layer_graph, table)
    model = parse_tflite(data, TFLITE_FILE)
    producers = {canonical_tensor(layer.output): layer.ir_name for layer in layer_graph.layers}

    def name_of(index: int) -> str:
        name = model.tensor(index).name
        return producers[name] if name in producers else layer_name(model, index)

    return ir_of_tflite(model, name_of, runtime or DEFAULT_TFLITE_RUNTIME), data


# how a table becomes the IR, per dialect (a scheme's `ir_dialect`): (the IR, the file it was read from, if any)
EMITTERS = {"tf2ir": tf2ir_ir, "tflite_int8": tflite_int8_ir}
# the targets a refusal offers instead: the checkout's configuration, which sits beside stages/
TARGETS_DIR = Path(__file__).resolve().parents[1] / "conf" / "target"


class UntakeableLayers(ValueError):
    """Layers the target cannot take, every one named with the targets that take it."""


def refuse_untakeable(target_cfg, layer_graph: LayerGraph) -> None:
    """Raise UntakeableLayers naming each layer of `layer_graph` the configured target cannot take, why, and the targets
    (conf/target/*.yaml) that take it: all of them at once, before any calibration work."""
    scheme, runtime = scheme_of(target_cfg), runtime_of(target_cfg)
    refused = [(layer, reason) for layer in layer_graph.layers
               if (reason := refusal(scheme.ir_dialect, layer, scheme.bits, runtime)) is not None]
    if not refused:
        return
    others = _other_targets(str(target_cfg.name))
    lines, taking_all = [], set(others)
    for layer, reason in refused:
        taking = [name for name, (dialect, bits) in others.items() if refusal(dialect, layer, bits) is None]
        taking_all &= set(taking)
        lines.append(f"  - layer {layer.ir_name} ({_operation(layer)}): {reason}; targets that take it: {', '.join(taking) or 'none'}")
    advice = f"choose target={' or target='.join(sorted(taking_all))}" if taking_all else "no target takes every one of them"
    raise UntakeableLayers(f"target={target_cfg.name} cannot take {len(refused)} layer{'s' if len(refused) > 1 else ''} of this model "
                           f"(nothing was calibrated):\n" + "\n".join(lines) + f"\n{advice}, or change the model")


def _operation(layer: Layer) -> str:
    named = getattr(layer.attrs, "named", None)
    return f"{layer.op}: {named.name}" if named is not None else layer.op


def _other_targets(current: str) -> dict[str, tuple[str, int]]:
    """Every other target of conf/target: its scheme's dialect and width."""
    targets = {}
    for path in sorted(TARGETS_DIR.glob("*.yaml")):
        scheme = SCHEMES.get(scheme_settings(yaml.safe_load(path.read_text()) or {})["name"])
        if path.stem != current and scheme is not None:
            targets[path.stem] = (scheme.ir_dialect, scheme.bits)
    return targets


def emitted_ir(params, layer_graph: LayerGraph, table: CalibrationTable, runtime: Runtime | None) -> tuple[Ir, bytes | None]:
    """The IR `table` defines for the target's scheme as `runtime` computes it (and the .tflite it is read from, on
    tflite_int8), every representability check of the IR made: calibrate runs it on the table it builds (with the
    scheme's default runtime: what an IR can hold does not depend on the runtime), so that a table the IR cannot hold
    is refused there, before annotate."""
    ir, data = EMITTERS[scheme_of(params.target).ir_dialect](params, layer_graph, table, runtime)
    validate_ir(ir.to_json(), origin="emitted IR")
    return ir, data


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    table = CalibrationTable.load(inputs["calibrate"])
    float_graph = Graph.load(inputs["calibrate"])  # the graph the table is for (equalized with calib.equalize)
    layer_graph = group_layers(float_graph)
    ir, tflite_bytes = emitted_ir(params, layer_graph, table, runtime_of(params.target))
    if tflite_bytes is not None:  # tflite_int8: the file the IR was read from ships beside it
        (out_dir / TFLITE_FILE).write_bytes(tflite_bytes)

    image, image_source = test_image(params)
    values = IntegerSimulator(ir).run(image, keep_all=True)
    write_ir(ir, out_dir, test_tensors(ir, values))
    counts: dict[str, int] = {}
    for layer in ir.layers:
        counts[layer.operation] = counts.get(layer.operation, 0) + 1
    (out_dir / "report.json").write_text(json.dumps({"layers": len(ir.layers), "operations": counts, "test_image": image_source,
                                                     "end_points": ir.end_point_layers}, indent=1, sort_keys=True) + "\n")
    ctx.log(f"{len(ir.layers)} layers ({', '.join(f'{n} {op}' for op, n in sorted(counts.items()))}); test image {image_source}")
    constant_bytes = sum(array.nbytes for arrays in ir.params.values() for array in arrays.values())
    return {"layers": len(ir.layers), "end_points": len(ir.end_point_layers), "constant_bytes": constant_bytes,
            **{f"layers_{op}": n for op, n in counts.items()}}


def test_image(params) -> tuple[np.ndarray, str]:
    """model.test_image preprocessed for the model; without one, the first evaluation image (a batch of one; a model of
    several inputs: {input name: a batch of one})."""
    settings = Preprocess.from_config(to_plain(params.model.preprocess))
    if params.model.test_image is not None:
        path = params.model.test_image.path
        return preprocess(load_image(path, settings.channels)[np.newaxis], settings), str(path)
    data = params.data
    first = load_split(data.kind.value, data.path, data.eval_split, settings, limit=1,
                       holdout_fraction=data.holdout_fraction, seed=data.split_seed)
    return first.images[0:1], f"{first.source}[0]"


def test_tensors(ir, values: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """Per layer: each input under its IR kind (input; add: pl, add; ...) and the output, HWC."""
    tensors = {}
    for layer in ir.layers:
        operands = layer.operands()
        arrays = {operation_of(layer).input_kind(position, len(operands)): values[producer][0]
                  for position, producer in enumerate(operands)}
        arrays["output"] = values[layer.name][0]
        tensors[layer.name] = arrays
    return tensors
