"""The target's cost model, the one every estimate uses. A DMA transfer costs its set-up (`cycles.load` /
`cycles.store`) and the latency of the memory area it reads or writes, then its bytes at that area's bytes per cycle: a
LOAD from the CONST segment reads where the target places its weights, any other LOAD or STORE where it places its
activations (`accelerator.memories`, `accelerator.placement`). GEMM and ALU cost their cycles per micro-op (one loop
iteration), an ALU operation `cycles.alu_<op>` where the target gives it (a 32 x 32-bit RMUL is dearer than an ADD), else
`cycles.alu`; FINISH costs `cycles.sync` (0 if not given). A host layer costs the target's `host.cycles_per_mac` per
multiply-accumulate and `host.cycles_per_byte` per byte it reads and writes (a pack or unpack: per byte moved).
The target's units (`accelerator.units`) run at once: an instruction starts when its unit has finished the one before it
and the instructions it pops a token from have finished (isa.py's dependency tokens), and FINISH when every unit has
finished; the estimate is the last end, the schedule's critical path. Where the target fetches its program
(`accelerator.fetch_program`), the instruction streams are read in order from the memory holding `program` (its latency
once, then INSTRUCTION_BYTES an instruction at its bytes per cycle), and an instruction starts no earlier than it is read. A function's layers end in order; a layer's
`cycles` are the time its last instruction ends after the layer before it (so the layers' cycles add up to the
function's), and `cycles_<kind>` the busy cycles of its instructions of that kind (which overlap). One unit: every
instruction after the one before it, the sum of their cycles. Memories are not shared between transfers: two DMAs at
once each run at their memory's full rate."""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Mapping

from core.backends.accel.isa import ALU_OPS, INSTRUCTION_BYTES, OPCODES, UNITS, Alu, Finish, Gemm, Instruction, Load, Store
from core.backends.accel.target import ROLES, Accelerator, HostCost, Memory


