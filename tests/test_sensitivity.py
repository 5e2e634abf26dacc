"""Per-layer sensitivity (issue 12): through the annotate stage it ranks the layers, writes the
table and the plot MLflow shows; a layer whose scale is made deliberately coarse comes first, and
keeping it in float ("all but") recovers the most."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
from rich.console import Console

from conftest import compose
from core.frontend.graph import Graph
from core.ir.layers import group_layers
from core.quantize import sensitivity
from core.quantize.schemes import pow2_range
from core.quantize.table import CalibrationTable
from core.data.datasets import load_split
from pipeline.main import run_pipeline
from pipeline.params import to_plain

QUIET = Console(file=open(os.devnull, "w"))


def test_sensitivity_ranks_a_deliberately_coarse_layer_first(workspace):
    cfg = compose(*workspace, "sensitivity.enabled=true", "sensitivity.num_images=16", "until=annotate", "pictures=true")
    summary = run_pipeline(cfg, console=QUIET)
    directories = {result.stage.name: result.artifact.directory for result in summary.results}
    rows = json.loads((directories["annotate"] / "sensitivity.json").read_text())
    graph = Graph.load(directories["calibrate"])
    layer_graph = group_layers(graph)
    table = CalibrationTable.load(directories["calibrate"])
    owners = [layer.ir_name for layer in layer_graph.layers if sensitivity.layer_entries(layer, table)]  # the IR's names
    assert sorted(row["layer"] for row in rows) == sorted(owners)
    assert [row["only_this_sqnr_db"] for row in rows] == sorted(row["only_this_sqnr_db"] for row in rows)
    assert summary.metrics["annotate.sensitivity_sqnr_db_min"] == rows[0]["only_this_sqnr_db"]
    assert (directories["annotate"] / "sensitivity.png").stat().st_size > 5000

    # the same table with one mid-network layer's output 2^4 times coarser
    victim = next(layer for layer in layer_graph.layers[2:] if layer.output in table.tensors and table.tensors[layer.output].log2scale is not None)
    entry = table.tensors[victim.output]
    coarse = dataclasses.replace(entry, log2scale=entry.log2scale - 4, range=pow2_range(entry.log2scale - 4, 8))
    degraded = CalibrationTable(table.method, table.target, table.bits, {**table.tensors, victim.output: coarse})
    images = load_split(cfg.data.kind.value, cfg.data.path, cfg.data.eval_split, to_plain(cfg.model.preprocess), limit=16,
                        holdout_fraction=cfg.data.holdout_fraction, seed=cfg.data.split_seed).images
    results = sensitivity.analyze(layer_graph, degraded, graph, np.asarray(images[:16]), 16)
    assert sensitivity.ranked(results)[0].layer == victim.ir_name
    assert max(results, key=lambda item: item.all_but_this_sqnr_db).layer == victim.ir_name
