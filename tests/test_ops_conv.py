"""conv / dwconv: IR fields (seed 000, 4.2), int8 parameters, and the integer kernel the
simulator runs, each checked against an independent path: TensorFlow's float convolutions,
TensorFlow's FakeQuant, the reference IR of the original tool, and the annotated graph."""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import MBV1_GRAPH, MODELS, ir_record
from core.frontend.graph import Graph, GraphError
from core.ir.activations import ACTIVATIONS
from core.ir.fixedpoint import FLOAT32_EXACT_INT, GEMM_MAX_K, INT8_PRODUCT_MAX
from core.quantize.integers import fake_quant_ints
from core.ir.layers import group_layers
from core.ir.op import IrContext
from core.ir.ops import OPS
from core.ir.ops.conv import requantize as requantize_module
from core.ir.ops.conv.kernel import conv_accumulator, conv_kernel, dwconv_accumulator
from core.ir.ops.conv.requantize import requantize
from core.ir.records import IrError
from core.quantize.schemes import pow2_range
from core.quantize.table import CalibrationTable, TensorEntry

MBV1_DIR = MODELS / "mobilenet_v1_0.5_128_cifar10"
MBV1_END = ["MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"]
MBV1_PREPROCESS = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}
NOT_FIELDS = ("name", "operation", "previous_layer", "next_layer")
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- building one-layer graphs ---------------------------------------------------------------------


def _graph(build, input_shape) -> Graph:
    """A tf.compat.v1 graph from build(x) -> output tensor, imported as the pipeline does."""
    import tensorflow as tf

    with tf.Graph().as_default() as tf_graph:
        x = tf.compat.v1.placeholder(tf.float32, [None, *input_shape], name="x")
        output = build(x)
    graph = Graph.from_graph_def(tf_graph.as_graph_def(), "x:0", [output.name])
    graph.infer_shapes()
    return graph


def _context(graph: Graph, scales: dict[str, int]) -> tuple[IrContext, object]:
    """The graph's only layer and an IrContext whose table gives it `scales`
    (input, weight, bias, output log2scales)."""
    layer_graph = group_layers(graph)
    (layer,) = layer_graph.layers
    entries = {"x:0": scales["input"], layer.output: scales["output"], f"{layer.weight}:0": scales["weight"]}
    if layer.bias is not None:
        entries[f"{layer.bias}:0"] = scales["bias"]
    tensors = {name: TensorEntry("activation", "test", 1.0, pow2_range(value, 8), log2scale=value)
               for name, value in entries.items()}
    table = CalibrationTable("test", "tf2ir", 8, tensors)
    return IrContext(layer_graph, table), layer


def _float_weights(rng, shape, log2scale):
    """Floats inside the int8 range of log2scale (as a calibrated weight is)."""
    return (rng.uniform(-128, 127, shape) * 2.0**-log2scale).astype(np.float32)


def _conv_block(op, form, kernel, stride, dilation, padding, channels, has_bias, activation, scales, rng):
    """build(x) for one conv/dwconv layer in one of TF's spellings."""
    import tensorflow as tf

    cin, cout = channels

    def build(x):
        if op == "conv":
            w = tf.constant(_float_weights(rng, (kernel, kernel, cin, cout), scales["weight"]), name="w")
            if form == "atrous":  # TF-slim's SpaceToBatchND -> Conv2D -> BatchToSpaceND
                y = tf.compat.v1.nn.atrous_conv2d(x, w, dilation, padding, name="conv")
            else:
                y = tf.nn.conv2d(x, w, stride, padding, dilations=dilation, name="conv")
        else:
            w = tf.constant(_float_weights(rng, (kernel, kernel, cin, 1), scales["weight"]), name="w")
            if form == "atrous":
                y = tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], padding, dilations=[dilation, dilation], name="dw")
            else:  # the op itself, with a dilations attribute
                y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=[1, stride, stride, 1], padding=padding,
                                                     dilations=[1, dilation, dilation, 1], name="dw")
        if has_bias:
            y = tf.nn.bias_add(y, tf.constant(_float_weights(rng, (y.shape[-1],), scales["bias"]), name="b"), name="bias")
        if activation == "Relu6":
            y = tf.nn.relu6(y, name="relu6")
        elif activation == "Relu":
            y = tf.nn.relu(y, name="relu")
        return y

    return build


