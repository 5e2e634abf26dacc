"""Layers kept in float (calib.keep_float, issue 12): a user's Keras model with its depthwise conv
and its classifier kept in float runs all eight stages on both targets, the float layers on the
host, simulate and the generated C bit for bit; the float kernel is TensorFlow's float conv up to
the order of its additions; a layer that cannot be kept in float is refused by name."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from core.ir.io import read_ir
from core.ir.ops.conv.float_conv.kernel import float_conv_kernel
from core.ir.ops.conv.float_conv.record import FloatConvLayer, FloatDwconvLayer
from core.quantize.table import CalibrationTable
from pipeline.runner import StageFailed
from test_user_models import artifact, run_user_model, save_as

KEPT = ("dw", "logits")  # Keras layer names: the graph names are model_1/dw_1/depthwise, ...


def small_mobilenet() -> keras.Model:
    keras.utils.set_random_seed(3)
    images = keras.Input((8, 8, 1), name="digits")
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", name="stem")(images)
    x = keras.layers.ReLU(6.0, name="stem_relu6")(keras.layers.BatchNormalization(name="stem_bn")(x))
    y = keras.layers.DepthwiseConv2D(3, padding="same", name="dw")(x)
    y = keras.layers.ReLU(6.0, name="dw_relu6")(y)
    y = keras.layers.Conv2D(8, 1, name="project")(y)
    y = keras.layers.Add(name="residual")([x, y])
    logits = keras.layers.Conv2D(10, 1, name="logits")(keras.layers.GlobalAveragePooling2D(keepdims=True, name="pool")(y))
    return keras.Model(images, logits)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return save_as(small_mobilenet(), "keras", tmp_path_factory.mktemp("keep_float"))


def _kept_names(summary) -> list[str]:
    return CalibrationTable.load(artifact(summary, "calibrate")).float_layers


@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_kept_layers_run_in_float_on_the_host_bit_exact_through_codegen(workspace, model_file, target):
    keep = "calib.keep_float=[" + ",".join(KEPT) + "]"
    summary = run_user_model(workspace, model_file, "keras", target, keep, "calib.num_images=64", "data.eval_num_images=60")
    metrics = summary.metrics
    assert metrics["codegen.bitexact"] == 1.0  # simulate's float kernel and the C agree bit for bit
    # annotate runs TensorFlow's float conv there, whose sums come in another order: a rounding apart at most
    assert metrics["simulate.end_point_agreement"] >= 0.95 and metrics["simulate.layer_max_lsb_difference"] <= 1
    table = CalibrationTable.load(artifact(summary, "calibrate"))
    kept = table.float_layers
    assert len(kept) == 2 and all(any(f"/{name}_" in graph_name for graph_name in kept) for name in KEPT)
    owned = {entry.layer for entry in table.tensors.values() if entry.kind in ("weight", "bias")}
    assert not owned & set(kept)  # their weights and biases are not quantized
    ir = read_ir(artifact(summary, "emit_ir"))
    floats = [layer for layer in ir.layers if isinstance(layer, FloatConvLayer)]
    assert sorted(type(layer).__name__ for layer in floats) == ["FloatConvLayer", "FloatDwconvLayer"]
    for layer in floats:
        assert ir.params[layer.name]["weight"].dtype == np.float32 and ir.params[layer.name]["bias"].dtype == np.float32
    host = json.loads((artifact(summary, "partition") / "report.json").read_text())["host_layers"]
    reasons = {row["layer"]: row["reason"] for row in host}
    assert {layer.name for layer in floats} <= set(reasons)
    if target == "accel":  # everything else still runs on the accelerator
        assert metrics["partition.layers_host"] == len(floats)
        assert all("kept in float (calib.keep_float)" in reasons[layer.name] for layer in floats)


def test_a_layer_without_a_float_variant_or_an_unknown_one_is_refused_by_name(workspace, model_file):
    for name, words in (("residual", ["residual", "no float variant", "dw_1/depthwise"]), ("nope", ["'nope'", "no such layer"])):
        with pytest.raises(StageFailed) as error:
            run_user_model(workspace, model_file, "keras", "tf2ir", f"calib.keep_float=[{name}]", "until=calibrate")
        message = str(error.value)
        assert "calib.keep_float" in message and all(word in message for word in words), message


@pytest.mark.parametrize("depthwise", [False, True])
def test_the_float_kernel_is_tensorflows_float_conv_up_to_the_order_of_its_sums(depthwise):
    rng = np.random.default_rng(7 + depthwise)
    images = rng.integers(-128, 128, (4, 9, 7, 6)).astype(np.int8)
    input_log2scale, output_log2scale = 5, 4
    shape = (3, 3, 6) if depthwise else (3, 3, 6, 5)
    weight = rng.normal(0.0, 0.4, shape).astype(np.float32)
    bias = rng.normal(0.0, 0.5, shape[-1] if not depthwise else 6).astype(np.float32)
    record_type = FloatDwconvLayer if depthwise else FloatConvLayer
    out_channels = 6 if depthwise else 5
    record = record_type.from_json({
        "name": "layer", "operation": record_type.operation, "previous_layer": ["input"], "next_layer": ["endpoint"],
        "activation_type": "Relu6", "input_log2scale": input_log2scale, "output_log2scale": output_log2scale, "load_bias": True,
        "input_channel_num": 6, "output_channel_num": out_channels, "input_size": {"height": 9, "width": 7},
        "padding": {"top": 1, "bottom": 1, "left": 1, "right": 1}, "stride": {"height": 2, "width": 2},
        "dilations": {"height": 1, "width": 1}, "kernel_size": {"height": 3, "width": 3}, "output_size": {"height": 5, "width": 4},
        "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "float32", "bias_dtype": "float32"})
    got = float_conv_kernel(record, {"weight": weight, "bias": bias}, [images])
    x = images.astype(np.float32) * 2.0**-input_log2scale  # TensorFlow's SAME padding for these sizes
    if depthwise:
        y = tf.nn.depthwise_conv2d(x, weight[..., None], [1, 2, 2, 1], "SAME").numpy()
    else:
        y = tf.nn.conv2d(x, weight, 2, "SAME").numpy()
    expected = np.clip(np.floor(np.clip(y + bias, 0.0, 6.0).astype(np.float64) * 2.0**output_log2scale + 0.5), -128, 127)
    difference = np.abs(got.astype(np.int64) - expected)
    assert got.shape == expected.shape and difference.max() <= 1 and np.mean(difference == 0) >= 0.99
    assert len(np.unique(got)) > 20  # outputs spread over the int8 range, not saturated
