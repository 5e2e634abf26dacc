"""conv and dwconv on the accelerator, one lowering of both dialects by the record's requantization: TF2IR's shifts, or
TFLite's per-channel multipliers (with its fully connected layers) as seed 004 lowers a quantized conv (Fig. 4, [0046],
[0059]-[0062]): the same tiles and GEMMs on the raw int8 input padded with the input's zero point (conv2d_zp), the
zero-point term folded into the bias constant (Qfused_bias = Qbias - zp_in x sum(Qw): every tap, padding included, reads
x - zp_in), then TFLite's requantization by the vector ALU (LSL, RMUL, RSHRA per channel: Lowering.rescale), ADD of the
output zero point, MAX/MIN to the activation's range, STORE. A fully connected layer is the 1x1 conv of a 1x1 image; its
single rounding is one RMUL at the smallest of its shifts, each channel's sum first shifted left by its shift less that
one (exact while the sums so shifted stay in int32).

A tile is output rows [r0, r1) x all columns x output-channel blocks [o0, o1), reduced over
input-channel blocks [i0, i1) at a time. Buffers: INP [input rows][padded width][i-blocks],
WGT [tap][i-blocks][o-blocks] B x B blocks, ACC [rows][width][o-blocks] then per-block vectors.
Per tile: the accumulators start as the bias (seed 004 Fig. 4(b), `bias_in_accumulators`: a
LOAD, no reset, no ALU add) or at zero (a GEMM RESET; Fig. 4(a): the bias vectors added by the
ALU after the GEMMs), one GEMM per (tap, output block) loops over the rows, the columns and the
input blocks, then the dialect's requantization and clamp (`ConvArithmetic.finish`: TF2IR's RSHR,
MAX/MIN; TFLite's: affine_conv_lower) and STORE. A depthwise layer runs the GEMM's depthwise mode at
the array's full width: its weights are one B-int8 vector per tap and channel block (WGTV), and each
micro-op multiplies B pixels of a row (lanes) by the tap's vector; per tap, one GEMM over the rows, the
row's whole groups of B pixels and the channel blocks, and one for the row's last pixels if B does not
divide its width (a block-diagonal GEMM stored and moved B times the weights and used 1/B of the array).
With the target's double_buffering, the tiles alternate between the halves of INP and ACC and the layers between the
halves of WGT (where the smallest tile fits a half), so that on a machine of several units a tile's loads overlap the
tile before's GEMMs and ALU and the next layer's weights load during this one; the rows a tile are then those whose
schedule the cost model times fastest (fewer rows: a longer pipeline, more instructions).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from core.backends.accel.isa import Alu, Gemm, Index, Lanes, Load, Loop
from core.backends.accel.lowering import (ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, Rescale, StoredWeights, load_rows,
                                          lowers, most_rows, spans)
from core.backends.accel.schedule import insert_tokens
from core.backends.accel.target import Accelerator
from core.ir.fixedpoint import INT32_MAX
from core.ir.ops.conv.record import ChannelRequantization, ConvLayer, ShiftRequantization, by_requantization
from core.ir.window import Window


def conv_tile_needs(record: ConvLayer, accelerator: Accelerator) -> dict[str, int]:
    """One output row of one channel block: the window's rows of padded input, one weight block
    per tap (dwconv: one weight vector per tap), the row's int32 results and the block's vectors."""
    block, window = accelerator.channel_block, record.window
    extra = int(record.load_bias and not accelerator.bias_in_accumulators)
    return {"input": window.input_rows(1) * window.padded_width * block,
            "weight": window.taps * block * (1 if record.depthwise else block),
            "accumulator": (window.out_width + extra) * block * ACCUMULATOR_BYTES}


@dataclass(frozen=True)
class ConvArithmetic:
    """What a dialect's conv computes around the shared tiling and GEMMs: the value the input is padded
    with, its int32 bias vectors in CONST (None: none), the accumulator vectors each output block needs
    beyond its results (per-channel requantization constants), and `finish(low, base, shape, blocks,
    vectors, what)`: the requantization and clamp of the results' box, with those vectors at `vectors`."""

    pad_value: int
    bias: int | None
    vectors_per_block: int
    finish: Callable[[Lowering, int, tuple[int, int, int], tuple[int, int], int, str], None]


