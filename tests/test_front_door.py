"""The layers of ResNet50, DenseNet, EfficientNet, NASNet, U-Nets and autoencoders (issue: the rest of the front door),
as users write them, through all eight stages on tf2ir and accel: ZeroPadding2D before a pool (TF2IR 1.2's pad, which
the accelerator's DMA pads as it loads), Cropping2D (crop: the DMA loads the kept box), a BatchNormalization or Normalization after no conv (an identity depthwise
1x1 conv for it to fold into), swish and silu (IdentityN forwarded: their lookup tables), BatchNormalization after
Dense (folded into the MatMul), Conv2DTranspose (deconv: the conv of the zero-stuffed input it equals), a dilated
conv (on the accelerator), a classifier with a second regression output (top-1 on the first, SQNR on both).

The default run covers every new operation with one small model on the digits data; keras.applications' models,
a U-Net and an autoencoder with BatchNorm run with `--slow` (they need ../shared's CIFAR-10)."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from conftest import CIFAR10_DIR
from core.ir.io import read_ir
from test_user_models import artifact, assert_bit_exact_through_codegen, run_user_model, save_as

L = keras.layers
QUICK = ("calib.num_images=64", "data.eval_num_images=60")


def every_new_layer_model() -> keras.Model:
    """On the digits' 8x8 images: each layer of the issue, and a second (regression) output."""
    keras.utils.set_random_seed(0)
    images = keras.Input((8, 8, 1), name="digits")
    stem = L.Activation("swish", name="stem_swish")(L.Conv2D(8, 3, padding="same", name="stem")(images))
    pooled = L.MaxPooling2D(3, strides=2, name="max")(L.ZeroPadding2D(1, name="pad_max")(stem))  # 4x4
    averaged = L.AveragePooling2D(2, name="avg")(L.ZeroPadding2D(((0, 1), (0, 1)), name="pad_avg")(pooled))  # 2x2
    cropped = L.Cropping2D(((2, 0), (1, 1)), name="crop")(L.ZeroPadding2D(((0, 2), (1, 1)), name="pad_crop")(pooled))  # NASNet's
    dense_block = L.Concatenate(name="dense_concat")([pooled, L.Conv2D(4, 1, name="growth")(cropped)])
    dense_block = L.ReLU(name="pre_relu")(L.BatchNormalization(name="pre_bn")(dense_block))  # BN after no conv
    atrous = L.Conv2D(8, 3, padding="same", dilation_rate=2, activation="silu", name="atrous")(dense_block)
    up = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu", name="up")(averaged)  # 4x4
    merged = L.Concatenate(name="skip")([up, atrous])
    features = L.Flatten(name="flatten")(merged)
    hidden = L.ReLU(name="fc_relu")(L.BatchNormalization(name="fc_bn")(L.Dense(16, name="fc")(features)))
    scores = L.Dense(10, activation="softmax", name="classes")(hidden)
    boxes = L.Dense(4, name="boxes")(hidden)
    return keras.Model(images, [scores, boxes])


@pytest.fixture(scope="module")
def new_layer_file(tmp_path_factory):
    model = every_new_layer_model()
    keras.utils.set_random_seed(1)  # untrained BatchNorms would be identities: give them statistics to fold
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights([np.random.uniform(0.5, 2, gamma.shape), np.random.normal(0, 0.3, beta.shape),
                               np.random.normal(0, 0.3, mean.shape), np.random.uniform(0.5, 2, variance.shape)])
    return save_as(model, "keras", tmp_path_factory.mktemp("front_door"))


@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_every_new_layer_runs_all_eight_stages_bit_exact(new_layer_file, workspace, target):
    summary = run_user_model(workspace, new_layer_file, "keras", target, *QUICK)
    assert_bit_exact_through_codegen(summary)
    metrics = summary.metrics
    ir = read_ir(artifact(summary, "emit_ir"))
    operations = {layer.operation for layer in ir.layers}
    assert {"pad", "crop", "deconv", "dwconv", "lut", "max_pool", "avg_pool", "concat2"} <= operations, operations
    assert metrics["annotate.top1"] is not None and "simulate.sqnr_db.end_point_1" in metrics  # scored on the first, SQNR on both
    atrous = next(layer for layer in ir.layers if "atrous" in layer.name)
    assert atrous.dilations.pair() == (2, 2)
    if target == "accel":
        plan = {group["layer"]: group for group in json.loads((artifact(summary, "partition") / "partition_plan.json").read_text())["groups"]}
        on_accel = {layer.operation for layer in ir.layers if plan[layer.name]["target"] == "accel"}
        assert {"pad", "crop", "conv", "dwconv", "max_pool"} <= on_accel and plan[atrous.name]["target"] == "accel"
        deconv = plan[next(layer.name for layer in ir.layers if layer.operation == "deconv")]
        assert deconv["target"] == "host" and "zeros between pixels" in deconv["reason"]


