"""The accelerator on the tflite_int8 scheme (conf/target/accel_tflite.yaml, core/backends/accel/ops/affine_*.py):
every lowering, through partition + codegen + the C ISA simulator, against the dialect's host kernel (itself
TFLite's reference kernels' arithmetic: tests/test_tflite.py) on random shapes, strides, dilations and paddings, channel
counts off the block, zero points at -128 and 127, multipliers at 2^30 and near 2^31, shifts 0 and -31 (and left
shifts), with each of seed 004 Fig. 4's bias placements; the new ALU operations against tflite_math at int32's
extremes; and what the accelerator cannot run staying on the host with the reason."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import PROJECT_ROOT
from core.backends.accel.isa import Alu, Index, Loop, decode, encode, layout_header
from core.backends.accel.partition import ACCEL, HOST, partition
from core.backends.accel.target import Accelerator, AcceleratorError, accelerator_of, load_target
from core.backends.c.build import compile_program, run_program
from core.backends.program import generate_program
from core.ir.io import validate_ir
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT
from core.ir.common_scale import common_scale_multipliers
from core.ir.simulator import IntegerSimulator
from core.quantize.tflite_math import multiply_by_quantized_multiplier, rounding_divide_by_pot

TARGET_DATA, ACCEL_TFLITE = load_target(PROJECT_ROOT / "conf" / "target" / "accel_tflite.yaml")
PLACEMENTS = {"bias_in_accumulators": True, "bias_by_the_alu": False}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
SCHEME = "tflite_int8"
LAYERS = settings(max_examples=int(os.environ.get("QT_ACCEL_EXAMPLES", "12")), deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _accelerator(bias_in_accumulators: bool, block: int = 16) -> Accelerator:
    """accel_tflite, or a smaller one (block 4, small buffers: tiles over rows and channel blocks)."""
    if block == 16:
        return dataclasses.replace(ACCEL_TFLITE, bias_in_accumulators=bias_in_accumulators)
    section = {**TARGET_DATA["accelerator"], "gemm_block": {"batch": 1, "block_in": block, "block_out": block},
               "buffers": {"input": block * 96, "weight": block * block * 40, "accumulator": 4 * block * 300},
               "layout": ["H", "W", f"C/{block}", str(block)], "bias_in_accumulators": bias_in_accumulators}
    return Accelerator.from_mapping(section, name="small_tflite")


def _network(layers: list[dict], params: dict) -> Ir:
    validate_ir(layers, origin="test network")
    return Ir.from_json(layers, params)


def _run_on_the_accelerator(ir: Ir, accelerator: Accelerator, work: Path, on_accelerator: list[str], images: int = 3,
                            schedule: int = 1, inputs: np.ndarray | None = None) -> None:
    """The program (host C driving the ISA simulator, its units in the order `schedule` chooses: qt_isa.h's
    QT_ISA_SCHEDULE) gives every end point's byte the host kernels give."""
    plan = partition(ir, accelerator)
    assert [g.layer for g in plan.groups if g.target == ACCEL] == on_accelerator, [(g.layer, g.reason) for g in plan.groups]
    program = generate_program(ir, plan)
    binary = compile_program(program.write(work), work / "network", defines=("QT_PORTABLE", f"QT_ISA_SCHEDULE={schedule}"))
    if inputs is None:
        inputs = np.random.default_rng(len(ir.layers)).integers(-128, 128, (images, *program.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    outputs = run_program(binary, program, inputs, work / "run").outputs
    for name in program.end_points:
        assert np.array_equal(outputs[name].reshape(expected[name].shape), expected[name]), name


# --- random layers at the arithmetic's extremes ---------------------------------------------------------

# the units' order in the ISA simulator (qt_isa.h's QT_ISA_SCHEDULE): loads as far ahead as the tokens allow, or the
# computation and the stores as early; each against the host kernels (the program order, 0, is the simulators' reference)
SCHEDULES = st.sampled_from([1, 2])
zero_points = st.one_of(st.sampled_from([-128, 127, 0]), st.integers(-128, 127))
multipliers = st.one_of(st.sampled_from([2**30, INT32_MAX, INT32_MAX - 1, 1518500250]), st.integers(2**30, INT32_MAX))
right_shifts = st.one_of(st.sampled_from([0, -31, -1]), st.integers(-20, -1))


def _size(height: int, width: int) -> dict:
    return {"height": height, "width": width}


def _out(size: int, kernel: int, stride: int, before: int, after: int) -> int:
    return (size + before + after - kernel) // stride + 1


@st.composite
def windows(draw, max_kernel: int = 3, dilated: bool = False) -> dict:
    """A window's fields (with `dilations` when `dilated`: 1 or 2 along each axis)."""
    kernel = (draw(st.integers(1, max_kernel)), draw(st.integers(1, max_kernel)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilated else (1, 1)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    pads = tuple(draw(st.integers(0, e - 1)) for e in (extent[0], extent[0], extent[1], extent[1]))
    height, width = draw(st.integers(extent[0], 9)), draw(st.integers(extent[1], 9))
    out = (_out(height, extent[0], stride[0], *pads[:2]), _out(width, extent[1], stride[1], *pads[2:]))
    return {"input_size": _size(height, width), "output_size": _size(*out), "kernel_size": _size(*kernel), "stride": _size(*stride),
            "padding": dict(zip(("top", "bottom", "left", "right"), pads)), **({"dilations": _size(*dilation)} if dilated else {})}


@st.composite
def conv_layers(draw, kind: str) -> tuple[dict, dict]:
    """A conv, dwconv or dense layer: random window and channels, per-channel multipliers and shifts from the
    extremes (a few left shifts for conv; a dense layer one shift, "dense_channels" one per channel within 3 of each
    other), int32 bias; its sums on the raw input within int32."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = kind.startswith("dense")
    window = ({"input_size": _size(1, 1), "output_size": _size(1, 1), "kernel_size": _size(1, 1), "stride": _size(1, 1),
               "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0), "dilations": _size(1, 1)} if dense
              else draw(windows(dilated=True)))
    channels = draw(st.integers(1, 40 if dense else 20))
    outputs = channels if kind == "dwconv" else draw(st.integers(1, 20))
    kernel = (window["kernel_size"]["height"], window["kernel_size"]["width"])
    count = outputs if kind != "dense" else 1
    shifts = draw(st.lists(right_shifts if kind != "conv" else st.one_of(right_shifts, st.integers(1, 2)), min_size=count, max_size=count))
    if kind == "dense_channels":  # the single rounding at the smallest shift, the others first shifted left by the difference
        base = draw(st.integers(-31, -4))
        shifts = [base + draw(st.integers(0, 3)) for _ in range(count)]
    fields = {"operation": "dwconv" if kind == "dwconv" else "conv", "scheme": SCHEME, "input_scale": 0.05,
              "input_zero_point": draw(zero_points), "output_scale": 0.1, "output_zero_point": draw(zero_points),
              "output_min": draw(st.sampled_from([-128, -100])), "output_max": draw(st.sampled_from([127, 90])),
              "rounding": "single" if dense else "double", "load_bias": draw(st.booleans()),
              "input_channel_num": channels, "output_channel_num": outputs, **window}
    weight_shape = (1, *kernel, outputs) if kind == "dwconv" else (outputs, *kernel, channels)
    params = {"weight": rng.integers(-127, 128, weight_shape).astype(np.int8),
              "multiplier": np.resize(draw(st.lists(multipliers, min_size=1, max_size=outputs)), outputs).astype(np.int32),
              "shift": np.resize(shifts, outputs).astype(np.int32)}
    if fields["load_bias"]:
        params["bias"] = rng.integers(-2**20, 2**20, outputs).astype(np.int32)
    return fields, params


def _one_layer(fields: dict, params: dict, operands: int = 1) -> Ir:
    layer = {"name": "layer", **fields, "previous_layer": [NETWORK_INPUT] * operands, "next_layer": [END_POINT]}
    return _network([layer], {"layer": params})


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("kind", ["conv", "dwconv", "dense", "dense_channels"])
@LAYERS
@given(layer=st.data(), block=st.sampled_from([16, 4]), schedule=SCHEDULES)
def test_every_conv_lowering_gives_the_host_kernels_bytes(tmp_path_factory, placement, kind, layer, block, schedule):
    fields, params = layer.draw(conv_layers(kind))
    _run_on_the_accelerator(_one_layer(fields, params), _accelerator(PLACEMENTS[placement], block), tmp_path_factory.mktemp("conv"),
                            ["layer"], schedule=schedule)


@st.composite
def pool_layers(draw) -> dict:
    """max_pool (any window, padded), AVERAGE_POOL_2D (unpadded windows: a power of two a shift, any other a division by
    RMUL) or MEAN (the image)."""
    kind = draw(st.sampled_from(["max_pool", "avg_pool", "mean"]))
    channels, zero_point = draw(st.integers(1, 20)), draw(zero_points)
    common = {"scheme": SCHEME, "input_scale": 0.1, "input_zero_point": zero_point, "output_scale": 0.1, "output_zero_point": zero_point,
              "output_min": draw(st.sampled_from([-128, zero_point])), "output_max": 127, "input_channel_num": channels,
              "output_channel_num": channels}
    if kind == "max_pool":
        return {"operation": "max_pool", **common, **draw(windows())}
    if kind == "avg_pool":
        side = draw(st.sampled_from([(1, 2), (2, 2), (2, 1), (4, 2), (4, 4), (8, 8), (3, 1), (3, 3), (5, 5), (7, 7), (25, 5)]))  # beyond 2: global
        rows, columns = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if max(side) <= 2 else (1, 1)
        return {"operation": "avg_pool", **common, "input_size": _size(rows * side[0], columns * side[1]), "kernel_size": _size(*side),
                "stride": _size(*side), "output_size": _size(rows, columns), "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0)}
    height, width = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    return {"operation": "avg_pool", **common, "output_zero_point": draw(zero_points), "output_scale": draw(st.sampled_from([0.1, 0.37, 2.0])),
            "output_min": -128, "multiplier": draw(multipliers), "shift": draw(st.integers(-3, 1)), "input_size": _size(height, width),
            "kernel_size": _size(height, width), "stride": _size(1, 1), "output_size": _size(1, 1),
            "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0)}


@pytest.mark.parametrize("placement", PLACEMENTS)
@LAYERS
@given(fields=pool_layers(), block=st.sampled_from([16, 4]), schedule=SCHEDULES)
def test_every_pool_lowering_gives_the_host_kernels_bytes(tmp_path_factory, placement, fields, block, schedule):
    _run_on_the_accelerator(_one_layer(fields, {}), _accelerator(PLACEMENTS[placement], block), tmp_path_factory.mktemp("pool"), ["layer"],
                            schedule=schedule)


@st.composite
def softmax_layers(draw) -> dict:
    """TFLite's int8 SOFTMAX over C classes (rows of several blocks) of a vector or an H x W image, at scales and betas
    whose differences reach diff_min (exps the kernel skips) or not."""
    classes = draw(st.integers(1, 40))
    shape = draw(st.sampled_from([[classes], [1, 1, classes], [draw(st.integers(1, 3)), draw(st.integers(1, 3)), classes]]))
    return {"operation": "softmax", "scheme": SCHEME, "shape": shape, "input_scale": draw(st.sampled_from([0.004, 0.05, 0.17, 1.0, 8.0])),
            "input_zero_point": draw(zero_points), "output_scale": 1 / 256, "output_zero_point": -128,
            "beta": draw(st.sampled_from([1.0, 0.3, 2.5]))}


@LAYERS
@given(fields=softmax_layers(), block=st.sampled_from([16, 4]), schedule=SCHEDULES)
def test_the_softmax_lowering_gives_the_host_kernels_bytes(tmp_path_factory, fields, block, schedule):
    _run_on_the_accelerator(_one_layer(fields, {}), _accelerator(True, block), tmp_path_factory.mktemp("softmax"), ["layer"],
                            schedule=schedule)


@LAYERS
@given(data=st.data(), block=st.sampled_from([16, 4]), schedule=SCHEDULES)
def test_the_lut_lowering_gives_the_host_kernels_bytes(tmp_path_factory, data, block, schedule):
    """Any table of 256 int8s over a vector or an H x W x C image (LOGISTIC's fields: the lowering reads the table alone)."""
    shape = data.draw(st.sampled_from([[data.draw(st.integers(1, 40))], [data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)),
                                                                            data.draw(st.integers(1, 40))]]))
    fields = {"operation": "lut", "scheme": SCHEME, "function": "LOGISTIC", "shape": shape, "input_scale": 0.1, "input_zero_point": 0,
              "output_scale": 1 / 256, "output_zero_point": -128}
    table = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).integers(-128, 128, 256).astype(np.int8)
    _run_on_the_accelerator(_one_layer(fields, {"table": table}), _accelerator(True, block), tmp_path_factory.mktemp("lut"), ["layer"],
                            schedule=schedule)


def test_a_softmax_of_511_equal_classes_rounds_at_the_alus_last_shift_and_512_stay_on_the_host(tmp_path):
    """Equal inputs make every exp one: the sum 511 x 2^19 has 4 leading zeros, so the output's rounding shift 35 - 4 is
    the ALU's 31; 512 classes could need 32: that softmax is the host's, with the reason."""
    fields = {"operation": "softmax", "scheme": SCHEME, "input_scale": 0.1, "input_zero_point": 0, "output_scale": 1 / 256,
              "output_zero_point": -128, "beta": 1.0}
    _run_on_the_accelerator(_one_layer({**fields, "shape": [511]}, {}), ACCEL_TFLITE, tmp_path / "equal", ["layer"],
                            inputs=np.full((2, 1, 1, 511), 7, np.int8))
    (group,) = partition(_one_layer({**fields, "shape": [512]}, {}), ACCEL_TFLITE).groups
    assert group.target == HOST and "at most 511" in group.reason


@pytest.mark.parametrize("placement", PLACEMENTS)
@LAYERS
@given(data=st.data(), block=st.sampled_from([16, 4]), schedule=SCHEDULES)
def test_the_add_lowering_gives_the_host_kernels_bytes(tmp_path_factory, placement, data, block, schedule):
    """add(conv(x), x): two operands at their own scales and zero points (from the extremes), the conv's a 1x1
    of the same channels."""
    height, width, channels = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 20))
    scales = [data.draw(st.sampled_from([0.02, 0.1, 0.5, 3.0])) for _ in range(3)]
    conv_zero, input_zero, output_zero = (data.draw(zero_points) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    whole = {"input_size": _size(height, width), "output_size": _size(height, width), "kernel_size": _size(1, 1), "stride": _size(1, 1),
             "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0), "dilations": _size(1, 1)}
    conv = {"name": "conv", "operation": "conv", "scheme": SCHEME, "input_scale": scales[1], "input_zero_point": input_zero,
            "output_scale": scales[0], "output_zero_point": conv_zero, "output_min": -128, "output_max": 127, "rounding": "double",
            "load_bias": False, "input_channel_num": channels, "output_channel_num": channels, **whole,
            "previous_layer": [NETWORK_INPUT], "next_layer": ["add"]}
    requantization = common_scale_multipliers(scales[0], scales[1], scales[2])
    add = {"name": "add", "operation": "add", "scheme": SCHEME, "shape": [height, width, channels], "input_scales": scales[:2],
           "input_zero_points": [conv_zero, input_zero], "input_multipliers": [m for m, _ in requantization[:2]],
           "input_shifts": [s for _, s in requantization[:2]], "left_shift": 20, "output_multiplier": requantization[2][0],
           "output_shift": requantization[2][1], "output_scale": scales[2], "output_zero_point": output_zero,
           "output_min": data.draw(st.sampled_from([-128, output_zero])), "output_max": 127,
           "previous_layer": ["conv", NETWORK_INPUT], "next_layer": [END_POINT]}
    params = {"conv": {"weight": rng.integers(-127, 128, (channels, 1, 1, channels)).astype(np.int8),
                       "multiplier": np.full(channels, data.draw(multipliers), np.int32), "shift": np.full(channels, -8, np.int32)}}
    _run_on_the_accelerator(_network([conv, add], params), _accelerator(PLACEMENTS[placement], block), tmp_path_factory.mktemp("add"),
                            ["conv", "add"], schedule=schedule)


# --- the ALU's TFLite operations at int32's extremes -------------------------------------------------------


def test_rmul_rshra_and_lsl_are_tflites_arithmetic_at_int32s_extremes(tmp_path):
    """One accelerator function per operation on a vector of extreme values, against tflite_math: RMUL at 31 is
    SaturatingRoundingDoublingHighMul (INT32_MIN x INT32_MIN saturates), RSHRA RoundingDivideByPOT, LSL a wrap."""
    values = np.array([0, 1, -1, INT32_MIN, INT32_MAX, INT32_MIN + 1, 2**30, -(2**30), 12345, -12345, 3, -3, 5, -5, 2**20, -(2**20)], np.int64)
    cases = [("RMUL", m, dict(round=31)) for m in (INT32_MIN, INT32_MAX, 2**30, 1518500250)]
    cases += [("RSHRA", n, {}) for n in (0, 1, 2, 17, 31)] + [("LSL", n, {}) for n in (0, 1, 20, 31)]
    for op, operand, extra in cases:
        expected = {"RMUL": lambda operand=operand: multiply_by_quantized_multiplier(values, operand, 0),
                    "RSHRA": lambda operand=operand: rounding_divide_by_pot(values, operand),
                    "LSL": lambda operand=operand: ((values << operand) + 2**31) % 2**32 - 2**31}[op]()
        assert np.array_equal(_alu_on(tmp_path / f"{op}{operand}", Alu(op, Loop(1), Index(0), None, operand, **extra), values), expected)


def test_the_reductions_across_a_vector_and_clz_at_int32s_extremes(tmp_path):
    """MAXR and SUMR of a vector's first lanes (the sum wrapping modulo 2^32) in every lane; CLZ of each lane as a uint32."""
    values = np.array([5, INT32_MAX, INT32_MAX, -1, INT32_MIN, 0, 1, 2**30, -(2**30), 7, 12345, -12345, 3, 2**20, 1, 2], np.int64)
    for lanes in (1, 3, 4, 16):
        sum_of = ((values[:lanes].sum() + 2**31) % 2**32) - 2**31
        assert np.array_equal(_alu_on(tmp_path / f"max{lanes}", Alu("MAXR", Loop(1), Index(0), Index(0), lanes=lanes % 16), values),
                              np.full(16, values[:lanes].max()))
        assert np.array_equal(_alu_on(tmp_path / f"sum{lanes}", Alu("SUMR", Loop(1), Index(0), Index(0), lanes=lanes % 16), values),
                              np.full(16, sum_of))
    expected = [32 - int(value & 0xFFFFFFFF).bit_length() for value in values]
    assert np.array_equal(_alu_on(tmp_path / "clz", Alu("CLZ", Loop(1), Index(0), Index(0)), values), expected)


def _alu_on(work: Path, instruction: Alu, values: np.ndarray) -> np.ndarray:
    """`values` (one vector of 16 int32) through `instruction` on qt_isa.h."""
    work.mkdir()
    runtime = PROJECT_ROOT / "core" / "backends"
    for header in [*(runtime / "c" / "runtime").glob("*.h"), runtime / "accel" / "runtime" / "qt_isa.h"]:
        (work / header.name).write_bytes(header.read_bytes())
    (work / "qt_isa_layout.h").write_text(layout_header())
    words = ", ".join(str(b) for b in encode(instruction))
    (work / "alu.c").write_text(f"""#define QT_ISA_BLOCK 16
#define QT_ISA_INP_BYTES 64
#define QT_ISA_WGT_BYTES 256
#define QT_ISA_ACC_BYTES 64
#include "qt_isa.h"
int main(void)
{{
    static const uint8_t program[] = {{{words}}};
    int lane;
    for (lane = 0; lane < 16; lane++)
        if (scanf("%d", &qt_isa_acc[0][lane]) != 1)
            return 1;
    qt_isa_run("alu", program, 1, NULL, 0, NULL, 0);
    for (lane = 0; lane < 16; lane++)
        printf("%d\\n", qt_isa_acc[0][lane]);
    return 0;
}}
""")
    binary = compile_program(work / "alu.c", work / "alu")
    printed = subprocess.run([str(binary)], input="\n".join(map(str, values)), capture_output=True, text=True, check=True).stdout
    return np.array(printed.split(), np.int64)


def test_the_new_alu_fields_round_trip_through_the_encoding():
    instruction = Alu("RMUL", Loop(2, 3, 4), Index(5, 6, 7, 8), Index(9, 0, 0, 1), 0, round=62)
    assert decode(encode(instruction)) == [instruction]


# --- what stays on the host, and why -------------------------------------------------------------------


def test_what_the_accelerator_cannot_run_stays_on_the_host_with_the_reason(tmp_path):
    """A depth multiplier of 2, a padded average pool, a dense layer whose channels round at different shifts:
    each on the host with its reason in the plan; the programs still give the host kernels' bytes."""
    rng = np.random.default_rng(3)
    window = {"input_size": _size(4, 4), "output_size": _size(4, 4), "kernel_size": _size(3, 3), "stride": _size(1, 1),
              "padding": {"top": 1, "bottom": 1, "left": 1, "right": 1}}
    quantized = {"scheme": SCHEME, "input_scale": 0.05, "input_zero_point": 3, "output_scale": 0.1, "output_zero_point": -4,
                 "output_min": -128, "output_max": 127}
    dw = {"name": "dw", "operation": "dwconv", **quantized, "rounding": "double", "load_bias": False, "dilations": _size(1, 1),
          "input_channel_num": 3, "output_channel_num": 6, **window, "previous_layer": [NETWORK_INPUT], "next_layer": ["avg"]}
    avg = {"name": "avg", "operation": "avg_pool", **{**quantized, "input_zero_point": -4}, "input_channel_num": 6, "output_channel_num": 6,
           **window, "previous_layer": ["dw"], "next_layer": [END_POINT]}
    one = {"input_size": _size(1, 1), "output_size": _size(1, 1), "kernel_size": _size(1, 1), "stride": _size(1, 1),
           "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0)}
    dense = {"operation": "conv", **quantized, "rounding": "single", "load_bias": False, "dilations": _size(1, 1), "input_channel_num": 6,
             "output_channel_num": 2, **one}
    windowed = _network([dw, avg], {"dw": {"weight": rng.integers(-127, 128, (1, 3, 3, 6)).astype(np.int8),
                                           "multiplier": np.full(6, 2**30, np.int32), "shift": np.full(6, -6, np.int32)}})
    dense_weights = {"weight": rng.integers(-127, 128, (2, 1, 1, 6)).astype(np.int8), "multiplier": np.full(2, 2**30, np.int32)}
    # shifts 30 apart: its sums shifted left by 30 could leave int32 (3 apart run on the accelerator: the LSL, then one RMUL)
    dense_ir = _one_layer(dense, {**dense_weights, "shift": np.array([-1, -31], np.int32)})
    _run_on_the_accelerator(_one_layer(dense, {**dense_weights, "shift": np.array([-8, -11], np.int32)}), ACCEL_TFLITE,
                            tmp_path / "near", ["layer"])
    reasons = {group.layer: group.reason for ir in (windowed, dense_ir) for group in partition(ir, ACCEL_TFLITE).groups
               if group.target == HOST}
    assert set(reasons) == {"dw", "avg", "layer"}
    assert "depth multiplier 2" in reasons["dw"] and "division" in reasons["avg"] and "single rounding" in reasons["layer"]
    _run_on_the_accelerator(windowed, ACCEL_TFLITE, tmp_path / "windowed", [])
    _run_on_the_accelerator(dense_ir, ACCEL_TFLITE, tmp_path / "dense", [])


def test_an_accelerator_description_refuses_a_bad_placement_or_an_unknown_cycles_key():
    with pytest.raises(AcceleratorError, match=r"accelerator.bias_in_accumulators: expected true or false"):
        accelerator_of({**TARGET_DATA, "accelerator": {**TARGET_DATA["accelerator"], "bias_in_accumulators": "yes"}})
    with pytest.raises(AcceleratorError, match=r"accelerator.cycles.alu_rmull: unknown key; expected .*alu_rmul"):
        accelerator_of({**TARGET_DATA, "accelerator": {**TARGET_DATA["accelerator"], "cycles": {**TARGET_DATA["accelerator"]["cycles"],
                                                                                                 "alu_rmull": 3}}})
