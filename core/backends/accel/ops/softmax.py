"""softmax on the accelerator, the tflite_int8 dialect's (TFLite's int8 reference kernel, core/ir/ops/softmax/affine.py), by
the vector ALU alone: each pixel's row of C values is its channel blocks in ACC.

Per tile of image rows, every operation looping over the tile's pixels (and blocks): the row LOADed (int8 sign-extended);
its maximum (MAXR of each block, its lanes past C not read, then MAX across the blocks); d = max - x (x negated by an RMUL
by -2 rounding at 1, then ADD); exp(-d) by LUT from the layer's 256-entry table (exp_table, computed at compile time as
the kernel computes it, 0 where the kernel skips a difference below diff_min; the lanes past C 0); the sum of each exp
rounded by 2^-12 (RSHRA 12, SUMR per block, ADD across them, wrapping as the kernel's int32 does); GetReciprocal: the
sum's leading zeros h (CLZ), the sum shifted by them less one (LSL, ADD -2^31), half of (that + 1) rounded (ADD -1, RSHR
1, ADD 2^30), three Newton-Raphson steps from 48/17 - 32/17 x (RMUL rounding at 31 as gemmlowp's
SaturatingRoundingDoublingHighMul, ADD, SHL's saturating doubling), doubled; then each output the reciprocal times its
exp (RMUL at 31), rounded by 2^-(35 - h) (RSHRA by a vector), less 128, clamped (ADD, MAX, MIN), STORE. Every step
is one of the kernel's, so the bytes are the kernel's.

TF2IR's softmax (a 64-bit division) stays on the host, as do rows of 512 classes or more (the output's rounding shift
35 - h passes the ALU's 31 when the sum of the exps may reach 2^28)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.backends.accel.isa import DOUBLING_HIGH_MUL, Alu, Index, Load, Loop, lut_vectors
from core.backends.accel.lowering import ACCUMULATOR_BYTES, Lowering, LoweringError, PackedTensor, lowers, spans
from core.backends.accel.target import Accelerator
from core.ir.ops.softmax.affine import ACCUMULATION_INTEGER_BITS, OUTPUT_ZERO_POINT, softmax_exp_table
from core.ir.ops.softmax.record import FixedPointSoftmax, SoftmaxLayer
from core.ir.records import Shift

MAX_CLASSES = 511  # the sum of the exps stays below 2^28: the output's rounding shift 35 - h at most 31
NEWTON_STEPS = 3
CONSTANT_48_OVER_17, CONSTANT_NEG_32_OVER_17 = 1515870810, -1010580540  # gemmlowp's, Q2 and Q0
ONE_Q2 = 1 << 29  # FixedPoint<int32, 2>::One()
HOST_DIVISION = "TF2IR's softmax divides in 64 bits: the host's"
SCALARS = ("max", "sum", "clz", "half", "x", "product", "step", "reciprocal", "shift")  # per pixel, one vector each


def _blocks(record: SoftmaxLayer, block: int) -> int:
    return -(-record.classes // block)



def softmax_tile_needs(record: SoftmaxLayer, accelerator: Accelerator) -> dict[str, int]:
    """One image row: its pixels' rows and exps (two vectors a block each), the per-pixel vectors, the exp table."""
    block = accelerator.channel_block
    width = record.shape[-2] if len(record.shape) == 3 else 1
    vectors = width * (2 * _blocks(record, block) + len(SCALARS)) + lut_vectors(block)
    return {"accumulator": vectors * block * ACCUMULATOR_BYTES}


def softmax_refusals(record: SoftmaxLayer, params: dict) -> list[str]:
    problems = []
    if not isinstance(record.normalization, FixedPointSoftmax):  # the arithmetic this lowering computes
        problems.append(HOST_DIVISION)
    if len(record.shape) == 2:
        problems.append(f"a softmax of shape {list(record.shape)}: the accelerator's layout holds H x W x C images")
    if record.classes > MAX_CLASSES:
        problems.append(f"{record.classes} classes: the sum of the exps could reach 2^28, and the output's rounding shift pass the "
                        f"ALU's 31 (at most {MAX_CLASSES})")
    return problems


SUM_FRACTION_BITS = 31 - ACCUMULATION_INTEGER_BITS  # each exp (at most 1) is 2^19 in the sum's Q12.19


