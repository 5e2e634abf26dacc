"""The calibrate stage: tables for every method, the QAT graph's own ranges, and
clear errors for bad calibration data."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose, tracking_override
from core.frontend.graph import Graph
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.calibration.methods import CalibrationSettings
from core.quantize.table import CalibrationTable, TensorEntry
from core.reports.calibration import HISTOGRAM_PANELS, PLOTTED_TENSORS, plot_clipping, plot_histograms
from pipeline.config import ConfigError
from pipeline.main import run_pipeline
from pipeline.runner import StageFailed

QUIET = Console(file=open(os.devnull, "w"))
METHODS = ("minmax", "kl", "percentile", "mse")


@pytest.fixture(scope="module")
def digits_store(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("calib")
    return [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root)]


def _calibrate(*overrides):
    summary = run_pipeline(compose(*overrides, "until=calibrate"), console=QUIET)
    result = summary.results[-1]
    return CalibrationTable.load(result.artifact.directory), summary


@pytest.fixture(scope="module")
def digits_tables(digits_store):
    return {method: _calibrate(*digits_store, f"calib.method={method}") for method in METHODS}


def test_every_method_calibrates_every_quantized_tensor_weight_and_bias(digits_tables):
    for method, (table, summary) in digits_tables.items():
        kinds = [entry.kind for entry in table.tensors.values()]
        assert kinds.count("input") == 1 and kinds.count("activation") == 8, method  # 8 layers of the digits CNN
        assert kinds.count("weight") == 6 and kinds.count("bias") == 6, method
        for entry in table.tensors.values():
            low, high = entry.range
            assert low == -(2.0 ** (7 - entry.log2scale)) and high == 127 * 2.0 ** -entry.log2scale
        assert summary.metrics["calibrate.images"] == 256
    assert {summary.results[0].key for _, summary in digits_tables.values()} == {digits_tables["kl"][1].results[0].key}


def test_saturating_methods_clip_no_wider_than_minmax(digits_tables):
    minmax = digits_tables["minmax"][0]
    for method in ("kl", "percentile", "mse"):
        table = digits_tables[method][0]
        for tensor, entry in table.tensors.items():
            if entry.kind == "activation":
                assert entry.threshold <= minmax.tensors[tensor].threshold * (1 + 1e-9)
    # KL clips somewhere: a threshold below the whole range (whether it moves a power-of-two scale depends on the
    # trained model's values to the last bit, which differ between CPUs)
    assert any(
        digits_tables["kl"][0].tensors[t].threshold < minmax.tensors[t].threshold * (1 - 1e-3) for t in minmax.tensors
    ), "KL never chose a threshold below minmax's on any tensor"


def _observation(summary) -> str:
    """The key of the observation part the run's calibrate entry used."""
    (part,) = summary.results[-1].artifact.manifest["parts"].values()
    return part["key"]


def test_a_sweep_of_methods_observes_once_and_each_table_is_the_one_a_fresh_store_computes(digits_tables, tmp_path, model_cache):
    assert len({_observation(summary) for _, summary in digits_tables.values()}) == 1
    fresh = [f"store.url={tmp_path / 'store'}", f"store.cache_dir={model_cache}", tracking_override(tmp_path)]
    for method in ("kl", "mse"):  # observed by minmax's run above; here each observes for itself
        table, summary = _calibrate(*fresh, f"calib.method={method}")
        reused = digits_tables[method][1].results[-1].artifact.directory
        computed = summary.results[-1].artifact.directory
        for name in ("calibration_table.json", "graph.json", "histograms/index.json", "report.json"):
            assert (computed / name).read_bytes() == (reused / name).read_bytes(), (method, name)
        shutil.rmtree(tmp_path / "store" / "calibrate.observation")


def test_what_the_observation_reads_changes_its_key_and_what_it_does_not_keeps_it(digits_store, digits_tables):
    shared = _observation(digits_tables["minmax"][1])
    assert _observation(_calibrate(*digits_store, "calib.method=percentile", "calib.percentile=99.9")[1]) == shared
    assert _observation(_calibrate(*digits_store, "calib.method=kl", "calib.pow2_rounding=nearest")[1]) == shared
    assert _observation(_calibrate(*digits_store, "calib.method=kl", "calib.num_bins=1024")[1]) != shared
    assert _observation(_calibrate(*digits_store, "calib.method=kl", "calib.equalize=false")[1]) != shared


