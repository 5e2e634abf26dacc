"""IR fields and integer kernels of add, avg_pool, max_pool, reshape, concat2 and resize_bilinear.

Every kernel is checked against an independent path: TensorFlow's float op on the integer inputs
scaled by 2^-log2scale, then the spec's rounding (round-half-up, as FakeQuant) and int8
saturation in numpy. The fields come from IrOp.describe on one-op graphs (so TF's own padding and
shape rules are checked too) and on the two QAT models of ../shared."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import MBV1_GRAPH, MODELS, SSD_GRAPH
from harness import EMITTER_KEYS, fields_of, int8, last_layer, op_context, quantize, real, run
from core.quantize.calibration.methods import CalibrationSettings
from core.quantize.calibration.build import TargetSpec, build_calibration_table
from core.quantize.schemes import Pow2Symmetric
from core.frontend.fake_quant import bypass_fake_quant
from core.ir.layers import group_layers
from core.ir.ops import OPS
from core.ir.op import IrContext
from core.ir.records import IrError
from core.ir.emit import build_ir
from core.ir.ops.resize.record import RESIZE_FRAC_BITS, source_coordinates
from core.ir.simulator import IntegerSimulator

examples = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
SSD_END_POINTS = [f"BoxPredictor_{k}/Reshape{suffix}:0" for k in range(6) for suffix in ("", "_1")]


pool_cases = st.fixed_dictionaries({
    "h": st.integers(1, 9), "w": st.integers(1, 9), "c": st.integers(1, 3),
    "kh": st.integers(1, 4), "kw": st.integers(1, 4), "sh": st.integers(1, 3), "sw": st.integers(1, 3),
    "padding": st.sampled_from(["SAME", "VALID"]), "input": st.integers(-2, 7), "seed": st.integers(0, 2**32 - 1),
})


def pool_graph(op, case, output_log2scale):
    if case["padding"] == "VALID":  # TF needs the window inside the input
        case = {**case, "kh": min(case["kh"], case["h"]), "kw": min(case["kw"], case["w"])}
    window, strides = [case["kh"], case["kw"]], [case["sh"], case["sw"]]
    layer_graph, context = op_context(lambda x: op(x, window, strides, case["padding"], name="pool"),
                                      [case["h"], case["w"], case["c"]], {"input": case["input"], "pool": output_log2scale})
    return case, window, strides, layer_graph, context


# --- avg_pool / max_pool --------------------------------------------------------------------


@examples
@given(pool_cases, st.integers(0, 3))
def test_avg_pool_is_the_rounded_exact_mean(case, pre_ls):
    case, window, strides, layer_graph, context = pool_graph(tf.nn.avg_pool2d, case, case["input"] + pre_ls)
    fields = fields_of(layer_graph, context)
    assert fields["input_pre_ls"] == pre_ls and fields["kernel_size"] == {"height": window[0], "width": window[1]}
    x = int8(np.random.default_rng(case["seed"]), (3, case["h"], case["w"], case["c"]))
    expected = quantize(tf.nn.avg_pool2d(real(x, case["input"]), window, strides, case["padding"]).numpy(), case["input"] + pre_ls)
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x]), expected)


@examples
@given(pool_cases, st.integers(-2, 2))
def test_max_pool_is_tfs_max_pool(case, output_shift):
    case, window, strides, layer_graph, context = pool_graph(tf.nn.max_pool2d, case, case["input"] + output_shift)
    fields = fields_of(layer_graph, context)
    x = int8(np.random.default_rng(case["seed"]), (3, case["h"], case["w"], case["c"]))
    pooled = tf.nn.max_pool2d(real(x, case["input"]).astype(np.float32), window, strides, case["padding"]).numpy()
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x]), quantize(pooled, case["input"] + output_shift))


def test_max_pool_with_explicit_padding():
    paddings = [[0, 0], [1, 0], [2, 1], [0, 0]]
    layer_graph, context = op_context(lambda x: tf.nn.max_pool2d(x, 3, 2, paddings, name="pool"), [6, 7, 2], {"input": 3, "pool": 3})
    fields = fields_of(layer_graph, context)
    assert fields["padding"] == {"top": 1, "bottom": 0, "left": 2, "right": 1}
    x = int8(np.random.default_rng(3), (4, 6, 7, 2))
    expected = quantize(tf.nn.max_pool2d(real(x, 3).astype(np.float32), 3, 2, paddings).numpy(), 3)
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x]), expected)


def test_same_padding_is_made_explicit_as_tf_pads():
    # in 7, kernel 4, stride 2: out 4, total (4-1)*2 + 4 - 7 = 3 -> top 1, bottom 2
    layer_graph, context = op_context(lambda x: tf.nn.avg_pool2d(x, [4, 3], [2, 3], "SAME", name="pool"), [7, 5, 2],
                                      {"input": 3, "pool": 4})
    fields = fields_of(layer_graph, context)
    assert fields["padding"] == {"top": 1, "bottom": 2, "left": 0, "right": 1}
    assert fields["output_size"] == {"height": 4, "width": 2} and fields["stride"] == {"height": 2, "width": 3}


@examples
@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 4), st.integers(-1, 6), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_global_mean_is_an_avg_pool_over_the_whole_input(h, w, c, input_log2scale, pre_ls, seed):
    layer_graph, context = op_context(lambda x: tf.reduce_mean(x, [1, 2], keepdims=True, name="mean"), [h, w, c],
                                      {"input": input_log2scale, "mean": input_log2scale + pre_ls})
    layer = last_layer(layer_graph)
    fields = fields_of(layer_graph, context)
    assert layer.op == "avg_pool" and fields["kernel_size"] == {"height": h, "width": w}
    assert fields["stride"] == {"height": 1, "width": 1} and fields["output_size"] == {"height": 1, "width": 1}
    assert set(fields["padding"].values()) == {0} and fields["input_pre_ls"] == pre_ls
    x = int8(np.random.default_rng(seed), (4, h, w, c))
    expected = quantize(tf.reduce_mean(real(x, input_log2scale), [1, 2], keepdims=True).numpy(), input_log2scale + pre_ls)
    np.testing.assert_array_equal(run(layer, fields, [x]), expected)


# --- add ------------------------------------------------------------------------------------


def add_graph(shape, pl, add, out, activation=None):
    def build(x):
        a = tf.nn.max_pool2d(x, 1, 1, "VALID", name="a")
        b = tf.nn.avg_pool2d(x, 1, 1, "VALID", name="b")
        total = tf.add(a, b, name="sum")
        return {"Relu6": tf.nn.relu6, "Relu": tf.nn.relu}[activation](total) if activation else total

    return op_context(build, shape, {"input": 7, "a": pl, "b": add, "sum": out})


def float_add(pl_values, add_values, fields):
    total = tf.add(real(pl_values, fields["pl_log2scale"]), real(add_values, fields["add_log2scale"]))
    if fields["activation_type"] == "Relu6":
        total = tf.nn.relu6(total)
    elif fields["activation_type"] == "Relu":
        total = tf.nn.relu(total)
    return quantize(total.numpy(), fields["output_log2scale"])


@examples
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.integers(-1, 6), st.integers(-3, 3),
       st.integers(-3, 3), st.sampled_from(["Relu6", "Relu", None]), st.integers(0, 2**32 - 1))
def test_add_is_tfs_add_within_its_documented_rounding(h, w, c, pl, add_offset, out_offset, activation, seed):
    add = pl + add_offset
    coarse = min(pl, add)
    layer_graph, context = add_graph([h, w, c], pl, add, coarse + out_offset, activation)
    fields = fields_of(layer_graph, context)
    assert fields["output_shift_bit"] == out_offset and fields["activation_type"] == (activation or "None")
    assert (fields["pl_name"], fields["add_name"]) == ("a", "b") and fields["size"] == h * w * c
    rng = np.random.default_rng(seed)
    pl_values, add_values = int8(rng, (3, h, w, c)), int8(rng, (3, h, w, c))
    difference = np.abs(run(last_layer(layer_graph), fields, [pl_values, add_values]) - float_add(pl_values, add_values, fields))
    if pl == add or out_offset == 0:  # one rounding
        assert difference.max() == 0
    else:  # two roundings (the finer operand's alignment, then the output shift)
        assert difference.max() <= max(1, 2 ** (out_offset - 1))


def test_add_with_different_scales_rounds_twice_within_one_lsb_over_all_int8_pairs():
    pl_values, add_values = (v.reshape(1, 256, 256, 1).astype(np.int8) for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij"))
    for pl, add, out in ((3, 1, 0), (3, 1, -1), (2, 3, 3), (4, 2, 1)):
        layer_graph, context = add_graph([256, 256, 1], pl, add, out)
        fields = fields_of(layer_graph, context)
        difference = run(last_layer(layer_graph), fields, [pl_values, add_values]) - float_add(pl_values, add_values, fields)
        assert np.abs(difference).max() == 1, (pl, add, out)
        assert 0.1 < np.mean(difference != 0) <= 0.25, (pl, add, out)  # the double rounding is real, and bounded


def test_add_of_the_network_input_names_it_input():
    layer_graph, context = op_context(lambda x: tf.add(x, tf.nn.max_pool2d(x, 1, 1, "VALID", name="a"), name="sum"), [2, 2, 3],
                                      {"input": 7, "a": 6, "sum": 5})
    fields = fields_of(layer_graph, context)
    assert (fields["pl_name"], fields["add_name"]) == ("input", "a")
    assert fields["output_shift_bit"] == 5 - 6 and fields["pl_shiftbit"] == 7 and fields["add_shiftbit"] == 6


# --- reshape --------------------------------------------------------------------------------


@examples
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 6), st.integers(0, 3), st.booleans(), st.integers(0, 2**32 - 1))
def test_reshape_is_tfs_reshape_of_each_image(h, w, c, form, infer, seed):
    target = [[h * w, c], [h * w * c], [h, w * c], [h * w * c, 1, 1]][form]
    param = [-1, *target[1:]] if infer else target
    layer_graph, context = op_context(lambda x: tf.reshape(tf.nn.max_pool2d(x, 1, 1, "VALID", name="a"), [1, *param], name="r"),
                                      [h, w, c], {"input": 7, "a": 3})
    layer = last_layer(layer_graph)
    fields = fields_of(layer_graph, context, layer)
    assert fields == {"reshape_param": param, "input_shape": [h, w, c], "output_shape": target, "dtype": "int8", "log2scale": 3}
    x = int8(np.random.default_rng(seed), (3, h, w, c))
    expected = quantize(tf.reshape(real(x, 3), [3, *target]).numpy(), 3)
    np.testing.assert_array_equal(run(layer, fields, [x]), expected)


def test_squeeze_is_a_reshape_to_its_output_shape():
    layer_graph, context = op_context(lambda x: tf.squeeze(tf.nn.max_pool2d(x, 1, 1, "VALID", name="a"), [1, 2], name="s"),
                                      [1, 1, 10], {"input": 7, "a": 2})
    fields = fields_of(layer_graph, context)
    assert fields["reshape_param"] == [10] and fields["output_shape"] == [10] and fields["log2scale"] == 2
    x = int8(np.random.default_rng(0), (2, 1, 1, 10))
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x]), x.reshape(2, 10))


# --- concat2 --------------------------------------------------------------------------------


def concat_graph(dim, shape, extra, scales):
    """concat2 of a = max_pool(x) and b, whose size along `dim` differs from a's by `extra`."""
    h, w, c = shape

    def build(x):
        a = tf.nn.max_pool2d(x, 1, 1, "VALID", name="a")
        if dim == "C":
            b = tf.nn.conv2d(x, tf.constant(np.ones((1, 1, c, c + extra), np.float32)), 1, "VALID", name="b")
        else:
            b = tf.nn.avg_pool2d(x, [1 + extra, 1] if dim == "H" else [1, 1 + extra], 1, "VALID", name="b")
        return tf.concat([a, b], {"H": 1, "W": 2, "C": -1}[dim], name="cat")

    return op_context(build, [h + extra, w + extra, c], scales)


