"""Inputs as users have them, and no silent wrong result: the network input's scale chosen from the data
(MLPerf Tiny's ResNet-8 takes raw pixels), models of any input rank on data=arrays, KL where the seeds apply
it, the quality guards, and warnings summarized. Real models: MLCommons' trained ResNet-8 and the SSD from
../shared, and small Keras models built here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, PROJECT_ROOT, compose, tracking_override
from core.data.datasets import load_split
from core.quantize.table import CalibrationTable
from core.quantize.tflite_reference import reference_interpreter, reference_tensors
from pipeline.main import run_pipeline
from pipeline.quality import QUALITY_EXIT, QualityFailed

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet.h5"
# its README: raw pixels in [0, 255] (preprocess scale 1, offset 0); 87.71% float top-1 on the 846 test images
RESNET8_RUN = ["model=keras_cifar10", f"model.file.path={RESNET8}", f"data.path={CIFAR10_DIR}",
               "model.preprocess.scale=1", "model.preprocess.offset=0"]
QUIET = Console(file=open(os.devnull, "w"))

needs_resnet8 = pytest.mark.skipif(not RESNET8.exists(), reason=f"{RESNET8} is missing: the shared test models are not beside the checkout")


def _run(*overrides: str):
    output = io.StringIO()
    summary = run_pipeline(compose(*overrides), console=Console(file=output, width=400))
    return summary, output.getvalue()


def _artifact(summary, stage: str) -> Path:
    return next(result.artifact.directory for result in summary.results if result.stage.name == stage)


@pytest.fixture(scope="module")
def resnet8_store(tmp_path_factory, model_cache):
    """One store and MLflow database for the ResNet-8 runs: import and fold_check are computed once."""
    root = tmp_path_factory.mktemp("resnet8")
    return [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root), "pictures=false"]


# --- the input is a tensor like any other ---------------------------------------------------------
@needs_resnet8
def test_resnet8_on_raw_pixels_keeps_its_accuracy_with_the_defaults(resnet8_store):
    summary, printed = _run(*resnet8_store, *RESNET8_RUN)
    metrics = summary.metrics
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.end_point_agreement"] >= 0.99
    assert metrics["annotate.top1_float"] == pytest.approx(742 / 846)  # the README's 87.71%
    assert metrics["simulate.top1"] >= 0.867, printed
    table = json.loads((_artifact(summary, "calibrate") / "calibration_table.json").read_text())
    (entry,) = [entry for entry in table["tensors"].values() if entry["kind"] == "input"]
    # pixels reach 255: the power-of-two range holding them is [-256, 254], log2scale -1, and nothing is clipped
    assert (entry["log2scale"], entry["clipped_fraction"]) == (-1, 0.0) and entry["absmax"] == 255.0
    assert summary.quality == [] and "quality" not in printed


@needs_resnet8
def test_resnet8_on_tflite_int8_with_the_defaults_matches_mlcommons_own_int8_model(resnet8_store):
    """The float .h5 through every stage on tflite_int8 with the defaults: the integers (simulate's, equal to
    TFLite's reference kernels on the .tflite emit_ir wrote, and to the C's) at least as good as MLCommons' own
    int8 model: 21.6 dB end-point SQNR and 87.47% top-1 on these images (../shared/models/README.md)."""
    summary, printed = _run(*resnet8_store, *RESNET8_RUN, "target=tflite_int8", "tracking.register=resnet8_int8")
    metrics = summary.metrics
    assert metrics["simulate.sqnr_db_min"] >= 21.6 and metrics["simulate.top1"] >= 0.8747, printed
    assert metrics["simulate.reference_agreement"] == 1.0 and metrics["codegen.bitexact"] == 1.0, printed
    _the_logged_model_is_the_tflite_that_was_checked(summary, resnet8_store)


def _the_logged_model_is_the_tflite_that_was_checked(summary, store_overrides):
    """MLflow holds the run's logged model: its .tflite, read back from MLflow, is the bytes codegen shipped; its signature
    and quantization are the file's; loaded as a pyfunc it gives LiteRT's reference kernels' outputs on CIFAR-10 images
    quantized by the scale and zero point it declares; and it is registered under the name asked for."""
    import mlflow
    from mlflow.entities import LoggedModelStatus
    from mlflow.models import Model

    mlflow.set_tracking_uri(store_overrides[2].split("=", 1)[1])
    (logged,) = [model for model in mlflow.search_logged_models(experiment_ids=[summary.mlflow_experiment_id], output_format="list")
                 if model.source_run_id == summary.mlflow_run_id]
    assert logged.model_id == summary.logged_model_id and logged.status == LoggedModelStatus.READY
    assert {"codegen.bitexact", "simulate.top1"} <= {metric.key for metric in logged.metrics}
    downloaded = Path(mlflow.artifacts.download_artifacts(f"models:/{logged.model_id}"))
    shipped = _artifact(summary, "codegen") / "model.tflite"
    assert (downloaded / "model.tflite").read_bytes() == shipped.read_bytes()
    assert (downloaded / "program" / "program.c").is_file() and (downloaded / "ir" / "calibration_table.json").is_file()
    described = Model.load(str(downloaded / "MLmodel"))
    reference = reference_interpreter(shipped, 1)
    (detail,) = reference.get_input_details()
    (spec,) = described.signature.inputs.inputs
    assert (spec.type, spec.shape) == (np.dtype(np.int8), (-1, *detail["shape"][1:]))
    declared = described.metadata["inputs"][spec.name]
    assert (declared["scale"], declared["zero_point"]) == (pytest.approx(detail["quantization"][0]), detail["quantization"][1])
    images = load_split("cifar10", CIFAR10_DIR, "test_batch", {"scale": 1, "offset": 0}, limit=8).images
    batch = np.clip(np.round(np.asarray(images) / declared["scale"]) + declared["zero_point"], -128, 127).astype(np.int8)
    predicted = mlflow.pyfunc.load_model(f"models:/{logged.model_id}").predict(batch)
    expected = reference_tensors(shipped, batch)[reference.get_output_details()[0]["index"]]
    assert predicted.dtype == np.int8 and np.array_equal(predicted, expected)
    (version,) = mlflow.tracking.MlflowClient().search_model_versions("name='resnet8_int8'")
    assert version.source == f"models:/{logged.model_id}"


@needs_resnet8
def test_a_mis_scaled_input_stops_after_calibrate_naming_the_input_and_the_keys(resnet8_store):
    with pytest.raises(QualityFailed) as failed:
        _run(*resnet8_store, *RESNET8_RUN, "target.scheme.input_log2scale=7")
    (finding,) = failed.value.findings
    assert (finding.stage, finding.key) == ("calibrate", "quality.max_clipped_fraction")
    assert finding.subject == "input input_1:0" and finding.figure.startswith("99.7% of its calibration values clipped")
    assert "target.scheme.input_log2scale=7 holds [-1, 1)" in finding.causes and "model.preprocess (scale 1, offset 0)" in finding.causes
    # the stage ran and is stored: a run with the guard relaxed reuses it
    assert [result.stage.name for result in failed.value.summary.results] == ["import", "fold_check", "calibrate"]


@needs_resnet8
def test_run_py_exits_with_the_quality_status_and_marks_the_table(resnet8_store):
    result = subprocess.run([sys.executable, "run.py", *resnet8_store, *RESNET8_RUN, "target.scheme.input_log2scale=7",
                             "hydra.run.dir=" + str(Path(resnet8_store[0].split("=", 1)[1]).parent / "run")],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == QUALITY_EXIT, result.stderr
    assert "Traceback" not in result.stderr
    (row,) = [line for line in result.stderr.splitlines() if line.strip().startswith("calibrate ") and "quality ✗" in line]
    assert "clipped_fraction_max" in row, result.stderr
    assert "clipped_fraction_max 99.74% ✗" in result.stderr
    assert "stopped: quality check after calibrate failed: input input_1:0" in result.stderr


@needs_resnet8
def test_not_enforced_the_run_goes_on_and_every_guard_that_failed_is_reported(resnet8_store):
    summary, printed = _run(*resnet8_store, *RESNET8_RUN, "target.scheme.input_log2scale=7", "quality.enforce=false")
    assert [result.stage.name for result in summary.results][-1] == "codegen" and summary.metrics["codegen.bitexact"] == 1.0
    failed = {(finding.stage, finding.key) for finding in summary.quality}
    assert {("calibrate", "quality.max_clipped_fraction"), ("annotate", "quality.max_top1_drop"),
            ("annotate", "quality.min_sqnr_db"), ("simulate", "quality.min_sqnr_db")} <= failed
    assert summary.metrics["annotate.top1"] < 0.2  # what the guard caught: the 11.5%
    assert "annotate: quality: top-1:" in printed
    # MLflow carries it: the run's tag, and a sweep's summary marks such a job
    from mlflow.tracking import MlflowClient

    from pipeline.sweep import summary_rows

    client = MlflowClient(tracking_uri=resnet8_store[2].split("=", 1)[1])
    run = client.get_run(summary.mlflow_run_id)
    assert "99.7% of its calibration values clipped" in run.data.tags["quality"]
    (row,) = summary_rows([run], [])
    assert row[2] == "FINISHED QUALITY" and row[-1].startswith("quality (not enforced): input input_1:0")


@needs_resnet8
def test_the_top1_guard_names_the_drop_when_clipping_is_allowed(resnet8_store):
    with pytest.raises(QualityFailed) as failed:
        _run(*resnet8_store, *RESNET8_RUN, "target.scheme.input_log2scale=7", "quality.max_clipped_fraction=1")
    keys = [finding.key for finding in failed.value.findings]
    assert failed.value.findings[0].stage == "annotate" and "quality.max_top1_drop" in keys
    top1 = next(finding for finding in failed.value.findings if finding.key == "quality.max_top1_drop")
    assert "against 87.71% float" in top1.figure and "calib.keep_float" in top1.causes


def test_the_sqnr_guard_names_the_end_point(workspace):
    with pytest.raises(QualityFailed) as failed:
        _run(*workspace, "quality.min_sqnr_db=80", "model.builtin.epochs=2")
    (finding,) = failed.value.findings
    assert (finding.stage, finding.key) == ("annotate", "quality.min_sqnr_db")
    assert finding.subject.startswith("end point ") and "SQNR against float" in finding.figure and "(limit 80 dB)" in finding.figure


def test_a_rescaling_inside_keras_model_untrained_keeps_30_db(workspace, tmp_path):
    import keras

    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)  # the model normalizes raw pixels itself
    x = keras.layers.ReLU(6.0)(keras.layers.BatchNormalization()(keras.layers.Conv2D(16, 3, padding="same")(x)))
    x = keras.layers.ReLU(6.0)(keras.layers.DepthwiseConv2D(3, strides=2, padding="same")(x))
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(keras.layers.Conv2D(32, 1)(x)))
    keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x)).save(tmp_path / "rescaling.keras")
    summary, _ = _run(*workspace, "model=keras_cifar10", f"model.file.path={tmp_path / 'rescaling.keras'}", f"data.path={CIFAR10_DIR}",
                      "model.preprocess.scale=1", "model.preprocess.offset=0", "calib.num_images=64", "data.eval_num_images=128")
    assert summary.metrics["simulate.sqnr_db_min"] >= 30.0 and summary.metrics["codegen.bitexact"] == 1.0


# --- data=arrays: inputs of any rank ----------------------------------------------------------------
def _autoencoder():
    """MLPerf Tiny's anomaly-detection shape: 640 values in, Dense + ReLU down to 8 and back, 640 out."""
    import keras

    inputs = keras.Input((640,))
    x = inputs
    for units in (128, 128, 8, 128, 128):
        x = keras.layers.ReLU()(keras.layers.Dense(units)(x))
    return keras.Model(inputs, keras.layers.Dense(640)(x))


