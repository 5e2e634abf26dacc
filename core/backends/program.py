"""The two-level code generation (seed 004 [0058]-[0066]): an IR and its partition plan as one
C99 program. A target without an accelerator is the all-host case of the same generator.

Operator level: each accelerator function of the plan becomes an instruction stream
(accel/isa.py), every layer lowered by its operation's lowering (accel/ops/), with the tiled
weights and shifted biases in one constant segment; each stream is serialized
(`<function>.bin`, 64 bytes an instruction) with a listing (`<function>.lst`).

Function level: `run_network` runs the plan's units in a topological order: host layers as the
C of their emitters (c/ops/), packs and unpacks where the plan puts them, and each accelerator
function as one call of the reference instruction-set simulator (accel/runtime/qt_isa.h) on
its embedded binary. Host and accelerator share one DRAM: the activation arena (DATA), each
buffer placed by liveness; the constant segment is CONST. An element-wise host layer on packed
data (seed 004 [0048]) runs its C on the packed bytes, padding lanes included. The driver is
c/runtime/qt_main.h: `network INPUT OUTPUT [DUMP]`.

In a -DQT_DUMP_LAYERS build every layer's output is copied (unpacked) to its slot of a per-image
dump, each accelerator function running layer by layer (each layer's instructions are a
self-contained segment), so a mismatch names the first layer that differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from core.backends.accel.cost import CostModel
from core.backends.accel.isa import INSTRUCTION_BYTES, Finish, Instruction, encode_all, layout_header, listing
from core.backends.accel.lowering import Lowering, LoweringError, PackedTensor, as_hwc, in_host_layout, packed, packed_strides
from core.backends.accel.ops import lowering_of
from core.backends.accel.partition import ACCEL, ACCEL_LAYOUT, HOST_LAYOUT, PartitionPlan, Region, partition
from core.backends.accel.schedule import insert_tokens
from core.backends.c.emitter import CodegenError
from core.backends.c.program import (ARENA_ALIGN, RUNTIME_DIR, CProgram, c_array, c_bytes, c_symbols, image_shape, layer_c, plan_buffers,
                                     program_text, runtime_headers)
from core.ir.network import Ir
from core.ir.op import is_network_input

ISA_HEADER = RUNTIME_DIR.parents[1] / "accel" / "runtime" / "qt_isa.h"
ISA_LAYOUT_HEADER = "qt_isa_layout.h"
DATA_FILES = ("core/backends/accel/runtime",)


@dataclass
class AccelFunction:
    """One accelerator function's instruction stream."""

    name: str
    layers: list[str]
    instructions: list[Instruction]
    segments: dict[str, tuple[int, int]]  # layer -> (first instruction, count)

    @property
    def binary(self) -> bytes:
        return encode_all(self.instructions)

    def layer_statistics(self, cost: CostModel) -> dict[str, dict[str, float]]:
        """The cost model's statistics of each layer's instructions, on the function's timeline."""
        return cost.layer_statistics(self.instructions, self.segments)

    def listing(self) -> str:
        lines = [f"; {self.name}: {len(self.instructions)} instructions, {len(self.instructions) * INSTRUCTION_BYTES} bytes"]
        lines += [f"; {layer}: instructions {start}..{start + count - 1}" for layer, (start, count) in self.segments.items()]
        return "\n".join(lines) + "\n" + listing(self.instructions)


@dataclass
class NetworkProgram(CProgram):
    functions: list[AccelFunction] = field(default_factory=list)
    accel_constant_bytes: int = 0
    accel_constant_raw_bytes: int = 0  # the same constants stored without compression
    accel_constants: bytes = b""  # the CONST segment the accelerator's DMA reads (tiled weights, compressed streams, biases)
    # the accelerator's instructions: cost model statistics, and `cycles_host` (the host's work) and `cycles_total` (both)
    statistics: dict[str, float] = field(default_factory=dict)
    host_cycles: dict[str, float] = field(default_factory=dict)  # each host layer's cycles, and each "pack <t>" / "unpack <t>"


@dataclass(frozen=True)
class _Step:
    """One statement of run_network, with the buffers it writes and reads (for liveness)."""

    writes: list[str]
    reads: list[str]
    layer: str | None = None  # a layer's step; None: a pack or unpack
    region: str | None = None


def _value(tensor: str, layout: str) -> str:
    return f"{tensor}@{layout}"


