"""avg_pool and max_pool, of both dialects, on the accelerator, as ALU instructions. A tile (output rows x all
columns x channel blocks) LOADs its padded input box into ACC (int8 sign-extended; max_pool pads
with -128, which no window's maximum can be below), then per window tap one ALU op over the tile
(MOV for the first, ADD or MAX after), then: avg_pool's mean as its averaging says (ACCEL_MEANS: a window
mean of an unpadded power-of-two window is a shift, RSHR rounding half up as TF2IR does, RSHRA half away as
TFLite's AVERAGE_POOL_2D; TFLite's mean of any other unpadded window n elements a division rounded half away
from zero by RMUL: the positive and the negative sums each multiplied by m = ceil(2^r / n) and rounded at r, exact
for every sum of n int8s when 256 n^2 < 2^r, then added; MEAN a requantization); max_pool the shift from input to
output grid; MAX/MIN to the output's range; STORE."""

from __future__ import annotations

from typing import Callable

from core.backends.accel.isa import RMUL_ROUND, Alu, Index, Loop
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, Rescale, load_rows, lowers, most_rows, spans
from core.backends.accel.target import Accelerator
from core.ir.fixedpoint import INT8_MIN
from core.ir.ops.pool.affine import mean_requantization
from core.ir.ops.pool.record import AvgPoolLayer, MaxPoolLayer, PoolLayer, RescaledMean, WindowMean
from core.ir.records import Shift


def _divides(record) -> bool:
    """Whether the mean is a division (TFLite's mean of a window whose count is no power of two): its results then need
    a second box of accumulators, the negative sums'."""
    count = record.window.taps
    return isinstance(getattr(record, "averaging", None), WindowMean) and bool(count & (count - 1))


def pool_tile_needs(record, accelerator: Accelerator) -> dict[str, int]:
    """One output row of one channel block: its padded input rows (int8 widened to int32) and
    its results (twice for a division), all in the accumulators."""
    window = record.window
    results = window.out_width * (2 if _divides(record) else 1)
    return {"accumulator": (window.input_rows(1) * window.padded_width + results) * accelerator.channel_block * ACCUMULATOR_BYTES}


def _choose_tile(record, blocks: int, low: Lowering) -> tuple[int, int]:
    """(output rows, channel blocks) per tile: the most output vectors that fit the accumulators."""
    window, wp = record.window, record.window.padded_width
    boxes = 2 if _divides(record) else 1
    tiles = []
    for block_tile in range(blocks, 0, -1):
        def fits(rows: int, block_tile=block_tile) -> bool:
            return (window.input_rows(rows) * wp + boxes * rows * window.out_width) * block_tile <= low.acc_units
        rows = most_rows(window, fits)
        if rows:
            tiles.append((-rows * block_tile, rows, block_tile))
    if not tiles:
        raise LoweringError(f"layer {record.name}: no tile of one output row and one channel block fits the accumulator buffer")
    _, rows, block_tile = min(tiles)
    return rows, block_tile


