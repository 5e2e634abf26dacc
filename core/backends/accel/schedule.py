"""The concurrent schedule of an accelerator function: which on-chip buffer vectors and DATA bytes each instruction reads
and writes, and the dependency tokens (isa.py's module docstring) that let the target's units run at once while
computing exactly what the program order computes.

An instruction waits for the last earlier instruction of each other unit that conflicts with it (one writes what the
other reads or writes: a read after a write, a write after a read, a write after a write), unless an earlier instruction
of its own unit already waited for that one or a later one of that unit (units run in order, so that wait covers it).
Each wait is one token: pushed by the instruction waited for, popped by the waiting one; tokens between two units are
pushed and popped in program order, so a queue's count is all the hardware needs. Every token goes forward in program
order, so the program order is itself a schedule the tokens allow and no order a unit can take deadlocks.

Ranges are conservative: an operand's whole span over its loop nest (a strided operand may skip vectors inside it). An
extra wait costs time, never a byte.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from core.backends.accel.isa import UNITS, Alu, Finish, Gemm, Index, Instruction, Load, Loop, Store, lut_vectors, unit_bytes

BUFFER_SPACE = {"INP": "INP", "WGT": "WGT", "WGTV": "WGT", "ACC": "ACC", "ACC8": "ACC"}


@dataclass(frozen=True)
class Access:
    """[low, high) of one space ("INP", "ACC": vectors; "WGT": B-int8 vectors; "DATA": bytes), read or written."""

    space: str
    low: int
    high: int
    write: bool

    def conflicts(self, other: "Access") -> bool:
        return (self.space == other.space and (self.write or other.write) and self.low < other.high
                and other.low < self.high)


def _span(index: Index, loop: Loop, extra: int = 0) -> tuple[int, int]:
    """[low, high) of base + i . f over the loop nest, `extra` units past its highest."""
    low = high = index.base
    for extent, factor in ((loop.e0, index.f0), (loop.e1, index.f1), (loop.e2, index.f2)):
        reach = (extent - 1) * factor
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + 1 + extra


def _dram(dram: int, size: tuple[int, int, int], strides: tuple[int, int, int], unit: int) -> tuple[int, int]:
    low, high = _span(Index(0, *strides), Loop(*size))
    return dram + low * unit, dram + high * unit


def accesses(instruction: Instruction, block: int) -> tuple[Access, ...]:
    """What the instruction reads and writes (CONST, read only, is left out)."""
    if isinstance(instruction, Load):
        scale = block if instruction.buffer == "WGT" else 1
        written = Access(BUFFER_SPACE[instruction.buffer], instruction.base * scale, (instruction.base + instruction.units) * scale, True)
        if instruction.const or 0 in instruction.size:
            return (written,)
        unit = instruction.narrow or unit_bytes(instruction.buffer, block)
        return (written, Access("DATA", *_dram(instruction.dram, instruction.size, instruction.strides, unit), False))
    if isinstance(instruction, Store):
        return (Access("ACC", instruction.base, instruction.base + instruction.units, False),
                Access("DATA", *_dram(instruction.dram, instruction.size, instruction.strides, block), True))
    if isinstance(instruction, Gemm):
        if instruction.loop.count == 0:
            return ()
        lanes = instruction.lanes
        acc = Access("ACC", *_span(instruction.acc, instruction.loop, (lanes.count - 1) * lanes.acc if lanes else 0), True)
        if instruction.reset:
            return (acc,)
        inp = Access("INP", *_span(instruction.inp, instruction.loop, (lanes.count - 1) * lanes.inp if lanes else 0), False)
        low, high = _span(instruction.wgt, instruction.loop)
        scale = 1 if lanes else block  # a depthwise GEMM reads B-int8 vectors, the block GEMM B x B blocks
        return acc, inp, Access("WGT", low * scale, high * scale, False)
    if isinstance(instruction, Alu):
        if instruction.loop.count == 0:
            return ()
        dst = Access("ACC", *_span(instruction.dst, instruction.loop), True)
        if instruction.src is None:
            return (dst,)
        src = Access("ACC", *_span(instruction.src, instruction.loop), False)
        if instruction.op == "LUT":
            return dst, src, Access("ACC", instruction.imm, instruction.imm + lut_vectors(block), False)
        return dst, src
    return ()


def _bits(mask: int) -> list[int]:
    return [unit for unit in range(UNITS) if mask >> unit & 1]


def insert_tokens(instructions: list[Instruction], unit_of: Mapping[str, int], block: int) -> list[Instruction]:
    """The instructions with their tokens set (any already there are replaced): the module docstring's waits. `unit_of`
    maps each opcode but FINISH to its unit's number (< UNITS); one unit: no tokens."""
    units = max(unit_of.values()) + 1
    if units > UNITS:
        raise ValueError(f"{units} units; the instruction encodes at most {UNITS}")
    history: list[list[tuple[int, tuple[Access, ...]]]] = [[] for _ in range(units)]  # per unit: (position, accesses)
    waited = [[-1] * units for _ in range(units)]  # [from][to]: the latest position of `from` that `to` waited for
    pops: dict[int, int] = {}
    pushes: dict[int, int] = {}
    for position, instruction in enumerate(instructions):
        if isinstance(instruction, Finish):
            continue
        unit = unit_of[instruction.kind]
        mine = accesses(instruction, block)
        for other in range(units):
            if other == unit:
                continue
            for earlier, theirs in reversed(history[other]):
                if earlier <= waited[other][unit]:
                    break
                if any(a.conflicts(b) for a in mine for b in theirs):
                    waited[other][unit] = earlier
                    pops[position] = pops.get(position, 0) | 1 << other
                    pushes[earlier] = pushes.get(earlier, 0) | 1 << unit
                    break
        history[unit].append((position, mine))
    return [instruction if isinstance(instruction, Finish)
            else replace(instruction, pop=pops.get(position, 0), push=pushes.get(position, 0))
            for position, instruction in enumerate(instructions)]