def accel_weights(record, params: dict, block: int, weight: np.ndarray | None = None) -> np.ndarray:
    """The weights as the accelerator's B x B blocks, [tap][in block][out block][out][in] (conv), or
    B-int8 vectors [tap][block][channel] (dwconv); channels past the layer's zero."""
    taps = record.window.taps
    ci, co = record.input_channel_num, record.output_channel_num
    weight = np.asarray(params["weight"] if weight is None else weight, dtype=np.int8)  # HWIO (dwconv HWC)
    if record.depthwise:
        vectors = np.zeros((taps, -(-co // block) * block), np.int8)
        vectors[:, :co] = weight.reshape(taps, co)
        return vectors.reshape(taps, -1, block)
    nib, nob = -(-ci // block), -(-co // block)
    padded = np.zeros((taps, nib * block, nob * block), np.int8)
    padded[:, :ci, :co] = weight.reshape(taps, ci, co)
    return padded.reshape(taps, nib, block, nob, block).transpose(0, 1, 3, 4, 2).copy()


def _accel_bias(record: ConvLayer, params: dict, block: int) -> np.ndarray:
    """bias << bias_shift as int32 per output channel (zero past the layer's)."""
    co = record.output_channel_num
    shifted = np.zeros(-(-co // block) * block, np.int64)
    shifted[:co] = np.asarray(params["bias"], np.int64) << int(record.bias_shift)
    if np.abs(shifted).max(initial=0) > INT32_MAX:
        raise LoweringError(f"layer {record.name}: bias << bias_shift ({record.bias_shift}) exceeds the int32 accumulator")
    return shifted.astype(np.int32)


@dataclass(frozen=True)
class _Tile:
    rows: int  # output rows
    in_blocks: int  # input-channel blocks reduced at a time
    out_blocks: int  # output-channel blocks


@dataclass(frozen=True)
class _Room:
    """What a tile may use: INP vectors, WGT B x B blocks, ACC vectors (the whole buffers, or a half of each)."""

    inp: int
    wgt: int
    acc: int


def _tile_cost(window: Window, depthwise: bool, nib: int, nob: int, low: Lowering, ib_tile: int, ob_tile: int, extra: int, room: _Room):
    """(estimated cycles, rows) of the best row count for these block tiles, `extra` accumulator vectors
    per output block besides the results; None if nothing fits."""
    block, wp = low.block, window.padded_width
    if window.taps * (ob_tile if depthwise else ib_tile * ob_tile * block) > room.wgt * block:  # in B-int8 vectors
        return None
    rows = most_rows(window, lambda r: window.input_rows(r) * wp * ib_tile <= room.inp and (r * window.out_width + extra) * ob_tile <= room.acc)
    if rows == 0:
        return None
    row_count, ob_count, ib_count = -(-window.out_height // rows), -(-nob // ob_tile), -(-nib // ib_tile)
    input_loads = row_count * (ob_count if depthwise or ib_count > 1 else 1) * (1 if depthwise else ib_count)
    input_bytes = row_count * window.input_rows(rows) * window.width * nib * block * (1 if depthwise or ib_count == 1 else ob_count)
    weight_loads = 1 if ob_count * ib_count == 1 else row_count * ob_count * (1 if depthwise else ib_count)
    weight_bytes = (1 if weight_loads == 1 else row_count) * window.taps * (nob if depthwise else nib * nob * block) * block
    instructions = row_count * ob_count * (window.taps * (2 if depthwise else ob_tile) + 4)
    cost = low.cost
    # the other instructions priced as a DMA set-up each: a proxy that favours fewer, larger tiles
    estimate = (cost.dma("load", input_loads, input_bytes) + cost.dma("load", weight_loads, weight_bytes, "weights")
                + instructions * cost.cycles["load"])
    return estimate, rows


def choose_tile(record: ConvLayer, nib: int, nob: int, low: Lowering, extra: int, room: _Room) -> _Tile | None:
    """The cheapest tile by the cost model among those that fit `room` (ties: more rows, then larger block tiles); None
    if none does."""
    candidates = []
    for ob_tile in range(nob, 0, -1):
        for ib_tile in ([ob_tile] if record.depthwise else range(nib, 0, -1)):
            found = _tile_cost(record.window, record.depthwise, nib, nob, low, ib_tile, ob_tile, extra, room)
            if found is not None:
                candidates.append((found[0], -found[1], -ib_tile, -ob_tile, _Tile(found[1], ib_tile, ob_tile)))
    return min(candidates, key=lambda candidate: candidate[:4])[-1] if candidates else None


def conv_lower(record: ConvLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    """conv and dwconv on TF2IR's arithmetic: the bias shifted to the accumulators' scale, RSHR by
    output_shift, the activation's clamp."""
    if not 0 <= record.output_shift <= 31:
        raise LoweringError(f"layer {record.name}: output_shift {record.output_shift} outside the ALU's [0, 31]")
    if record.accumulator_bound(params) > INT32_MAX:
        raise LoweringError(f"layer {record.name}: its accumulators could exceed int32")
    bias = low.constant(_accel_bias(record, params, low.block)) if record.load_bias else None

    def finish(low: Lowering, base: int, shape: tuple[int, int, int], blocks: tuple[int, int], vectors: int, what: str) -> None:
        low.requantize(base, shape, record.output_shift, *record.clamp(), what)

    lower_conv(record, params, inputs, output, low, ConvArithmetic(0, bias, 0, finish))


def lower_conv(record, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering, arithmetic: ConvArithmetic) -> None:
    """conv and dwconv as accelerator instructions (the notes above), the tile chosen by the
    target's cost model among those that fit its buffers."""
    (x,) = inputs
    extra = int(arithmetic.bias is not None and not low.accelerator.bias_in_accumulators) + arithmetic.vectors_per_block
    whole = _Room(low.inp_units, low.wgt_units, low.acc_units)
    half = _Room(whole.inp // 2, whole.wgt // 2, whole.acc // 2)
    tile = choose_tile(record, x.blocks, output.blocks, low, extra, half) if low.accelerator.double_buffering else None
    double = tile is not None
    tile = tile or choose_tile(record, x.blocks, output.blocks, low, extra, whole)
    if tile is None:
        raise LoweringError(f"layer {record.name}: no tile of one output row and one channel block fits the buffers")
    if double:
        tile = _pipelined(record, params, x, output, low, arithmetic, tile)
    _emit_tiles(record, params, x, output, low, arithmetic, tile, double)


def _pipelined(record, params: dict, x: PackedTensor, output: PackedTensor, low: Lowering, arithmetic: ConvArithmetic,
               tile: _Tile) -> _Tile:
    """With double-buffered tiles on a machine of several units, fewer rows a tile can be faster: a tile's loads, the
    one before's computation and the store of the one before that run at once. The tile of `tile`'s blocks and 1/1, 1/2,
    1/4 or 1/8 of its rows whose instructions the cost model times fastest, alone (ties: more rows)."""
    if len(low.accelerator.units) == 1:
        return tile
    timed = []
    for rows in sorted({max(1, -(-tile.rows // parts)) for parts in (1, 2, 4, 8)}, reverse=True):
        candidate = dataclasses.replace(tile, rows=rows)
        scratch = Lowering(low.accelerator)
        _emit_tiles(record, params, x, output, scratch, arithmetic, candidate, True)
        ends = scratch.cost.timeline(insert_tokens(scratch.instructions, low.accelerator.unit_of, low.block))
        timed.append((max(ends, default=0.0), -rows, candidate))
    return min(timed, key=lambda entry: entry[:2])[-1]


def _emit_tiles(record, params: dict, x: PackedTensor, output: PackedTensor, low: Lowering, arithmetic: ConvArithmetic,
                tile: _Tile, double: bool) -> None:
    """The layer's weights stored, then its tiles; with `double`, each in its halves of the buffers."""
    half = _Room(low.inp_units // 2, low.wgt_units // 2, low.acc_units // 2)
    loaded_whole = tile.out_blocks == output.blocks and (record.depthwise or tile.in_blocks == x.blocks)
    weights = _Weights(low, accel_weights(record, params, low.block), loaded_whole)
    wgt = low.alternate("WGT", half.wgt) if double else 0
    for r0, r1 in spans(record.window.out_height, tile.rows):
        inp = low.alternate("INP", half.inp) if double else 0
        for o0, o1 in spans(output.blocks, tile.out_blocks):
            bases = _Bases(inp, wgt, low.alternate("ACC", half.acc) if double else 0)
            _lower_tile(record, x, output, low, (r0, r1), (o0, o1), tile, weights, arithmetic, bases)


class _Weights:
    """A layer's weights in CONST as its tiles' LOADs read them: one array, each LOAD a strided part of it (read whole by
    one LOAD, it is compressed where the target compresses and that is smaller); or, where the tiles read parts and the
    target compresses (the DMA decodes a stream from its start), each part its own stream in the order the LOAD fills the
    buffer, stored once, at its first LOAD: streamed through the weight buffer, compressed all the same."""

    def __init__(self, low: Lowering, weights: np.ndarray, loaded_whole: bool):
        self.low, self.weights = low, weights  # [tap][in block][out block][B][B], or depthwise [tap][block][B]
        self.by_part = low.accelerator.weight_compression and not loaded_whole
        self.whole = None if self.by_part else low.weight_constant(weights, loaded_whole)
        self.parts: dict[tuple[int, ...], StoredWeights] = {}

    def load(self, in_blocks: tuple[int, int], out_blocks: tuple[int, int], base: int, what: str) -> Load:
        """The LOAD of input blocks [i0, i1) x output blocks [o0, o1) into WGT at `base` (depthwise: blocks [o0, o1), WGTV)."""
        (i0, i1), (o0, o1) = in_blocks, out_blocks
        taps, width, block = self.weights.shape[0], o1 - o0, self.low.block
        depthwise = self.weights.ndim == 3
        if self.whole is not None:  # a strided part of the one array
            stored, blocks = self.whole, self.weights.shape[1:2] if depthwise else self.weights.shape[1:3]
            offset = o0 * block if depthwise else (i0 * blocks[1] + o0) * block * block
            strides = (blocks[0], 1, 0) if depthwise else (blocks[0] * blocks[1], blocks[1], 1)
        else:  # the part as the LOAD fills the buffer
            key = (o0, o1) if depthwise else (i0, i1, o0, o1)
            if key not in self.parts:
                self.parts[key] = self.low.weight_constant(self.weights[:, o0:o1] if depthwise else self.weights[:, i0:i1, o0:o1], True)
            stored, offset = self.parts[key], 0
            strides = (width, 1, 0) if depthwise else ((i1 - i0) * width, width, 1)
        if depthwise:
            return Load("WGTV", stored.address + offset, base * block, (taps, width, 1), strides, const=True,
                        note=f"{what}: weight vectors", stream=stored.stream)
        return Load("WGT", stored.address + offset, base, (taps, i1 - i0, width), strides, const=True,
                    note=f"{what}: weights, input blocks {i0}-{i1 - 1}", stream=stored.stream)


@dataclass(frozen=True)
class _Bases:
    """Where a tile's data start: INP vectors, WGT blocks, ACC vectors (0, or a half's start: double buffering)."""

    inp: int = 0
    wgt: int = 0
    acc: int = 0


def _start_tile(low: Lowering, shape: tuple[int, int, int], o0: int, bias: int | None, acc: int, what: str) -> None:
    """The accumulators' start: the biases (Fig. 4(b): a broadcasting LOAD) or zero (a GEMM RESET)."""
    if bias is not None and low.accelerator.bias_in_accumulators:
        low.emit(Load("ACC", bias + o0 * low.block * 4, acc, shape, (0, 0, 1), const=True, note=f"{what}: bias preload"))
    else:
        rows, out_width, width = shape
        low.emit(Gemm(Loop(*shape), Index(acc, out_width * width, width, 1), Index(0), Index(0), reset=True, note=f"{what}: reset"))


def _add_bias(low: Lowering, shape: tuple[int, int, int], o0: int, bias: int, acc: int, at: int, what: str) -> None:
    """Fig. 4(a): the tile's bias vectors loaded after its results and added by the vector ALU."""
    rows, out_width, width = shape
    low.emit(Load("ACC", bias + o0 * low.block * 4, at, (1, width, 1), (0, 1, 0), const=True, note=f"{what}: bias vectors"))
    low.emit(Alu("ADD", Loop(*shape), Index(acc, out_width * width, width, 1), Index(at, 0, 0, 1), note=f"{what}: + bias"))


def _lower_tile(record, x: PackedTensor, output: PackedTensor, low: Lowering, rows: tuple[int, int],
                blocks: tuple[int, int], tile: _Tile, weights: _Weights, arithmetic: ConvArithmetic, bases: _Bases) -> None:
    """One tile: output rows [r0, r1) x output blocks [o0, o1), its data from `bases`."""
    (r0, r1), (o0, o1) = rows, blocks
    window, width = record.window, o1 - o0
    shape = (r1 - r0, window.out_width, width)
    what = f"{record.name} rows {r0}-{r1 - 1} blocks {o0}-{o1 - 1}"
    results = shape[0] * shape[1] * width  # ACC: the results, then the bias (Fig. 4(a)) and requantization vectors
    _start_tile(low, shape, o0, arithmetic.bias, bases.acc, what)
    for i0, i1 in ([(o0, o1)] if record.depthwise else spans(x.blocks, tile.in_blocks)):
        low.load(load_rows(window, "INP", bases.inp, x, (r0, r1), (i0, i1), arithmetic.pad_value, f"{what}: input blocks {i0}-{i1 - 1}"),
                 holds=(record.name, "input", r0, i0, i1, bases.inp))
        holds = (record.name, "weight", i0, i1) if record.depthwise else (record.name, "weight", i0, i1, o0, o1)
        low.load(weights.load((i0, i1), (o0, o1), bases.wgt, what), holds=holds)
        _tap_gemms(record, low, shape, i1 - i0, o0, bases, what)
    vectors = bases.acc + results
    if arithmetic.bias is not None and not low.accelerator.bias_in_accumulators:
        _add_bias(low, shape, o0, arithmetic.bias, bases.acc, vectors, what)
        vectors += width
    arithmetic.finish(low, bases.acc, shape, blocks, vectors, what)
    low.store(bases.acc, rows, output, blocks, f"{what}: store")


def _tap_gemms(record: ConvLayer, low: Lowering, shape: tuple[int, int, int], depth: int, o0: int, bases: _Bases, what: str) -> None:
    """The GEMMs of one loaded input-block range: per tap (and, for conv, per output block)."""
    window = record.window
    tile_rows, out_width, width = shape
    wp = window.padded_width
    row_step, column_step = window.stride[0] * wp * depth, window.stride[1] * depth
    taps = [(kh, kw) for kh in range(window.kernel[0]) for kw in range(window.kernel[1])]
    for tap, (kh, kw) in enumerate(taps):
        dh, dw = window.tap_offset(kh, kw)
        start = bases.inp + (dh * wp + dw) * depth
        if record.depthwise:
            _depthwise_gemms(low, shape, start, (row_step, column_step), tap, bases, f"{what}: tap {kh},{kw}")
            continue
        for ob in range(width):
            low.emit(Gemm(Loop(tile_rows, out_width, depth), Index(bases.acc + ob, out_width * width, width, 0),
                          Index(start, row_step, column_step, 1), Index(bases.wgt + (tap * depth) * width + ob, 0, 0, width),
                          note=f"{what}: tap {kh},{kw} out block {o0 + ob}"))


def _depthwise_gemms(low: Lowering, shape: tuple[int, int, int], start: int, steps: tuple[int, int], tap: int, bases: _Bases,
                     what: str) -> None:
    """One tap of a depthwise tile in the GEMM's depthwise mode: B pixels of a row a micro-op (the row's whole groups of
    B), then the row's last pixels in one micro-op of fewer lanes."""
    tile_rows, out_width, width = shape
    row_step, column_step = steps
    block = low.block
    whole, rest = divmod(out_width, block)
    weights = Index(bases.wgt * block + tap * width, 0, 0, 1)
    if whole:
        low.emit(Gemm(Loop(tile_rows, whole, width), Index(bases.acc, out_width * width, block * width, 1),
                      Index(start, row_step, block * column_step, 1), weights, note=what, lanes=Lanes(block, width, column_step)))
    if rest:
        low.emit(Gemm(Loop(tile_rows, 1, width), Index(bases.acc + whole * block * width, out_width * width, 0, 1),
                      Index(start + whole * block * column_step, row_step, 0, 1), weights,
                      note=f"{what}, last {rest} pixel(s)", lanes=Lanes(rest, width, column_step)))


# TFLite's convolutions (a ChannelRequantization): the input's zero point folded into the bias, TFLite's requantization
VECTORS = 3  # per output block: multipliers, right shifts, left shifts (Rescale.vector_table)


def hwio(record: ConvLayer, weight: np.ndarray) -> np.ndarray:
    """TFLite's OHWI (dense [O, 1, 1, K]) weights as TF2IR's HWIO, which the tiles read; a depthwise 1HWC's as HWC."""
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
    """conv_tile_needs, with the block's requantization vectors and its bias vector for Fig. 4(a)."""
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
