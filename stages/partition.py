"""partition: the emitted IR split between the target's accelerator and the host (seed 004
[0047]-[0057]): each layer matched against the accelerator's patterns and annotated, the
accelerator layers merged into functions, pack/unpack placed where the layout changes.
Writes `partition_plan.json` (groups, functions, pack/unpack points), `partition.png` and
`report.json`. A target without an accelerator gives the all-host plan."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from core.backends.accel.partition import HOST, partition
from core.backends.accel.target import Accelerator, accelerator_of
from core.ir.io import read_ir
from core.reports.partition import plot_partition
from pipeline.params import to_plain

PLAN_FILE = "partition_plan.json"
PICTURE_FILE = "partition.png"


def run(params, inputs: dict[str, Path], out_dir: Path, ctx) -> dict[str, float]:
    ir = read_ir(inputs["emit_ir"])
    name, accelerator = target_accelerator(params.target)
    plan = partition(ir, accelerator, name)
    (out_dir / PLAN_FILE).write_text(json.dumps(plan.to_json(), indent=1, sort_keys=True) + "\n")
    if params.pictures:
        plot_partition(plan, out_dir / PICTURE_FILE)
    metrics = plan.metrics()
    host = [{"layer": g.layer, "operation": g.operation, "reason": g.reason} for g in plan.groups if g.target == HOST]
    report = {"target": name, "metrics": metrics, "host_layers": host, "notes": plan.notes,
              "functions": [{"name": r.name, "layers": len(r.layers), "macs": r.macs, "pack": r.pack, "unpack": r.unpack}
                            for r in plan.regions]}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    ctx.log(f"target {name}: {metrics['layers_accel']}/{metrics['layers']} layers on the accelerator in {metrics['regions']} "
            f"function(s), MAC share {metrics['mac_share_accel']:.2%}, {metrics['pack_count']} pack, "
            f"{metrics['unpack_count']} unpack, {metrics['boundary_bytes']} bytes across per inference")
    for note in plan.notes:
        ctx.log(note)
    return metrics


def target_accelerator(target) -> tuple[str, Accelerator | None]:
    """The target's name and accelerator, from the typed config (params.target, or its declared
    `name`, `scheme` and `accelerator` keys) or a plain mapping of a conf/target file."""
    plain = to_plain(target) if isinstance(target, Mapping) else {
        key: to_plain(getattr(target, key, None)) for key in ("name", "scheme", "accelerator")}
    return str(plain.get("name") or ""), accelerator_of(plain, origin=f"target {plain.get('name')}")
