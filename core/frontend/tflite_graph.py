"""A `.tflite` model (core/frontend/tflite.py) as the TensorFlow graph the rest of the importer takes:
each operator written with the TensorFlow ops a Keras model freezes to (Conv2D, BiasAdd, Relu6,
AvgPool, MatMul, ...), weights and biases dequantized to float32, and, for an int8 (or 16x8) model, the file's
quantization kept as FakeQuant nodes (each activation's range, each weight's per-channel narrow
range), as a quantization-aware graph carries its training's: `calib.method=qat` then calibrates the
model "as trained", and any other method calibrates it like a float model. A float `.tflite` becomes
a float graph. The float ranges only approximate the file's float32 scales, so each FakeQuant's exact
scale(s) and zero point(s) come with the graph (fake_quant.EXACT_PARAMETERS), for tflite_int8 to keep
bit for bit."""

from __future__ import annotations

import re

from dataclasses import replace

from typing import Callable

import numpy as np

from core.frontend.canonicalize import MAX_LEAKY_SLOPE
from core.frontend.tflite import ACTIVATION_BITS, EXPLICIT_PADDING, FIXED_OUTPUTS, TfliteError, TfliteModel, TfliteOperator
from core.frontend.tflite_batch import restored_batch_axes
from core.frontend.tflite_shapes import SHAPE_CONVERTERS
from core.frontend.tflite_tf import INPUT_NAME, TfBuilder, constant_input, dequantized

def _conv(b: TfBuilder, op: TfliteOperator, scope: str):
    weight = b.model.tensor(op.inputs[1])
    hwio = dequantized(weight).transpose(1, 2, 3, 0)  # OHWI -> HWIO
    strides, dilations = [1, op.option("strideH"), op.option("strideW"), 1], [1, op.option("dilationHFactor", 1), op.option("dilationWFactor", 1), 1]
    x = b.tf.nn.conv2d(b.input(op), b.weight(op.inputs[1], scope, hwio), strides, op.padding, dilations=dilations, name=f"{scope}/Conv2D")
    return _biased(b, op, x, scope)