@examples
@given(st.sampled_from("HWC"), st.integers(1, 5), st.integers(1, 5), st.integers(1, 4), st.integers(0, 2),
       st.integers(-1, 6), st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 2**32 - 1))
def test_concat_is_tfs_concat_bit_for_bit(dim, h, w, c, extra, out, offset0, offset1, seed):
    scales = {"input": 7, "a": out + offset0, "b": out + offset1, "cat": out}
    layer_graph, context = concat_graph(dim, (h, w, c), extra, scales)
    fields = fields_of(layer_graph, context)
    assert fields["dim"] == dim and (fields["input0_log2scale"], fields["input1_log2scale"]) == (out + offset0, out + offset1)
    rng = np.random.default_rng(seed)
    inputs = [int8(rng, (2, fields[f"input{k}_size"]["height"], fields[f"input{k}_size"]["width"], fields[f"input{k}_channel_num"]))
              for k in (0, 1)]
    expected = quantize(tf.concat([real(inputs[0], out + offset0), real(inputs[1], out + offset1)], {"H": 1, "W": 2, "C": 3}[dim]).numpy(), out)
    result = run(last_layer(layer_graph), fields, inputs)
    assert [fields["output_size"]["height"], fields["output_size"]["width"], fields["output_channel_num"]] == list(result.shape[1:])
    np.testing.assert_array_equal(result, expected)


