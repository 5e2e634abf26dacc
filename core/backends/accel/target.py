"""The accelerator a target deploys to, described as data (the `accelerator:` section of
conf/target/<name>.yaml): the fused patterns it executes and their constraints, the IR
operations that always stay on the host, its GEMM block, on-chip buffers, blocked data layout,
shifter range and instruction costs (seed 004: a VTA-like int8 accelerator behind a DL compiler).

`AcceleratorSpec` is that section's schema as plain dataclasses (the Hydra structured config
of `target.accelerator`: a typo or a wrong type fails at composition). `Accelerator.from_mapping`
builds the frozen description from the plain data and makes every check the types cannot,
once, naming the key (`accelerator.patterns[2].max_kernel.height`); `accelerator_of` does that
for a whole target mapping (None when it has no accelerator: every layer then runs on the host).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Optional

import yaml

from core.backends.accel.constraints import CONSTRAINTS, PatternSpec
from core.backends.accel.isa import ALU_OPS, OPCODES, UNITS
from core.ir.schema import branches as schema_branches
from core.ir.op import DIALECTS
from core.ir.records import BASE_DIALECT
from core.ir.ops import OPS
from core.quantize.schemes import SCHEMES

SECTION = "accelerator"
# what a program keeps in memory, each placed in one of the target's memory areas: the tiled weights and biases (the CONST
# segment the DMA reads), the activations (the DATA segment it reads and writes), the instruction streams
ROLES = ("weights", "activations", "program")
ACCELERATED_SCHEMES = tuple(name for name, scheme in SCHEMES.items() if scheme.accelerated)
REQUIRED_CYCLES = ("load", "store", "gemm", "alu")
UNIT_OPCODES = tuple(opcode for opcode in OPCODES if opcode != "FINISH")  # FINISH waits for every unit
SERIAL = {"serial": list(UNIT_OPCODES)}  # one unit: every instruction after the one before it


# --- the `accelerator:` section's schema (Hydra structured config) -------------------------------


@dataclass
class GemmBlockSpec:
    batch: int = 1
    block_in: int = 16
    block_out: int = 16


@dataclass
class BuffersSpec:  # bytes
    input: int = 32768
    weight: int = 262144
    accumulator: int = 131072


@dataclass
class ShiftRangeSpec:
    min: int = 0
    max: int = 31


@dataclass
class MemorySpec:
    bytes_per_cycle: float = 8.0  # what the DMA moves per cycle once a transfer has started
    latency: int = 0  # cycles before a transfer's first byte
    size: int = 1 << 24  # bytes


@dataclass
class PlacementSpec:  # a memory area's name for each of ROLES
    weights: str = "dram"
    activations: str = "dram"
    program: str = "dram"


@dataclass
class HostSpec:  # the host processor running what the accelerator does not, in accelerator cycles
    cycles_per_mac: float = 1.0
    cycles_per_byte: float = 1.0  # per byte a layer reads and writes (a pack or unpack: per byte moved)


@dataclass
class AcceleratorSpec:
    """A VTA-like int8 accelerator as data (conf/target/accel.yaml); `Accelerator.from_mapping` checks it."""

    patterns: list[PatternSpec]
    gemm_block: GemmBlockSpec
    buffers: BuffersSpec
    layout: list[str]
    shift_range: ShiftRangeSpec
    cycles: dict[str, int]
    memories: dict[str, MemorySpec]
    placement: PlacementSpec
    host: HostSpec
    bias_in_accumulators: bool = True
    weight_compression: bool = False
    double_buffering: bool = False
    fetch_program: bool = False
    # None: one unit (SERIAL); a default mapping would merge with the target's own units
    units: Optional[dict[str, list[str]]] = None


# --- the checked description ------------------------------------------------------------------------


class AcceleratorError(ValueError):
    """An accelerator description that partition or code generation could not honour."""


def ir_operations(dialect: str = BASE_DIALECT) -> tuple[str, ...]:
    """The operations of an IR dialect, the base dialect's (TF2IR's) in the order its JSON Schema lists them."""
    if dialect == BASE_DIALECT:
        return tuple(operation for operation in schema_branches() if operation in OPS)
    return tuple(DIALECTS[dialect])


def constraint_operations(constraint: str, dialect: str = "tf2ir") -> tuple[str, ...]:
    """The operations of `dialect` whose records carry what `constraint` reads."""
    return tuple(op for op in ir_operations(dialect) if CONSTRAINTS[constraint].applies_to(DIALECTS[dialect][op].record, dialect))


@dataclass(frozen=True)
class Pattern:
    """A fused group the accelerator runs: the IR operation(s) whose layers it matches and the
    constraints a layer must meet, by key of core/backends/accel/constraints.py's CONSTRAINTS (in their order)."""

    name: str
    operations: tuple[str, ...]
    constraints: tuple[tuple[str, Any], ...] = ()

    def refusals(self, layer) -> list[str]:
        """Why the layer's record breaks the pattern's constraints: one text each."""
        texts = (CONSTRAINTS[key].refusal(value, layer) for key, value in self.constraints)
        return [text for text in texts if text is not None]