def _depthwise(b: TfBuilder, op: TfliteOperator, scope: str):
    weight = b.model.tensor(op.inputs[1])
    channels = b.model.tensor(op.inputs[0]).shape[3]
    _, kh, kw, total = weight.shape
    kernel = b.weight(op.inputs[1], scope, dequantized(weight).reshape(kh, kw, channels, total // channels), channel_axis_last=False)
    strides, dilations = [1, op.option("strideH"), op.option("strideW"), 1], [op.option("dilationHFactor", 1), op.option("dilationWFactor", 1)]
    # one channel (litert-torch's Conv1d on a waveform, strides 1 x s): the Conv2D it is; TensorFlow's CPU depthwise
    # kernel takes equal strides only where oneDNN does not stand in for it (an AVX2 machine's build)
    convolve = b.tf.nn.conv2d if channels == 1 and strides[1] != strides[2] else b.tf.nn.depthwise_conv2d
    x = convolve(b.input(op), kernel, strides, op.padding, dilations=dilations, name=f"{scope}/depthwise")
    return _biased(b, op, x, scope)


def _fully_connected(b: TfBuilder, op: TfliteOperator, scope: str):
    weight = b.model.tensor(op.inputs[1])
    if op.option("weightsFormat", 0) != 0:  # the shuffled layout is uint8's, which LiteRT's int8 kernel refuses
        raise TfliteError(f"{b.model.path}: operator {op.index} (FULLY_CONNECTED): option weightsFormat is {op.option('weightsFormat')}; "
                          "the reader takes the DEFAULT weights layout (0), as LiteRT's int8 and float kernels do")
    x, output = b.input(op), b.model.tensor(op.outputs[0]).shape
    if len(x.shape) == 4 and len(output) == 4:  # a Linear on every pixel (keepNumDims): the 1x1 convolution it is
        kernel = b.weight(op.inputs[1], scope, dequantized(weight).T[None, None])
        return _biased(b, op, b.tf.nn.conv2d(x, kernel, 1, "VALID", name=f"{scope}/Conv2D"), scope)
    if len(output) > 2 and len(x.shape) != len(output):  # rows flattened from more axes (an attention's heads [N, 1, L, C])
        x = b.tf.reshape(x, [-1, *output[1:-1], weight.shape[1]], name=f"{scope}/tokens")
    if len(x.shape) != 2:
        x = b.tf.reshape(x, [-1, weight.shape[1]], name=f"{scope}/Reshape")
    x = b.tf.matmul(x, b.weight(op.inputs[1], scope, dequantized(weight).T), name=f"{scope}/MatMul")
    if len(output) > 2:  # a Dense on every token (keepNumDims, or a batch given back: tflite_batch.py): Keras 3's Tensordot form
        x = b.tf.reshape(x, [-1, *output[1:]], name=f"{scope}/Tensordot")
    return _biased(b, op, x, scope)


def _biased(b: TfBuilder, op: TfliteOperator, x, scope: str):
    bias = b.bias(op, scope)
    x = x if bias is None else b.tf.nn.bias_add(x, bias, name=f"{scope}/BiasAdd")
    return b.finish(op, x, scope)


def _pool(function: str, name: str):
    def convert(b: TfBuilder, op: TfliteOperator, scope: str):
        size, strides = [1, op.option("filterHeight"), op.option("filterWidth"), 1], [1, op.option("strideH"), op.option("strideW"), 1]
        padding: str | list[list[int]] = op.padding
        if EXPLICIT_PADDING in op.options:  # a PADV2 folded into a max pool: TensorFlow's MaxPool takes it
            top, bottom, left, right = op.options[EXPLICIT_PADDING]
            padding = [[0, 0], [top, bottom], [left, right], [0, 0]]
        return b.finish(op, b.function(function)(b.input(op), size, strides, padding, name=f"{scope}/{name}"), scope)
    return convert


def _binary(function: str, name: str, constants: bool = False):
    """`constants`: a constant operand of a value for every element is an activation of its own (TfBuilder.operands)."""
    def convert(b: TfBuilder, op: TfliteOperator, scope: str):
        first, second = b.ranks_aligned(op, b.operands(op, scope) if constants else [b.input(op, 0), b.input(op, 1)], scope)
        return b.finish(op, b.function(function)(first, second, name=f"{scope}/{name}"), scope)
    return convert


def _batch_matmul(b, op, scope):
    product = b.tf.linalg.matmul(b.input(op, 0), b.input(op, 1), adjoint_a=bool(op.option("adjX", False)),
                                 adjoint_b=bool(op.option("adjY", False)), name=f"{scope}/BatchMatMul")
    return b.activation_quant(product, op.outputs[0], scope)


def _softmax(b, op, scope):
    beta = float(op.option("beta", 1.0))
    if not 0.0 < beta < float("inf"):  # a NaN fails this too; LiteRT aborts on a beta of 0
        raise TfliteError(f"{b.model.path}: operator {op.index} (SOFTMAX) of beta {beta}; a softmax's beta is positive and finite")
    x = b.input(op) if beta == 1.0 else b.tf.multiply(b.input(op), beta, name=f"{scope}/beta")
    return b.activation_quant(b.tf.nn.softmax(x, name=f"{scope}/Softmax"), op.outputs[0], scope)


def _mean(b, op, scope):
    axes = [int(axis) for axis in np.atleast_1d(constant_input(b, op, 1))]
    x = b.tf.reduce_mean(b.input(op), axes, keepdims=bool(op.option("keepDims", False)), name=f"{scope}/Mean")
    return b.activation_quant(x, op.outputs[0], scope)


def _sum(b, op, scope):
    """SUM of one element per output (litert-torch's global average pool of a 1x1 map): the mean, which is what the
    importer's global pool reads; a sum of several is refused here, before any stage computes on it."""
    axes = [int(axis) for axis in np.atleast_1d(constant_input(b, op, 1))]
    shape = b.model.tensor(op.inputs[0]).shape
    if int(np.prod([shape[axis] for axis in axes])) != 1:
        raise TfliteError(f"{b.model.path}: operator {op.index} (SUM) over axes {axes} of a {list(shape)} tensor adds several elements; "
                          "the importer takes SUM of a 1x1 map (a mean of one element); convert the pooling as a MEAN")
    x = b.tf.reduce_mean(b.input(op), axes, keepdims=bool(op.option("keepDims", False)), name=f"{scope}/Mean")
    return b.activation_quant(x, op.outputs[0], scope)


def _reduce_max(b, op, scope):
    axes = [int(axis) for axis in np.atleast_1d(constant_input(b, op, 1))]
    x = b.tf.reduce_max(b.input(op), axes, keepdims=bool(op.option("keepDims", False)), name=f"{scope}/Max")
    return b.activation_quant(x, op.outputs[0], scope)


def _unary(function: str, name: str):
    def convert(b, op, scope):
        return b.activation_quant(b.function(function)(b.input(op), name=f"{scope}/{name}"), op.outputs[0], scope)
    return convert


def _clip(low: float, high: float):
    def convert(b, op, scope):
        x = b.tf.maximum(b.tf.minimum(b.input(op), high, name=f"{scope}/Minimum"), low, name=f"{scope}/Maximum")
        return b.activation_quant(x, op.outputs[0], scope)
    return convert


def _hard_swish(b, op, scope):
    x = b.input(op)
    x = b.tf.multiply(x, b.tf.nn.relu6(x + 3.0) / 6.0, name=f"{scope}/hard_swish")
    return b.activation_quant(x, op.outputs[0], scope)


def _gelu(b, op, scope):
    """TensorFlow's gelu, exact or approximate as the operator says: the ops Keras' gelu computes, one lookup table."""
    x = b.tf.nn.gelu(b.input(op), approximate=bool(op.option("approximate", False)), name=f"{scope}/Gelu")
    return b.activation_quant(x, op.outputs[0], scope)


def _leaky_relu(b, op, scope):
    alpha = float(op.option("alpha", 0.2))
    if not 0.0 <= alpha <= MAX_LEAKY_SLOPE:  # a NaN fails this too
        raise TfliteError(f"{b.model.path}: operator {op.index} (LEAKY_RELU) of alpha {alpha}; the reader takes a slope 0 <= alpha <= "
                          f"{MAX_LEAKY_SLOPE:g} below zero (past it, LiteRT's requantization overflows int32)")
    x = b.tf.nn.leaky_relu(b.input(op), alpha=alpha, name=f"{scope}/LeakyRelu")
    return b.activation_quant(x, op.outputs[0], scope)


def _prelu(b, op, scope):
    """PRELU as Keras' PReLU computes it, relu(x) - alpha relu(-x): a slope per channel (PyTorch's nn.PReLU, Keras'
    shared over height and width) is a per-channel scale the importer runs as a depthwise 1x1 conv; one slope in all, the
    LeakyRelu the importer makes of it (canonicalize.py: leaky_relu_sums). A slope per element has no IR form: refused
    here, naming it."""
    constant_input(b, op, 1)
    alpha, channels = dequantized(b.model.tensor(op.inputs[1])), b.model.tensor(op.inputs[0]).shape[-1]
    if alpha.size != 1 and (alpha.size != channels or alpha.shape[-1:] != (channels,)):
        raise TfliteError(f"{b.model.path}: operator {op.index} (PRELU) of a slope of shape {list(alpha.shape)} on {channels} "
                          "channels; the reader takes one slope per channel or one in all (PyTorch's nn.PReLU, Keras' "
                          "PReLU(shared_axes=[1, 2]))")
    x = b.input(op)
    below = b.tf.nn.relu(b.tf.negative(x, name=f"{scope}/Neg"), name=f"{scope}/Relu_1")
    slope = float(-alpha.reshape(-1)[0]) if alpha.size == 1 else -alpha.reshape(-1)
    y = b.tf.add(b.tf.nn.relu(x, name=f"{scope}/Relu"), b.tf.multiply(below, slope, name=f"{scope}/mul"), name=f"{scope}/add")
    return b.activation_quant(y, op.outputs[0], scope)


def _resize(function: str):
    def convert(b, op, scope):
        if op.option("alignCorners", False) and op.option("halfPixelCenters", False):
            raise TfliteError(f"{b.model.path}: operator {op.index} ({op.name}) with both align_corners and half_pixel_centers: "
                              "LiteRT refuses them together (half_pixel_centers requires align_corners false)")
        size = [int(v) for v in constant_input(b, op, 1)]
        x = b.function(function)(b.input(op), size, align_corners=bool(op.option("alignCorners", False)),
                     half_pixel_centers=bool(op.option("halfPixelCenters", False)), name=f"{scope}/resize")
        return b.activation_quant(x, op.outputs[0], scope)
    return convert


def _quantize(b, op, scope):
    """QUANTIZE and DEQUANTIZE are the identity on real values: the tensor's range is its FakeQuant."""
    return b.activation_quant(b.tf.identity(b.input(op), name=f"{scope}/Identity"), op.outputs[0], scope)


CONVERTERS: dict[str, Callable[[TfBuilder, TfliteOperator, str], object]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _binary("add", "add", constants=True),
    "SUB": _binary("subtract", "sub"),
    "MUL": _binary("multiply", "mul"),
    "DIV": _binary("math.divide", "div"),
    "SQUARED_DIFFERENCE": _binary("math.squared_difference", "SquaredDifference"),
    "MINIMUM": _binary("math.minimum", "Minimum"),
    "RELU": _unary("nn.relu", "Relu"),
    "RELU6": _unary("nn.relu6", "Relu6"),
    "RELU_N1_TO_1": _clip(-1.0, 1.0),
    "RELU_0_TO_1": _clip(0.0, 1.0),
    "MAXIMUM": _binary("math.maximum", "Maximum"),
    "AVERAGE_POOL_2D": _pool("nn.avg_pool2d", "avg_pool2d"),
    "MAX_POOL_2D": _pool("nn.max_pool2d", "max_pool2d"),
    "BATCH_MATMUL": _batch_matmul,
    "SOFTMAX": _softmax,
    "MEAN": _mean,
    "SUM": _sum,
    "REDUCE_MAX": _reduce_max,
    "LOGISTIC": _unary("math.sigmoid", "Sigmoid"),
    "TANH": _unary("math.tanh", "Tanh"),
    "GELU": _gelu,
    "EXP": _unary("math.exp", "Exp"),
    "RSQRT": _unary("math.rsqrt", "Rsqrt"),
    "SQRT": _unary("math.sqrt", "Sqrt"),
    "NEG": _unary("math.negative", "Neg"),
    "HARD_SWISH": _hard_swish,
    "LEAKY_RELU": _leaky_relu,
    "PRELU": _prelu,
    "RESIZE_NEAREST_NEIGHBOR": _resize("compat.v1.image.resize_nearest_neighbor"),
    "RESIZE_BILINEAR": _resize("compat.v1.image.resize_bilinear"),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _quantize,
    **SHAPE_CONVERTERS,
}


# operators read in a float file only: the importer's rewrites make them layers of the IR (a LayerNorm's SUB,
# SQUARED_DIFFERENCE and SQRT; a DIV by a constant; nn.Embedding's EMBEDDING_LOOKUP), which our PTQ quantizes; the int8
# kernels of the file's own quantization (core/ir/tflite_interpreter.py) are not written yet, and LiteRT has none for
# SQRT and DIV of int8 (a Conv1d's EXPAND_DIMS and SQUEEZE are read in both: the reshapes they are); an unrolled RNN's
# SPLIT, SPLIT_V, UNPACK and PACK (onnx2tf's -eru), one operator of several IR layers, have no int8 IR record yet
FLOAT_ONLY = frozenset({"SUB", "DIV", "SQUARED_DIFFERENCE", "SQRT", "NEG", "EMBEDDING_LOOKUP", "PRELU", "SPLIT", "SPLIT_V", "UNPACK", "PACK"})
FLOAT_ONLY_NOTE = (f"; in a float file also {', '.join(sorted(FLOAT_ONLY))} (convert the model without quantization and let the "
                   "toolchain quantize it)")


# how many of one unread operator's occurrences a refusal names, and how much of each output tensor's name (a converter's
# names run to hundreds of characters)
NAMED_OCCURRENCES, NAME_CHARACTERS = 4, 60

# what to do about an operator the reader does not take, where there is better than cutting the model
ADVICE = {
    "custom operator 'FlexErf'": "an exact GELU as ONNX writes it before opset 20, whose Erf onnx2tf keeps as a TensorFlow op: "
                                 "export the ONNX file at opset 20 or later, whose Gelu onnx2tf writes as TFLite's GELU",
}
# a TensorFlow op a converter kept as it is (SELECT_TF_OPS): TFLite's builtin kernels, and so its int8 scheme, have none
FLEX_ADVICE = "a TensorFlow op kept as it is (Flex: converted with SELECT_TF_OPS); convert with TFLite's builtin operators only"


def _advice(name: str) -> str:
    if name in ADVICE:
        return f": {ADVICE[name]}"
    return f": {FLEX_ADVICE}" if name.startswith("custom operator 'Flex") else ""


def refuse_unread_operators(model: TfliteModel) -> TfliteModel:
    """`model`, if each of its operators has a converter (CONVERTERS: what the toolchain reads); else a TfliteError naming
    every operator it does not read, at once: each kind with its count, the first occurrences' indices and output
    tensors (the layers), and what is read, so that a user mends the model once rather than one operator a run."""
    unread: dict[str, list[TfliteOperator]] = {}
    readable = CONVERTERS.keys() - (FLOAT_ONLY if model.quantized else set())
    for operator in model.operators:
        if operator.name not in readable:
            unread.setdefault(operator.name, []).append(operator)
    if not unread:
        return model
    lines = []
    for name, operators in sorted(unread.items()):
        named = [f"{operator.index} ({_short(model.tensor(operator.outputs[0]).name)})" for operator in operators[:NAMED_OCCURRENCES]]
        more = f" and {len(operators) - NAMED_OCCURRENCES} more" if len(operators) > NAMED_OCCURRENCES else ""
        lines.append(f"  - {name}: {len(operators)} operator{'s' if len(operators) > 1 else ''}, {', '.join(named)}{more}{_advice(name)}")
    count = sum(len(operators) for operators in unread.values())
    raise TfliteError(f"{model.path}: {count} operator{'s' if count > 1 else ''} of {len(unread)} kind{'s' if len(unread) > 1 else ''} "
                      f"the toolchain does not read (operator index, output tensor):\n" + "\n".join(lines) +
                      f"\nit reads {', '.join(sorted(readable))}{FLOAT_ONLY_NOTE if model.quantized else ''}. Cut the model before "
                      "them (convert a sub-model) or replace those layers")


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARACTERS else f"...{name[-(NAME_CHARACTERS - 3):]}"


# the operators whose LiteRT kernels take computed int8 and int16 tensors together: the conversions, SOFTMAX's and
# FULLY_CONNECTED's int16 output of an int8 input, MEAN's requantization; every other kernel checks one type throughout
# (add.cc: "input1->type != input2->type"), or, as RESHAPE, copies the bytes of one type into a tensor of the other
MIXED_WIDTHS = ("QUANTIZE", "DEQUANTIZE", "SOFTMAX", "FULLY_CONNECTED", "MEAN")


def refuse_mixed_activation_types(model: TfliteModel) -> None:
    """A TfliteError naming the first operator computing on int8 and int16 activations that LiteRT's kernel refuses."""
    path, tensors = model.path, model.tensors
    for operator in model.operators:
        if operator.name in MIXED_WIDTHS:
            continue
        computed = [tensors[index] for index in (*operator.inputs, *operator.outputs)
                    if index >= 0 and tensors[index].data is None and tensors[index].dtype in ACTIVATION_BITS]
        if len({tensor.dtype for tensor in computed}) > 1:
            listed = ", ".join(f"{tensor.index} ({tensor.name}) {tensor.dtype}" for tensor in computed)
            raise TfliteError(f"{path}: operator {operator.index} ({operator.name}) computes on the tensors {listed}; LiteRT's "
                              f"{operator.name} kernel takes one type throughout (INT8, or INT16 in the 16x8 mode): the file is "
                              "damaged, or converted with its types edited")


def tflite_graph_def(model: TfliteModel):
    """(GraphDef, input tensor name, end point names, each FakeQuant's exact parameters) of `model`
    written as TensorFlow ops, each tensor with its batch axis first (tflite_batch.py)."""
    import tensorflow as tf

    refuse_unread_operators(model)
    refuse_mixed_activation_types(model)
    tensors, operators = restored_batch_axes(model.path, model.tensors, model.operators, model.inputs)
    model = replace(model, tensors=tensors, operators=operators)

    graph = tf.Graph()
    with graph.as_default():
        builder = TfBuilder(model, tf)
        names = _input_names(model)
        for index, name in zip(model.inputs, names):
            source = model.tensor(index)
            # token ids (onnx2tf's int64 ones read as the int32 the toolchain feeds), or values (their FakeQuant)
            dtype = tf.int32 if source.dtype in ("INT32", "INT64") else tf.float32
            placeholder = tf.compat.v1.placeholder(dtype, [None, *source.shape[1:]], name=name)
            builder.values[index] = builder.activation_quant(placeholder, index, name)
        for operator in model.operators:
            _refuse_constant_operator(model, operator, builder.values)
            try:
                value = CONVERTERS[operator.name](builder, operator, builder.scope(operator))
            except (TypeError, ValueError) as error:  # TensorFlow's own checks of the ops it is written as: types, shapes
                if isinstance(error, TfliteError):
                    raise
                raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}): its tensors do not make the operation "
                                  f"({str(error).splitlines()[0][:300]}); the file is damaged, or was written by a tool that does "
                                  "not check it") from None
            _refuse_other_fixed_output(model, operator)
            for output, computed in zip(operator.outputs, value if isinstance(value, list) else [value]):  # a SPLIT's: one each
                _refuse_stale_output(model, operator, computed, output)
                builder.values[output] = computed
        outputs = [tf.identity(builder.values[index], name=f"output_{k}") for k, index in enumerate(model.outputs)]
    inputs = [f"{name}:0" for name in names]
    return graph.as_graph_def(), inputs[0] if len(inputs) == 1 else inputs, [tensor.name for tensor in outputs], builder.parameters