def _tf_reference(op, x_int, params, fields, padding):
    """The spec's arithmetic, independently: TensorFlow's float64 convolution of the integers
    (exact at these sizes) with TF's own SAME/VALID rule, + bias * 2^bias_shift, then in real
    numbers: Relu6 clamp, FakeQuant's round half up at the output scale, saturation."""
    import tensorflow as tf

    stride = [fields["stride"]["height"], fields["stride"]["width"]]
    dilation = [fields["dilations"]["height"], fields["dilations"]["width"]]
    x = tf.constant(x_int.astype(np.float64))
    if op == "conv":
        acc = tf.nn.conv2d(x, params["weight"].astype(np.float64), stride, padding, dilations=dilation).numpy()
    else:
        w = params["weight"].astype(np.float64)[..., np.newaxis]
        acc = tf.nn.depthwise_conv2d(x, w, [1, *stride, 1], padding, dilations=dilation).numpy()
    if fields["load_bias"]:
        acc = acc + params["bias"].astype(np.float64) * 2.0 ** fields["bias_shift"]
    real = acc * 2.0 ** -(fields["input_log2scale"] + fields["weight_log2scale"])
    if fields["activation_type"] == "Relu6":
        real = np.clip(real, 0.0, 6.0)
    elif fields["activation_type"] == "Relu":
        real = np.maximum(real, 0.0)
    return np.clip(np.floor(real * 2.0 ** fields["output_log2scale"] + 0.5), -128, 127).astype(np.int8)


