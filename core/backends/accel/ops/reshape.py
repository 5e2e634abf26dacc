"""reshape on the accelerator where it moves no byte of the blocked layout: a vector of C values and the 1 x 1 x C image
it is (a Flatten after a global pool), or an image shape for the same one: the DMA's copy (lowering.copy_box), so that
the layers on both sides stay one accelerator function with no unpack and pack between them. Any other reshape moves
values across the blocked layout's rows and blocks: the host's copy (its refusal)."""

from __future__ import annotations

from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, PackedTensor, copy_box, lowers
from core.backends.accel.target import Accelerator
from core.ir.ops.reshape.record import ReshapeLayer


def _image(shape) -> tuple[int, ...]:
    """A shape as the program holds it: a vector of C values is the 1 x 1 x C image."""
    shape = tuple(int(d) for d in shape)
    return (1, 1, *shape) if len(shape) == 1 else shape


def reshape_refusals(record: ReshapeLayer, params: dict) -> list[str]:
    before, after = _image(record.input_shape), _image(record.output_shape)
    if before != after or len(after) != 3:
        return [f"a reshape of {list(record.input_shape)} to {list(record.output_shape)} moves values across the blocked layout "
                "(seed 004 [0055]): a host copy"]
    return []


def reshape_tile_needs(record: ReshapeLayer, accelerator: Accelerator) -> dict[str, int]:
    """One row of one channel block."""
    return {"accumulator": _image(record.output_shape)[-2] * accelerator.channel_block * ACCUMULATOR_BYTES}


@lowers("reshape", reshape_tile_needs, reshape_refusals)
def reshape_lower(record: ReshapeLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    copy_box(low, record.name, x, output)
