"""crop on the accelerator: per tile of output rows and channel blocks, one LOAD of the kept box of the input (its
rows from `top`, its columns from `left`: a DMA reads any sub-box) into the accumulators, one STORE."""

from __future__ import annotations

from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, PackedTensor, copy_box, lowers
from core.backends.accel.target import Accelerator
from core.ir.ops.crop.record import CropLayer


def crop_tile_needs(record: CropLayer, accelerator: Accelerator) -> dict[str, int]:
    """One output row of one channel block."""
    return {"accumulator": record.output_size.width * accelerator.channel_block * ACCUMULATOR_BYTES}


@lowers("crop", crop_tile_needs)
def crop_lower(record: CropLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    copy_box(low, record.name, x, output, record.crop.top, record.crop.left)