@st.composite
def conv_cases(draw, op):
    form = draw(st.sampled_from(["plain", "atrous"]))
    dilation = draw(st.sampled_from([1, 2])) if form == "plain" else 2
    stride = draw(st.sampled_from([1, 2])) if dilation == 1 else 1
    kernel = draw(st.integers(1, 3))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    height, width = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    effective = (kernel - 1) * dilation + 1
    assume(padding == "SAME" or (height >= effective and width >= effective))
    cin = draw(st.integers(1, 8))
    cout = draw(st.integers(1, 8)) if op == "conv" else cin
    a, w = draw(st.integers(-2, 9)), draw(st.integers(-2, 9))
    scales = {"input": a, "weight": w, "output": a + w - draw(st.integers(0, 14)), "bias": a + w - draw(st.integers(0, 18))}
    return {
        "form": form, "dilation": dilation, "stride": stride, "kernel": kernel, "padding": padding,
        "size": (height, width), "channels": (cin, cout), "scales": scales,
        "has_bias": draw(st.booleans()), "activation": draw(st.sampled_from(["Relu6", "Relu", "None"])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def _run_case(op, case):
    rng = np.random.default_rng(case["seed"])
    build = _conv_block(op, case["form"], case["kernel"], case["stride"], case["dilation"], case["padding"],
                        case["channels"], case["has_bias"], case["activation"], case["scales"], rng)
    graph = _graph(build, (*case["size"], case["channels"][0]))
    ctx, layer = _context(graph, case["scales"])
    record, params = OPS[op].describe(layer, ctx), OPS[op].params(layer, ctx)
    x = rng.integers(-128, 128, (3, *case["size"], case["channels"][0]), dtype=np.int8)
    return record, params, x


# --- (a) the kernel against TensorFlow's float convolution --------------------------------------------


@pytest.mark.parametrize("arithmetic", ["float32", "int32"])
@pytest.mark.parametrize("op", ["conv", "dwconv"])
@FAST
@given(data=st.data())
def test_kernel_is_bit_identical_to_tf_float_conv_with_the_specs_rounding(op, arithmetic, data):
    """Both of the kernels' exact arithmetics (float32 where |sum| + |offset| <= 2^24, else
    int32), against TF's float64 convolution and the spec's rounding in real numbers."""
    case = data.draw(conv_cases(op))
    record, params, x = _run_case(op, case)
    fields = record.to_json()
    with mock.patch.object(requantize_module, "FLOAT32_ACCUMULATION", arithmetic == "float32"):
        out = OPS[op].kernel(record, params, [x])
    assert out.dtype == np.int8
    expected = _tf_reference(op, x, params, fields, case["padding"])
    np.testing.assert_array_equal(out, expected)
    assert fields["dilations"] == {"height": case["dilation"], "width": case["dilation"]}
    assert fields["load_bias"] is case["has_bias"] and fields["activation_type"] == case["activation"]


@pytest.mark.parametrize("op", ["conv", "dwconv"])
@FAST
@given(data=st.data(), extreme=st.booleans())
def test_the_fast_kernel_computes_the_reference_kernels_integers(op, data, extreme):
    """The simulator's compiled / im2col-free kernels against the reference, on random layers
    and on inputs at the int8 extremes (the accumulator bound's worst case)."""
    case = data.draw(conv_cases(op))
    record, params, x = _run_case(op, case)
    if extreme:
        x = np.where(x >= 0, 127, -128).astype(np.int8)
    np.testing.assert_array_equal(OPS[op].fast_kernel(record, params, [x]), OPS[op].kernel(record, params, [x]))


def _fields(size, cin, cout, kernel, *, shift, bias_shift, load_bias, activation, output_log2scale, stride=1, pad=0):
    out = (size + 2 * pad - kernel) // stride + 1
    return {
        "activation_type": activation, "input_log2scale": 0, "weight_log2scale": shift + output_log2scale,
        "bias_log2scale": 0, "output_log2scale": output_log2scale, "output_shift": shift, "bias_shift": bias_shift,
        "load_bias": load_bias, "input_channel_num": cin, "output_channel_num": cout,
        "input_size": {"height": size, "width": size}, "padding": {"top": pad, "bottom": pad, "left": pad, "right": pad},
        "stride": {"height": stride, "width": stride}, "dilations": {"height": 1, "width": 1},
        "kernel_size": {"height": kernel, "width": kernel}, "output_size": {"height": out, "width": out},
    }


def test_the_float32_gemm_is_exact_beyond_its_chunk_limit():
    """The worst case: every input and weight -128 (each product 2^14), with a reduction of
    K = 3 * 3 * 130 = 1170 > GEMM_MAX_K, and one product made odd so that the exact sum is not a
    float32 (odd and > 2^24): only the chunked GEMM gets it right."""
    assert GEMM_MAX_K * INT8_PRODUCT_MAX <= FLOAT32_EXACT_INT and GEMM_MAX_K == 1024
    x = np.full((2, 5, 5, 130), -128, np.int8)
    w = np.full((3, 3, 130, 4), -128, np.int8)
    x[0, 1, 1, 7], w[1, 1, 7, 1] = -127, -127  # 127 * 127 is odd
    reduction = 3 * 3 * 130
    assert reduction > GEMM_MAX_K and reduction * INT8_PRODUCT_MAX > FLOAT32_EXACT_INT
    acc = conv_accumulator(x, w, [0, 0, 0, 0], [1, 1], [1, 1], np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), (3, 3), axis=(1, 2))  # N, OH, OW, C, KH, KW
    expected = np.einsum("nhwcij,ijco->nhwo", windows, w.astype(np.int64))
    np.testing.assert_array_equal(acc, expected)
    assert expected[0, 0, 0, 1] % 2 == 1 and expected.max() > FLOAT32_EXACT_INT
    naive = x[:, 0:3, 0:3, :].reshape(2, -1).astype(np.float32) @ w.reshape(-1, 4).astype(np.float32)
    assert naive[0, 1] != expected[0, 0, 0, 1]  # one float32 GEMM over all of K is not exact here
    # through the kernel: the same sums, requantized (int32 accumulator: 1170 * 2^14 < 2^31)
    fields = _fields(5, 130, 4, 3, shift=18, bias_shift=0, load_bias=False, activation="None", output_log2scale=0)
    out = conv_kernel(ir_record("conv", fields), {"weight": w}, [x])
    np.testing.assert_array_equal(out, np.clip(np.floor(expected / 2.0**18 + 0.5), -128, 127).astype(np.int8))


def test_depthwise_accumulator_worst_case_is_exact():
    x = np.full((2, 6, 6, 3), -128, np.int8)
    w = np.full((5, 5, 3), -128, np.int8)
    acc = dwconv_accumulator(x, w, [2, 2, 2, 2], [1, 1], [1, 1])
    assert acc.dtype == np.int32 and acc[0, 2, 2, 0] == 25 * INT8_PRODUCT_MAX and acc[0, 0, 0, 0] == 9 * INT8_PRODUCT_MAX


def test_rounding_is_half_up_and_relu6_clamps_at_the_output_scale():
    acc = np.array([[-6, -5, -3, -2, 2, 3, 5, 6, 10**6]], np.int64)[..., np.newaxis]  # [1, 9, 1]
    # x / 4: -1.5 -> -1, -1.25 -> -1, -0.75 -> -1, -0.5 -> 0, 0.5 -> 1, 0.75 -> 1, 1.25 -> 1, 1.5 -> 2, saturated
    assert requantize(acc, None, output_shift=2).ravel().tolist() == [-1, -1, -1, 0, 1, 1, 1, 2, 127]
    relu6 = ACTIVATIONS["Relu6"].clamp(-2)  # 6 real = 1.5 steps -> clamp at 2
    assert relu6 == (0, 2)
    assert requantize(acc, None, output_shift=2, clamp=relu6).ravel().tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2]
    assert requantize(np.zeros((1, 1, 1), np.int64), np.array([-1], np.int8), output_shift=2, bias_shift=3).item() == -2  # -8 / 4


