"""The concurrent schedule (core/backends/accel/schedule.py, isa.py's units and dependency tokens, qt_isa.h's
QT_ISA_SCHEDULE, cost.py's timeline): every conflict between two units is ordered by the tokens (checked against an
independent oracle on random programs); the simulator running the units as far ahead as the tokens allow, either way,
gives the program order's bytes on MLCommons' models, and a missing token gives other bytes; the cost model times the
critical path as worked out by hand, and a function's layers add up to it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PROJECT_ROOT
from core.backends import program as program_module
from core.backends.accel.cost import CostModel
from core.backends.accel.isa import Alu, Finish, Gemm, Index, Load, Loop, Store
from core.backends.accel.partition import partition
from core.backends.accel.schedule import accesses, insert_tokens
from core.backends.accel.target import load_target
from core.backends.c.build import compile_program, run_program
from core.backends.program import generate_program
from core.frontend.tflite import read_tflite
from core.ir.simulator import IntegerSimulator
from core.ir.tflite_ir import ir_of_tflite
from test_accel_cost import MLPERF_TINY, assert_the_host_kernels_bytes

TARGETS = PROJECT_ROOT / "conf" / "target"
_, ACCEL_TFLITE = load_target(TARGETS / "accel_tflite.yaml")
FOUR_UNITS = {"LOAD": 0, "GEMM": 1, "ALU": 2, "STORE": 3}


def _mlperf(model: str):
    path = MLPERF_TINY[model]
    if not path.exists():
        pytest.skip(f"needs {path}")
    ir = ir_of_tflite(read_tflite(path))
    return ir, partition(ir, ACCEL_TFLITE)


# --- the tokens order every conflict: an oracle on random programs -----------------------------------------------


@st.composite
def programs(draw) -> list:
    """Short programs over tiny buffers and DATA, so that their accesses overlap often."""
    base, size = st.integers(0, 6), st.integers(1, 3)
    made = []
    for _ in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from(["LOAD", "LOADDATA", "GEMM", "ALU", "STORE"]))
        if kind == "LOAD":
            made.append(Load(draw(st.sampled_from(["INP", "WGT", "ACC"])), 0, draw(base), (1, draw(size), 1), (0, 1, 0), const=True))
        elif kind == "LOADDATA":
            made.append(Load(draw(st.sampled_from(["INP", "ACC8"])), 16 * draw(base), draw(base), (1, draw(size), 1), (0, 1, 0)))
        elif kind == "GEMM":
            made.append(Gemm(Loop(draw(size)), Index(draw(base), 1), Index(draw(base), 1), Index(draw(st.integers(0, 1)), 1),
                             reset=draw(st.booleans())))
        elif kind == "ALU":
            made.append(Alu("ADD", Loop(draw(size)), Index(draw(base), 1), draw(st.one_of(st.none(), st.builds(Index, base, st.just(1))))))
        else:
            made.append(Store(16 * draw(base), draw(base), (1, draw(size), 1), (0, 1, 0)))
    return made + [Finish()]


def _happens_before(instructions: list, unit_of: dict[str, int]) -> list[int]:
    """Per instruction, a bit set of the instructions that must have finished before it starts: its unit's earlier ones
    and, through the tokens matched in order per pair of units, the other units' (transitively)."""
    before, last_of_unit = [], {}
    pushed: dict[tuple[int, int], list[int]] = {}
    popped: dict[tuple[int, int], int] = {}
    for position, instruction in enumerate(instructions):
        if isinstance(instruction, Finish):
            before.append(0)
            continue
        unit = unit_of[instruction.kind]
        reach = 0
        if unit in last_of_unit:
            reach |= before[last_of_unit[unit]] | 1 << last_of_unit[unit]
        for other in range(4):
            if instruction.pop >> other & 1:
                count = popped.get((other, unit), 0)
                source = pushed[other, unit][count]  # the FIFO's next token (an IndexError: popped, never pushed)
                popped[other, unit] = count + 1
                reach |= before[source] | 1 << source
        for other in range(4):
            if instruction.push >> other & 1:
                pushed.setdefault((unit, other), []).append(position)
        before.append(reach)
        last_of_unit[unit] = position
    assert all(len(pushed.get(pair, [])) == popped.get(pair, 0) for pair in {*pushed, *popped}), "a token pushed and never popped"
    return before


