"""The TF2IR extensions (dense as a 1x1 conv, lut, softmax, mul, concat, resize_nearest) and the
integer models the annotated graph computes them with.

Each kernel is checked against an independent path -- TensorFlow's float op on the real values,
then FakeQuant's rounding (or, for softmax, the float softmax within its documented error) --, each
C emitter against its kernel, and each integer model (the annotated graph's ops) against the kernel
on the same integers."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from conftest import ir_record
from harness import check_layer, fields_of, hw, int8, last_layer, op_context, quantize, real, run
from core.frontend.canonicalize import canonicalize
from core.frontend.constant_folding import fold_constants
from core.frontend.graph import Graph, GraphError
from core.ir.ops import OPS
from core.ir.ops.resize.record import nearest_indices
from core.ir.ops.softmax.record import exp_table
from core.quantize.annotate import annotate_graph
from core.quantize.schemes import pow2_range
from core.quantize.table import TensorEntry

examples = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
c_examples = settings(max_examples=10, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def identity(x, name):
    """A layer of its own (a 1x1 max pool) that gives the tensor a scale of its own."""
    return tf.nn.max_pool2d(x, 1, 1, "VALID", name=name)


def fake_quant_ints(values, log2scale: int) -> np.ndarray:
    """TensorFlow's own FakeQuant at 2^-log2scale, as integers."""
    low, high = -128 * 2.0**-log2scale, 127 * 2.0**-log2scale
    fake = tf.quantization.fake_quant_with_min_max_vars(np.asarray(values, np.float32), low, high).numpy()
    return np.rint(fake.astype(np.float64) * 2.0**log2scale).astype(np.int64)


