"""The accelerator's lowering of an element-wise operation (its IrOp's `elementwise`), rendered from that one
definition: on chunks of vectors (any layout is one flat run of H * W * blocks vectors, every operand of the output's
shape), each operand LOADed into ACC (int8, sign-extended), the model's plan of ALU steps (integer_model.py) in place,
the result STOREd. What the ALU cannot compute (a product of two tensors) is the layer's refusal, which keeps it on the
host. An operation that declares `elementwise` and has no lowering or host-only reason of its own gets this one
(ops/__init__.py)."""

from __future__ import annotations

from typing import Any, Callable

from core.backends.accel.integer_model import alu_plan, emit_plan
from core.backends.accel.isa import Load
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.records import IrLayer, Shift

MAX_VECTORS = 0xFFFF  # a 16-bit loop extent


def register_elementwise(operation: str, model: Callable[..., Any]) -> None:
    """Register the lowering of `operation` from its element-wise model."""

    def operands(record: IrLayer) -> int:
        return len(record.operands())

    def tile_needs(record: IrLayer, accelerator: Accelerator) -> dict[str, int]:
        """One vector of each operand in the accumulators."""
        return {"accumulator": operands(record) * accelerator.channel_block * ACCUMULATOR_BYTES}

    def refusals(record: IrLayer, params: dict) -> list[str]:
        shapes = {tuple(record.shape_of_input(position)) for position in range(operands(record))} | {tuple(record.shape_of_output())}
        problems = [] if len(shapes) == 1 else [f"operands of shapes {sorted(map(list, shapes))}: the ALU computes on one shape, "
                                                "without broadcasting"]
        try:
            alu_plan(model, record, operands(record))
        except LoweringError as error:
            problems.append(str(error).removeprefix(f"layer {record.name}: "))
        return problems

    def shifts(record: IrLayer, params: dict) -> list[Shift]:
        steps, _ = alu_plan(model, record, operands(record))
        return [shift for step in steps for shift in step.shifts()]

    def lower(record: IrLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
        if not all(tensor.strides == output.strides and tensor.vectors == output.vectors for tensor in inputs):
            raise LoweringError(f"layer {record.name}: operands of different shapes or layouts")
        chunk = min(low.acc_units // len(inputs), MAX_VECTORS)
        if chunk == 0:
            raise LoweringError(f"layer {record.name}: the accumulator buffer holds fewer than {len(inputs)} vectors")
        steps, result = alu_plan(model, record, len(inputs))
        for start, stop in spans(output.vectors, chunk):
            n = stop - start
            what = f"{record.name} vectors {start}-{stop - 1}"
            bases = [position * n for position in range(len(inputs))]
            for position, (base, tensor) in enumerate(zip(bases, inputs)):
                low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=f"{what}: input {position}"))
            emit_plan(low, steps, bases, n, what)
            low.emit_store_flat(bases[result], output.address + start * low.block, n, f"{what}: store")

    lowers(operation, tile_needs, refusals, shifts=shifts)(lower)