def softmax_shifts(record: SoftmaxLayer, params: dict) -> list[Shift]:
    """The shifts the kernel's steps take: the immediates, and the two by h, the sum's leading zeros, which the ALU
    shifts by at run time: the sum lies in [2^19, classes x 2^19] (the largest exp is 1), so h in
    [12 - floor(log2 classes), 12]: LSL by h, RSHRA by 35 - h."""
    if not isinstance(record.normalization, FixedPointSoftmax):
        return []
    fewest = 31 - SUM_FRACTION_BITS - (record.classes.bit_length() - 1)
    most = 31 - SUM_FRACTION_BITS
    return [Shift("exp / 2^12: RSHRA", ACCUMULATION_INTEGER_BITS), Shift("the reciprocal's halving: RSHR", 1),
            Shift("the Newton steps' doubling: SHL", 2), Shift("the sum << h: LSL by h", fewest), Shift("the sum << h: LSL by h", most),
            Shift("the output's rounding: RSHRA by 35 - h", 35 - most), Shift("the output's rounding: RSHRA by 35 - h", 35 - fewest)]


@dataclass(frozen=True)
class _Layout:
    """A tile's ACC vectors: `pixels` pixels of `blocks` blocks; the rows (then exps and outputs) at 0, the rounded exps
    (first each block's maximum) after them, one vector a pixel of each of SCALARS, the table last."""

    pixels: int
    blocks: int

    @property
    def terms(self) -> int:
        return self.pixels * self.blocks

    def scalar(self, name: str) -> int:
        return 2 * self.terms + SCALARS.index(name) * self.pixels

    @property
    def table(self) -> int:
        return 2 * self.terms + len(SCALARS) * self.pixels


@lowers("softmax", softmax_tile_needs, softmax_refusals, shifts=softmax_shifts)
def softmax_lower(record: SoftmaxLayer, params: dict, inputs: list[PackedTensor], output: PackedTensor, low: Lowering) -> None:
    (x,) = inputs
    normalization = record.normalization
    if not isinstance(normalization, FixedPointSoftmax):  # softmax_refusals keeps it on the host
        raise LoweringError(f"layer {record.name}: {HOST_DIVISION}")
    table = np.maximum(softmax_exp_table(normalization.input_scale, normalization.beta), 0)  # the kernel's skipped differences: exp 0
    table_address = low.constant(np.resize(table, lut_vectors(low.block) * low.block).astype(np.int32))
    per_row = output.width * (2 * output.blocks + len(SCALARS))
    rows = (low.acc_units - lut_vectors(low.block)) // per_row
    if rows == 0:
        raise LoweringError(f"layer {record.name}: an image row's vectors and the exp table exceed the accumulators")
    for r0, r1 in spans(output.height, rows):
        layout = _Layout((r1 - r0) * output.width, output.blocks)
        what = f"{record.name} rows {r0}-{r1 - 1}"
        low.emit(Load("ACC", table_address, layout.table, (1, lut_vectors(low.block), 1), (0, 1, 0), const=True,
                      note=f"{what}: exp table"))
        low.emit(Load("ACC8", x.at(r0, 0, 0), 0, (r1 - r0, x.width, x.blocks), x.strides, note=f"{what}: the rows"))
        _exps(record, low, layout, what)
        _reciprocal(low, layout, what)
        _outputs(low, layout, what)
        low.store(0, (r0, r1), output, (0, output.blocks), f"{what}: store")


def _last_lanes(record: SoftmaxLayer, block: int) -> int:
    return record.classes - (_blocks(record, block) - 1) * block


def _exps(record: SoftmaxLayer, low: Lowering, layout: _Layout, what: str) -> None:
    """The rows' maxima, each x replaced by exp(x - max), their sum (rounded by 2^-12 each) in `sum`."""
    pixels, blocks, terms = layout.pixels, layout.blocks, layout.terms
    every = (Loop(pixels, blocks), Index(0, blocks, 1))  # each block of each pixel
    maxima, top, total = layout.terms, layout.scalar("max"), layout.scalar("sum")
    if blocks > 1:
        low.emit(Alu("MAXR", Loop(pixels, blocks - 1), Index(maxima, blocks, 1), Index(0, blocks, 1), note=f"{what}: max of each block"))
    low.emit(Alu("MAXR", Loop(pixels), Index(maxima + blocks - 1, blocks), Index(blocks - 1, blocks), lanes=_last_lanes(record, low.block),
                 note=f"{what}: max of the last block's classes"))
    low.emit(Alu("MOV", Loop(pixels), Index(top, 1), Index(maxima, blocks), note=f"{what}: row max"))
    if blocks > 1:
        low.emit(Alu("MAX", Loop(pixels, blocks - 1), Index(top, 1, 0), Index(maxima + 1, blocks, 1), note=f"{what}: row max"))
    low.emit(Alu("RMUL", *every, None, -2, f"{what}: -x", round=1))
    low.emit(Alu("ADD", *every, Index(top, 1, 0), note=f"{what}: d = max - x"))
    if blocks > 1:
        low.emit(Alu("LUT", Loop(pixels, blocks - 1), Index(0, blocks, 1), Index(0, blocks, 1), layout.table, note=f"{what}: exp(-d)"))
    low.emit(Alu("LUT", Loop(pixels), Index(blocks - 1, blocks), Index(blocks - 1, blocks), layout.table,
                 lanes=_last_lanes(record, low.block), note=f"{what}: exp(-d) of the last block's classes, 0 past them"))
    low.emit(Alu("MOV", Loop(pixels, blocks), Index(terms, blocks, 1), Index(0, blocks, 1), note=f"{what}: terms"))
    low.emit(Alu("RSHRA", Loop(pixels, blocks), Index(terms, blocks, 1), None, ACCUMULATION_INTEGER_BITS, f"{what}: exp / 2^12 (Q12.19)"))
    low.emit(Alu("SUMR", Loop(pixels, blocks), Index(terms, blocks, 1), Index(terms, blocks, 1), note=f"{what}: sum of each block"))
    low.emit(Alu("MOV", Loop(pixels), Index(total, 1), Index(terms, blocks), note=f"{what}: sum"))
    if blocks > 1:
        low.emit(Alu("ADD", Loop(pixels, blocks - 1), Index(total, 1, 0), Index(terms + 1, blocks, 1), note=f"{what}: sum"))


