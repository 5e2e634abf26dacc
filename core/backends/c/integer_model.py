"""An operation's integer model (its annotate rule's `integer_model`, core/frontend/layers.IntegerModelBuilder) rendered
as one C99 int64 expression per output element: the third rendering of the one definition of an element-wise
operation's arithmetic, beside the annotated graph's ops and the simulator's arrays (core/ir/integer_kernel.py). An
emitter supplies the loops and each input's element; the expression is the arithmetic. Each graph op the C form takes
is one line of C_OPS (as tinygrad's renderer/cstyle.py); one it lacks is a CodegenError naming it."""

from __future__ import annotations

from typing import Any, Callable

from core.backends.c.emitter import C_VALUES, CodegenError
from core.ir.records import IrLayer

# each graph op an element-wise integer model may use, as a C expression of its operands' expressions (int64)
C_OPS = {
    "AddV2": "({0} + {1})",
    "Sub": "({0} - {1})",
    "Mul": "({0} * {1})",
    "Cast": "{0}",
}


class CModelBuilder:
    """Tensors are C expressions of int64 integers; `to_ints` and `from_ints` are the identity (the inputs are the
    integers), as on arrays."""

    graph = None
    layer = None

    def __init__(self, inputs: list[str], input_log2scales: list[int], output_log2scale: int, activation: str):
        self.inputs = [f"(int64_t){element}" for element in inputs]
        self.input_log2scales, self.output_log2scale, self.activation = input_log2scales, output_log2scale, activation

    def const(self, label: str, value: Any, dtype: str = "float32") -> str:
        if float(value) != int(value):
            raise CodegenError(f"constant {label} = {value}: an element-wise C expression holds integers")
        return f"(int64_t){int(value)}"

    def op(self, op: str, inputs: list[str], *, cast_to: str | None = None, keep_dims: bool | None = None) -> str:
        if op not in C_OPS:
            raise CodegenError(f"graph op {op} has no C form (core/backends/c/integer_model.py: C_OPS)")
        return C_OPS[op].format(*inputs)

    def to_ints(self, tensor: str, log2scale: int) -> str:
        return tensor

    def round_shift(self, tensor: str, shift: int) -> str:
        return tensor if shift == 0 else f"qt_round_shift64({tensor}, {shift})"

    def clamp(self, tensor: str, low: int, high: int) -> str:
        return f"qt_clamp64({tensor}, {low}, {high})"

    def from_ints(self, tensor: str, log2scale: int) -> str:
        return tensor

    def rescale(self, tensor: str, multiplier: int, shift: int) -> str:
        return f"qt_mbqm({tensor}, INT64_C({multiplier}), {shift})"


def element_expression(integer_model: Callable, record: IrLayer, inputs: list[str]) -> str:
    """The int8 output element of `record`'s integer model whose inputs' elements are the C expressions `inputs`."""
    return model_expression(integer_model, inputs, [record.log2scale_of_input(position) for position in range(len(inputs))],
                            record.log2scale_of_output(), getattr(record, "activation_type", "None"))


def record_expression(record_model: Callable, record: IrLayer, inputs: list[str]) -> str:
    """The int8 (int16) output element of a model that reads the record's own numbers (zero points, multipliers and
    shifts; its requantization) whose inputs' elements are the C expressions `inputs`, saturated to the record's width."""
    return f"{C_VALUES[record.activation_bits].saturate}({record_model(CModelBuilder(inputs, [], 0, 'None'), record)})"


def model_expression(integer_model: Callable, inputs: list[str], input_log2scales: list[int], output_log2scale: int,
                     activation: str) -> str:
    """The model's int8 output as a C expression of its inputs' (int8) elements, saturated as the simulator's kernel."""
    return f"qt_sat8({integer_model(CModelBuilder(inputs, input_log2scales, output_log2scale, activation))})"