# --- resize_bilinear ------------------------------------------------------------------------


def resize_graph(in_size, out_size, channels, align_corners, half_pixel_centers, input_log2scale, output_log2scale):
    def build(x):
        pooled = tf.nn.max_pool2d(x, 1, 1, "VALID", name="a")
        return tf.raw_ops.ResizeBilinear(images=pooled, size=list(out_size), align_corners=align_corners,
                                         half_pixel_centers=half_pixel_centers, name="resize")

    return op_context(build, [*in_size, channels], {"input": 7, "a": input_log2scale, "resize": output_log2scale})


def float_resize(x, fields):
    resized = tf.raw_ops.ResizeBilinear(
        images=real(x, fields["input_log2scale"]).astype(np.float32),
        size=[fields["output_size"]["height"], fields["output_size"]["width"]],
        align_corners=fields["align_corners"], half_pixel_centers=fields.get("half_pixel_centers", False))
    return quantize(resized.numpy(), fields["output_log2scale"])


MODES = [(False, False), (True, False), (False, True)]  # (align_corners, half_pixel_centers)


@examples
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 13), st.integers(1, 13), st.sampled_from(MODES),
       st.integers(-1, 6), st.integers(-3, 1), st.integers(0, 2**32 - 1))
def test_resize_bilinear_is_within_one_lsb_of_tfs(in_h, in_w, out_h, out_w, mode, input_log2scale, output_offset, seed):
    layer_graph, context = resize_graph((in_h, in_w), (out_h, out_w), 3, *mode, input_log2scale, input_log2scale + output_offset)
    fields = fields_of(layer_graph, context)
    assert fields["align_corners"] == mode[0] and fields.get("half_pixel_centers", False) == mode[1]
    assert fields["output_size"] == {"height": out_h, "width": out_w}
    x = int8(np.random.default_rng(seed), (3, in_h, in_w, 3))
    assert np.abs(run(last_layer(layer_graph), fields, [x]) - float_resize(x, fields)).max() <= 1


