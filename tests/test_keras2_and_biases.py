"""Models users bring as they are: Keras 2 `.h5` files (the keywords Keras 3 refuses, core/frontend/keras2.py), and
layers whose biases an int32 cannot hold at input scale x weight scale (BatchNorm folding leaves "dead" channels with
weights ~1e-30 and biases ~0.3): on the tflite_int8 scheme the channel's weight scale is widened as TFLite's converter
widens it; a table the IR cannot hold is refused by calibrate, before annotate, naming the layer."""

from __future__ import annotations

import json

import h5py
import keras
import numpy as np
import pytest

from conftest import CIFAR10_DIR, MODELS, compose
from core.frontend.importer import ModelImportError, load_graph_def
from core.ir.io import read_ir
from core.quantize.table import CalibrationTable
from pipeline.main import run_pipeline
from test_user_models import QUIET, artifact, assert_bit_exact_through_codegen

VWW = MODELS / "mlperf_tiny_vww" / "vww_96.h5"


def _keras2_file(tmp_path, edit) -> str:
    """A small model saved as HDF5, its config then written as Keras 2 writes it: `edit(layer config)` per layer."""
    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((8, 8, 3))
    x = layers.DepthwiseConv2D(3, padding="same", name="dw")(layers.Conv2D(4, 3, name="conv")(inputs))
    model = keras.Model(inputs, layers.Dense(2, name="logits")(layers.Flatten()(x)))
    path = tmp_path / "keras2.h5"
    model.save(path)
    with h5py.File(path, "r+") as file:
        config = json.loads(file.attrs["model_config"])
        for layer in config["config"]["layers"]:
            edit(layer["class_name"], layer["config"])
        file.attrs["model_config"] = json.dumps(config)
        file.attrs["keras_version"] = "2.4.0"
    return path


def _with(keyword: str, value):
    def edit(class_name: str, config: dict) -> None:
        if class_name == "DepthwiseConv2D":
            config[keyword] = value
    return edit


def test_a_keras2_h5_with_the_groups_keyword_loads(tmp_path):
    loaded = load_graph_def("keras", _keras2_file(tmp_path, _with("groups", 1)))
    assert loaded.layer_names["dw"] == "DepthwiseConv2D"
    assert any(node.op == "DepthwiseConv2dNative" for node in loaded.graph_def.node)


@pytest.mark.parametrize("keyword, value, refusal", [
    ("groups", 2, r"layer 'dw' \(DepthwiseConv2D\): keyword groups=2 from Keras 2"),
    ("kernel_shape_hint", 3, r"layer 'dw' \(DepthwiseConv2D\): keyword\(s\) \{'kernel_shape_hint': 3\} that Keras 3's DepthwiseConv2D"),
])
def test_any_other_keras2_keyword_is_refused_naming_the_layer_and_the_keyword(tmp_path, keyword, value, refusal):
    path = _keras2_file(tmp_path, _with(keyword, value))
    with pytest.raises(ModelImportError, match=rf"{path}: {refusal}"):
        load_graph_def("keras", path)


@pytest.mark.skipif(not VWW.exists(), reason=f"{VWW} is missing: the shared test data are not beside the checkout")
def test_mlcommons_visual_wake_words_h5_loads():
    loaded = load_graph_def("keras", VWW)
    assert sum(1 for cls in loaded.layer_names.values() if cls == "DepthwiseConv2D") == 13


# --- biases an int32 cannot hold -------------------------------------------------------------------
def _dead_channels_model() -> keras.Model:
    """Conv + BatchNorm whose 4 of 8 channels BatchNorm scales to ~1e-30 (a channel training left dead) with a bias of
    0.3 after folding, then a classifier."""
    keras.utils.set_random_seed(1)
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="digits")
    x = layers.Conv2D(8, 3, padding="same", name="conv")(inputs)
    norm = layers.BatchNormalization(name="bn")
    x = layers.ReLU(name="relu")(norm(x))
    gamma, beta, mean, variance = norm.get_weights()
    gamma[:4], beta[:4] = 1e-30, 0.3
    norm.set_weights([gamma, beta, mean, variance])
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inputs, layers.Dense(10, name="logits")(x))


def _run(tmp_path, workspace, target: str, *overrides: str):
    path = tmp_path / "dead.keras"
    _dead_channels_model().save(path)
    cfg = compose(*workspace, "model=keras_cifar10", "data=digits", "model.preprocess.size=[8,8]", "model.preprocess.channels=1",
                  "model.preprocess.resize=none", "model.preprocess.scale=1", "model.preprocess.offset=0", "model.name=dead",
                  f"model.file.path={path}", f"target={target}", "quality.enforce=false", *overrides)
    return run_pipeline(cfg, console=QUIET)


