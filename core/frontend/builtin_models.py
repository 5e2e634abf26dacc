"""The built-in default model `digits`: a small float CNN trained at the pipeline's import stage.

It lets the whole pipeline run with no download. Its structure is limited to
what the TF2IR layer IR can express (conv, depthwise conv, add, avg_pool with
fused Relu6), and its classifier is a 1x1 conv whose [N,1,1,10] output is the
end point, the same form as the real mobilenet_v1_0.5_128_cifar10 graph.

Training is deterministic (fixed seeds, deterministic ops, fixed layer names)
because the pipeline content-addresses artifacts: the same settings must give
a byte-identical frozen GraphDef.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from core.data.datasets import DIGITS_CLASSES, Preprocess, load_digits_split, preprocess

# sklearn digits are 0..16; this maps them to [-1, 1] like the real models' inputs
DIGITS_PREPROCESS = Preprocess(size=(8, 8), channels=1, resize="none", scale=8.0, offset=-1.0)
DIGITS_INPUT_NAME = "images"

Progress = Callable[[int, int], None]

# Measured: with oneDNN kernels the trained weights change with the intra-op thread count
# (1, 2, 3, 4, 8, 16 threads gave six different graphs); with Eigen's kernels they do not.
# GPUs are hidden because their kernels round differently from the CPU's.
ISOLATED_TRAINING_ENV = {
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "CUDA_VISIBLE_DEVICES": "",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}
CHILD_GRAPH_FILE = "graph.pb"
CHILD_RESULT_FILE = "result.json"
CHILD_PROGRESS_PREFIX = "digits-model-progress "


class BuiltinModelError(ValueError):
    """Settings a built-in model cannot be built with."""


@dataclass(frozen=True)
class DigitsModelSettings:
    seed: int = 0
    epochs: int = 20
    batch_size: int = 32
    learning_rate: float = 0.003
    holdout_fraction: float = 0.2
    width: float = 1.0  # channel multiplier over 24 (8x8 stages) and 48 (4x4 stage) channels

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise BuiltinModelError(f"epochs and batch_size must be positive, got {self.epochs} and {self.batch_size}")
        if not self.learning_rate > 0 or not self.width > 0:
            raise BuiltinModelError(f"learning_rate and width must be positive, got {self.learning_rate} and {self.width}")
        if not 0.0 < self.holdout_fraction < 1.0:
            raise BuiltinModelError(f"holdout_fraction is {self.holdout_fraction}; expected a fraction strictly between 0 and 1")

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None) -> "DigitsModelSettings":
        """Defaults overridden by the config's mapping; unknown keys are errors, not silently ignored."""
        if isinstance(settings, DigitsModelSettings):
            return settings
        settings = dict(settings or {})
        types = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(settings) - set(types))
        if unknown:
            raise BuiltinModelError(f"unknown digits model settings {unknown}; expected some of {sorted(types)}")
        casts = {"int": int, "float": float}
        return cls(**{key: casts[types[key]](value) for key, value in settings.items()})


@dataclass
class BuiltModel:
    graph_def: Any  # tf.compat.v1.GraphDef, frozen
    input_tensor: str
    end_points: list[str]
    metrics: dict[str, float]


def build_digits_model(settings: Mapping[str, Any] | None = None, progress: Progress | None = None) -> BuiltModel:
    """Train the digits CNN on the held-out split's train part and freeze it to a GraphDef.

    Training runs in a child process with a pinned TensorFlow configuration (see
    ISOLATED_TRAINING_ENV), so the bytes depend on the settings and the TensorFlow
    build only: not on this process's TF state, its thread count or a GPU.
    """
    with tempfile.TemporaryDirectory(prefix="digits_model_") as scratch:
        write_digits_model(settings, Path(scratch), progress)
        return read_built_model(Path(scratch))


def write_digits_model(settings: Mapping[str, Any] | None, directory: Path, progress: Progress | None = None) -> None:
    """The trained, frozen digits CNN as files in `directory` (read_built_model reads them), trained in the child."""
    config = DigitsModelSettings.from_mapping(settings)
    directory.mkdir(parents=True, exist_ok=True)
    _train_in_child(config, directory, progress)
    (directory / "stderr.txt").unlink(missing_ok=True)


def read_built_model(directory: Path) -> BuiltModel:
    """A built model from the files write_digits_model (or a builder of BUILTIN_MODELS) wrote."""
    import tensorflow as tf

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString((directory / CHILD_GRAPH_FILE).read_bytes())
    result = json.loads((directory / CHILD_RESULT_FILE).read_text())
    return BuiltModel(graph_def, result["input_tensor"], result["end_points"], result["metrics"])


