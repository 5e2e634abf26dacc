"""Two-level code generation for a target with an accelerator (seed 004 [0058]-[0066]).

Operator level: each accelerator function of the partition plan becomes an instruction stream
(core/isa.py), every layer lowered by its IR operation's `lower_accel` (core/ops/), with the
tiled weights and shifted biases in one constant segment. Each stream is serialized
(`<function>.bin`, 64 bytes an instruction) with a listing (`<function>.lst`).

Function level: one C99 program (core/codegen_c.program_source's `main` and dump protocol)
whose `run_network` runs the plan's units in a topological order: host layers as the plain C
of their `emit_c`, packs and unpacks where the plan puts them, and each accelerator function
as one call of the reference instruction-set simulator (core/c_runtime/qt_isa.h) on its
embedded binary. Host and accelerator share one DRAM: the activation arena (DATA), each buffer
placed by liveness; the constant segment is CONST. An element-wise host layer on packed data
(seed 004 [0048]) runs its C on the packed bytes, padding lanes included.

In a -DQT_DUMP_LAYERS build each function runs layer by layer (each layer's instructions are a
self-contained segment) and every layer's output is unpacked to its dump slot, so a mismatch
names the first layer that differs, as in the host-only program.
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from core.backends.accel.lowering import Lowering, LoweringError, packed, packed_strides
from core.backends.c.program import (
    ARENA_ALIGN,
    RUNTIME_HEADER,
    CodegenError,
    CProgram,
    c_array,
    c_symbols,
    layer_c,
    input_shape,
    output_shape,
    plan_buffers,
    program_source,
)
from core.ir.io import NETWORK_INPUT, Ir
from core.backends.accel.isa import INSTRUCTION_BYTES, Finish, Instruction, encode_all, listing, statistics
from core.ir.ops import IR_OPS
from core.backends.accel.partition import ACCEL, ACCEL_LAYOUT, HOST_LAYOUT, PartitionPlan, Region

ISA_HEADER = Path(__file__).resolve().parent / "runtime" / "qt_isa.h"
VALUES_PER_LINE = 32


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

    def layer_statistics(self, accelerator) -> dict[str, dict[str, float]]:
        """core.backends.accel.isa.statistics of each layer's instructions."""
        return {layer: statistics(self.instructions[start : start + count], accelerator.cycles, accelerator.dma_bytes_per_cycle,
                                  accelerator.channel_block)
                for layer, (start, count) in self.segments.items()}

    def listing(self) -> str:
        lines = [f"; {self.name}: {len(self.instructions)} instructions, {len(self.instructions) * INSTRUCTION_BYTES} bytes"]
        lines += [f"; {layer}: instructions {start}..{start + count - 1}" for layer, (start, count) in self.segments.items()]
        return "\n".join(lines) + "\n" + listing(self.instructions)


@dataclass
class AccelProgram(CProgram):
    functions: list[AccelFunction] = field(default_factory=list)
    accel_constant_bytes: int = 0
    statistics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Step:
    """One statement of run_network, with the buffers it writes and reads (for liveness)."""

    writes: list[str]
    reads: list[str]
    layer: str | None = None  # a layer's step; None: a pack or unpack
    region: str | None = None


def _value(tensor: str, layout: str) -> str:
    return f"{tensor}@{layout}"


def schedule(ir: Ir, plan: PartitionPlan) -> list[tuple[str, list[str]]]:
    """The units of run_network in execution order: ("region", its layers) for an accelerator
    function, ("host", [layer]) for a host layer. A topological order of the units' graph
    (acyclic: the partition never merges across a detour), ties broken by IR order."""
    unit_of = {g.layer: (g.region if g.target == ACCEL else g.layer) for g in plan.groups}
    position = {layer["name"]: i for i, layer in enumerate(ir.layers)}
    members: dict[str, list[str]] = {}
    for layer in ir.layers:
        members.setdefault(unit_of[layer["name"]], []).append(layer["name"])
    graph = nx.DiGraph()
    graph.add_nodes_from(members)
    for layer in ir.layers:
        for producer in layer["previous_layer"]:
            if producer != NETWORK_INPUT and unit_of[producer] != unit_of[layer["name"]]:
                graph.add_edge(unit_of[producer], unit_of[layer["name"]])
    if not nx.is_directed_acyclic_graph(graph):
        raise CodegenError("the partition plan's functions and host layers form a cycle; re-run the partition stage")
    order = nx.lexicographical_topological_sort(graph, key=lambda unit: position[members[unit][0]])
    regions = {region.name for region in plan.regions}
    return [("region" if unit in regions else "host", members[unit]) for unit in order]


