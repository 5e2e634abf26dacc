"""A `.tflite` file as the toolchain reads it: its one subgraph's tensors (shape, type, constant data,
quantization: scales, zero points, the quantized axis) and operators (builtin name, input and output
tensors, options), parsed with LiteRT's own flatbuffer bindings (ai_edge_litert.tools.flatbuffer_utils,
generated from TFLite's schema and kept with it; TensorFlow's copy of them costs TensorFlow's import) and checked
before anything is computed: a malformed or truncated file, or a tensor type the int8 scheme has no
kernels for, is one TfliteError naming the file, the operator's index or the tensor, and what would work. Which
operators the toolchain reads is what reads them: tflite_graph.CONVERTERS, whose check refuses any other.

Read as the model computes on its static batch: shape arithmetic (SHAPE of a tensor, and PACK, STRIDED_SLICE,
CONCATENATION, TILE, GATHER, RESHAPE, REDUCE_PROD, MUL, ADD of constants, each giving int32 or int64), which a
converter writes for a dynamic batch (a Flatten's target shape), is folded into the constants it computes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils

from core.frontend.grouped import grouped_filter_as_dense
from core.frontend.tflite_ids import unwrapped_token_ids
from core.limits import MemoryBudget

FILE_IDENTIFIER = b"TFL3"
# tensor types: int8 activations and weights, int32 biases and shapes, float32 (a float model, or around
# QUANTIZE / DEQUANTIZE), and TFLite's 16x8 mode's int16 activations and int64 biases; the others have no kernels
TENSOR_TYPES = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FLOAT32": np.float32}
ACTIVATION_BITS = {"INT8": 8, "INT16": 16}  # a quantized model's activations: int8, or int16 (16x8 mode); their widths
# float16 weights (the converter's float16 quantization) are constants each DEQUANTIZE'd to float32: read as those
CONSTANT_TYPES = {"FLOAT16": np.float16}
COMPARISON_TYPES = {"BOOL": np.bool_}  # read; refused where a wrap of ids did not take them away (tflite_ids.py)
NUMPY_TYPES = {**TENSOR_TYPES, **CONSTANT_TYPES, **COMPARISON_TYPES}


@lru_cache(maxsize=None)
def _names(enum: str) -> dict[int, str]:
    """code -> name in one of TFLite's schema enums (BuiltinOperator, TensorType, Padding,
    ActivationFunctionType)."""
    return {code: name for name, code in vars(getattr(schema, enum)).items() if not name.startswith("_")}


class TfliteError(ValueError):
    """A .tflite file the toolchain cannot take; the message names the file and what to do."""


@dataclass(frozen=True)
class Quantization:
    """real = (q - zero_point) * scale, per channel along `axis` when there are several."""

    scale: np.ndarray  # float32, one per channel (or one)
    zero_point: np.ndarray  # int64, as many
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclass(frozen=True)
class TfliteTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str  # "INT8", "INT16", "INT32", "INT64", "FLOAT32"
    quantization: Quantization | None
    data: np.ndarray | None = None  # a constant's value (weights, biases, shapes)

    @property
    def numpy_dtype(self) -> type:
        return NUMPY_TYPES[self.dtype]


@dataclass(frozen=True)
class TfliteOperator:
    index: int
    name: str  # the builtin operator, e.g. "CONV_2D"
    inputs: tuple[int, ...]  # tensor indices; -1: an optional input left out (a conv without bias)
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)

    @property
    def padding(self) -> str:
        return _names("Padding")[self.options["padding"]]

    @property
    def activation(self) -> str:
        """The fused activation: "NONE", "RELU", "RELU6", "RELU_N1_TO_1", ..."""
        return _names("ActivationFunctionType")[self.options.get("fusedActivationFunction", 0)]


# options that count (a window, a stride, a dilation): 1 or more, checked at read
MAX_WINDOW = 2**16
POSITIVE_OPTIONS = ("filterHeight", "filterWidth", "strideH", "strideW", "dilationHFactor", "dilationWFactor")
# options whose value is one of a TFLite schema enum's (checked at read: a damaged value is refused naming it)
ENUM_OPTIONS = {"padding": "Padding", "fusedActivationFunction": "ActivationFunctionType", "quantizedBiasType": "TensorType"}


@dataclass(frozen=True)
class TfliteModel:
    path: str
    tensors: tuple[TfliteTensor, ...]
    operators: tuple[TfliteOperator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def tensor(self, index: int) -> TfliteTensor:
        if not 0 <= index < len(self.tensors):  # -1: an operator's optional input left out, never a tensor to read
            raise TfliteError(f"{self.path}: tensor {index} is read, of the {len(self.tensors)} the model has: an input the operator "
                              "needs is left out or out of range; the file is damaged")
        return self.tensors[index]

    @property
    def quantized(self) -> bool:
        """A quantized model: its activations are int8, or int16 in the 16x8 mode (its input, or what its QUANTIZE makes
        of it)."""
        return any(tensor.dtype in ACTIVATION_BITS and tensor.data is None for tensor in self.tensors)

    @property
    def activation_bits(self) -> int:
        """The width of a quantized model's activations: 16 in TFLite's 16x8 mode, else 8."""
        return 16 if any(tensor.dtype == "INT16" and tensor.data is None for tensor in self.tensors) else 8


def read_tflite(path: Path, budget: MemoryBudget | None = None) -> TfliteModel:
    """The model in `path`, every part checked (see the module's docstring)."""
    path = Path(path)
    if not path.is_file():
        raise TfliteError(f"{path}: no such file; expected a .tflite flatbuffer; fix model.file.path")
    if budget is not None:
        budget.check(f"model file {path}", path.stat().st_size)
    return parse_tflite(path.read_bytes(), path, budget)


def parse_tflite(data: bytes, path: Path | str, budget: MemoryBudget | None = None) -> TfliteModel:
    """The model a .tflite file's bytes hold, every part checked; `path` names it in messages."""
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise TfliteError(f"{path}: not a TensorFlow Lite flatbuffer (no {FILE_IDENTIFIER.decode()} identifier at bytes 4-8); "
                          "expected a .tflite file from TFLite's converter")
    try:
        model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    except Exception as error:  # the generated bindings raise whatever a bad offset leads them to
        raise TfliteError(f"{path}: damaged or truncated flatbuffer ({type(error).__name__}: {error}); "
                          "convert the model again") from None
    subgraphs = model.subgraphs or []
    if len(subgraphs) != 1:
        raise TfliteError(f"{path}: {len(subgraphs)} subgraphs; the toolchain reads models of one (no control flow, an RNN's WHILE "
                          "loop): convert it unrolled (onnx2tf -eru; Keras' unroll=True; litert-torch unrolls)")
    graph = subgraphs[0]
    tensors = tuple(_tensor(path, model, index, tensor, budget) for index, tensor in enumerate(graph.tensors or []))
    operators = tuple(_operator(path, model, index, operator, len(tensors)) for index, operator in enumerate(graph.operators or []))
    inputs, outputs = (tuple(int(i) for i in (ends if ends is not None else [])) for ends in (graph.inputs, graph.outputs))
    if not inputs or not outputs:
        raise TfliteError(f"{path}: {len(inputs)} inputs and {len(outputs)} outputs; the toolchain takes at least one of each")
    tensors, operators = _dequantized_constants(path, tensors, operators)
    tensors, operators = unwrapped_token_ids(tensors, operators, outputs)
    _check_constant_operands(path, tensors, operators)
    tensors, operators = _folded_shape_arithmetic(tensors, operators, outputs)
    operators = _folded_paddings(tensors, operators, outputs)
    tensors, operators = _grouped_convolutions_as_depthwise(path, tensors, operators)
    return TfliteModel(str(path), tensors, operators, inputs, outputs)


# the operands of these operators that are the layer's own constants, and the types LiteRT's kernels take for each: the
# weights (int8, or float32 in a float model) and the bias (int32, int64 in the 16x8 mode, or float32), which may be left out
CONSTANT_OPERANDS = {name: {1: ("INT8", "FLOAT32"), 2: ("INT32", "INT64", "FLOAT32")}
                     for name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")}
OPTIONAL_OPERANDS = {2}
# LiteRT's quantized convolutions require the bias ("Tensor at index 2 was optional but was expected"); its fully
# connected layer and float kernels leave it optional
BIAS_REQUIRED_QUANTIZED = ("CONV_2D", "DEPTHWISE_CONV_2D")


# operands that are indices (axes, shapes, paddings, bounds, permutations, sizes, positions): integers, as LiteRT's kernels
# require of them (slice.cc: "begin->type == kTfLiteInt32 || begin->type == kTfLiteInt64")
INDEX_OPERANDS = {"EXPAND_DIMS": (1,), "SLICE": (1, 2), "STRIDED_SLICE": (1, 2, 3), "PAD": (1,), "PADV2": (1,), "MEAN": (1,), "SUM": (1,), "REDUCE_MAX": (1,),
                  "TRANSPOSE": (1,), "RESHAPE": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2), "GATHER": (1,), "EMBEDDING_LOOKUP": (0,), "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,)}
INDEX_TYPES = ("INT32", "INT64")


def _check_constant_operands(path: Path | str, tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...]) -> None:
    for operator in operators:
        if (bool_tensor := next((tensors[i] for i in (*operator.inputs, *operator.outputs) if i >= 0 and tensors[i].dtype == "BOOL"), None)):
            raise TfliteError(f"{path}: tensor {bool_tensor.index} ({bool_tensor.name}) is BOOL (a comparison's result); the reader takes "
                              "one comparison only, a text model's wrap of negative token ids (SELECT_V2(LESS(ids, 0), ADD(ids, V), ids)): "
                              "cut the model before it, or import the Keras model or SavedModel it was converted from")
        for position in INDEX_OPERANDS.get(operator.name, ()):
            index = operator.inputs[position] if position < len(operator.inputs) else -1
            if index >= 0 and tensors[index].dtype not in INDEX_TYPES:
                raise TfliteError(f"{path}: operator {operator.index} ({operator.name}) reads the {tensors[index].dtype} tensor {index} "
                                  f"({tensors[index].name}) as its input {position}, an index; LiteRT's kernel takes "
                                  f"{' or '.join(INDEX_TYPES)} there: the file is damaged")
        for position, types in CONSTANT_OPERANDS.get(operator.name, {}).items():
            index = operator.inputs[position] if position < len(operator.inputs) else -1
            quantized = operator.inputs and tensors[operator.inputs[0]].dtype in ACTIVATION_BITS
            if index < 0 and position in OPTIONAL_OPERANDS and not (quantized and operator.name in BIAS_REQUIRED_QUANTIZED):
                continue
            tensor = tensors[index] if index >= 0 else None
            if tensor is None or tensor.data is None or tensor.dtype not in types:
                what = "left out" if tensor is None else f"the {'computed' if tensor.data is None else 'constant'} {tensor.dtype} tensor {index} ({tensor.name})"
                raise TfliteError(f"{path}: operator {operator.index} ({operator.name}) reads {what} as its input {position}; LiteRT's "
                                  f"kernel takes a constant of {' or '.join(types)} there: the file is damaged")


def _strided_slice(values: np.ndarray, begin, end, strides, options: dict[str, Any]) -> np.ndarray | None:
    """TFLite's STRIDED_SLICE of a constant, with its begin, end and shrink masks; None for the masks it is not (an
    ellipsis, a new axis, offsets), which stay unfolded."""
    if options.get("ellipsisMask") or options.get("newAxisMask") or options.get("offset"):
        return None
    index: list[int | slice] = []
    for axis, (first, last, step) in enumerate(zip(begin, end, strides)):
        if options.get("shrinkAxisMask", 0) >> axis & 1:
            index.append(int(first))
        else:
            index.append(slice(None if options.get("beginMask", 0) >> axis & 1 else int(first),
                               None if options.get("endMask", 0) >> axis & 1 else int(last), int(step)))
    return np.asarray(values[tuple(index)])


def _reduce_prod(values: np.ndarray, axes: np.ndarray, options: dict[str, Any]) -> np.ndarray:
    return np.prod(values, axis=tuple(int(axis) for axis in np.atleast_1d(axes)), keepdims=bool(options.get("keepDims", False)))


# what each foldable operator computes from its inputs' constant values (SHAPE: from its input tensor's static shape)
SHAPE_FOLDS: dict[str, Any] = {
    "PACK": lambda values, options: np.stack(values, axis=int(options.get("axis", 0))),
    "CONCATENATION": lambda values, options: np.concatenate(values, axis=int(options.get("axis", 0))),
    "STRIDED_SLICE": lambda values, options: _strided_slice(*values, options),
    "TILE": lambda values, options: np.tile(values[0], [int(n) for n in values[1]]),
    "GATHER": lambda values, options: np.take(values[0], values[1], axis=int(options.get("axis", 0))),
    "RESHAPE": lambda values, options: values[0].reshape([int(n) for n in values[1]]) if len(values) > 1 else None,
    "REDUCE_PROD": lambda values, options: _reduce_prod(*values, options),
    "MUL": lambda values, options: values[0] * values[1] if not options.get("fusedActivationFunction") else None,
    "ADD": lambda values, options: values[0] + values[1] if not options.get("fusedActivationFunction") else None,
}
SHAPE_TYPES = ("INT32", "INT64")  # what shape arithmetic gives: a fold that gives anything else stays an operator
# a shape is a few integers: a fold that reads or declares more stays an operator (nothing large is computed at read time)
SHAPE_ELEMENTS = 64


def _fold(operator: TfliteOperator, values: list[np.ndarray]) -> np.ndarray | None:
    """What the operator computes of `values`, or None where a damaged file's values do not compute (an index out of
    range, a tile of a huge or negative count): the operator then stays, and what reads it refuses it by name."""
    if operator.name == "TILE" and (np.any(values[1] < 0) or np.size(values[0]) * np.prod(values[1], dtype=np.float64) > SHAPE_ELEMENTS):
        return None
    try:
        return SHAPE_FOLDS[operator.name](values, operator.options)
    except (ValueError, IndexError, TypeError):
        return None


def _folded_shape_arithmetic(tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...], outputs: tuple[int, ...]):
    """Each operator of shape arithmetic (SHAPE_FOLDS, and SHAPE) whose inputs are constants, in order, made the int32 or
    int64 constant it computes on the file's static shapes, the operators renumbered. An operator whose output is a
    model output, or whose fold would give another type, stays."""
    tensors, kept = list(tensors), []
    for operator in operators:
        output = tensors[operator.outputs[0]] if len(operator.outputs) == 1 else None
        value = None
        if (output is not None and output.dtype in SHAPE_TYPES and output.index not in outputs
                and int(np.prod(output.shape)) <= SHAPE_ELEMENTS):
            sources = [tensors[index] for index in operator.inputs if index >= 0]
            if operator.name == "SHAPE" and sources:
                value = np.asarray(sources[0].shape)
            elif (operator.name in SHAPE_FOLDS and sources and all(source.data is not None for source in sources)
                  and all(np.size(source.data) <= SHAPE_ELEMENTS for source in sources)):
                value = _fold(operator, [np.asarray(source.data) for source in sources])
        if value is not None and np.size(value) == int(np.prod(output.shape)):
            tensors[output.index] = replace(output, data=np.asarray(value, NUMPY_TYPES[output.dtype]).reshape(output.shape))
            continue
        kept.append(replace(operator, index=len(kept)))
    return tuple(tensors), tuple(kept)


