"""avg_pool (AVERAGE_POOL_2D and MEAN) and max_pool of the tflite_int8 dialect on the accelerator: pool.py's
tiles (the window's sum by ALU ADDs, its maximum by ALU MAXs, on the raw int8 input), then
- AVERAGE_POOL_2D: RSHRA by log2 of the window, which is TFLite's (sum +- count / 2) / count exactly
  when every window counts all its elements (no padding) and the count is a power of two;
- MEAN over the image: ADD of -zp_in x count, then TFLite's requantization by the multiplier with
  1 / count folded in (Lowering.rescale), ADD of the output zero point;
- max_pool: padded with -128, which no window's maximum is below;
then MAX/MIN to the output's range and STORE."""

from __future__ import annotations

from core.backends.accel.lowering import Lowering, LoweringError, PackedTensor, Rescale, lowers
from core.backends.accel.ops.pool import lower_pool, pool_tile_needs
from core.ir.fixedpoint import INT8_MIN
from core.ir.op import dialect_key
from core.ir.ops.pool.affine import mean_requantization
from core.ir.ops.pool.affine_record import PoolAffineLayer
from core.ir.tflite_dialect import SCHEME


def affine_pool_refusals(record: PoolAffineLayer, params: dict) -> list[str]:
    count = record.window.taps
    if record.averages and record.multiplier is None and (record.padding.any() or count & (count - 1)):
        return [f"the mean of a {record.kernel_size.height}x{record.kernel_size.width} window with padding "
                f"{record.padding.as_list()}: a division the ALU has not (an unpadded power-of-two window is a shift)"]
    return []


def _clamp(low: Lowering, base: int, shape: tuple[int, int, int], record: PoolAffineLayer, what: str) -> None:
    low.alu_over("MAX", base, shape, record.output_min, f"{what}: clamp low")
    low.alu_over("MIN", base, shape, record.output_max, f"{what}: clamp high")


@lowers(dialect_key("avg_pool", SCHEME), pool_tile_needs, affine_pool_refusals)
def affine_avg_pool_lower(record: PoolAffineLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor,
                          low: Lowering) -> None:
    problems = affine_pool_refusals(record, params)
    if problems:
        raise LoweringError(f"layer {record.name}: {'; '.join(problems)}")
    count = record.window.taps

    def finish(low: Lowering, base: int, shape: tuple[int, int, int], what: str) -> None:
        if record.multiplier is None:
            if count > 1:
                low.alu_over("RSHRA", base, shape, count.bit_length() - 1, f"{what}: mean, rounded half away from zero")
        else:
            multiplier, shift = mean_requantization(count, record.multiplier, record.shift)
            low.alu_over("ADD", base, shape, -record.input_zero_point * count, f"{what}: - input zero point x {count}")
            low.rescale(base, shape, Rescale((multiplier,), (shift,)), f"{what}: mean")
            low.alu_over("ADD", base, shape, record.output_zero_point, f"{what}: + output zero point")
        _clamp(low, base, shape, record, what)

    lower_pool(record, inputs, output, low, record.input_zero_point, finish)


@lowers(dialect_key("max_pool", SCHEME), pool_tile_needs)
def affine_max_pool_lower(record: PoolAffineLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor,
                          low: Lowering) -> None:
    lower_pool(record, inputs, output, low, INT8_MIN, lambda low, base, shape, what: _clamp(low, base, shape, record, what))
