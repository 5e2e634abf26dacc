"""crop on the accelerator: per tile of output rows and channel blocks, one LOAD of the kept box of the input (its
rows from `top`, its columns from `left`: a DMA reads any sub-box) into the accumulators, one STORE."""

from __future__ import annotations

from core.backends.accel.isa import Load
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.ops.crop.record import CropLayer


def crop_tile_needs(record: CropLayer, accelerator: Accelerator) -> dict[str, int]:
    """One output row of one channel block."""
    return {"accumulator": record.output_size.width * accelerator.channel_block * ACCUMULATOR_BYTES}


@lowers("crop", crop_tile_needs)
def crop_lower(record: CropLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    width = output.width
    block_tile = min(x.blocks, low.acc_units // width)
    if block_tile == 0:
        raise LoweringError(f"layer {record.name}: an output row of one channel block ({width} vectors) exceeds the accumulators")
    rows = max(1, low.acc_units // (width * block_tile))
    for r0, r1 in spans(output.height, rows):
        for b0, b1 in spans(x.blocks, block_tile):
            what = f"{record.name} rows {r0}-{r1 - 1} blocks {b0}-{b1 - 1}"
            low.emit(Load("ACC8", x.at(r0 + record.crop.top, record.crop.left, b0), 0, (r1 - r0, width, b1 - b0), x.strides,
                          note=f"{what}: the kept box"))
            low.store(0, (r0, r1), output, (b0, b1), f"{what}: store")
