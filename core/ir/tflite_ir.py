"""An int8 .tflite model (core/frontend/tflite.py) as an IR of the tflite_int8 dialect (core/ir/tflite_dialect.py):
one layer per operator, its fields and constants read by its operation's builder (core/ir/ops/*/tflite.py),
every integer parameter derived as TFLite's Prepare derives it from the file's float32 scales. The IR computes
what the chosen runtime's kernels compute on the file (core/quantize/runtimes.py: LiteRT's reference kernels by
default, or TFLite Micro's), tensor for tensor (simulate checks it on the evaluation data). An operator no
operation builds is refused naming it and its index."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np

from core.frontend.tflite import ACTIVATION_BITS, TfliteError, TfliteModel, TfliteOperator
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT, IrOp, network_input_name, operation_of
from core.ir.ops import OPS  # every operation registered
from core.ir.ops.constant import CONSTANT
from core.ir.ops.constant.tflite import constant_from_tflite
from core.ir.records import BITS_KEY, DEFAULT_BITS, IrLayer
from core.ir.tflite_dialect import SCHEME, activation_bits
from core.quantize.runtimes import DEFAULT_TFLITE_RUNTIME, Runtime, runtimes_taking


def builders() -> dict[str, IrOp]:
    """TFLite builtin operator -> the operation that reads it (as a record of the tflite_int8 dialect)."""
    return {operator: op for op in OPS.values() for operator in op.builders}


def affine_layer(model: TfliteModel, operator: TfliteOperator, name: str, previous: list[str], following: list[str],
                 runtime: Runtime = DEFAULT_TFLITE_RUNTIME):
    """(record, constants) of one operator as `runtime` computes it."""
    op = builders().get(operator.name)
    if op is None:
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) has no tflite_int8 IR operation yet; the IR "
                          f"covers {', '.join(sorted(builders()))}")
    bits = activation_bits(model, operator)
    if runtime.lacks(operator.name, bits):
        others = runtimes_taking(runtime.dialect, [operator.name], bits)
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}{' on int16' if bits == 16 else ''}): {runtime.name} "
                          f"has no kernel for it ({runtime.why_lacking(operator.name, bits)}); set target.scheme.runtime to "
                          f"{' or '.join(others)}, or convert the model without it")
    if bits not in op.widths_of(operator.name):
        built = sorted(name for name, other in builders().items() if bits in other.widths_of(name))
        raise TfliteError(f"{model.path}: operator {operator.index} ({operator.name}) on int{bits} activations (TFLite's 16x8 mode): the "
                          f"IR's {op.name} computes int8 only, its int{bits} arithmetic is not built yet; the 16x8 IR covers "
                          f"{', '.join(built)}")
    fields, params = op.builders[operator.name](model, operator, runtime)
    return _record(op, name, bits, fields, previous, following), params


def _record(op: IrOp, name: str, bits: int, fields: dict, previous: list[str], following: list[str]) -> IrLayer:
    """The tflite_int8 dialect's record of `op` from a builder's fields."""
    return op.record.from_json({"name": name, "operation": op.name, "scheme": SCHEME, **({BITS_KEY: bits} if bits != DEFAULT_BITS else {}),
                                **fields, "previous_layer": previous, "next_layer": following})


@dataclasses.dataclass(frozen=True)
class ConstantOperand:
    """A constant tensor an operator reads as an activation (IrOp.constant_operands): a constant layer of its own, its
    batch `like`'s (a computed operand of the same operator)."""

    index: int
    like: int


def constant_operands(model: TfliteModel) -> dict[int, ConstantOperand]:
    """Each constant int8 (int16) operand of an operator whose operation reads it as an activation, by tensor index."""
    found: dict[int, ConstantOperand] = {}
    for operator in model.operators:
        for constant in _constants_of(model, operator):
            found.setdefault(constant.index, constant)
    return found


def _constants_of(model: TfliteModel, operator: TfliteOperator) -> list[ConstantOperand]:
    op = builders().get(operator.name)
    computed = [index for index in operator.inputs if index >= 0 and model.tensor(index).data is None]
    if op is None or not op.constant_operands or not computed:
        return []
    return [ConstantOperand(index, computed[0]) for index in operator.inputs
            if index >= 0 and model.tensor(index).data is not None and model.tensor(index).dtype in ACTIVATION_BITS]


def as_computed(model: TfliteModel, constants: dict[int, ConstantOperand]) -> TfliteModel:
    """The model as the builders read it: each of `constants` a computed tensor (a constant layer's output)."""
    if not constants:
        return model
    return dataclasses.replace(model, tensors=tuple(dataclasses.replace(tensor, data=None) if tensor.index in constants else tensor
                                                    for tensor in model.tensors))


def constant_layer(model: TfliteModel, constant: ConstantOperand, name: str, previous: list[str], following: list[str]):
    """(record, constants) of a constant operand."""
    fields, params = constant_from_tflite(model, constant.index, constant.like)
    return _record(CONSTANT, name, ACTIVATION_BITS[model.tensor(constant.index).dtype], fields, previous, following), params


def operands(model: TfliteModel, operator: TfliteOperator) -> list[int]:
    """The computed tensors an operator reads, in its order (constants are the layer's fields or params)."""
    return [index for index in operator.inputs if index >= 0 and model.tensor(index).data is None]


