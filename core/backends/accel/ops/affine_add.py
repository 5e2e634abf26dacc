"""add of the tflite_int8 dialect on the accelerator (TFLite's ADD of two int8 tensors at their own scales
and zero points): on chunks of vectors (element-wise: any layout is one flat run), each operand LOADed
into the accumulators (int8, sign-extended), ADD of minus its zero point, LSL by left_shift (20), its
rescale to the common scale (RMUL, RSHRA: Lowering.rescale), the two summed by ALU ADD, the sum rescaled
to the output scale, ADD of the output zero point, MAX/MIN, STORE."""

from __future__ import annotations

from core.backends.accel.isa import Alu, Index, Load, Loop
from core.backends.accel.lowering import Lowering, PackedTensor, Rescale, lowers
from core.backends.accel.ops.add import add_tile_needs, chunks
from core.ir.op import dialect_key
from core.ir.ops.add.affine_record import AddAffineLayer
from core.ir.tflite_dialect import SCHEME


@lowers(dialect_key("add", SCHEME), add_tile_needs)
def affine_add_lower(record: AddAffineLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    for start, stop in chunks(record, inputs, output, low):
        n = stop - start
        what = f"{record.name} vectors {start}-{stop - 1}"
        for position, (base, tensor) in enumerate(((0, inputs[0]), (n, inputs[1]))):
            role = f"{what}: input {position}"
            low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=role))
            low.alu_over("ADD", base, (1, n, 1), -record.input_zero_points[position], f"{role} - zero point")
            low.alu_over("LSL", base, (1, n, 1), record.left_shift, f"{role} << {record.left_shift}")
            low.rescale(base, (1, n, 1), Rescale((record.input_multipliers[position],), (record.input_shifts[position],)), role)
        low.emit(Alu("ADD", Loop(n), Index(0, 1), Index(n, 1), note=f"{what}: sum"))
        low.rescale(0, (1, n, 1), Rescale((record.output_multiplier,), (record.output_shift,)), f"{what}: output")
        low.alu_over("ADD", 0, (1, n, 1), record.output_zero_point, f"{what}: + output zero point")
        low.alu_over("MAX", 0, (1, n, 1), record.output_min, f"{what}: clamp low")
        low.alu_over("MIN", 0, (1, n, 1), record.output_max, f"{what}: clamp high")
        low.emit_store_flat(0, output.address + start * low.block, n, f"{what}: store")
