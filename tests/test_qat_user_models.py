"""A quantization-aware model as tfmot writes it, through the product path with calib.method=qat.

tensorflow-model-optimization cannot be installed beside this project's TensorFlow (it needs
tf-keras, which pulls a second TensorFlow), so the default run builds the graph tfmot 0.8's
quantize_model leaves in a frozen Keras CNN, node for node: an asymmetric, non-power-of-two
input FakeQuant; conv and depthwise weights through FakeQuantWithMinMaxVarsPerChannel with
narrow_range=True, then FusedBatchNormV3 (BN after weight quantization); a 1x1 conv with BiasAdd;
a global Mean without keep_dims; a Dense with per-tensor narrow weights; a Softmax with no
FakeQuant after it. Names are tfmot's (model/quant_conv2d/...). With `--slow` and `make setup-tfmot`
(an environment of its own, .venv/tfmot), a real tfmot model is built, trained and run too."""

from __future__ import annotations

import io
import json
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console

from conftest import CIFAR10_DIR, PROJECT_ROOT, compose
from core.data.datasets import load_cifar10
from core.frontend.graph import Graph
from core.quantize.table import CalibrationTable
from pipeline.main import run_pipeline

INPUT_RANGE = (-1.0039, 0.9961)  # tfmot's AllValuesQuantize: the data's own min/max, not 2^k
RELU_RANGE, RELU6_RANGE, CONV_RANGE, POOL_RANGE, LOGITS_RANGE = (0.0, 5.73), (0.0, 6.0), (-7.1, 6.9), (-2.2, 2.5), (-3.3, 2.9)


def tfmot_style_graph(seed: int = 0):
    rng = np.random.default_rng(seed)

    def const(name, value):
        return tf.constant(np.asarray(value, np.float32), name=name)

    def activation_quant(x, quant_range, scope):
        name = f"{scope}/MovingAvgQuantize/FakeQuantWithMinMaxVars"
        return tf.quantization.fake_quant_with_min_max_vars(x, const(f"{name}/min", quant_range[0]), const(f"{name}/max", quant_range[1]), name=name)

    def per_channel_weights(weights, scope):
        absmax = np.abs(weights).reshape(-1, weights.shape[-1]).max(axis=0)
        name = f"{scope}/LastValueQuant/FakeQuantWithMinMaxVarsPerChannel"
        return tf.quantization.fake_quant_with_min_max_vars_per_channel(
            const(f"{scope}/kernel", weights), const(f"{name}/min", -absmax), const(f"{name}/max", absmax), narrow_range=True, name=name)

    def batch_norm(x, scope):
        channels = x.shape[-1]
        return tf.compat.v1.nn.fused_batch_norm(
            x, const(f"{scope}/gamma", rng.uniform(0.5, 1.5, channels)), const(f"{scope}/beta", rng.normal(0, 0.1, channels)),
            mean=const(f"{scope}/moving_mean", rng.normal(0, 0.1, channels)),
            variance=const(f"{scope}/moving_variance", rng.uniform(0.5, 1.5, channels)), is_training=False, name=f"{scope}/FusedBatchNormV3")[0]

    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1], name="input_1")
        name = "model/quantize_layer/AllValuesQuantize/FakeQuantWithMinMaxVars"
        x = tf.quantization.fake_quant_with_min_max_vars(images, const(f"{name}/min", INPUT_RANGE[0]), const(f"{name}/max", INPUT_RANGE[1]), name=name)
        x = tf.nn.conv2d(x, per_channel_weights(rng.normal(0, 0.4, (3, 3, 1, 8)), "model/quant_conv2d"), 1, "SAME", name="model/quant_conv2d/Conv2D")
        x = tf.nn.relu(batch_norm(x, "model/quant_batch_normalization"), name="model/quant_re_lu/Relu")
        x = activation_quant(x, RELU_RANGE, "model/quant_re_lu")
        x = tf.nn.depthwise_conv2d(x, per_channel_weights(rng.normal(0, 0.4, (3, 3, 8, 1)), "model/quant_depthwise_conv2d"), [1, 1, 1, 1], "SAME",
                                   name="model/quant_depthwise_conv2d/depthwise")
        x = tf.nn.relu6(batch_norm(x, "model/quant_batch_normalization_1"), name="model/quant_re_lu_1/Relu6")
        x = activation_quant(x, RELU6_RANGE, "model/quant_re_lu_1")
        x = tf.nn.conv2d(x, per_channel_weights(rng.normal(0, 0.3, (1, 1, 8, 16)), "model/quant_conv2d_1"), 1, "VALID", name="model/quant_conv2d_1/Conv2D")
        x = tf.nn.bias_add(x, const("model/quant_conv2d_1/bias", rng.normal(0, 0.1, 16)), name="model/quant_conv2d_1/BiasAdd")
        x = activation_quant(x, CONV_RANGE, "model/quant_conv2d_1")
        x = activation_quant(tf.reduce_mean(x, [1, 2], name="model/quant_global_average_pooling2d/Mean"), POOL_RANGE,
                             "model/quant_global_average_pooling2d")
        weights = rng.normal(0, 0.3, (16, 10))
        name, absmax = "model/quant_dense/LastValueQuant/FakeQuantWithMinMaxVars", float(np.abs(weights).max())
        weights = tf.quantization.fake_quant_with_min_max_vars(const("model/quant_dense/kernel", weights), const(f"{name}/min", -absmax),
                                                               const(f"{name}/max", absmax), narrow_range=True, name=name)
        x = tf.nn.bias_add(tf.matmul(x, weights, name="model/quant_dense/MatMul"), const("model/quant_dense/bias", rng.normal(0, 0.1, 10)),
                           name="model/quant_dense/BiasAdd")
        tf.nn.softmax(activation_quant(x, LOGITS_RANGE, "model/quant_dense"), name="model/quant_dense/Softmax")
    return graph.as_graph_def()


