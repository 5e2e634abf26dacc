"""target.scheme.runtime: the tflite_int8 scheme's integers as each deployment runtime computes them (core/quantize/runtimes.py),
each operator driven to its arithmetic's extremes in one-operator .tflite files (tests/tflite_builder.py) and run three
ways: by the scheme's kernels under a runtime (core/ir/tflite_interpreter.py), by LiteRT's reference kernels and by
TensorFlow Lite for Microcontrollers' interpreter (the tflite-micro package). Each runtime's kernels must give its
interpreter's every byte; FULLY_CONNECTED, LOGISTIC and TANH are where the two interpreters differ, and the tests show
they do, so a runtime that computed the other's bytes would fail here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import MODELS
from core.frontend.tflite import TfliteError, read_tflite
from core.ir.tflite_dialect import padding
from core.ir.tflite_interpreter import run_int8
from core.quantize.runtimes import RUNTIMES, runtime_named, runtimes_of
from core.quantize.schemes import TfliteRuntime
from core.quantize.tflite_reference import RUNNERS, runner_of
from tflite_builder import Tensor, model_bytes, one_operator_model

TFLITE_RUNTIMES = runtimes_of("tflite_int8")
EXAMPLES = settings(max_examples=20, deadline=None, derandomize=True)


def _run_everywhere(tmp_path, data: bytes, inputs: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """runtime -> (the scheme's kernels under it, its interpreter) on the model's output."""
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    model = read_tflite(path)
    output = model.outputs[0]
    return {name: (run_int8(model, inputs, RUNTIMES[name])[output], runner_of(name, path).tensors(inputs)[output].reshape(-1, *model.tensor(output).shape[1:]))
            for name in TFLITE_RUNTIMES}


def _assert_each_runtime_exact(results) -> None:
    for name, (ours, theirs) in results.items():
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        differing = np.flatnonzero(ours.ravel() != theirs.ravel())
        assert differing.size == 0, f"{name}: {differing.size} of {ours.size} values differ (first at {differing[0]})"


def _int8_batch(rng, shape, count: int) -> np.ndarray:
    """`count` inputs of `shape`: the two extremes first, then uniform over int8."""
    batch = rng.integers(-128, 128, (count, *shape)).astype(np.int8)
    batch[0], batch[1] = -128, 127
    return batch


scales = st.floats(1e-4, 4.0).map(lambda value: float(np.float32(value)))
zero_points = st.sampled_from([-128, 127, 0]) | st.integers(-128, 127)
activations = st.sampled_from([0, 1, 3])  # NONE, RELU, RELU6
# the requantization multiplier input_scale x weight_scale / output_scale: shifts far right to left (multipliers > 1)
multipliers = st.floats(-24.0, 2.5).map(lambda exponent: 2.0**exponent)


def _weights(rng, shape, channels_axis: int, channels: int, input_scale: float, multiplier: float, output_scale: float, reduction: int):
    """Per-channel int8 weights in [-127, 127], their scales around multiplier x output_scale / input_scale, and an
    int32 bias at input scale x weight scale; channel 0's bias as large as the kernels' contract allows: its sums
    within int32 and, rescaled, within int32 too (beyond, TFLite's C code overflows a signed int: undefined)."""
    weight = rng.integers(-127, 128, shape).astype(np.int8)
    weight_scales = (multiplier * output_scale / input_scale) * rng.uniform(0.5, 2.0, channels)
    bias = rng.integers(-(2**24), 2**24, channels).astype(np.int64)
    rescaled_limit = (2**31 - 256) / (input_scale * weight_scales[0] / output_scale)
    bias[0] = max(int(min(2**31 - 1, rescaled_limit)) - 255 * 127 * reduction, 0)
    return Tensor(shape, np.int8, list(weight_scales), 0, channels_axis, weight), Tensor((channels,), np.int32, list(input_scale * weight_scales), 0, 0, bias.astype(np.int32))


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=scales, input_zero=zero_points, output_zero=zero_points, multiplier=multipliers,
       activation=activations)
def test_fully_connected_rounds_as_each_runtime_does(tmp_path_factory, seed, input_scale, input_zero, output_zero, multiplier, activation):
    rng = np.random.default_rng(seed)
    depth, outputs, output_scale = int(rng.integers(1, 300)), int(rng.integers(1, 24)), 0.05
    weight, bias = _weights(rng, (outputs, depth), 0, outputs, input_scale, multiplier, output_scale, depth)
    data = one_operator_model("FULLY_CONNECTED", [Tensor((1, depth), scale=input_scale, zero_point=input_zero), weight, bias],
                              Tensor((1, outputs), scale=output_scale, zero_point=output_zero),
                              ("FullyConnectedOptions", {"fusedActivationFunction": activation}))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("fc"), data, _int8_batch(rng, (depth,), 48)))


