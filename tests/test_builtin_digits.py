from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from core.frontend.builtin_models import (
    DIGITS_PREPROCESS,
    BuiltinModelError,
    DigitsModelSettings,
    build_digits_model,
    digits_keras_model,
    freeze_model,
)
from core.data.datasets import load_digits_split, preprocess

IR_OPS = {"Conv2D", "DepthwiseConv2dNative", "AddV2", "AvgPool", "Relu6", "BiasAdd"}
BATCH_NORM_ARITHMETIC = {"Rsqrt", "Mul", "Sub"}


@pytest.fixture(scope="module")
def built():
    epochs_done = []
    model = build_digits_model({}, progress=lambda done, total: epochs_done.append((done, total)))
    return model, epochs_done


def run_graph_def(graph_def, input_tensor, output_tensor, images):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(output_tensor, {input_tensor: images})


DEFAULT_SETTINGS = DigitsModelSettings()


def holdout(settings=DEFAULT_SETTINGS):
    split = load_digits_split(settings.holdout_fraction, settings.seed)
    return preprocess(split.test_images, DIGITS_PREPROCESS), split.test_labels


def test_default_model_reaches_the_accuracy_floor_on_the_holdout_split(built):
    model, _ = built
    assert model.metrics["float_accuracy"] >= 0.93
    assert 0.0 <= model.metrics["train_accuracy"] <= 1.0
    assert model.metrics["holdout_examples"] == 360


def test_progress_is_reported_after_every_epoch(built):
    _, epochs_done = built
    total = DigitsModelSettings().epochs
    assert epochs_done == [(done, total) for done in range(1, total + 1)]


def test_frozen_graph_in_a_session_reproduces_the_reported_accuracy(built):
    model, _ = built
    images, labels = holdout()
    logits = run_graph_def(model.graph_def, model.input_tensor, model.end_points[0], images)
    assert logits.shape == (len(labels), 1, 1, 10)
    assert np.mean(logits.reshape(-1, 10).argmax(axis=1) == labels) == model.metrics["float_accuracy"]


def test_input_and_end_point_are_real_tensors_of_the_frozen_graph(built):
    model, _ = built
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(model.graph_def, name="")
    assert model.input_tensor == "images:0" and model.end_points == ["Identity:0"]
    assert graph.get_tensor_by_name(model.input_tensor).op.type == "Placeholder"
    assert graph.get_tensor_by_name(model.input_tensor).shape.as_list() == [None, 8, 8, 1]
    end_point = graph.get_tensor_by_name(model.end_points[0])
    assert end_point.shape.as_list() == [None, 1, 1, 10]
    assert end_point.op.inputs[0].op.type == "BiasAdd"
    assert end_point.op.inputs[0].op.inputs[0].op.type == "Conv2D"


def test_frozen_graph_has_only_ops_the_ir_expresses(built):
    model, _ = built
    ops = Counter(node.op for node in model.graph_def.node)
    assert IR_OPS <= set(ops) and BATCH_NORM_ARITHMETIC <= set(ops)
    assert not {"MatMul", "Reshape", "Squeeze", "VarHandleOp", "ReadVariableOp"} & set(ops)
    assert ops["DepthwiseConv2dNative"] == 2 and ops["AvgPool"] == 1 and ops["Relu6"] == 5


def test_two_builds_are_byte_identical(built):
    model, _ = built
    again = build_digits_model({})
    assert again.graph_def.SerializeToString(deterministic=True) == model.graph_def.SerializeToString(deterministic=True)
    assert again.metrics == model.metrics


def test_freezing_keeps_the_keras_model_predictions():
    # random weights (positive BN variances) exercise every frozen constant without training
    keras_model = digits_keras_model()
    rng = np.random.default_rng(0)
    weights = []
    for variable in keras_model.weights:
        values = rng.normal(0.0, 0.3, variable.shape).astype(np.float32)
        weights.append(np.abs(values) + 0.5 if "variance" in variable.path else values)
    keras_model.set_weights(weights)
    images, _ = holdout()

    frozen = freeze_model(keras_model)
    graph_logits = run_graph_def(frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name, images)
    keras_logits = keras_model.predict(images, verbose=0)
    np.testing.assert_allclose(graph_logits, keras_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(graph_logits.reshape(-1, 10).argmax(1), keras_logits.reshape(-1, 10).argmax(1))


def test_settings_reject_unknown_keys_and_bad_values():
    assert DigitsModelSettings.from_mapping({"epochs": "3", "width": 2}) == DigitsModelSettings(epochs=3, width=2.0)
    with pytest.raises(BuiltinModelError, match="unknown digits model settings"):
        DigitsModelSettings.from_mapping({"epoch": 3})
    with pytest.raises(BuiltinModelError, match="positive"):
        DigitsModelSettings.from_mapping({"learning_rate": 0})
    with pytest.raises(BuiltinModelError, match="holdout_fraction"):
        DigitsModelSettings.from_mapping({"holdout_fraction": 1.0})
