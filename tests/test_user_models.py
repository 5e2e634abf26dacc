"""Models nobody here wrote, through every stage as a user runs them: Keras models built in the
test (seeded, untrained), saved as a user saves them (.keras, SavedModel, frozen GraphDef),
imported by run.py's path with no input tensor or end point given by hand.

The default run covers every operation of the zoo on both targets with one small model on the
digits data; the keras.applications and tutorial models of issue 10 run with `--slow` (they
need ../shared's CIFAR-10)."""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from conftest import CIFAR10_DIR, compose
from core.ir.io import read_ir
from pipeline.main import run_pipeline

QUIET = Console(file=open(os.devnull, "w"))
FORMATS = ("keras", "saved_model", "frozen_graph")


def save_as(model: keras.Model, fmt: str, directory: Path) -> Path:
    """The model written as a user writes it in `fmt`."""
    if fmt == "keras":
        model.save(path := directory / "model.keras")
    elif fmt == "saved_model":
        model.export(str(path := directory / "saved_model"))
    else:  # the TF2 recipe for a frozen graph: a concrete function, variables to constants
        spec = tf.TensorSpec((None, *model.input_shape[1:]), tf.float32, name="images")
        frozen = convert_variables_to_constants_v2(tf.function(lambda x: model(x)).get_concrete_function(spec))
        path = directory / "frozen.pb"
        path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


def run_user_model(workspace, path: Path, fmt: str, target: str, *overrides: str):
    cfg = compose(*workspace, *overrides, f"model.name={path.stem}", f"model.format={fmt}", f"model.file.path={path}", f"target={target}")
    return run_pipeline(cfg, console=QUIET)


def artifact(summary, stage: str) -> Path:
    return next(result.artifact.directory for result in summary.results if result.stage.name == stage)


def assert_bit_exact_through_codegen(summary) -> None:
    metrics = summary.metrics
    assert [result.stage.name for result in summary.results][-1] == "codegen"
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
    assert metrics["simulate.end_point_agreement"] == 1.0  # annotate computes the IR's integers exactly


# --- every operation, both targets (default run) ------------------------------------------------


def every_op_model() -> keras.Model:
    """A small network on the digits' 8x8 images with each layer kind of the zoo: conv + BN + ReLU,
    a depthwise conv with ReLU6, squeeze-excitation (global pool, 1x1 convs, hard_sigmoid,
    Multiply), LeakyReLU, a residual Add, max and average pools, hard_swish, a 3-way Concatenate,
    UpSampling2D, Flatten, Dense and Softmax."""
    keras.utils.set_random_seed(0)
    layers = keras.layers
    images = keras.Input((8, 8, 1), name="digits")
    stem = layers.ReLU(name="stem_relu")(layers.BatchNormalization(name="stem_bn")(layers.Conv2D(8, 3, padding="same", use_bias=False, name="stem")(images)))
    branch = layers.ReLU(6.0, name="dw_relu6")(layers.BatchNormalization(name="dw_bn")(layers.DepthwiseConv2D(3, padding="same", name="dw")(stem)))
    gate = layers.GlobalAveragePooling2D(keepdims=True, name="se_pool")(branch)
    gate = layers.Conv2D(8, 1, activation="hard_sigmoid", name="se_expand")(layers.Conv2D(4, 1, activation="relu", name="se_squeeze")(gate))
    branch = layers.Multiply(name="se_mul")([branch, gate])
    shortcut = layers.LeakyReLU(0.1, name="leaky")(layers.Conv2D(8, 1, name="shortcut")(stem))
    merged = layers.Add(name="residual")([branch, shortcut])
    towers = [layers.MaxPooling2D(2, name="max_pool")(merged), layers.AveragePooling2D(2, name="avg_pool")(merged),
              layers.Conv2D(8, 3, strides=2, padding="same", activation="hard_swish", name="swish_conv")(merged)]
    upsampled = layers.UpSampling2D(2, name="upsample")(layers.Concatenate(name="towers")(towers))
    head = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="head")(upsampled)
    scores = layers.Dense(10, activation="softmax", name="classifier")(layers.Flatten(name="flatten")(head))
    return keras.Model(images, scores)


@pytest.fixture(scope="module")
def every_op_files(tmp_path_factory) -> dict[str, Path]:
    model, directory = every_op_model(), tmp_path_factory.mktemp("every_op")
    return {fmt: save_as(model, fmt, directory) for fmt in FORMATS}