def annotated_layer(layer_graph, context, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The annotated graph's integers of the last layer, its inputs' FakeQuants fed `feeds`
    (tensor -> real values)."""
    annotated = annotate_graph(layer_graph, context.table)
    quantized = annotated.source["annotation"]["activations"]
    output = last_layer(layer_graph).output
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(annotated.to_graph_def(), name="")
        with tf.compat.v1.Session(graph=graph) as session:
            value = session.run(quantized[output], {quantized[tensor]: values for tensor, values in feeds.items()})
    return np.rint(value.astype(np.float64) * 2.0 ** context.log2scale(output)).astype(np.int64)


# --- dense ---------------------------------------------------------------------------------


@examples
@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 7), st.integers(2, 9), st.integers(-4, 4), st.integers(0, 2**32 - 1))
def test_dense_is_the_1x1_conv_of_tfs_matmul(k, n, input_log2scale, weight_log2scale, out_offset, seed):
    rng = np.random.default_rng(seed)
    weight = rng.integers(-128, 128, (k, n)) * 2.0**-weight_log2scale
    bias = rng.integers(-128, 128, n) * 2.0**-(weight_log2scale + input_log2scale - 2)
    out = input_log2scale + weight_log2scale + out_offset - 6

    def build(x):
        flat = tf.reshape(identity(x, "a"), [-1, k], name="flat")
        product = tf.matmul(flat, tf.constant(weight, tf.float32), name="dense")
        return tf.nn.bias_add(product, tf.constant(bias, tf.float32), name="bias")

    layer_graph, context = op_context(build, [1, 1, k], {"input": 7, "a": input_log2scale, "dense": out})
    context.table.tensors.update(_constant_entries(layer_graph, weight_log2scale, weight_log2scale + input_log2scale - 2))
    layer = last_layer(layer_graph)
    assert layer.op == "conv" and layer.attrs.dense and layer.bias is not None
    fields = fields_of(layer_graph, context)
    assert (fields["kernel_size"], fields["input_size"], fields["output_size"]) == (hw(1, 1), hw(1, 1), hw(1, 1))
    assert (fields["input_channel_num"], fields["output_channel_num"]) == (k, n)
    params = OPS["conv"].params(layer, context)
    assert params["weight"].shape == (1, 1, k, n)
    x = int8(rng, (4, 1, 1, k))
    expected = quantize(real(x.reshape(4, k), input_log2scale) @ weight + bias, out)
    np.testing.assert_array_equal(run(layer, fields, [x], params).reshape(4, n), expected)


def _constant_entries(layer_graph, weight_log2scale, bias_log2scale):
    layer = last_layer(layer_graph)
    return {f"{layer.weight}:0": TensorEntry("weight", "fixed", 1.0, pow2_range(weight_log2scale, 8), log2scale=weight_log2scale),
            f"{layer.bias}:0": TensorEntry("bias", "fixed", 1.0, pow2_range(bias_log2scale, 8), log2scale=bias_log2scale)}


# --- lut -------------------------------------------------------------------------------------
FUNCTIONS = {
    "leaky_relu": lambda a: tf.nn.leaky_relu(a, 0.1),
    "hard_swish": lambda a: a * tf.nn.relu6(a + 3.0) / 6.0,  # Keras's decomposed form
    "hard_swish_mul": lambda a: a * (tf.nn.relu6(a + 3.0) * (1.0 / 6.0)),
    "swish": lambda a: a * tf.sigmoid(a),
    "sigmoid": tf.sigmoid,
    "tanh": tf.tanh,
    "relu": tf.nn.relu,
    "elu_minus_one": lambda a: tf.nn.elu(a) - 1.0,
}


@examples
@given(st.sampled_from(sorted(FUNCTIONS)), st.integers(1, 6), st.integers(1, 6), st.integers(1, 9), st.integers(-2, 7),
       st.integers(-2, 3), st.integers(0, 2**32 - 1))
def test_lut_is_the_float_function_rounded_as_fake_quant_rounds(function, h, w, c, input_log2scale, out_offset, seed):
    """The table (the region evaluated at the 256 int8 inputs) read at every element equals TF's
    function on the whole tensor followed by TF's FakeQuant: no element computed differently."""
    out = input_log2scale + out_offset

    def build(x):
        return FUNCTIONS[function](identity(x, "a"))

    layer_graph, context = op_context(build, [h, w, c], {"input": 7, "a": input_log2scale, "*": out})
    layer = last_layer(layer_graph)
    assert layer.op == "lut" and [item.op for item in layer_graph.layers] == ["max_pool", "lut"]
    fields, params = fields_of(layer_graph, context), OPS["lut"].params(layer, context)
    assert params["table"].shape == (256,) and params["table"].dtype == np.int8
    x = int8(np.random.default_rng(seed), (1, h, w, c))
    expected = fake_quant_ints(FUNCTIONS[function](real(x, input_log2scale).astype(np.float32)).numpy(), out)
    np.testing.assert_array_equal(run(layer, fields, [x], params), expected)
    np.testing.assert_array_equal(annotated_layer(layer_graph, context, {"a:0": real(x, input_log2scale)}), expected)


def test_element_wise_branches_on_one_tensor_are_a_table_each():
    def build(x):
        a = identity(x, "a")
        return tf.concat([tf.sigmoid(a, name="s"), tf.tanh(tf.sigmoid(a, name="s2") * 2.0, name="t")], -1, name="cat")

    layer_graph, _ = op_context(build, [2, 2, 3], {"input": 7, "*": 5})
    assert [item.op for item in layer_graph.layers] == ["max_pool", "lut", "lut", "concat2"]
    assert [item.nodes for item in layer_graph.layers[1:3]] == [["s"], ["s2", "mul", "t"]]


# --- softmax ---------------------------------------------------------------------------------


@examples
@given(st.integers(1, 3), st.integers(1, 40), st.integers(-2, 6), st.integers(6, 9), st.integers(0, 2**32 - 1))
def test_softmax_is_within_one_lsb_of_the_float_softmax_and_the_annotated_graph_computes_its_integers(
        rows, classes, input_log2scale, output_log2scale, seed):
    def build(x):
        return tf.nn.softmax(identity(x, "a"), name="softmax")

    layer_graph, context = op_context(build, [1, rows, classes], {"input": 7, "a": input_log2scale, "softmax": output_log2scale})
    layer = last_layer(layer_graph)
    fields = fields_of(layer_graph, context)
    assert layer.op == "softmax" and fields["shape"] == [1, rows, classes]
    x = int8(np.random.default_rng(seed), (1, 1, rows, classes))
    result = run(layer, fields, [x])
    probabilities = tf.nn.softmax(real(x, input_log2scale)).numpy()
    exact = quantize(probabilities, output_log2scale)
    # the exps are the float ones to 2^-17 (relative): only a value within that of a rounding boundary moves, by 1
    assert np.abs(result - exact).max() <= 1
    assert np.mean(result == exact) >= 0.95 or x.size < 20
    np.testing.assert_array_equal(annotated_layer(layer_graph, context, {"a:0": real(x, input_log2scale)}), result)


def test_softmax_exp_table_is_exp_in_q16():
    table = exp_table(3)
    assert table[0] == 2**16 and table.dtype == np.int32 and np.all(np.diff(table) <= 0)
    np.testing.assert_allclose(table / 2.0**16, np.exp(-np.arange(256) / 8.0), atol=2.0**-17)


def test_softmax_keeps_the_arg_max_of_distinct_probabilities():
    def build(x):
        return tf.nn.softmax(identity(x, "a"), name="softmax")

    layer_graph, context = op_context(build, [1, 1, 10], {"input": 7, "a": 3, "softmax": 7})
    fields = fields_of(layer_graph, context)
    x = int8(np.random.default_rng(1), (500, 1, 1, 10))
    result = run(last_layer(layer_graph), fields, [x]).reshape(500, 10)
    logits = x.reshape(500, 10)
    distinct = np.sort(result, axis=1)[:, -1] > np.sort(result, axis=1)[:, -2]
    assert distinct.mean() > 0.9
    np.testing.assert_array_equal(result[distinct].argmax(axis=1), logits[distinct].argmax(axis=1))


# --- mul -------------------------------------------------------------------------------------


@examples
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 8), st.sampled_from(["same", "row"]), st.integers(-1, 7),
       st.integers(-1, 7), st.integers(-4, 4), st.sampled_from(["None", "Relu", "Relu6"]), st.integers(0, 2**32 - 1))