@dataclass(frozen=True)
class GemmBlock:
    """One GEMM instruction: a (batch x block_in) int8 input times a (block_in x block_out) int8
    weight block, accumulated in int32."""

    batch: int
    block_in: int
    block_out: int


@dataclass(frozen=True)
class Buffers:
    """On-chip buffer sizes in bytes."""

    input: int
    weight: int
    accumulator: int


@dataclass(frozen=True)
class Memory:
    """A memory area the DMA reads or writes: a transfer costs `latency` cycles, then its bytes at `bytes_per_cycle`."""

    bytes_per_cycle: float
    latency: int
    size: int  # bytes


@dataclass(frozen=True)
class HostCost:
    """The host processor's work in accelerator cycles: per multiply-accumulate and per byte read or written."""

    cycles_per_mac: float
    cycles_per_byte: float


@dataclass(frozen=True)
class Accelerator:
    name: str  # the target's name: accelerator functions are called <name>_func_<k>
    # what runs on the accelerator, the one declaration (as PyTorch's BackendConfig): an operation no pattern names runs
    # on the host; a pattern never names one the lowerings declare host-only (core/backends/accel/ops: host_only_errors)
    patterns: tuple[Pattern, ...]
    gemm_block: GemmBlock
    buffers: Buffers
    layout: tuple[str, ...]  # the blocked activation layout, e.g. ("H", "W", "C/16", "16")
    shift_range: tuple[int, int]  # shift amounts the ALU's shifts encode, inclusive
    cycles: Mapping[str, int] = field(hash=False)  # per instruction kind
    memories: Mapping[str, Memory] = field(hash=False)  # by name
    placement: Mapping[str, str] = field(hash=False)  # ROLES -> a memory's name
    host: HostCost
    # seed 004 Fig. 4: (b) true: a tile's accumulators start as its biases (a DMA, no reset, no ALU ADD);
    # (a) false: a GEMM RESET, then the biases added by the vector ALU after the GEMMs
    bias_in_accumulators: bool = True
    dialect: str = "tf2ir"  # the IR dialect whose operations its patterns name
    # the DMA decodes compressed weights as it loads them (core/backends/accel/compression.py): a layer whose weights are
    # loaded whole is stored compressed where that is smaller
    weight_compression: bool = False
    # the width of the values its buffers, GEMM and ALU hold: a layer of wider activations (TFLite's 16x8 mode) runs on
    # the host
    activation_bits: int = 8
    # the units running at once, each its opcodes in program order, synchronised by dependency tokens (isa.py); one unit:
    # every instruction after the one before it
    units: tuple[tuple[str, tuple[str, ...]], ...] = tuple((name, tuple(opcodes)) for name, opcodes in SERIAL.items())
    # a conv's tiles alternate between the halves of INP and ACC, and its layers' weights between the halves of WGT, so
    # that with several units a tile's loads, the tile before's computation and the one before that's store overlap, and
    # a layer's weights load during the layer before (where its smallest tile fits a half; else it takes the whole buffers)
    double_buffering: bool = False
    # the units read their instruction streams from the memory holding `program` as they run (its latency once, then its
    # bytes per cycle): an instruction starts no earlier than its bytes are read
    fetch_program: bool = False

    @property
    def unit_of(self) -> dict[str, int]:
        """Each opcode but FINISH: the number of the unit running it."""
        return {opcode: number for number, (_, opcodes) in enumerate(self.units) for opcode in opcodes}

    @property
    def channel_block(self) -> int:
        """Channels per block of the accelerator layout (= the GEMM block's in and out)."""
        return self.gemm_block.block_in

    def memory_of(self, role: str) -> Memory:
        """The memory area holding `role` (one of ROLES)."""
        return self.memories[self.placement[role]]

    def patterns_for(self, operation: str) -> tuple[Pattern, ...]:
        return tuple(pattern for pattern in self.patterns if operation in pattern.operations)

    def packed_bytes(self, shape: list[int]) -> int:
        """Bytes of an int8 tensor of shape [..., C] in the accelerator layout: C padded to whole blocks."""
        block = self.channel_block
        return math.prod(shape[:-1]) * -(-shape[-1] // block) * block

    def to_dict(self) -> dict[str, Any]:
        return {
            "patterns": [{"name": p.name, "operations": list(p.operations),
                          **{key: CONSTRAINTS[key].plain(value) for key, value in p.constraints}} for p in self.patterns],
            "gemm_block": dataclasses.asdict(self.gemm_block),
            "buffers": dataclasses.asdict(self.buffers),
            "layout": list(self.layout),
            "shift_range": {"min": self.shift_range[0], "max": self.shift_range[1]},
            "cycles": dict(self.cycles),
            "memories": {name: dataclasses.asdict(memory) for name, memory in self.memories.items()},
            "placement": dict(self.placement),
            "host": dataclasses.asdict(self.host),
            "bias_in_accumulators": self.bias_in_accumulators,
            "weight_compression": self.weight_compression,
            "units": {name: list(opcodes) for name, opcodes in self.units},
            "double_buffering": self.double_buffering,
            "fetch_program": self.fetch_program,
        }

    @classmethod
    def from_mapping(cls, data: Any, name: str, origin: str = "target", dialect: str = "tf2ir") -> "Accelerator":
        """The description in `data` (the `accelerator:` section as plain data: dicts, lists,
        numbers), validated against the operations of the IR `dialect` it runs. `origin` names where
        it came from in error messages."""
        read = _Reader(origin, dialect)
        section = read.mapping(data, SECTION, required=("patterns", "gemm_block", "buffers", "layout", "shift_range", "cycles",
                                                        "memories", "placement", "host"), optional=("bias_in_accumulators", "weight_compression", "units", "double_buffering",
                                                                  "fetch_program"))
        operations = ir_operations(dialect)
        patterns = tuple(read.pattern(item, f"{SECTION}.patterns[{i}]", operations)
                         for i, item in enumerate(read.sequence(section["patterns"], f"{SECTION}.patterns", minimum=1)))
        names = [pattern.name for pattern in patterns]
        for i, pattern_name in enumerate(names):
            if pattern_name in names[:i]:
                raise read.error(f"{SECTION}.patterns[{i}].name", f"{pattern_name!r} names two patterns")
        gemm_block = GemmBlock(**read.integers(section["gemm_block"], f"{SECTION}.gemm_block", GemmBlock, minimum=1))
        if gemm_block.block_out != gemm_block.block_in:
            raise read.error(f"{SECTION}.gemm_block.block_out",
                             f"{gemm_block.block_out} differs from block_in {gemm_block.block_in}: a layer's packed output is the "
                             f"next layer's packed input, so both use one channel block")
        buffers = Buffers(**read.integers(section["buffers"], f"{SECTION}.buffers", Buffers, minimum=1))
        layout = read.layout(section["layout"], f"{SECTION}.layout", gemm_block.block_in)
        shift_range = tuple(read.integers(section["shift_range"], f"{SECTION}.shift_range", ShiftRangeSpec, minimum=0).values())
        if shift_range[0] > shift_range[1]:
            raise read.error(f"{SECTION}.shift_range", f"min {shift_range[0]} > max {shift_range[1]}")
        cycles_data = read.mapping(section["cycles"], f"{SECTION}.cycles", required=REQUIRED_CYCLES, open_ended=True)
        priced = (*REQUIRED_CYCLES, "sync", *(f"alu_{op.lower()}" for op in ALU_OPS))
        for key in cycles_data:
            if key not in priced:
                raise read.error(f"{SECTION}.cycles.{key}", f"unknown key; expected {', '.join(priced)}")
        cycles = MappingProxyType({str(k): read.integer(v, f"{SECTION}.cycles.{k}", minimum=1) for k, v in cycles_data.items()})
        memories = read.memories(section["memories"], f"{SECTION}.memories")
        placement = read.mapping(section["placement"], f"{SECTION}.placement", required=ROLES)
        for role in ROLES:
            if placement[role] not in memories:
                raise read.error(f"{SECTION}.placement.{role}", f"{placement[role]!r} is not a memory of {SECTION}.memories; "
                                                                f"expected one of {', '.join(memories)}")
        host_data = read.mapping(section["host"], f"{SECTION}.host", required=("cycles_per_mac", "cycles_per_byte"))
        host = HostCost(**{key: read.number(host_data[key], f"{SECTION}.host.{key}", minimum=0.0) for key in host_data})
        bias_in_accumulators = read.boolean(section.get("bias_in_accumulators", True), f"{SECTION}.bias_in_accumulators")
        weight_compression = read.boolean(section.get("weight_compression", False), f"{SECTION}.weight_compression")
        units = read.units(SERIAL if section.get("units") is None else section["units"], f"{SECTION}.units")
        double_buffering = read.boolean(section.get("double_buffering", False), f"{SECTION}.double_buffering")
        fetch_program = read.boolean(section.get("fetch_program", False), f"{SECTION}.fetch_program")
        return cls(name, patterns, gemm_block, buffers, layout, shift_range, cycles, MappingProxyType(memories),
                   MappingProxyType({role: str(placement[role]) for role in ROLES}), host, bias_in_accumulators, dialect,
                   weight_compression=weight_compression, units=units, double_buffering=double_buffering, fetch_program=fetch_program)


def accelerator_of(target: Mapping[str, Any], origin: str = "target") -> Accelerator | None:
    """The accelerator of a target given as a plain mapping (a conf/target file's content);
    None when the target has no `accelerator` section (or it is null)."""
    if not isinstance(target, Mapping):
        raise AcceleratorError(f"{origin}: expected a mapping of target settings, got {type(target).__name__}")
    section = target.get(SECTION)
    if section is None:
        return None
    # the accelerator computes int8: TF2IR's power-of-two arithmetic (shifts) or TFLite's (RMUL/RSHRA, zero points); a
    # scheme of wider activations leaves those layers to the host (core/backends/accel/partition.py: width_violations)
    scheme = scheme_settings(target)
    if scheme["name"] not in ACCELERATED_SCHEMES:
        raise AcceleratorError(f"{origin}: scheme={scheme['name']!r}: an accelerator runs {' or '.join(ACCELERATED_SCHEMES)}; "
                               f"choose one of them (target/scheme=...)")
    native = SCHEMES[scheme["name"]].bits  # its own width (TFLite's 16x8 mode's: 16, whose layers the host runs)
    if scheme.get("bits", native) != native:
        raise AcceleratorError(f"{origin}: scheme.bits={scheme['bits']!r}: a target with an accelerator computes {scheme['name']}'s "
                               f"own {native} bits; set bits: {native}")
    dialect = SCHEMES[scheme["name"]].ir_dialect
    return Accelerator.from_mapping(section, name=str(target.get("name", "accel")), origin=origin, dialect=dialect)


def scheme_settings(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scheme settings of a target given as a plain mapping: its composed `scheme` section, or, in a conf/target
    file as written, the `scheme` its defaults list chooses (pow2_symmetric when it names none)."""
    scheme = target.get("scheme")
    if isinstance(scheme, Mapping):
        return scheme
    chosen = [entry["scheme"] for entry in target.get("defaults", []) if isinstance(entry, Mapping) and "scheme" in entry]
    return {"name": scheme if isinstance(scheme, str) else (chosen[0] if chosen else "pow2_symmetric")}


def load_target(path: str | Path) -> tuple[dict[str, Any], Accelerator | None]:
    """A conf/target/*.yaml file: its settings, and its accelerator (None without one)."""
    path = Path(path)
    data = yaml.safe_load(path.read_text())
    return data, accelerator_of(data, origin=str(path))


class _Reader:
    """Typed reads of plain data, each error naming the key."""

    def __init__(self, origin: str, dialect: str = "tf2ir"):
        self.origin, self.dialect = origin, dialect

    def error(self, key: str, problem: str) -> AcceleratorError:
        return AcceleratorError(f"{self.origin}: {key}: {problem}")

    def mapping(self, value: Any, key: str, required: tuple[str, ...] = (), optional: tuple[str, ...] = (),
                open_ended: bool = False) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping with keys {', '.join(required + optional)}, got {value!r}")
        missing = [k for k in required if k not in value]
        if missing:
            raise self.error(f"{key}.{missing[0]}", "missing")
        unknown = [k for k in value if k not in required + optional]
        if unknown and not open_ended:
            raise self.error(f"{key}.{unknown[0]}", f"unknown key; expected {', '.join(required + optional)}")
        return value

    def sequence(self, value: Any, key: str, minimum: int = 0) -> list[Any]:
        if not isinstance(value, (list, tuple)) or len(value) < minimum:
            raise self.error(key, f"expected a list of at least {minimum} item(s), got {value!r}")
        return list(value)

    def integer(self, value: Any, key: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{value} is below {minimum}")
        return value

    def integers(self, value: Any, key: str, record: type, minimum: int | None = None) -> dict[str, int]:
        """A mapping of exactly `record`'s fields (a dataclass), each an integer, in the record's order."""
        names = tuple(spec.name for spec in dataclasses.fields(record))
        data = self.mapping(value, key, required=names)
        return {name: self.integer(data[name], f"{key}.{name}", minimum=minimum) for name in names}

    def number(self, value: Any, key: str, minimum: float = 0.0, above: bool = False) -> float:
        """A number at least `minimum` (above it where `above`)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < minimum or (above and value == minimum):
            raise self.error(key, f"{value!r} is not a number {'above' if above else 'of at least'} {minimum:g}")
        return float(value)

    def memories(self, value: Any, key: str) -> dict[str, Memory]:
        """Memory areas by name, each {bytes_per_cycle, latency, size}."""
        if not isinstance(value, Mapping) or not value:
            raise self.error(key, f"expected a mapping of memory areas by name, each with bytes_per_cycle, latency and size, got {value!r}")
        areas = {}
        for name, area in value.items():
            where = f"{key}.{name}"
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                raise self.error(where, "expected a name of letters, digits and '_'")
            data = self.mapping(area, where, required=("bytes_per_cycle", "latency", "size"))
            areas[name] = Memory(self.number(data["bytes_per_cycle"], f"{where}.bytes_per_cycle", above=True),
                                 self.integer(data["latency"], f"{where}.latency", minimum=0),
                                 self.integer(data["size"], f"{where}.size", minimum=1))
        return areas

    def units(self, value: Any, key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Units by name, each a list of opcodes: every opcode but FINISH in exactly one, at most UNITS units."""
        if not isinstance(value, Mapping) or not 1 <= len(value) <= UNITS:
            raise self.error(key, f"expected a mapping of 1 to {UNITS} units by name, each a list of the opcodes it runs "
                                  f"({', '.join(UNIT_OPCODES)}), e.g. {{load: [LOAD], compute: [GEMM, ALU], store: [STORE]}}; "
                                  f"got {value!r}")
        units, seen = [], {}
        for name, opcodes in value.items():
            where = f"{key}.{name}"
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                raise self.error(where, "expected a name of letters, digits and '_'")
            for opcode in self.names(opcodes, where, UNIT_OPCODES, minimum=1):
                if opcode in seen:
                    raise self.error(where, f"{opcode} is run by unit {seen[opcode]!r} already; each opcode runs on one unit")
                seen[opcode] = name
            units.append((name, tuple(opcodes)))
        missing = [opcode for opcode in UNIT_OPCODES if opcode not in seen]
        if missing:
            raise self.error(key, f"no unit runs {', '.join(missing)}; add it to one of {', '.join(value)}")
        return tuple(units)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def names(self, value: Any, key: str, allowed: tuple[str, ...], minimum: int = 0) -> list[str]:
        items = self.sequence(value, key, minimum)
        for i, item in enumerate(items):
            if item not in allowed:
                raise self.error(f"{key}[{i}]", f"{item!r} is not one of {', '.join(allowed)}")
        return items

    def pattern(self, value: Any, key: str, operations: tuple[str, ...]) -> Pattern:
        data = self.mapping(value, key, required=("name", "operations"), optional=tuple(CONSTRAINTS))
        if not isinstance(data["name"], str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", data["name"]):
            raise self.error(f"{key}.name", f"expected a name of letters, digits, '_', '.', '-', got {data['name']!r}")
        covered = tuple(self.names(data["operations"], f"{key}.operations", operations, minimum=1))
        constraints = []
        for name, constraint in CONSTRAINTS.items():
            value = data.get(name)
            if value is None:
                continue
            applicable = constraint_operations(name, self.dialect)
            where = f"{key}.{name}"
            misfits = [op for op in covered if op not in applicable]
            if misfits:
                raise self.error(where, f"does not apply to {', '.join(misfits)} (only to {', '.join(applicable)})")
            constraints.append((name, constraint.read(self, value, where)))
        return Pattern(name=data["name"], operations=covered, constraints=tuple(constraints))

    def layout(self, value: Any, key: str, block: int) -> tuple[str, ...]:
        """Four dimensions: H, W, C/<block> in any order, then <block> (an NCHWc-style blocked
        layout of one image), with the GEMM block's channel count."""
        items = [str(item).replace(" ", "") for item in self.sequence(value, key)]
        expected = ["H", "W", f"C/{block}", str(block)]
        if sorted(items) != sorted(expected):
            raise self.error(key, f"{list(value)} is not a blocked layout of the GEMM block's {block} channels; expected the "
                                  f"dimensions {', '.join(expected)} in some order (e.g. [{', '.join(expected)}])")
        if items[-1] != str(block):
            raise self.error(key, f"{list(value)}: the block's {block} channels must be the innermost dimension (the DMA "
                                  f"and the GEMM move whole {block}-channel vectors); e.g. [{', '.join(expected)}] or "
                                  f"[C/{block}, H, W, {block}]")
        return tuple(items)
