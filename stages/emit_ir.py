"""emit-IR: the TF2IR layer IR of seed 000 (net_def.json + params/*.npy), validated
against the shipped JSON Schema, carrying the tensors of one test image; its output
tensors are the integer simulator's, i.e. what the hardware must produce."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.data.datasets import Preprocess, load_image, load_split, preprocess
from core.frontend.graph import Graph
from core.ir.emit import build_ir
from core.ir.io import validate_ir, write_ir
from core.ir.layers import group_layers
from core.ir.ops import OPS
from core.ir.records import IrError
from core.ir.simulator import IntegerSimulator
from core.quantize.scheme import scheme_of
from core.quantize.table import CalibrationTable
from pipeline.params import to_plain


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    table = CalibrationTable.load(inputs["calibrate"])
    if not scheme_of(params.target).has_ir:
        raise IrError(f"target {params.target.name}: the {params.target.scheme.value} scheme has no IR yet; the TF2IR IR needs "
                      "power-of-two, per-tensor scales: run with target=tf2ir (or an accelerator target built on it), or "
                      "until=annotate to measure this scheme")
    float_graph = Graph.load(inputs["calibrate"])  # the graph the table is for (equalized with calib.equalize)
    layer_graph = group_layers(float_graph)
    target = params.target
    ir = build_ir(layer_graph, table, target.min_shift, target.max_shift)
    validate_ir(ir.to_json(), origin="emitted IR")

    image, image_source = test_image(params)
    values = IntegerSimulator(ir).run(image[np.newaxis], keep_all=True)
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
    """model.test_image preprocessed for the model; without one, the first evaluation image."""
    settings = Preprocess.from_config(to_plain(params.model.preprocess))
    if params.model.test_image is not None:
        path = params.model.test_image.path
        return preprocess(load_image(path, settings.channels)[np.newaxis], settings)[0], str(path)
    data = params.data
    first = load_split(data.kind.value, data.path, data.eval_split, settings, limit=1,
                       holdout_fraction=data.holdout_fraction, seed=data.split_seed)
    return first.images[0], f"{first.source}[0]"


def test_tensors(ir, values: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """Per layer: each input under its IR kind (input; add: pl, add; ...) and the output, HWC."""
    tensors = {}
    for layer in ir.layers:
        operands = layer.operands()
        arrays = {OPS[layer.operation].input_kind(position, len(operands)): values[producer][0]
                  for position, producer in enumerate(operands)}
        arrays["output"] = values[layer.name][0]
        tensors[layer.name] = arrays
    return tensors
