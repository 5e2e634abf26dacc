"""add, of both dialects, on the accelerator: on chunks of vectors (element-wise: any layout is one flat run of
H * W * blocks vectors), both operands LOADed into ACC (int8, sign-extended) and the record's arithmetic
(core/ir/ops/add/kernel.py: add_arithmetic with its requantization) rendered on the ALU (integer_model.py): TF2IR's
finer operand aligned by RSHR, ADD, the output shift (SHL exact and saturating, or RSHR), MAX/MIN; TFLite's zero points
by ADD, the headroom by LSL, each rescale by RMUL and RSHRA; then STORE."""

from __future__ import annotations

from core.backends.accel.integer_model import AluModelBuilder, EncodedShifts, Vectors
from core.backends.accel.isa import Load
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.ops.add.kernel import record_add
from core.ir.ops.add.record import AddLayer
from core.ir.records import Shift

MAX_VECTORS = 0xFFFF  # a 16-bit loop extent


def add_tile_needs(record: AddLayer, accelerator: Accelerator) -> dict[str, int]:
    """One vector of each operand in the accumulators."""
    return {"accumulator": 2 * accelerator.channel_block * ACCUMULATOR_BYTES}


def chunks(record, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> list[tuple[int, int]]:
    """[start, stop) of the output's vectors per chunk: both operands' vectors of a chunk fit the accumulators."""
    if not all(t.strides == output.strides and t.vectors == output.vectors for t in inputs):
        raise LoweringError(f"layer {record.name}: operands of different shapes or layouts")
    chunk = min(low.acc_units // 2, MAX_VECTORS)
    if chunk == 0:
        raise LoweringError(f"layer {record.name}: the accumulator buffer holds fewer than two vectors")
    return spans(output.vectors, chunk)


def add_shifts(record: AddLayer, params: dict) -> list[Shift]:
    """The shifts the ALU encodes beyond the record's own: the headroom's LSL and each quantized multiplier's."""
    encoded = EncodedShifts(record.name, 2)
    record_add(encoded, record)  # the model, read for its rescales only
    left_shift = record.requantization().left_shift
    return [*([Shift("left_shift", left_shift)] if left_shift else []), *encoded.shifts]


@lowers("add", add_tile_needs, shifts=add_shifts)
def add_lower(record: AddLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    """Each chunk: the operands' vectors at ACC 0 and n, the arithmetic in place at 0, STOREd."""
    for start, stop in chunks(record, inputs, output, low):
        n = stop - start
        what = f"{record.name} vectors {start}-{stop - 1}"
        for position, (base, tensor) in enumerate(((0, inputs[0]), (n, inputs[1]))):
            low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=f"{what}: input {position}"))
        total = record_add(AluModelBuilder(low, [Vectors(0, n), Vectors(n, n)], what), record)
        low.emit_store_flat(total.base, output.address + start * low.block, n, f"{what}: store")