def test_the_runtimes_fully_connected_layers_differ_where_the_issue_found_them(tmp_path):
    """MLCommons' anomaly-detection autoencoder is FULLY_CONNECTED only: LiteRT's reference kernels and TFLM disagree on
    its outputs, and each runtime's kernels give its own interpreter's bytes."""
    path = MODELS / "mlperf_tiny_ad" / "ad01_int8.tflite"
    if not path.exists():
        pytest.skip(f"{path} is missing: the shared test data are not beside the checkout")
    inputs = _int8_batch(np.random.default_rng(0), (640,), 64)
    results = _run_everywhere(tmp_path, path.read_bytes(), inputs)
    _assert_each_runtime_exact(results)
    assert np.count_nonzero(results["litert_reference"][1] != results["tflm"][1]) > 0


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=scales, input_zero=zero_points, output_zero=zero_points, multiplier=multipliers,
       activation=activations, depthwise=st.booleans(), stride=st.sampled_from([1, 2]), same=st.booleans())
def test_convolutions_as_each_runtime_computes_them(tmp_path_factory, seed, input_scale, input_zero, output_zero, multiplier, activation,
                                                     depthwise, stride, same):
    rng = np.random.default_rng(seed)
    height, width, channels, kernel = int(rng.integers(3, 8)), int(rng.integers(3, 8)), int(rng.integers(1, 6)), (3, int(rng.integers(1, 4)))
    out_h, out_w = (padding(size, k, stride, 1, same)[0] for size, k in zip((height, width), kernel))
    multiplier_of_channel = int(rng.integers(1, 3)) if depthwise else 1
    outputs = channels * multiplier_of_channel if depthwise else int(rng.integers(1, 9))
    output_scale = 0.05
    if depthwise:
        weight, bias = _weights(rng, (1, *kernel, outputs), 3, outputs, input_scale, multiplier, output_scale, kernel[0] * kernel[1])
        operator, options = "DEPTHWISE_CONV_2D", ("DepthwiseConv2DOptions", {"depthMultiplier": multiplier_of_channel})
    else:
        weight, bias = _weights(rng, (outputs, *kernel, channels), 0, outputs, input_scale, multiplier, output_scale,
                                kernel[0] * kernel[1] * channels)
        operator, options = "CONV_2D", ("Conv2DOptions", {})
    options[1].update(padding=0 if same else 1, strideH=stride, strideW=stride, dilationHFactor=1, dilationWFactor=1,
                      fusedActivationFunction=activation)
    data = one_operator_model(operator, [Tensor((1, height, width, channels), scale=input_scale, zero_point=input_zero), weight, bias],
                              Tensor((1, out_h, out_w, outputs), scale=output_scale, zero_point=output_zero), options)
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("conv"), data, _int8_batch(rng, (height, width, channels), 16)))


@EXAMPLES
@given(seed=st.integers(0, 2**16), first=scales, second=scales, output=scales, zeros=st.tuples(zero_points, zero_points, zero_points),
       activation=activations, operator=st.sampled_from(["ADD", "MUL"]))
