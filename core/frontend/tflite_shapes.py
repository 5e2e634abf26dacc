"""The converters (tflite_graph.py: CONVERTERS) of the operators that move a `.tflite`'s values without arithmetic: reshapes,
slices, splits, transposes, gathers of a constant table's rows, padding, concatenation and stacking."""

from __future__ import annotations

import numpy as np

from core.frontend.tflite import TfliteError, quantized_alike
from core.frontend.tflite_tf import constant_input as _constant_input, dequantized

def _reshape(b, op, scope):
    source, target = b.model.tensor(op.inputs[0]), b.model.tensor(op.outputs[0])
    if int(np.prod(source.shape[1:])) != int(np.prod(target.shape[1:])):
        raise TfliteError(f"{b.model.path}: operator {op.index} (RESHAPE) of a {list(source.shape)} tensor into {list(target.shape)}: "
                          "they hold different numbers of values per sample (LiteRT refuses it): the file is damaged")
    if tuple(source.shape[1:]) == tuple(target.shape[1:]) and quantized_alike(source, target):
        return b.input(op)  # of a batch given back (tflite_batch.py), a reshape that keeps the shape: the same tensor
    return b.activation_quant(b.tf.reshape(b.input(op), [-1, *target.shape[1:]], name=f"{scope}/Reshape"), op.outputs[0], scope)


def _expand_dims(b, op, scope):
    """EXPAND_DIMS by a constant axis (a Conv1D's [N, L, C] -> [N, 1, L, C]), as TensorFlow's ExpandDims a Keras Conv1D has."""
    (axis,) = np.atleast_1d(_constant_input(b, op, 1)).astype(np.int32)
    return b.activation_quant(b.tf.expand_dims(b.input(op), int(axis), name=f"{scope}/ExpandDims"), op.outputs[0], scope)


def _squeeze(b, op, scope):
    axes = [int(axis) for axis in op.option("squeezeDims", []) or []]
    return b.activation_quant(b.tf.squeeze(b.input(op), axes or None, name=f"{scope}/Squeeze"), op.outputs[0], scope)


def _gather(b, op, scope):
    """GATHER of a constant table's rows (axis 0) by int32 ids: the table's real values, the output its FakeQuant; of a
    computed tensor by constant indices, one or a run of consecutive ones along an axis past the batch (onnx2tf's q, k
    and v out of PyTorch's packed attention projection): the StridedSlice it is."""
    if b.model.tensor(op.inputs[0]).data is None and b.model.tensor(op.inputs[1]).data is not None:
        return _constant_indices(b, op, scope)
    if int(op.option("axis", 0)) != 0 or int(op.option("batchDims", 0)) != 0:
        raise TfliteError(f"{b.model.path}: operator {op.index} (GATHER): the reader takes rows (axis 0) of a constant table, or "
                          "consecutive constant indices of a computed tensor's axis past the batch")
    return _rows(b, op, scope, table_position=0, ids_position=1)


def _constant_indices(b, op, scope):
    source = b.model.tensor(op.inputs[0])
    indices = np.asarray(b.model.tensor(op.inputs[1]).data).astype(np.int64)
    axis = int(op.option("axis", 0)) % max(len(source.shape), 1)
    size = source.shape[axis] if source.shape else 0
    run = indices.reshape(-1) % max(size, 1)
    if axis == 0 or int(op.option("batchDims", 0)) != 0 or indices.ndim > 1 or not run.size or np.any(np.diff(run) != 1) \
            or np.any(np.abs(indices) > size):
        raise TfliteError(f"{b.model.path}: operator {op.index} (GATHER) of the computed tensor {source.index} ({source.name}) by "
                          f"indices {indices.tolist()} along axis {axis}: the reader takes one index, or a run of consecutive ones, "
                          "along an axis past the batch")
    sliced = _along_axis(b, b.input(op), len(source.shape), axis, int(run[0]), len(run), indices.ndim == 0, f"{scope}/StridedSlice")
    return b.activation_quant(sliced, op.outputs[0], scope)


def _along_axis(b, x, rank: int, axis: int, first: int, size: int, shrink: bool, name: str):
    """Elements first..first+size-1 of `axis` of x, the other axes whole, as a StridedSlice (the axis shrunk away where
    `shrink`)."""
    begin, end = np.zeros(rank, np.int32), np.zeros(rank, np.int32)
    begin[axis], end[axis] = first, first + size
    others = sum(1 << other for other in range(rank) if other != axis)
    return b.tf.strided_slice(x, begin, end, np.ones(rank, np.int32), begin_mask=others, end_mask=others,
                              shrink_axis_mask=(1 << axis) if shrink else 0, name=name)


