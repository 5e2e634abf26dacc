"""The accelerator's instruction set: a VTA-like int8 machine (seed 004 [0058]-[0064]) with three
on-chip buffers, a block GEMM core, a vector ALU and a DMA engine, parameterized by a target's
`accelerator:` description (core/backends/accel/target.py).

State
  INP  int8,  `buffers.input` bytes, addressed in vectors of B = gemm_block.block_in int8s.
  WGT  int8,  `buffers.weight` bytes, addressed in B x B blocks ([out][in], row-major), or by a depthwise
       GEMM and a WGTV LOAD in vectors of B int8s (vector v: the bytes v * B .. v * B + B - 1).
  ACC  int32, `buffers.accumulator` bytes, addressed in vectors of B int32s.
  DRAM two segments the host shares: DATA (activations, read and written) and CONST (the
       program's tiled weights and int32 biases, read only). Addresses are byte offsets.

Instructions: 16 little-endian uint32 words (64 bytes) each, laid out by the table LAYOUT
(from which `encode`, `decode` and the C decoder's constants, qt_isa_layout.h, are all made).
Loops: a 3-deep nest i0 < e0, i1 < e1, i2 < e2; an operand's index is
base + i0 * f0 + i1 * f1 + i2 * f2 (in its buffer's units).

  LOAD   sub = buffer (INP, WGT, ACC = int32 vectors, ACC8 = int8 vectors sign-extended into
         ACC, WGTV = int8 vectors into WGT); flag CONST = read the CONST segment; flag COMPRESSED (with
         CONST, no padding): dram holds `stream` bytes of core/backends/accel/compression.py's width-packed, masked or Rice-coded
         groups, decoded as read into the box's y * x * c units in order (the strides unused).
         `narrow` (INP, ACC8; 1..B, 0 = B): a unit in DRAM is that many bytes, the vector's other lanes
         pad_value: a tensor of at most B channels read in the host's HWC layout (the strides in
         units of `narrow` bytes), with no pack before it. A 3-D DMA: for y < y_size, x < x_size,
         c < c_size the unit at dram + (y * sy + x * sx + c * sc) * unit bytes goes to buffer
         index base + ((pad_top + y) * (pad_left + x_size + pad_right) + pad_left + x) * c_size + c;
         the pad_top/bottom rows and pad_left/right columns of that [Y][X][C] box hold
         pad_value in every lane. A stride of 0 repeats a unit (a bias broadcast).
  STORE  ACC -> DATA: the [y][x][c] box of ACC vectors at base, each lane's low 8 bits (the
         program clamps to int8 first), to dram + (y * sy + x * sx + c * sc) * B.
  GEMM   flag RESET: acc[d] = 0; else acc[d][o] += sum_k inp[s][k] * wgt[w][o][k], over the
         loop nest (d, s, w each base + i . f). One micro-op per loop iteration.
         flag DEPTHWISE (a depthwise convolution at the array's full width, no block-diagonal
         weights): each micro-op takes `lanes` (1..B) pixels at once, lane p:
         acc[d + p * acc_lane][c] += inp[s + p * inp_lane][c] * wgtv[w][c] for every channel c,
         wgtv the WGT buffer's B-int8 vectors (B x lanes multiply-adds a micro-op).
  ALU    sub = MOV, ADD, MAX, MIN, RSHR (rounding shift right: floor((a + 2^(n-1)) / 2^n),
         n >= 1, computed without overflow), SHL (a * 2^n saturated to int32), and for
         TFLite's requantization (seed 004 [0046], [0062]): RMUL (the rounding multiply:
         (a * b + 2^(r-1)) >> r in 64 bits, saturated to int32, r = the instruction's `round`
         field, 1..62; r = 31 is gemmlowp's SaturatingRoundingDoublingHighMul), RSHRA (the
         rounding shift right by n in 0..31, ties away from zero: gemmlowp's
         RoundingDivideByPOT; n = 0 leaves a), LSL (a * 2^n modulo 2^32, n in 0..31: TFLite's
         int32 `x * (1 << left_shift)`); flag IMM: the second operand is the immediate for
         every lane, else acc[s] lane by lane (a per-channel multiplier or shift vector: RMUL,
         RSHRA and LSL take either; RSHR and SHL the immediate only). Result to acc[d].
         Of the vector acc[s] alone (no IMM; `lanes` 1..B, 0 = B, of it read): MAXR and SUMR (its lanes'
         maximum, their sum modulo 2^32, in every lane of acc[d]: the reductions across a vector a
         softmax takes), LUT (lane by lane, the entry acc[s] in 0..255 of the 256-int32 table whose
         first vector is acc[imm] (entry k: vector imm + k / B, lane k % B); the lanes past `lanes` 0),
         CLZ (lane by lane, the leading zeros of acc[s] as a uint32, 32 for 0).
  FINISH the end of an accelerator function.

Units and dependency tokens (VTA's dependency queues, generalised): a target groups the opcodes into at most UNITS
concurrent units (`accelerator.units`, e.g. load: LOAD; compute: GEMM, ALU; store: STORE), each running its own
instructions in program order. Between every two units there is a queue of tokens. Every instruction but FINISH has a
`pop` and a `push` mask of units (header bits 24-27, 28-31): before it starts it takes one token from each unit in `pop`
(waiting until there is one), and once it has finished it gives one to each unit in `push`. The compiler
(core/backends/accel/schedule.py) sets them so that every instruction waits for the last earlier instruction of each
other unit whose buffer or DATA bytes it reads or writes and that wrote or read them; so any order the tokens allow
computes what the program order does. FINISH waits for every unit, and every token pushed has been popped by then.

The reference implementation is core/backends/accel/runtime/qt_isa.h (C, compiled with the
program); the cost model is core/backends/accel/cost.py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields, replace
from typing import Iterable

from core.backends.accel.compression import GROUP, RICE

WORDS = 16
INSTRUCTION_BYTES = 4 * WORDS

OPCODES = {"LOAD": 1, "STORE": 2, "GEMM": 3, "ALU": 4, "FINISH": 5}
BUFFERS = {"INP": 0, "WGT": 1, "ACC": 2, "ACC8": 3, "WGTV": 4}
ALU_OPS = {"MOV": 0, "ADD": 1, "MAX": 2, "MIN": 3, "RSHR": 4, "SHL": 5, "RMUL": 6, "RSHRA": 7, "LSL": 8, "MAXR": 9, "SUMR": 10,
           "LUT": 11, "CLZ": 12}
LUT_ENTRIES = 256  # LUT: a table of 256 int32s in ACC
RMUL_ROUND = (1, 62)  # RMUL's `round` field: the product of two int32s and its rounding constant fit int64
DOUBLING_HIGH_MUL = 31  # RMUL round = 31: gemmlowp's SaturatingRoundingDoublingHighMul
FLAG_CONST = 1  # LOAD: from the CONST segment
FLAG_COMPRESSED = 2  # LOAD: a compressed stream (core/backends/accel/compression.py)
FLAG_RESET = 1  # GEMM: zero the accumulators
FLAG_DEPTHWISE = 2  # GEMM: lanes of pixels times weight vectors
FLAG_IMM = 1  # ALU: immediate second operand
UNITS = 4  # concurrent units a machine may have (the token fields' bits)


@dataclass(frozen=True)
class Field:
    """One field of an instruction: `bits` bits of word `word` from bit `shift`; `signed` fields
    are two's complement."""

    name: str
    word: int
    shift: int
    bits: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1

    def pack(self, value: int) -> int:
        low, high = (-(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1) if self.signed else (0, self.mask)
        if not low <= value <= high:
            raise IsaError(f"{value} does not fit the {self.bits}-bit field {self.name}")
        return (value & self.mask) << self.shift

    def unpack(self, words: tuple[int, ...]) -> int:
        value = words[self.word] >> self.shift & self.mask
        return value - (1 << self.bits) if self.signed and value >> (self.bits - 1) else value


def _header() -> list[Field]:
    return [Field("opcode", 0, 0, 8), Field("sub", 0, 8, 8), Field("flags", 0, 16, 8)]


def _tokens() -> list[Field]:
    """The dependency tokens (a bit per unit, UNITS at most): the units to pop one token from, then push one to."""
    return [Field("pop", 0, 24, UNITS), Field("push", 0, 28, UNITS)]


def _strides(first_word: int, prefix: str) -> list[Field]:
    return [Field(f"{prefix}{axis}", first_word + k, 0, 32, signed=True) for k, axis in enumerate(("0", "1", "2"))]


def _box(word: int) -> list[Field]:
    """y, x (16 bits each) in `word`, c (16 bits) in the next."""
    return [Field("y", word, 0, 16), Field("x", word, 16, 16), Field("c", word + 1, 0, 16)]


def _loop() -> list[Field]:
    return [Field("e0", 4, 0, 16), Field("e1", 4, 16, 16), Field("e2", 5, 0, 16)]


# The one description of the binary format: encode, decode and qt_isa_layout.h come from it.
LAYOUT: dict[str, tuple[Field, ...]] = {
    "LOAD": (*_header(), *_tokens(), Field("dram", 1, 0, 32), Field("base", 2, 0, 32), *_box(3), Field("pad_top", 4, 16, 8),
             Field("pad_bottom", 4, 24, 8), Field("pad_left", 5, 0, 8), Field("pad_right", 5, 8, 8),
             Field("pad_value", 5, 16, 8, signed=True), *_strides(6, "s"), Field("stream", 9, 0, 32),
             Field("narrow", 10, 0, 16)),
    "STORE": (*_header(), *_tokens(), Field("dram", 1, 0, 32), Field("base", 2, 0, 32), *_box(3), *_strides(6, "s")),
    "GEMM": (*_header(), *_tokens(), Field("acc", 1, 0, 32), Field("inp", 2, 0, 32), Field("wgt", 3, 0, 32), *_loop(),
             *_strides(6, "acc_f"), *_strides(9, "inp_f"), *_strides(12, "wgt_f"), Field("lanes", 15, 0, 8),
             Field("acc_lane", 15, 8, 12), Field("inp_lane", 15, 20, 12)),
    "ALU": (*_header(), *_tokens(), Field("dst", 1, 0, 32), Field("src", 2, 0, 32), Field("imm", 3, 0, 32, signed=True), *_loop(),
            *_strides(6, "dst_f"), *_strides(9, "src_f"), Field("round", 12, 0, 8), Field("lanes", 12, 8, 8)),
    "FINISH": tuple(_header()),
}


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

    def values(self) -> dict[str, int]:
        return {"e0": self.e0, "e1": self.e1, "e2": self.e2}


@dataclass(frozen=True)
class Index:
    """An operand: base + i0 * f0 + i1 * f1 + i2 * f2."""

    base: int
    f0: int = 0
    f1: int = 0
    f2: int = 0

    def last(self, loop: Loop) -> int:
        return self.base + max(0, loop.e0 - 1) * self.f0 + max(0, loop.e1 - 1) * self.f1 + max(0, loop.e2 - 1) * self.f2

    def values(self, prefix: str) -> dict[str, int]:
        return {prefix: self.base, f"{prefix}_f0": self.f0, f"{prefix}_f1": self.f1, f"{prefix}_f2": self.f2}

    @classmethod
    def read(cls, values: dict[str, int], prefix: str) -> "Index":
        return cls(values[prefix], values[f"{prefix}_f0"], values[f"{prefix}_f1"], values[f"{prefix}_f2"])


def _box_values(size: tuple[int, int, int], strides: tuple[int, int, int]) -> dict[str, int]:
    return {"y": size[0], "x": size[1], "c": size[2], "s0": strides[0], "s1": strides[1], "s2": strides[2]}


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
    stream: int = 0  # a compressed load's stream bytes in CONST (flag COMPRESSED); 0: the units as they are
    narrow: int = 0  # bytes of a unit in DRAM, the other lanes pad_value (INP, ACC8); 0: a whole unit
    pop: int = 0  # dependency tokens: a bit per unit (the module docstring)
    push: int = 0

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
        """The bytes read from memory: a compressed load's stream, else its units'."""
        return self.stream or self.size[0] * self.size[1] * self.size[2] * (self.narrow or unit_bytes(self.buffer, block))

    def values(self) -> dict[str, int]:
        top, bottom, left, right = self.pads
        flags = (FLAG_CONST if self.const else 0) | (FLAG_COMPRESSED if self.stream else 0)
        return {"sub": BUFFERS[self.buffer], "flags": flags, "pop": self.pop, "push": self.push, "dram": self.dram, "base": self.base,
                **_box_values(self.size, self.strides), "pad_top": top, "pad_bottom": bottom, "pad_left": left,
                "pad_right": right, "pad_value": self.pad_value, "stream": self.stream, "narrow": self.narrow}

    @classmethod
    def read(cls, v: dict[str, int]) -> "Load":
        return cls(_name(BUFFERS, v["sub"], "buffer"), v["dram"], v["base"], (v["y"], v["x"], v["c"]), (v["s0"], v["s1"], v["s2"]),
                   (v["pad_top"], v["pad_bottom"], v["pad_left"], v["pad_right"]), v["pad_value"], bool(v["flags"] & FLAG_CONST),
                   stream=v["stream"] if v["flags"] & FLAG_COMPRESSED else 0, narrow=v["narrow"])

    def text(self) -> str:
        segment = "CONST" if self.const else "DATA"
        pads = f" pad={list(self.pads)}:{self.pad_value}" if any(self.pads) else ""
        packed = (f" compressed={self.stream}B" if self.stream else "") + (f" narrow={self.narrow}B" if self.narrow else "")
        return (f"LOAD   {self.buffer:<4} [{self.base}] <- {segment}[{self.dram}] size={list(self.size)} "
                f"stride={list(self.strides)}{pads}{packed}")


@dataclass(frozen=True)
class Store:
    dram: int
    base: int
    size: tuple[int, int, int]
    strides: tuple[int, int, int]
    note: str = ""
    pop: int = 0
    push: int = 0

    kind = "STORE"

    @property
    def units(self) -> int:
        return self.size[0] * self.size[1] * self.size[2]

    def dram_bytes(self, block: int) -> int:
        return self.units * block

    def values(self) -> dict[str, int]:
        return {"sub": 0, "flags": 0, "pop": self.pop, "push": self.push, "dram": self.dram, "base": self.base,
                **_box_values(self.size, self.strides)}

    @classmethod
    def read(cls, v: dict[str, int]) -> "Store":
        return cls(v["dram"], v["base"], (v["y"], v["x"], v["c"]), (v["s0"], v["s1"], v["s2"]))

    def text(self) -> str:
        return f"STORE  ACC  [{self.base}] -> DATA[{self.dram}] size={list(self.size)} stride={list(self.strides)}"


@dataclass(frozen=True)
class Lanes:
    """A depthwise GEMM's pixels per micro-op and their strides in ACC and INP vectors."""

    count: int
    acc: int
    inp: int


@dataclass(frozen=True)
class Gemm:
    loop: Loop
    acc: Index
    inp: Index
    wgt: Index
    reset: bool = False
    note: str = ""
    lanes: Lanes | None = None  # a depthwise GEMM (wgt then indexes B-int8 vectors); None: the block GEMM
    pop: int = 0  # dependency tokens: a bit per unit (the module docstring)
    push: int = 0

    kind = "GEMM"

    def values(self) -> dict[str, int]:
        lanes = self.lanes or Lanes(0, 0, 0)
        flags = (FLAG_RESET if self.reset else 0) | (FLAG_DEPTHWISE if self.lanes else 0)
        return {"sub": 0, "flags": flags, "pop": self.pop, "push": self.push, **self.loop.values(), **self.acc.values("acc"), **self.inp.values("inp"),
                **self.wgt.values("wgt"), "lanes": lanes.count, "acc_lane": lanes.acc, "inp_lane": lanes.inp}

    @classmethod
    def read(cls, v: dict[str, int]) -> "Gemm":
        lanes = Lanes(v["lanes"], v["acc_lane"], v["inp_lane"]) if v["flags"] & FLAG_DEPTHWISE else None
        return cls(Loop(v["e0"], v["e1"], v["e2"]), Index.read(v, "acc"), Index.read(v, "inp"), Index.read(v, "wgt"),
                   bool(v["flags"] & FLAG_RESET), lanes=lanes)

    def text(self) -> str:
        operands = f"acc={_index_text(self.acc)}" if self.reset else \
            f"acc={_index_text(self.acc)} inp={_index_text(self.inp)} wgt={_index_text(self.wgt)}"
        lanes = f" lanes={self.lanes.count}x(acc+{self.lanes.acc}, inp+{self.lanes.inp})" if self.lanes else ""
        name = "RESET " if self.reset else ("DW " if self.lanes else "")
        return f"GEMM   {name}loop={[self.loop.e0, self.loop.e1, self.loop.e2]} {operands}{lanes}"


@dataclass(frozen=True)
class Alu:
    op: str
    loop: Loop
    dst: Index
    src: Index | None = None  # None: the immediate
    imm: int = 0
    note: str = ""
    round: int = 0  # RMUL: the product's rounding shift (RMUL_ROUND); 0 for every other operation
    lanes: int = 0  # MAXR, SUMR, LUT: the source's lanes 0..lanes-1 (0: all B); 0 for every other operation
    pop: int = 0  # dependency tokens: a bit per unit (the module docstring)
    push: int = 0

    kind = "ALU"

    def values(self) -> dict[str, int]:
        return {"sub": ALU_OPS[self.op], "flags": FLAG_IMM if self.src is None else 0, "pop": self.pop, "push": self.push, "imm": self.imm,
                **self.loop.values(), **self.dst.values("dst"), **(self.src or Index(0)).values("src"), "round": self.round,
                "lanes": self.lanes}

    @classmethod
    def read(cls, v: dict[str, int]) -> "Alu":
        immediate, op = bool(v["flags"] & FLAG_IMM), _name(ALU_OPS, v["sub"], "ALU operation")
        return cls(op, Loop(v["e0"], v["e1"], v["e2"]), Index.read(v, "dst"), None if immediate else Index.read(v, "src"),
                   v["imm"] if immediate or op == "LUT" else 0, round=v["round"], lanes=v["lanes"])

    def text(self) -> str:
        operand = f"#{self.imm}" if self.src is None else _index_text(self.src)
        extra = (f" round={self.round}" if self.round else "") + (f" lanes={self.lanes}" if self.lanes else "")
        extra += f" table={self.imm}" if self.op == "LUT" else ""
        return (f"ALU    {self.op:<5} loop={[self.loop.e0, self.loop.e1, self.loop.e2]} dst={_index_text(self.dst)} "
                f"src={operand}{extra}")


@dataclass(frozen=True)
class Finish:
    note: str = ""

    kind = "FINISH"

    def values(self) -> dict[str, int]:
        return {"sub": 0, "flags": 0}

    @classmethod
    def read(cls, v: dict[str, int]) -> "Finish":
        return cls()

    def text(self) -> str:
        return "FINISH"


Instruction = Load | Store | Gemm | Alu | Finish
KINDS = {"LOAD": Load, "STORE": Store, "GEMM": Gemm, "ALU": Alu, "FINISH": Finish}


def lut_vectors(block: int) -> int:
    """The ACC vectors a LUT's table takes."""
    return -(-LUT_ENTRIES // block)


def unit_bytes(buffer: str, block: int) -> int:
    """Bytes of one unit of a buffer in DRAM: an int8 vector, an int8 block, an int32 vector."""
    return {"INP": block, "ACC8": block, "WGT": block * block, "WGTV": block, "ACC": 4 * block}[buffer]


def _name(table: dict[str, int], code: int, what: str) -> str:
    for name, value in table.items():
        if value == code:
            return name
    raise IsaError(f"unknown {what} {code}")


def _index_text(index: Index) -> str:
    factors = [index.f0, index.f1, index.f2]
    return f"{index.base}" + (f"+{factors}" if any(factors) else "")


def encode(instruction: Instruction) -> bytes:
    values = {"opcode": OPCODES[instruction.kind], **instruction.values()}
    words = [0] * WORDS
    for spec in LAYOUT[instruction.kind]:
        try:
            words[spec.word] |= spec.pack(int(values[spec.name]))
        except IsaError as error:
            raise IsaError(f"{instruction.text()}: {error}") from None
    return struct.pack(f"<{WORDS}I", *words)


def encode_all(instructions: Iterable[Instruction]) -> bytes:
    return b"".join(encode(instruction) for instruction in instructions)


def decode(data: bytes) -> list[Instruction]:
    """The instructions of a binary stream (notes are not encoded: they come back empty)."""
    if len(data) % INSTRUCTION_BYTES:
        raise IsaError(f"{len(data)} bytes: not a whole number of {INSTRUCTION_BYTES}-byte instructions")
    decoded: list[Instruction] = []
    for start in range(0, len(data), INSTRUCTION_BYTES):
        words = struct.unpack_from(f"<{WORDS}I", data, start)
        try:
            kind = _name(OPCODES, words[0] & 0xFF, "opcode")
        except IsaError as error:
            raise IsaError(f"instruction {start // INSTRUCTION_BYTES}: {error}") from None
        values = {spec.name: spec.unpack(words) for spec in LAYOUT[kind]}
        instruction = KINDS[kind].read(values)
        decoded.append(replace(instruction, pop=values["pop"], push=values["push"]) if "pop" in values else instruction)
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
        lines.append(f"{number:6d}  {instruction.text()}{_tokens_text(instruction)}{note}\n")
    return "".join(lines)


def _tokens_text(instruction: Instruction) -> str:
    """The tokens an instruction pops and pushes, by unit number: ` pop{0} push{2}`."""
    def units(mask: int) -> str:
        return ",".join(str(unit) for unit in range(UNITS) if mask >> unit & 1)
    pop, push = getattr(instruction, "pop", 0), getattr(instruction, "push", 0)
    return (f" pop{{{units(pop)}}}" if pop else "") + (f" push{{{units(push)}}}" if push else "")


def layout_header() -> str:
    """qt_isa_layout.h: the C decoder's view of LAYOUT and the code tables, generated so that the
    simulator can never read a field where the encoder did not put it."""
    lines = ["/* qt_isa_layout.h: generated by core/backends/accel/isa.py from its LAYOUT table; do not edit. */",
             "#ifndef QT_ISA_LAYOUT_H", "#define QT_ISA_LAYOUT_H", ""]
    for prefix, table in (("QT_OP", OPCODES), ("QT_BUF", BUFFERS), ("QT_ALU", ALU_OPS)):
        lines += [f"#define {prefix}_{name} {value}" for name, value in table.items()]
    lines += [f"#define QT_ISA_GROUP {GROUP} /* values per group of a compressed stream */",
              f"#define QT_ISA_RICE {RICE} /* a compressed stream's header bit: a Rice-coded run of groups */"]
    lines += [f"#define QT_FLAG_CONST {FLAG_CONST}", f"#define QT_FLAG_COMPRESSED {FLAG_COMPRESSED}", f"#define QT_FLAG_RESET {FLAG_RESET}", f"#define QT_FLAG_DEPTHWISE {FLAG_DEPTHWISE}",
              f"#define QT_FLAG_IMM {FLAG_IMM}", f"#define QT_ISA_MAX_UNITS {UNITS}", ""]
    for kind, specs in LAYOUT.items():
        for spec in specs:
            name = f"QT_{kind}_{spec.name.upper()}"
            lines.append(f"#define {name}_WORD {spec.word}\n#define {name}_SHIFT {spec.shift}\n#define {name}_BITS {spec.bits}")
    lines += ["", "#endif /* QT_ISA_LAYOUT_H */", ""]
    return "\n".join(lines)