def test_an_accumulator_beyond_int32_is_refused():
    fields = _fields(1, 1, 1, 1, shift=0, bias_shift=25, load_bias=True, activation="None", output_log2scale=0)
    with pytest.raises(OverflowError, match="int32"):
        conv_kernel(ir_record("conv", fields), {"weight": np.full((1, 1, 1, 1), 127, np.int8), "bias": np.array([127], np.int8)},
                    [np.full((1, 1, 1, 1), 127, np.int8)])


# --- (b) padding -------------------------------------------------------------------------------------


@FAST
@given(size=st.integers(1, 40), kernel=st.integers(1, 7), stride=st.integers(1, 3), dilation=st.integers(1, 3),
       padding=st.sampled_from(["SAME", "VALID"]))
def test_padding_fields_reproduce_tfs_output_shape_and_values(size, kernel, stride, dilation, padding):
    import tensorflow as tf

    assume(stride == 1 or dilation == 1)
    assume(padding == "SAME" or size >= (kernel - 1) * dilation + 1)
    rng = np.random.default_rng(size * 1000 + kernel)
    scales = {"input": 0, "weight": 0, "output": 0}
    w = rng.integers(-3, 4, (kernel, kernel, 1, 1)).astype(np.float32)
    graph = _graph(lambda x: tf.nn.conv2d(x, w, stride, padding, dilations=dilation, name="conv"), (size, size + 1, 1))
    ctx, layer = _context(graph, scales)
    fields = OPS["conv"].describe(layer, ctx).to_json()
    pad, out = fields["padding"], fields["output_size"]
    assert [out["height"], out["width"]] == graph.shape(layer.output)[1:3]
    effective = (kernel - 1) * dilation + 1
    assert out["height"] == (size + pad["top"] + pad["bottom"] - effective) // stride + 1
    assert out["width"] == (size + 1 + pad["left"] + pad["right"] - effective) // stride + 1
    assert 0 <= pad["bottom"] - pad["top"] <= 1 and 0 <= pad["right"] - pad["left"] <= 1  # TF puts the odd one at the end
    x = rng.integers(-5, 6, (1, size, size + 1, 1)).astype(np.float64)
    explicit = np.pad(x, [(0, 0), (pad["top"], pad["bottom"]), (pad["left"], pad["right"]), (0, 0)])
    np.testing.assert_array_equal(tf.nn.conv2d(explicit, w.astype(np.float64), stride, "VALID", dilations=dilation),
                                  tf.nn.conv2d(x, w.astype(np.float64), stride, padding, dilations=dilation))