@dataclass(frozen=True)
class CostModel:
    cycles: Mapping[str, int]
    memories: Mapping[str, Memory]  # by role: "weights", "activations"
    host: HostCost
    block: int
    unit_of: Mapping[str, int]  # opcode -> unit number (Accelerator.unit_of)
    fetch: Memory | None = None  # where the instruction streams are read from as the units run (None: not costed)

    @classmethod
    def of(cls, accelerator: Accelerator) -> "CostModel":
        return cls(accelerator.cycles, {role: accelerator.memory_of(role) for role in ROLES}, accelerator.host,
                   accelerator.channel_block, accelerator.unit_of, accelerator.memory_of("program") if accelerator.fetch_program else None)

    def fetched(self, position: int) -> float:
        """When the instruction at `position` of a stream has been read (0: the units have it from the start)."""
        if self.fetch is None:
            return 0.0
        return self.fetch.latency + (position + 1) * INSTRUCTION_BYTES / self.fetch.bytes_per_cycle

    def dma(self, kind: str, transfers: int, dram_bytes: float, role: str = "activations") -> float:
        """`transfers` DMA instructions of `kind` ("load" or "store") moving `dram_bytes` together from or to the memory
        holding `role` ("weights" or "activations")."""
        memory = self.memories[role]
        return transfers * (self.cycles[kind] + memory.latency) + dram_bytes / memory.bytes_per_cycle

    def host_layer(self, macs: float, moved_bytes: float) -> float:
        """A host layer of `macs` multiply-accumulates reading and writing `moved_bytes`, in accelerator cycles."""
        return macs * self.host.cycles_per_mac + moved_bytes * self.host.cycles_per_byte

    def compute(self, kind: str, micro_ops: int) -> float:
        """`micro_ops` loop iterations of `kind` ("gemm", "alu" or an "alu_<op>" the target prices)."""
        return micro_ops * self.cycles[kind]

    def alu_kind(self, op: str) -> str:
        """The cycles key an ALU operation is priced by."""
        specific = f"alu_{op.lower()}"
        return specific if specific in self.cycles else "alu"

    def instruction(self, instruction: Instruction) -> float:
        """One instruction, in whole cycles."""
        if isinstance(instruction, (Load, Store)):
            role = "weights" if isinstance(instruction, Load) and instruction.const else "activations"
            return math.ceil(self.dma(instruction.kind.lower(), 1, instruction.dram_bytes(self.block), role))
        if isinstance(instruction, Alu):
            return self.compute(self.alu_kind(instruction.op), instruction.loop.count)
        if isinstance(instruction, Gemm):
            return self.compute("gemm", instruction.loop.count)
        return self.cycles.get("sync", 0)

    def timeline(self, instructions: list[Instruction]) -> list[float]:
        """Each instruction's end, the units running at once as their tokens allow (a token whose push is not among
        `instructions`, as in one layer's part of a function, is there from the start)."""
        free = [0.0] * UNITS  # when each unit has finished its last instruction
        queues = {(a, b): deque() for a in range(UNITS) for b in range(UNITS)}  # [from, to]: the pushes' ends
        ends = []
        for position, instruction in enumerate(instructions):
            if isinstance(instruction, Finish):
                end = max([*free, *ends, self.fetched(position)]) + self.instruction(instruction)
                free = [end] * UNITS
                ends.append(end)
                continue
            unit = self.unit_of[instruction.kind]
            start = max(free[unit], self.fetched(position))
            for other in range(UNITS):
                if instruction.pop >> other & 1 and queues[other, unit]:
                    start = max(start, queues[other, unit].popleft())
            end = free[unit] = start + self.instruction(instruction)
            for other in range(UNITS):
                if instruction.push >> other & 1:
                    queues[unit, other].append(end)
            ends.append(end)
        return ends

    def statistics(self, instructions: list[Instruction]) -> dict[str, float]:
        """Counts by kind (ALU also by operation), micro-ops, DMA bytes, each kind's busy cycles (`cycles_<kind>`), their
        sum (`cycles_serial`) and the estimate with the units at once (`cycles`)."""
        ends = self.timeline(instructions)
        return self._counts(instructions, max(ends, default=0.0))

    def layer_statistics(self, instructions: list[Instruction], segments: dict[str, tuple[int, int]]) -> dict[str, dict[str, float]]:
        """Per layer of one function (its (first instruction, count)): statistics() of its instructions, with `cycles` the
        time its last one ends after the layer before it, on the function's timeline."""
        ends = self.timeline(instructions)
        per_layer, finished = {}, 0.0
        for layer, (start, count) in segments.items():
            end = max([finished, *ends[start : start + count]])
            per_layer[layer] = self._counts(instructions[start : start + count], end - finished)
            finished = end
        return per_layer

    def _counts(self, instructions: list[Instruction], elapsed: float) -> dict[str, float]:
        kinds = Counter(instruction.kind for instruction in instructions)
        stats: dict[str, float] = {f"count_{kind.lower()}": kinds.get(kind, 0) for kind in OPCODES}
        for op in ALU_OPS:
            stats[f"count_alu_{op.lower()}"] = sum(1 for i in instructions if isinstance(i, Alu) and i.op == op)
        stats["count_gemm_reset"] = sum(1 for i in instructions if isinstance(i, Gemm) and i.reset)
        stats["instructions"] = len(instructions)
        stats["gemm_micro_ops"] = sum(i.loop.count for i in instructions if isinstance(i, Gemm))
        stats["alu_micro_ops"] = sum(i.loop.count for i in instructions if isinstance(i, Alu))
        stats["load_bytes"] = sum(i.dram_bytes(self.block) for i in instructions if isinstance(i, Load))
        stats["store_bytes"] = sum(i.dram_bytes(self.block) for i in instructions if isinstance(i, Store))
        by_kind: Counter = Counter()
        for instruction in instructions:
            by_kind[instruction.kind] += self.instruction(instruction)
        for kind in OPCODES:
            stats[f"cycles_{kind.lower()}"] = float(by_kind.get(kind, 0))
        stats["cycles_serial"] = float(sum(by_kind.values()))
        stats["cycles"] = float(elapsed)
        return stats