def generate_c(ir: Ir) -> NetworkProgram:
    """The all-host program: every layer as C."""
    return generate_program(ir, partition(ir, None))


def generate_program(ir: Ir, plan: PartitionPlan) -> NetworkProgram:
    if [g.layer for g in plan.groups] != [layer.name for layer in ir.layers]:
        raise CodegenError("the partition plan is not the plan of this IR (its layers differ); re-run the partition stage")
    return _ProgramBuilder(ir, plan).build()


def schedule(ir: Ir, plan: PartitionPlan) -> list[tuple[str, list[str]]]:
    """The units of run_network in execution order: ("region", its layers) for an accelerator
    function, ("host", [layer]) for a host layer. A topological order of the units' graph
    (acyclic: the partition never merges across a detour), ties broken by IR order."""
    unit_of = {g.layer: (g.region if g.target == ACCEL else g.layer) for g in plan.groups}
    position = {layer.name: i for i, layer in enumerate(ir.layers)}
    members: dict[str, list[str]] = {}
    for layer in ir.layers:
        members.setdefault(unit_of[layer.name], []).append(layer.name)
    graph = nx.DiGraph()
    graph.add_nodes_from(members)
    for layer in ir.layers:
        for producer in layer.previous_layer:
            if not is_network_input(producer) and unit_of[producer] != unit_of[layer.name]:
                graph.add_edge(unit_of[producer], unit_of[layer.name])
    if not nx.is_directed_acyclic_graph(graph):
        raise CodegenError("the partition plan's functions and host layers form a cycle; re-run the partition stage")
    order = nx.lexicographical_topological_sort(graph, key=lambda unit: position[members[unit][0]])
    regions = {region.name for region in plan.regions}
    return [("region" if unit in regions else "host", members[unit]) for unit in order]