@pytest.mark.parametrize("equalize", ["true", "false"])
def test_dead_channels_get_the_weight_scale_tflites_converter_gives_them_and_reach_codegen(tmp_path, workspace, equalize):
    summary = _run(tmp_path, workspace, "tflite_int8", f"calib.equalize={equalize}")
    assert_bit_exact_through_codegen(summary)
    table = CalibrationTable.load(artifact(summary, "calibrate"))
    widened = [entry for entry in table.tensors.values() if any("weight scale widened" in warning for warning in entry.warnings)]
    assert [(entry.kind, "/conv" in entry.layer) for entry in widened] == [("weight", True)]
    assert "widened on 4 channel(s)" in widened[0].warnings[0] and "0 (" in widened[0].warnings[0]
    conv = next(layer for layer in read_ir(artifact(summary, "emit_ir")).layers if layer.operation == "conv" and layer.output_channel_num == 8)
    biases = np.abs(read_ir(artifact(summary, "emit_ir")).params[conv.name]["bias"].astype(np.int64))
    # the dead channels' biases where the converter puts them, half of int32; every other within it
    assert np.allclose(biases[:4], 2**30, rtol=1e-3) and biases.max() <= 2**31 - 1


def test_a_table_the_ir_cannot_hold_is_refused_by_calibrate_before_annotate(tmp_path, workspace):
    """A power-of-two target whose shifters cannot make this model's requantization shifts (none below 20): the refusal
    that emit_ir made after annotate is calibrate's, naming the layer, the shift and the keys."""
    with pytest.raises(Exception, match=r"calibrate.*cannot be emitted.*layer .*_shift = -?\d+ is outside the target's shift range "
                                        r"\[20, 31\] \(target.scheme.min_shift / target.scheme.max_shift\)") as refused:
        _run(tmp_path, workspace, "tf2ir", "target.scheme.min_shift=20")
    assert "annotate" not in str(refused.value)


@pytest.mark.slow
@pytest.mark.skipif(not VWW.exists(), reason=f"{VWW} is missing: the shared test data are not beside the checkout")
def test_visual_wake_words_reaches_codegen_on_tflite_int8_at_least_as_close_to_float_as_tflites_converter(workspace):
    """MLCommons' float visual wake words model on tflite_int8 with the defaults, on 200 CIFAR-10 test images upscaled to
    96x96 and divided by 255, calibrated on 256 training images: every stage, bit-exact, and an end-point SQNR against the
    float model at least the 28.9 dB TFLite's converter reaches on its reference kernels (the issue's measurement)."""
    cfg = compose(*workspace, "model=keras_cifar10", f"model.file.path={VWW}", f"data.path={CIFAR10_DIR}", "model.name=vww",
                  "model.preprocess.size=[96,96]", "model.preprocess.scale=255", "model.preprocess.offset=0", "model.task=detection",
                  "data.eval_num_images=200", "target=tflite_int8")
    summary = run_pipeline(cfg, console=QUIET)
    assert summary.metrics["codegen.bitexact"] == 1.0 and summary.metrics["simulate.reference_agreement"] == 1.0
    assert summary.metrics["simulate.sqnr_db_min"] >= 28.9


def test_a_bias_the_power_of_two_shifters_cannot_align_is_refused_by_calibrate_naming_the_layer_and_channel():
    """tf2ir's bias is int8 at a log2scale of its own, shifted left into the accumulator by bias_shift: a bias far larger
    than the accumulator's scale needs a shift the target's shifters do not have."""
    from core.quantize.schemes import Pow2Symmetric
    from core.quantize.table import CalibrationError, TensorEntry

    scheme = Pow2Symmetric(max_shift=4)
    inputs, weights = (TensorEntry(kind, "minmax", 1.0, [-1.0, 1.0], log2scale=7) for kind in ("activation", "weight"))
    with pytest.raises(CalibrationError, match=r"bias of layer conv: channel 2 \(\|bias\| 40\) needs log2scale 1, 13 bits coarser .* at most "
                                               r"4 \(target.scheme.max_shift\); widen target.scheme.max_shift"):
        scheme.bias_entry("conv", np.array([0.5, -1.0, 40.0]), inputs, weights)