def test_mbv1_first_layer_padding_is_tfs_rule():
    import tensorflow as tf

    w = np.ones((3, 3, 3, 16), np.float32)
    graph = _graph(lambda x: tf.nn.conv2d(x, w, 2, "SAME", name="conv"), (128, 128, 3))
    ctx, layer = _context(graph, {"input": 7, "weight": 7, "output": 4})
    fields = OPS["conv"].describe(layer, ctx).to_json()
    assert fields["padding"] == {"top": 0, "bottom": 1, "left": 0, "right": 1}
    assert fields["load_bias"] is False and fields["bias_log2scale"] == 0 and fields["bias_shift"] == 0
    assert fields["output_shift"] == 10 and fields["output_size"] == {"height": 64, "width": 64}


def test_a_folded_pad_and_explicit_padding_are_the_layers_padding():
    import tensorflow as tf

    w = np.ones((3, 3, 2, 2), np.float32)

    def padded(x):
        return tf.nn.conv2d(tf.pad(x, [[0, 0], [2, 0], [1, 3], [0, 0]], name="pad"), w, 1, "VALID", name="conv")

    for build in (padded, lambda x: tf.nn.conv2d(x, w, 1, [[0, 0], [2, 0], [1, 3], [0, 0]], name="conv")):
        ctx, layer = _context(_graph(build, (6, 5, 2)), {"input": 0, "weight": 0, "output": 0})
        assert OPS["conv"].describe(layer, ctx).to_json()["padding"] == {"top": 2, "bottom": 0, "left": 1, "right": 3}


def test_an_atrous_block_is_one_dilated_layer_named_after_its_conv():
    import tensorflow as tf

    w = np.ones((3, 3, 3, 4), np.float32)

    def build(x):
        y = tf.compat.v1.nn.atrous_conv2d(x, w, 2, "SAME", name="aspp")
        return tf.nn.relu6(tf.nn.bias_add(y, np.ones(4, np.float32), name="bias"), name="relu")

    graph = _graph(build, (13, 11, 3))
    ctx, layer = _context(graph, {"input": 5, "weight": 5, "bias": 5, "output": 4})
    assert layer.name == "aspp" and layer.op == "conv" and layer.activation == "Relu6"
    assert [graph.node(name).op for name in layer.nodes] == ["SpaceToBatchND", "Conv2D", "BatchToSpaceND", "BiasAdd", "Relu6"]
    assert layer.inputs == ["x:0"] and layer.output == "relu:0"
    fields = OPS["conv"].describe(layer, ctx).to_json()
    # TF pads [[2, 3], [2, 3]] and crops [[0, 1], [0, 1]]: the dilated conv's SAME padding, 2 on each side
    assert fields["dilations"] == {"height": 2, "width": 2} and fields["stride"] == {"height": 1, "width": 1}
    assert fields["padding"] == {"top": 2, "bottom": 2, "left": 2, "right": 2}
    assert fields["input_size"] == fields["output_size"] == {"height": 13, "width": 11}


def test_a_space_to_batch_without_a_conv_is_not_a_layer():
    import tensorflow as tf

    graph = _graph(lambda x: tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]], name="s2b"), (4, 4, 1))
    with pytest.raises(GraphError, match="s2b"):
        group_layers(graph)


