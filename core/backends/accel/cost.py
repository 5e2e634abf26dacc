"""The target's cost model, the one every estimate uses. A DMA transfer costs its set-up (`cycles.load` /
`cycles.store`) and the latency of the memory area it reads or writes, then its bytes at that area's bytes per cycle: a
LOAD from the CONST segment reads where the target places its weights, any other LOAD or STORE where it places its
activations (`accelerator.memories`, `accelerator.placement`). GEMM and ALU cost their cycles per micro-op (one loop
iteration), an ALU operation `cycles.alu_<op>` where the target gives it (a 32 x 32-bit RMUL is dearer than an ADD), else
`cycles.alu`; FINISH costs `cycles.sync` (0 if not given). A host layer costs the target's `host.cycles_per_mac` per
multiply-accumulate and `host.cycles_per_byte` per byte it reads and writes (a pack or unpack: per byte moved).
Instructions run one after another (no overlap of DMA and compute): an upper bound."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Mapping

from core.backends.accel.isa import ALU_OPS, OPCODES, Alu, Gemm, Instruction, Load, Store
from core.backends.accel.target import ROLES, Accelerator, HostCost, Memory


@dataclass(frozen=True)
class CostModel:
    cycles: Mapping[str, int]
    memories: Mapping[str, Memory]  # by role: "weights", "activations"
    host: HostCost
    block: int

    @classmethod
    def of(cls, accelerator: Accelerator) -> "CostModel":
        return cls(accelerator.cycles, {role: accelerator.memory_of(role) for role in ROLES}, accelerator.host,
                   accelerator.channel_block)

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

    def statistics(self, instructions: list[Instruction]) -> dict[str, float]:
        """Counts by kind (ALU also by operation), micro-ops, DMA bytes and estimated cycles."""
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
        stats["cycles"] = float(sum(by_kind.values()))
        return stats
