"""Executing a `Graph` with TensorFlow: one session kept open, any tensors fetched
per batch, so a whole data set costs one graph execution per batch."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from core.frontend.graph import Graph, canonical_tensor, input_feed

DEFAULT_BATCH_SIZE = 64


def new_session(tf_graph):
    """A Session on `tf_graph` that computes each node as the graph says. Grappler's remapper is
    off: it fuses Conv2D + BiasAdd + LeakyRelu (oneDNN) even when the BiasAdd is fetched, and the
    fetch then fails ("not found in the Graph"); the reference values must be the graph's own."""
    import tensorflow as tf
    from tensorflow.core.protobuf import rewriter_config_pb2

    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return tf.compat.v1.Session(graph=tf_graph, config=config)


class GraphRunner:
    """One Graph imported once into a tf.compat.v1 Session kept open, so repeated
    batches pay neither the import nor the session start-up again."""

    def __init__(self, graph: Graph):
        import tensorflow as tf

        self.graph = graph
        self._tf_graph = tf.Graph()
        with self._tf_graph.as_default():
            tf.compat.v1.import_graph_def(graph.to_graph_def(), name="")
        self._session = new_session(self._tf_graph)
        # a placeholder with a fixed batch size (the SSD's is [1,160,160,3]) only takes chunks of that size
        shape = self._tf_graph.get_tensor_by_name(graph.input_tensors[0]).shape
        self.fixed_batch = shape[0] if shape.rank else None

    def batches(self, fetches: Sequence[str], images: np.ndarray, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[list[np.ndarray]]:
        """The fetched tensors for each chunk of `batch_size` images, in order."""
        if batch_size < 1:
            raise ValueError(f"batch_size is {batch_size}; expected a positive number of images")
        if self.fixed_batch is not None:
            if len(images) % self.fixed_batch:
                raise ValueError(f"the input {self.graph.input_tensors[0]} takes batches of exactly {self.fixed_batch} images; "
                                 f"{len(images)} images do not split into them")
            batch_size = self.fixed_batch
        fetches = [canonical_tensor(t) for t in fetches]
        for start in range(0, len(images), batch_size):
            values = self._session.run(fetches, feed_dict=input_feed(images[start : start + batch_size], self.graph))
            yield [np.asarray(value) for value in values]

    def run(self, fetches: Sequence[str], images: np.ndarray, batch_size: int = DEFAULT_BATCH_SIZE) -> list[np.ndarray]:
        """The fetched tensors for all images, concatenated along the batch axis."""
        per_batch = list(self.batches(fetches, images, batch_size))
        if not per_batch:
            raise ValueError("no images to run")
        return [np.concatenate(parts) for parts in zip(*per_batch)]

    def session_run(self, fetches: Sequence[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One execution with any tensors fed (a fed tensor cuts the graph above it)."""
        return self._session.run(list(fetches), feed_dict=feed)

    def extend(self, build: Callable[[Any], list[Any]]) -> list[str]:
        """Add ops to the session's graph: `build(tf_graph)` returns new tensors, whose
        names come back for `batches`/`run` to fetch."""
        with self._tf_graph.as_default():
            return [tensor.name for tensor in build(self._tf_graph)]

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> "GraphRunner":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
