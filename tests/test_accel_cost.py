"""The cost model's memories and host (core/backends/accel/cost.py): every DMA transfer priced by the memory area the
target places its data in, as the target file's numbers say; the host's layers and layout changes costed, so a
partition's estimate is one figure; a program larger than a memory refused naming it; the input of 3 channels packed by
the DMA as the first convolution reads it (no host copy, no packed copy in memory). On MLCommons' int8 files, every
layer on the accelerator."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np
import pytest
import yaml

from conftest import MODELS, PROJECT_ROOT
from core.backends.accel.cost import CostModel
from core.backends.accel.isa import Load, Store
from core.backends.accel.ops.pool import division
from core.backends.c.build import compile_program, run_program
from core.ir.op import NETWORK_INPUT
from core.ir.simulator import IntegerSimulator
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


def assert_the_host_kernels_bytes(ir, program, work, images: int = 2, schedule: int = 1) -> None:
    """The program (host C driving the ISA simulator, its units in qt_isa.h's QT_ISA_SCHEDULE order) gives every end point's
    byte the host kernels give, on random inputs."""
    inputs = np.random.default_rng(7).integers(-128, 128, (images, *ir.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    binary = compile_program(program.write(work), work / "network", defines=("QT_PORTABLE", f"QT_ISA_SCHEDULE={schedule}"))
    outputs = run_program(binary, program, inputs, work / "run").outputs
    for name in program.end_points:
        assert np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]), name


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
    # the softmax kept on the host: a target without accel_tflite's softmax pattern
    accelerator = dataclasses.replace(accelerator, patterns=tuple(p for p in accelerator.patterns if "softmax" not in p.operations))
    plan = partition(resnet8_ir, accelerator)
    program = generate_program(resnet8_ir, plan)
    host_layers = [group for group in plan.groups if group.target == HOST]
    assert [group.operation for group in host_layers] == ["softmax"]
    for group in host_layers:
        layer = next(layer for layer in resnet8_ir.layers if layer.name == group.layer)
        read = sum(math.prod(program.shapes[name]) for name in layer.operands())  # int8: a byte an element
        written = math.prod(program.shapes[group.layer])
        assert program.host_cycles[group.layer] == pytest.approx(group.macs * host["cycles_per_mac"] + (read + written) * host["cycles_per_byte"])
    layout_changes = [name for name in program.host_cycles if name.split(" ")[0] in ("pack", "unpack")]
    assert len(layout_changes) == len([c for c in plan.packs if not c.by_dma]) + len(plan.unpacks) > 0  # the DMA's packs: no host work
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


def test_an_input_of_three_channels_is_packed_by_the_dma_as_the_first_convolution_reads_it(resnet8_ir, tmp_path):
    """The pack stays a pack point of the plan (seed 004 [0055]), made by narrow loads of the HWC image (3 bytes a pixel,
    the block's other lanes the padding value), not by the host: no host step, no 16-channel copy in the arena; every
    output byte still the host kernels'."""
    _, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    plan = partition(resnet8_ir, accelerator)
    (input_pack,) = [change for change in plan.packs if change.tensor == NETWORK_INPUT]
    assert input_pack.by_dma and input_pack.shape == [32, 32, 3]
    program = generate_program(resnet8_ir, plan)
    assert f"pack {NETWORK_INPUT}" not in program.host_cycles and [name for name in program.host_cycles if name.startswith("unpack ")]
    assert program.arena_bytes < input_pack.packed_bytes + max(c.packed_bytes for c in plan.unpacks) + 32 * 32 * 16 * 2
    narrow = [i for f in program.functions for i in f.instructions if isinstance(i, Load) and i.narrow]
    assert narrow and all(i.narrow == 3 and i.buffer == "INP" and not i.const for i in narrow)
    assert_the_host_kernels_bytes(resnet8_ir, program, tmp_path)


MLPERF_TINY = {"resnet8": RESNET8, "vww": MODELS / "mlperf_tiny_vww" / "vww_96_int8.tflite",
               "kws": MODELS / "mlperf_tiny_kws" / "kws_ref_model.tflite", "ad": MODELS / "mlperf_tiny_ad" / "ad01_int8.tflite"}


@pytest.mark.parametrize("model", MLPERF_TINY)
def test_mlperf_tinys_int8_models_run_every_layer_on_the_accelerator_every_output_byte_the_host_kernels(model, tmp_path):
    """MLCommons' four files on accel_tflite: the depthwise layers at full width, keyword spotting's 10x4 convolution and
    25x5 average pool, visual wake words' 3x3 one (a division by RMUL), the flatten after the pool (a DMA copy), the
    softmax (the vector ALU's reductions, exp table and Newton-Raphson reciprocal), compressed weights, the input packed
    by the DMA."""
    path = MLPERF_TINY[model]
    if not path.exists():
        pytest.skip(f"needs {path}")
    ir = ir_of_tflite(read_tflite(path))
    _, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    plan = partition(ir, accelerator)
    assert not [group for group in plan.groups if group.target == HOST], \
        [(group.layer, group.reason) for group in plan.groups if group.target == HOST]
    assert_the_host_kernels_bytes(ir, generate_program(ir, plan), tmp_path)


@pytest.mark.parametrize("count", [3, 5, 6, 7, 9, 12, 25, 49, 125, 1000])
def test_the_rmul_division_of_an_average_pool_is_tflites_rounded_division_for_every_sum(count):
    """(sum + n/2) / n for a positive sum, (sum - n/2) / n for a negative one, C's truncating division as TFLite's
    AVERAGE_POOL_2D computes it, against RMUL (a * m + 2^(r-1)) >> r of the positive and of the negative part, added:
    every sum of n int8s."""
    multiplier, shift = division(count)
    sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64)
    half = count // 2
    truncated = np.where(sums > 0, (sums + half) // count, -((-sums + half) // count))
    rmul = lambda part: (part * multiplier + (1 << (shift - 1))) >> shift  # noqa: E731
    assert multiplier < 2**31 and shift <= 62
    assert np.array_equal(rmul(np.maximum(sums, 0)) + rmul(np.minimum(sums, 0)), truncated)


def test_a_layout_change_of_whole_blocks_in_hwc_order_is_no_copy(tmp_path):
    """Anomaly detection's 1 x 1 x 640 input and output: packed, their bytes are the HWC bytes, so the plan's pack and
    unpack are no host step and no second buffer; every output byte still the host kernels'."""
    path = MLPERF_TINY["ad"]
    if not path.exists():
        pytest.skip(f"needs {path}")
    ir = ir_of_tflite(read_tflite(path))
    _, accelerator = load_target(TARGETS / "accel_tflite.yaml")
    plan = partition(ir, accelerator)
    program = generate_program(ir, plan)
    assert plan.packs and plan.unpacks  # where the layout changes, as the plan says
    assert not [name for name in program.host_cycles if name.split(" ")[0] in ("pack", "unpack")]
    assert "qt_pack(" not in program.source.split("run_network")[-1] and "qt_unpack(" not in program.source.split("run_network")[-1]
    assert program.arena_bytes < 2 * max(math.prod(shape) for shape in program.shapes.values())  # no HWC copy beside the packed
    assert_the_host_kernels_bytes(ir, program, tmp_path)
