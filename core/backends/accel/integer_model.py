"""An operation's integer model rendered as the accelerator's ALU instructions over a box of vectors in the
accumulators: the fourth rendering of the one definition of an element-wise operation's arithmetic, beside the
annotated graph's ops, the simulator's arrays (core/ir/integer_kernel.py) and C (core/backends/c/integer_model.py).
A tensor is a box of ACC vectors (`Vectors`: the lowering LOADs the inputs there); each step overwrites its first
operand's box, so a model must read each tensor once. Each graph op the ALU takes is one line of ALU_STEPS; one
it lacks, or a constant it cannot take, is a LoweringError naming it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from core.backends.accel.isa import Alu, Index, Loop
from core.backends.accel.lowering import Lowering, LoweringError, Rescale


@dataclass
class Vectors:
    """A [1][vectors][1] box of ACC vectors at `base`."""

    base: int
    vectors: int
    read: bool = False


@dataclass(frozen=True)
class Constant:
    value: int


def _add(builder: "AluModelBuilder", first: Any, second: Any, note: str) -> Vectors:
    if isinstance(second, Constant):
        return builder.immediate("ADD", first, second.value, note)
    target, source = builder.taken(first), builder.taken(second)
    builder.low.emit(Alu("ADD", Loop(target.vectors), Index(target.base, 1), Index(source.base, 1), note=note))
    return Vectors(target.base, target.vectors)


def _subtract(builder: "AluModelBuilder", first: Any, second: Any, note: str) -> Vectors:
    if not isinstance(second, Constant):
        raise LoweringError(f"{note}: the ALU subtracts a constant only (ADD of its negative)")
    return builder.immediate("ADD", first, -second.value, note)


def _multiply(builder: "AluModelBuilder", first: Any, second: Any, note: str) -> Vectors:
    if not isinstance(second, Constant) or second.value <= 0 or second.value & (second.value - 1):
        raise LoweringError(f"{note}: the ALU multiplies by a power of two only (LSL)")
    return builder.immediate("LSL", first, second.value.bit_length() - 1, note)


# each graph op an element-wise model may use, as the ALU computes it (in place, on its first operand's box)
ALU_STEPS: dict[str, Callable[["AluModelBuilder", Any, Any, str], Vectors]] = {
    "AddV2": _add,
    "Sub": _subtract,
    "Mul": _multiply,
}


class _OnIntegers:
    """A builder of a model whose inputs are already the integers (no graph): `to_ints` and `from_ints` are the
    identity, as on arrays and in C."""

    graph: Any = None  # a model on integers reads no graph
    layer: Any = None
    attrs: Any = None
    input_log2scales: list[int] = []
    output_log2scale, activation = 0, "None"

    def to_ints(self, tensor: Any, log2scale: int) -> Any:
        return tensor

    def from_ints(self, tensor: Any, log2scale: int) -> Any:
        return tensor


class AluModelBuilder(_OnIntegers):
    """The integer-model builder (core/frontend/layers.IntegerModelBuilder) whose tensors are boxes of ACC vectors."""

    def __init__(self, low: Lowering, inputs: list[Vectors], what: str):
        self.low, self.inputs, self.what = low, inputs, what

    def taken(self, tensor: Any) -> Vectors:
        """The box; one read twice (overwritten by the first step that read it) is refused."""
        if not isinstance(tensor, Vectors):
            raise LoweringError(f"{self.what}: a constant where the ALU needs vectors")
        if tensor.read:
            raise LoweringError(f"{self.what}: the model reads a tensor twice; the ALU computes in place")
        tensor.read = True
        return tensor

    def immediate(self, op: str, tensor: Any, value: int, note: str) -> Vectors:
        box = self.taken(tensor)
        self.low.alu_over(op, box.base, (1, box.vectors, 1), value, note)
        return Vectors(box.base, box.vectors)

    def const(self, label: str, value: Any, dtype: str = "float32") -> Constant:
        if float(value) != int(value):
            raise LoweringError(f"{self.what}: constant {label} = {value}; the ALU's immediates are integers")
        return Constant(int(value))

    def op(self, op: str, inputs: list, *, cast_to: str | None = None, keep_dims: bool | None = None) -> Vectors:
        if op not in ALU_STEPS or len(inputs) != 2:
            raise LoweringError(f"{self.what}: graph op {op} of {len(inputs)} operands has no ALU form "
                                "(core/backends/accel/integer_model.py: ALU_STEPS)")
        return ALU_STEPS[op](self, inputs[0], inputs[1], f"{self.what}: {op}")

    def round_shift(self, tensor: Vectors, shift: int) -> Vectors:
        """RSHR (half up) by a positive shift, SHL (exact, saturating: the clamp that follows bounds it) by a negative."""
        if shift == 0:
            return tensor
        return self.immediate("RSHR" if shift > 0 else "SHL", tensor, abs(shift), f"{self.what}: shift {-shift:+d}")

    def rescale(self, tensor: Vectors, multiplier: int, shift: int) -> Vectors:
        box = self.taken(tensor)
        self.low.rescale(box.base, (1, box.vectors, 1), Rescale((multiplier,), (shift,)), f"{self.what}: rescale")
        return Vectors(box.base, box.vectors)

    def clamp(self, tensor: Vectors, low: int, high: int) -> Vectors:
        box = self.immediate("MAX", tensor, low, f"{self.what}: clamp low")
        return self.immediate("MIN", box, high, f"{self.what}: clamp high")


class EncodedShifts(_OnIntegers):
    """The same protocol, collecting the shift amounts a model's rescales encode on the ALU (partition's check of the
    target's shifter, before lowering): a quantized multiplier's LSL and RSHRA; a power-of-two shift is the record's own
    (IrLayer.shifts). Tensors are names: the inputs', and what a step makes is named after its first operand."""

    def __init__(self, what: str, inputs: int):
        self.what, self.inputs = what, [f"input {position}" for position in range(inputs)]
        self.shifts: list = []

    def const(self, label: str, value: Any, dtype: str = "float32") -> Any:
        return value

    def op(self, op: str, inputs: list, *, cast_to: str | None = None, keep_dims: bool | None = None) -> Any:
        return "output" if op == "AddV2" and all(isinstance(tensor, str) for tensor in inputs) else inputs[0]

    def clamp(self, tensor: Any, low: int, high: int) -> Any:
        return tensor

    def round_shift(self, tensor: Any, shift: int) -> Any:
        return tensor

    def rescale(self, tensor: Any, multiplier: int, shift: int) -> Any:
        self.shifts += Rescale((multiplier,), (shift,)).encoded_shifts(f"{self.what}: {tensor}")
        return tensor