# --- (c) the mbv1 QAT graph against the original tool's IR -------------------------------------------------


@pytest.fixture(scope="module")
def mbv1():
    """The folded mbv1 float graph's layers, its calib.method=qat table, and a context. The QAT
    graph leaves its input unquantized; the table quantizes it as the IR does (log2scale 7,
    seed 000 section 3)."""
    import tensorflow as tf

    from core.quantize.calibration.methods import CalibrationSettings
    from core.quantize.calibration.build import TargetSpec, build_calibration_table
    from core.quantize.schemes import Pow2Symmetric
    from core.frontend.constant_folding import fold_constants
    from core.frontend.folding import fold_batch_norms
    from core.frontend.importer import import_graph
    from core.frontend.fake_quant import bypass_fake_quant

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(MBV1_GRAPH.read_bytes())
    imported = import_graph(graph_def, "images:0", MBV1_END, origin=str(MBV1_GRAPH), source={})
    graph = fold_batch_norms(fold_constants(imported)).graph
    float_graph, ranges = bypass_fake_quant(graph)
    layer_graph = group_layers(float_graph)
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)
    assert table.tensors["images:0"].log2scale == 7
    return layer_graph, table, IrContext(layer_graph, table)


def test_mbv1_fields_are_the_reference_irs(mbv1):
    layer_graph, _, ctx = mbv1
    reference = {entry["name"]: entry for entry in json.loads((MBV1_DIR / "reference_net_def.json").read_text())}
    convs = [layer for layer in layer_graph.layers if layer.op in ("conv", "dwconv")]
    assert len(convs) == 28
    for layer in convs:
        fields = OPS[layer.op].describe(layer, ctx).to_json()
        expected = {key: value for key, value in reference[layer.ir_name].items() if key not in NOT_FIELDS}
        assert {key: fields[key] for key in expected} == expected, layer.ir_name
        assert fields["dilations"] == {"height": 1, "width": 1}  # the key the reference predates
        assert json.loads(json.dumps(fields)) == fields  # plain JSON: Python ints, bools, strings


def test_mbv1_params_are_the_fake_quant_integers(mbv1):
    """ir_params = TF's FakeQuantWithMinMaxVars on the float weights, divided by the step."""
    import tensorflow as tf

    layer_graph, table, ctx = mbv1
    for layer in layer_graph.layers[:4] + layer_graph.layers[-1:]:
        if layer.op not in ("conv", "dwconv"):
            continue
        params = OPS[layer.op].params(layer, ctx)
        for kind, const in (("weight", layer.weight), ("bias", layer.bias)):
            entry = table.tensors[f"{const}:0"]
            fake = tf.quantization.fake_quant_with_min_max_vars(ctx.graph.constants[const], *entry.range).numpy()
            ints = np.round(fake.astype(np.float64) * 2.0**entry.log2scale)
            if kind == "weight" and layer.op == "dwconv":
                ints = ints[..., 0]
            assert params[kind].dtype == np.int8
            np.testing.assert_array_equal(params[kind], ints)
        assert params["weight"].ndim == (4 if layer.op == "conv" else 3)


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.integers(-140 * 4, 140 * 4), min_size=1, max_size=20), log2scale=st.integers(-8, 16),
       nudge=st.sampled_from([0.0, 1e-7, -1e-7, 3e-8, -3e-8, 1e-3]))
def test_fake_quant_ints_round_exactly_as_tensorflow(steps, log2scale, nudge):
    """Half-steps, values a float32 ulp around them (where TF's float32 arithmetic decides),
    and values beyond the range (saturated, and reported as such)."""
    import tensorflow as tf

    values = ((np.asarray(steps) / 4.0) * (1 + nudge) * 2.0**-log2scale).astype(np.float32)
    low, high = pow2_range(log2scale, 8)
    fake = tf.quantization.fake_quant_with_min_max_vars(values, low, high).numpy().astype(np.float64)
    ints, saturated = fake_quant_ints(values, log2scale)
    np.testing.assert_array_equal(ints, fake * 2.0**log2scale)
    rounded = np.floor(values.astype(np.float64) * 2.0**log2scale + 0.5)
    assert saturated == bool(np.any((rounded < -128) | (rounded > 127)))


