"""Every limit accel_tflite declares, narrowed in turn, on MLCommons' int8 models (keyword spotting: conv, depthwise,
average pool, fully connected, softmax; ResNet-8: adds; anomaly detection: fully connected layers of single rounding):
the compiler refuses naming the key, or keeps layers on the host with their reasons, and no instruction it emits is
outside the limit: no shift immediate outside shift_range, no buffer access past the buffer, no program larger than a
memory. The limits are read back from the instructions themselves (core/backends/accel/schedule.py's accesses), not
from what the partition decided."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import MODELS, PROJECT_ROOT
from core.backends.accel.isa import Alu
from core.backends.accel.lowering import LOWERINGS, SHIFT_OPERATIONS, LoweringError
from core.backends.accel.partition import ACCEL, partition
from core.backends.accel.schedule import accesses
from core.backends.accel.target import AcceleratorError
from core.backends.c.emitter import CodegenError
from core.backends.program import generate_program
from core.frontend.tflite import read_tflite
from core.ir.tflite_ir import ir_of_tflite
from stages.partition import target_accelerator

FILES = {"keyword spotting": "mlperf_tiny_kws/kws_ref_model.tflite", "ResNet-8": "mlperf_tiny_resnet8/pretrainedResnet_quant.tflite",
         "anomaly detection": "mlperf_tiny_ad/ad01_int8.tflite"}
TARGET = yaml.safe_load((PROJECT_ROOT / "conf" / "target" / "accel_tflite.yaml").read_text())
# each narrowing: the key, and the value it takes (the rest of the target as shipped)
NARROWINGS = [
    ("shift_range", {"min": 0, "max": 5}),
    ("shift_range", {"min": 0, "max": 12}),
    ("shift_range", {"min": 2, "max": 31}),
    ("buffers", {"input": 1024, "weight": 262144, "accumulator": 131072}),
    ("buffers", {"input": 32768, "weight": 2048, "accumulator": 131072}),
    ("buffers", {"input": 32768, "weight": 262144, "accumulator": 4096}),
    ("memories", {"sram": {"bytes_per_cycle": 8, "latency": 32, "size": 16384}, "flash": TARGET["accelerator"]["memories"]["flash"]}),
    ("memories", {"sram": TARGET["accelerator"]["memories"]["sram"], "flash": {"bytes_per_cycle": 1, "latency": 64, "size": 32768}}),
]
PATTERNS = TARGET["accelerator"]["patterns"]


def _with_pattern(name: str, **changes) -> list[dict]:
    """The target's patterns with pattern `name` narrowed."""
    return [{**pattern, **changes} if pattern["name"] == name else pattern for pattern in copy.deepcopy(PATTERNS)]


NARROWINGS += [
    ("gemm_block", {"batch": 1, "block_in": 8, "block_out": 8}),
    ("patterns", _with_pattern("conv2d_zp_bias_requantize_clamp", max_kernel={"height": 1, "width": 1})),
    ("patterns", _with_pattern("conv2d_zp_bias_requantize_clamp", strides=[1], padding=False)),
    ("patterns", _with_pattern("depthwise_conv2d_zp_bias_requantize_clamp", max_kernel={"height": 1, "width": 1})),
]
SPACE_BYTES = {"INP": lambda accelerator: accelerator.buffers.input, "WGT": lambda accelerator: accelerator.buffers.weight,
               "ACC": lambda accelerator: accelerator.buffers.accumulator}
VECTOR_BYTES = {"INP": 1, "WGT": 1, "ACC": 4}  # schedule.accesses' units: vectors of a block of int8s (INP, WGT) or int32s (ACC)


@pytest.fixture(scope="module")
def irs():
    missing = [name for name in FILES.values() if not (MODELS / name).exists()]
    if missing:
        pytest.skip(f"MLCommons' int8 files are not in ../shared/models: {missing}")
    return {label: ir_of_tflite(read_tflite(MODELS / name)) for label, name in FILES.items()}


# a key narrowed with another that must agree with it: the layout's channel block is the GEMM's
WITH = {"gemm_block": lambda value: {"layout": ["H", "W", f"C/{value['block_out']}", str(value["block_out"])]}}


