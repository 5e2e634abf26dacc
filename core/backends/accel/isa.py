"""The accelerator's instruction set: a VTA-like int8 machine (seed 004 [0058]-[0064]) with three
on-chip buffers, a block GEMM core, a vector ALU and a DMA engine, parameterized by a target's
`accelerator:` description (core/accelerator.py).

State
  INP  int8,  `buffers.input` bytes, addressed in vectors of B = gemm_block.block_in int8s.
  WGT  int8,  `buffers.weight` bytes, addressed in B x B blocks ([out][in], row-major).
  ACC  int32, `buffers.accumulator` bytes, addressed in vectors of B int32s.
  DRAM two segments the host shares: DATA (activations, read and written) and CONST (the
       program's tiled weights and int32 biases, read only). Addresses are byte offsets.

Instructions: 16 little-endian uint32 words (64 bytes) each; word 0 = opcode | sub << 8 |
flags << 16. Loops: a 3-deep nest i0 < e0, i1 < e1, i2 < e2; an operand's index is
base + i0 * f0 + i1 * f1 + i2 * f2 (in its buffer's units).

  LOAD   sub = buffer (INP, WGT, ACC = int32 vectors, ACC8 = int8 vectors sign-extended into
         ACC); flag CONST = read the CONST segment. A 3-D DMA: for y < y_size, x < x_size,
         c < c_size the unit at dram + (y * sy + x * sx + c * sc) * unit bytes goes to buffer
         index base + ((pad_top + y) * (pad_left + x_size + pad_right) + pad_left + x) * c_size + c;
         the pad_top/bottom rows and pad_left/right columns of that [Y][X][C] box hold
         pad_value in every lane. A stride of 0 repeats a unit (a bias broadcast).
  STORE  ACC -> DATA: the [y][x][c] box of ACC vectors at base, each lane's low 8 bits (the
         program clamps to int8 first), to dram + (y * sy + x * sx + c * sc) * B.
  GEMM   flag RESET: acc[d] = 0; else acc[d][o] += sum_k inp[s][k] * wgt[w][o][k], over the
         loop nest (d, s, w each base + i . f). One micro-op per loop iteration.
  ALU    sub = MOV, ADD, MAX, MIN, RSHR (rounding shift right: floor((a + 2^(n-1)) / 2^n),
         n >= 1, computed without overflow), SHL (a * 2^n saturated to int32); flag IMM:
         the second operand is the immediate for every lane, else acc[s]. Result to acc[d].
  FINISH the end of an accelerator function.

The reference implementation is core/c_runtime/qt_isa.h (C, compiled with the program);
`estimate_cycles` is the target's cost model over an instruction list.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, fields
from typing import Iterable, Mapping

WORDS = 16
INSTRUCTION_BYTES = 4 * WORDS

OPCODES = {"LOAD": 1, "STORE": 2, "GEMM": 3, "ALU": 4, "FINISH": 5}
BUFFERS = {"INP": 0, "WGT": 1, "ACC": 2, "ACC8": 3}
ALU_OPS = {"MOV": 0, "ADD": 1, "MAX": 2, "MIN": 3, "RSHR": 4, "SHL": 5}
FLAG_CONST = 1  # LOAD: from the CONST segment
FLAG_RESET = 1  # GEMM: zero the accumulators
FLAG_IMM = 1  # ALU: immediate second operand
U16 = 0xFFFF


class IsaError(ValueError):
    """An instruction the machine cannot encode or execute."""


@dataclass(frozen=True)
class Loop:
    """The 3-deep loop nest of GEMM and ALU: extents (e0, e1, e2)."""

    e0: int = 1
    e1: int = 1
    e2: int = 1

    @property
    def count(self) -> int:
        return self.e0 * self.e1 * self.e2


@dataclass(frozen=True)
class Index:
    """An operand: base + i0 * f0 + i1 * f1 + i2 * f2."""

    base: int
    f0: int = 0
    f1: int = 0
    f2: int = 0

    def last(self, loop: Loop) -> int:
        return self.base + max(0, loop.e0 - 1) * self.f0 + max(0, loop.e1 - 1) * self.f1 + max(0, loop.e2 - 1) * self.f2


@dataclass(frozen=True)
class Load:
    buffer: str
    dram: int
    base: int
    size: tuple[int, int, int]  # (y, x, c) units read from DRAM
    strides: tuple[int, int, int]  # DRAM strides in units
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, bottom, left, right
    pad_value: int = 0
    const: bool = False
    note: str = ""

    kind = "LOAD"

    @property
    def box(self) -> tuple[int, int, int]:
        """(rows, columns, c) the buffer receives, padding included."""
        return self.size[0] + self.pads[0] + self.pads[1], self.size[1] + self.pads[2] + self.pads[3], self.size[2]

    @property
    def units(self) -> int:
        rows, columns, c = self.box
        return rows * columns * c

    def dram_bytes(self, block: int) -> int:
        return self.size[0] * self.size[1] * self.size[2] * unit_bytes(self.buffer, block)

    def words(self) -> list[int]:
        y, x, c = self.size
        top, bottom, left, right = self.pads
        return [_word0("LOAD", BUFFERS[self.buffer], FLAG_CONST if self.const else 0), self.dram, self.base,
                _pair(y, x), _pair(c, _byte(top) | _byte(bottom) << 8), _byte(left) | _byte(right) << 8 | (self.pad_value & 0xFF) << 16,
                *self.strides]

    def text(self) -> str:
        segment = "CONST" if self.const else "DATA"
        pads = f" pad={list(self.pads)}:{self.pad_value}" if any(self.pads) else ""
        return (f"LOAD   {self.buffer:<4} [{self.base}] <- {segment}[{self.dram}] size={list(self.size)} "
                f"stride={list(self.strides)}{pads}")


@dataclass(frozen=True)
class Store:
    dram: int
    base: int
    size: tuple[int, int, int]
    strides: tuple[int, int, int]
    note: str = ""

    kind = "STORE"

    @property
    def units(self) -> int:
        return self.size[0] * self.size[1] * self.size[2]

    def dram_bytes(self, block: int) -> int:
        return self.units * block

    def words(self) -> list[int]:
        y, x, c = self.size
        return [_word0("STORE", 0, 0), self.dram, self.base, _pair(y, x), _pair(c, 0), 0, *self.strides]

    def text(self) -> str:
        return f"STORE  ACC  [{self.base}] -> DATA[{self.dram}] size={list(self.size)} stride={list(self.strides)}"


@dataclass(frozen=True)
class Gemm:
    loop: Loop
    acc: Index
    inp: Index
    wgt: Index
    reset: bool = False
    note: str = ""

    kind = "GEMM"

    def words(self) -> list[int]:
        loop = self.loop
        return [_word0("GEMM", 0, FLAG_RESET if self.reset else 0), self.acc.base, self.inp.base, self.wgt.base,
                _pair(loop.e0, loop.e1), _pair(loop.e2, 0),
                self.acc.f0, self.acc.f1, self.acc.f2, self.inp.f0, self.inp.f1, self.inp.f2, self.wgt.f0, self.wgt.f1, self.wgt.f2]

    def text(self) -> str:
        operands = f"acc={_index_text(self.acc)}" if self.reset else \
            f"acc={_index_text(self.acc)} inp={_index_text(self.inp)} wgt={_index_text(self.wgt)}"
        return f"GEMM   {'RESET ' if self.reset else ''}loop={[self.loop.e0, self.loop.e1, self.loop.e2]} {operands}"


@dataclass(frozen=True)
class Alu:
    op: str
    loop: Loop
    dst: Index
    src: Index | None = None  # None: the immediate
    imm: int = 0
    note: str = ""

    kind = "ALU"

    def words(self) -> list[int]:
        loop, src = self.loop, self.src or Index(0)
        return [_word0("ALU", ALU_OPS[self.op], FLAG_IMM if self.src is None else 0), self.dst.base, src.base, self.imm,
                _pair(loop.e0, loop.e1), _pair(loop.e2, 0), self.dst.f0, self.dst.f1, self.dst.f2, src.f0, src.f1, src.f2]

    def text(self) -> str:
        operand = f"#{self.imm}" if self.src is None else _index_text(self.src)
        return f"ALU    {self.op:<4} loop={[self.loop.e0, self.loop.e1, self.loop.e2]} dst={_index_text(self.dst)} src={operand}"


@dataclass(frozen=True)
class Finish:
    note: str = ""

    kind = "FINISH"

    def words(self) -> list[int]:
        return [_word0("FINISH", 0, 0)]

    def text(self) -> str:
        return "FINISH"


Instruction = Load | Store | Gemm | Alu | Finish


def unit_bytes(buffer: str, block: int) -> int:
    """Bytes of one unit of a buffer in DRAM: an int8 vector, an int8 block, an int32 vector."""
    return {"INP": block, "ACC8": block, "WGT": block * block, "ACC": 4 * block}[buffer]


def _word0(opcode: str, sub: int, flags: int) -> int:
    return OPCODES[opcode] | sub << 8 | flags << 16


def _pair(low: int, high: int) -> int:
    for value in (low, high):
        if not 0 <= value <= U16:
            raise IsaError(f"{value} does not fit a 16-bit field")
    return low | high << 16


def _byte(value: int) -> int:
    if not 0 <= value <= 0xFF:
        raise IsaError(f"padding {value} does not fit an 8-bit field")
    return value


def _index_text(index: Index) -> str:
    factors = [index.f0, index.f1, index.f2]
    return f"{index.base}" + (f"+{factors}" if any(factors) else "")


def encode(instruction: Instruction) -> bytes:
    words = instruction.words()
    if len(words) > WORDS:  # pragma: no cover  (a format change that forgot WORDS)
        raise IsaError(f"{instruction.kind}: {len(words)} words > {WORDS}")
    try:
        return struct.pack(f"<{WORDS}I", *(w & 0xFFFFFFFF for w in words), *([0] * (WORDS - len(words))))
    except struct.error as error:
        raise IsaError(f"{instruction.text()}: {error}") from None


def encode_all(instructions: Iterable[Instruction]) -> bytes:
    return b"".join(encode(instruction) for instruction in instructions)


def _signed(word: int) -> int:
    return word - (1 << 32) if word & 0x80000000 else word


def decode(data: bytes) -> list[Instruction]:
    """The instructions of a binary stream (notes are not encoded: they come back empty)."""
    if len(data) % INSTRUCTION_BYTES:
        raise IsaError(f"{len(data)} bytes: not a whole number of {INSTRUCTION_BYTES}-byte instructions")
    opcodes = {v: k for k, v in OPCODES.items()}
    buffers = {v: k for k, v in BUFFERS.items()}
    alu_ops = {v: k for k, v in ALU_OPS.items()}
    decoded: list[Instruction] = []
    for start in range(0, len(data), INSTRUCTION_BYTES):
        w = struct.unpack_from(f"<{WORDS}I", data, start)
        opcode, sub, flags = opcodes.get(w[0] & 0xFF), w[0] >> 8 & 0xFF, w[0] >> 16
        s = [_signed(word) for word in w]
        if opcode == "LOAD":
            pad_value = w[5] >> 16 & 0xFF
            decoded.append(Load(buffers[sub], w[1], w[2], (w[3] & U16, w[3] >> 16, w[4] & U16), (s[6], s[7], s[8]),
                                (w[4] >> 16 & 0xFF, w[4] >> 24, w[5] & 0xFF, w[5] >> 8 & 0xFF),
                                pad_value - 256 if pad_value > 127 else pad_value, bool(flags & FLAG_CONST)))
        elif opcode == "STORE":
            decoded.append(Store(w[1], w[2], (w[3] & U16, w[3] >> 16, w[4] & U16), (s[6], s[7], s[8])))
        elif opcode == "GEMM":
            loop = Loop(w[4] & U16, w[4] >> 16, w[5] & U16)
            decoded.append(Gemm(loop, Index(w[1], *s[6:9]), Index(w[2], *s[9:12]), Index(w[3], *s[12:15]), bool(flags & FLAG_RESET)))
        elif opcode == "ALU":
            loop = Loop(w[4] & U16, w[4] >> 16, w[5] & U16)
            immediate = bool(flags & FLAG_IMM)
            decoded.append(Alu(alu_ops[sub], loop, Index(w[1], *s[6:9]), None if immediate else Index(w[2], *s[9:12]),
                               s[3] if immediate else 0))
        elif opcode == "FINISH":
            decoded.append(Finish())
        else:
            raise IsaError(f"instruction {start // INSTRUCTION_BYTES}: unknown opcode {w[0] & 0xFF}")
    return decoded


def without_notes(instruction: Instruction) -> Instruction:
    values = {f.name: getattr(instruction, f.name) for f in fields(instruction)}
    values["note"] = ""
    return type(instruction)(**values)


def listing(instructions: list[Instruction], offset: int = 0) -> str:
    """One line per instruction: its index, its text, and what it is for."""
    lines = []
    for number, instruction in enumerate(instructions, start=offset):
        note = f"  ; {instruction.note}" if instruction.note else ""
        lines.append(f"{number:6d}  {instruction.text()}{note}\n")
    return "".join(lines)


# --- cost model ---------------------------------------------------------------------------------


def micro_ops(instruction: Instruction) -> int:
    return instruction.loop.count if isinstance(instruction, (Gemm, Alu)) else 0


def instruction_cycles(instruction: Instruction, cycles: Mapping[str, int], dma_bytes_per_cycle: float, block: int) -> float:
    """The target's cost of one instruction: DMA set-up + bytes / bandwidth; one GEMM or ALU
    micro-op per loop iteration; `sync` (0 if the target gives none) for FINISH."""
    if isinstance(instruction, Load):
        return cycles["load"] + -(-instruction.dram_bytes(block) // dma_bytes_per_cycle)
    if isinstance(instruction, Store):
        return cycles["store"] + -(-instruction.dram_bytes(block) // dma_bytes_per_cycle)
    if isinstance(instruction, Gemm):
        return cycles["gemm"] * instruction.loop.count
    if isinstance(instruction, Alu):
        return cycles["alu"] * instruction.loop.count
    return cycles.get("sync", 0)


def statistics(instructions: list[Instruction], cycles: Mapping[str, int], dma_bytes_per_cycle: float, block: int) -> dict[str, float]:
    """Counts by kind (ALU also by operation), micro-ops, DMA bytes and estimated cycles: the
    instructions run one after another (no overlap of DMA and compute: an upper bound)."""
    kinds = Counter(instruction.kind for instruction in instructions)
    stats: dict[str, float] = {f"count_{kind.lower()}": kinds.get(kind, 0) for kind in OPCODES}
    for op in ALU_OPS:
        stats[f"count_alu_{op.lower()}"] = sum(1 for i in instructions if isinstance(i, Alu) and i.op == op)
    stats["count_gemm_reset"] = sum(1 for i in instructions if isinstance(i, Gemm) and i.reset)
    stats["instructions"] = len(instructions)
    stats["gemm_micro_ops"] = sum(micro_ops(i) for i in instructions if isinstance(i, Gemm))
    stats["alu_micro_ops"] = sum(micro_ops(i) for i in instructions if isinstance(i, Alu))
    stats["load_bytes"] = sum(i.dram_bytes(block) for i in instructions if isinstance(i, Load))
    stats["store_bytes"] = sum(i.dram_bytes(block) for i in instructions if isinstance(i, Store))
    by_kind = Counter()
    for instruction in instructions:
        by_kind[instruction.kind] += instruction_cycles(instruction, cycles, dma_bytes_per_cycle, block)
    for kind in OPCODES:
        stats[f"cycles_{kind.lower()}"] = float(by_kind.get(kind, 0))
    stats["cycles"] = float(sum(by_kind.values()))
    return stats