class _ProgramBuilder:
    """One program's generation, step by step: the statements of run_network (with the layout
    conversions the plan asks for), the arena, the accelerator functions, the host layers, the
    text."""

    def __init__(self, ir: Ir, plan: PartitionPlan):
        self.ir, self.plan, self.accelerator = ir, plan, plan.accelerator
        self.layers = {layer.name: layer for layer in ir.layers}
        self.groups = {g.layer: g for g in plan.groups}
        self.inputs = ir.network_inputs  # in the order the program's input holds them
        self.shapes = {**{name: image_shape(ir.shape_of_network_input(name)) for name in self.inputs},
                       **{layer.name: image_shape(layer.shape_of_output()) for layer in ir.layers}}
        # the integers' types where not int8 (TFLite's 16x8 mode, token ids): a tensor's bytes are its elements x their size
        self.dtypes = {name: dtype for name, dtype in [*((name, ir.grid_of_network_input(name).dtype) for name in self.inputs),
                                                       *((layer.name, layer.integer_dtype) for layer in ir.layers)]
                       if np.dtype(dtype) != np.int8}
        self.end_points = ir.end_point_layers
        self.native = {**{name: HOST_LAYOUT for name in self.inputs}, **{g.layer: g.layout for g in plan.groups}}
        self.aliases: dict[str, str] = {}  # a layout change's value -> the value whose buffer holds its bytes (_same_bytes)
        self.symbols = c_symbols(ir)
        self.steps: list[_Step] = []
        self.offsets: dict[str, int] = {}
        self.arena = 0

    def build(self) -> NetworkProgram:
        self._plan_steps()
        self._plan_arena()
        lowering = Lowering(self.accelerator) if self.accelerator is not None else None
        functions = [self._lower_region(region, lowering) for region in self.plan.regions]
        host_constants, host_functions, host_bytes = self._host_layers()
        dump_offsets = self._dump_offsets()
        statements = self._statements({f.name: f for f in functions}, dump_offsets)
        body, headers, files, stats = self._accelerator_parts(functions, lowering)
        body += f"""/* ---- host constants ({host_bytes} bytes) ---- */

{"".join(host_constants)}
/* ---- host layers ---- */

{chr(10).join(host_functions)}
"""
        dump_bytes = sum(self._bytes(name) for name in self.layers)
        source = program_text(self._header(functions), sum(self._bytes(name) for name in self.inputs),
                              [self._bytes(name) for name in self.end_points],
                              dump_bytes, self._defines(), list(headers), body, "\n".join(statements))
        accel_bytes = len(lowering.constants) if lowering is not None else 0
        host_cycles = self._host_cycles() if self.accelerator is not None else {}
        if self.accelerator is not None:
            self._check_memories({"weights": host_bytes + accel_bytes, "activations": self.arena,
                                  "program": sum(len(function.binary) for function in functions)})
        if host_cycles or stats:
            stats = {**stats, "cycles_host": float(sum(host_cycles.values()))}
            stats["cycles_total"] = stats.get("cycles", 0.0) + stats["cycles_host"]
        return NetworkProgram(
            source=source, headers={**runtime_headers(), **headers}, symbols=self.symbols,
            inputs={name: tuple(self.shapes[name]) for name in self.inputs},
            end_points=self.end_points, shapes={name: self.shapes[name] for name in self.layers},
            constant_bytes=host_bytes + accel_bytes, arena_bytes=self.arena, files=files, dtypes=self.dtypes, functions=functions,
            accel_constant_bytes=accel_bytes, statistics=stats, host_cycles=host_cycles,
            accel_constant_raw_bytes=accel_bytes + (lowering.compression_saved_bytes if lowering is not None else 0),
            accel_constants=bytes(lowering.constants) if lowering is not None else b"")

    def _bytes(self, tensor: str) -> int:
        """A tensor's bytes in the host layout: its elements x the size of its integers."""
        return math.prod(self.shapes[tensor]) * np.dtype(self.dtypes.get(tensor, np.int8)).itemsize

    # --- the statements of run_network and the arena ------------------------------------------
    def _ensure(self, tensor: str, layout: str, materialized: set[str], conversions: list) -> str:
        if tensor in self.plan.read_in_host_layout:  # packed by the DMA as the accelerator reads it (narrow loads)
            layout = self.native[tensor]
        value = _value(tensor, layout)
        if value not in materialized:
            if self._same_bytes(tensor):  # no copy: the one buffer is both
                self.aliases[value] = _value(tensor, self.native[tensor])
            else:
                self.steps.append(_Step([value], [_value(tensor, self.native[tensor])]))
            conversions.append(("pack" if layout == ACCEL_LAYOUT else "unpack", tensor))
            materialized.add(value)
        return self._resolved(value)

    def _same_bytes(self, tensor: str) -> bool:
        """Whether the tensor's accelerator layout holds its host (HWC) bytes as they are: int8, whole channel blocks, the
        layout's H, W, C order (a dense layer's 1 x 1 x 640 input or output): a pack or unpack of it is no copy."""
        shape = self.shapes[tensor]
        if self.accelerator is None or len(shape) != 3 or np.dtype(self.dtypes.get(tensor, np.int8)).itemsize != 1:
            return False
        height, width, channels = shape
        blocks, remainder = divmod(channels, self.accelerator.channel_block)
        return remainder == 0 and packed_strides(self.accelerator, height, width, channels) == (width * blocks, blocks, 1)

    def _resolved(self, value: str) -> str:
        """The buffer a value lives in: itself, or the value a layout change without a copy aliases."""
        return self.aliases.get(value, value)

    def _plan_steps(self) -> None:
        """Each unit's steps, the conversions its layers need first (a function's layers run as one
        call), checked against the plan's packs and unpacks."""
        materialized, conversions = set(self._input_values), []
        for kind, unit_layers in schedule(self.ir, self.plan):
            region = self.groups[unit_layers[0]].region if kind == "region" else None
            for name in unit_layers:
                for producer in self.layers[name].previous_layer:
                    if producer not in unit_layers:
                        self._ensure(producer, self.groups[name].layout, materialized, conversions)
            for name in unit_layers:
                layout = self.groups[name].layout
                reads = [self._ensure(producer, layout, materialized, conversions) for producer in self.layers[name].operands()]
                self.steps.append(_Step([_value(name, layout)], reads, layer=name, region=region))
                materialized.add(_value(name, layout))
            for name in unit_layers:
                if name in self.end_points:
                    self._ensure(name, HOST_LAYOUT, materialized, conversions)
        expected = sorted([("pack", c.tensor) for c in self.plan.packs if not c.by_dma] + [("unpack", c.tensor) for c in self.plan.unpacks])
        if sorted(conversions) != expected:
            raise CodegenError(f"the program's packs/unpacks {sorted(conversions)} are not the partition plan's {expected}")

    def _size(self, value: str) -> int:
        tensor, layout = value.rsplit("@", 1)
        shape = list(self.shapes[tensor])
        return self.accelerator.packed_bytes(shape) if layout == ACCEL_LAYOUT else self._bytes(tensor)

    def _plan_arena(self) -> None:
        """The arena is the accelerator's DATA segment and every tensor of the network, the input and the end points
        among them, as TensorFlow Lite Micro's arena holds them: the input lives from before the first layer (run_network
        copies the image there) to its last reader, each end point from its layer to the end (run_network copies it
        out), every other value from its writer to its last reader."""
        first, last = (list(self._input_values), []), ([], [self._resolved(_value(name, HOST_LAYOUT)) for name in self.end_points])
        values = {*self._input_values, *(value for step in self.steps for value in step.writes)}
        align = ARENA_ALIGN if self.accelerator is None else math.lcm(ARENA_ALIGN, self.accelerator.channel_block)
        self.offsets, self.arena = plan_buffers([first, *[(step.writes, step.reads) for step in self.steps], last],
                                                {value: self._size(value) for value in values}, align=align)

    def _check_memories(self, role_bytes: dict[str, int]) -> None:
        """Each memory area of the target holds what its placement puts there, or a CodegenError naming the area."""
        held: dict[str, int] = {}
        for role, size in role_bytes.items():
            held[self.accelerator.placement[role]] = held.get(self.accelerator.placement[role], 0) + size
        for area, size in held.items():
            capacity = self.accelerator.memories[area].size
            if size > capacity:
                roles = [role for role in role_bytes if self.accelerator.placement[role] == area]
                raise CodegenError(f"the program's {' and '.join(roles)} ({size} bytes) exceed accelerator.memories.{area}.size "
                                   f"({capacity} bytes), where accelerator.placement puts them: choose a larger memory or a "
                                   f"smaller model")

    def _host_cycles(self) -> dict[str, float]:
        """The cost model's estimate of each step the host runs: a layer's MACs and the bytes it reads and writes, a pack
        or unpack's bytes read and written."""
        cost = CostModel.of(self.accelerator)
        cycles = {}
        for step in self.steps:
            if step.region is not None:
                continue
            moved = sum(self._size(value) for value in (*step.reads, *step.writes))
            if step.layer is None:
                tensor, layout = step.writes[0].rsplit("@", 1)
                cycles[f"{'pack' if layout == ACCEL_LAYOUT else 'unpack'} {tensor}"] = cost.host_layer(0, moved)
            else:
                cycles[step.layer] = cost.host_layer(self.groups[step.layer].macs, moved)
        return cycles

    @property
    def _input_values(self) -> list[str]:
        return [_value(name, HOST_LAYOUT) for name in self.inputs]

    def _buffer(self, value: str) -> str:
        return f"qt_arena + {self.offsets[self._resolved(value)]}"

    def _packed(self, tensor: str) -> PackedTensor:
        if tensor in self.plan.read_in_host_layout:
            return in_host_layout(self.accelerator, self.offsets[self._resolved(_value(tensor, HOST_LAYOUT))], self.shapes[tensor])
        return packed(self.accelerator, self.offsets[self._resolved(_value(tensor, ACCEL_LAYOUT))], self.shapes[tensor])

    # --- operator level --------------------------------------------------------------------------
    def _lower_region(self, region: Region, lowering: Lowering) -> AccelFunction:
        start_all = len(lowering.instructions)
        segments = {}
        for name in region.layers:
            record = self.layers[name]
            op_lowering = lowering_of(record.operation)
            if op_lowering is None:
                raise CodegenError(f"layer {name}: operation {record.operation} runs on the host only; re-run the partition stage")
            lowering.forget()
            start = len(lowering.instructions)
            inputs = [self._packed(producer) for producer in record.operands()]
            try:
                op_lowering.lower(record, self.ir.params.get(name, {}), inputs, self._packed(name), lowering)
            except (LoweringError, ValueError) as error:
                raise CodegenError(f"{region.name}: {error}") from None
            segments[name] = (start - start_all, len(lowering.instructions) - start)
        lowering.emit(Finish(note=f"end of {region.name}"))
        instructions = insert_tokens(lowering.instructions[start_all:], self.accelerator.unit_of, self.accelerator.channel_block)
        del lowering.instructions[start_all:]
        return AccelFunction(region.name, list(region.layers), instructions, segments)

    # --- function level --------------------------------------------------------------------------
    def _host_layers(self) -> tuple[list[str], list[str], int]:
        constants, functions, total = [], [], 0
        for name, record in self.layers.items():
            if self.groups[name].target == ACCEL:
                continue
            note = ""
            if self.groups[name].layout == ACCEL_LAYOUT:  # element-wise on packed data: every lane, padding included
                shape = list(self.shapes[name])
                record = record.with_lanes(self.accelerator.packed_bytes(shape) // math.prod(shape[:-1]))
                note = ", on packed data"
            layer_constants, function, size = layer_c(self.ir, record, self.symbols[name], note)
            constants.append(layer_constants)
            functions.append(function)
            total += size
        return constants, functions, total

    def _dump_offsets(self) -> dict[str, int]:
        offsets, offset = {}, 0
        for layer in self.ir.layers:
            offsets[layer.name] = offset
            offset += self._bytes(layer.name)
        return offsets

    def _strides_of(self, tensor: str) -> str:
        h, w, c = as_hwc(self.shapes[tensor])
        sh, sw, sc = packed_strides(self.accelerator, h, w, c)
        return f"{h}, {w}, {c}, {sh}, {sw}, {sc}"

    def _dump(self, name: str, dump_offsets: dict[str, int]) -> str:
        value = _value(name, self.groups[name].layout)
        if self.groups[name].layout == ACCEL_LAYOUT:
            return f"    QT_DUMP_PACKED({dump_offsets[name]}, {self._buffer(value)}, {self._strides_of(name)});"
        return f"    QT_DUMP({dump_offsets[name]}, {self._buffer(value)}, {self._bytes(name)});"

    def _statements(self, functions: dict[str, AccelFunction], dump_offsets: dict[str, int]) -> list[str]:
        statements, index, offset = [], 0, 0
        for name in self.inputs:  # the inputs back to back, in the program's order of them
            what = "the image" if len(self.inputs) == 1 else name
            statements.append(f"    memcpy({self._buffer(_value(name, HOST_LAYOUT))}, input + {offset}, {self._bytes(name)}); /* {what} into the arena */")
            offset += self._bytes(name)
        while index < len(self.steps):
            step = self.steps[index]
            if step.layer is None:  # a conversion
                statements.append(self._conversion(step))
                index += 1
            elif step.region is not None:
                function = functions[step.region]
                statements.append(_region_call(function, lambda name: self._dump(name, dump_offsets)))
                index += len(function.layers)
            else:
                arguments = [*(self._buffer(value) for value in step.reads), self._buffer(step.writes[0])]
                statements.append(f"    {self.symbols[step.layer]}({', '.join(arguments)});\n{self._dump(step.layer, dump_offsets)}")
                index += 1
        statements += [f"    memcpy(end_points[{k}], {self._buffer(_value(name, HOST_LAYOUT))}, {self._bytes(name)}); /* end point {k} */"
                       for k, name in enumerate(self.end_points)]
        return statements

    def _conversion(self, step: _Step) -> str:
        (value,), (source,) = step.writes, step.reads
        tensor = value.rsplit("@", 1)[0]
        if not 1 <= len(self.shapes[tensor]) <= 3:
            raise CodegenError(f"tensor {tensor} of shape {list(self.shapes[tensor])} crosses the accelerator boundary; "
                               f"only H x W x C activations can be packed")
        routine = "qt_pack" if value.endswith("@" + ACCEL_LAYOUT) else "qt_unpack"
        return f"    {routine}({self._buffer(source)}, {self._buffer(value)}, {self._strides_of(tensor)}); /* {routine[3:]} {tensor} */"

    # --- the text ------------------------------------------------------------------------------
    def _header(self, functions: list[AccelFunction]) -> str:
        accel = "" if self.accelerator is None else (
            f" {len(functions)} accelerator function(s) of {sum(len(f.instructions) for f in functions)} instructions,")
        hosts = sum(g.target != ACCEL for g in self.plan.groups)
        return "\n".join([
            f"/* Generated by core/backends/program.py from a TF2IR IR and its partition for target {self.plan.target}: do not edit.",
            f" * {len(self.ir.layers)} layers,{accel} {hosts} host layer(s); {self._inputs_text()}; "
            f"end points: {', '.join(f'{name} {list(self.shapes[name])}' for name in self.end_points)}.",
            " * Build: cc -O2 -std=c99 -Wall -Werror -ffp-contract=off -o network program.c  (-DQT_DUMP_LAYERS: also dump every layer)",
            " * Run:   network INPUT OUTPUT [DUMP]  (raw int8: N images in, N x the end points out) */",
        ])

    def _inputs_text(self) -> str:
        """The input's shape and type, or each input's of several with its bytes in the program's input, in order."""
        def described(name: str) -> str:
            return f"{'x'.join(map(str, self.shapes[name]))} {np.dtype(self.dtypes.get(name, np.int8)).name}"
        if len(self.inputs) == 1:
            return f"input {described(self.inputs[0])} HWC"
        offsets = np.cumsum([0, *(self._bytes(name) for name in self.inputs)])
        return "inputs, back to back per image: " + ", ".join(f"{name} {described(name)} (bytes {start} to {end - 1})"
                                                               for name, start, end in zip(self.inputs, offsets, offsets[1:]))

    def _defines(self) -> dict[str, int]:
        accelerator = self.accelerator
        if accelerator is None:
            return {}
        return {"QT_ISA_BLOCK": accelerator.channel_block, "QT_ISA_INP_BYTES": accelerator.buffers.input,
                "QT_ISA_WGT_BYTES": accelerator.buffers.weight, "QT_ISA_ACC_BYTES": accelerator.buffers.accumulator,
                "QT_ISA_UNITS": len(accelerator.units),
                **{f"QT_ISA_UNIT_{opcode}": unit for opcode, unit in accelerator.unit_of.items()}}

    def _accelerator_parts(self, functions: list[AccelFunction], lowering: Lowering | None):
        """(the body's arena, DRAM segment and instruction streams; the extra headers; the extra
        files; the accelerator's statistics)."""
        arena = f"static int8_t qt_arena[{self.arena}]; /* DRAM, DATA segment: every tensor, the input and the end points among them */\n"
        if self.accelerator is None:
            return f"/* ---- the network ---- */\n\n{arena}\n", {}, {}, {}
        constants_segment = bytes(lowering.constants) or b"\0"
        instructions = [i for function in functions for i in function.instructions]
        body = f"""#define QT_ARENA_BYTES {max(self.arena, 1)}
#define QT_CONST_BYTES {len(constants_segment)}
{arena}
#ifdef QT_DUMP_LAYERS
#define QT_DUMP_PACKED(offset, data, h, w, c, sh, sw, sc) qt_unpack((data), qt_dump_layers + (offset), h, w, c, sh, sw, sc)
#else
#define QT_DUMP_PACKED(offset, data, h, w, c, sh, sw, sc) ((void)0)
#endif

/* ---- DRAM, CONST segment: tiled weights and shifted biases ({len(lowering.constants)} bytes) ---- */

{c_array("qt_accel_const", np.frombuffer(constants_segment, np.int8)) if functions else "/* (none: no layer runs on the accelerator) */"}
/* ---- accelerator functions: instruction streams ({INSTRUCTION_BYTES} bytes an instruction) ---- */

{"".join(c_bytes(f"{function.name}_program", function.binary) for function in functions)}
"""
        headers = {ISA_LAYOUT_HEADER: layout_header(), ISA_HEADER.name: ISA_HEADER.read_text()}
        files = {}
        for function in functions:
            files[f"{function.name}.bin"] = function.binary
            files[f"{function.name}.lst"] = function.listing().encode()
        return body, headers, files, CostModel.of(self.accelerator).statistics(instructions)


def _region_call(function: AccelFunction, dump) -> str:
    """C: run the function (whole, or layer by layer with dumps in a QT_DUMP_LAYERS build)."""
    run = (f'qt_isa_run("{function.name}", {function.name}_program + {{start}} * {INSTRUCTION_BYTES}L, {{count}}, qt_arena, '
           f"QT_ARENA_BYTES, qt_accel_const, QT_CONST_BYTES);")
    layered = []
    for name in function.layers:
        start, count = function.segments[name]
        layered.append(f"    {run.format(start=start, count=count)}\n{dump(name)}")
    whole = run.format(start=0, count=len(function.instructions))
    return (f"    /* {function.name}: {', '.join(function.layers)} */\n#ifdef QT_DUMP_LAYERS\n" + "\n".join(layered) +
            f"\n#else\n    {whole}\n#endif")