def _narrowed(key: str, value) -> dict:
    target = copy.deepcopy(TARGET)
    target["accelerator"][key] = value
    target["accelerator"].update(WITH[key](value) if key in WITH else {})
    target["scheme"] = "tflite_int8"
    return target


@pytest.mark.parametrize("key, value", NARROWINGS, ids=[f"{key}={value}"[:60] if key != "patterns" else
                                                       f"patterns narrowed {position}" for position, (key, value) in enumerate(NARROWINGS)])
def test_a_narrowed_limit_is_refused_or_kept_on_the_host_never_exceeded(irs, key, value):
    _, accelerator = target_accelerator(_narrowed(key, value))
    low, high = accelerator.shift_range
    for label, ir in irs.items():
        plan = partition(ir, accelerator)
        for group in plan.groups:
            assert group.reason, f"{label}: layer {group.layer} placed without a reason"
        try:
            program = generate_program(ir, plan)
        except (AcceleratorError, CodegenError, LoweringError) as refused:  # a refusal: it names the key narrowed
            assert f"{key}" in str(refused), f"{label}: {refused}"
            continue
        block = accelerator.channel_block
        for function in program.functions:
            for instruction in function.instructions:
                if isinstance(instruction, Alu) and instruction.op in SHIFT_OPERATIONS and instruction.src is None:
                    assert low <= instruction.imm <= high, f"{label}: {instruction.text()} outside shift_range [{low}, {high}]"
                for access in accesses(instruction, block):
                    if access.space in SPACE_BYTES:
                        used = access.high * block * VECTOR_BYTES[access.space]
                        assert used <= SPACE_BYTES[access.space](accelerator), f"{label}: {instruction.text()} past {access.space}"
        # a layer on the accelerator: every shift its lowering declares (those the ALU takes from vectors too) in range,
        # and the pattern it matched takes its window
        for group in plan.groups:
            if group.target == ACCEL:
                layer = ir.layer(group.layer)
                pattern = next(pattern for pattern in accelerator.patterns if pattern.name == group.pattern)
                assert not pattern.refusals(layer), (label, group.layer, pattern.refusals(layer))
                declared = [*layer.shifts(), *LOWERINGS[layer.operation].shifts(layer, ir.params.get(layer.name, {}))]
                assert all(low <= shift.amount <= high for shift in declared), (label, group.layer, declared)
        if key == "memories":
            assert program.arena_bytes <= accelerator.memories["sram"].size and program.accel_constant_bytes <= accelerator.memories["flash"].size


def test_a_shift_range_narrowed_below_the_requantization_keeps_those_layers_on_the_host_saying_why(irs):
    """The issue's case: shift_range.max=5 on the tflite_int8 dialect, whose right shifts reach 8 and more."""
    _, accelerator = target_accelerator(_narrowed("shift_range", {"min": 0, "max": 5}))
    plan = partition(irs["keyword spotting"], accelerator)
    host = [group for group in plan.groups if group.target != ACCEL and "shift_range" in group.reason]
    assert host and all("outside shift_range [0, 5]" in group.reason for group in host)
    assert any("RSHRA by the right shift" in group.reason for group in host)


def test_the_partition_picture_of_long_fused_names_reads_at_its_real_size(irs, tmp_path):
    """ResNet-8's TFLite names run to 200 characters: shortened beside the bars, the picture stays within a screen's width
    and its title is wrapped over the axes, not cut (it was 2004 pixels wide with the title running off the right)."""
    from PIL import Image

    from core.reports.partition import LABEL_CHARACTERS, plot_partition, short_name

    _, accelerator = target_accelerator(_narrowed("shift_range", {"min": 0, "max": 5}))
    plan = partition(irs["ResNet-8"], accelerator)
    picture = plot_partition(plan, tmp_path / "partition.png")
    assert Image.open(picture).size[0] <= 1400
    long_name = max((group.layer for group in plan.groups), key=len)
    shortened = short_name(long_name)
    assert len(long_name) > LABEL_CHARACTERS >= len(shortened) and long_name.endswith(shortened.split("…")[1])