@pytest.mark.parametrize("in_size, out_size, mode", [
    ((3, 4), (5, 7), (True, False)),  # align_corners, (out-1)/(in-1) = 2
    ((3, 2), (9, 5), (True, False)),  # 4
    ((5, 9), (3, 3), (True, False)),  # (in-1)/(out-1) = 2, 4: every source coordinate an integer
    ((4, 3), (8, 12), (False, False)),  # out/in = 2, 4
    ((6, 8), (3, 2), (False, False)),  # in/out = 2, 4
    ((3, 4), (6, 16), (False, True)),  # half pixel: out/in = 2, 4
    ((8, 6), (4, 2), (False, True)),  # half pixel: in/out = 2, 3
])
@pytest.mark.parametrize("input_log2scale, output_log2scale", [(4, 4), (4, 2), (3, 4), (6, 3)])
def test_resize_bilinear_with_exact_weights_is_bit_exact(in_size, out_size, mode, input_log2scale, output_log2scale):
    layer_graph, context = resize_graph(in_size, out_size, 2, *mode, input_log2scale, output_log2scale)
    fields = fields_of(layer_graph, context)
    x = int8(np.random.default_rng(7), (8, *in_size, 2))
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x]), float_resize(x, fields))


@pytest.mark.parametrize("mode", MODES)
def test_resize_source_coordinates_are_tfs_rounded_half_up_to_the_fraction_bits(mode):
    one = 2**RESIZE_FRAC_BITS
    for in_size in range(1, 9):
        for out_size in range(1, 17):
            if mode[0] and out_size > 1:
                exact = [Fraction(i * (in_size - 1), out_size - 1) for i in range(out_size)]
            elif mode[1]:
                exact = [(i + Fraction(1, 2)) * Fraction(in_size, out_size) - Fraction(1, 2) for i in range(out_size)]
            else:
                exact = [Fraction(i * in_size, out_size) for i in range(out_size)]
            fixed = [min(max(math.floor(src * one + Fraction(1, 2)), 0), (in_size - 1) * one) for src in exact]
            lower, upper, weight = source_coordinates(in_size, out_size, *mode)
            assert lower.tolist() == [s // one for s in fixed] and weight.tolist() == [s % one for s in fixed]
            assert upper.tolist() == [min(s // one + 1, in_size - 1) for s in fixed]


def test_resize_fields_and_fixed_point_design():
    layer_graph, context = resize_graph((4, 4), (7, 7), 5, True, False, 4, 3)
    assert fields_of(layer_graph, context) == {
        "dtype": "int8", "align_corners": True, "input_log2scale": 4, "output_log2scale": 3, "input_channel_num": 5,
        "input_size": {"height": 4, "width": 4}, "output_size": {"height": 7, "width": 7},
    }
    assert RESIZE_FRAC_BITS == 10  # the hardware contract: weights in [0, 2^10], int32 products
    extreme = np.full((1, 4, 4, 5), -128, np.int8)
    assert (run(last_layer(layer_graph), fields_of(layer_graph, context), [extreme]) == -64).all()


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("build, scales, limits, field", [
    (lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID", name="pool"), {"input": 5, "pool": 4}, {}, "input_pre_ls = -1"),
    (lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID", name="pool"), {"input": 1, "pool": 9}, {"max_shift": 7}, "input_pre_ls = 8"),
    (lambda x: tf.nn.avg_pool2d(x, 4, 4, "VALID", name="pool"), {"input": 1, "pool": 25}, {}, "input_pre_ls = 24 .*int32"),
    (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID", name="pool"), {"input": 12, "pool": -8}, {"max_shift": 15},
     r"\|input_log2scale - output_log2scale\| = 20"),
    (lambda x: tf.concat([tf.nn.max_pool2d(x, 1, 1, "VALID", name="a"), x], 3, name="pool"),
     {"input": 7, "a": -30, "pool": 5}, {}, r"\|input0_log2scale - output_log2scale\| = 35"),
    (lambda x: tf.raw_ops.ResizeBilinear(images=x, size=[8, 8], name="pool"), {"input": 2, "pool": 30}, {},
     "the output shift .* = -8 is outside"),
])
def test_a_field_the_target_cannot_encode_is_an_ir_error_naming_layer_and_field(build, scales, limits, field):
    layer_graph, context = op_context(build, [4, 4, 2], scales, **limits)
    with pytest.raises(IrError, match=f"layer pool: {field}"):
        fields_of(layer_graph, context)


# --- the two QAT models ---------------------------------------------------------------------


def folded(path, input_tensor, end_points):
    from core.frontend.constant_folding import fold_constants
    from core.frontend.folding import fold_batch_norms
    from core.frontend.importer import import_graph

    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    return fold_batch_norms(fold_constants(import_graph(graph_def, input_tensor, end_points, origin=str(path), source={}))).graph


def qat_context(graph, **limits):
    float_graph, ranges = bypass_fake_quant(graph)
    layer_graph = group_layers(float_graph)
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)
    return layer_graph, IrContext(layer_graph, table, **limits)


@pytest.fixture(scope="module")
def ssd():
    return folded(SSD_GRAPH, "normalized_input_image_tensor:0", SSD_END_POINTS)


def test_mbv1_avg_pool_fields_are_the_reference_irs():
    layer_graph, context = qat_context(folded(MBV1_GRAPH, "images:0", ["MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"]))
    reference = json.loads((MODELS / "mobilenet_v1_0.5_128_cifar10" / "reference_net_def.json").read_text())
    (entry,) = [entry for entry in reference if entry["operation"] == "avg_pool"]
    (layer,) = [layer for layer in layer_graph.layers if layer.op == "avg_pool"]
    fields = fields_of(layer_graph, context, layer)
    assert {key: fields.get(key) for key in entry if key not in EMITTER_KEYS} == {key: entry[key] for key in entry if key not in EMITTER_KEYS}
    assert fields["input_pre_ls"] == 1
    x = int8(np.random.default_rng(1), (2, 4, 4, 512))
    np.testing.assert_array_equal(run(layer, fields, [x]), quantize(real(x, 4).mean(axis=(1, 2), keepdims=True), 5))


# seed 000, 4.2: the spec's own examples are layers of this SSD
SPEC_ADD = {
    "activation_type": "None", "input_channel_num": 16, "input_size": {"height": 80, "width": 80}, "dtype": "int8",
    "pl_log2scale": 4, "pl_shiftbit": 4, "add_log2scale": 4, "add_shiftbit": 4, "output_log2scale": 3, "output_shift_bit": -1,
    "pl_name": "FeatureExtractor_MobilenetV2_expanded_conv_project_Conv2D_Fold", "add_name": "FeatureExtractor_MobilenetV2_Conv_Conv2D_Fold",
}
SPEC_RESHAPE = {"reshape_param": [-1, 2], "input_shape": [10, 10, 6], "output_shape": [300, 2], "dtype": "int8", "log2scale": 2}
ADD_KEYS = set(SPEC_ADD) | {"size"}


def test_ssd_add_and_reshape_fields_are_complete_and_the_specs_examples(ssd):
    layer_graph, context = qat_context(ssd)
    names = {layer.ir_name for layer in layer_graph.layers}
    adds = [layer for layer in layer_graph.layers if layer.op == "add"]
    reshapes = [layer for layer in layer_graph.layers if layer.op == "reshape"]
    assert len(adds) == 11 and len(reshapes) == 12
    for layer in adds:
        fields = fields_of(layer_graph, context, layer)
        assert set(fields) == ADD_KEYS and None not in fields.values()
        assert fields["output_shift_bit"] == fields["output_log2scale"] - min(fields["pl_log2scale"], fields["add_log2scale"])
        assert {fields["pl_name"], fields["add_name"]} <= names
        assert fields["size"] == fields["input_channel_num"] * fields["input_size"]["height"] * fields["input_size"]["width"]
    for layer in reshapes:
        fields = fields_of(layer_graph, context, layer)
        assert set(fields) == set(SPEC_RESHAPE) and None not in fields.values()
        assert fields["reshape_param"] == ([-1, 2] if layer.name.endswith("_1") else [-1, 1, 4])
        assert np.prod(fields["input_shape"]) == np.prod(fields["output_shape"])
        assert fields["log2scale"] == context.log2scale(layer.inputs[0])
    by_name = {layer.ir_name: layer for layer in layer_graph.layers}
    fields = fields_of(layer_graph, context, by_name["FeatureExtractor_MobilenetV2_expanded_conv_add"])
    assert fields.pop("size") == 16 * 80 * 80 and fields == SPEC_ADD
    assert fields_of(layer_graph, context, by_name["BoxPredictor_0_Reshape_1"]) == SPEC_RESHAPE


def test_ssd_add_whose_output_shift_the_target_cannot_encode_is_named(ssd):
    layer_graph, context = qat_context(ssd, max_shift=0)
    layer = next(layer for layer in layer_graph.layers if layer.op == "add")
    with pytest.raises(IrError, match=r"layer FeatureExtractor_MobilenetV2_expanded_conv_add: \|output_shift_bit\| = 1 is outside"):
        fields_of(layer_graph, context, layer)


# --- seed 000, sections 5.3 and 5.5: traversal order and previous_layer ----------------------------


def test_ssd_add_lists_its_producers_in_processing_order_as_the_specs_add_example(ssd):
    """Seed 000's ADD example is this layer: previous_layer [Conv, project] (the order the two
    producers were processed), while pl is op.inputs[0] = project and add is Conv. Its first conv's
    next_layer is the spec's [expanded_conv_depthwise, expanded_conv_add]."""
    layer_graph, context = qat_context(ssd)
    by_name = {layer.ir_name: layer for layer in layer_graph.layers}
    add = OPS["add"].describe(by_name["FeatureExtractor_MobilenetV2_expanded_conv_add"], context)
    assert add.previous_layer == ("FeatureExtractor_MobilenetV2_Conv_Conv2D_Fold",
                                  "FeatureExtractor_MobilenetV2_expanded_conv_project_Conv2D_Fold")
    assert add.operands() == (add.pl_name, add.add_name) == tuple(reversed(add.previous_layer))
    first = OPS["conv"].describe(by_name["FeatureExtractor_MobilenetV2_Conv_Conv2D_Fold"], context)
    assert first.next_layer == ("FeatureExtractor_MobilenetV2_expanded_conv_depthwise_depthwise_Fold",
                                "FeatureExtractor_MobilenetV2_expanded_conv_add")
    order = [layer.ir_name for layer in context.order]
    assert order[0] == "FeatureExtractor_MobilenetV2_Conv_Conv2D_Fold" and len(order) == len(set(order)) == 95


def test_the_traversal_takes_the_last_discovered_ready_layer_first():
    """input feeds a then b (graph order); from the end of ops_discovered, b is processed first,
    then c = a + b waits for a: order b, a, c, and c's previous_layer is [b, a] while its
    operands stay (pl=a, add=b)."""
    def build(x):
        a = tf.nn.max_pool2d(x, 1, 1, "VALID", name="a")
        b = tf.nn.max_pool2d(x, 1, 1, "VALID", name="b")
        return tf.add(a, b, name="c")

    layer_graph, context = op_context(build, [2, 2, 1], {"input": 4, "a": 4, "b": 3, "c": 3})
    assert [layer.ir_name for layer in context.order] == ["b", "a", "c"]
    (c,) = [layer for layer in layer_graph.layers if layer.name == "c"]
    record = OPS["add"].describe(c, context)
    assert record.previous_layer == ("b", "a") and record.operands() == ("a", "b")
    ir = build_ir(layer_graph, context.table)
    assert [layer.name for layer in ir.layers] == ["b", "a", "c"]
    x = int8(np.random.default_rng(0), (3, 2, 2, 1))
    values = IntegerSimulator(ir).run_int8(x, keep_all=True)
    halved = (x.astype(np.int64) + 1) >> 1  # b, and a aligned to b's scale: each rounded half up
    np.testing.assert_array_equal(values["b"], halved)
    np.testing.assert_array_equal(values["c"], np.clip(2 * halved, -128, 127))  # pl = a (aligned), add = b