@pytest.fixture(scope="module")
def qat_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tfmot") / "qat_cnn.pb"
    path.write_bytes(tfmot_style_graph().SerializeToString())
    return path


def run_qat(workspace, path, target, *overrides):
    cfg = compose(*workspace, "model.name=qat_cnn", "model.format=frozen_graph", f"model.file.path={path}", f"target={target}",
                  "calib.method=qat", "calib.num_images=32", "data.eval_num_images=60", *overrides)
    console = Console(file=io.StringIO(), width=400)
    summary = run_pipeline(cfg, console=console)
    return summary, {result.stage.name: result.artifact.directory for result in summary.results}, console.file.getvalue()


def test_on_tflite_int8_the_qat_ranges_are_used_as_trained(qat_file, workspace):
    summary, artifacts, _ = run_qat(workspace, qat_file, "tflite_int8", "until=annotate")
    table = CalibrationTable.load(artifacts["calibrate"])
    entries = table.tensors
    # the 1x1 conv has no BatchNorm: its weights keep their per-channel FakeQuant ranges, narrow, as trained
    weights = entries["model/quant_conv2d_1/kernel:0"]
    trained = np.abs(tfmot_constant(qat_file, "model/quant_conv2d_1/kernel")).reshape(-1, 16).max(axis=0)
    # narrow_range: 127 steps either side of 0, so the step is max / 127 and int8's -128 lies one step beyond -max
    np.testing.assert_allclose(weights.channel_scales, trained / 127, rtol=1e-6)
    np.testing.assert_allclose([high for _, high in weights.channel_ranges], trained, rtol=1e-6)
    # an affine activation keeps the trained range: ReLU's [0, 5.73] in 255 steps of 5.73 / 255, 0 at int8 -128
    relu = entries["model/quant_re_lu/Relu:0"]
    assert relu.scale == pytest.approx((RELU_RANGE[1] - RELU_RANGE[0]) / 255, rel=1e-6) and relu.zero_point == -128
    # the annotated graph computes what the QAT graph computes, but for the two re-quantized folded weights
    assert summary.metrics["annotate.sqnr_db_min"] > 25.0 and summary.metrics["annotate.top1_agreement"] >= 0.95


def tfmot_constant(path, name):
    graph = Graph.from_graph_def(tf.compat.v1.GraphDef.FromString(path.read_bytes()), "input_1:0", ["model/quant_dense/Softmax:0"])
    return graph.constants[name]