def test_add_and_mul_as_each_runtime_computes_them(tmp_path_factory, seed, first, second, output, zeros, activation, operator):
    """The model's input, and the same values requantized to another scale and zero point (an int8 QUANTIZE), added or
    multiplied: two operands at two quantizations."""
    rng = np.random.default_rng(seed)
    shape = (1, 3, 4, int(rng.integers(1, 9)))
    options = (f"{operator.title()}Options", {"fusedActivationFunction": activation})
    data = model_bytes([Tensor(shape, scale=first, zero_point=zeros[0]), Tensor(shape, scale=second, zero_point=zeros[1]),
                        Tensor(shape, scale=output, zero_point=zeros[2])],
                       [("QUANTIZE", [0], 1, None), (operator, [0, 1], 2, options)], [0], [2])
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp(operator.lower()), data, _int8_batch(rng, shape[1:], 24)))


@EXAMPLES
@given(seed=st.integers(0, 2**16), scale=scales, zero=zero_points, average=st.booleans(), same=st.booleans(),
       window=st.sampled_from([(2, 2), (3, 3), (2, 3), (4, 4)]), stride=st.sampled_from([1, 2]), activation=activations)
def test_pools_as_each_runtime_computes_them(tmp_path_factory, seed, scale, zero, average, same, window, stride, activation):
    rng = np.random.default_rng(seed)
    height, width, channels = int(rng.integers(4, 9)), int(rng.integers(4, 9)), int(rng.integers(1, 5))
    out_h, out_w = (padding(size, k, stride, 1, same)[0] for size, k in zip((height, width), window))
    data = one_operator_model("AVERAGE_POOL_2D" if average else "MAX_POOL_2D",
                              [Tensor((1, height, width, channels), scale=scale, zero_point=zero)],
                              Tensor((1, out_h, out_w, channels), scale=scale, zero_point=zero),
                              ("Pool2DOptions", {"padding": 0 if same else 1, "strideH": stride, "strideW": stride,
                                                 "filterHeight": window[0], "filterWidth": window[1], "fusedActivationFunction": activation}))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("pool"), data, _int8_batch(rng, (height, width, channels), 16)))


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=scales, output_scale=scales, zeros=st.tuples(zero_points, zero_points))
def test_mean_as_each_runtime_computes_it(tmp_path_factory, seed, input_scale, output_scale, zeros):
    rng = np.random.default_rng(seed)
    height, width, channels = int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 6))
    axis = Tensor((2,), np.int32, data=np.array([1, 2], np.int32))
    data = one_operator_model("MEAN", [Tensor((1, height, width, channels), scale=input_scale, zero_point=zeros[0]), axis],
                              Tensor((1, 1, 1, channels), scale=output_scale, zero_point=zeros[1]), ("ReducerOptions", {"keepDims": True}))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("mean"), data, _int8_batch(rng, (height, width, channels), 16)))


@EXAMPLES
@given(seed=st.integers(0, 2**16), input_scale=scales, output_scale=scales, zeros=st.tuples(zero_points, zero_points))
def test_a_sum_of_a_1x1_map_that_requantizes_is_tflms_bytes_and_refused_on_litert(tmp_path_factory, seed, input_scale, output_scale, zeros):
    """litert-torch's global average pool of a 1x1 map is a SUM; quantized apart from its input, TFLM's kernel
    requantizes it and LiteRT's leaves its output unwritten, so the reader refuses it there naming tflm."""
    rng = np.random.default_rng(seed)
    channels = int(rng.integers(1, 40))
    source = Tensor((1, 1, 1, channels), scale=input_scale, zero_point=zeros[0])
    output = Tensor((1, 1, 1, channels), scale=output_scale, zero_point=zeros[1])
    if (input_scale, zeros[0]) == (output_scale, zeros[1]):
        output = Tensor((1, 1, 1, channels), scale=output_scale * 2, zero_point=zeros[1])
    data = one_operator_model("SUM", [source, Tensor((2,), np.int32, data=np.array([1, 2], np.int32))], output,
                              ("ReducerOptions", {"keepDims": True}))
    path = tmp_path_factory.mktemp("sum") / "sum.tflite"
    path.write_bytes(data)
    model, inputs = read_tflite(path), _int8_batch(rng, (1, 1, channels), 16)
    ours = run_int8(model, inputs, RUNTIMES["tflm"])[model.outputs[0]]
    theirs = runner_of("tflm", path).tensors(inputs)[model.outputs[0]].reshape(ours.shape)
    assert np.array_equal(ours, theirs)
    with pytest.raises(TfliteError, match="operator 0 \\(SUM\\).*set target.scheme.runtime to tflm"):
        run_int8(model, inputs, RUNTIMES["litert_reference"])