def test_a_damaged_observation_is_set_aside_and_computed_again(digits_store, digits_tables):
    store = digits_tables["minmax"][1].results[-1].artifact.directory.parent.parent
    entry = store / "calibrate.observation" / _observation(digits_tables["minmax"][1])
    (entry / "histograms" / "0000.npy").write_bytes(b"not the histogram")
    table, summary = _calibrate(*digits_store, "calib.method=kl", "calib.percentile=99.0")  # a new calibrate key, same observation
    assert _observation(summary) == entry.name and (entry / "histograms" / "0000.npy").read_bytes() != b"not the histogram"
    assert table.to_json() == digits_tables["kl"][0].to_json()


def test_weights_are_never_saturated_under_weight_method_minmax(digits_store):
    table, _ = _calibrate(*digits_store, "calib.method=kl", "calib.weight_method=minmax")
    for entry in table.tensors.values():
        if entry.kind in ("weight", "bias"):
            assert entry.absmax <= entry.range[1]


def test_network_input_scale_is_chosen_from_the_data(digits_tables):
    table = digits_tables["minmax"][0]
    (entry,) = [entry for entry in table.tensors.values() if entry.kind == "input"]
    # digits preprocessed to x / 8 - 1: [-1, 1], whose power-of-two range is the spec's [-1, 1) at log2scale 7
    assert entry.log2scale == 7 and entry.method == "minmax" and entry.absmax == 1.0


def test_histograms_and_plot_are_saved(digits_tables):
    directory = digits_tables["kl"][1].results[-1].artifact.directory
    index = json.loads((directory / "histograms" / "index.json").read_text())
    assert len(index) == 9
    counts = np.load(directory / "histograms" / next(iter(index.values()))["file"])
    assert counts.shape == (2048,) and counts.sum() > 0
    assert (directory / "clipping.png").stat().st_size > 10_000


def test_tflite_int8_weights_are_per_channel_narrow_and_activations_affine(digits_store):
    table, summary = _calibrate(*digits_store, "target=tflite_int8", "calib.method=minmax", "calib.weight_method=minmax",
                                "calib.equalize=false")
    graph = Graph.load(summary.results[-1].artifact.directory)
    for tensor, entry in ((tensor, entry) for tensor, entry in table.tensors.items() if entry.kind == "weight"):
        channels = graph.constants[tensor.rsplit(":", 1)[0]].reshape(-1, len(entry.channel_scales))
        # minmax: each output channel's largest magnitude is int8 127, never -128 (narrow range)
        np.testing.assert_allclose(np.abs(channels).max(axis=0), np.asarray(entry.channel_scales) * 127, rtol=1e-6)
        assert entry.narrow_range and entry.log2scale is None
    for entry in table.tensors.values():
        if entry.kind not in ("activation", "input"):
            continue
        low, high = entry.range
        # zero is an integer (padding and ReLU are exact) and the observed range is covered to within a step
        assert -128 <= entry.zero_point <= 127 and low <= 0.0 <= high
        assert (-128 - entry.zero_point) * entry.scale == pytest.approx(low, abs=1e-9)
        assert high - low == pytest.approx(255 * entry.scale)
        assert entry.absmax <= max(-low, high) + entry.scale


def test_qat_on_a_float_graph_is_refused_with_the_choices(digits_store):
    with pytest.raises(StageFailed, match="has none.*minmax"):
        _calibrate(*digits_store, "calib.method=qat")


def test_qat_table_is_the_reference_irs_log2scales(workspace):
    reference = json.loads((MODELS / "mobilenet_v1_0.5_128_cifar10" / "reference_net_def.json").read_text())
    table, _ = _calibrate("model=mbv1_cifar10", f"data.path={CIFAR10_DIR}", "calib.method=qat", "calib.num_images=16", *workspace)
    by_layer: dict[str, dict[str, int]] = {}
    for entry in table.tensors.values():
        if entry.kind == "input":  # the network input, at the IR's fixed log2scale 7 (no layer of its own)
            assert entry.log2scale == 7 and entry.layer is None
            continue
        by_layer.setdefault(entry.layer.replace("/", "_"), {})[entry.kind] = entry.log2scale
    for layer in reference:
        for kind, key in (("activation", "output_log2scale"), ("weight", "weight_log2scale"), ("bias", "bias_log2scale")):
            if key in layer:
                assert by_layer[layer["name"]][kind] == layer[key], (layer["name"], kind)


