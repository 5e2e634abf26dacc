"""A text model's wrap of negative token ids taken away as a .tflite is read (read_tflite's step).

TFLite's converter writes Keras' Embedding, and onnx2tf an ONNX embedding, with a wrap of negative ids before the lookup:
SELECT_V2(LESS(ids, 0), ADD(ids, V), ids), or ADD(ids, MUL(CAST(LESS(ids, 0)), V)). The toolchain checks every id
against [0, V) where it enters the network (a negative one is refused, as TFLite's lookup refuses one), so the wrap
computes the ids themselves: its operators go and what read the wrapped ids reads the ids. Here only the operators'
structure is read; the file's other checks are read_tflite's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

ID_TYPES = ("INT32", "INT64")


def _constant_integer(tensors: Sequence[Any], index: int) -> int | None:
    tensor = tensors[index]
    if tensor.data is None or tensor.dtype not in ID_TYPES or np.size(tensor.data) != 1:
        return None
    return int(np.asarray(tensor.data).reshape(-1)[0])


def _negative(tensors: Sequence[Any], producer: dict[int, Any], condition: int) -> tuple[int, Any] | None:
    """(ids, the LESS) where `condition` is LESS(ids, 0) of computed integer ids."""
    less = producer.get(condition)
    if less is None or less.name != "LESS" or len(less.inputs) != 2 or _constant_integer(tensors, less.inputs[1]) != 0:
        return None
    ids = less.inputs[0]
    return (ids, less) if tensors[ids].data is None and tensors[ids].dtype in ID_TYPES else None


def _with_vocabulary(tensors: Sequence[Any], producer: dict[int, Any], tensor: int, operand: int, name: str = "ADD") -> Any | None:
    """The `name` operator (ADD, or MUL) giving `tensor` from `operand` and a positive integer constant (the vocabulary),
    with no fused activation."""
    operator = producer.get(tensor)
    if operator is None or operator.name != name or len(operator.inputs) != 2 or operand not in operator.inputs or operator.activation != "NONE":
        return None
    other = operator.inputs[1 - list(operator.inputs).index(operand)]
    return operator if (_constant_integer(tensors, other) or 0) >= 1 else None


def _wrap(tensors: Sequence[Any], producer: dict[int, Any], operator: Any) -> tuple[int, list[Any]] | None:
    """(the ids, the wrap's operators, `operator` last) where `operator` ends a wrap: TFLite's converter's
    SELECT_V2(LESS(ids, 0), ADD(ids, V), ids), or onnx2tf's ADD(ids, MUL(CAST(LESS(ids, 0)), V))."""
    if operator.name == "SELECT_V2" and len(operator.inputs) == 3:
        condition, wrapped, ids = operator.inputs
        negative, add = _negative(tensors, producer, condition), _with_vocabulary(tensors, producer, wrapped, ids)
        return (ids, [negative[1], add, operator]) if negative is not None and negative[0] == ids and add is not None else None
    if operator.name != "ADD" or len(operator.inputs) != 2 or operator.activation != "NONE":
        return None
    for ids, shift in (operator.inputs, operator.inputs[::-1]):
        casts = [producer[index] for index in getattr(producer.get(shift), "inputs", ()) if index in producer and producer[index].name == "CAST"]
        if not casts:
            continue
        multiply = _with_vocabulary(tensors, producer, shift, casts[0].outputs[0], "MUL")
        negative = _negative(tensors, producer, casts[0].inputs[0])
        if multiply is not None and negative is not None and negative[0] == ids:
            return ids, [negative[1], casts[0], multiply, operator]
    return None


def unwrapped_token_ids(tensors: Sequence[Any], operators: Sequence[Any], outputs: Sequence[int]) -> tuple[Sequence[Any], tuple]:
    """(tensors, operators) with each wrap of negative ids taken away (see the module), the operators renumbered; a wrap
    whose comparison or sum something else reads too, or whose result is a model output, stays."""
    producer = {output: operator for operator in operators for output in operator.outputs}
    reads: dict[int, int] = {}
    for operator in operators:
        for index in operator.inputs:
            reads[index] = reads.get(index, 0) + 1
    dropped: set[int] = set()
    renamed: dict[int, int] = {}
    for operator in operators:
        found = _wrap(tensors, producer, operator)
        if found is None or operator.outputs[0] in outputs:
            continue
        ids, wrap = found
        if any(reads[part.outputs[0]] != 1 for part in wrap[:-1]):
            continue
        dropped |= {part.index for part in wrap}
        renamed[operator.outputs[0]] = ids
    if not dropped:
        return tensors, tuple(operators)
    kept = [operator for operator in operators if operator.index not in dropped]
    return tensors, tuple(replace(operator, index=position, inputs=tuple(renamed.get(index, index) for index in operator.inputs))
                          for position, operator in enumerate(kept))