def build_digits_model_in_process(settings: Mapping[str, Any] | None = None, progress: Progress | None = None) -> BuiltModel:
    """The same build in this process: repeatable here, but its numbers follow this process's
    TensorFlow configuration (oneDNN kernels sum differently per thread count)."""
    config = DigitsModelSettings.from_mapping(settings)
    split = load_digits_split(config.holdout_fraction, config.seed)
    train_images = preprocess(split.train_images, DIGITS_PREPROCESS)
    test_images = preprocess(split.test_images, DIGITS_PREPROCESS)

    model = train_digits_model(train_images, split.train_labels, config, progress)
    frozen_function = freeze_model(model)
    metrics = {
        "float_accuracy": _accuracy(frozen_function, test_images, split.test_labels),
        "train_accuracy": _accuracy(frozen_function, train_images, split.train_labels),
        "train_examples": int(len(split.train_labels)),
        "holdout_examples": int(len(split.test_labels)),
    }
    return BuiltModel(
        graph_def=frozen_function.graph.as_graph_def(),
        input_tensor=frozen_function.inputs[0].name,
        end_points=[frozen_function.outputs[0].name],
        metrics=metrics,
    )


def digits_channels(width: float) -> tuple[int, int]:
    """The built-in model's channels at `width`: its 8x8 stages' and its 4x4 stage's."""
    return max(1, round(24 * width)), max(1, round(48 * width))


# float32s a training step keeps at least, per weight (the weight, its gradient, Adam's two moments) and per activation
# value (the forward value, its gradient, one temporary): a lower bound, so a width it refuses could never train
TRAINING_FLOATS_PER_WEIGHT = 4
TRAINING_FLOATS_PER_ACTIVATION = 3


def digits_training_bytes(width: float, batch_size: int) -> int:
    """At least what training the built-in model at `width` holds: its weights with their gradients and Adam's moments,
    and a batch's activations (ten tensors of the 8x8 stages, six of the 4x4), as float32."""
    narrow, wide = digits_channels(width)
    weights = 9 * narrow + 9 * narrow + narrow * narrow + 9 * narrow + narrow * wide + wide * 10 + 4 * (4 * narrow + wide)
    activations = batch_size * (10 * 64 * narrow + 6 * 16 * (narrow + wide))
    return 4 * (TRAINING_FLOATS_PER_WEIGHT * weights + TRAINING_FLOATS_PER_ACTIVATION * activations)


def digits_keras_model(width: float = 1.0):
    """The architecture, untrained. Every layer is named so that graph node names never depend on
    how many Keras models the process built before (Keras' auto-names use global counters)."""
    import keras
    from keras import layers

    narrow, wide = digits_channels(width)

    def conv_bn_relu6(x, name, filters=None, kernel=1, strides=1, depthwise=False):
        if depthwise:
            x = layers.DepthwiseConv2D(kernel, strides=strides, padding="same", use_bias=False, name=f"{name}_dwconv")(x)
        else:
            x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False, name=f"{name}_conv")(x)
        x = layers.BatchNormalization(name=f"{name}_bn")(x)
        return layers.ReLU(max_value=6.0, name=f"{name}_relu6")(x)

    images = keras.Input(shape=(8, 8, 1), name=DIGITS_INPUT_NAME)
    stem = conv_bn_relu6(images, "stem", narrow, kernel=3)  # 8x8
    x = conv_bn_relu6(stem, "block1_depthwise", kernel=3, depthwise=True)
    x = conv_bn_relu6(x, "block1_pointwise", narrow)
    x = layers.Add(name="block1_add")([stem, x])  # the residual: both branches 8x8xnarrow
    x = conv_bn_relu6(x, "block2_depthwise", kernel=3, strides=2, depthwise=True)  # 4x4
    x = conv_bn_relu6(x, "block2_pointwise", wide)
    x = layers.AveragePooling2D(pool_size=4, name="global_pool")(x)  # 1x1
    x = layers.Conv2D(DIGITS_CLASSES, 1, use_bias=False, name="logits")(x)
    logits = _bias_add_layer()(name="logits_bias")(x)  # [N,1,1,10], no softmax
    return keras.Model(images, logits, name="digits")