def test_a_grouped_conv_is_each_runtimes_bytes(tmp_path):
    """A CONV_2D whose filter has one input channel (groups = input channels, two outputs each) is read as the depthwise
    convolution it is; one of two channels per group (refused at read before) as the conv of its block-diagonal filter:
    both give each runtime's bytes."""
    rng = np.random.default_rng(5)
    source, output = Tensor((1, 5, 4, 3), scale=0.05, zero_point=3), Tensor((1, 5, 4, 6), scale=0.1, zero_point=-7)
    weight, bias = _weights(rng, (6, 3, 3, 1), 0, 6, 0.05, 2.0**-6, 0.1, 9)
    options = ("Conv2DOptions", {"padding": 0, "strideW": 1, "strideH": 1, "fusedActivationFunction": 0})
    data = one_operator_model("CONV_2D", [source, weight, bias], output, options)
    _assert_each_runtime_exact(_run_everywhere(tmp_path, data, _int8_batch(rng, (5, 4, 3), 8)))
    wider = Tensor((1, 5, 4, 4), scale=0.05, zero_point=3)
    weight, bias = _weights(rng, (6, 3, 3, 2), 0, 6, 0.05, 2.0**-6, 0.1, 18)
    (groups := tmp_path / "groups").mkdir()
    _assert_each_runtime_exact(_run_everywhere(groups, one_operator_model("CONV_2D", [wider, weight, bias], output, options),
                                               _int8_batch(rng, (5, 4, 4), 8)))


# the softmax of ResNet-8 (MLPerf Tiny .h5) calibrated by minmax without equalization: a float table was 1 LSB off here
RESNET8_MINMAX_ROW = np.array([10, -48, -60, -17, -28, -17, -7, -27, -45, -45], np.int8)


@settings(max_examples=40, deadline=None, derandomize=True)
@example(input_scale=0.18032637, zero=19, beta=1.0, depth=10, seed=0)
@given(input_scale=st.floats(1e-4, 64.0).map(lambda value: float(np.float32(value))), zero=zero_points,
       beta=st.sampled_from([1.0, 0.5, 2.0, 1.7]), depth=st.integers(2, 40), seed=st.integers(0, 2**16))
def test_softmax_as_each_runtime_computes_it(tmp_path_factory, input_scale, zero, beta, depth, seed):
    """Over the input scales and zero points calibration methods give a classifier's logits (and far beyond), rows of
    every kind: flat, one certain class, ties, every value apart."""
    rows = _int8_batch(np.random.default_rng(seed), (depth,), 64)
    rows[2], rows[3, 0] = 0, 127
    if depth == len(RESNET8_MINMAX_ROW):
        rows[4] = RESNET8_MINMAX_ROW
    data = one_operator_model("SOFTMAX", [Tensor((1, depth), scale=input_scale, zero_point=zero)],
                              Tensor((1, depth), scale=1 / 256, zero_point=-128), ("SoftmaxOptions", {"beta": beta}))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("softmax"), data, rows))


# --- the functions of one input: every int8 value at once ----------------------------------------------
EVERY_INT8 = np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(1, 256)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(input_scale=st.floats(1e-4, 20.0).map(lambda value: float(np.float32(value))), zero=zero_points,
       function=st.sampled_from(["LOGISTIC", "TANH"]))