@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_every_zoo_operation_runs_all_stages_bit_exact(every_op_files, workspace, target):
    summary = run_user_model(workspace, every_op_files["keras"], "keras", target, "calib.num_images=64", "data.eval_num_images=60")
    assert_bit_exact_through_codegen(summary)
    emitted = read_ir(artifact(summary, "emit_ir"))
    operations = [layer.operation for layer in emitted.layers]
    assert {"conv", "dwconv", "avg_pool", "max_pool", "mul", "add", "lut", "concat", "resize_nearest", "reshape", "softmax"} <= set(operations)
    assert operations.count("lut") == 3  # hard_sigmoid, LeakyReLU, hard_swish: one table each
    assert operations[-1] == "softmax" and emitted.layers[-1].next_layer == ("endpoint",)  # the model's own output
    if target == "accel":
        assert 0 < summary.metrics["partition.layers_accel"] < summary.metrics["partition.layers"]  # softmax stays on the host


def test_the_ir_is_the_same_whatever_format_the_model_was_saved_in(every_op_files, workspace):
    """SavedModel's StatefulPartitionedCall/ prefix and a frozen graph's own input name do not
    reach the IR: the three files give byte-identical IR and parameters."""
    emitted = {}
    for fmt, path in every_op_files.items():
        summary = run_user_model(workspace, path, fmt, "tf2ir", "until=emit_ir", "calib.num_images=32")
        directory = artifact(summary, "emit_ir")
        files = [directory / "net_def.json", *sorted((directory / "params").iterdir())]
        emitted[fmt] = {file.name: file.read_bytes() for file in files}
    assert emitted["keras"] and emitted["saved_model"] == emitted["keras"] and emitted["frozen_graph"] == emitted["keras"]
    assert not any(b"StatefulPartitionedCall" in content for content in emitted["saved_model"].values())


def test_a_keras_cnn_with_relu_runs_all_stages_bit_exact_with_every_layer_on_the_accelerator(workspace, tmp_path):
    """ReLU everywhere a Keras user writes it: a conv with activation="relu", a depthwise conv with
    BatchNorm and a ReLU layer, a residual add followed by ReLU, a global pool and a 1x1 classifier."""
    keras.utils.set_random_seed(0)
    images = keras.Input((8, 8, 1), name="digits")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(images)
    y = keras.layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
    y = keras.layers.ReLU(name="dw_relu")(keras.layers.BatchNormalization(name="dw_bn")(y))
    y = keras.layers.Conv2D(8, 1, name="project")(y)
    y = keras.layers.ReLU(name="residual_relu")(keras.layers.Add(name="residual")([x, y]))
    logits = keras.layers.Conv2D(10, 1, name="logits")(keras.layers.GlobalAveragePooling2D(keepdims=True, name="pool")(y))
    path = save_as(keras.Model(images, logits), "keras", tmp_path)
    summary = run_user_model(workspace, path, "keras", "accel", "calib.num_images=64", "data.eval_num_images=60")
    assert_bit_exact_through_codegen(summary)
    emitted = read_ir(artifact(summary, "emit_ir"))
    relus = [layer for layer in emitted.layers if getattr(layer, "activation_type", None) == "Relu"]
    assert {layer.operation for layer in relus} == {"conv", "dwconv", "add"}  # the stem, the depthwise conv, the residual
    # the accelerator's clamp runs Relu as it runs Relu6: every layer on it
    assert summary.metrics["partition.layers_accel"] == summary.metrics["partition.layers"] == len(emitted.layers)


# --- the models of issue 10 (--slow) -------------------------------------------------------------


def lenet() -> keras.Model:
    return keras.Sequential([
        keras.Input((32, 32, 3)), keras.layers.Conv2D(6, 5, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 5, activation="relu"), keras.layers.MaxPooling2D(), keras.layers.Flatten(),
        keras.layers.Dense(120, activation="relu"), keras.layers.Dense(84, activation="relu"), keras.layers.Dense(10, activation="softmax")])


def small_resnet() -> keras.Model:
    layers = keras.layers

    def conv_bn(x, relu=True):
        x = layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same")(x))
        return layers.ReLU()(x) if relu else x

    images = keras.Input((32, 32, 3))
    x = layers.MaxPooling2D(3, 2, padding="same")(conv_bn(images))
    for _ in range(2):
        x = layers.ReLU()(layers.Add()([x, conv_bn(conv_bn(x), relu=False)]))
    return keras.Model(images, layers.Dense(10, activation="softmax")(layers.GlobalAveragePooling2D()(x)))