def test_mul_is_tfs_mul_rounded_once(h, w, c, form, s0, s1, out_offset, activation, seed):
    """x * gate with the gate of the same shape or one row broadcast over H."""
    out = s0 + s1 + out_offset - 7

    def build(x):
        a = identity(x, "a")
        gate = {"same": lambda: identity(x, "b"), "row": lambda: tf.nn.max_pool2d(x, [h, 1], [h, 1], "VALID", name="b")}[form]()
        product = tf.multiply(a, gate, name="mul")
        return {"None": lambda: product, "Relu": lambda: tf.nn.relu(product), "Relu6": lambda: tf.nn.relu6(product)}[activation]()

    layer_graph, context = op_context(build, [h, w, c], {"input": 7, "a": s0, "b": s1, "*": out})
    layer = last_layer(layer_graph)
    fields = fields_of(layer_graph, context)
    assert layer.op == "mul" and fields["activation_type"] == activation and fields["output_shift"] == s0 + s1 - out
    rng = np.random.default_rng(seed)
    x0, x1 = int8(rng, (1, *fields["input0_shape"])), int8(rng, (1, *fields["input1_shape"]))
    product = real(x0, s0) * real(x1, s1)
    product = {"None": product, "Relu": np.maximum(product, 0), "Relu6": np.clip(product, 0, 6)}[activation]
    expected = quantize(product, out)
    np.testing.assert_array_equal(run(layer, fields, [x0, x1]), expected)
    np.testing.assert_array_equal(annotated_layer(layer_graph, context, {"a:0": real(x0, s0), "b:0": real(x1, s1)}), expected)


# --- batch_matmul and transpose (a multi-head attention's) ----------------------------------------