# the key of a MAX_POOL_2D's option that a folded PADV2 sets: its explicit (top, bottom, left, right), which TFLite's
# Pool2DOptions cannot say (only SAME or VALID)
EXPLICIT_PADDING = "explicitPadding"


def _pad_fill(tensors: tuple[TfliteTensor, ...], operator: TfliteOperator) -> float | int | None:
    """The value a PADV2 pads with (its constant input 2; a PAD's or a PADV2 without one: the output's zero), or None
    where it is computed or not one value."""
    if len(operator.inputs) < 3 or operator.inputs[2] < 0:
        output = tensors[operator.outputs[0]]
        return int(output.quantization.zero_point[0]) if output.quantization is not None else 0
    fill = tensors[operator.inputs[2]]
    if not quantized_alike(fill, tensors[operator.outputs[0]]):  # LiteRT's PADV2 refuses a fill of another quantization
        return None
    value = fill.data
    return value.reshape(-1)[0].item() if value is not None and value.size == 1 else None


def quantized_alike(first: TfliteTensor, second: TfliteTensor) -> bool:
    """The two tensors are of one quantization (or neither is quantized)."""
    if first.quantization is None or second.quantization is None:
        return first.quantization is second.quantization
    return all(np.array_equal(getattr(first.quantization, key), getattr(second.quantization, key)) for key in ("scale", "zero_point"))