def _embedding_lookup(b, op, scope):
    """EMBEDDING_LOOKUP (PyTorch's nn.Embedding through LiteRT's converter): GATHER's rows, its ids first."""
    return _rows(b, op, scope, table_position=1, ids_position=0)


def _rows(b, op, scope, table_position: int, ids_position: int):
    table = b.model.tensor(op.inputs[table_position])
    if table.data is None:
        raise TfliteError(f"{b.model.path}: operator {op.index} ({op.name}): the reader takes rows of a constant table; its table "
                          f"(tensor {table.index}, {table.name}) is computed")
    rows = b.tf.gather(b.const(f"{scope}/table", dequantized(table)), b.input(op, ids_position), axis=0, name=f"{scope}/GatherV2")
    return b.activation_quant(rows, op.outputs[0], scope)


def _transpose(b, op, scope):
    permutation = [int(axis) for axis in np.atleast_1d(_constant_input(b, op, 1))]
    rank = len(b.model.tensor(op.inputs[0]).shape)
    if sorted(permutation) != list(range(rank)):
        # LiteRT's kernel checks only each axis' range: [0, 0, 0, 0] runs there, each output axis a copy of the first
        raise TfliteError(f"{b.model.path}: operator {op.index} (TRANSPOSE) by {permutation}, not a permutation of the {rank} axes "
                          f"of its input (each of 0..{rank - 1} once): the file is damaged or was written by a tool that does not check it")
    x = b.tf.transpose(b.input(op), permutation, name=f"{scope}/Transpose")
    declared = b.model.tensor(op.outputs[0]).shape
    if list(declared[1:]) != x.shape.as_list()[1:]:  # a batch of one moved among the axes, given back first (tflite_batch.py)
        x = b.tf.reshape(x, [-1, *declared[1:]], name=f"{scope}/batch_first")
    return b.activation_quant(x, op.outputs[0], scope)


def _batch_kept_whole(b, op, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, masks: dict[str, int]) -> dict[str, int]:
    """A slice's masks with a batch sliced from 0 to 1, the file's batch of one, kept whole (the graph runs on
    batches)."""
    if begin.size and b.model.tensor(op.inputs[0]).shape[:1] == (1,) and begin[0] == 0 and end[0] == 1 and strides[0] == 1 \
            and (masks["ellipsis_mask"] | masks["new_axis_mask"] | masks["shrink_axis_mask"]) & 1 == 0:
        return {**masks, "begin_mask": masks["begin_mask"] | 1, "end_mask": masks["end_mask"] | 1}
    return masks


def _strided_slice(b, op, scope):
    """STRIDED_SLICE by constant bounds (a Cropping2D, a ViT's class token), its masks as TensorFlow's, the batch of one
    kept whole."""
    begin, end, strides = (_constant_input(b, op, position).astype(np.int32) for position in (1, 2, 3))
    masks = _batch_kept_whole(b, op, begin, end, strides, {
        name: int(op.option(key, 0)) for name, key in (("begin_mask", "beginMask"), ("end_mask", "endMask"), ("ellipsis_mask", "ellipsisMask"),
                                                       ("new_axis_mask", "newAxisMask"), ("shrink_axis_mask", "shrinkAxisMask"))})
    return b.activation_quant(b.tf.strided_slice(b.input(op), begin, end, strides, name=f"{scope}/StridedSlice", **masks),
                              op.outputs[0], scope)


def _slice(b, op, scope):
    """SLICE by a constant begin and size, written as the StridedSlice it is (end = begin + size; a size of -1: to the
    end, an end mask), the batch of one kept whole."""
    begin, size = (_constant_input(b, op, position).astype(np.int64).reshape(-1) for position in (1, 2))
    begin, end = begin.astype(np.int32), np.where(size == -1, 0, begin + size).astype(np.int32)
    strides = np.ones_like(end)
    masks = _batch_kept_whole(b, op, begin, end, strides, {
        "begin_mask": 0, "end_mask": sum(1 << axis for axis, extent in enumerate(size) if extent == -1), "ellipsis_mask": 0,
        "new_axis_mask": 0, "shrink_axis_mask": 0})
    return b.activation_quant(b.tf.strided_slice(b.input(op), begin, end, strides, name=f"{scope}/StridedSlice", **masks),
                              op.outputs[0], scope)