@settings(max_examples=300, deadline=None)
@given(programs(), st.sampled_from([FOUR_UNITS, {"LOAD": 0, "GEMM": 1, "ALU": 1, "STORE": 2}]))
def test_every_conflict_between_two_units_is_ordered_by_the_tokens(instructions, unit_of):
    scheduled = insert_tokens(instructions, unit_of, block=16)
    assert [dataclasses.replace(i, pop=0, push=0) if not isinstance(i, Finish) else i for i in scheduled] == instructions
    before = _happens_before(scheduled, unit_of)
    for j, later in enumerate(scheduled):
        for i, earlier in enumerate(scheduled[:j]):
            if isinstance(earlier, Finish) or isinstance(later, Finish) or unit_of[earlier.kind] == unit_of[later.kind]:
                continue
            if any(a.conflicts(b) for a in accesses(earlier, 16) for b in accesses(later, 16)):
                assert before[j] >> i & 1, f"instruction {j} ({later.text()}) may run before {i} ({earlier.text()})"


def test_one_unit_needs_no_token():
    serial = {"LOAD": 0, "GEMM": 0, "ALU": 0, "STORE": 0}
    instructions = [Load("INP", 0, 0, (1, 1, 1), (0, 1, 0)), Gemm(Loop(1), Index(0), Index(0), Index(0)), Store(0, 0, (1, 1, 1), (0, 1, 0))]
    assert insert_tokens(instructions, serial, 16) == instructions


# --- the simulator honours them ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", [0, 2])
@pytest.mark.parametrize("model", ["resnet8", "kws"])
def test_the_units_in_any_order_the_tokens_allow_give_the_program_orders_bytes(model, schedule, tmp_path):
    """0: program order, the tokens ignored; 2: the stores and the computation as early as the tokens allow (1, the
    loads as far ahead as they allow, is the default every other test runs)."""
    ir, plan = _mlperf(model)
    assert_the_host_kernels_bytes(ir, generate_program(ir, plan), tmp_path, schedule=schedule)


def _without_one_token(instructions, unit_of, block):
    """insert_tokens, less the first token of the function: its pop and the push it matched (the first from that unit to
    that one)."""
    scheduled = insert_tokens(instructions, unit_of, block)
    waiting = next(k for k, i in enumerate(scheduled) if not isinstance(i, Finish) and i.pop)
    unit, source = unit_of[scheduled[waiting].kind], (scheduled[waiting].pop & -scheduled[waiting].pop).bit_length() - 1
    pushing = next(k for k, i in enumerate(scheduled) if not isinstance(i, Finish) and unit_of[i.kind] == source and i.push >> unit & 1)
    scheduled[waiting] = dataclasses.replace(scheduled[waiting], pop=scheduled[waiting].pop & ~(1 << source))
    scheduled[pushing] = dataclasses.replace(scheduled[pushing], push=scheduled[pushing].push & ~(1 << unit))
    return scheduled


def test_a_missing_token_gives_other_bytes(tmp_path, monkeypatch):
    """The first GEMM waits for its weights' load; without that token the computation, run first (schedule 2), reads
    buffers not yet loaded."""
    ir, plan = _mlperf("resnet8")
    monkeypatch.setattr(program_module, "insert_tokens", _without_one_token)
    program = generate_program(ir, plan)
    inputs = np.random.default_rng(7).integers(-128, 128, (1, *ir.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    binary = compile_program(program.write(tmp_path), tmp_path / "network", defines=("QT_PORTABLE", "QT_ISA_SCHEDULE=2"))
    outputs = run_program(binary, program, inputs, tmp_path / "run").outputs
    assert not all(np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]) for name in program.end_points)


