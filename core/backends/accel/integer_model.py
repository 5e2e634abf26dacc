"""An operation's element-wise integer model rendered as the accelerator's ALU instructions over boxes of vectors in
the accumulators: the fourth rendering of the one definition of an element-wise operation's arithmetic, beside the
annotated graph's ops, the simulator's arrays (core/ir/integer_kernel.py) and C (core/backends/c/integer_model.py).

The model is first planned (`AluPlanBuilder`: each step of it an ALU operation on the box of one operand, in place, so
a model may not read a value after a step has overwritten its box), independently of the tile: a step the ALU lacks, or a constant it cannot take,
is a LoweringError naming it, which partition reads as the layer's refusal before any lowering; the plan's shifts are
what partition checks against the target's shifter. The lowering then emits the plan over each chunk (`emit_plan`).
Each graph op the ALU takes is one line of ALU_STEPS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from core.backends.accel.isa import Alu, Index, Loop
from core.backends.accel.lowering import Lowering, LoweringError, Rescale
from core.ir.records import Shift


@dataclass(frozen=True)
class Box:
    """The accumulators holding operand `operand`'s values after its `version`-th step (0: the operand itself)."""

    operand: int
    version: int = 0


@dataclass(frozen=True)
class Constant:
    value: int


@dataclass(frozen=True)
class Step:
    """One ALU operation over the box of `box`: with the immediate `imm`, with the box of `source`, or a rescale."""

    op: str
    box: int
    note: str
    imm: int | None = None
    source: int | None = None
    rescale: Rescale | None = None
    round: int = 0  # RMUL's rounding shift

    def shifts(self) -> list[Shift]:
        """The shift amounts it encodes: a shift's immediate, a rescale's LSL and RSHRA."""
        if self.rescale is not None:
            return self.rescale.encoded_shifts(self.note)
        return [Shift(f"{self.op} {self.note}", self.imm)] if self.op in ("RSHR", "SHL", "LSL") and self.imm is not None else []


def _add(builder: "AluPlanBuilder", first: Any, second: Any, note: str) -> Box:
    if isinstance(second, Constant):
        return builder.immediate("ADD", first, second.value, note)
    target, source = builder.taken(first), builder.taken(second)
    builder.steps.append(Step("ADD", target.operand, note, source=source.operand))
    return builder.written(target)


def _subtract(builder: "AluPlanBuilder", first: Any, second: Any, note: str) -> Box:
    if not isinstance(second, Constant):
        raise LoweringError(f"{note}: the ALU subtracts a constant only (ADD of its negative)")
    return builder.immediate("ADD", first, -second.value, note)


def _multiply(builder: "AluPlanBuilder", first: Any, second: Any, note: str) -> Box:
    if isinstance(second, Constant) and second.value == -1:  # (x * -2 + 1) >> 1 = -x exactly
        return builder.immediate("RMUL", first, -2, note, round=1)
    if not isinstance(second, Constant) or second.value <= 0 or second.value & (second.value - 1):
        raise LoweringError(f"{note}: the ALU multiplies by a power of two (LSL) or -1 only, not by a tensor")
    return builder.immediate("LSL", first, second.value.bit_length() - 1, note)


# each graph op an element-wise model may use, as the ALU computes it (in place, on its first operand's box)
ALU_STEPS: dict[str, Callable[["AluPlanBuilder", Any, Any, str], Box]] = {
    "AddV2": _add,
    "Sub": _subtract,
    "Mul": _multiply,
}


