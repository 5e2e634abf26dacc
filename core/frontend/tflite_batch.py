"""A `.tflite`'s batch axis restored where its converter wrote it away (read_tflite's last step).

The reader writes every tensor with the batch first ([N, ...]), as the IR's layers compute on a batch of samples.
LiteRT's converter (litert-torch) writes files of a batch of one, and where PyTorch's program is indifferent to the
batch it writes it away: a LayerNorm's statistics are a MEAN over axes [0, 2] of a [1, L, C] tensor ([L], then
RESHAPEd to [1, L, 1]); an nn.Embedding's ids are RESHAPEd from [1, L] to [L], looked up as [L, C], then RESHAPEd
back. Each such tensor is given its batch back, and what reads it its axes shifted past it, so that the file computes
the same on a batch of one and the reader's graph the same on any batch:

- a reduction (MEAN, SUM, REDUCE_MAX) over axis 0 of a batch of one, without keepDims: the batch left out of its axes
  and its output [1, ...];
- a RESHAPE of a batch of one into a shape that does not start with 1: the shape with a leading 1; a FULLY_CONNECTED of
  [1, L, C] into [L, O], or of [1, ..., L, C] whose rows it flattens into [L, O]: [1, L, O];
- an operator reading a tensor so given its batch: its output too, where the file wrote it without one;
- an operator with axes (TRANSPOSE, MEAN, CONCATENATION, SLICE, STRIDED_SLICE, GATHER of a computed tensor...) reading
  such a tensor: its axes shifted by one;
- a TRANSPOSE moving a batch of one among the other axes (PyTorch's sequence-first layout: the heads merged back,
  [1, h, L, d] -> [L, 1, h, d]; a sequence [1, F, T] -> [T, 1, F]): the other axes permuted, the batch kept first, and
  its output given a batch ([1, L, 1, h, d]: the same bytes in the same order, as an axis of one moves none; the
  converter reshapes the permuted [N, L, h, d] to it);
- SPLIT, SPLIT_V, UNPACK and PACK reading such a tensor: their axis shifted, their outputs given a batch (PACK's: of
  one axis more than its inputs).

A file of another batch, or of no tensor written so, is left as it is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from core.frontend.tflite import TfliteError, TfliteOperator, TfliteTensor

REDUCTIONS = ("MEAN", "SUM", "REDUCE_MAX")
ELEMENTWISE = ("ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "RSQRT", "SQRT", "NEG", "EXP", "LOGISTIC", "TANH",
               "RELU", "RELU6", "GELU", "HARD_SWISH", "LEAKY_RELU", "QUANTIZE", "DEQUANTIZE", "SOFTMAX")
LOOKUPS = {"EMBEDDING_LOOKUP": 0, "GATHER": 1}  # the operator -> the position of its ids
SPLITS = {"SPLIT": 0, "SPLIT_V": 2}  # the operator -> the position of its axis
# the operators that read a tensor of any rank without axes of their own: a shifted input needs nothing else
RANK_FREE = (*ELEMENTWISE, "RESHAPE", "FULLY_CONNECTED", "BATCH_MATMUL", *LOOKUPS)


class _Restoring:
    def __init__(self, path: Path | str, tensors: tuple[TfliteTensor, ...]):
        self.path, self.tensors = path, list(tensors)
        self.given: set[int] = set()  # tensors given a batch axis the file left out

    def shape(self, index: int) -> tuple[int, ...]:
        return self.tensors[index].shape

    def give_batch(self, index: int) -> None:
        self.tensors[index] = replace(self.tensors[index], shape=(1, *self.tensors[index].shape))
        self.given.add(index)

    def constant(self, like: TfliteTensor, values: list[int]) -> int:
        """A new int32 constant of `values`, named after `like`."""
        index = len(self.tensors)
        self.tensors.append(TfliteTensor(index, f"{like.name}/batch_restored", (len(values),), "INT32", None, np.asarray(values, np.int32)))
        return index

    def axes(self, operator: TfliteOperator, position: int) -> list[int]:
        tensor = self.tensors[operator.inputs[position]]
        if tensor.data is None:
            raise TfliteError(f"{self.path}: operator {operator.index} ({operator.name}) reads its axes from the computed tensor "
                              f"{tensor.index} ({tensor.name}); the reader takes constant axes: convert the model with a static shape")
        return [int(axis) for axis in np.atleast_1d(tensor.data)]

    def restore(self, operator: TfliteOperator) -> TfliteOperator:
        computed = [index for index in operator.inputs if index >= 0 and self.tensors[index].data is None]
        shifted = [index for index in computed if index in self.given]
        if shifted:
            operator = self._shift_axes(operator, self.shape(shifted[0]))
        if len(operator.outputs) != 1:
            if shifted:  # SPLIT, UNPACK: outputs of the rank the file wrote their input with, or one less, have no batch
                for output in operator.outputs:
                    self.give_batch(output)
            return operator
        output = operator.outputs[0]
        if operator.name == "TRANSPOSE" and computed and not shifted:
            return self._batch_kept_first(operator)
        if operator.name in REDUCTIONS and computed and computed[0] not in self.given:
            return self._reduction(operator)
        if operator.name == "RESHAPE":
            if computed and self._drops_batch(computed[0], output):
                self.give_batch(output)  # else its output starts with the batch of one, wherever its input had it
        elif operator.name == "FULLY_CONNECTED" and computed and self._rows_without_batch(computed[0], output):
            self.give_batch(output)
        elif shifted and (len(self.shape(output)) < max(len(self.shape(index)) for index in shifted)
                          or operator.name == "PACK" and len(self.shape(output)) <= max(len(self.shape(index)) for index in shifted)
                          or operator.name in LOOKUPS and operator.inputs[LOOKUPS[operator.name]] in shifted):
            self.give_batch(output)  # an output of the rank the file wrote its input with (a lookup's: one more) has no batch
        return operator

    def _drops_batch(self, source: int, output: int) -> bool:
        """A RESHAPE of a batch of one whose output does not start with it."""
        source_shape, output_shape = self.shape(source), self.shape(output)
        return bool(source_shape) and source_shape[0] == 1 and (not output_shape or output_shape[0] != 1) \
            and int(np.prod(source_shape)) == int(np.prod(output_shape))

    def _rows_without_batch(self, source: int, output: int) -> bool:
        """A FULLY_CONNECTED of a batch of one [1, L, C] whose output [L, O] has its rows but not the batch; or of
        [1, ..., C] whose rows it flattens into [R, O] (keepNumDims false: TFLite's converter's Dense of an attention's
        heads [1, 1, L, C], keras-hub MiT's, added to the tokens [1, L, O] by broadcasting)."""
        source_shape, output_shape = self.shape(source), self.shape(output)
        if len(source_shape) <= 2 or source_shape[0] != 1:
            return False
        flattened = len(output_shape) == 2 and output_shape[0] != 1 and output_shape[0] == int(np.prod(source_shape[1:-1]))
        return flattened or len(output_shape) == len(source_shape) - 1 and tuple(output_shape[:-1]) == tuple(source_shape[1:-1])

    def _batch_kept_first(self, operator: TfliteOperator) -> TfliteOperator:
        """A TRANSPOSE moving a batch of one: the other axes permuted, the output given a batch (the module)."""
        source, output = self.shape(operator.inputs[0]), operator.outputs[0]
        permutation = self.axes(operator, 1)
        if not source or source[0] != 1 or permutation[0] % len(source) == 0:
            return operator
        self.give_batch(output)
        kept_first = [0, *(axis % len(source) for axis in permutation if axis % len(source) != 0)]
        return replace(operator, inputs=(operator.inputs[0], self.constant(self.tensors[operator.inputs[1]], kept_first)))

    def _reduction(self, operator: TfliteOperator) -> TfliteOperator:
        source = self.shape(operator.inputs[0])
        axes = sorted({axis % len(source) for axis in self.axes(operator, 1)}) if source else []
        if 0 not in axes or source[0] != 1:
            return operator
        kept = [axis for axis in axes if axis != 0]
        if not operator.option("keepDims", False):
            self.give_batch(operator.outputs[0])
        return replace(operator, inputs=(operator.inputs[0], self.constant(self.tensors[operator.inputs[1]], kept), *operator.inputs[2:]))

    def _shift_axes(self, operator: TfliteOperator, shape: tuple[int, ...]) -> TfliteOperator:
        """`operator` reading a tensor given its batch: its axes one further."""
        rank = len(shape) - 1  # the rank the file wrote it with
        if operator.name == "GATHER" and operator.inputs[0] in self.given:  # indices of an axis of a computed tensor
            return replace(operator, options={**operator.options, "axis": int(operator.option("axis", 0)) % rank + 1})
        if operator.name in ("UNPACK", "PACK"):  # PACK's axis is one of its output's, of one axis more
            return replace(operator, options={**operator.options, "axis": int(operator.option("axis", 0)) % (rank + (operator.name == "PACK")) + 1})
        if operator.name in SPLITS:
            position = SPLITS[operator.name]
            (axis,) = self.axes(operator, position)
            inputs = list(operator.inputs)
            inputs[position] = self.constant(self.tensors[inputs[position]], [axis % rank + 1])
            return replace(operator, inputs=tuple(inputs))
        if operator.name in RANK_FREE:
            return operator
        if operator.name in REDUCTIONS:
            axes = [axis % rank + 1 for axis in self.axes(operator, 1)]
            return replace(operator, inputs=(operator.inputs[0], self.constant(self.tensors[operator.inputs[1]], axes), *operator.inputs[2:]))
        if operator.name == "TRANSPOSE":
            permutation = [0, *(axis % rank + 1 for axis in self.axes(operator, 1))]
            return replace(operator, inputs=(operator.inputs[0], self.constant(self.tensors[operator.inputs[1]], permutation)))
        if operator.name == "CONCATENATION":
            return replace(operator, options={**operator.options, "axis": int(operator.option("axis", 0)) % rank + 1})
        if operator.name == "STRIDED_SLICE":  # the batch whole: begin 0 and both masks' bit 0, the file's bits one further
            bounds = [self.constant(self.tensors[operator.inputs[k]], [first, *self.axes(operator, k)]) for k, first in ((1, 0), (2, 0), (3, 1))]
            masks = {key: int(operator.option(key, 0)) << 1 | (1 if key in ("beginMask", "endMask") else 0)
                     for key in ("beginMask", "endMask", "ellipsisMask", "newAxisMask", "shrinkAxisMask")}
            return replace(operator, inputs=(operator.inputs[0], *bounds), options={**operator.options, **masks})
        if operator.name == "SLICE":
            begin, size = ([first, *self.axes(operator, position)] for position, first in ((1, 0), (2, 1)))
            return replace(operator, inputs=(operator.inputs[0], *(self.constant(self.tensors[operator.inputs[k]], values)
                                                                   for k, values in ((1, begin), (2, size)))))
        raise TfliteError(f"{self.path}: operator {operator.index} ({operator.name}) reads a tensor the file computes without its batch "
                          f"axis (a batch of one written away, as litert-torch writes a file): the reader restores it through "
                          f"{', '.join(sorted({*RANK_FREE, *REDUCTIONS, *SPLITS, 'TRANSPOSE', 'CONCATENATION', 'SLICE', 'STRIDED_SLICE', 'PACK', 'UNPACK'}))}, not {operator.name}")


def restored_batch_axes(path: Path | str, tensors: tuple[TfliteTensor, ...], operators: tuple[TfliteOperator, ...],
                        inputs: tuple[int, ...]) -> tuple[tuple[TfliteTensor, ...], tuple[TfliteOperator, ...]]:
    """(tensors, operators) with each tensor the file wrote without its batch of one given it back (see the module)."""
    if not inputs or any(not tensors[index].shape or tensors[index].shape[0] != 1 for index in inputs):
        return tensors, operators
    restoring = _Restoring(path, tensors)
    restored = tuple(restoring.restore(operator) for operator in operators)
    return tuple(restoring.tensors), restored