def test_logistic_and_tanh_as_each_runtime_computes_them_on_every_input(tmp_path_factory, input_scale, zero, function):
    output = (1 / 256, -128) if function == "LOGISTIC" else (1 / 128, 0)
    data = one_operator_model(function, [Tensor((1, 256), scale=input_scale, zero_point=zero)], Tensor((1, 256), scale=output[0], zero_point=output[1]))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp(function.lower()), data, EVERY_INT8))


def test_logistic_and_tanh_differ_between_the_runtimes_somewhere(tmp_path):
    """LiteRT's float tables and TFLM's fixed point are 1 LSB apart on a few inputs of some scales: the runtimes are two."""
    differing = 0
    for scale in np.geomspace(0.01, 8.0, 60):
        for function, output in (("LOGISTIC", (1 / 256, -128)), ("TANH", (1 / 128, 0))):
            data = one_operator_model(function, [Tensor((1, 256), scale=float(scale), zero_point=3)], Tensor((1, 256), scale=output[0], zero_point=output[1]))
            results = _run_everywhere(tmp_path, data, EVERY_INT8)
            differing += int(np.count_nonzero(results["litert_reference"][1] != results["tflm"][1]))
    assert differing > 0


# --- the runtimes as configuration ---------------------------------------------------------------------
def test_every_runtime_has_an_interpreter_and_a_config_choice():
    assert set(RUNNERS) == set(TFLITE_RUNTIMES)
    assert {choice.value for choice in TfliteRuntime} == set(TFLITE_RUNTIMES)


def test_a_runtime_the_scheme_does_not_run_on_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"target.scheme.runtime=tflm: the pow2_symmetric scheme's integers are made exact against tf2ir"):
        runtime_named("tflm", "tf2ir", "pow2_symmetric")
    with pytest.raises(ValueError, match=r"litert_reference or tflm"):
        runtime_named("tf2ir", "tflite_int8", "tflite_int8")
    assert runtime_named(None, "tflite_int8", "tflite_int8").name == "litert_reference"


@settings(max_examples=40, deadline=None, derandomize=True)
@given(input_scale=scales, output_scale=scales, zeros=st.tuples(zero_points, zero_points),
       function=st.sampled_from(["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"]), same=st.booleans())
def test_the_relus_as_each_runtime_computes_them_on_every_input(tmp_path_factory, input_scale, output_scale, zeros, function, same):
    """A requantization to the output's scale and a clamp at the bounds there; TFLM's RELU6 clamps the input's integers
    as they are, so at two quantizations it is refused on TFLM, as are the two ReLUs TFLM has no kernel for."""
    output = (input_scale, zeros[0]) if same else (output_scale, zeros[1])
    data = one_operator_model(function, [Tensor((1, 256), scale=input_scale, zero_point=zeros[0])], Tensor((1, 256), scale=output[0], zero_point=output[1]))
    directory = tmp_path_factory.mktemp(function.lower())
    (directory / "model.tflite").write_bytes(data)
    model = read_tflite(directory / "model.tflite")
    if function in RUNTIMES["tflm"].missing_operators:  # TFLM's interpreter refuses the file: so does the IR on it
        with pytest.raises(TfliteError, match=f"{function}.*tflm has no kernel for it.*litert_reference"):
            run_int8(model, EVERY_INT8, RUNTIMES["tflm"])
        ours, theirs = run_int8(model, EVERY_INT8), runner_of("litert_reference", directory / "model.tflite").tensors(EVERY_INT8)
        assert np.array_equal(ours[model.outputs[0]], theirs[model.outputs[0]])
        return
    if function in RUNTIMES["tflm"].relus_without_requantization and (input_scale, zeros[0]) != output:
        with pytest.raises(TfliteError, match=f"{function}.*quantized differently.*tflm"):
            run_int8(model, EVERY_INT8, RUNTIMES["tflm"])
        return
    _assert_each_runtime_exact(_run_everywhere(directory, data, EVERY_INT8))