def _refuse_constant_operator(model: TfliteModel, operator: TfliteOperator, computed: dict) -> None:
    """An operator reads a model input or an earlier operator's output: one of constants alone computes a constant, which a
    converter folds (LiteRT runs it; the IR's layers compute on activations)."""
    if not any(index in computed for index in operator.inputs):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) reads only constants (tensors "
                          f"{[index for index in operator.inputs if index >= 0]}), no model input and no earlier operator's output: "
                          "the file is damaged, or its converter left a constant computation unfolded")


def _refuse_other_fixed_output(model: TfliteModel, operator: TfliteOperator) -> None:
    output = model.tensor(operator.outputs[0])
    if operator.name not in FIXED_OUTPUTS or output.dtype not in ACTIVATION_BITS or output.quantization is None:
        return
    scale, zero_point = FIXED_OUTPUTS[operator.name][ACTIVATION_BITS[output.dtype]]
    found = (float(output.quantization.scale[0]), int(output.quantization.zero_point[0]))
    if found != (float(np.float32(scale)), zero_point):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) writes tensor {output.index} ({output.name}) at scale "
                          f"{found[0]:g}, zero point {found[1]}; LiteRT's {output.dtype} {operator.name} requires scale {scale:g}, zero "
                          f"point {zero_point} (and refuses the file otherwise): the file is damaged")


