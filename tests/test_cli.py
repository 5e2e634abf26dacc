"""run.py as a shell user meets it: the app help and shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from conftest import PROJECT_ROOT, tracking_override
from pipeline.config import CalibMethod
from pipeline.stages import STAGE_NAMES
from pipeline.units import rounded


def _run_py(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_help_lists_the_stages_models_methods_targets_and_common_overrides():
    completed = _run_py("--help")
    assert completed.returncode == 0, completed.stderr
    text = completed.stdout
    assert " -> ".join(STAGE_NAMES) in text  # in the order they run
    for group in ("model", "target", "data"):
        options = sorted(path.stem for path in (PROJECT_ROOT / "conf" / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in text
    for method in CalibMethod:
        assert f"\n  {method.value} " in text, method
    for override in ("calib.method=", "model.file.path=", "until=", "store.url=", "tracking_uri="):
        assert override in text
    assert "model:\n  name:" not in text and len(text.splitlines()) < 60  # no config dump


@pytest.mark.parametrize("line, expected", [
    ("python run.py calib.method=", {f"calib.method={method.value}" for method in CalibMethod}),
    ("python run.py -m calib.method=minmax,k", {"calib.method=minmax,kl"}),
    ("python run.py calib.weight_method=", {"calib.weight_method=minmax", "calib.weight_method=mse"}),
    ("python run.py calib.equalize=", {"calib.equalize=true", "calib.equalize=false"}),
    ("python run.py target=", {f"target={path.stem}" for path in (PROJECT_ROOT / "conf" / "target").glob("*.yaml")}),
    ("python run.py calib.me", {"calib.method="}),
])
def test_shell_completion_offers_every_choice_of_a_typed_value(line, expected):
    """What bash's completion script asks (`COMP_LINE=... python run.py -sc query=bash`)."""
    completed = _run_py("-sc", "query=bash", env={"COMP_LINE": line})
    assert completed.returncode == 0, completed.stderr
    assert set(completed.stdout.split()) == expected


def test_the_bash_completion_script_installs():
    completed = _run_py("-sc", "install=bash")
    assert completed.returncode == 0 and "hydra_bash_completion" in completed.stdout


@pytest.mark.parametrize("line, expected", [
    (".venv/bin/python run.py calib.method=k", {"calib.method=kl"}),
    (".venv/bin/python run.py mod", {"model=", "model."}),  # Hydra's own completion, with the venv's interpreter
    (f"{PROJECT_ROOT}/.venv/bin/python run.py target=accel_t", {"target=accel_tflite"}),
])
def test_the_readme_completion_line_completes_in_bash(line, expected):
    """The README's `eval "$(.venv/bin/python run.py -sc install=bash)"` in a real bash, then what pressing Tab
    after `line` calls: the completion function bash registered for the line's first word."""
    if not (PROJECT_ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("needs the project's .venv (make run makes it)")
    script = (f'eval "$(.venv/bin/python run.py -sc install=bash)"\n'
              f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; COMP_WORDS=($COMP_LINE); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n'
              'function_name=$(complete -p "${COMP_WORDS[0]}" | sed -E "s/.* -F ([^ ]+) .*/\\1/")\n'
              '"$function_name"; printf "%s\\n" "${COMPREPLY[@]}"\n')
    completed = subprocess.run(["bash", "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert set(completed.stdout.split()) == expected, completed.stdout + completed.stderr


@pytest.fixture(scope="module")
def digits_console_run(tmp_path_factory, model_cache):
    """`python run.py` on the default model as a user runs it, in its own store, MLflow and run directory."""
    root = tmp_path_factory.mktemp("console")
    completed = _run_py(f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root),
                        f"hydra.run.dir={root / 'run'}", f"export_dir={root / 'export'}")
    assert completed.returncode == 0, completed.stderr[-3000:]
    return root, completed


def test_a_run_ends_with_a_short_table_and_writes_every_metric_to_its_directory(digits_console_run):
    root, completed = digits_console_run
    output = completed.stdout + completed.stderr
    metrics = json.loads((root / "run" / "metrics.json").read_text())
    assert f"all {len(metrics)} metrics: {root / 'run' / 'metrics.json'}" in output
    table = output[output.index(" stage "):]
    for stage in STAGE_NAMES:  # one row per stage: ran, and its headline figures
        row = next(line for line in table.splitlines() if line.strip().startswith(f"{stage} "))
        assert " ran " in row, row
    # in the units a person reads: a percentage, decibels
    assert f"top1 {metrics['annotate.top1'] * 100:.4g}%" in table and "bitexact 100%" in table
    assert f"sqnr_db_min {metrics['annotate.sqnr_db_min']:.2f} dB" in table
    assert "annotate.top1 =" not in output  # no dump of every metric
    assert "import: key" in (root / "run" / "run.log").read_text()  # the same lines through logging, in Hydra's run.log


def test_tensorflow_and_mlflow_start_up_noise_stays_off_the_console(digits_console_run):
    _, completed = digits_console_run
    output = completed.stdout + completed.stderr
    for noise in ("absl::InitializeLog", "oneDNN custom operations", "mlflow.store.db.utils", "Creating initial MLflow database"):
        assert noise not in output, noise


def _picture_text(path: Path) -> list[dict]:
    return json.loads(Image.open(path).text["Description"])


def test_the_pictures_say_what_they_plot(digits_console_run):
    """Read from each PNG's text chunk (what its axes say), as the run wrote it."""
    export = digits_console_run[0] / "export"
    agreement = _picture_text(export / "simulate" / "layer_agreement.png")
    assert agreement[0]["y"].startswith("fraction of elements equal") and "SQNR" not in agreement[0]["y"]
    partition = _picture_text(export / "partition" / "partition.png")  # tf2ir has no accelerator: the host's work, not dots
    assert "all 8 layers" in partition[0]["title"] and "run on the host" in partition[0]["title"]
    assert "multiply-accumulates" in partition[0]["x"]
    histograms = _picture_text(export / "calibrate" / "histograms.png")
    assert len(histograms) == len(json.loads((export / "calibrate" / "histograms" / "index.json").read_text()))  # one per histogram


def test_a_mistyped_key_is_answered_with_the_nearest_keys_before_hydra_starts():
    completed = subprocess.run([sys.executable, "run.py", "calib.methd=kl"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert "error: calib.methd=kl: calib has no key 'methd'; did you mean calib.method?" in completed.stderr


def test_the_store_command_says_what_it_does():
    completed = subprocess.run([sys.executable, "-m", "pipeline.store", "--help"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0
    assert "remove the store entries no recent run and no DVC lock needs" in " ".join(completed.stdout.split())


@given(st.floats(0.0, 1.0))
def test_a_fraction_logged_to_mlflow_keeps_its_meaning(value):
    """Rounded to 0.01%, but never onto 1 or 0 when it is not that: an agreement of 0.99997 is not bit-exact."""
    for name in ("annotate.top1", "simulate.end_point_agreement", "calibrate.clipped_fraction_max"):
        shown = rounded(name, value)
        assert abs(shown - value) <= 5e-5 and (shown == 1.0) == (value == 1.0) and (shown == 0.0) == (value == 0.0)


@given(st.floats(-200.0, 200.0), st.integers(0, 2**40))
def test_decibels_and_counts_logged_to_mlflow(decibels, count):
    assert abs(rounded("annotate.sqnr_db_min", decibels) - decibels) <= 0.005 + 1e-12
    assert rounded("codegen.constant_bytes", count) == count and rounded("codegen.accel_cycles", float(count)) == count
