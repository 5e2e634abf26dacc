"""Compare pipeline runs from MLflow as a table: `python -m pipeline.report`.

    python -m pipeline.report --experiment mbv1_cifar10/graph.pb [--tracking-uri sqlite:///mlflow.db]
        [--metrics annotate.top1,annotate.sqnr_db_min] [--sweep SWEEP_ID]

One row per finished run (of the newest sweep, or the sweep given), newest first, columns: when it started, its
name, the target and calibration method, the other settings that differ between the rows (`key=value`; places such
as paths and the store are left out), then the metrics asked for; Markdown, so it can go straight into a note or a
review.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

DEFAULT_METRICS = ("annotate.top1_float", "annotate.top1_qat_graph", "annotate.top1", "annotate.sqnr_db_min", "calibrate.clipped_fraction_max")


def runs_table(tracking_uri: str, experiment: str, metrics: list[str], sweep: str | None = None) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = sorted(item.name for item in client.search_experiments() if item.name != "Default")
        raise SystemExit(f"no experiment {experiment!r} in {tracking_uri}; it holds {', '.join(names) or 'none'}")
    # a failed run has partial metrics: it has nothing to compare
    runs = list(client.search_runs([found.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                   order_by=["attributes.start_time DESC"]))
    if sweep is None and runs:
        sweep = runs[0].data.tags.get("sweep_id")
    runs = [run for run in runs if (sweep is None or run.data.tags.get("sweep_id") == sweep)
            and run.data.tags.get("sweep_role") != "parent"]  # a sweep's parent run holds its summary, not a configuration
    varying = differing_params(runs)
    header = ["started", "run", "target", "calib.method", "other settings", *metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for run in runs:
        params = run.data.params
        cells = [time.strftime("%Y-%m-%d %H:%M", time.localtime(run.info.start_time / 1000)), run.info.run_name or "",
                 params.get("target.name", ""), params.get("calib.method", ""),
                 " ".join(f"{key}={params.get(key, '')}" for key in varying)]
        cells += [_format(run.data.metrics.get(metric)) for metric in metrics]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return f"experiment {experiment}, sweep {sweep}, {len(runs)} run(s)\n" + "\n".join(lines)


SHOWN = ("target.name", "calib.method")  # their own columns
# where things are, not what is computed (tracking.py's run names leave them out too)
PLACES = re.compile(r"(export_dir|tracking_uri|until|store\..*|limits\..*|.*\.(path|url|sha256))")


def differing_params(runs: list) -> list[str]:
    """The params whose values differ between `runs`, beyond those with their own column and the places."""
    keys = sorted({key for run in runs for key in run.data.params})
    return [key for key in keys if key not in SHOWN and not PLACES.fullmatch(key)
            and len({run.data.params.get(key) for run in runs}) > 1]


def _format(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", required=True, help="the model's name, then its file's (mbv1_cifar10/graph.pb); a built-in "
                        "model's name alone (digits)")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS))
    parser.add_argument("--sweep", default=None, help="a sweep_id tag; default: the newest run's sweep")
    args = parser.parse_args(argv)
    print(runs_table(args.tracking_uri, args.experiment, args.metrics.split(","), args.sweep))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