def _ds_cnn():
    """MLPerf Tiny's keyword-spotting shape: a 49x10x1 MFCC map, conv + depthwise-separable blocks, 12 classes."""
    import keras

    inputs = keras.Input((49, 10, 1))
    x = keras.layers.ReLU()(keras.layers.BatchNormalization()(keras.layers.Conv2D(16, (10, 4), strides=2, padding="same")(inputs)))
    for _ in range(2):
        x = keras.layers.ReLU()(keras.layers.BatchNormalization()(keras.layers.DepthwiseConv2D(3, padding="same")(x)))
        x = keras.layers.ReLU()(keras.layers.BatchNormalization()(keras.layers.Conv2D(16, 1)(x)))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(12, activation="softmax")(x))


@pytest.fixture(scope="module")
def array_models(tmp_path_factory):
    """Each model saved, with an .npz of inputs as such a model takes them (MFCCs span tens, not [-1, 1])."""
    root = tmp_path_factory.mktemp("arrays")
    rng = np.random.default_rng(0)
    vectors = (rng.normal(0, 3, (160, 640)) + 1).astype(np.float32)
    _autoencoder().save(root / "autoencoder.keras")
    np.savez(root / "autoencoder.npz", calib=vectors[:96], eval=vectors[96:])
    mfcc = (rng.normal(0, 20, (160, 49, 10, 1)) - 5).astype(np.float32)
    _ds_cnn().save(root / "ds_cnn.keras")
    np.savez(root / "ds_cnn.npz", calib=mfcc[:96], eval=mfcc[96:], eval_labels=rng.integers(0, 12, 64))
    return root


