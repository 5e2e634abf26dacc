"""Run by .venv/tfmot's Python (`make setup-tfmot`), not by pytest: a real tfmot 0.8.1 QAT CNN as a user makes
one. Conv2D + BatchNormalization + ReLU6 twice, global pooling, Dense, with tf_keras; `quantize_model` on it
(BatchNorm after the per-channel fake-quantized weights, tfmot's default layout); trained briefly on the images of
an .npz; frozen as a GraphDef.

    python tfmot_model.py DATA.npz OUT.pb    # DATA: x float32 [N, 32, 32, 3] in [-1, 1], y int [N]

Prints the QAT model's own top-1 on the last 200 images (kept out of training) as `top1 <value>`."""

import sys

import numpy as np
import tensorflow as tf
import tensorflow_model_optimization as tfmot
import tf_keras as keras
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2


def main(data_path: str, out_path: str) -> None:
    data = np.load(data_path, allow_pickle=False)
    x, y = data["x"].astype(np.float32), data["y"].astype(np.int64)
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential([
        layers.InputLayer(input_shape=(32, 32, 3)),
        layers.Conv2D(16, 3, padding="same", use_bias=False), layers.BatchNormalization(), layers.ReLU(6.0),
        layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False), layers.BatchNormalization(), layers.ReLU(6.0),
        layers.GlobalAveragePooling2D(), layers.Dense(10),
    ])
    quantized = tfmot.quantization.keras.quantize_model(model)
    quantized.compile(optimizer=keras.optimizers.Adam(3e-3), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    quantized.fit(x[:-200], y[:-200], epochs=30, batch_size=32, verbose=0)
    spec = tf.TensorSpec((None, 32, 32, 3), tf.float32, name="images")
    frozen = convert_variables_to_constants_v2(tf.function(lambda t: quantized(t, training=False)).get_concrete_function(spec))
    with open(out_path, "wb") as out:
        out.write(frozen.graph.as_graph_def().SerializeToString())
    logits = quantized.predict(x[-200:], verbose=0)
    print(f"top1 {float(np.mean(logits.argmax(axis=1) == y[-200:]))}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
