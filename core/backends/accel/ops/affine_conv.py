"""conv and dwconv on the accelerator, one lowering of both dialects by the record's requantization (ACCEL_CONV):
TF2IR's shifts (conv.py), or TFLite's per-channel multipliers, with its fully connected layers, here, as seed 004 lowers a
quantized conv (Fig. 4, [0046], [0059]-[0062]): conv.py's tiles and GEMMs on the raw int8 input padded
with the input's zero point (conv2d_zp), the zero-point term folded into the bias constant
(Qfused_bias = Qbias - zp_in x sum(Qw): every tap, padding included, reads x - zp_in), then TFLite's
requantization by the vector ALU (LSL, RMUL, RSHRA per channel: Lowering.rescale), ADD of the output zero
point, MAX/MIN to the activation's range, STORE. A fully connected layer is the 1x1 conv of a 1x1
image; its single rounding is one RMUL at the smallest of its shifts, each channel's sum first shifted left by its
shift less that one (exact while the sums so shifted stay in int32)."""

from __future__ import annotations

import dataclasses

import numpy as np

from core.backends.accel.isa import Load
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, PackedTensor, Rescale, lowers
from core.backends.accel.ops.conv import ConvArithmetic, conv_lower, conv_tile_needs, lower_conv
from core.backends.accel.target import Accelerator
from core.ir.fixedpoint import INT32_MAX
from core.ir.ops.conv.record import ChannelRequantization, ConvLayer, ShiftRequantization, by_requantization

VECTORS = 3  # per output block: multipliers, right shifts, left shifts (Rescale.vector_table)


def hwio(record: ConvLayer, weight: np.ndarray) -> np.ndarray:
    """TFLite's OHWI (dense [O, 1, 1, K]) weights as conv.py's HWIO; a depthwise 1HWC's as HWC."""
    return weight.reshape(weight.shape[1:]) if record.depthwise else np.transpose(weight, (1, 2, 3, 0))


def fused_bias(record: ConvLayer, params: dict) -> np.ndarray:
    """Qbias - zp_in x sum(Qw) per output channel, int64 (seed 004's zero-point folding)."""
    weight = np.asarray(params["weight"], np.int64)
    sums = weight.reshape(-1, weight.shape[-1]).sum(axis=0) if record.depthwise else weight.reshape(len(weight), -1).sum(axis=1)
    bias = np.asarray(params["bias"], np.int64) if record.load_bias else np.zeros(record.output_channel_num, np.int64)
    return bias - record.input_grid.zero_point * sums


def raw_accumulator_bound(record: ConvLayer, params: dict) -> int:
    """The largest |partial sum| of the GEMMs on the raw int8 input: |fused bias| + 128 x sum |Qw|."""
    magnitudes = np.abs(np.asarray(params["weight"], np.int64))
    per_channel = (magnitudes.reshape(-1, magnitudes.shape[-1]).sum(axis=0) if record.depthwise
                   else magnitudes.reshape(len(magnitudes), -1).sum(axis=1))
    return int((np.abs(fused_bias(record, params)) + 128 * per_channel).max(initial=0))


def affine_conv_refusals(record: ConvLayer, params: dict) -> list[str]:
    problems = []
    if record.depthwise and record.input_channel_num != record.output_channel_num:
        problems.append(f"depth multiplier {record.output_channel_num // record.input_channel_num}: the block-diagonal GEMM maps "
                        "each channel to itself")
    shifts = sorted(set(np.asarray(params.get("shift", [0])).tolist()))
    if record.rounding == "single" and not -31 <= shifts[0] <= 30:
        problems.append(f"single rounding with shifts {shifts[:4]}: one RMUL rounds at 31 - the smallest shift, 1..62")
    elif record.rounding == "single" and len(shifts) > 1 and "weight" in params \
            and max(record.accumulator_bound(params), raw_accumulator_bound(record, params)) << (shifts[-1] - shifts[0]) > INT32_MAX:
        problems.append(f"single rounding with shifts {shifts[0]}..{shifts[-1]}: one RMUL rounds every lane of a block at one "
                        "position, and its sums shifted left by the shifts' difference could leave int32")
    if "weight" in params and raw_accumulator_bound(record, params) > INT32_MAX:
        problems.append("its sums on the raw input with the folded bias could exceed int32")
    if record.rounding == "single" and "weight" in params and _single_rounding_may_wrap(record, params):
        problems.append("single rounding whose result could leave int32: the runtime's kernel wraps it, the RMUL saturates")
    return problems