class AluPlanBuilder:
    """The integer-model builder (core/frontend/layers.IntegerModelBuilder) whose tensors are the operands' boxes of
    ACC vectors, and whose steps are planned, not emitted; `to_ints` and `from_ints` are the identity (the inputs are
    the integers), as on arrays and in C."""

    graph: Any = None  # a model on integers reads no graph
    layer: Any = None
    attrs: Any = None
    input_log2scales: list[int] = []
    output_log2scale, activation = 0, "None"

    def __init__(self, operands: int, what: str):
        self.inputs, self.what = [Box(operand) for operand in range(operands)], what
        self.steps: list[Step] = []
        self._versions = [0] * operands  # each operand's box: how many steps have written it

    def taken(self, tensor: Any) -> Box:
        """The box; a value a later step has overwritten (the model reads it after a step that read it) is refused."""
        if not isinstance(tensor, Box):
            raise LoweringError(f"{self.what}: a constant where the ALU needs vectors")
        if tensor.version != self._versions[tensor.operand]:
            raise LoweringError(f"{self.what}: the model reads a value its box no longer holds; the ALU computes in place")
        return tensor

    def written(self, box: Box) -> Box:
        """What a step leaves in `box`'s accumulators."""
        self._versions[box.operand] += 1
        return Box(box.operand, self._versions[box.operand])

    def immediate(self, op: str, tensor: Any, value: int, note: str, round: int = 0) -> Box:
        box = self.taken(tensor)
        self.steps.append(Step(op, box.operand, note, imm=value, round=round))
        return self.written(box)

    def const(self, label: str, value: Any, dtype: str = "float32") -> Constant:
        if float(value) != int(value):
            raise LoweringError(f"{self.what}: constant {label} = {value}; the ALU's immediates are integers")
        return Constant(int(value))

    def op(self, op: str, inputs: list, *, cast_to: str | None = None, keep_dims: bool | None = None) -> Box:
        if op not in ALU_STEPS or len(inputs) != 2:
            raise LoweringError(f"{self.what}: graph op {op} of {len(inputs)} operands has no ALU form "
                                "(core/backends/accel/integer_model.py: ALU_STEPS)")
        return ALU_STEPS[op](self, inputs[0], inputs[1], f"{self.what}: {op}")

    def to_ints(self, tensor: Box, log2scale: int) -> Box:
        return tensor

    def from_ints(self, tensor: Box, log2scale: int) -> Box:
        return tensor

    def round_shift(self, tensor: Box, shift: int) -> Box:
        """RSHR (half up) by a positive shift, SHL (exact, saturating: the clamp that follows bounds it) by a negative."""
        if shift == 0:
            return tensor
        return self.immediate("RSHR" if shift > 0 else "SHL", tensor, abs(shift), f"{self.what}: shift {-shift:+d}")

    def rescale(self, tensor: Box, multiplier: int, shift: int) -> Box:
        box = self.taken(tensor)
        self.steps.append(Step("RESCALE", box.operand, f"{self.what}: rescale", rescale=Rescale((multiplier,), (shift,))))
        return self.written(box)

    def clamp(self, tensor: Box, low: int, high: int) -> Box:
        box = self.immediate("MAX", tensor, low, f"{self.what}: clamp low")
        return self.immediate("MIN", box, high, f"{self.what}: clamp high")


def alu_plan(model: Callable[..., Any], record: Any, operands: int) -> tuple[list[Step], int]:
    """(the steps, the operand whose box holds the result) of the record's model; a LoweringError where the ALU cannot."""
    builder = AluPlanBuilder(operands, f"layer {record.name}")
    result = model(builder, record)
    if not isinstance(result, Box):
        raise LoweringError(f"layer {record.name}: the model's result is a constant, not vectors")
    return builder.steps, result.operand


def emit_plan(low: Lowering, steps: list[Step], bases: list[int], vectors: int, what: str) -> None:
    """The plan over a chunk of `vectors` vectors of each operand, operand k's at ACC bases[k]."""
    shape = (1, vectors, 1)
    for step in steps:
        note = f"{what}: {step.note.split(': ', 1)[-1]}"
        if step.rescale is not None:
            low.rescale(bases[step.box], shape, step.rescale, note)
        elif step.source is not None:
            low.emit(Alu(step.op, Loop(vectors), Index(bases[step.box], 1), Index(bases[step.source], 1), note=note))
        else:
            low.alu_over(step.op, bases[step.box], shape, int(step.imm or 0), note, round=step.round)
