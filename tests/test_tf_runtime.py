"""The TensorFlow runner the stages compute reference values with."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from core.frontend.graph import Graph
from core.frontend.rewrite import evaluate
from core.frontend.tf_runtime import GraphRunner


def test_a_conv_output_read_by_a_leaky_relu_can_be_fetched():
    """Grappler's remapper would fuse Conv2D + BiasAdd + LeakyRelu and drop the BiasAdd the
    annotate stage fetches (every Keras Conv2D followed by LeakyReLU)."""
    rng = np.random.default_rng(0)
    with tf.Graph().as_default() as tf_graph:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
        conv = tf.nn.conv2d(x, tf.constant(rng.normal(size=(3, 3, 3, 4)).astype(np.float32)), 2, "SAME", name="conv")
        biased = tf.nn.bias_add(conv, tf.constant(rng.normal(size=4).astype(np.float32)), name="bias")
        tf.nn.leaky_relu(biased, 0.3, name="leaky")
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), "x:0", ["leaky:0"])
    images = rng.uniform(-1, 1, (2, 8, 8, 3)).astype(np.float32)
    biased_values, leaky_values = GraphRunner(graph).run(["bias:0", "leaky:0"], images)
    np.testing.assert_allclose(leaky_values, np.where(biased_values > 0, biased_values, 0.3 * biased_values), rtol=1e-6)
    (again,) = evaluate(graph, ["bias:0"], {"x:0": images})
    np.testing.assert_array_equal(again, biased_values)