@examples
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 6), st.booleans(), st.integers(-1, 7), st.integers(-1, 7),
       st.integers(-4, 4), st.integers(0, 2**32 - 1))
def test_batch_matmul_is_tfs_product_of_two_activations_rounded_once(h, w, c, adj_x, s0, s1, out_offset, seed):
    """[h, w, c] by [h, w, c], the first or the second transposed in its last two axes (a sum over c, or over w): the
    kernel and the annotated graph give TensorFlow's float product, quantized once."""
    out = s0 + s1 + out_offset - 7

    def build(x):
        a, b = identity(x, "a"), tf.nn.avg_pool2d(x, 1, 1, "VALID", name="b")
        return tf.linalg.matmul(a, b, adjoint_a=adj_x, adjoint_b=not adj_x, name="product")

    layer_graph, context = op_context(build, [h, w, c], {"input": 7, "a": s0, "b": s1, "*": out})
    layer = last_layer(layer_graph)
    fields = fields_of(layer_graph, context)
    assert layer.op == "batch_matmul" and fields["output_shift"] == s0 + s1 - out
    rng = np.random.default_rng(seed)
    x0, x1 = int8(rng, (1, h, w, c)), int8(rng, (1, h, w, c))
    first, second = (np.swapaxes(real(x, s), -1, -2) if flag else real(x, s) for x, s, flag in
                     ((x0, s0, fields["adj_x"]), (x1, s1, fields["adj_y"])))
    expected = quantize(np.matmul(first.astype(np.float64), second), out)
    np.testing.assert_array_equal(run(layer, fields, [x0, x1]), expected)
    np.testing.assert_array_equal(annotated_layer(layer_graph, context, {"a:0": real(x0, s0), "b:0": real(x1, s1)}), expected)


def test_a_transpose_moving_the_batch_axis_is_refused_naming_the_node():
    with pytest.raises(GraphError, match=r"Transpose by \[1, 0, 2, 3\] moves the batch axis"):
        op_context(lambda x: tf.transpose(identity(x, "a"), [1, 0, 2, 3], name="moved"), [2, 3, 4], {"input": 7, "a": 5, "*": 5})


def test_squeeze_excitation_is_a_mul_by_a_pooled_gate():
    def build(x):
        a = identity(x, "a")
        gate = tf.nn.avg_pool2d(a, [4, 4], 1, "VALID", name="pool")
        return tf.multiply(a, tf.nn.max_pool2d(gate, 1, 1, "VALID", name="gate"), name="mul")

    layer_graph, context = op_context(build, [4, 4, 3], {"input": 7, "a": 5, "pool": 6, "gate": 6, "mul": 4})
    fields = fields_of(layer_graph, context)
    assert (fields["input0_shape"], fields["input1_shape"], fields["output_shape"]) == ([4, 4, 3], [1, 1, 3], [4, 4, 3])
    x0, x1 = int8(np.random.default_rng(2), (3, 4, 4, 3)), int8(np.random.default_rng(3), (3, 1, 1, 3))
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, [x0, x1]), quantize(real(x0, 5) * real(x1, 6), 4))


# --- concat ----------------------------------------------------------------------------------


@examples
@given(st.sampled_from("HWC"), st.integers(3, 5), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(-1, 6),
       st.lists(st.integers(-3, 3), min_size=5, max_size=5), st.integers(0, 2**32 - 1))
def test_concat_of_n_inputs_is_tfs_concat_bit_for_bit(dim, n, h, w, c, out, offsets, seed):
    axis = {"H": 1, "W": 2, "C": 3}[dim]

    def build(x):
        return tf.concat([identity(x, f"in{k}") for k in range(n)], axis, name="cat")

    scales = {"input": 7, "cat": out, **{f"in{k}": out + offsets[k] for k in range(n)}}
    layer_graph, context = op_context(build, [h, w, c], scales)
    fields = fields_of(layer_graph, context)
    assert last_layer(layer_graph).op == "concat" and fields["input_names"] == [f"in{k}" for k in range(n)]
    rng = np.random.default_rng(seed)
    inputs = [int8(rng, (2, h, w, c)) for _ in range(n)]
    expected = quantize(np.concatenate([real(x, out + offsets[k]) for k, x in enumerate(inputs)], axis), out)
    np.testing.assert_array_equal(run(last_layer(layer_graph), fields, inputs), expected)


