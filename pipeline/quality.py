"""Quality guards: a run whose numbers are worthless does not end green.

Bit-exactness proves the integers are the ones the tools predicted, not that they are worth having: an
input clipped to [-1, 1) or a method that clips a network's outputs runs all eight stages bit-exact. Each
guard reads what a stage measured (its metrics and report.json) against a `quality.*` limit; a run stops
after the stage that measured a failure (exit status QUALITY_EXIT), naming the tensor or end point, the
figure and its likely causes, unless `quality.enforce=false`, when the run goes on and its closing table and
MLflow tag `quality` mark it. The stage's result is stored either way: it is a true measurement, and a run
with the guard relaxed reuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

QUALITY_EXIT = 3  # run.py and `python -m pipeline.dvc_stage`: a run that worked and measured a worthless result


@dataclass(frozen=True)
class Finding:
    """One figure beyond its limit."""

    stage: str
    metric: str  # the stage's metric that failed (the closing table marks it)
    key: str  # the quality.* key whose limit it broke
    subject: str  # the tensor, end point or figure
    figure: str
    causes: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.figure} ({self.key}); likely causes: {self.causes}"


class QualityFailed(RuntimeError):
    """A stage measured a result beyond a quality limit with quality.enforce=true; `summary` is the run so far."""

    def __init__(self, findings: list[Finding], summary: Any = None):
        self.findings, self.summary = findings, summary
        stage = findings[0].stage
        super().__init__(f"quality check after {stage} failed: " + "; ".join(str(finding) for finding in findings)
                         + ". The stage's results are stored; set quality.enforce=false to run on anyway, or relax the key named")


def _report(directory: Path) -> dict:
    path = directory / "report.json"
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        return {}


KEEP_FLOAT = ("a layer that cannot take int8: `sensitivity.enabled=true` ranks them, `calib.keep_float=[layer]` keeps one "
              "in float")


def input_mapping(cfg) -> str:
    """What makes the network input from the data, as a cause names it: model.preprocess, or, on data=arrays (which
    applies none), the arrays themselves."""
    if getattr(cfg.data.kind, "value", cfg.data.kind) == "arrays":
        return f"the arrays in data.path={cfg.data.path} (data=arrays applies no preprocessing: they are the input as it is)"
    preprocess = cfg.model.preprocess
    return f"model.preprocess (scale {preprocess.scale:g}, offset {preprocess.offset:g})"


def _clipping(quality, cfg, metrics: dict, directory: Path) -> list[Finding]:
    findings = []
    for fraction, tensor, kind, method, deliberate in _report(directory).get("most_clipped_activations", []):
        # a method that weighs clipping against rounding (mse) clipped where that costs less, and qat's ranges are the
        # model's own (a softmax trained to [0, 255/256] clips its certain answers); the input is the data itself
        if fraction <= quality.max_clipped_fraction or (deliberate and kind != "input"):
            continue
        if kind == "input":
            fixed = getattr(cfg.target.scheme, "input_log2scale", None)  # a power-of-two scheme's setting
            reach = 2.0 ** (cfg.target.scheme.bits - 1 - fixed) if fixed is not None else None
            causes = (f"the input's range against the data: target.scheme.input_log2scale={fixed} holds "
                      f"[-{reach:g}, {reach:g}) and {input_mapping(cfg)} puts the data beyond it: unset "
                      "target.scheme.input_log2scale (null) to let calibration choose it, or fix the data's scale"
                      if fixed is not None else
                      f"calib.method={method} clips the network input; check {input_mapping(cfg)} against what "
                      "the model was trained on, or use calib.method=minmax or mse")
        else:
            causes = (f"calib.method={method} clips this tensor: calib.method=minmax or mse keeps more of its range; or the "
                      f"calibration data are not what the model sees ({input_mapping(cfg)})")
        findings.append(Finding("calibrate", "clipped_fraction_max", "quality.max_clipped_fraction",
                                f"{kind} {tensor}", f"{fraction:.1%} of its calibration values clipped "
                                f"(limit {quality.max_clipped_fraction:.1%})", causes))
    return findings


def _end_points(stage: str):
    def check(quality, cfg, metrics: dict, directory: Path) -> list[Finding]:
        findings = []
        sqnr = metrics.get("sqnr_db_min")
        if sqnr is not None and sqnr < quality.min_sqnr_db:
            report = _report(directory)
            worst: dict[str, Any] = min(report.get("end_points", []), key=lambda item: item.get("sqnr_db", float("inf")), default={})
            layers = [pair for pair in report.get("per_layer_sqnr_db", []) if isinstance(pair, list) and len(pair) == 2]
            first_low = next((layer for layer, value in layers if value is not None and value < quality.min_sqnr_db), None)
            departed = _first_departure(report)
            findings.append(Finding(stage, "sqnr_db_min", "quality.min_sqnr_db",
                                    f"end point {worst.get('float_tensor') or worst.get('layer', '?')}",
                                    f"SQNR against float {sqnr:.2f} dB (limit {quality.min_sqnr_db:g} dB)",
                                    (departed + "; else " if departed else "")
                                    + f"the input's range against {input_mapping(cfg)} (calibrate's clipped fractions); "
                                    f"calib.method={cfg.calib.method.value} clipping outputs (try mse or minmax); "
                                    + KEEP_FLOAT + (f" (the first layer under the limit: {first_low})" if first_low else "")))
        top1, top1_float = metrics.get("top1"), metrics.get("top1_float")
        if top1 is not None and top1_float is not None and top1_float - top1 > quality.max_top1_drop:
            findings.append(Finding(stage, "top1", "quality.max_top1_drop", "top-1",
                                    f"{top1:.2%} against {top1_float:.2%} float, a drop of {top1_float - top1:.2%} "
                                    f"(limit {quality.max_top1_drop:.2%})",
                                    f"the input's range against {input_mapping(cfg)}; a method clipping outputs; " + KEEP_FLOAT))
        return findings
    return check


IR_AGREEMENT = 0.99  # below it, a layer of the IR computes other integers than the annotated graph it was emitted from


def _first_departure(report: dict) -> str:
    """simulate's per-layer agreement of the IR with the annotated graph: where it first falls, the IR itself is the cause
    (an edited field or constant, a damaged file), not calibration; '' where every layer agrees."""
    agreement = [pair for pair in report.get("layer_agreement", []) if isinstance(pair, list) and len(pair) == 2]
    layer, value = next(((layer, value) for layer, value in agreement if value is not None and value < IR_AGREEMENT), (None, None))
    if layer is None:
        return ""
    return (f"the IR computes other integers than the annotated graph from layer {layer} on ({value:.1%} of its values agree): "
            "emit_ir's net_def.json or params/ were edited or damaged, or emit_ir is wrong there: run emit_ir again")


def _input_levels(quality, cfg, metrics: dict, directory: Path) -> list[Finding]:
    span = _report(directory).get("input_span")
    if not span or span["levels"] >= quality.min_input_levels:
        return []
    return [Finding("calibrate", "input_levels", "quality.min_input_levels", f"input {span['tensor']}",
                    f"the calibration data span {span['levels']:.1f} of its quantization steps (limit {quality.min_input_levels:g}): "
                    f"they lie in [{span['data'][0]:.4g}, {span['data'][1]:.4g}], its range is [{span['range'][0]:.4g}, "
                    f"{span['range'][1]:.4g}]",
                    f"{input_mapping(cfg)} against what the model was trained on: a pre-quantized or quantization-aware model fixes its input's range (calib.method=qat), "
                    "so does target.scheme.input_log2scale")]


def _calibrate_checks(quality, cfg, metrics: dict, directory: Path) -> list[Finding]:
    return _clipping(quality, cfg, metrics, directory) + _input_levels(quality, cfg, metrics, directory)


# stage -> what is checked after it
GUARDS: dict[str, Callable[[Any, Any, dict, Path], list[Finding]]] = {
    "calibrate": _calibrate_checks,
    "annotate": _end_points("annotate"),
    "simulate": _end_points("simulate"),
}


def findings_of(cfg, stage: str, metrics: dict, directory: Path) -> list[Finding]:
    """What `stage`'s results break of cfg.quality's limits."""
    guard = GUARDS.get(stage)
    return guard(cfg.quality, cfg, metrics, directory) if guard else []
