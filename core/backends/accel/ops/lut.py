"""lut, of both dialects, on the accelerator: y = table[x + 128] by the vector ALU's LUT (isa.py). On chunks of vectors
(element-wise: any layout is one flat run of H * W * blocks vectors, as add.py's): the input LOADed (int8 sign-extended),
ADD 128, LUT from the layer's table (its 256 int8 entries as int32s in ACC, loaded once a layer), STORE."""

from __future__ import annotations

import numpy as np

from core.backends.accel.isa import Alu, Index, Load, Loop, lut_vectors
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.ops.lut.record import TABLE_SIZE, LutLayer

MAX_VECTORS = 0xFFFF  # a 16-bit loop extent



def lut_tile_needs(record: LutLayer, accelerator: Accelerator) -> dict[str, int]:
    """The table and one vector."""
    return {"accumulator": (lut_vectors(accelerator.channel_block) + 1) * accelerator.channel_block * ACCUMULATOR_BYTES}


def lut_refusals(record: LutLayer, params: dict) -> list[str]:
    if len(record.shape) == 2:
        return [f"a lookup of shape {list(record.shape)}: the accelerator's layout holds H x W x C images"]
    return []


@lowers("lut", lut_tile_needs, lut_refusals)
def lut_lower(record: LutLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    if x.strides != output.strides or x.vectors != output.vectors:
        raise LoweringError(f"layer {record.name}: its input and output differ in shape or layout")
    entries = np.asarray(params["table"], np.int8).astype(np.int32)
    if entries.shape != (TABLE_SIZE,):
        raise LoweringError(f"layer {record.name}: a table of shape {list(entries.shape)}; expected [{TABLE_SIZE}]")
    table_vectors = lut_vectors(low.block)
    table = low.constant(np.resize(entries, table_vectors * low.block))
    chunk = min(low.acc_units - table_vectors, MAX_VECTORS)
    if chunk <= 0:
        raise LoweringError(f"layer {record.name}: the accumulators hold no vector beside the table")
    low.load(Load("ACC", table, chunk, (1, table_vectors, 1), (0, 1, 0), const=True, note=f"{record.name}: table"),
             holds=(record.name, "table"))
    for start, stop in spans(output.vectors, chunk):
        n = stop - start
        what = f"{record.name} vectors {start}-{stop - 1}"
        low.emit(Load("ACC8", x.address + start * low.block, 0, (1, n, 1), (0, 1, 0), note=f"{what}: x"))
        low.emit(Alu("ADD", Loop(n), Index(0, 1), None, TABLE_SIZE // 2, f"{what}: x + 128"))
        low.emit(Alu("LUT", Loop(n), Index(0, 1), Index(0, 1), chunk, f"{what}: table[x + 128]"))
        low.emit_store_flat(0, output.address + start * low.block, n, f"{what}: store")