def test_concat_of_flattened_vectors_is_along_c():
    def build(x):
        flat = [tf.reshape(identity(x, f"in{k}"), [-1, 12], name=f"flat{k}") for k in range(3)]
        return tf.concat(flat, 1, name="cat")

    layer_graph, context = op_context(build, [2, 2, 3], {"input": 7, "*": 5})
    fields = fields_of(layer_graph, context)
    assert fields["dim"] == "C" and fields["input_sizes"] == [hw(1, 1)] * 3 and fields["output_channel_num"] == 36


# --- resize_nearest --------------------------------------------------------------------------
NEAREST_MODES = [(False, False), (True, False), (False, True)]  # (align_corners, half_pixel_centers)


@examples
@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 15), st.integers(1, 15), st.integers(1, 3), st.sampled_from(NEAREST_MODES),
       st.integers(0, 2**32 - 1))
def test_resize_nearest_is_tfs_resize_nearest_neighbor(in_h, in_w, out_h, out_w, c, mode, seed):
    align, half = mode
    x = int8(np.random.default_rng(seed), (2, in_h, in_w, c))
    expected = tf.raw_ops.ResizeNearestNeighbor(images=x.astype(np.float32), size=[out_h, out_w], align_corners=align,
                                                half_pixel_centers=half).numpy()
    fields = {"dtype": "int8", "align_corners": align, "half_pixel_centers": half, "log2scale": 4, "input_channel_num": c,
              "input_size": hw(in_h, in_w), "output_size": hw(out_h, out_w)}
    record = ir_record("resize_nearest", fields)
    np.testing.assert_array_equal(OPS["resize_nearest"].kernel(record, {}, [x]), expected.astype(np.int8))
    assert list(nearest_indices(in_h, out_h, align, half)) == [int(v) for v in expected_rows(in_h, out_h, align, half)]


def expected_rows(in_size, out_size, align, half):
    """The row TF copies to each output row: read off a resize of the row numbers themselves."""
    rows = np.arange(in_size, dtype=np.float32).reshape(1, in_size, 1, 1)
    return tf.raw_ops.ResizeNearestNeighbor(images=rows, size=[out_size, 1], align_corners=align,
                                            half_pixel_centers=half).numpy().reshape(-1)