def _bias_add_layer():
    """A layer that is exactly tf.nn.bias_add. Keras 3's own conv bias reshapes the bias
    variable before adding it, which leaves a Reshape in the frozen graph that the IR lacks."""
    import keras
    import tensorflow as tf

    class BiasAdd(keras.layers.Layer):
        def build(self, input_shape):
            self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="bias")

        def call(self, inputs):
            return tf.nn.bias_add(inputs, self.bias)

    return BiasAdd


def train_digits_model(images: np.ndarray, labels: np.ndarray, config: DigitsModelSettings, progress: Progress | None = None):
    import keras
    import tensorflow as tf

    # both are process-wide; op determinism stays on afterwards, which only removes
    # nondeterministic kernels (none of which the CPU pipeline relies on)
    keras.utils.set_random_seed(config.seed)
    tf.config.experimental.enable_op_determinism()

    model = digits_keras_model(config.width)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=config.learning_rate),
        # logits are [N,1,1,10]; labels reshaped to [N,1,1] to match
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    callbacks = []
    if progress is not None:
        callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: progress(epoch + 1, config.epochs)))
    model.fit(
        images,
        labels.reshape(-1, 1, 1),
        batch_size=config.batch_size,
        epochs=config.epochs,
        shuffle=True,
        verbose=0,
        callbacks=callbacks,
    )
    return model


def freeze_model(model):
    """Keras model -> frozen ConcreteFunction (weights as Const nodes); its .graph is the TF1 graph."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name=DIGITS_INPUT_NAME)])
    def serve(images):
        return model(images, training=False)

    return convert_variables_to_constants_v2(serve.get_concrete_function())


def _accuracy(frozen_function, images: np.ndarray, labels: np.ndarray) -> float:
    import tensorflow as tf

    logits = frozen_function(tf.constant(images))[0].numpy()
    return float(np.mean(logits.reshape(len(labels), -1).argmax(axis=1) == labels))


# --- the training child process ---------------------------------------------
def _train_in_child(config: DigitsModelSettings, scratch: Path, progress: Progress | None) -> None:
    project_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **ISOLATED_TRAINING_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project_root, os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "core.frontend.builtin_models", json.dumps(asdict(config)), str(scratch)]
    stderr_path = scratch / "stderr.txt"
    with open(stderr_path, "w") as stderr:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        try:
            for line in child.stdout:
                if line.startswith(CHILD_PROGRESS_PREFIX) and progress is not None:
                    done, total = line[len(CHILD_PROGRESS_PREFIX):].split()
                    progress(int(done), int(total))
            returncode = child.wait()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    if returncode != 0:
        tail = stderr_path.read_text(errors="replace")[-4000:]
        raise BuiltinModelError(f"training the digits model failed (child exit status {returncode}):\n{tail}")


def _child_main(settings_json: str, scratch: str) -> None:
    def report_progress(done: int, total: int) -> None:
        print(f"{CHILD_PROGRESS_PREFIX}{done} {total}", flush=True)

    built = build_digits_model_in_process(json.loads(settings_json), report_progress)
    scratch_dir = Path(scratch)
    (scratch_dir / CHILD_GRAPH_FILE).write_bytes(built.graph_def.SerializeToString(deterministic=True))
    result = {"input_tensor": built.input_tensor, "end_points": built.end_points, "metrics": built.metrics}
    (scratch_dir / CHILD_RESULT_FILE).write_text(json.dumps(result))


# each built-in model's builder: its settings -> its files in a directory (read_built_model reads them)
BUILTIN_MODELS: dict[str, Callable[[Mapping[str, Any], Path, Progress | None], None]] = {"digits": write_digits_model}


def write_builtin_model(settings: Mapping[str, Any], directory: Path, progress: Progress | None = None) -> None:
    """`settings` is the config's model.builtin: its `name` picks the builder, the rest are its settings."""
    settings = dict(settings)
    name = settings.pop("name", "digits")
    if name not in BUILTIN_MODELS:
        raise BuiltinModelError(f"model.builtin.name={name!r}: no such built-in model; choose one of {sorted(BUILTIN_MODELS)}")
    BUILTIN_MODELS[name](settings, directory, progress)


def build_builtin_model(settings: Mapping[str, Any], progress: Progress | None = None) -> BuiltModel:
    """The built-in model `settings` names, built in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix="builtin_model_") as scratch:
        write_builtin_model(settings, Path(scratch), progress)
        return read_built_model(Path(scratch))


if __name__ == "__main__":
    _child_main(*sys.argv[1:])
