"""The cost model's memories and host (core/backends/accel/cost.py): every DMA transfer priced by the memory area the
target places its data in, as the target file's numbers say; the host's layers and layout changes costed, so a
partition's estimate is one figure; a program larger than a memory refused naming it. On MLCommons' int8 ResNet-8, whose
reshape and softmax stay on the host."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest
import yaml

from conftest import MODELS, PROJECT_ROOT
from core.backends.accel.cost import CostModel
from core.backends.accel.isa import Load, Store
from core.backends.accel.partition import HOST, partition
from core.backends.accel.target import Memory, load_target
from core.backends.c.program import CodegenError
from core.backends.program import generate_program
from core.frontend.tflite import read_tflite
from core.ir.tflite_ir import ir_of_tflite

RESNET8 = MODELS / "mlperf_tiny_resnet8" / "pretrainedResnet_quant.tflite"
TARGETS = PROJECT_ROOT / "conf" / "target"


@pytest.fixture(scope="module")
def resnet8_ir():
    if not RESNET8.exists():
        pytest.skip(f"needs {RESNET8}")
    return ir_of_tflite(read_tflite(RESNET8))


def _expected_dma_cycles(section: dict, instruction) -> int:
    """A transfer's cycles from the target file's numbers: set-up, the memory's latency, bytes over its bandwidth."""
    role = "weights" if isinstance(instruction, Load) and instruction.const else "activations"
    memory = section["memories"][section["placement"][role]]
    block = section["gemm_block"]["block_in"]
    setup = section["cycles"]["load" if isinstance(instruction, Load) else "store"]
    return math.ceil(setup + memory["latency"] + instruction.dram_bytes(block) / memory["bytes_per_cycle"])


@pytest.mark.parametrize("target", ["accel_tflite", "accel"])
def test_each_transfer_costs_the_latency_and_bandwidth_of_the_memory_its_data_lives_in(resnet8_ir, target):
    """accel_tflite: the weights (CONST loads) in flash at 1 byte a cycle after 64, the activations in SRAM at 8 after 32;
    accel: one DRAM at 8 bytes a cycle, no latency (today's figures, as its own data)."""
    section = yaml.safe_load((TARGETS / f"{target}.yaml").read_text())["accelerator"]
    _, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    if target == "accel":  # the same program priced by accel's memories (its patterns are TF2IR's)
        accelerator = dataclasses.replace(accelerator, memories=MappingProxyType({"dram": Memory(**section["memories"]["dram"])}),
                                          placement=MappingProxyType(section["placement"]))
        section = {**section, "gemm_block": {"block_in": 16}, "cycles": dict(accelerator.cycles)}
    program = generate_program(resnet8_ir, partition(resnet8_ir, accelerator))
    cost = CostModel.of(accelerator)
    transfers = [i for function in program.functions for i in function.instructions if isinstance(i, (Load, Store))]
    assert any(isinstance(i, Load) and i.const for i in transfers) and any(isinstance(i, Load) and not i.const for i in transfers)
    for instruction in transfers:
        assert cost.instruction(instruction) == _expected_dma_cycles(section, instruction), instruction


def test_the_host_is_costed_per_mac_and_per_byte_so_a_partition_has_one_total(resnet8_ir):
    data, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    host = data["accelerator"]["host"]
    plan = partition(resnet8_ir, accelerator)
    program = generate_program(resnet8_ir, plan)
    host_layers = [group for group in plan.groups if group.target == HOST]
    assert [group.operation for group in host_layers] == ["reshape", "softmax"]
    for group in host_layers:
        layer = next(layer for layer in resnet8_ir.layers if layer.name == group.layer)
        read = sum(math.prod(program.shapes[name]) for name in layer.operands())  # int8: a byte an element
        written = math.prod(program.shapes[group.layer])
        assert program.host_cycles[group.layer] == pytest.approx(group.macs * host["cycles_per_mac"] + (read + written) * host["cycles_per_byte"])
    layout_changes = [name for name in program.host_cycles if name.split(" ")[0] in ("pack", "unpack")]
    assert len(layout_changes) == len(plan.packs) + len(plan.unpacks) > 0
    assert all(program.host_cycles[name] > 0 for name in layout_changes)
    stats = program.statistics
    assert stats["cycles_host"] == pytest.approx(sum(program.host_cycles.values()))
    assert stats["cycles_total"] == pytest.approx(stats["cycles"] + stats["cycles_host"])


def test_a_program_larger_than_its_memory_is_refused_naming_the_memory(resnet8_ir):
    _, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    small_flash = {**accelerator.memories, "flash": dataclasses.replace(accelerator.memories["flash"], size=64 * 1024)}
    tight = dataclasses.replace(accelerator, memories=MappingProxyType(small_flash))
    with pytest.raises(CodegenError, match=r"the program's weights and program \(\d+ bytes\) exceed accelerator\.memories\.flash\.size "
                                           r"\(65536 bytes\)"):
        generate_program(resnet8_ir, partition(resnet8_ir, tight))