def test_keras_upsampling_becomes_one_nearest_resize_sharing_its_inputs_scale():
    inputs = keras.Input((3, 4, 2))
    model = keras.Model(inputs, keras.layers.UpSampling2D((2, 3))(keras.layers.MaxPooling2D(1)(inputs)))
    function = tf.function(lambda t: model(t)).get_concrete_function(tf.TensorSpec((None, 3, 4, 2), tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(function)
    graph = Graph.from_graph_def(frozen.graph.as_graph_def(), "x:0", [frozen.outputs[0].name])
    graph.infer_shapes()
    canonical, notes = canonicalize(fold_constants(graph))
    assert [node.op for node in canonical.nodes if node.op not in ("Const", "Placeholder", "Identity")][-1] == "ResizeNearestNeighbor"
    assert sum(node.op == "ResizeNearestNeighbor" for node in canonical.nodes) == 1 and len(notes) >= 2


# --- add: the annotated graph's integers -----------------------------------------------------


@examples
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(-1, 6), st.integers(-3, 3), st.integers(-3, 3),
       st.sampled_from(["Relu6", "Relu", "None"]), st.integers(0, 2**32 - 1))
def test_the_annotated_add_computes_the_kernels_integers_double_rounding_included(h, w, c, pl, add_offset, out_offset, activation, seed):
    """The annotated graph (what `top1` of the annotate stage measures) and the IR kernel agree
    on every element, including where the two roundings of different scales differ from one."""
    add, out = pl + add_offset, min(pl, pl + add_offset) + out_offset

    def build(x):
        total = tf.add(identity(x, "a"), tf.nn.avg_pool2d(x, 1, 1, "VALID", name="b"), name="sum")
        return {"None": lambda: total, "Relu": lambda: tf.nn.relu(total), "Relu6": lambda: tf.nn.relu6(total)}[activation]()

    layer_graph, context = op_context(build, [h, w, c], {"input": 7, "a": pl, "b": add, "*": out})
    fields = fields_of(layer_graph, context)
    rng = np.random.default_rng(seed)
    x0, x1 = int8(rng, (1, h, w, c)), int8(rng, (1, h, w, c))
    kernel = run(last_layer(layer_graph), fields, [x0, x1])
    np.testing.assert_array_equal(annotated_layer(layer_graph, context, {"a:0": real(x0, pl), "b:0": real(x1, add)}), kernel)


# --- each extension's C is its kernel --------------------------------------------------------
C_GRAPHS = {  # op -> (build, input shape, the scales of its inputs' layers)
    "conv (dense)": (lambda x: tf.nn.bias_add(tf.matmul(tf.reshape(identity(x, "a"), [-1, 24]), tf.constant(
        np.random.default_rng(0).integers(-128, 128, (24, 5)) / 64.0, tf.float32)), tf.constant(np.arange(5) / 32.0, tf.float32)),
        [2, 3, 4], {"a": 4}),
    "lut": (lambda x: FUNCTIONS["hard_swish"](identity(x, "a")), [3, 4, 5], {"a": 5}),
    "softmax": (lambda x: tf.nn.softmax(identity(x, "a")), [1, 2, 11], {"a": 3}),
    "mul": (lambda x: identity(x, "a") * tf.nn.avg_pool2d(x, [3, 4], 1, "VALID", name="b"), [3, 4, 5], {"a": 6, "b": 5}),
    "concat": (lambda x: tf.concat([identity(x, "a"), tf.nn.avg_pool2d(x, 1, 1, "VALID", name="b"), identity(x, "c")], 2),
               [3, 2, 2], {"a": 6, "b": 4, "c": 7}),
    "batch_matmul": (lambda x: tf.linalg.matmul(identity(x, "a"), tf.nn.avg_pool2d(x, 1, 1, "VALID", name="b"), adjoint_b=True),
                     [3, 4, 5], {"a": 6, "b": 5}),
    "transpose": (lambda x: tf.transpose(identity(x, "a"), [0, 3, 1, 2]), [3, 4, 5], {"a": 6}),
    "resize_nearest": (lambda x: tf.raw_ops.ResizeNearestNeighbor(images=identity(x, "a"), size=[5, 7], half_pixel_centers=True),
                       [3, 2, 2], {"a": 6}),
}


@pytest.mark.parametrize("case", sorted(C_GRAPHS))
@c_examples
@given(out=st.integers(-1, 7), seed=st.integers(0, 2**32 - 1))
def test_each_extensions_c_is_its_kernel_bit_for_bit(tmp_path, case, out, seed):
    build, shape, scales = C_GRAPHS[case]
    layer_graph, context = op_context(build, shape, {"input": 7, **scales, "*": out})
    layer = last_layer(layer_graph)
    assert layer.op == case.split()[0] and set(scales) <= {item.name for item in layer_graph.layers}
    if layer.weight:
        context.table.tensors.update(_constant_entries(layer_graph, 6, 5))
    fields = {"operation": layer.op, **fields_of(layer_graph, context)}
    params = OPS[layer.op].params(layer, context)
    rng = np.random.default_rng(seed)
    record = OPS[layer.op].describe(layer, context)
    inputs = [int8(rng, (3, *record.shape_of_input(k))) for k in range(len(layer.inputs))]
    check_layer(fields, params, inputs, tmp_path / str(seed))
