"""Our PTQ on target=tflite_int8 (the defaults) against TensorFlow Lite's converter (full-int8 PTQ) on one model of each kind
issue 39 brings, each built and briefly trained (seeded) as tests/test_models_2026.py builds it: end-point SQNR against the
float model on the same evaluation inputs, both calibrated on the same calibration inputs. Our row is all eight stages
(codegen.bitexact and simulate.reference_agreement must be 1, else the benchmark stops); the accelerator's share is
accel_tflite's. A kind the converter cannot convert says so.

    .venv/bin/python bench/models_2026.py [--out bench/out/models_2026.md] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import keras  # noqa: E402

from test_models_2026 import (built, converter_sqnr_db, count, gelu_mlp, image_and_features, image_classes, keyword_spotting,  # noqa: E402
                              layer_norm_patches, part, two_inputs,
                              layer_norm_sequence, raw_pixels, recurrent_classifier, run_arrays, saved, separable_multiplier_2, signal_classes, squeeze_excite,
                              text_classifier, token_classes, trained, vision_transformer, vision_transformer_mlp, waveform_m5)
from tables import publish  # noqa: E402  (bench/tables.py)
from core.frontend.recurrent import unrolled  # noqa: E402

COLUMNS = ("model", "layers", "ours: SQNR (dB)", "converter: SQNR (dB)", "bit-exact", "accel_tflite MAC share", "seconds")


def mixed_float16_squeeze_excite() -> keras.Model:
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        return squeeze_excite()
    finally:
        keras.mixed_precision.set_global_policy("float32")


# name -> (builder, data, what it holds)
KINDS = {
    "keyword spotting [49, 10]": (keyword_spotting, lambda: signal_classes(512, 49, 10, 4, seed=0),
                                  "Conv1D, SeparableConv1D, dilated causal Conv1D, 1-D pools, GlobalMax/AveragePooling1D"),
    "M5 raw waveform [1600, 1]": (waveform_m5, lambda: signal_classes(512, 1600, 1, 4, seed=1), "strided Conv1D, BatchNorm, MaxPooling1D"),
    "squeeze-excite 16x16": (squeeze_excite, lambda: image_classes(512, 16, 4, seed=2),
                             "ReLU(max_value=4), hard_sigmoid, GlobalMaxPooling2D, bilinear UpSampling2D"),
    "raw pixels 20x20": (raw_pixels, lambda: image_classes(512, 20, 4, seed=2, scale=255.0), "Resizing, Rescaling in the model"),
    "mixed_float16 squeeze-excite": (mixed_float16_squeeze_excite, lambda: image_classes(512, 16, 4, seed=2), "float16 Casts"),
    "GELU MLP 12x12": (gelu_mlp, lambda: image_classes(512, 12, 4, seed=7), "patch embedding, GELU exact and tanh"),
    "depth multiplier 2, 12x12": (separable_multiplier_2, lambda: image_classes(512, 12, 4, seed=6),
                                  "SeparableConv2D and DepthwiseConv2D, depth_multiplier=2"),
    "LayerNormalization 12x12": (layer_norm_patches, lambda: image_classes(512, 12, 4, seed=3),
                                 "on a patch embedding, and after a residual GELU MLP"),
    "LayerNormalization [32, 8]": (layer_norm_sequence, lambda: signal_classes(512, 32, 8, 4, seed=3),
                                   "on a Conv1D embedding (no beta), a token MLP (Dense on every token), after a residual sum (no gamma)"),
    "ViT block without attention 12x12": (vision_transformer_mlp, lambda: image_classes(512, 12, 4, seed=3),
                                          "patches Reshaped to tokens, pre-norm LayerNormalization, GELU token MLP, residual"),
    "ViT block 12x12": (vision_transformer, lambda: image_classes(512, 12, 4, seed=3),
                        "MultiHeadAttention (2 heads) and a ReLU token MLP on residuals, LayerNormalization, GlobalAveragePooling1D"),
    "LSTM [16, 4]": (lambda: recurrent_classifier("lstm"), lambda: signal_classes(512, 16, 4, 4, seed=3),
                     "Conv1D, LSTM(8) of Keras' defaults (a `while` over time), unrolled"),
    "GRU [16, 4]": (lambda: recurrent_classifier("gru"), lambda: signal_classes(512, 16, 4, 4, seed=3),
                    "Conv1D, GRU(8) of Keras' defaults (reset_after), unrolled"),
    "bidirectional GRU [16, 4]": (lambda: recurrent_classifier("bidirectional_gru"), lambda: signal_classes(512, 16, 4, 4, seed=3),
                                  "Conv1D, Bidirectional(GRU(8)), unrolled both ways"),
    "text classifier, 24 token ids": (text_classifier, lambda: token_classes(512, 24, 64, 4, seed=5),
                                      "Embedding (64 x 8) on int32 token ids, Conv1D, GlobalMaxPooling1D"),
    "two inputs: image 8x8 and 4 features": (two_inputs, lambda: image_and_features(512, 8, 4, 4, seed=9),
                                             "Conv2D and GlobalAveragePooling2D on the image, Dense on the features, Concatenate"),
}


def row(name: str, build, data, holds: str, work: Path) -> list[str]:
    started = time.perf_counter()
    model = trained(built(build), data)
    model_path, arrays = saved(model, data, work)
    workspace = [f"store.url={work / 'store'}", f"tracking_uri=sqlite:///{work / 'mlflow.db'}"]
    ours = run_arrays(workspace, model_path, arrays, "tflite_int8").metrics
    if ours["codegen.bitexact"] != 1.0 or ours["simulate.reference_agreement"] != 1.0:
        raise SystemExit(f"{name}: not bit-exact: {ours}")
    accel = run_arrays(workspace, model_path, arrays, "accel_tflite").metrics
    calibration, evaluation = part(data[0], slice(None, count(data[0]) // 2)), part(data[0], slice(count(data[0]) // 2, None))
    try:
        converter = f"{converter_sqnr_db(model, calibration, evaluation):.2f}"
    except Exception as error:  # the converter's own failure is the row's finding; a recurrent model's unrolled form beside it
        converter = f"fails ({type(error).__name__})"
        if unrolled(model, keras) is not model:
            converter += f"; {converter_sqnr_db(unrolled(model, keras), calibration, evaluation):.2f} unrolled"
    return [name, holds, f"{ours['simulate.sqnr_db_min']:.2f}", converter, "yes", f"{accel['partition.mac_share_accel']:.0%}",
            f"{time.perf_counter() - started:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "models_2026.md")
    parser.add_argument("--only", nargs="+", choices=sorted(KINDS), help="these kinds alone (default: every kind)")
    args = parser.parse_args()
    rows = []
    for name, (build, data, holds) in KINDS.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as work:
            rows.append(row(name, build, data(), holds, Path(work)))
    publish(COLUMNS, rows, args.out)


if __name__ == "__main__":
    main()