@pytest.mark.parametrize("target", ["tf2ir", "accel"])
@pytest.mark.parametrize("model, extra", [("autoencoder", ["model.task=detection"]), ("ds_cnn", ["model.num_classes=12"])])
def test_non_image_models_run_all_eight_stages_bit_exact_on_arrays(array_models, workspace, model, extra, target):
    summary, printed = _run(*workspace, "model=keras_cifar10", f"model.file.path={array_models / f'{model}.keras'}", "data=arrays",
                            f"data.path={array_models / f'{model}.npz'}", f"target={target}", *extra)
    metrics = summary.metrics
    assert [result.stage.name for result in summary.results][-1] == "codegen", printed
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
    assert metrics["simulate.sqnr_db_min"] > 20.0  # untrained: no worse than int8's usual 20-25 dB
    if target == "accel":
        assert metrics["partition.layers_accel"] > 0
    if model == "ds_cnn":  # labels given: top-1 is measured on the arrays
        assert 0.0 <= metrics["annotate.top1"] <= 1.0 and metrics["annotate.images"] == 64


def test_arrays_of_another_shape_than_the_models_input_name_both(array_models, workspace, tmp_path):
    wrong = np.zeros((8, 630), np.float32)
    np.savez(tmp_path / "short.npz", calib=wrong, eval=wrong)
    with pytest.raises(Exception, match=r"data.calib_split: the samples of .*short.npz:calib are \[630\], and the model's input "
                                        r"input_layer.*:0 takes \[N, 640\]"):
        _run(*workspace, "model=keras_cifar10", f"model.file.path={array_models / 'autoencoder.keras'}", "data=arrays",
             f"data.path={tmp_path / 'short.npz'}", "model.task=detection")