def test_a_layer_the_importer_does_not_take_is_named_with_the_layers_it_takes(workspace, tmp_path):
    keras.utils.set_random_seed(0)
    images = keras.Input((8, 8, 1), name="digits")
    normalized = L.UnitNormalization(name="unit_norm")(L.Conv2D(4, 3, name="conv")(images))
    path = save_as(keras.Model(images, L.Dense(10)(L.Flatten()(normalized))), "keras", tmp_path)
    with pytest.raises(Exception, match=r"Keras layer 'unit_norm' \(UnitNormalization\) cannot be expressed in the IR; the importer "
                                        r"takes the Keras layers Conv2D, .*ZeroPadding2D"):
        run_user_model(workspace, path, "keras", "tf2ir", *QUICK)


# --- the models of the issue (--slow) -----------------------------------------------------------------------

needs_cifar10 = pytest.mark.skipif(not CIFAR10_DIR.is_dir(), reason=f"the models run on CIFAR-10, expected at {CIFAR10_DIR} (../shared/data)")
APPLICATIONS = {
    "ResNet50": lambda: keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3), classes=10),
    "DenseNet121": lambda: keras.applications.DenseNet121(weights=None, input_shape=(32, 32, 3), classes=10),
    "EfficientNetB0": lambda: keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10),  # its preprocessing on
    "EfficientNetV2B0": lambda: keras.applications.EfficientNetV2B0(weights=None, input_shape=(32, 32, 3), classes=10),
    "NASNetMobile": lambda: keras.applications.NASNetMobile(weights=None, input_shape=(32, 32, 3), classes=10),
}
CIFAR10 = ("model=keras_cifar10", f"data.path={CIFAR10_DIR}", "calib.num_images=32", "data.eval_num_images=32",
           "quality.enforce=false")  # untrained: its top-1 is noise, its bits are not


def unet() -> keras.Model:
    """A small U-Net: two downsampling stages, Conv2DTranspose upsampling with skip concatenations, a per-pixel head."""
    images = keras.Input((32, 32, 3))
    skips, x = [], images
    for filters in (8, 16):
        x = L.Conv2D(filters, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    for filters, skip in zip((16, 8), reversed(skips)):
        x = L.Conv2DTranspose(filters, 3, strides=2, padding="same", activation="relu")(x)
        x = L.Conv2D(filters, 3, padding="same", activation="relu")(L.Concatenate()([x, skip]))
    return keras.Model(images, L.Conv2D(2, 1)(x))


@needs_cifar10
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tf2ir", "accel"])
@pytest.mark.parametrize("name", [*APPLICATIONS, "UNet"])
def test_the_issues_models_run_all_eight_stages_bit_exact(workspace, tmp_path, name, target):
    keras.utils.set_random_seed(0)
    model = unet() if name == "UNet" else APPLICATIONS[name]()
    extra = ("model.task=detection",) if name == "UNet" else ()
    summary = run_user_model(workspace, save_as(model, "keras", tmp_path), "keras", target, *CIFAR10, *extra)
    assert_bit_exact_through_codegen(summary)
    print(f"MACS {name} {target} {summary.metrics['partition.macs']:.0f} {summary.metrics['partition.mac_share_accel']:.4f}")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["tf2ir", "accel"])
def test_a_dense_autoencoder_with_batchnorm_runs_on_arrays(workspace, tmp_path, target):
    """MLPerf Tiny's anomaly-detection autoencoder: Dense + BatchNormalization + ReLU, 640 values in and out."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((640,))
    x = inputs
    for units in (128, 128, 8, 128, 128):
        x = L.ReLU()(L.BatchNormalization()(L.Dense(units)(x)))
    path = save_as(keras.Model(inputs, L.Dense(640)(x)), "keras", tmp_path)
    vectors = (np.random.default_rng(0).normal(0, 3, (160, 640)) + 1).astype(np.float32)
    np.savez(tmp_path / "sounds.npz", calib=vectors[:96], eval=vectors[96:])
    summary = run_user_model(workspace, path, "keras", target, "model=keras_cifar10", "data=arrays", f"data.path={tmp_path / 'sounds.npz'}",
                             "model.task=detection")
    metrics = summary.metrics
    # the IR, the simulator and the C agree bit for bit; annotate's float MatMul of 640 products rounds 0.8% of the
    # end points' values one LSB apart (as on the autoencoder without BatchNorm: tests/test_inputs_and_quality.py)
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
    assert metrics["fold_check.batch_norms_folded"] == 5