def test_on_tf2ir_the_ranges_are_rounded_to_powers_of_two_and_every_change_is_reported(qat_file, workspace):
    summary, artifacts, log = run_qat(workspace, qat_file, "tf2ir")
    assert summary.metrics["codegen.bitexact"] == 1.0 and summary.metrics["simulate.layer_agreement_min"] == 1.0
    assert summary.metrics["simulate.end_point_agreement"] == 1.0
    changes = {change["tensor"]: change for change in json.loads((artifacts["calibrate"] / "report.json").read_text())["qat_range_changes"]}
    table = CalibrationTable.load(artifacts["calibrate"])
    # each rounded by calib.pow2_rounding=ceil: the smallest 2^k range holding the trained one
    for tensor, trained, log2scale in (("model/quant_re_lu/Relu:0", RELU_RANGE, 4), ("model/quant_conv2d_1/BiasAdd:0", CONV_RANGE, 4),
                                       ("model/quant_dense/BiasAdd:0", LOGITS_RANGE, 5)):
        assert changes[tensor]["qat_range"] == pytest.approx(list(trained)) and table.tensors[tensor].log2scale == log2scale, tensor
    # a global pool's FakeQuant follows the reshape Keras's Mean implies: it is the pool's range, changed as such
    pooled = next(tensor for tensor in changes if tensor.startswith("model/quant_global_average_pooling2d/Mean"))
    assert changes[pooled]["qat_range"] == pytest.approx(list(POOL_RANGE)) and table.tensors[pooled].log2scale == 5
    # narrow weights are rounded too; the weights the BatchNorms were folded into have no FakeQuant of their own any more
    assert changes["model/quant_dense/kernel:0"]["why"] == "narrow range"
    assert sum(change["qat_range"] is None and change["kind"] == "weight" for change in changes.values()) == 2
    # each BatchNorm after fake-quantized weights is folded with a warning naming both
    assert summary.metrics["fold_check.batch_norms_folded"] == 2.0
    # the console says it once for both (with the count), the report names each
    assert "2 BatchNorms alike" in log and "follows fake-quantized weights" in log
    folded = json.loads((artifacts["fold_check"] / "report.json").read_text())["folded_batch_norms"]
    for scope in ("model/quant_conv2d", "model/quant_depthwise_conv2d"):
        assert f"{scope}/LastValueQuant/FakeQuantWithMinMaxVarsPerChannel" in [entry.get("requantized_weights") for entry in folded], scope


# --- a real tfmot model (its own environment: `make setup-tfmot`) -----------------------------------------

TFMOT_PYTHON = PROJECT_ROOT / ".venv" / "tfmot" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not TFMOT_PYTHON.exists(), reason="needs .venv/tfmot: run `make setup-tfmot` (tfmot cannot share the lock)")
@pytest.mark.skipif(not CIFAR10_DIR.is_dir(), reason=f"trains on CIFAR-10, expected at {CIFAR10_DIR} (../shared/data)")
def test_a_real_tfmot_qat_model_runs_with_the_defaults_within_a_point_of_its_own_top1(workspace, tmp_path):
    """tfmot's quantize_model on Conv2D + BatchNorm + ReLU6 (BatchNorm after the per-channel fake-quantized
    weights), trained briefly, frozen: fold_check passes with its default tolerance (the fold keeps the trained
    quantized weights' function; the activation FakeQuants' effect is a figure), and calib.method=qat on tf2ir
    stays within a point of the QAT graph's own top-1, bit-exact to the end."""
    images, labels = load_cifar10(CIFAR10_DIR, "data_batch_1")
    np.savez(tmp_path / "train.npz", x=(images.astype(np.float32) / 127.5 - 1.0), y=labels)
    subprocess.run([str(TFMOT_PYTHON), str(PROJECT_ROOT / "tests" / "tfmot_model.py"), str(tmp_path / "train.npz"),
                    str(tmp_path / "tfmot.pb")], check=True, capture_output=True, text=True)
    cfg = compose(*workspace, "model=keras_cifar10", "model.format=frozen_graph", f"model.file.path={tmp_path / 'tfmot.pb'}",
                  f"data.path={CIFAR10_DIR}", "calib.method=qat", "target=tf2ir", "data.eval_num_images=1000")
    metrics = run_pipeline(cfg, console=Console(file=io.StringIO(), width=400)).metrics
    print(f"TFMOT top1 {metrics['annotate.top1']:.4f} qat graph {metrics['annotate.top1_qat_graph']:.4f} simulate {metrics['simulate.top1']:.4f} "
          f"fold max_rel_diff {metrics['fold_check.max_rel_diff']:.3g} fake-quantized {metrics['fold_check.max_abs_diff_fake_quantized']:.3g}")
    assert metrics["fold_check.batch_norms_folded"] == 2 and metrics["fold_check.max_rel_diff"] <= 1e-4
    assert "fold_check.max_abs_diff_fake_quantized" in metrics
    assert abs(metrics["annotate.top1"] - metrics["annotate.top1_qat_graph"]) <= 0.01
    assert metrics["codegen.bitexact"] == 1.0 and metrics["simulate.layer_agreement_min"] == 1.0