def division(count: int) -> tuple[int, int]:
    """(m, r): RMUL by m rounding at r divides any sum of `count` int8s by `count`, rounded half up on its magnitude:
    m / 2^r exceeds 1 / count by less than 1 / (2 count x 128 count), below the distance of any such quotient to a
    rounding boundary."""
    shift = (256 * count * count).bit_length() + 1
    return -(-(1 << shift) // count), shift


def mean_refusals(record: AvgPoolLayer, params: dict) -> list[str]:
    count = record.window.taps
    if not isinstance(record.averaging, WindowMean):
        return []
    if record.padding.any():
        return [f"the mean of a {record.kernel_size.height}x{record.kernel_size.width} window with padding "
                f"{record.padding.as_list()}: its count varies at the edges, a division per position the ALU has not"]
    if count & (count - 1) and record.averaging.rounding == "half_up":
        return [f"the mean of a {record.kernel_size.height}x{record.kernel_size.width} window rounded half up: TF2IR's "
                "division the ALU has not (an unpadded power-of-two window is a shift)"]
    multiplier, shift = division(count)
    if count & (count - 1) and (shift > RMUL_ROUND[1] or multiplier >= 1 << 31 or record.averaging.pre_shift):
        return [f"the mean of {count} elements: no int32 RMUL divides every such sum exactly"]
    return []


def mean_shifts(record: AvgPoolLayer, params: dict) -> list[Shift]:
    """The shifts the mean encodes: a power-of-two window's division, or the rescale of TFLite's MEAN."""
    averaging, count = record.averaging, record.window.taps
    if isinstance(averaging, RescaledMean):
        multiplier, shift = mean_requantization(count, averaging.multiplier, averaging.shift)
        return Rescale((multiplier,), (shift,)).encoded_shifts("mean")
    bits = count.bit_length() - 1
    return [Shift(f"the mean of {count} elements: >> log2 {count}", bits)] if bits and not count & (count - 1) else []


@lowers("avg_pool", pool_tile_needs, mean_refusals, shifts=mean_shifts)
def avg_pool_lower(record: AvgPoolLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    averaging = record.averaging

    def finish(low: Lowering, base: int, shape: tuple[int, int, int], what: str) -> None:
        ACCEL_MEANS[type(averaging)](low, base, shape, averaging, record.window.taps, what)
        _clamp(low, base, shape, record, what)

    lower_pool(record, inputs, output, low, record.input_grid.zero_point, finish)


def _window_mean(low: Lowering, base: int, shape: tuple[int, int, int], averaging: WindowMean, count: int, what: str) -> None:
    """<< pre_shift (SHL), then the division by the power-of-two count: RSHR rounds half up, RSHRA half away."""
    if averaging.pre_shift:
        low.alu_over("SHL", base, shape, averaging.pre_shift, f"{what}: << input_pre_ls {averaging.pre_shift}")
    bits = count.bit_length() - 1
    if count & (count - 1):
        _divided_mean(low, base, shape, count, what)
    elif bits and averaging.rounding == "half_up":
        low.alu_over("RSHR", base, shape, bits, f"{what}: requantize >> {bits}")
    elif bits:
        low.alu_over("RSHRA", base, shape, bits, f"{what}: mean, rounded half away from zero")


def _divided_mean(low: Lowering, base: int, shape: tuple[int, int, int], count: int, what: str) -> None:
    """TFLite's (sum +- count / 2) / count, truncated: the sums copied to the box after the results, the results kept
    >= 0 and the copy <= 0, each RMUL by m rounding at r (the negative ones round half down: away from zero), added."""
    multiplier, shift = division(count)
    negative = base + shape[0] * shape[1] * shape[2]
    a, b, c = shape
    box = Loop(a, b, c)
    low.emit(Alu("MOV", box, Index(negative, b * c, c, 1), Index(base, b * c, c, 1), note=f"{what}: the sums' copy"))
    low.alu_over("MAX", base, shape, 0, f"{what}: the positive sums")
    low.alu_over("MIN", negative, shape, 0, f"{what}: the negative sums")
    for start, sign in ((base, "positive"), (negative, "negative")):
        low.emit(Alu("RMUL", box, Index(start, b * c, c, 1), None, multiplier, round=shift,
                     note=f"{what}: {sign} sums / {count} (x {multiplier} >> {shift})"))
    low.emit(Alu("ADD", box, Index(base, b * c, c, 1), Index(negative, b * c, c, 1), note=f"{what}: mean"))


def _rescaled_mean(low: Lowering, base: int, shape: tuple[int, int, int], averaging: RescaledMean, count: int, what: str) -> None:
    """MEAN: ADD of -zp_in x count, TFLite's requantization by the multiplier with 1 / count folded in, ADD of the
    output zero point."""
    multiplier, shift = mean_requantization(count, averaging.multiplier, averaging.shift)
    low.alu_over("ADD", base, shape, -averaging.input_zero_point * count, f"{what}: - input zero point x {count}")
    low.rescale(base, shape, Rescale((multiplier,), (shift,)), f"{what}: mean")
    low.alu_over("ADD", base, shape, averaging.output_zero_point, f"{what}: + output zero point")


# how each kind of averaging (core/ir/ops/pool/record.py) runs on the ALU, before the clamp
ACCEL_MEANS = {WindowMean: _window_mean, RescaledMean: _rescaled_mean}


@lowers("max_pool", pool_tile_needs)
def max_pool_lower(record: MaxPoolLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    """The window's maximum (padded with -128, which no window's maximum is below), moved to the output grid
    (RSHR / SHL), clamped."""
    lower_pool(record, inputs, output, low, INT8_MIN,
               lambda low, base, shape, what: low.requantize(base, shape, record.rescale, record.output_min, record.output_max, what))


def _clamp(low: Lowering, base: int, shape: tuple[int, int, int], record: PoolLayer, what: str) -> None:
    low.alu_over("MAX", base, shape, record.output_min, f"{what}: clamp low")
    low.alu_over("MIN", base, shape, record.output_max, f"{what}: clamp high")


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
