"""avg_pool and max_pool on the accelerator, as ALU instructions. A tile (output rows x all
columns x channel blocks) LOADs its padded input box into ACC (int8 sign-extended; max_pool pads
with -128, which no window's maximum can be below), then per window tap one ALU op over the tile
(MOV for the first, ADD or MAX after), then: avg_pool SHL input_pre_ls and RSHR log2(window)
(a power-of-two window without padding: the mean rounded half up is that shift); max_pool the
shift from input to output scale; MAX/MIN to int8; STORE."""

from __future__ import annotations

from typing import Callable

from core.backends.accel.isa import Alu, Index, Loop
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, load_rows, lowers, most_rows, spans
from core.backends.accel.target import Accelerator
from core.ir.fixedpoint import INT8_MAX, INT8_MIN
from core.ir.ops.pool.record import PoolLayer


def pool_tile_needs(record, accelerator: Accelerator) -> dict[str, int]:
    """One output row of one channel block: its padded input rows (int8 widened to int32) and
    its results, all in the accumulators."""
    window = record.window
    return {"accumulator": (window.input_rows(1) * window.padded_width + window.out_width) * accelerator.channel_block
            * ACCUMULATOR_BYTES}


def _choose_tile(record, blocks: int, low: Lowering) -> tuple[int, int]:
    """(output rows, channel blocks) per tile: the most output vectors that fit the accumulators."""
    window, wp = record.window, record.window.padded_width
    tiles = []
    for block_tile in range(blocks, 0, -1):
        def fits(rows: int, block_tile=block_tile) -> bool:
            return (window.input_rows(rows) * wp + rows * window.out_width) * block_tile <= low.acc_units
        rows = most_rows(window, fits)
        if rows:
            tiles.append((-rows * block_tile, rows, block_tile))
    if not tiles:
        raise LoweringError(f"layer {record.name}: no tile of one output row and one channel block fits the accumulator buffer")
    _, rows, block_tile = min(tiles)
    return rows, block_tile


def _requantize_shift(record: PoolLayer) -> int:
    """avg_pool: log2 of the window (the mean of a power-of-two window is a rounding shift);
    max_pool: input to output scale."""
    return record.window.taps.bit_length() - 1 if record.averages else record.rescale


@lowers("avg_pool", pool_tile_needs)
@lowers("max_pool", pool_tile_needs)
def pool_lower(record: PoolLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    window, average = record.window, record.averages
    count = window.taps
    if average and (record.padding.any() or count & (count - 1)):
        raise LoweringError(f"layer {record.name}: an avg_pool on the accelerator needs an unpadded power-of-two window "
                            f"(got {window.kernel[0]}x{window.kernel[1]}, padding {record.padding.as_list()})")

    def finish(low: Lowering, base: int, shape: tuple[int, int, int], what: str) -> None:
        if record.averages and record.input_pre_ls:
            low.alu_over("SHL", base, shape, record.input_pre_ls, f"{what}: << input_pre_ls {record.input_pre_ls}")
        low.requantize(base, shape, _requantize_shift(record), INT8_MIN, INT8_MAX, what)

    lower_pool(record, inputs, output, low, 0 if average else INT8_MIN, finish)


def lower_pool(record, inputs: list[PackedTensor], output: PackedTensor, low: Lowering, pad_value: int,
               finish: Callable[[Lowering, int, tuple[int, int, int], str], None]) -> None:
    """A pool's tiles: the windows' sums (average) or maxima, then `finish(low, base, shape, what)` on
    the results' box (the dialect's rounding and clamp), STORE."""
    (x,) = inputs
    rows, block_tile = _choose_tile(record, x.blocks, low)
    for r0, r1 in spans(record.window.out_height, rows):
        for b0, b1 in spans(x.blocks, block_tile):
            _lower_tile(record, x, output, low, (r0, r1), (b0, b1), pad_value, finish)


def _lower_tile(record, x: PackedTensor, output: PackedTensor, low: Lowering, rows: tuple[int, int],
                blocks: tuple[int, int], pad_value: int, finish: Callable) -> None:
    (r0, r1), (b0, b1) = rows, blocks
    window, wp, average = record.window, record.window.padded_width, record.averages
    width, tile_rows = b1 - b0, r1 - r0
    what = f"{record.name} rows {r0}-{r1 - 1} blocks {b0}-{b1 - 1}"
    result = window.input_rows(tile_rows) * wp * width  # ACC: the input box, then the results
    low.emit(load_rows(window, "ACC8", 0, x, rows, blocks, pad_value, f"{what}: input"))
    shape = (tile_rows, window.out_width, width)
    taps = [(kh, kw) for kh in range(window.kernel[0]) for kw in range(window.kernel[1])]
    for tap, (kh, kw) in enumerate(taps):
        op = "MOV" if tap == 0 else ("ADD" if average else "MAX")
        low.emit(Alu(op, Loop(*shape), Index(result, window.out_width * width, width, 1),
                     Index((kh * wp + kw) * width, window.stride[0] * wp * width, window.stride[1] * width, 1),
                     note=f"{what}: tap {kh},{kw}"))
    finish(low, result, shape, what)
    low.store(result, rows, output, blocks, f"{what}: store")