def ir_of_tflite(model: TfliteModel, name_of: Callable[[int], str] | None = None, runtime: Runtime = DEFAULT_TFLITE_RUNTIME) -> Ir:
    """The IR of `model` as `runtime` computes it; `name_of(tensor index)` names the layer producing a tensor (default:
    the tensor's name with every character but letters, digits and _ made _)."""
    name_of = name_of or (lambda index: layer_name(model, index))
    sources, producers, reading = ir_layer_sources(model)
    readers: dict[int, list[str]] = {}
    for operator in (source for source in sources if isinstance(source, TfliteOperator)):
        for index in operands(reading, operator):
            readers.setdefault(index, []).append(name_of(operator.outputs[0]))
    ir = Ir(layers=[])
    for source in sources:
        if isinstance(source, ConstantOperand):
            record, params = constant_layer(model, source, name_of(source.index), [producers[source.like]], readers[source.index])
            producers[source.index] = record.name
        else:
            output = source.outputs[0]
            previous = [producers[index] for index in operands(reading, source)]
            following = [END_POINT] if output in model.outputs else readers.get(output, [])
            record, params = affine_layer(reading, source, name_of(output), previous, following, runtime)
            producers[output] = record.name
        ir.layers.append(record)
        if params:
            ir.params[record.name] = params
    return ir


def ir_layer_sources(model: TfliteModel) -> tuple[list[TfliteOperator | ConstantOperand], dict[int, str], TfliteModel]:
    """(what each of the IR's layers is, in its order: an operator, or a constant operand just before its first reader;
    the network inputs' IR names, by tensor; the model as the builders read it, as_computed)."""
    constants = constant_operands(model)
    reading = as_computed(model, constants)
    operators, names = ir_operators(reading)
    return _placed(operators, constants), names, reading


def _placed(operators: list[TfliteOperator], constants: dict[int, ConstantOperand]) -> list[TfliteOperator | ConstantOperand]:
    sources: list[TfliteOperator | ConstantOperand] = []
    placed: set[int] = set()
    for operator in operators:
        for index in operator.inputs:
            if index in constants and index not in placed:
                sources.append(constants[index])
                placed.add(index)
        sources.append(operator)
    return sources


def source_tensor(source: TfliteOperator | ConstantOperand) -> int:
    """The tensor a layer's source computes."""
    return source.index if isinstance(source, ConstantOperand) else source.outputs[0]


def ir_operators(model: TfliteModel) -> tuple[list[TfliteOperator], dict[int, str]]:
    """The operators the IR's layers are, in order, and the tensors that are network inputs, each -> its IR name ("input",
    or network_input_name(the file's name of it) for each of several): a RESHAPE of an input that only inserts the unit
    height (a 1-D network's [1, L, C] as the image [1, 1, L, C] its layers read, a text model's ids [1, L] as [1, 1, L], the
    same bytes) is that input itself, as the IR's input is that image."""
    names = {index: NETWORK_INPUT if len(model.inputs) == 1 else network_input_name(model.tensor(index).name) for index in model.inputs}
    operators = list(model.operators)
    while operators and operators[0].name == "RESHAPE" and len(operands(model, operators[0])) == 1 and \
            operands(model, operators[0])[0] in names and _inserts_unit_height(model, operators[0]):
        names[operators[0].outputs[0]] = names[operands(model, operators[0])[0]]
        operators.pop(0)
    return operators, names


def _inserts_unit_height(model: TfliteModel, operator: TfliteOperator) -> bool:
    signal, image = model.tensor(operands(model, operator)[0]).shape, model.tensor(operator.outputs[0]).shape
    return len(signal) in (2, 3) and tuple(image) == (signal[0], 1, *signal[1:])


def layer_name(model: TfliteModel, index: int) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", model.tensor(index).name) or f"tensor_{index}"


def run_operator(model: TfliteModel, operator: TfliteOperator, values: dict[int, np.ndarray], runtime: Runtime = DEFAULT_TFLITE_RUNTIME) -> np.ndarray:
    """One operator run by its IR operation's kernel, as `runtime` computes it, on the computed tensors in `values` (by
    index), in the shape of its output tensor."""
    constants = {constant.index: constant for constant in _constants_of(model, operator)}
    reading = as_computed(model, constants)
    batch = len(values[next(constant.like for constant in constants.values())]) if constants else 0
    known = {**values, **{index: np.broadcast_to(np.asarray(model.tensor(index).data), (batch, *model.tensor(index).shape[1:]))
                          for index in constants}}
    record, params = affine_layer(reading, operator, f"operator_{operator.index}", [NETWORK_INPUT] * len(operands(reading, operator)),
                                  [END_POINT], runtime)
    result = kernel_of(record)(record, params, [as_read(known[index], record, position)
                                                for position, index in enumerate(operands(reading, operator))])
    return result.reshape(len(result), *model.tensor(operator.outputs[0]).shape[1:])


def kernel_of(record: IrLayer):
    return operation_of(record).kernel


def as_read(value: np.ndarray, record: IrLayer, position: int) -> np.ndarray:
    shape = tuple(record.shape_of_input(position))
    return value if tuple(value.shape[1:]) == shape else value.reshape(len(value), *shape)