def _parts(b, op, scope, source: int, axis: int, sizes: list[int], shrink: bool) -> list:
    """Consecutive parts of `sizes` along `axis` of input `source`, each a StridedSlice (its axis shrunk away where
    `shrink`: UNPACK's), each output's FakeQuant."""
    x, rank = b.input(op, source), len(b.model.tensor(op.inputs[source]).shape)
    axis %= rank
    if axis == 0 or sum(sizes) != b.model.tensor(op.inputs[source]).shape[axis] or min(sizes, default=0) < 1:
        raise TfliteError(f"{b.model.path}: operator {op.index} ({op.name}) into parts {sizes} along axis {axis} of "
                          f"{list(b.model.tensor(op.inputs[source]).shape)}: the reader takes parts that cover an axis past the batch")
    firsts = np.cumsum([0, *sizes[:-1]])
    return [b.activation_quant(_along_axis(b, x, rank, axis, int(first), size, shrink, f"{scope}/part_{position}"), output, f"{scope}/part_{position}")
            for position, (first, size, output) in enumerate(zip(firsts, sizes, op.outputs))]


def _split(b, op, scope):
    """SPLIT into equal parts along a constant axis (an LSTM cell's gates, as onnx2tf unrolls it)."""
    (axis,) = np.atleast_1d(_constant_input(b, op, 0)).astype(int)
    extent, count = b.model.tensor(op.inputs[1]).shape[int(axis)], int(op.option("numSplits", len(op.outputs)))
    return _parts(b, op, scope, 1, int(axis), [extent // count] * count if extent % count == 0 else [], shrink=False)


def _split_v(b, op, scope):
    """SPLIT_V into parts of constant sizes (a -1: what the others leave) along a constant axis."""
    sizes = [int(size) for size in np.atleast_1d(_constant_input(b, op, 1))]
    (axis,) = np.atleast_1d(_constant_input(b, op, 2)).astype(int)
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = b.model.tensor(op.inputs[0]).shape[int(axis)] - sum(size for size in sizes if size != -1)
    return _parts(b, op, scope, 0, int(axis), sizes, shrink=False)


def _unpack(b, op, scope):
    """UNPACK along a constant axis (a sequence into its time steps, as onnx2tf unrolls an RNN)."""
    axis = int(op.option("axis", 0))
    return _parts(b, op, scope, 0, axis, [1] * b.model.tensor(op.inputs[0]).shape[axis], shrink=True)


def _pack(b, op, scope):
    """PACK (a stack along a new axis) as the IR's concat: each input [N, *before, *after] Reshaped to the image
    [N, prod(before), 1, prod(after)], concatenated along W, Reshaped to the output [N, *before, K, *after]."""
    shape = b.model.tensor(op.inputs[0]).shape
    axis = int(op.option("axis", 0)) % (len(shape) + 1)
    if axis == 0:
        raise TfliteError(f"{b.model.path}: operator {op.index} (PACK) along axis 0, the batch: the reader stacks along an axis past it")
    image = [-1, int(np.prod(shape[1:axis], dtype=np.int64)), 1, int(np.prod(shape[axis:], dtype=np.int64))]
    columns = [b.tf.reshape(value, image, name=f"{scope}/column_{position}") for position, value in enumerate(b.operands(op, scope, concatenated=True))]
    stacked = b.tf.concat(columns, 2, name=f"{scope}/concat")
    return b.activation_quant(b.tf.reshape(stacked, [-1, *b.model.tensor(op.outputs[0]).shape[1:]], name=f"{scope}/Reshape"), op.outputs[0], scope)


def _pad(b, op, scope):
    return b.activation_quant(b.tf.pad(b.input(op), _constant_input(b, op, 1).astype(np.int32), name=f"{scope}/Pad"), op.outputs[0], scope)


def _concatenation(b, op, scope):
    x = b.tf.concat(b.operands(op, scope, concatenated=True), op.option("axis", 0), name=f"{scope}/concat")
    return b.finish(op, x, scope)




SHAPE_CONVERTERS = {
    "RESHAPE": _reshape,
    "EXPAND_DIMS": _expand_dims,
    "SQUEEZE": _squeeze,
    "TRANSPOSE": _transpose,
    "GATHER": _gather,
    "EMBEDDING_LOOKUP": _embedding_lookup,
    "STRIDED_SLICE": _strided_slice,
    "SLICE": _slice,
    "SPLIT": _split,
    "SPLIT_V": _split_v,
    "UNPACK": _unpack,
    "PACK": _pack,
    "PAD": _pad,
    "CONCATENATION": _concatenation,
}