def _single_rounding_may_wrap(record: ConvLayer, params: dict) -> bool:
    """Whether some channel's |sum| x multiplier x 2^(shift - 31), rounded, could reach 2^31."""
    bound = record.accumulator_bound(params)
    multipliers, shifts = (np.asarray(params[kind], np.float64) for kind in ("multiplier", "shift"))
    return bool(np.any(bound * multipliers * np.exp2(shifts - 31) + 1 >= 2.0**31))


def affine_conv_shifts(record: ConvLayer, params: dict) -> list:
    """The requantization's shifts (Rescale.encoded_shifts)."""
    if "multiplier" not in params:
        return []
    return Rescale(tuple(int(m) for m in params["multiplier"]), tuple(int(s) for s in params["shift"]),
                   record.rounding).encoded_shifts("requantization")


def affine_conv_tile_needs(record: ConvLayer, accelerator: Accelerator) -> dict[str, int]:
    """conv.py's, with the block's requantization vectors and its bias vector for Fig. 4(a)."""
    needs = conv_tile_needs(record, accelerator)
    extra = VECTORS + int(not accelerator.bias_in_accumulators and not record.load_bias)
    return {**needs, "accumulator": needs["accumulator"] + extra * accelerator.channel_block * ACCUMULATOR_BYTES}


def _padded(values: np.ndarray, channels: int, block: int) -> np.ndarray:
    padded = np.zeros(-(-channels // block) * block, np.int64)
    padded[:channels] = values
    return padded.astype(np.int32)


def affine_conv_lower(record: ConvLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    block, channels = low.block, record.output_channel_num
    bias = low.constant(_padded(fused_bias(record, params), channels, block))
    scaling = Rescale(tuple(int(m) for m in params["multiplier"]), tuple(int(s) for s in params["shift"]), record.rounding)
    per_channel = not all(map(scaling.uniform, (scaling.multipliers, scaling.left_shifts, scaling.right_shifts)))
    multipliers, shifts = (low.constant(table) for table in scaling.vector_tables(channels, block)) if per_channel else (None, None)
    blocks = -(-channels // block)

    def finish(low: Lowering, base: int, shape: tuple[int, int, int], tile_blocks: tuple[int, int], vectors: int, what: str) -> None:
        o0, o1 = tile_blocks
        if multipliers is not None:  # [multipliers][right shifts][left shifts], a vector of each per block (Rescale)
            low.load_all([Load("ACC", multipliers + o0 * block * 4, vectors, (1, o1 - o0, 1), (0, 1, 0), const=True,
                               note=f"{what}: multipliers"),
                          Load("ACC8", shifts + o0 * block, vectors + o1 - o0, (2, o1 - o0, 1), (blocks, 1, 0), const=True,
                               note=f"{what}: shifts")], holds=(record.name, "requantization", o0, o1, vectors))
        low.rescale(base, shape, dataclasses.replace(scaling, vectors=vectors), what)
        low.alu_over("ADD", base, shape, record.output_grid.zero_point, f"{what}: + output zero point")
        low.alu_over("MAX", base, shape, record.output_min, f"{what}: clamp low")
        low.alu_over("MIN", base, shape, record.output_max, f"{what}: clamp high")

    weights = hwio(record, np.asarray(params["weight"], np.int8))
    lower_conv(record, {**params, "weight": weights}, inputs, output, low, ConvArithmetic(record.input_grid.zero_point, bias, VECTORS if per_channel else 0, finish))


# conv's and dwconv's lowering, by the kind of the record's requantization
for _operation in ("conv", "dwconv"):
    lowers(_operation, by_requantization({ShiftRequantization: conv_tile_needs, ChannelRequantization: affine_conv_tile_needs}),
           by_requantization({ShiftRequantization: lambda record, params: [], ChannelRequantization: affine_conv_refusals}),
           reads_host_layout=True,
           shifts=by_requantization({ShiftRequantization: lambda record, params: [], ChannelRequantization: affine_conv_shifts}))(
        by_requantization({ShiftRequantization: conv_lower, ChannelRequantization: affine_conv_lower}))