def test_images_of_the_wrong_size_are_refused_naming_the_data(digits_store, tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(MODELS / "mobilenet_v1_0.5_128_cifar10" / "ship.png", images)
    with pytest.raises(StageFailed, match="size|8"):
        _calibrate(*digits_store, "data=images", f"data.path={images}")


def test_an_empty_image_directory_is_refused_before_any_stage(digits_store, tmp_path):
    with pytest.raises(ConfigError, match=f"data.path={tmp_path}: no images"):
        _calibrate(*digits_store, "data=images", f"data.path={tmp_path}")


def test_a_range_too_large_for_the_target_names_the_tensor_and_the_key(digits_store):
    with pytest.raises(StageFailed, match=r"tensor .*log2scale -?\d+ is outside the target's range \[7, .*target.scheme.min_log2scale"):
        _calibrate(*digits_store, "target.scheme.min_log2scale=7")


def test_a_network_input_scale_outside_the_targets_range_is_a_config_error(digits_store):
    with pytest.raises(ConfigError, match=r"target.scheme.input_log2scale=7: must be within .*target.scheme.max_log2scale=3"):
        run_pipeline(compose(*digits_store, "target.scheme.input_log2scale=7", "target.scheme.max_log2scale=3"), console=QUIET)


def test_a_range_finer_than_the_target_resolves_is_clamped_with_a_warning(digits_store, digits_tables):
    table, _ = _calibrate(*digits_store, "target.scheme.max_log2scale=7", "calib.method=minmax")
    reference, _ = digits_tables["minmax"]
    clamped = [name for name, entry in reference.tensors.items() if entry.log2scale > 7]
    assert clamped  # the digits CNN has finer scales than 2^-7
    for name, entry in table.tensors.items():
        assert entry.log2scale == min(reference.tensors[name].log2scale, 7), name
        assert any("target.scheme.max_log2scale" in warning for warning in entry.warnings) == (name in clamped), name


def test_nan_in_calibration_data_names_the_tensor_and_the_image(digits_tables):
    from core.frontend.graph import Graph
    from core.ir.layers import group_layers
    from stages.calibrate import CalibrationError, collect_statistics

    fold_dir = digits_tables["kl"][1].results[1].artifact.directory
    graph = Graph.load(fold_dir)
    images = np.zeros((10, 8, 8, 1), np.float32)
    images[7, 3, 3, 0] = np.nan
    tensors = group_layers(graph).quantized_tensors()
    with pytest.raises(CalibrationError, match=r"image 7 .*tensor images:0"):
        collect_statistics(graph, tensors, images, 4, 2048, "test images", lambda done, total: None)


def test_an_all_zero_tensor_gets_a_defined_scale_and_a_warning(digits_tables):
    from core.quantize.calibration.histogram import TensorStatistics
    from core.quantize.calibration.methods import CalibrationSettings
    from core.quantize.calibration.build import TargetSpec, build_calibration_table
    from core.frontend.graph import Graph
    from core.ir.layers import group_layers

    graph = Graph.load(digits_tables["kl"][1].results[1].artifact.directory)
    layer_graph = group_layers(graph)
    stats = {tensor: TensorStatistics().update(np.ones((2, 4))) for tensor in layer_graph.quantized_tensors()}
    silent = layer_graph.quantized_tensors()[3]
    stats[silent] = TensorStatistics().update(np.zeros((2, 4)))
    table = build_calibration_table(layer_graph, "kl", TargetSpec("tf2ir"), CalibrationSettings(), stats, {})
    assert table.tensors[silent].log2scale is not None and table.tensors[silent].warnings


def test_in_graph_statistics_agree_with_fetching_and_histogramming_in_numpy(digits_tables):
    """Two independent paths over the same batches: TensorFlow reductions + merged
    per-batch histograms, and every activation fetched and streamed through update()."""
    from core.data.datasets import load_split
    from core.frontend.graph import Graph
    from core.ir.layers import group_layers
    from core.quantize.calibration.histogram import TensorStatistics
    from core.frontend.tf_runtime import GraphRunner
    from stages.calibrate import collect_statistics

    graph = Graph.load(digits_tables["kl"][1].results[1].artifact.directory)
    tensors = group_layers(graph).quantized_tensors()
    images = load_split("digits", None, "train", {"size": [8, 8], "channels": 1, "scale": 8.0, "offset": -1.0}, limit=200).images
    in_graph = collect_statistics(graph, tensors, images, 64, 2048, "digits", lambda done, total: None)
    fetched = {tensor: TensorStatistics(2048) for tensor in tensors}
    with GraphRunner(graph) as runner:
        for values in runner.batches(tensors, images, 64):
            for tensor, value in zip(tensors, values):
                fetched[tensor].update(value)
    for tensor in tensors:
        a, b = in_graph[tensor], fetched[tensor]
        assert a.count == b.count
        assert (a.min, a.max, a.absmax) == pytest.approx((b.min, b.max, b.absmax), rel=1e-6)
        # the paths re-bin at different moments (a batch's own range, then merged), which moves
        # mass between neighbouring bins only: the distributions agree to a fraction of a bin
        cdf_a, cdf_b = np.cumsum(a.counts) / a.count, np.cumsum(b.counts) / b.count
        assert np.abs(cdf_a - cdf_b).max() < 2e-3


def test_the_clipping_picture_shows_the_same_tensors_whatever_the_method(tmp_path):
    """Two tables that clip different tensors most (as mse and kl do) draw the same tensors: DVC's plots and MLflow's
    compare put the methods' pictures side by side, and each must show what the other shows."""
    rng = np.random.default_rng(0)
    stats = {}
    for index in range(7):  # normal values and one outlier, farthest out in t0:0 (35 sigma), nearest in t6:0 (5 sigma)
        values = rng.standard_normal((8, 4096)).astype(np.float32)
        values[0, 0] = 5.0 * (7 - index)
        stats[f"t{index}:0"] = TensorStatistics().update(values)

    def table(method: str, clipped: list[float]) -> CalibrationTable:
        return CalibrationTable(method, "tf2ir", 8, {tensor: TensorEntry("activation", method, 1.0, [-1.0, 1.0], clipped_fraction=fraction)
                                                     for tensor, fraction in zip(stats, clipped)})

    shown = []
    for method, clipped in (("mse", [0.01 * index for index in range(7)]), ("kl", [0.01 * (7 - index) for index in range(7)])):
        path = plot_clipping(stats, table(method, clipped), {}, CalibrationSettings(), tmp_path / f"{method}.png")
        with Image.open(path) as picture:
            shown.append([axes["title"].split("  clipped")[0] for axes in json.loads(picture.text["Description"])])
    assert shown[0] == shown[1] and len(shown[0]) == PLOTTED_TENSORS
    assert set(shown[0]) == {"t0:0", "t1:0", "t2:0", "t3:0"}  # the longest tails


def test_the_histograms_picture_of_many_tensors_shows_the_most_clipped_and_says_so(tmp_path):
    """An unrolled recurrent layer's hundreds of tensors: the picture draws HISTOGRAM_PANELS of them, the most clipped, in
    the table's order, and its title says how many of how many; every histogram stays in the calibrate stage's arrays."""
    rng = np.random.default_rng(1)
    count = HISTOGRAM_PANELS + 12
    stats = {f"t{index}:0": TensorStatistics().update(rng.standard_normal((2, 256)).astype(np.float32)) for index in range(count)}
    fractions = rng.permutation(count) / 1000  # distinct
    table = CalibrationTable("minmax", "tf2ir", 8, {tensor: TensorEntry("activation", "minmax", 1.0, [-1.0, 1.0], clipped_fraction=fraction)
                                                    for tensor, fraction in zip(stats, fractions)})
    with Image.open(plot_histograms(stats, table, tmp_path / "histograms.png")) as picture:
        panels = [axes["title"].split("\n")[0] for axes in json.loads(picture.text["Description"])]
        title = picture.text["Title"]
    most_clipped = [tensor for tensor, fraction in zip(stats, fractions) if fraction >= sorted(fractions)[-HISTOGRAM_PANELS]]
    assert panels == most_clipped and len(panels) == HISTOGRAM_PANELS
    assert f"the {HISTOGRAM_PANELS} most clipped of {count} calibrated tensors" in " ".join(title.split())