def generate_accel_program(ir: Ir, plan: PartitionPlan) -> AccelProgram:
    accelerator = plan.accelerator
    if accelerator is None:
        raise CodegenError(f"target {plan.target} has no accelerator: use core.backends.c.program.generate_c")
    if [g.layer for g in plan.groups] != [layer["name"] for layer in ir.layers]:
        raise CodegenError("the partition plan is not the plan of this IR (its layers differ); re-run the partition stage")
    layers = {layer["name"]: layer for layer in ir.layers}
    groups = {g.layer: g for g in plan.groups}
    shapes = {name: output_shape(layer) for name, layer in layers.items()}
    for layer in ir.layers:
        for position, producer in enumerate(layer["previous_layer"]):
            if producer == NETWORK_INPUT:
                shapes.setdefault(NETWORK_INPUT, input_shape(layer, position))
    if NETWORK_INPUT not in shapes:
        raise CodegenError("no layer reads the network input")
    end_points = ir.end_point_layers
    native = {NETWORK_INPUT: HOST_LAYOUT, **{g.layer: g.layout for g in plan.groups}}

    # --- the steps of run_network, conversions where a reader needs the other layout ----------
    steps: list[_Step] = []
    materialized = {_value(NETWORK_INPUT, HOST_LAYOUT)}
    conversions: list[tuple[str, str]] = []  # (kind, tensor)

    def ensure(tensor: str, layout: str) -> str:
        value = _value(tensor, layout)
        if value not in materialized:
            kind = "pack" if layout == ACCEL_LAYOUT else "unpack"
            steps.append(_Step([value], [_value(tensor, native[tensor])]))
            conversions.append((kind, tensor))
            materialized.add(value)
        return value

    for kind, unit_layers in schedule(ir, plan):
        region = groups[unit_layers[0]].region if kind == "region" else None
        for name in unit_layers:  # a function's conversions all come before it: its layers run as one call
            for producer in layers[name]["previous_layer"]:
                if producer not in unit_layers:
                    ensure(producer, groups[name].layout)
        for name in unit_layers:
            layout = groups[name].layout
            reads = [ensure(producer, layout) for producer in layers[name]["previous_layer"]]
            steps.append(_Step([_value(name, layout)], reads, layer=name, region=region))
            materialized.add(_value(name, layout))
        for name in unit_layers:
            if name in end_points:
                ensure(name, HOST_LAYOUT)
    expected = sorted([("pack", c.tensor) for c in plan.packs] + [("unpack", c.tensor) for c in plan.unpacks])
    if sorted(conversions) != expected:
        raise CodegenError(f"the program's packs/unpacks {sorted(conversions)} are not the partition plan's {expected}")

    # --- buffers: the arena is the accelerator's DATA segment ----------------------------------
    def size(value: str) -> int:
        tensor, layout = value.rsplit("@", 1)
        return accelerator.packed_bytes(list(shapes[tensor])) if layout == ACCEL_LAYOUT else math.prod(shapes[tensor])

    external = {_value(NETWORK_INPUT, HOST_LAYOUT), *(_value(name, HOST_LAYOUT) for name in end_points)}
    values = {value for step in steps for value in step.writes} - external
    offsets, arena = plan_buffers([(step.writes, step.reads) for step in steps], {value: size(value) for value in values},
                                  align=math.lcm(ARENA_ALIGN, accelerator.channel_block))

    def buffer(value: str) -> str:
        tensor, layout = value.rsplit("@", 1)
        if value == _value(NETWORK_INPUT, HOST_LAYOUT):
            return "input"
        if layout == HOST_LAYOUT and tensor in end_points:
            return f"end_points[{end_points.index(tensor)}]"
        return f"qt_arena + {offsets[value]}"

    def tensor_at(tensor: str):
        return packed(accelerator, offsets[_value(tensor, ACCEL_LAYOUT)], shapes[tensor])

    # --- operator level: each function's instructions ------------------------------------------
    lowering = Lowering(accelerator)
    functions = []
    for region in plan.regions:
        functions.append(_lower_region(region, layers, ir, lowering, tensor_at))
    function_of = {f.name: f for f in functions}

    # --- function level: the host program ------------------------------------------------------
    symbols = c_symbols(ir)
    host_constants, host_functions, host_constant_bytes = [], [], 0
    for name, layer in layers.items():
        if groups[name].target == ACCEL:
            continue
        fields, note = layer, ""
        if groups[name].layout == ACCEL_LAYOUT:  # element-wise on packed data: every lane, padding included
            fields = {**layer, "input_channel_num": accelerator.packed_bytes(list(shapes[name])) // math.prod(shapes[name][:-1])}
            note = ", on packed data"
        constants, function, size = layer_c(ir, layer, symbols[name], fields, note)
        host_constants.append(constants)
        host_functions.append(function)
        host_constant_bytes += size

    dump_offsets, offset = {}, 0
    for layer in ir.layers:
        dump_offsets[layer["name"]] = offset
        offset += math.prod(shapes[layer["name"]])

    def strides_of(tensor: str) -> str:
        h, w, c = shapes[tensor]
        sh, sw, sc = packed_strides(accelerator, h, w, c)
        return f"{h}, {w}, {c}, {sh}, {sw}, {sc}"

    def dump(name: str) -> str:
        value = _value(name, groups[name].layout)
        if groups[name].layout == ACCEL_LAYOUT:
            return f"    QT_DUMP_PACKED({dump_offsets[name]}, {buffer(value)}, {strides_of(name)});"
        return f"    QT_DUMP({dump_offsets[name]}, {buffer(value)}, {math.prod(shapes[name])});"

    statements, index = [], 0
    while index < len(steps):
        step = steps[index]
        if step.layer is None:  # a conversion
            (value,), (source,) = step.writes, step.reads
            tensor = value.rsplit("@", 1)[0]
            if len(shapes[tensor]) != 3:
                raise CodegenError(f"tensor {tensor} of shape {list(shapes[tensor])} crosses the accelerator boundary; "
                                   f"only H x W x C activations can be packed")
            routine = "qt_pack" if value.endswith("@" + ACCEL_LAYOUT) else "qt_unpack"
            statements.append(f"    {routine}({buffer(source)}, {buffer(value)}, {strides_of(tensor)}); /* {routine[3:]} {tensor} */")
            index += 1
        elif step.region is not None:
            function = function_of[step.region]
            statements.append(_region_call(function, dump))
            index += len(function.layers)
        else:
            name = step.layer
            arguments = [*(buffer(value) for value in step.reads), buffer(step.writes[0])]
            statements.append(f"    {symbols[name]}({', '.join(arguments)});\n{dump(name)}")
            index += 1

    constants_segment = bytes(lowering.constants) or b"\0"
    programs = "".join(_c_bytes(f"{function.name}_program", function.binary) for function in functions)
    all_instructions = [i for function in functions for i in function.instructions]
    stats = statistics(all_instructions, accelerator.cycles, accelerator.dma_bytes_per_cycle, accelerator.channel_block)
    header = "\n".join([
        f"/* Generated by core/accel_codegen.py from a TF2IR IR and its partition for target {plan.target}: do not edit.",
        f" * {len(ir.layers)} layers, {len(functions)} accelerator function(s) of {len(all_instructions)} instructions, "
        f"{sum(g.target != ACCEL for g in plan.groups)} host layer(s).",
        " * Build: cc -O2 -std=c99 -Wall -Werror -o network program.c  (-DQT_DUMP_LAYERS: also dump every layer)",
        " * Run:   network INPUT OUTPUT [DUMP]  (raw int8: N images in, N x the end points out) */",
        f"#define QT_ISA_BLOCK {accelerator.channel_block}",
        f"#define QT_ISA_INP_BYTES {accelerator.buffers.input}",
        f"#define QT_ISA_WGT_BYTES {accelerator.buffers.weight}",
        f"#define QT_ISA_ACC_BYTES {accelerator.buffers.accumulator}",
    ])
    body = f"""#define QT_ARENA_BYTES {max(arena, 1)}
#define QT_CONST_BYTES {len(constants_segment)}
{"static int8_t qt_arena[QT_ARENA_BYTES]; /* DRAM, DATA segment: every activation but the input and end points */" if arena else ""}

#ifdef QT_DUMP_LAYERS
#define QT_DUMP_PACKED(offset, data, h, w, c, sh, sw, sc) qt_unpack((data), qt_dump_layers + (offset), h, w, c, sh, sw, sc)
#else
#define QT_DUMP_PACKED(offset, data, h, w, c, sh, sw, sc) ((void)0)
#endif

/* ---- DRAM, CONST segment: tiled weights and shifted biases ({len(lowering.constants)} bytes) ---- */

{c_array("qt_accel_const", np.frombuffer(constants_segment, np.int8)) if functions else "/* (none: no layer runs on the accelerator) */"}
/* ---- accelerator functions: instruction streams ({INSTRUCTION_BYTES} bytes an instruction) ---- */

{programs}
/* ---- host constants ({host_constant_bytes} bytes) ---- */

{"".join(host_constants)}
/* ---- host layers ---- */

{chr(10).join(host_functions)}
"""
    source = program_source(header, [RUNTIME_HEADER.name, ISA_HEADER.name], math.prod(shapes[NETWORK_INPUT]),
                            [math.prod(shapes[name]) for name in end_points], offset, body, "\n".join(statements))
    files = {}
    for function in functions:
        files[f"{function.name}.bin"] = function.binary
        files[f"{function.name}.lst"] = function.listing().encode()
    return AccelProgram(
        source=source, headers={RUNTIME_HEADER.name: RUNTIME_HEADER.read_text(), ISA_HEADER.name: ISA_HEADER.read_text()},
        symbols=symbols, input_shape=tuple(shapes[NETWORK_INPUT]), end_points=end_points,
        shapes={name: shapes[name] for name in layers}, constant_bytes=host_constant_bytes + len(lowering.constants),
        arena_bytes=arena, files=files, functions=functions, accel_constant_bytes=len(lowering.constants), statistics=stats)


def _lower_region(region: Region, layers: dict, ir: Ir, lowering: Lowering, tensor_at) -> AccelFunction:
    start_all = len(lowering.instructions)
    segments = {}
    for name in region.layers:
        layer = layers[name]
        op = IR_OPS.get(layer["operation"])
        if op is None or op.lower_accel is None:
            raise CodegenError(f"layer {name}: operation {layer['operation']} has no accelerator lowering (IrOp.lower_accel); "
                               f"the partition should have kept it on the host")
        lowering.forget()
        start = len(lowering.instructions)
        inputs = [tensor_at(producer) for producer in layer["previous_layer"]]
        try:
            op.lower_accel(layer, ir.params.get(name, {}), inputs, tensor_at(name), lowering, name)
        except (LoweringError, ValueError) as error:
            raise CodegenError(f"{region.name}: {error}") from None
        segments[name] = (start - start_all, len(lowering.instructions) - start)
    lowering.emit(Finish(note=f"end of {region.name}"))
    instructions = lowering.instructions[start_all:]
    del lowering.instructions[start_all:]
    return AccelFunction(region.name, list(region.layers), instructions, segments)


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


def _c_bytes(name: str, data: bytes) -> str:
    lines = [",".join(str(b) for b in data[start : start + VALUES_PER_LINE]) for start in range(0, len(data), VALUES_PER_LINE)]
    body = ",\n    ".join(lines)
    return f"static const uint8_t {name}[{len(data)}] = {{\n    {body}\n}};\n"


def plot_cycles(program: AccelProgram, accelerator, path, title: str):
    """Estimated cycles per accelerator layer, stacked by instruction kind (a bare Figure on the
    Agg canvas, as the other plots)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    per_layer = {layer: stats for function in program.functions for layer, stats in function.layer_statistics(accelerator).items()}
    names = list(per_layer)
    figure = Figure(figsize=(max(6.0, 0.22 * len(names) + 2.5), 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    bottom = np.zeros(len(names))
    for kind, colour in (("load", "tab:blue"), ("gemm", "tab:orange"), ("alu", "tab:green"), ("store", "tab:red")):
        values = np.array([per_layer[name][f"cycles_{kind}"] for name in names])
        axes.bar(range(len(names)), values, bottom=bottom, color=colour, label=kind.upper())
        bottom += values
    axes.set_xticks(range(len(names)), [name[-28:] for name in names], rotation=90, fontsize=5)
    axes.set_ylabel("estimated cycles (target cost model)")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=7)
    figure.savefig(path, dpi=110)
    return path
