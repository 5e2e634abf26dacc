"""pad on the accelerator (both dialects): the DMA pads as it loads (seed 004's conv2d_zp padding): per tile of
output rows, one LOAD of the input rows into the accumulators (int8, sign-extended) with the padding rows and
columns filled with the grid's zero (TF2IR's 0, the tflite_int8 dialect's zero point), then one STORE of the box. A
pad is the 1x1 window of stride 1 over its padded input."""

from __future__ import annotations

from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, load_rows, lowers, most_rows, spans
from core.backends.accel.target import Accelerator
from core.ir.window import Window

MAX_PAD = 255  # LOAD's 8-bit pad fields


def _window(record) -> Window:
    padding = record.padding
    return Window(record.input_size.height, record.input_size.width, record.output_size.height, record.output_size.width,
                  (1, 1), (1, 1), (1, 1), padding.top, padding.left)


def pad_tile_needs(record, accelerator: Accelerator) -> dict[str, int]:
    """One padded output row of one channel block."""
    return {"accumulator": record.output_size.width * accelerator.channel_block * ACCUMULATOR_BYTES}


def pad_refusals(record, params: dict) -> list[str]:
    amounts = record.padding.as_list()
    return [f"padding {amounts}: a LOAD pads by at most {MAX_PAD}"] if max(amounts) > MAX_PAD else []


@lowers("pad", pad_tile_needs, pad_refusals)
def pad_lower(record, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    window = _window(record)
    blocks = x.blocks
    rows, block_tile = most_rows(window, lambda r: r * window.padded_width * blocks <= low.acc_units), blocks
    if rows == 0:  # not one row of every block: one row of as many blocks as fit
        rows, block_tile = 1, min(blocks, low.acc_units // window.padded_width)
    if block_tile == 0:
        raise LoweringError(f"layer {record.name}: a padded row of one channel block ({window.padded_width} vectors) exceeds the accumulators")
    for r0, r1 in spans(window.out_height, rows):
        for b0, b1 in spans(blocks, block_tile):
            what = f"{record.name} rows {r0}-{r1 - 1} blocks {b0}-{b1 - 1}"
            low.emit(load_rows(window, "ACC8", 0, x, (r0, r1), (b0, b1), record.grid.zero_point, f"{what}: input, padded"))
            low.store(0, (r0, r1), output, (b0, b1), f"{what}: store")