@pytest.mark.parametrize("arrays, expected", [
    ({"calib": np.zeros((4, 640), np.float32)}, "no array 'eval' (it holds ['calib'])"),
    ({"calib": np.zeros((4, 640), np.float64), "eval": np.zeros((4, 640), np.float32)}, "'calib' is float64 [4, 640]; expected float32"),
    ({"calib": np.zeros((4, 640), np.float32), "eval": np.zeros((4, 64), np.float32)}, "hold samples of different shapes [[64], [640]]"),
    ({"calib": np.zeros((4, 640), np.float32), "eval": np.zeros((4, 640), np.float32), "eval_labels": np.zeros(3, np.int64)},
     "eval_labels is int64 [3]; expected int [4]"),
])
def test_a_bad_npz_is_refused_before_any_stage_naming_the_array(workspace, tmp_path, arrays, expected):
    from pipeline.config import ConfigError

    np.savez(tmp_path / "data.npz", **arrays)
    with pytest.raises(ConfigError, match="data.path=") as raised:
        _run(*workspace, "data=arrays", f"data.path={tmp_path / 'data.npz'}")
    assert expected in str(raised.value)
    assert not list(Path(workspace[0].split("=", 1)[1]).glob("*/*/manifest.json"))


def test_a_pickled_npz_is_refused_not_unpickled(workspace, tmp_path):
    from pipeline.config import ConfigError

    np.savez(tmp_path / "objects.npz", calib=np.array([{"a": 1}], dtype=object), eval=np.zeros((4, 640), np.float32))
    with pytest.raises(ConfigError, match="'calib' is object"):
        _run(*workspace, "data=arrays", f"data.path={tmp_path / 'objects.npz'}")


