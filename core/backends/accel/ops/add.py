"""add, of both dialects, on the accelerator: on chunks of vectors (element-wise: any layout is one flat run of
H * W * blocks vectors), both operands LOADed into ACC (int8, sign-extended); TF2IR's: the finer one
aligned by RSHR, ALU ADD, the output shift (SHL exact and saturating, or RSHR), MAX/MIN for
the activation and int8, STORE; the tflite_int8 dialect's: TFLite's rescaling (_tflite_add)."""

from __future__ import annotations

from core.backends.accel.isa import Alu, Index, Load, Loop
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, Rescale, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.ops.add.record import AddLayer
from core.ir.records import Shift
from core.quantize.grid import AffineGrid, Pow2Grid

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
    """TFLite's ADD: the left shift and each rescale's (TF2IR's are the record's own, IrLayer.shifts)."""
    if not isinstance(record.output_grid, AffineGrid):
        return []
    rescales = [*(Rescale((multiplier,), (shift,)).encoded_shifts(f"input {position}")
                  for position, (multiplier, shift) in enumerate(zip(record.input_multipliers, record.input_shifts))),
                Rescale((record.output_multiplier,), (record.output_shift,)).encoded_shifts("output")]
    return [Shift("left_shift", record.left_shift), *(shift for shifts in rescales for shift in shifts)]


@lowers("add", add_tile_needs, shifts=add_shifts)
def add_lower(record: AddLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    """The record's sum, as its output's grid says (ACCEL_ADD)."""
    ACCEL_ADD[type(record.output_grid)](record, inputs, output, low)


def _pow2_add(record: AddLayer, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    pl, addend = inputs
    coarse = record.coarse_log2scale
    clamp_low, clamp_high = record.clamp()
    for start, stop in chunks(record, inputs, output, low):
        n = stop - start
        what = f"{record.name} vectors {start}-{stop - 1}"
        for base, tensor, scale, role in ((0, pl, record.pl_log2scale, "pl"), (n, addend, record.add_log2scale, "add")):
            low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=f"{what}: {role}"))
            if scale > coarse:
                low.alu_over("RSHR", base, (1, n, 1), scale - coarse, f"{what}: align {role} >> {scale - coarse}")
        low.emit(Alu("ADD", Loop(n), Index(0, 1), Index(n, 1), note=f"{what}: pl + add"))
        low.requantize(0, (1, n, 1), -record.output_shift_bit, clamp_low, clamp_high, what)
        low.emit_store_flat(0, output.address + start * low.block, n, f"{what}: store")


def _tflite_add(record: AddLayer, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    """TFLite's ADD: each operand LOADed, ADD of minus its zero point, LSL by left_shift (20), its rescale to the
    common scale (RMUL, RSHRA: Lowering.rescale), the two summed by ALU ADD, the sum rescaled to the output scale,
    ADD of the output zero point, MAX/MIN, STORE."""
    for start, stop in chunks(record, inputs, output, low):
        n = stop - start
        what = f"{record.name} vectors {start}-{stop - 1}"
        for position, (base, tensor) in enumerate(((0, inputs[0]), (n, inputs[1]))):
            role = f"{what}: input {position}"
            low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=role))
            low.alu_over("ADD", base, (1, n, 1), -record.input_grids[position].zero_point, f"{role} - zero point")
            low.alu_over("LSL", base, (1, n, 1), record.left_shift, f"{role} << {record.left_shift}")
            low.rescale(base, (1, n, 1), Rescale((record.input_multipliers[position],), (record.input_shifts[position],)), role)
        low.emit(Alu("ADD", Loop(n), Index(0, 1), Index(n, 1), note=f"{what}: sum"))
        low.rescale(0, (1, n, 1), Rescale((record.output_multiplier,), (record.output_shift,)), f"{what}: output")
        low.alu_over("ADD", 0, (1, n, 1), record.output_grid.zero_point, f"{what}: + output zero point")
        low.alu_over("MAX", 0, (1, n, 1), record.output_min, f"{what}: clamp low")
        low.alu_over("MIN", 0, (1, n, 1), record.output_max, f"{what}: clamp high")
        low.emit_store_flat(0, output.address + start * low.block, n, f"{what}: store")


ACCEL_ADD = {Pow2Grid: _pow2_add, AffineGrid: _tflite_add}  # by the output's grid