def _folded_paddings(tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...], outputs: tuple[int, ...]):
    """litert-torch's and onnx2tf's paddings as TFLite's kernels compute them, in the operators the toolchain reads:
    a PADV2 by the output's zero point is a PAD; one by the type's lowest value (a max pool's -inf) of height and width,
    read only by a VALID MAX_POOL_2D of the same quantization, is that pool's explicit padding (a padded element is
    never the maximum of a window holding an input element), the operators renumbered."""
    readers: dict[int, list[TfliteOperator]] = {}
    for operator in operators:
        for index in operator.inputs:
            readers.setdefault(index, []).append(operator)
    folded: dict[int, TfliteOperator] = {}  # the pool's index -> the pool reading the PADV2's input
    dropped = set()
    for operator in operators:
        if operator.name != "PADV2" or len(operator.outputs) != 1 or tensors[operator.inputs[1]].data is None:
            continue
        source, output, fill = tensors[operator.inputs[0]], tensors[operator.outputs[0]], _pad_fill(tensors, operator)
        zero = int(output.quantization.zero_point[0]) if output.quantization is not None else 0
        if fill == zero:
            folded[operator.index] = replace(operator, name="PAD", inputs=operator.inputs[:2])
            continue
        paddings = np.asarray(tensors[operator.inputs[1]].data).reshape(-1, 2)
        pools = readers.get(output.index, [])
        lowest = np.iinfo(NUMPY_TYPES[output.dtype]).min if output.dtype in ACTIVATION_BITS else -np.finfo(np.float32).max
        if (fill is None or fill > lowest or paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any()
                or output.index in outputs or len(pools) != 1 or pools[0].name != "MAX_POOL_2D" or pools[0].padding != "VALID"
                or not quantized_alike(source, output)):
            continue
        (top, bottom), (left, right) = paddings[1].tolist(), paddings[2].tolist()
        pool = pools[0]
        if max(top, bottom) >= pool.option("filterHeight", 0) or max(left, right) >= pool.option("filterWidth", 0):
            continue  # a window of padding alone: its maximum is the fill, which no explicit padding gives
        folded[pool.index] = replace(pool, inputs=(source.index, *pool.inputs[1:]),
                                     options={**pool.options, EXPLICIT_PADDING: (int(top), int(bottom), int(left), int(right))})
        dropped.add(operator.index)
    kept = [folded.get(operator.index, operator) for operator in operators if operator.index not in dropped]
    return tuple(replace(operator, index=index) for index, operator in enumerate(kept))


