"""keras-hub models of the families users build on in 2026 (MobileNetV3, EfficientNet, ViT, MiT), each in small, briefly
trained on CIFAR-10 and written as the float .tflite TFLite's converter makes of it, with the SavedModel beside it
(TFLite's converter's own int8 PTQ reads that). Needs keras-hub beside the project's environment (`make
setup-keras-hub`, on PYTHONPATH); bench/models_from_tools.py starts it and reads what it writes, as it does
bench/torch_models.py's:

    PYTHONPATH=.venv/keras_hub .venv/bin/python bench/keras_hub_models.py --out DIR --images cifar.npz [--models mobilenet_v3,vit,...]

For each model DIR/<name>.tflite, DIR/<name>_saved_model/, DIR/<name>.npz (calib, eval, eval_labels: images
[N, 32, 32, 3] in [0, 1]) and DIR/manifest.json, in bench/torch_models.py's form with the tools "keras-hub" (the float
file) and "keras-hub-savedmodel" (the SavedModel, which the toolchain also imports itself)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import keras
import keras_hub  # the keras-hub extra: make setup-keras-hub
import numpy as np
import tensorflow as tf

from maker_arguments import maker_arguments  # bench/, beside this script

keras.utils.set_random_seed(0)
IMAGE = (32, 32, 3)


def mobilenet_v3() -> keras.Model:
    """keras-hub's MobileNetV3 (hard-swish, squeeze-excite, depthwise) as its own tests configure it, at 32x32."""
    backbone = keras_hub.models.MobileNetBackbone(
        stackwise_expansion=[[16, 32], [48, 48]], stackwise_num_blocks=[2, 2], stackwise_num_filters=[[16, 16], [24, 24]],
        stackwise_kernel_size=[[3, 3], [5, 5], [1]], stackwise_num_strides=[[2, 1], [2, 1], [1]],
        stackwise_se_ratio=[[None, None], [0.25, 0.25]], stackwise_activation=[["relu", "relu"], ["hard_swish", "hard_swish"]],
        stackwise_padding=[[1, 1], [2, 2], [1]], output_num_filters=128, input_activation="hard_swish",
        output_activation="hard_swish", input_num_filters=16, image_shape=IMAGE, depthwise_filters=8, depthwise_stride=1,
        depthwise_residual=False, squeeze_and_excite=0.5, last_layer_filter=96)
    return keras_hub.models.MobileNetImageClassifier(backbone=backbone, num_classes=10, preprocessor=None)


def efficientnet() -> keras.Model:
    """keras-hub's EfficientNet (fused and unfused MBConv, swish, squeeze-excite), two stages of each, at 32x32."""
    backbone = keras_hub.models.EfficientNetBackbone(
        stackwise_kernel_sizes=[3, 3, 3, 3], stackwise_num_repeats=[1, 2, 2, 2], stackwise_input_filters=[16, 16, 24, 32],
        stackwise_output_filters=[16, 24, 32, 48], stackwise_expansion_ratios=[1, 4, 4, 4],
        stackwise_squeeze_and_excite_ratios=[0.0, 0.0, 0.25, 0.25], stackwise_strides=[1, 2, 2, 1],
        stackwise_block_types=["fused", "fused", "unfused", "unfused"], stackwise_force_input_filters=[0] * 4,
        stackwise_nores_option=[False] * 4, stackwise_width_coefficients=[1.0] * 4, stackwise_depth_coefficients=[1.0] * 4,
        input_shape=IMAGE, num_features=128, dropout=0.0)
    return keras_hub.models.EfficientNetImageClassifier(backbone=backbone, num_classes=10, preprocessor=None)


def vit() -> keras.Model:
    """keras-hub's ViT: 4x4 patches, a class token, two encoder layers of two heads."""
    backbone = keras_hub.models.ViTBackbone(image_shape=IMAGE, patch_size=4, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
    return keras_hub.models.ViTImageClassifier(backbone=backbone, num_classes=10, preprocessor=None)


def mit() -> keras.Model:
    """keras-hub's MiT (SegFormer's encoder: overlapping patches, attention on spatially reduced keys, Mix-FFN), as its
    own tests configure it, under a mean and a dense classifier."""
    backbone = keras_hub.models.MiTBackbone(
        layerwise_depths=[2, 2], image_shape=IMAGE, hidden_dims=[16, 32], num_layers=2, layerwise_num_heads=[1, 2],
        layerwise_sr_ratios=[4, 2], max_drop_path_rate=0.0, layerwise_patch_sizes=[7, 3], layerwise_strides=[4, 2])
    features = keras.layers.GlobalAveragePooling2D()(backbone.output)
    return keras.Model(backbone.input, keras.layers.Dense(10)(features))


# name -> (family, the model)
MODELS = {
    "mobilenet_v3": ("keras-hub MobileNetV3 (hard-swish, SE, depthwise)", mobilenet_v3),
    "efficientnet": ("keras-hub EfficientNet (fused MBConv, swish, SE)", efficientnet),
    "vit": ("keras-hub ViT (class token, attention)", vit),
    "mit": ("keras-hub MiT (reduced-key attention, Mix-FFN)", mit),
}


def trained(model: keras.Model, images: np.ndarray, labels: np.ndarray, epochs: int) -> keras.Model:
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images, labels, batch_size=32, epochs=epochs, verbose=0)
    return model


def written(model: keras.Model, name: str, out: Path) -> tuple[Path, Path]:
    """The float .tflite of the model as TFLite's converter writes it, of the SavedModel Keras exports (batch one)."""
    saved_model = out / f"{name}_saved_model"
    model.export(str(saved_model), format="tf_saved_model", input_signature=[tf.TensorSpec((1, *IMAGE), tf.float32)], verbose=False)
    path = out / f"{name}.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(saved_model)).convert())
    return path, saved_model


def main() -> None:
    arguments = maker_arguments(__doc__, list(MODELS))
    with np.load(arguments.images) as arrays:
        images, labels = arrays["images"].transpose(0, 2, 3, 1).astype(np.float32), arrays["labels"].astype(np.int64)
    manifest = []
    for name in arguments.models.split(","):
        family, build = MODELS[name]
        model = trained(build(), images[:arguments.train], labels[:arguments.train], arguments.epochs)
        path, saved_model = written(model, name, arguments.out)
        held, held_labels = images[arguments.train:arguments.train + 512], labels[arguments.train:arguments.train + 512]
        np.savez(arrays := arguments.out / f"{name}.npz", calib=held[:256], eval=held[256:], eval_labels=held_labels[256:])
        manifest.append({"name": name, "family": family, "files": {"keras-hub": str(path), "keras-hub-savedmodel": str(saved_model)},
                         "arrays": str(arrays), "input": list(IMAGE), "classes": 10})
        print(f"{name}: {path}", file=sys.stderr)
    (arguments.out / "manifest.json").write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