# --- KL where the seeds apply it -------------------------------------------------------------------------
def test_kl_thresholds_only_the_inputs_of_weight_layers(workspace):
    from core.frontend.graph import Graph
    from core.ir.layers import group_layers
    from core.quantize.table import CalibrationTable

    summary, _ = _run(*workspace, "calib.method=kl", "until=calibrate", "model.builtin.epochs=2")
    directory = _artifact(summary, "calibrate")
    table, layer_graph = CalibrationTable.load(directory), group_layers(Graph.load(directory))
    graph = layer_graph.graph
    weight_inputs = {layer_graph.scale_source(layer.inputs[0]) for layer in layer_graph.layers if layer.weight}
    activations = {tensor: entry for tensor, entry in table.tensors.items() if entry.kind in ("activation", "input")}
    for tensor, entry in activations.items():
        expected = "kl" if tensor in weight_inputs and tensor != graph.input_tensor else "minmax"
        assert entry.method == expected, tensor
    assert any(entry.method == "kl" for entry in activations.values())
    assert all(activations[layer_graph.scale_source(end)].method == "minmax" for end in graph.end_points)


@pytest.mark.parametrize("method", [pytest.param(method, marks=[] if method == "kl" else [pytest.mark.slow])
                                    for method in ("kl", "minmax", "percentile", "mse", "qat", "auto")])
def test_the_headline_ssd_command_on_two_photos_passes_every_guard_with_18_db(workspace, method):
    """The README's headline command on the two photos ../shared/models holds (motor.jpg, oiltank.jpg), every quality guard
    enforced: KL keeps its entropy search to the tensors with enough calibration values (a 1x1 map of 16 channels on two
    images is 32 values, which it clipped by 62.5%: 0.82 dB), and says so in the table; every method alike (--slow)."""
    summary, _ = _run(*workspace, f"calib.method={method}", "model=ssd_mbv2", f"data.path={MODELS}", "until=simulate")
    assert summary.metrics["simulate.sqnr_db_min"] >= 18.0 and summary.metrics["simulate.end_point_agreement"] == 1.0
    if method == "kl":
        table = CalibrationTable.load(_artifact(summary, "calibrate"))
        entry = table.tensors["FeatureExtractor/MobilenetV2/layer_19_1_Conv2d_5_1x1_16/Relu6:0"]
        assert entry.method == "minmax" and "kl: 32 calibration values, fewer than calib.kl_min_values_per_bin=5" in entry.fallback_reason
        assert sum(entry.method == "kl" for entry in table.tensors.values()) >= 20


# --- warnings, summarized -----------------------------------------------------------------------------
def test_warnings_alike_are_one_line_with_their_count_and_worst_case(workspace):
    summary, printed = _run(*workspace, "target.scheme.max_log2scale=7", "calib.method=minmax", "until=calibrate", "model.builtin.epochs=2")
    listed = json.loads((_artifact(summary, "calibrate") / "report.json").read_text())["warnings"]
    finer = [item for item in listed if "finer than the target's finest" in item["warning"]]
    assert len(finer) >= 2  # the digits CNN has several scales finer than 2^-7
    lines = [line for line in printed.splitlines() if "finer than the target's finest" in line]
    assert len(lines) == 1 and f"{len(finer)} tensors alike; the worst, " in lines[0]
    worst = max(int(item["warning"].split()[1]) for item in finer)  # "log2scale <k> is finer ..."
    assert f"log2scale {worst} is finer" in lines[0]


def test_summarize_keeps_distinct_kinds_apart_in_order():
    from core.reports.warnings import summarize

    lines = summarize([("a", "log2scale 9 is finer"), ("b", "no FakeQuant"), ("c", "log2scale 12 is finer")])
    assert lines == ["2 tensors alike; the worst, c: log2scale 12 is finer", "b: no FakeQuant"]