def inception_block() -> keras.Model:
    layers = keras.layers
    images = keras.Input((32, 32, 3))
    x = layers.LeakyReLU(0.1)(layers.Conv2D(8, 3, strides=2, padding="same")(images))
    towers = [layers.Conv2D(8, 1)(x), layers.Activation("hard_swish")(layers.Conv2D(8, 3, padding="same")(x)),
              layers.MaxPooling2D(3, 1, padding="same")(x)]
    x = layers.UpSampling2D(2)(layers.Concatenate()(towers))
    x = layers.GlobalAveragePooling2D()(layers.Conv2D(10, 3, strides=2, padding="same")(x))
    return keras.Model(images, layers.Softmax()(x))


ZOO = {
    "mobilenet": lambda: keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=0.25, weights=None, classes=10),
    "mobilenetv2": lambda: keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=10),
    "mobilenetv3small": lambda: keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), alpha=0.75, weights=None, classes=10,
                                                                    include_preprocessing=False),
    "resnet": small_resnet,
    "lenet": lenet,
    "inception": inception_block,
}
CIFAR10 = ("model=keras_cifar10", f"data.path={CIFAR10_DIR}", "calib.num_images=64", "data.eval_num_images=100")
needs_cifar10 = pytest.mark.skipif(not CIFAR10_DIR.is_dir(), reason=f"the zoo runs on CIFAR-10, expected at {CIFAR10_DIR} (../shared/data)")


@needs_cifar10
@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_a_tutorial_lenet_runs_all_stages_from_the_readme_config(workspace, tmp_path, target):
    """README's `model=keras_cifar10 model.file.path=...`: a Sequential LeNet with Flatten, Dense
    and a Softmax activation, its output the end point."""
    keras.utils.set_random_seed(0)
    summary = run_user_model(workspace, save_as(lenet(), "keras", tmp_path), "keras", target, *CIFAR10)
    assert_bit_exact_through_codegen(summary)
    emitted = read_ir(artifact(summary, "emit_ir"))
    assert [layer.operation for layer in emitted.layers][-5:] == ["reshape", "conv", "conv", "conv", "softmax"]


@pytest.fixture(scope="module")
def zoo_files(tmp_path_factory):
    files = {}
    for name, build in ZOO.items():
        keras.utils.set_random_seed(0)
        model, directory = build(), tmp_path_factory.mktemp(name)
        files[name] = {fmt: save_as(model, fmt, directory) for fmt in FORMATS}
    return files


@needs_cifar10
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tf2ir", "accel"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_runs_all_stages_bit_exact(zoo_files, workspace, name, fmt, target):
    summary = run_user_model(workspace, zoo_files[name][fmt], fmt, target, *CIFAR10)
    assert_bit_exact_through_codegen(summary)
    assert read_ir(artifact(summary, "emit_ir")).layers[-1].operation == "softmax"


def test_node_names_that_collide_as_ir_names_get_distinct_ones(workspace, tmp_path):
    """`a/b` and `a_b` both become `a_b` once '/' is '_': the IR names them apart and every stage
    runs on the right layer."""
    rng = np.random.default_rng(0)
    with tf.Graph().as_default() as graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="digits")
        first = tf.nn.relu6(tf.nn.conv2d(images, tf.constant(rng.normal(0, 0.5, (3, 3, 1, 4)), tf.float32), 1, "SAME", name="a/b"))
        second = tf.nn.relu6(tf.nn.conv2d(first, tf.constant(rng.normal(0, 0.5, (3, 3, 4, 4)), tf.float32), 1, "SAME", name="a_b"))
        tf.nn.avg_pool2d(second, 8, 1, "VALID", name="scores")
    path = tmp_path / "colliding.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    summary = run_user_model(workspace, path, "frozen_graph", "tf2ir", "calib.num_images=32", "data.eval_num_images=20")
    assert_bit_exact_through_codegen(summary)
    names = [layer.name for layer in read_ir(artifact(summary, "emit_ir")).layers]
    assert len(names) == len(set(names)) == 3 and {"a_b", "a_b_1"} <= set(names)


def test_an_end_point_that_is_not_class_scores_gets_no_top1(workspace, tmp_path):
    """A feature map as the end point of a 10-class model: top-1 would read as a real 0.0."""
    rng = np.random.default_rng(1)
    with tf.Graph().as_default() as graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="digits")
        tf.nn.relu6(tf.nn.conv2d(images, tf.constant(rng.normal(0, 0.5, (3, 3, 1, 4)), tf.float32), 1, "SAME"), name="features")
    path = tmp_path / "features.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    summary = run_user_model(workspace, path, "frozen_graph", "tf2ir", "calib.num_images=32", "data.eval_num_images=20", "until=simulate")
    assert not [key for key in summary.metrics if "top1" in key]
    assert summary.metrics["simulate.layer_agreement_min"] == 1.0 and "annotate.sqnr_db_min" in summary.metrics