def _refuse_stale_output(model: TfliteModel, operator: TfliteOperator, value, output: int) -> None:
    """The output tensor's declared shape holds what the operator computes of its inputs. LiteRT recomputes a shape it
    declares wrong (a stale one) and runs; the IR keeps the declared shapes, so the file is refused here, naming both."""
    declared = model.tensor(output)
    computed = value.shape.as_list()[1:] if value.shape.rank is not None else None
    if computed is None or any(dim is None for dim in computed):
        return
    if int(np.prod(computed)) != int(np.prod(declared.shape[1:])):
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) computes [N, {', '.join(map(str, computed))}] of its "
                          f"inputs; its output tensor {declared.index} ({declared.name}) declares {list(declared.shape)}: a stale shape "
                          "(LiteRT recomputes it); convert the model again, or fix the tensor's shape")


def _input_names(model: TfliteModel) -> list[str]:
    """The Placeholders' names: `input` for a file of one input; each of several named as the file names it (every
    character but letters, digits and _ made _), else input_<k>."""
    if len(model.inputs) == 1:
        return [INPUT_NAME]
    names = [re.sub(r"[^A-Za-z0-9_]", "_", model.tensor(index).name).strip("_") or f"input_{k}" for k, index in enumerate(model.inputs)]
    return names if len(set(names)) == len(names) else [f"input_{k}" for k in range(len(names))]
