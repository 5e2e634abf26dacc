"""TensorFlow Lite int8 models: read (core/frontend/tflite.py) and run with the tflite_int8 scheme's
kernels (core/ir/tflite_interpreter.py), every tensor compared with TFLite's own reference kernels
(LiteRT's interpreter with the BUILTIN_REF resolver): MLCommons' ResNet-8 from ../shared, and models the
tests build in Keras and convert with TFLite's converter (full-int8 PTQ) covering each operator, its
padding, strides, dilations, depth multipliers and fused activations. Bad files are one clear error."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from conftest import CIFAR10_DIR, MODELS
from core.data.datasets import load_cifar10
from core.frontend.tflite import TfliteError, read_tflite
from core.frontend.tflite_graph import CONVERTERS, FLOAT_ONLY, refuse_unread_operators
from core.ir.ops.conv.affine import conv_affine, exact_dtype
from core.ir.tflite_interpreter import KERNELS, run_int8
from core.quantize.tflite_math import requantize
from core.quantize.tflite_reference import reference_tensors

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite"
needs_resnet8 = pytest.mark.skipif(not (RESNET8.exists() and CIFAR10_DIR.exists()),
                                   reason=f"{RESNET8} or {CIFAR10_DIR} is missing: the shared test data are not beside the checkout")


def _assert_every_tensor_equal(path, inputs) -> dict:
    model = read_tflite(path)
    ours, reference = run_int8(model, inputs), reference_tensors(path, inputs)
    for operator in model.operators:
        output = operator.outputs[0]
        assert ours[output].dtype == reference[output].dtype and ours[output].shape == reference[output].shape, operator
        differing = np.flatnonzero(ours[output].ravel() != reference[output].ravel())  # floats too: equal to the bit
        assert differing.size == 0, (f"operator {operator.index} ({operator.name}): {differing.size} of {ours[output].size} values "
                                     f"differ from TFLite's reference kernels")
    return ours


@needs_resnet8
def test_mlcommons_resnet8_every_tensor_as_tflites_reference_kernels_and_its_top1():
    images, labels = load_cifar10(CIFAR10_DIR, "test_batch")
    inputs = (images.astype(np.int16) - 128).astype(np.int8)  # the model's input: int8 = pixel - 128 (scale 1, zero point -128)
    model = read_tflite(RESNET8)
    assert model.tensor(model.inputs[0]).quantization.zero_point[0] == -128
    _assert_every_tensor_equal(RESNET8, inputs[:96])
    scores = run_int8(model, inputs)[model.outputs[0]]
    # the reference kernels' top-1 on these 846 images, measured independently (../shared/models/README.md): 744
    assert int((scores.argmax(axis=1) == labels).sum()) == 744


def _convert(model: tf.keras.Model, shape, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    samples = [rng.normal(0, 1, (1, *shape)).astype(np.float32) for _ in range(16)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([sample] for sample in samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def _every_operator_model() -> tf.keras.Model:
    """Each kernel's cases: SAME and VALID, strides 1 and 2, depth multipliers 1 and 2, a
    pool whose SAME windows straddle the border, each fused activation, a residual add, dense, softmax."""
    tf.keras.utils.set_random_seed(3)
    layers = tf.keras.layers
    inputs = tf.keras.Input((17, 15, 3))
    x = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(inputs)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    skip = layers.Conv2D(8, 1)(x)
    y = layers.Conv2D(8, 3, padding="same")(x)
    x = layers.Add()([skip, y])
    x = layers.DepthwiseConv2D(3, depth_multiplier=2, padding="valid")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = layers.AveragePooling2D(2, strides=1, padding="same")(x)
    x = layers.Conv2D(6, (2, 3), strides=(1, 2), padding="valid", activation="relu")(x)
    x = layers.Lambda(lambda t: tf.reshape(t, [-1, 3 * 1 * 6]))(x)  # RESHAPE by a constant (Keras 3's Flatten reads the shape)
    x = layers.Dense(10)(x)
    return tf.keras.Model(inputs, layers.Softmax()(x))


@pytest.fixture(scope="module")
def every_operator_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tflite") / "every_operator.tflite"
    path.write_bytes(_convert(_every_operator_model(), (17, 15, 3)))
    return path


def test_a_converted_model_of_every_kernel_runs_as_tflites_reference_kernels(every_operator_file):
    model = read_tflite(every_operator_file)
    assert {operator.name for operator in model.operators} == {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MAX_POOL_2D", "AVERAGE_POOL_2D",
                                                               "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"}
    rng = np.random.default_rng(1)
    # the whole int8 range, its extremes included: zero points and clamps at their limits
    inputs = rng.integers(-128, 128, (24, 17, 15, 3)).astype(np.int8)
    inputs[0], inputs[1] = -128, 127
    _assert_every_tensor_equal(every_operator_file, inputs)


def test_every_operator_the_reader_takes_has_an_int8_kernel_but_those_it_takes_in_float_files_only():
    assert set(KERNELS) == set(CONVERTERS) - FLOAT_ONLY and FLOAT_ONLY <= set(CONVERTERS)


# --- bad files: one error each, naming the file and what to do -------------------------------------
def test_a_file_that_is_not_a_flatbuffer_is_refused(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(TfliteError, match=rf"{path}: not a TensorFlow Lite flatbuffer"):
        read_tflite(path)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_a_truncated_file_is_refused_naming_it(every_operator_file, tmp_path, keep):
    data = every_operator_file.read_bytes()
    path = tmp_path / "truncated.tflite"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(TfliteError, match=rf"{path}: (damaged|.*the file is damaged|.*refers to)"):
        read_tflite(path)


def test_every_unsupported_operator_is_refused_at_once_naming_its_index_and_layer(tmp_path):
    inputs = tf.keras.Input((4,))
    hidden = tf.keras.layers.Dense(3)(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Lambda(lambda x: tf.math.floor(tf.abs(x)) + tf.math.floor(tf.abs(x + 1.0)))(hidden))
    path = tmp_path / "floor.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    names = [operator.name for operator in read_tflite(path).operators]
    with pytest.raises(TfliteError) as refusal:
        refuse_unread_operators(read_tflite(path))
    message = str(refusal.value)
    assert f"{names.count('ABS') + names.count('FLOOR')} operators of 2 kinds the toolchain does not read" in message, message
    abs_line, floor_line = (line for line in message.splitlines() if line.startswith("  - "))
    assert abs_line.startswith(f"  - ABS: {names.count('ABS')} operators, {names.index('ABS')} (") and "FLOOR" in floor_line, message
    assert "it reads ADD, AVERAGE_POOL_2D" in message and "CONV_2D" in message, message


def _elementwise_model() -> tf.keras.Model:
    """Float in and out (QUANTIZE, DEQUANTIZE), an explicit PAD, a per-channel MUL by a constant, the
    lookup-table functions, a CONCATENATION, a MEAN (global average pooling)."""
    tf.keras.utils.set_random_seed(5)
    layers = tf.keras.layers
    inputs = tf.keras.Input((9, 7, 4))
    x = layers.ZeroPadding2D(((1, 2), (0, 1)))(inputs)
    x = layers.Conv2D(6, 3, activation="relu")(x)
    scaled = layers.Lambda(lambda t: t * tf.constant([0.5, -1.5, 2.0, 0.25, 1.0, -0.75]))(x)
    gates = layers.Activation("sigmoid")(layers.Conv2D(6, 1)(x))
    x = layers.Multiply()([scaled, gates])
    x = layers.Concatenate()([layers.Activation("tanh")(x), x])
    x = layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, layers.Dense(5, activation="sigmoid")(x))


def test_float_io_pad_mul_lookup_tables_concatenation_and_mean_run_as_tflites_reference_kernels(tmp_path):
    rng = np.random.default_rng(7)
    samples = [rng.normal(0, 1, (1, 9, 7, 4)).astype(np.float32) for _ in range(16)]
    converter = tf.lite.TFLiteConverter.from_keras_model(_elementwise_model())
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([sample] for sample in samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    path = tmp_path / "elementwise.tflite"
    path.write_bytes(converter.convert())  # float input and output: QUANTIZE first, DEQUANTIZE last
    names = {operator.name for operator in read_tflite(path).operators}
    assert {"QUANTIZE", "DEQUANTIZE", "PAD", "MUL", "LOGISTIC", "TANH", "CONCATENATION", "MEAN"} <= names, names
    inputs = rng.normal(0, 2, (16, 9, 7, 4)).astype(np.float32)
    inputs[0] = 1e6  # saturates at the input's quantization
    _assert_every_tensor_equal(path, inputs)


def _fixed_point_and_resize_model() -> tf.keras.Model:
    """Hard-swish on a wide range (its relu-ish multiplier shifts left) and on a narrow one (right), leaky ReLU,
    and each resize with align_corners, with half-pixel centres, and at ratios that are not integers."""
    tf.keras.utils.set_random_seed(9)
    layers = tf.keras.layers
    inputs = tf.keras.Input((5, 6, 3))
    x = layers.Conv2D(4, 3, padding="same")(inputs)
    wide = layers.Activation("hard_swish")(x)
    narrow = layers.Activation("hard_swish")(layers.Lambda(lambda t: t * 0.02)(x))
    x = layers.Concatenate()([wide, narrow, layers.LeakyReLU(0.3)(x)])
    resized = [
        layers.Lambda(lambda t: tf.compat.v1.image.resize_bilinear(t, [9, 11], align_corners=True))(x),
        layers.Lambda(lambda t: tf.image.resize(t, [9, 11], method="bilinear"))(x),  # half-pixel centres
        layers.Lambda(lambda t: tf.compat.v1.image.resize_bilinear(t, [9, 11]))(x),
        layers.Lambda(lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, [9, 11], align_corners=True))(x),
        layers.Lambda(lambda t: tf.image.resize(t, [9, 11], method="nearest"))(x),
        layers.Lambda(lambda t: tf.compat.v1.image.resize_nearest_neighbor(t, [9, 11]))(x),
    ]
    return tf.keras.Model(inputs, layers.Concatenate()(resized))


def test_hard_swish_leaky_relu_and_resizes_run_as_tflites_reference_kernels(tmp_path):
    path = tmp_path / "fixed_point_and_resize.tflite"
    path.write_bytes(_convert(_fixed_point_and_resize_model(), (5, 6, 3)))
    names = [operator.name for operator in read_tflite(path).operators]
    assert names.count("HARD_SWISH") == 2 and names.count("RESIZE_BILINEAR") == 3 and names.count("RESIZE_NEAREST_NEIGHBOR") == 3, names
    assert "LEAKY_RELU" in names
    rng = np.random.default_rng(4)
    inputs = rng.integers(-128, 128, (32, 5, 6, 3)).astype(np.int8)
    inputs[0], inputs[1] = -128, 127
    _assert_every_tensor_equal(path, inputs)


def _naive_conv_sums(inputs, zero_point, weight, stride, pads):
    """int64 sums of weight x (input - zero point), taps outside the image skipped, one output at a time."""
    n, height, width, _ = inputs.shape
    outputs, kh, kw, _ = weight.shape
    top, bottom, left, right = pads
    out_h, out_w = (height + top + bottom - kh) // stride + 1, (width + left + right - kw) // stride + 1
    sums = np.zeros((n, out_h, out_w, outputs), np.int64)
    for oh in range(out_h):
        for ow in range(out_w):
            for i in range(kh):
                for j in range(kw):
                    y, x = oh * stride - top + i, ow * stride - left + j
                    if 0 <= y < height and 0 <= x < width:
                        sums[:, oh, ow] += (inputs[:, y, x].astype(np.int64) - zero_point) @ weight[:, i, j].astype(np.int64).T
    return sums


@pytest.mark.parametrize("channels, weight_high", [(8, 20), (600, 127)])  # partial sums below 2^24 (float32), and beyond (float64)
def test_the_blas_convolution_sums_are_the_integers_whichever_float_holds_them(channels, weight_high):
    rng = np.random.default_rng(channels)
    inputs = rng.integers(-128, 128, (3, 5, 6, channels)).astype(np.int8)
    inputs[0] = 127  # the largest |input - zero point|, 255
    weight = rng.choice([-weight_high, weight_high], (4, 3, 3, channels)).astype(np.int8)
    expected_dtype = np.float32 if channels == 8 else np.float64
    assert exact_dtype(weight, None) is expected_dtype
    identity = (np.full(4, 1 << 30), np.full(4, 1))  # x 1: the sums themselves, saturated to int8 only at the end
    sums = _naive_conv_sums(inputs, -128, weight, 2, (1, 1, 0, 1))
    got = conv_affine(inputs, -128, weight, None, *identity, 0, (-128, 127), (2, 2), (1, 1), (1, 1, 0, 1))
    assert np.array_equal(got, np.clip(sums, -128, 127))
    scaled_down = (np.full(4, 1 << 30), np.full(4, -19))  # x 2^-20: the large sums' high bits, by the numpy reference
    got = conv_affine(inputs, -128, weight, None, *scaled_down, 0, (-128, 127), (2, 2), (1, 1), (1, 1, 0, 1))
    assert np.array_equal(got, requantize(sums, *scaled_down, 0, -128, 127))


@pytest.mark.parametrize("kind, words", [
    ("uint8", r"tensor \d+ \(.*\) is UINT8; .*inference_input_type and inference_output_type tf.int8 \(tf.int16 in the 16x8 mode\)"),
])
def test_uint8_tensors_are_refused_naming_the_tensor_and_the_conversion_that_works(tmp_path, kind, words):
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([np.ones((1, 4), np.float32)] for _ in range(4))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.uint8
    path = tmp_path / f"{kind}.tflite"
    path.write_bytes(converter.convert())
    with pytest.raises(TfliteError, match=rf"{kind}\.tflite: " + words):
        read_tflite(path)



def test_a_tensorflow_op_kept_by_the_converter_is_refused_with_what_to_do(tmp_path):
    """An exact GELU's Erf, which TFLite's builtins lack, kept as a Flex op (as onnx2tf writes an ONNX file of opset 17):
    named, with the export that gives TFLite's GELU instead."""
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Lambda(lambda x: tf.math.erf(x))(tf.keras.layers.Dense(3)(inputs)))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    (path := tmp_path / "erf.tflite").write_bytes(converter.convert())
    with pytest.raises(TfliteError) as refusal:
        refuse_unread_operators(read_tflite(path))
    (line,) = (line for line in str(refusal.value).splitlines() if line.startswith("  - "))
    assert line.startswith("  - custom operator 'FlexErf': 1 operator, ") and "export the ONNX file at opset 20" in line, line