# --- (d) the kernel against the annotated graph --------------------------------------------------------


def test_mbv1_kernels_equal_the_annotated_graphs_fake_quant_outputs(mbv1):
    """Layer 0 on ship.png (input int8 = round(x * 128) as FakeQuant rounds it, clipped), and
    every other conv/dwconv on its annotated (int8) input: the kernel's integers are the
    annotated graph's FakeQuant output integers. The qat table leaves the network input
    unquantized, so the annotated graph is fed the int8 input's real values, x_int / 128."""
    from core.quantize.annotate import annotate_graph
    from core.data.datasets import load_preprocessed_images
    from core.frontend.tf_runtime import GraphRunner

    layer_graph, table, ctx = mbv1
    image, _ = load_preprocessed_images(MBV1_DIR / "ship.png", MBV1_PREPROCESS)
    first_input, _ = fake_quant_ints(image, 7)
    np.testing.assert_array_equal(first_input, np.clip(np.floor(image.astype(np.float64) * 128 + 0.5), -128, 127))
    annotated = annotate_graph(layer_graph, table)
    quantized = annotated.source["annotation"]["activations"]
    convs = [layer for layer in layer_graph.layers if layer.op in ("conv", "dwconv")]
    fetches = [quantized.get(layer.inputs[0], layer.inputs[0]) for layer in convs] + [quantized[layer.output] for layer in convs]
    with GraphRunner(annotated) as runner:
        values = runner.run(fetches, (first_input / 128.0).astype(np.float32))
    inputs, outputs = values[: len(convs)], values[len(convs) :]
    for layer, x, y in zip(convs, inputs, outputs):
        record, params = OPS[layer.op].describe(layer, ctx), OPS[layer.op].params(layer, ctx)
        x_int = np.round(x.astype(np.float64) * 2.0 ** record.log2scale_of_input(0))
        np.testing.assert_array_equal(x_int, x.astype(np.float64) * 2.0 ** record.log2scale_of_input(0))  # on the int8 grid
        expected = np.round(y.astype(np.float64) * 2.0 ** record.log2scale_of_output())
        out = OPS[layer.op].kernel(record, params, [x_int.astype(np.int8)])
        assert out.shape == expected.shape
        assert np.mean(out == expected) >= 0.999, layer.ir_name
        with mock.patch.object(requantize_module, "FLOAT32_ACCUMULATION", False):
            np.testing.assert_array_equal(OPS[layer.op].kernel(record, params, [x_int.astype(np.int8)]), out)
    assert convs[0].inputs == ["images:0"] and OPS["conv"].describe(convs[0], ctx).log2scale_of_input(0) == 7


# --- (e) what the IR cannot express ------------------------------------------------------------------------


def _one_layer(op="conv", activation="Relu6", multiplier=1, stride=1, dilation=1):
    import tensorflow as tf

    def build(x):
        if op == "conv":
            y = tf.nn.conv2d(x, np.ones((3, 3, 2, 4), np.float32), stride, "SAME", dilations=dilation, name="block/conv")
        else:
            y = tf.nn.depthwise_conv2d(x, np.ones((3, 3, 2, multiplier), np.float32), [1, 1, 1, 1], "SAME", name="block/dw")
        y = tf.nn.bias_add(y, np.ones(y.shape[-1], np.float32), name="block/bias")
        return {"Relu6": tf.nn.relu6, "Relu": tf.nn.relu}[activation](y, name="block/act")

    return _graph(build, (8, 8, 2))