def _scalar_op(low: Lowering, layout: _Layout, op: str, dst: str, src: str | None = None, imm: int = 0, round: int = 0,
               note: str = "") -> None:
    """One ALU operation over the pixels' vectors `dst`, of the pixels' `src` or the immediate."""
    source = None if src is None else Index(layout.scalar(src), 1)
    low.emit(Alu(op, Loop(layout.pixels), Index(layout.scalar(dst), 1), source, imm, note, round=round))


def _reciprocal(low: Lowering, layout: _Layout, what: str) -> None:
    """gemmlowp's GetReciprocal of `sum` (Q12.19): `reciprocal` (Q0), and the output's rounding shift 35 - h in `shift`."""
    def op(*args, **kwargs) -> None:
        _scalar_op(low, layout, *args, **kwargs)
    op("CLZ", "clz", "sum", note=f"{what}: h = leading zeros of the sum")
    op("MOV", "half", "sum")
    op("LSL", "half", "clz", note=f"{what}: the sum << h")
    op("ADD", "half", imm=-(1 << 31), note=f"{what}: less one (x in [0, 1))")
    op("ADD", "half", imm=-1)
    op("RSHR", "half", imm=1)
    op("ADD", "half", imm=1 << 30, note=f"{what}: (x + 1) / 2, rounded as RoundingHalfSum")
    op("MOV", "x", "half")
    op("RMUL", "x", imm=CONSTANT_NEG_32_OVER_17, round=DOUBLING_HIGH_MUL)
    op("ADD", "x", imm=CONSTANT_48_OVER_17, note=f"{what}: x0 = 48/17 - 32/17 d")
    for step in range(NEWTON_STEPS):
        op("MOV", "product", "half")
        op("RMUL", "product", "x", round=DOUBLING_HIGH_MUL, note=f"{what}: Newton step {step + 1}: d x")
        op("RMUL", "product", imm=-2, round=1)
        op("ADD", "product", imm=ONE_Q2, note=f"{what}: 1 - d x")
        op("MOV", "step", "x")
        op("RMUL", "step", "product", round=DOUBLING_HIGH_MUL)
        op("SHL", "step", imm=2, note=f"{what}: x (1 - d x), Q4 to Q2 saturated")
        op("ADD", "x", "step")
    op("MOV", "reciprocal", "x")
    op("SHL", "reciprocal", imm=1, note=f"{what}: 1 / (1 + x), Q1 to Q0 saturated")
    op("MOV", "shift", "clz")
    op("RMUL", "shift", imm=-2, round=1)
    op("ADD", "shift", imm=35, note=f"{what}: bits over one + 23 = 35 - h")


def _outputs(low: Lowering, layout: _Layout, what: str) -> None:
    """Each exp (at 0) times the reciprocal, rounded by 2^-(35 - h), less 128, clamped."""
    pixels, blocks = layout.pixels, layout.blocks
    every = (Loop(pixels, blocks), Index(0, blocks, 1))
    low.emit(Alu("RMUL", *every, Index(layout.scalar("reciprocal"), 1, 0), note=f"{what}: reciprocal x exp", round=DOUBLING_HIGH_MUL))
    low.emit(Alu("RSHRA", *every, Index(layout.scalar("shift"), 1, 0), note=f"{what}: rounded by 2^-(35 - h)"))
    low.emit(Alu("ADD", *every, None, OUTPUT_ZERO_POINT, f"{what}: + output zero point"))
    low.emit(Alu("MAX", *every, None, -128, f"{what}: clamp low"))
    low.emit(Alu("MIN", *every, None, 127, f"{what}: clamp high"))
