"""What every layer's lowering to the accelerator's instructions (isa.py) shares: the packed
tensors it reads and writes in DRAM, the constant segment its tiled weights and biases go to,
the instruction list, which data each on-chip buffer holds (so a tile already there is not
loaded again), and the tile geometry of windowed layers.

Each IR operation's lowering is in ops/, registered here (LOWERINGS, HOST_ONLY) under its name, one for every
dialect its record is of;
core/backends/program.py assembles the functions and the host program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable

import numpy as np

from core.backends.accel.compression import compress
from core.backends.accel.cost import CostModel
from core.backends.accel.isa import DOUBLING_HIGH_MUL, Alu, Index, Instruction, Load, Loop, Store
from core.backends.accel.target import Accelerator
from core.ir.records import Shift
from core.ir.window import Window

CONST_ALIGN = 64
ACCUMULATOR_BYTES = 4  # int32


class LoweringError(ValueError):
    """A layer the accelerator cannot run as described (the partition should have kept it on the host)."""


def packed_strides(accelerator: Accelerator, height: int, width: int, channels: int) -> tuple[int, int, int]:
    """Vector strides (h, w, channel block) of an H x W x C tensor in the accelerator's layout
    (its first three dimensions in any order; the block's lanes innermost)."""
    sizes = {"H": height, "W": width, "C": -(-channels // accelerator.channel_block)}
    order = [dimension[0] for dimension in accelerator.layout[:3]]
    strides, stride = {}, 1
    for dimension in reversed(order):
        strides[dimension] = stride
        stride *= sizes[dimension]
    return strides["H"], strides["W"], strides["C"]


@dataclass(frozen=True)
class PackedTensor:
    """An H x W x C int8 activation in the DATA segment, in the accelerator's layout."""

    address: int  # bytes
    height: int
    width: int
    channels: int
    strides: tuple[int, int, int]  # vectors: h, w, channel block
    block: int
    unit: int = 0  # bytes a vector takes in DRAM: 0 = block; fewer: the host's HWC layout of at most one block (narrow loads)

    @property
    def blocks(self) -> int:
        return -(-self.channels // self.block)

    @property
    def vectors(self) -> int:
        return self.height * self.width * self.blocks

    def at(self, h: int, w: int, block: int) -> int:
        """The byte address of vector (h, w, block)."""
        return self.address + (h * self.strides[0] + w * self.strides[1] + block * self.strides[2]) * (self.unit or self.block)


@dataclass(frozen=True)
class StoredWeights:
    """Weights in CONST: their address, and their compressed stream's bytes (0: stored as they are)."""

    address: int
    stream: int


@dataclass
class Lowering:
    """The state one accelerator program's lowering threads through its layers."""

    accelerator: Accelerator
    instructions: list[Instruction] = field(default_factory=list)
    constants: bytearray = field(default_factory=bytearray)
    resident: dict[str, Hashable] = field(default_factory=dict)  # buffer -> what it holds
    compression_saved_bytes: int = 0  # the constants stored as they are would take this much more
    halves_used: dict[str, int] = field(default_factory=dict)  # buffer -> how many times alternate() gave one of its halves

    @property
    def block(self) -> int:
        return self.accelerator.channel_block

    @property
    def inp_units(self) -> int:
        return self.accelerator.buffers.input // self.block

    @property
    def wgt_units(self) -> int:
        return self.accelerator.buffers.weight // (self.block * self.block)

    @property
    def acc_units(self) -> int:
        return self.accelerator.buffers.accumulator // (ACCUMULATOR_BYTES * self.block)

    def constant(self, data: np.ndarray) -> int:
        """Append little-endian constant data (aligned); its byte address in CONST."""
        self.constants.extend(b"\0" * (-len(self.constants) % CONST_ALIGN))
        address = len(self.constants)
        array = np.ascontiguousarray(data)
        self.constants.extend(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        return address

    def weight_constant(self, weights: np.ndarray, loaded_whole: bool) -> "StoredWeights":
        """Int8 weights in CONST: compressed (the target's weight_compression, where smaller) when one LOAD reads them
        whole, for the DMA decodes a stream from its start; else as they are."""
        raw = np.ascontiguousarray(weights, np.int8).tobytes()
        stream = compress(raw) if loaded_whole and self.accelerator.weight_compression else raw
        if len(stream) >= len(raw):
            return StoredWeights(self.constant(np.frombuffer(raw, np.int8)), 0)
        self.compression_saved_bytes += len(raw) - len(stream)
        return StoredWeights(self.constant(np.frombuffer(stream, np.uint8)), len(stream))

    def alternate(self, buffer: str, half: int) -> int:
        """The base of `buffer`'s next half (`half`: a half's units): 0, half, 0, ... across the program, so that what the
        units run at once never shares a half with what came just before (the target's double_buffering)."""
        used = self.halves_used.get(buffer, 0)
        self.halves_used[buffer] = used + 1
        return used % 2 * half

    def emit(self, instruction: Instruction) -> None:
        self.instructions.append(instruction)

    def check_shifts(self, shifts: list[Shift]) -> None:
        """A LoweringError for the first shift outside the target's shift_range: no instruction encodes one."""
        low, high = self.accelerator.shift_range
        for shift in shifts:
            if not low <= shift.amount <= high:
                raise LoweringError(f"{shift.label} = {shift.amount} is outside target.accelerator.shift_range [{low}, {high}]; "
                                    "the partition should have kept the layer on the host")

    def load(self, load: Load, holds: Hashable | None = None) -> None:
        """Emit `load` unless its buffer already holds `holds` (None: always load)."""
        buffer = "ACC" if load.buffer == "ACC8" else load.buffer
        if holds is not None and self.resident.get(buffer) == holds:
            return
        self.emit(load)
        self.resident[buffer] = holds

    def load_all(self, loads: list[Load], holds: Hashable) -> None:
        """Emit `loads` (into one buffer) unless it already holds `holds`."""
        buffers = {"ACC" if load.buffer == "ACC8" else load.buffer for load in loads}
        if len(buffers) != 1:
            raise LoweringError(f"load_all of several buffers: {sorted(buffers)}")
        (buffer,) = buffers
        if self.resident.get(buffer) == holds:
            return
        for load in loads:
            self.emit(load)
        self.resident[buffer] = holds

    def forget(self) -> None:
        """A new layer: nothing in the buffers is known to be reusable."""
        self.resident.clear()

    @property
    def cost(self) -> CostModel:
        return CostModel.of(self.accelerator)

    # --- element-wise finishing: requantize, clamp, store -------------------------------------

    def alu_over(self, op: str, base: int, shape: tuple[int, int, int], imm: int, note: str = "", round: int = 0) -> None:
        """One ALU op with an immediate over the [a][b][c] box of ACC vectors at base (`round`: the ALU's rounding
        attribute, as RMUL's)."""
        a, b, c = shape
        self.emit(Alu(op, Loop(a, b, c), Index(base, b * c, c, 1), None, imm, note, round=round))

    def requantize(self, base: int, shape: tuple[int, int, int], shift: int, low: int, high: int, note: str) -> None:
        """>> shift rounded half up (RSHR; none for 0; a negative shift is an exact saturating
        left shift, SHL), then clamp to [low, high] (MAX, MIN)."""
        if shift > 0:
            self.alu_over("RSHR", base, shape, shift, f"{note}: requantize >> {shift}")
        elif shift < 0:
            self.alu_over("SHL", base, shape, -shift, f"{note}: requantize << {-shift}")
        self.alu_over("MAX", base, shape, low, f"{note}: clamp low")
        self.alu_over("MIN", base, shape, high, f"{note}: clamp high")

    def rescale(self, base: int, shape: tuple[int, int, int], scaling: "Rescale", note: str) -> None:
        """TFLite's MultiplyByQuantizedMultiplier over the box (seed 004 [0062]: RMUL then RSHR): LSL by the
        left shifts, RMUL by the multipliers, RSHRA by the right shifts (double rounding); or one RMUL
        rounding at 31 - shift (single rounding). Each operand an immediate or, per channel, the vectors
        at scaling.vectors (broadcast over rows and columns)."""
        a, b, c = shape
        dst = Index(base, b * c, c, 1)
        self.check_shifts(scaling.encoded_shifts(note))

        def operand(offset: int) -> Index:
            return Index(scaling.vectors + offset * c, 0, 0, 1)

        left, right = scaling.left_shifts, scaling.right_shifts
        if scaling.rounding == "single":
            if any(left):
                self.emit(Alu("LSL", Loop(a, b, c), dst, scaling.vector_or_none(left, operand(2)), scaling.immediate(left),
                              f"{note}: << each shift less the smallest"))
            self.emit(Alu("RMUL", Loop(a, b, c), dst, scaling.vector_or_none(scaling.multipliers, operand(0)),
                          scaling.immediate(scaling.multipliers), f"{note}: rounding multiply",
                          round=DOUBLING_HIGH_MUL - min(scaling.shifts)))
            return
        if any(left):
            self.emit(Alu("LSL", Loop(a, b, c), dst, scaling.vector_or_none(left, operand(2)), scaling.immediate(left), f"{note}: << left shift"))
        self.emit(Alu("RMUL", Loop(a, b, c), dst, scaling.vector_or_none(scaling.multipliers, operand(0)), scaling.immediate(scaling.multipliers),
                      f"{note}: rounding multiply", round=DOUBLING_HIGH_MUL))
        if any(right):
            self.emit(Alu("RSHRA", Loop(a, b, c), dst, scaling.vector_or_none(right, operand(1)), scaling.immediate(right),
                          f"{note}: rounding >> right shift"))

    def store(self, base: int, rows: tuple[int, int], out: PackedTensor, blocks: tuple[int, int], note: str) -> None:
        """ACC box [rows][W][blocks] at base -> output rows [r0, r1), all columns, blocks [b0, b1)."""
        (r0, r1), (b0, b1) = rows, blocks
        self.emit(Store(out.at(r0, 0, b0), base, (r1 - r0, out.width, b1 - b0), out.strides, note))

    def emit_store_flat(self, base: int, address: int, vectors: int, note: str) -> None:
        """ACC vectors [base, base + vectors) -> DATA from `address`, contiguous."""
        self.emit(Store(address, base, (1, vectors, 1), (0, 1, 0), note))


@dataclass(frozen=True)
class Rescale:
    """TFLite's requantization of a tile's channels: per channel a multiplier and a shift (positive: left),
    rounded twice ("double": LSL, RMUL at 31, RSHRA) or once ("single": one RMUL rounding at 31 - shift; where the
    shifts differ, first an LSL by each channel's shift less the smallest, then the RMUL rounds at 31 - the smallest:
    (a x 2^d x m + 2^(R-1)) >> R is (a x m + 2^(R-d-1)) >> (R - d), exact while a x 2^d stays in int32). Where the
    values differ across the channels they are vectors in the accumulators at `vectors` ([multipliers][right
    shifts][left shifts], one block of the tile's channels each); where they agree, immediates."""

    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    rounding: str = "double"
    vectors: int = 0

    @property
    def left_shifts(self) -> tuple[int, ...]:
        """Double rounding: the positive shifts; single: each shift less the smallest (the LSL before the one RMUL)."""
        if self.rounding == "single":
            return tuple(shift - min(self.shifts) for shift in self.shifts)
        return tuple(max(shift, 0) for shift in self.shifts)

    @property
    def right_shifts(self) -> tuple[int, ...]:
        return (0,) * len(self.shifts) if self.rounding == "single" else tuple(max(-shift, 0) for shift in self.shifts)

    def encoded_shifts(self, what: str) -> list[Shift]:
        """The shift amounts rescale() encodes, as immediates or per-channel vectors: LSL's left shifts and RSHRA's right
        shifts, which the target's shifter must hold (partition's check; Lowering.rescale refuses any outside it).
        RMUL's rounding is its own field (isa.RMUL_ROUND), not a shift of the shifter."""
        left, right = self.left_shifts, self.right_shifts

        def extremes(operation: str, values: tuple[int, ...]) -> list[Shift]:
            if not any(values):
                return []
            if min(values) == max(values):
                return [Shift(f"{what}: {operation}", values[0])]
            return [Shift(f"{what}: {operation}, the channels' smallest", min(values)),
                    Shift(f"{what}: {operation}, the channels' largest", max(values))]
        return [*extremes("LSL by the left shift", left), *extremes("RSHRA by the right shift", right)]

    @staticmethod
    def uniform(values: tuple[int, ...]) -> bool:
        return len(set(values)) == 1

    def vector_or_none(self, values: tuple[int, ...], index: Index) -> Index | None:
        return None if self.uniform(values) else index

    def immediate(self, values: tuple[int, ...]) -> int:
        return values[0] if self.uniform(values) else 0

    def vector_tables(self, channels: int, block: int) -> tuple[np.ndarray, np.ndarray]:
        """The tile's vectors in CONST, zero past `channels`: the multipliers, int32 [channel block][block]; the right and
        the left shifts, int8 [2][channel block][block] (0..61: a byte each, loaded sign-extended, half the flash of
        int32s)."""
        blocks = -(-channels // block)
        table = np.zeros((3, blocks * block), np.int64)
        for row, values in enumerate((self.multipliers, self.right_shifts, self.left_shifts)):
            table[row, :channels] = np.broadcast_to(values, (channels,))
        table = table.reshape(3, blocks, block)
        return table[0].astype(np.int32), table[1:].astype(np.int8)


def as_hwc(shape: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """One image's shape as H x W x C: tokens [L, C] are 1 x L x C and a vector [C] 1 x 1 x C (the same bytes)."""
    return (*(1,) * (3 - len(shape)), *(int(d) for d in shape)) if 1 <= len(shape) < 3 else tuple(int(d) for d in shape)


def in_host_layout(accelerator: Accelerator, address: int, shape: list[int] | tuple[int, ...]) -> PackedTensor:
    """An H x W x C tensor of C <= B channels where the host keeps it (HWC): a narrow load's source, no pack needed."""
    height, width, channels = as_hwc(shape)
    if channels > accelerator.channel_block:
        raise LoweringError(f"a tensor of {channels} channels read in the host layout; a narrow load reads at most "
                            f"{accelerator.channel_block}")
    return PackedTensor(address, height, width, channels, (width, 1, 0), accelerator.channel_block, unit=channels)


def packed(accelerator: Accelerator, address: int, shape: list[int] | tuple[int, ...]) -> PackedTensor:
    if not 1 <= len(shape) <= 3:
        raise LoweringError(f"a tensor of shape {list(shape)} on the accelerator; it takes H x W x C activations")
    height, width, channels = as_hwc(shape)
    return PackedTensor(address, height, width, channels, packed_strides(accelerator, height, width, channels),
                        accelerator.channel_block)


# --- windows: rows of the padded input a tile of output rows reads ----------------------------


def load_rows(window: Window, buffer: str, base: int, tensor: PackedTensor, rows: tuple[int, int], blocks: tuple[int, int],
              pad_value: int, note: str) -> Load:
    """The LOAD of the padded input box [input_rows][padded_width][blocks] that output rows
    [r0, r1) of `window` read: rows and columns outside the input filled with pad_value."""
    r0, r1 = rows
    first = r0 * window.stride[0] - window.pad_top  # input row of the box's first row
    total = window.input_rows(r1 - r0)
    start, stop = max(0, first), min(window.height, first + total)
    inside = max(0, stop - start)
    top = min(total, start - first) if inside else total
    bottom = total - top - inside
    right = window.padded_width - window.width - window.pad_left
    b0, b1 = blocks
    if inside == 0:  # all padding: no DRAM read
        return Load(buffer, tensor.address, base, (0, tensor.width, b1 - b0), tensor.strides, (total, 0, window.pad_left, right),
                    pad_value, note=note, narrow=tensor.unit)
    return Load(buffer, tensor.at(start, 0, b0), base, (inside, tensor.width, b1 - b0), tensor.strides,
                (top, bottom, window.pad_left, right), pad_value, note=note, narrow=tensor.unit)


def copy_box(low: "Lowering", name: str, x: PackedTensor, output: PackedTensor, top: int = 0, left: int = 0) -> None:
    """The DMA's copy of `output`'s box of `x` from row `top` and column `left`: per tile of output rows and channel
    blocks, one LOAD into the accumulators (int8 sign-extended) and one STORE."""
    width = output.width
    block_tile = min(x.blocks, low.acc_units // width)
    if block_tile == 0:
        raise LoweringError(f"layer {name}: an output row of one channel block ({width} vectors) exceeds the accumulators")
    rows = max(1, low.acc_units // (width * block_tile))
    for r0, r1 in spans(output.height, rows):
        for b0, b1 in spans(x.blocks, block_tile):
            what = f"{name} rows {r0}-{r1 - 1} blocks {b0}-{b1 - 1}"
            low.emit(Load("ACC8", x.at(r0 + top, left, b0), 0, (r1 - r0, width, b1 - b0), x.strides, note=f"{what}: the box"))
            low.store(0, (r0, r1), output, (b0, b1), f"{what}: store")


def spans(total: int, per_tile: int) -> list[tuple[int, int]]:
    """[0, total) cut into [start, stop) of per_tile (the last one shorter): rows, blocks, vectors."""
    return [(start, min(total, start + per_tile)) for start in range(0, total, per_tile)]


def most_rows(window: Window, fits: Callable[[int], bool]) -> int:
    """The largest number of output rows (<= out_height) for which fits(rows) holds; 0 if none."""
    low, high = 0, window.out_height
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


# --- the registry of per-operation lowerings (ops/) -----------------------------------------------


SHIFT_OPERATIONS = ("RSHR", "RSHRA", "SHL", "LSL")  # ALU operations whose immediate is a shift amount


def instruction_shifts(instruction: Instruction) -> list[Shift]:
    """The shift amount an instruction encodes as its immediate (a shift by a vector is checked where the vector's
    values are made: Lowering.rescale, or declared by its lowering: OpLowering.shifts)."""
    if isinstance(instruction, Alu) and instruction.op in SHIFT_OPERATIONS and instruction.src is None:
        return [Shift(f"`{' '.join(instruction.text().split())}`", instruction.imm)]
    return []


@dataclass(frozen=True)
class OpLowering:
    """How one IR operation runs on the accelerator.

    lower(record, params, inputs, output, lowering): append to `lowering` what reads the
        PackedTensors `inputs` and writes `output`; LoweringError if it cannot.
    tile_needs(record, accelerator): bytes of each buffer ("input", "weight", "accumulator")
        that the smallest tile the lowering can cut the layer into needs (partition's check).
    refusals(record, params): why this lowering cannot run this layer, whatever the target (the
        partition keeps it on the host with these reasons); empty when it can.
    shifts(record, params): the shift amounts its instructions encode beyond the record's own (`IrLayer.shifts`): the
        requantization's, and those a shift by a computed vector may take (partition checks them against the target's
        shift_range; the lowering refuses any instruction outside it)."""

    lower: Callable[..., None]
    tile_needs: Callable[..., dict[str, int]]
    refusals: Callable[..., list[str]] = lambda record, params: []
    shifts: Callable[..., list[Shift]] = lambda record, params: []
    # its inputs are read by load_rows alone, so one of at most one block of channels is read where the host keeps it
    # (a narrow load): partition packs it not
    reads_host_layout: bool = False


LOWERINGS: dict[str, OpLowering] = {}
HOST_ONLY: dict[str, str] = {}  # operation -> why it never runs on the accelerator


def lowers(operation: str, tile_needs: Callable[..., dict[str, int]], refusals: Callable[..., list[str]] | None = None,
           reads_host_layout: bool = False, shifts: Callable[..., list[Shift]] | None = None) -> Callable:
    """Decorator: register the accelerator lowering of `operation`."""

    def register(lower: Callable[..., None]) -> Callable[..., None]:
        if operation in LOWERINGS or operation in HOST_ONLY:
            raise ValueError(f"{operation!r} declared twice in the accelerator's registry")
        refused = refusals or (lambda record, params: [])

        def checked(record, params: dict, *arguments) -> None:
            """`lower`, after the refusals the partition should have kept on the host (a LoweringError naming them);
            then no instruction it emitted may encode a shift outside the target's shift_range."""
            problems = refused(record, params)
            if problems:
                raise LoweringError(f"layer {record.name}: {'; '.join(problems)}")
            low: Lowering = arguments[-1]
            start = len(low.instructions)
            try:
                lower(record, params, *arguments)
                low.check_shifts([shift for instruction in low.instructions[start:] for shift in instruction_shifts(instruction)])
            except LoweringError as error:
                raise LoweringError(f"layer {record.name}: {error}") if not str(error).startswith("layer ") else error from None

        LOWERINGS[operation] = OpLowering(checked, tile_needs, refused, shifts or (lambda record, params: []), reads_host_layout)
        return lower

    return register


def host_only(operation: str, why: str) -> None:
    """Declare that `operation` never runs on the accelerator (partition keeps it on the host)."""
    if operation in LOWERINGS or operation in HOST_ONLY:
        raise ValueError(f"{operation!r} declared twice in the accelerator's registry")
    HOST_ONLY[operation] = why
