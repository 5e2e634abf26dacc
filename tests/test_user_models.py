"""Models nobody here wrote, through every stage as a user runs them: Keras models built in the
test (seeded, untrained), saved as a user saves them, imported by run.py's path."""

from __future__ import annotations

import os

import pytest
from rich.console import Console

from conftest import compose
from core.ir.io import read_ir
from pipeline.main import run_pipeline

QUIET = Console(file=open(os.devnull, "w"))


@pytest.fixture(scope="module")
def relu_cnn(tmp_path_factory):
    """A small CNN on the digits' 8x8 images using ReLU everywhere a Keras user would: a conv with
    activation="relu", a depthwise conv with BatchNorm and a ReLU layer, a residual add followed by
    ReLU, a global average pool (keepdims) and a 1x1 classifier."""
    import keras

    keras.utils.set_random_seed(0)
    images = keras.Input((8, 8, 1), name="digits")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(images)
    y = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
    y = keras.layers.BatchNormalization(name="dw_bn")(y)
    y = keras.layers.ReLU(name="dw_relu")(y)
    y = keras.layers.Conv2D(8, 1, name="project")(y)
    y = keras.layers.ReLU(name="residual_relu")(keras.layers.Add(name="residual")([x, y]))
    y = keras.layers.GlobalAveragePooling2D(keepdims=True, name="pool")(y)
    logits = keras.layers.Conv2D(10, 1, name="logits")(y)
    path = tmp_path_factory.mktemp("keras") / "relu_cnn.keras"
    keras.Model(images, logits).save(path)
    return path


@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_a_keras_cnn_with_relu_runs_all_stages_bit_exact(relu_cnn, workspace, target):
    cfg = compose(*workspace, "model.name=relu_cnn", "model.format=keras", f"model.file.path={relu_cnn}", f"target={target}",
                  "calib.num_images=64", "data.eval_num_images=60")
    summary = run_pipeline(cfg, console=QUIET)
    metrics = summary.metrics
    assert [result.stage.name for result in summary.results][-1] == "codegen"
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_max_lsb_difference"] <= 1
    emitted = read_ir(next(result.artifact.directory for result in summary.results if result.stage.name == "emit_ir"))
    relus = [layer for layer in emitted.layers if getattr(layer, "activation_type", None) == "Relu"]
    assert {layer.operation for layer in relus} == {"conv", "dwconv", "add"}  # the stem, the depthwise conv, the residual
    if target == "accel":  # the accelerator's clamp runs Relu as it runs Relu6: every layer on it
        assert metrics["partition.layers_accel"] == metrics["partition.layers"] == len(emitted.layers)