# --- the cost model times the critical path ----------------------------------------------------------------------------


def test_two_double_buffered_tiles_overlap_as_worked_out_by_hand():
    """Two tiles in the two halves of INP and ACC: the second's load runs during the first's GEMM, its GEMM during the
    first's ALU, and so on; each instruction's own cycles are the cost model's (the program's fetch aside: below)."""
    cost = CostModel.of(dataclasses.replace(ACCEL_TFLITE, fetch_program=False))
    tiles = []
    for half in (0, 1):
        inp, acc, data = 64 * half, 128 * half, 4096 * half
        tiles.append([Load("INP", data, inp, (1, 64, 1), (0, 1, 0)), Gemm(Loop(64, 9), Index(acc, 1), Index(inp, 1), Index(0, 0, 1)),
                      Alu("RMUL", Loop(64), Index(acc, 1), None, 3, round=31), Store(8192 + 1024 * half, acc, (1, 64, 1), (0, 1, 0))])
    instructions = insert_tokens([*tiles[0], *tiles[1], Finish()], ACCEL_TFLITE.unit_of, 16)
    load, gemm, alu, store = (cost.instruction(i) for i in tiles[0])
    first = [load, load + gemm, load + gemm + alu, load + gemm + alu + store]
    second_load = 2 * load
    second_gemm = max(second_load, first[1]) + gemm
    second_alu = max(second_gemm, first[2]) + alu
    second_store = max(second_alu, first[3]) + store
    ends = cost.timeline(instructions)
    assert ends[:8] == [first[0], first[1], first[2], first[3], second_load, second_gemm, second_alu, second_store]
    assert ends[8] == second_store + ACCEL_TFLITE.cycles["sync"]
    assert ends[8] < sum(cost.instruction(i) for i in instructions)  # the overlap


def test_an_instruction_starts_no_earlier_than_its_bytes_are_read_from_the_program_memory():
    """accel_tflite reads its instruction streams from flash as the units run (fetch_program): three ALU operations of two
    cycles each on one unit end as their bytes arrive, 64 bytes an instruction at 1 byte a cycle after flash's latency,
    where a program the units have from the start ends them one after the other."""
    alus = [Alu("ADD", Loop(1), Index(0, 1), None, 1) for _ in range(3)]
    flash, each = ACCEL_TFLITE.memory_of("program"), CostModel.of(ACCEL_TFLITE).instruction(alus[0])
    assert ACCEL_TFLITE.fetch_program and flash.bytes_per_cycle == 1
    assert CostModel.of(ACCEL_TFLITE).timeline(alus) == [flash.latency + 64 * (k + 1) + each for k in range(3)]
    assert CostModel.of(dataclasses.replace(ACCEL_TFLITE, fetch_program=False)).timeline(alus) == [each, 2 * each, 3 * each]


@pytest.mark.parametrize("model", ["resnet8", "vww"])
def test_the_layers_add_up_to_the_critical_path_which_no_unit_exceeds_alone(model):
    ir, plan = _mlperf(model)
    program = generate_program(ir, plan)
    cost = CostModel.of(ACCEL_TFLITE)
    for function in program.functions:
        total = max(cost.timeline(function.instructions))
        layers = function.layer_statistics(cost)
        assert sum(stats["cycles"] for stats in layers.values()) == pytest.approx(total - ACCEL_TFLITE.cycles["sync"])
        busy = {kind: sum(cost.instruction(i) for i in function.instructions if i.kind == kind) for kind in FOUR_UNITS}
        assert max(busy.values()) <= total < sum(busy.values())
    assert program.statistics["cycles"] < program.statistics["cycles_serial"]
