"""An operation's integer model (its annotate rule's `integer_model`, core/frontend/layers.IntegerModelBuilder) computed
on integer arrays: the integer simulator's kernel of an operation whose arithmetic its model defines. The annotated
graph (core/quantize/integer_model.py: GraphModelBuilder) and the simulator then run one definition of it, so they
agree bit for bit by construction; the C emitters and the accelerator lowerings are tested against it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import numpy as np

from core.ir.fixedpoint import round_shift, saturate
from core.ir.records import IrLayer
from core.quantize.tflite_math import multiply_by_quantized_multiplier


def _reduce(function):
    def reduce(tensor: np.ndarray, axis: np.ndarray, keep_dims: bool | None = None) -> np.ndarray:
        return function(tensor, axis=int(axis), keepdims=bool(keep_dims))
    return reduce


class ArrayModelBuilder:
    """The same integer model computed on integer arrays: the integer simulator's kernel of an operation that has one
    (integer_model_kernel), so that the annotated graph and the simulator run one definition of its
    arithmetic. Tensors are int64 arrays holding the integers: `to_ints` and `from_ints` are the identity (the inputs
    are the integers), a Cast keeps them exact, and each graph op is its NumPy function (ARRAY_OPS)."""

    graph = None  # an array model has no float graph (a model that reads it, lut's, has its own kernel)
    layer = None

    def __init__(self, inputs: list[np.ndarray], input_log2scales: list[int], output_log2scale: int, activation: str,
                 attrs: Any = None):
        self.inputs = [np.asarray(tensor, np.int64) for tensor in inputs]
        self.input_log2scales, self.output_log2scale, self.activation = input_log2scales, output_log2scale, activation
        self.attrs = attrs  # the record (integer_model_kernel's): the attributes by the names the graph's layer gives them

    def const(self, label: str, value: Any, dtype: str = "float32") -> np.ndarray:
        return np.asarray(value, np.int64 if np.issubdtype(np.asarray(value).dtype, np.integer) else np.float64)

    def op(self, op: str, inputs: list[np.ndarray], *, cast_to: str | None = None, keep_dims: bool | None = None) -> np.ndarray:
        if op not in ARRAY_OPS:
            raise NotImplementedError(f"graph op {op} has no array form (core/ir/integer_kernel.py: ARRAY_OPS)")
        return ARRAY_OPS[op](*inputs, **({"keep_dims": keep_dims} if keep_dims is not None else {}))

    def to_ints(self, tensor: np.ndarray, log2scale: int) -> np.ndarray:
        return tensor

    def round_shift(self, tensor: np.ndarray, shift: int) -> np.ndarray:
        return tensor if shift == 0 else round_shift(tensor, shift)  # no shift: no copy of a large batch

    def clamp(self, tensor: np.ndarray, low: int, high: int) -> np.ndarray:
        return np.clip(tensor, low, high)

    def from_ints(self, tensor: np.ndarray, log2scale: int) -> np.ndarray:
        return tensor

    def rescale(self, tensor: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
        return multiply_by_quantized_multiplier(tensor, multiplier, shift)


# each graph op an integer model may use, as NumPy computes it on integers (exact: TensorFlow's integer ops, and its
# float32 ops on the integers an int8 model reaches, give the same values)
ARRAY_OPS = {
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "FloorDiv": np.floor_divide,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "Cast": lambda tensor: tensor,
    "Max": _reduce(np.max),
    "Sum": _reduce(np.sum),
    "GatherV2": lambda params, indices, axis: np.take(params, indices, axis=int(axis)),
}


def on_log2scales(arithmetic: Callable, requantization_of: Callable) -> Callable:
    """The annotate rule's integer model (TF2IR's tables) of an arithmetic defined on a requantization (add's, mul's):
    the arithmetic on the inputs' integers, its requantization `requantization_of(input_log2scales, output_log2scale,
    activation)`, the result at the output's log2scale."""
    def integer_model(model):
        ints = [model.to_ints(tensor, scale) for tensor, scale in zip(model.inputs, model.input_log2scales)]
        requantization = requantization_of(model.input_log2scales, model.output_log2scale, model.activation)
        return model.from_ints(arithmetic(model, ints, requantization), model.output_log2scale)
    return integer_model


def integer_model_kernel(integer_model: Callable) -> Callable[[IrLayer, dict, list], np.ndarray]:
    """The kernel (record, params, inputs) -> int8 of an operation whose integer model is its arithmetic: the model on
    the inputs' integers, each input aligned to the output's rank (NumPy broadcasting, as TensorFlow's), saturated."""
    def kernel(record: IrLayer, params: dict, inputs: list) -> np.ndarray:
        output_rank = len(record.shape_of_output())
        aligned = []
        for position, batch in enumerate(inputs):
            shape = tuple(record.shape_of_input(position))
            if tuple(np.shape(batch)[1:]) != shape or len(batch) != len(inputs[0]):
                raise ValueError(f"layer {record.name}: input {position} of shape {list(np.shape(batch))}; the layer takes "
                                 f"[{len(inputs[0])}, {', '.join(map(str, shape))}]")
            aligned.append(np.asarray(batch).reshape(len(batch), *(1,) * (output_rank - len(shape)), *shape))
        builder = ArrayModelBuilder(aligned, [record.log2scale_of_input(position) for position in range(len(inputs))],
                                    record.log2scale_of_output(), getattr(record, "activation_type", "None"), attrs=record)
        return saturate(integer_model(builder))
    return kernel


# --- a binary operation of the tflite_int8 dialect: its affine model (model, record) -> output, as a table of pairs

BYTE_ORDER = (np.arange(256) + 128) % 256  # table row of each byte: byte u is the int8 value u (u < 128) or u - 256


def pair_lookup(flat_table: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """flat_table (pair_table's) at every pair of `first` and `second` (int8, broadcasting): one 16-bit index per
    element, no int64 copies of the operands."""
    index = (np.ascontiguousarray(first).view(np.uint8).astype(np.uint16) << 8) | np.ascontiguousarray(second).view(np.uint8)
    return np.take(flat_table, index)


@lru_cache(maxsize=256)
def pair_table(affine_model: Callable, record: IrLayer) -> np.ndarray:
    """The int8 output of `affine_model` for every pair of int8 inputs, rendered once on the 256 x 256 grid of them
    (the arithmetic once per pair, not per element), flattened to be indexed by (byte of a) << 8 | byte of b."""
    values = np.arange(-128, 128, dtype=np.int64)
    table = saturate(affine_model(ArrayModelBuilder([values[:, None], values[None, :]], [], 0, "None"), record))
    return table[BYTE_ORDER][:, BYTE_ORDER].ravel()