@settings(max_examples=20, deadline=None, derandomize=True)
@given(scale=scales, zero=zero_points, bound=st.integers(-128, 127), function=st.sampled_from(["MINIMUM", "MAXIMUM"]))
def test_minimum_and_maximum_with_a_constant_as_each_runtime_computes_them(tmp_path_factory, scale, zero, bound, function):
    constant = Tensor((), scale=scale, zero_point=zero, data=np.array(bound, np.int8))
    data = one_operator_model(function, [Tensor((1, 256), scale=scale, zero_point=zero), constant], Tensor((1, 256), scale=scale, zero_point=zero))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp(function.lower()), data, EVERY_INT8))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(input_scale=st.floats(1e-3, 0.2).map(lambda value: float(np.float32(value))), output_scale=st.floats(1e-3, 0.2),
       zeros=st.tuples(zero_points, zero_points), approximate=st.booleans())
def test_gelu_exact_and_tanh_as_each_runtime_computes_it_on_every_input(tmp_path_factory, input_scale, output_scale, zeros, approximate):
    """GELU's Prepare populates a 256-entry table of GeluTransform (erf) or GeluTransformApproximate (tanh) at the
    tensors' scales; an interpreter without a GELU kernel refuses the file, and so does the IR on that runtime."""
    data = one_operator_model("GELU", [Tensor((1, 256), scale=input_scale, zero_point=zeros[0])],
                              Tensor((1, 256), scale=float(np.float32(output_scale)), zero_point=zeros[1]),
                              ("GeluOptions", {"approximate": approximate}))
    directory = tmp_path_factory.mktemp("gelu")
    (directory / "model.tflite").write_bytes(data)
    model = read_tflite(directory / "model.tflite")
    results = {}
    for name in TFLITE_RUNTIMES:
        if "GELU" in RUNTIMES[name].missing_operators:
            with pytest.raises(TfliteError, match=f"GELU.*{name} has no kernel for it"):
                run_int8(model, EVERY_INT8, RUNTIMES[name])
            continue
        output = model.outputs[0]
        results[name] = (run_int8(model, EVERY_INT8, RUNTIMES[name])[output], runner_of(name, directory / "model.tflite").tensors(EVERY_INT8)[output])
    assert "litert_reference" in results
    _assert_each_runtime_exact(results)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(input_scale=scales, output_scale=scales, zeros=st.tuples(zero_points, zero_points))
def test_rsqrt_as_each_runtime_computes_it_on_every_input_from_zero(tmp_path_factory, input_scale, output_scale, zeros):
    """RSQRT (a LayerNormalization's inverse root): GetInvSqrtQuantizedMultiplierExp's Newton-Raphson in fixed point, then two
    requantizations; the input's zero point gives 127. LiteRT refuses an input below the zero point (a negative real), so
    every input from the zero point up."""
    data = one_operator_model("RSQRT", [Tensor((1, 256), scale=input_scale, zero_point=zeros[0])],
                              Tensor((1, 256), scale=output_scale, zero_point=zeros[1]))
    _assert_each_runtime_exact(_run_everywhere(tmp_path_factory.mktemp("rsqrt"), data, np.maximum(EVERY_INT8, np.int8(zeros[0]))))


def test_mul_requantizes_at_each_runtimes_multiplier(tmp_path):
    """LiteRT's mul.cc multiplies the float32 scales in float32, TFLite Micro's in double: here the two multipliers differ
    in their low bits and the products +-2806 (46 x 61) sit on a rounding boundary between them (a LayerNormalization's
    x times its inverse root, found by the model benchmark)."""
    constant = Tensor((1,), scale=0.006487866397947073, zero_point=-128, data=np.array([-128 + 61], np.int8))
    data = one_operator_model("MUL", [Tensor((1, 256), scale=0.036562900990247726, zero_point=-35), constant],
                              Tensor((1, 256), scale=0.02512536570429802, zero_point=-23))
    _assert_each_runtime_exact(_run_everywhere(tmp_path, data, EVERY_INT8))
