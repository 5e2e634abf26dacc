"""Calibration statistics: the compiled histogram beside the graph gives the numbers the
in-graph reduction gives (TensorFlow's abs, scale, cast, clip and bincount: the reference
path), on the real QAT model of ../shared and on a keras.applications network."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, compose
from core.frontend.fake_quant import bypass_fake_quant
from core.frontend.graph import Graph
from core.ir.layers import group_layers
from core.quantize.calibration.build import CalibrationError
from core.quantize.calibration.histogram import TensorStatistics
from core.quantize.statistics import collect_statistics, in_graph_statistics, magnitude_histogram, observe_tensor
from pipeline.main import run_pipeline

QUIET = Console(file=open(os.devnull, "w"))
NUM_BINS = 2048
MBV1 = MODELS / "mobilenet_v1_0.5_128_cifar10" / "graph.pb"


def assert_same_statistics(collected: dict[str, TensorStatistics], reference: dict[str, TensorStatistics]) -> None:
    assert collected.keys() == reference.keys()
    for tensor, expected in reference.items():
        got = collected[tensor]
        assert (got.count, got.min, got.max, got.absmax) == (expected.count, expected.min, expected.max, expected.absmax), tensor
        assert np.array_equal(got.counts, expected.counts), tensor


def float_graph_of(workspace, *overrides: str) -> Graph:
    """The graph calibrate observes, from the product's own import and fold_check."""
    summary = run_pipeline(compose(*workspace, *overrides, "until=fold_check"), console=QUIET)
    return bypass_fake_quant(Graph.load(summary.results[-1].artifact.directory))[0]


def saved_keras(model, path):
    model.save(path)
    return [f"model.name={path.stem}", "model.format=keras", f"model.file.path={path}"]


@pytest.mark.skipif(not (MBV1.is_file() and CIFAR10_DIR.is_dir()),
                    reason=f"needs the QAT MobileNet-v1 at {MBV1} and CIFAR-10 at {CIFAR10_DIR} (../shared)")
def test_the_statistics_of_the_real_qat_model_are_the_in_graph_reductions_numbers(workspace):
    from core.data.datasets import load_split

    graph = float_graph_of(workspace, "model=mbv1_cifar10")
    tensors = group_layers(graph).quantized_tensors()
    preprocess = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}
    images = load_split("cifar10", CIFAR10_DIR, "data_batch_1", preprocess, limit=40).images
    seen = []
    collected = collect_statistics(graph, tensors, images, 16, NUM_BINS, "cifar10", lambda done, total: seen.append((done, total)))
    assert seen == [(16, 40), (32, 40), (40, 40)]  # batches of 16, 16 and 8, each merged in order
    assert_same_statistics(collected, in_graph_statistics(graph, tensors, images, 16, NUM_BINS))


def test_the_statistics_of_a_keras_application_are_the_in_graph_reductions_numbers(workspace, tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10)
    graph = float_graph_of(workspace, "model=keras_cifar10", *saved_keras(model, tmp_path / "mobilenetv2.keras"))
    tensors = group_layers(graph).quantized_tensors()
    images = np.random.default_rng(0).uniform(-1, 1, (21, 32, 32, 3)).astype(np.float32)
    collected = collect_statistics(graph, tensors, images, 4, NUM_BINS, "uniform", lambda done, total: None)
    assert len(tensors) > 50  # every layer's output, ReLU6 zeros and linear bottlenecks alike
    assert_same_statistics(collected, in_graph_statistics(graph, tensors, images, 4, NUM_BINS))


def test_nan_in_a_later_batch_names_that_image(workspace):
    graph = float_graph_of(workspace)  # the built-in digits CNN
    images = np.ones((11, 8, 8, 1), np.float32)
    images[9, 2, 2, 0] = np.inf  # in the third batch of 4, while the second one's histograms are in flight
    with pytest.raises(CalibrationError, match=r"calibration image 9 of test images: tensor .* NaN/Inf"):
        collect_statistics(graph, group_layers(graph).quantized_tensors(), images, 4, NUM_BINS, "test images", lambda *_: None)


finite_float32 = st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(values=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40), elements=finite_float32),
       num_bins=st.sampled_from([1, 7, 2048]))
def test_the_compiled_histogram_bins_as_float32_arithmetic_says(values, num_bins):
    absmax = float(np.max(np.abs(values)))
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.float32(num_bins) / np.maximum(np.float32(absmax), np.finfo(np.float32).tiny)
        product = np.abs(values) * scale  # float32, truncated below; the graph's int32 cast sent inf and NaN to bin 0
    bins = np.where(np.isfinite(product), np.minimum(np.nan_to_num(product, posinf=0), num_bins - 1), 0).astype(np.int64)
    assert np.array_equal(magnitude_histogram(values, absmax, num_bins), np.bincount(bins.ravel(), minlength=num_bins))


any_float32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(values=hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=3, max_side=30), elements=any_float32))
def test_the_one_pass_extrema_are_numpys_and_a_nan_or_inf_names_its_first_image(values):
    observed = observe_tensor(values, NUM_BINS)
    rows = values.reshape(len(values), -1)
    finite = np.isfinite(rows).all(axis=1)
    if finite.all():
        assert (observed.highest, observed.lowest) == (float(rows.max()), float(rows.min()))  # -0.0 == 0.0: either may come
        assert observed.bad_image is None and observed.counts.sum() == values.size
    else:
        assert observed.counts is None and observed.bad_image == int(np.flatnonzero(~finite)[0])
        assert not (np.isfinite(observed.highest) and np.isfinite(observed.lowest))


def test_the_largest_magnitude_falls_in_the_last_bin_and_zero_in_the_first():
    values = np.array([[0.0, -3.0, 3.0, 1.5, 2.9999998]], np.float32)
    counts = magnitude_histogram(values, 3.0, 4)
    assert counts.tolist() == [1, 0, 1, 3]
    assert magnitude_histogram(np.zeros(5, np.float32), 0.0, 8).tolist() == [5, 0, 0, 0, 0, 0, 0, 0]