def test_a_negative_output_shift_names_the_layer_and_the_field():
    ctx, layer = _context(_one_layer(), {"input": 4, "weight": 3, "bias": 5, "output": 8})
    with pytest.raises(IrError, match=r"block_conv: output_shift = -1 .*target.scheme.min_shift"):
        OPS["conv"].describe(layer, ctx).to_json()
    ctx, layer = _context(_one_layer(), {"input": 4, "weight": 3, "bias": 9, "output": 5})
    with pytest.raises(IrError, match=r"block_conv: bias_shift = -2"):
        OPS["conv"].describe(layer, ctx).to_json()


def test_relu_is_fused_into_the_layer_and_clamps_at_zero():
    ctx, layer = _context(_one_layer(activation="Relu"), {"input": 4, "weight": 4, "bias": 4, "output": 4})
    assert layer.activation == "Relu" and layer.output == "block/act:0" and layer.nodes[-1] == "block/act"
    record = OPS["conv"].describe(layer, ctx)
    assert record.activation_type == "Relu" and record.clamp() == (0, 127)
    assert record.fused_operators() == ["conv2d", "bias_add", "requantize", "relu"]
    x = np.full((1, 8, 8, 2), -100, np.int8)  # all sums negative: the clamp gives 0, not the int8 floor
    assert (OPS["conv"].kernel(record, OPS["conv"].params(layer, ctx), [x]) == 0).all()


def test_a_depthwise_channel_multiplier_is_refused():
    ctx, layer = _context(_one_layer("dwconv", multiplier=2), {"input": 4, "weight": 4, "bias": 4, "output": 4})
    for describe in (OPS["dwconv"].describe, OPS["dwconv"].params):
        with pytest.raises(IrError, match=r"block_dw: weight: depthwise channel multiplier 2"):
            describe(layer, ctx)


def test_a_dilated_conv_with_a_stride_is_refused():
    ctx, layer = _context(_one_layer(stride=2, dilation=2), {"input": 4, "weight": 4, "bias": 4, "output": 4})
    with pytest.raises(IrError, match=r"block_conv: dilations .* requires stride 1"):
        OPS["conv"].describe(layer, ctx).to_json()


def test_a_pad_that_cannot_be_folded_is_named():
    import tensorflow as tf

    def build(x):
        return tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], name="pad"), np.ones((3, 3, 2, 2), np.float32), 1,
                            "SAME", name="conv")

    with pytest.raises(GraphError, match="pad: this Pad before conv cannot be folded"):
        group_layers(_graph(build, (6, 6, 2)))


def test_a_weight_beyond_its_range_is_refused_unless_the_range_is_the_qat_graphs_own():
    """A calibrated range holds its weight's absmax, so saturation means a table that does not
    fit; a QAT graph's FakeQuant range may saturate (the SSD's depthwise weights do), and the IR
    carries the FakeQuant's saturated integers."""
    import tensorflow as tf

    ctx, layer = _context(_one_layer(), {"input": 4, "weight": 7, "bias": 4, "output": 4})  # 1.0 > 127/128
    with pytest.raises(IrError, match=r"block_conv: weight .*never\s+saturated"):
        OPS["conv"].params(layer, ctx)
    entry = ctx.table.tensors[f"{layer.weight}:0"]
    entry.method = "qat"
    weight = OPS["conv"].params(layer, ctx)["weight"]
    fake = tf.quantization.fake_quant_with_min_max_vars(ctx.graph.constants[layer.weight], *entry.range).numpy()
    np.testing.assert_array_equal(weight, fake * 128)
    assert (weight == 127).all()


def test_conv_and_dwconv_register_their_ir_pieces():
    for name in ("conv", "dwconv"):
        op = OPS[name]
        assert op.record.operation == name and op.input_kinds == ("input",) and op.annotate.weight and op.annotate.bias
        assert op.params is not OPS["add"].params  # constants of its own
    assert OPS["conv"].annotate.weight_channel_axes == (-1,) and OPS["dwconv"].annotate.weight_channel_axes == (-2, -1)