def _grouped_convolutions_as_depthwise(path: Path | str, tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...]):
    """Each CONV_2D of as many groups as input channels (its filter [O, kh, kw, 1] on C > 1 channels: keras-hub's depthwise
    layers) as the DEPTHWISE_CONV_2D it is (output channel o reads input channel o // (O / C) in both; its filter made
    [1, kh, kw, O], quantized along axis 3); of fewer groups, its block-diagonal filter [O, kh, kw, C] (grouped.py)."""
    tensors, converted = list(tensors), []
    readers: dict[int, int] = {}
    for operator in operators:
        for index in operator.inputs:
            readers[index] = readers.get(index, 0) + 1
    for operator in operators:
        if operator.name != "CONV_2D" or len(operator.inputs) < 2:
            converted.append(operator)
            continue
        source, weight = tensors[operator.inputs[0]], tensors[operator.inputs[1]]
        channels, filter_channels = (int(source.shape[-1]), int(weight.shape[-1])) if len(source.shape) == 4 == len(weight.shape) else (0, 0)
        if channels == filter_channels or weight.data is None:
            converted.append(operator)
            continue
        outputs, groups = int(weight.shape[0]), channels // max(filter_channels, 1)
        if channels % max(filter_channels, 1) or outputs % groups or readers[weight.index] != 1:
            raise TfliteError(f"{path}: operator {operator.index} (CONV_2D) of {channels} input channels with a filter of "
                              f"{list(weight.shape)}: its groups do not divide the input channels or the outputs, or its filter is "
                              "another operator's too (LiteRT refuses the first two): convert the model again")
        if filter_channels != 1:  # several input channels a group: the CONV_2D of its block-diagonal filter
            tensors[weight.index] = replace(weight, shape=(*weight.shape[:3], channels), data=grouped_filter_as_dense(weight.data, groups, 3))
            converted.append(operator)
            continue
        quantization = None if weight.quantization is None else replace(weight.quantization, axis=3)
        tensors[weight.index] = replace(weight, shape=(1, *weight.shape[1:3], outputs), quantization=quantization,
                                        data=np.ascontiguousarray(np.moveaxis(weight.data, 0, -1).reshape(1, *weight.shape[1:3], outputs)))
        options = {key: operator.options[key] for key in ("padding", "strideW", "strideH", "dilationWFactor", "dilationHFactor",
                                                             "fusedActivationFunction") if key in operator.options}
        converted.append(replace(operator, name="DEPTHWISE_CONV_2D", options={**options, "depthMultiplier": outputs // channels}))
    return tuple(tensors), tuple(converted)


def _dequantized_constants(path: Path | str, tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...]):
    """Each DEQUANTIZE of a float16 constant made the float32 constant it computes (as a dynamic-range file's int8 weights
    are read dequantized), the operators renumbered; a float16 tensor read by anything else is refused."""
    tensors, kept = list(tensors), []
    for operator in operators:
        source = tensors[operator.inputs[0]] if operator.inputs else None
        if operator.name == "DEQUANTIZE" and source is not None and source.dtype in CONSTANT_TYPES:
            output = tensors[operator.outputs[0]]
            tensors[output.index] = replace(output, dtype="FLOAT32", quantization=None, data=source.data.astype(np.float32))
            continue
        kept.append(replace(operator, index=len(kept)))
    for operator in kept:
        for index in operator.inputs:
            if index >= 0 and tensors[index].dtype in CONSTANT_TYPES:
                raise TfliteError(f"{path}: operator {operator.index} ({operator.name}) reads the {tensors[index].dtype} tensor {index} "
                                  f"({tensors[index].name}) directly; float16 is read as weights a DEQUANTIZE makes float32")
    return tuple(tensors), tuple(kept)


def _name(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _tensor(path: Path, model, index: int, tensor, budget: MemoryBudget | None) -> TfliteTensor:
    name = _name(tensor.name)
    type_name = _names("TensorType").get(tensor.type, f"type {tensor.type}")
    constant_type = type_name in CONSTANT_TYPES and tensor.buffer < len(model.buffers or []) and bool(
        len(model.buffers[tensor.buffer].data if model.buffers[tensor.buffer].data is not None else []))
    if type_name not in TENSOR_TYPES and not constant_type and type_name not in COMPARISON_TYPES:
        raise TfliteError(f"{path}: tensor {index} ({name}) is {type_name}; the toolchain takes int8 models (int8 activations and "
                          f"weights, int32 biases), 16x8 ones (int16 activations, int8 weights, int64 biases) or float32 ones (float16 weights included): "
                          f"convert with inference_input_type and inference_output_type tf.int8 (tf.int16 in the 16x8 mode), not "
                          f"uint8")
    shape = tuple(int(d) for d in (tensor.shape if tensor.shape is not None else []))
    if any(d < 0 for d in shape):
        raise TfliteError(f"{path}: tensor {index} ({name}) has shape {list(shape)}; a dimension below 0 is no size (LiteRT refuses it: "
                          "a dynamic batch is the -1 of shape_signature, with 1 in shape)")
    constant = _constant(path, model, index, name, tensor, shape, NUMPY_TYPES[type_name], budget)
    if constant is None and 0 in shape:
        raise TfliteError(f"{path}: tensor {index} ({name}) has shape {list(shape)}: a computed tensor of no values (LiteRT refuses "
                          "to feed or compute it): the file is damaged")
    quantization = _quantization(path, index, name, tensor.quantization, shape)
    if quantization is not None and type_name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[type_name]
        if np.any(quantization.zero_point < low) or np.any(quantization.zero_point > high):
            raise TfliteError(f"{path}: tensor {index} ({name}) is {type_name} with zero point(s) {sorted(set(quantization.zero_point.tolist()))[:4]} "
                              f"outside [{low}, {high}]: no value of the tensor is the real 0; the file is damaged")
    return TfliteTensor(index, name, shape, type_name, quantization, constant)


INTEGER_RANGES = {"INT8": (-128, 127), "INT16": (-32768, 32767)}  # a zero point is one of the tensor's integers
MAX_SCALE = 2.0**32  # a quantization step past any real tensor's (an int8 tensor of it would span 1e12)
# the output quantization (scale, zero point) TFLite's kernels write and check, by activation width, for an output bounded
# to [0, 1] (LOGISTIC, SOFTMAX: reference_ops::SoftmaxInt16 too) and to [-1, 1] (TANH); LiteRT refuses a file with another
FIXED_OUTPUTS = {"LOGISTIC": {8: (1.0 / 256, -128), 16: (1.0 / 32768, 0)}, "SOFTMAX": {8: (1.0 / 256, -128), 16: (1.0 / 32768, 0)},
                 "TANH": {8: (1.0 / 128, 0), 16: (1.0 / 32768, 0)}}
UNIT_RANGE_OUTPUT, SIGNED_UNIT_RANGE_OUTPUT = FIXED_OUTPUTS["LOGISTIC"], FIXED_OUTPUTS["TANH"]


def _quantization(path: Path, index: int, name: str, quantization, shape: tuple[int, ...]) -> Quantization | None:
    if quantization is None or quantization.scale is None or len(quantization.scale) == 0:
        return None
    scale = np.asarray(quantization.scale, np.float32)
    zero_point = np.asarray(quantization.zeroPoint if quantization.zeroPoint is not None else np.zeros(scale.size), np.int64)
    axis = int(quantization.quantizedDimension)
    if zero_point.size != scale.size or not np.all(np.isfinite(scale)) or np.any(scale <= 0) or np.any(scale > MAX_SCALE):
        raise TfliteError(f"{path}: tensor {index} ({name}): quantization with {scale.size} scale(s) and {zero_point.size} zero "
                          f"point(s), or a scale that is not positive and finite, or beyond {MAX_SCALE:g} (no tensor's step: its "
                          "requantizations overflow 32 bits)")
    if scale.size > 1 and (axis >= len(shape) or shape[axis] != scale.size):
        raise TfliteError(f"{path}: tensor {index} ({name}): {scale.size} per-channel scales along axis {axis} of shape {list(shape)}")
    return Quantization(scale, zero_point, axis)


def _constant(path: Path, model, index: int, name: str, tensor, shape: tuple[int, ...], dtype, budget) -> np.ndarray | None:
    buffers = model.buffers or []
    if tensor.buffer >= len(buffers):
        raise TfliteError(f"{path}: tensor {index} ({name}) refers to buffer {tensor.buffer} of {len(buffers)}")
    raw = buffers[tensor.buffer].data
    if raw is None or len(raw) == 0:
        return None
    expected = math.prod(shape) * np.dtype(dtype).itemsize  # a file's shapes are concrete: a 0 holds no values
    if len(raw) != expected:  # before the budget: a shape its bytes do not fill is damage, not a large model
        raise TfliteError(f"{path}: tensor {index} ({name}) holds {len(raw)} bytes; its shape {list(shape)} of {np.dtype(dtype).name} "
                          f"needs {expected}: the file is damaged; export the model again")
    if budget is not None:
        budget.check(f"constant tensor {index} ({name}) of {path}", expected)
    return np.frombuffer(bytes(raw), dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


def _operator(path: Path, model, index: int, operator, tensor_count: int) -> TfliteOperator:
    codes = model.operatorCodes or []
    if operator.opcodeIndex >= len(codes):
        raise TfliteError(f"{path}: operator {index} refers to operator code {operator.opcodeIndex} of {len(codes)}")
    code = codes[operator.opcodeIndex]
    builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    name = _names("BuiltinOperator").get(builtin, f"builtin {builtin}")
    if name == "CUSTOM":  # never a key of what reads operators (tflite_graph.CONVERTERS): refused there, named
        name = f"custom operator {_name(code.customCode)!r}"
    inputs = tuple(int(i) for i in (operator.inputs if operator.inputs is not None else []))
    outputs = tuple(int(i) for i in (operator.outputs if operator.outputs is not None else []))
    if any(not -1 <= i < tensor_count for i in inputs) or any(not 0 <= i < tensor_count for i in outputs):
        raise TfliteError(f"{path}: operator {index} ({name}) refers to tensors {list(inputs)} -> {list(outputs)}, beyond the "
                          f"{tensor_count} the model has: the file is damaged")
    if set(inputs) & set(outputs):
        raise TfliteError(f"{path}: operator {index} ({name}) reads tensor(s) {sorted(set(inputs) & set(outputs))}, which it also "
                          "writes: the file is damaged")
    options = {key: value for key, value in vars(operator.builtinOptions).items()} if operator.builtinOptions is not None else {}
    for key in POSITIVE_OPTIONS:
        if key in options and not (isinstance(options[key], int) and 1 <= options[key] <= MAX_WINDOW):
            raise TfliteError(f"{path}: operator {index} ({name}): option {key} is {options[key]}; a window, stride or dilation "
                              f"is 1 to {MAX_WINDOW} (beyond any image's side: TensorFlow's own kernels crash on such): the file is damaged")
    for key, enum in ENUM_OPTIONS.items():
        if key in options and options[key] not in _names(enum):
            defined = ", ".join(f"{number} {label}" for number, label in sorted(_names(enum).items()))
            raise TfliteError(f"{path}: operator {index} ({name}): option {key} is {options[key]}, which TFLite's {enum} does not "
                              f"define ({defined}): the file is damaged")
    return TfliteOperator(index, name, inputs, outputs, options)
