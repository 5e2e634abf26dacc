"""The accelerator's code generation: the instruction encoding, random small networks (conv,
dwconv, add, pools; shapes, strides, paddings and channel counts that are not multiples of the
block) through partition + codegen + the C ISA simulator against the integer simulator, on the
shipped targets and on random accelerators (other blocks, buffers and layouts, no code change),
and the codegen stage on the default model for both accelerator targets."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from rich.console import Console

from conftest import PROJECT_ROOT, compose, tracking_override
from core.backends.accel.target import Accelerator, load_target
from core.backends.c.build import compile_program, run_program
from core.backends.c.emitter import CodegenError
from core.ir.io import read_ir, validate_ir
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT
from core.backends.accel.isa import Alu, Finish, Gemm, Index, IsaError, Lanes, Load, Loop, Store, decode, encode, encode_all, listing, without_notes
from core.backends.accel.lowering import LOWERINGS
from core.backends.accel.partition import ACCEL, ACCEL_LAYOUT, HOST, PartitionPlan, partition
from core.backends.program import generate_program
from core.ir.simulator import IntegerSimulator

TARGETS = PROJECT_ROOT / "conf" / "target"
ACCEL_DATA, BIG = load_target(TARGETS / "accel.yaml")
SMALL_DATA, SMALL = load_target(TARGETS / "accel_small.yaml")
QUIET = Console(file=open(os.devnull, "w"))
NETWORKS = settings(max_examples=int(os.environ.get("QT_ACCEL_EXAMPLES", "24")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# --- the instruction encoding -----------------------------------------------------------------

u16, u32 = st.integers(0, 0xFFFF), st.integers(0, 2**31 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
small = st.integers(0, 255)
index = st.builds(Index, u32, i32, i32, i32)
loop = st.builds(Loop, u16, u16, u16)
instructions = st.one_of(
    st.builds(Load, st.sampled_from(["INP", "WGT", "ACC", "ACC8", "WGTV"]), u32, u32, st.tuples(u16, u16, u16), st.tuples(i32, i32, i32),
              st.tuples(small, small, small, small), st.integers(-128, 127), st.booleans()),
    st.builds(Store, u32, u32, st.tuples(u16, u16, u16), st.tuples(i32, i32, i32)),
    st.builds(Gemm, loop, index, index, index, st.booleans()),
    st.builds(Gemm, loop, index, index, index, st.just(False), lanes=st.builds(Lanes, small, st.integers(0, 4095), st.integers(0, 4095))),
    st.builds(Alu, st.sampled_from(["MOV", "ADD", "MAX", "MIN"]), loop, index, index),
    st.builds(Alu, st.sampled_from(["MOV", "ADD", "MAX", "MIN", "RSHR", "SHL"]), loop, index, st.none(), i32),
    st.builds(Finish),
)


tokens = st.integers(0, 15)


@settings(max_examples=300, deadline=None)
@given(st.lists(instructions, max_size=8), st.lists(st.tuples(tokens, tokens), min_size=8, max_size=8))
def test_the_binary_decodes_to_the_instructions_it_encodes(program, masks):
    program = [instruction if isinstance(instruction, Finish) else dataclasses.replace(instruction, pop=pop, push=push)
               for instruction, (pop, push) in zip(program, masks)]
    binary = encode_all(program)
    assert len(binary) == 64 * len(program)
    assert decode(binary) == [without_notes(instruction) for instruction in program]
    assert len(listing(program).splitlines()) == len(program)


def test_a_field_that_does_not_fit_is_refused():
    with pytest.raises(IsaError, match="16-bit"):
        encode(Store(0, 0, (70000, 1, 1), (1, 1, 1)))
    with pytest.raises(IsaError, match="8-bit"):
        encode(Load("INP", 0, 0, (1, 1, 1), (1, 1, 1), (300, 0, 0, 0)))
    with pytest.raises(IsaError, match="whole number"):
        decode(b"\0" * 65)


# --- random networks ------------------------------------------------------------------------------


def hw(height: int, width: int) -> dict:
    return {"height": height, "width": width}


def _window(draw, size: tuple[int, int], kernels, strides, padded: bool) -> dict:
    """Kernel, stride, padding and output size of a window over `size` (every output in range)."""
    kh, kw = draw(st.sampled_from(kernels)), draw(st.sampled_from(kernels))
    stride = draw(st.sampled_from(strides))
    pads = [draw(st.integers(0, k - 1)) if padded else 0 for k in (kh, kh, kw, kw)]
    out = ((size[0] + pads[0] + pads[1] - kh) // stride + 1, (size[1] + pads[2] + pads[3] - kw) // stride + 1)
    if min(out) < 1:  # the window does not fit: fall back to 1x1
        kh = kw = 1
        pads = [0, 0, 0, 0]
        out = ((size[0] - 1) // stride + 1, (size[1] - 1) // stride + 1)
    return {"kernel_size": hw(kh, kw), "stride": hw(stride, stride), "output_size": hw(*out),
            "padding": dict(zip(("top", "bottom", "left", "right"), pads))}


def _conv(draw, name, previous, size, channels, in_scale, depthwise=False, same=False):
    if same:  # stride 1, output the input's size (a residual's operand)
        k = draw(st.sampled_from([1, 3]))
        window = {"kernel_size": hw(k, k), "stride": hw(1, 1), "output_size": hw(*size),
                  "padding": {"top": k // 2, "bottom": k // 2, "left": k // 2, "right": k // 2}}
    else:
        window = _window(draw, size, [1, 2, 3], [1, 2], padded=True)
    out_channels = channels if depthwise else draw(st.integers(1, 40))
    weight_scale, shift = draw(st.integers(0, 8)), draw(st.integers(0, 15))
    load_bias = draw(st.booleans())
    bias_shift = draw(st.integers(0, 15)) if load_bias else 0
    layer = {
        "name": name, "operation": "dwconv" if depthwise else "conv", "previous_layer": [previous],
        "activation_type": draw(st.sampled_from(["Relu6", "Relu", "None"])),
        "input_log2scale": in_scale, "weight_log2scale": weight_scale,
        "bias_log2scale": in_scale + weight_scale - bias_shift if load_bias else 0,
        "output_log2scale": in_scale + weight_scale - shift, "output_shift": shift, "bias_shift": bias_shift,
        "load_bias": load_bias, "input_channel_num": channels, "output_channel_num": out_channels,
        "input_size": hw(*size), "dilations": hw(1, 1), **window,
        "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "int8", "bias_dtype": "int8",
    }
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kh, kw = window["kernel_size"]["height"], window["kernel_size"]["width"]
    weight_shape = (kh, kw, channels) if depthwise else (kh, kw, channels, out_channels)
    params = {"weight": rng.integers(-128, 128, weight_shape).astype(np.int8)}
    if load_bias:
        params["bias"] = rng.integers(-128, 128, out_channels).astype(np.int8)
    return layer, params


def _pool(draw, name, previous, size, channels, in_scale):
    average = draw(st.booleans())
    if average:  # the accelerator's mean is a shift: an unpadded power-of-two window
        window = _window(draw, size, [1, 2], [1, 2], padded=False)
        if draw(st.booleans()):  # a global average over a power-of-two input
            side = 1 << (min(size).bit_length() - 1)
            window = {"kernel_size": hw(side, side), "stride": hw(1, 1), "padding": dict.fromkeys(("top", "bottom", "left", "right"), 0),
                      "output_size": hw(size[0] - side + 1, size[1] - side + 1)}
        pre_ls = draw(st.integers(0, 4))
        extra = {"input_pre_ls": pre_ls, "output_log2scale": in_scale + pre_ls}
    else:
        window = _window(draw, size, [1, 2, 3], [1, 2], padded=True)
        extra = {"output_log2scale": in_scale - draw(st.integers(-3, 3))}
    return {"name": name, "operation": "avg_pool" if average else "max_pool", "previous_layer": [previous],
            "input_channel_num": channels, "input_size": hw(*size), "input_log2scale": in_scale, "input_dtype": "int8",
            "output_channel_num": channels, "output_dtype": "int8", "dtype": "int8", **window, **extra}


def _add(draw, name, pl, other, size, channels, pl_scale, add_scale):
    out_scale = min(pl_scale, add_scale) + draw(st.integers(-6, 6))
    return {"name": name, "operation": "add", "previous_layer": [pl, other], "activation_type": draw(st.sampled_from(["Relu6", "Relu", "None"])),
            "input_channel_num": channels, "input_size": hw(*size), "size": size[0] * size[1] * channels, "dtype": "int8",
            "pl_log2scale": pl_scale, "pl_shiftbit": pl_scale, "add_log2scale": add_scale, "add_shiftbit": add_scale,
            "output_log2scale": out_scale, "output_shift_bit": out_scale - min(pl_scale, add_scale), "pl_name": pl, "add_name": other}


@st.composite
def networks(draw) -> Ir:
    """input -> conv -> dwconv (same size) -> add(conv, dwconv) -> pool, with the conv and the
    pool as end points: every accelerator operation, a residual, two end points."""
    size = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    channels = draw(st.integers(1, 20))
    first, first_params = _conv(draw, "conv", NETWORK_INPUT, size, channels, 7)
    size1 = (first["output_size"]["height"], first["output_size"]["width"])
    c1 = first["output_channel_num"]
    second, second_params = _conv(draw, "dw.conv", "conv", size1, c1, first["output_log2scale"], depthwise=True, same=True)
    residual = _add(draw, "add", "conv", "dw.conv", size1, c1, first["output_log2scale"], second["output_log2scale"])
    pool = _pool(draw, "pool", "add", size1, c1, residual["output_log2scale"])
    layers = [first, second, residual, pool]
    for layer in layers:
        layer["next_layer"] = [reader["name"] for reader in layers if layer["name"] in reader["previous_layer"]]
    first["next_layer"].append(END_POINT)
    pool["next_layer"].append(END_POINT)
    validate_ir(layers, origin="random network")
    return Ir.from_json(layers, {"conv": first_params, "dw.conv": second_params})


@st.composite
def accelerators(draw) -> Accelerator:
    """A shipped target, or a random one: block 2-16, small buffers, another layout order."""
    choice = draw(st.sampled_from(["accel", "accel_small", "random"]))
    if choice != "random":
        return BIG if choice == "accel" else SMALL
    block = draw(st.sampled_from([2, 4, 8, 16]))
    data = SMALL_DATA["accelerator"]
    order = draw(st.permutations(["H", "W", f"C/{block}"]))
    return Accelerator.from_mapping({
        **data, "gemm_block": {"batch": 1, "block_in": block, "block_out": block},
        "buffers": {"input": block * draw(st.integers(24, 400)), "weight": block * block * draw(st.integers(9, 60)),
                    "accumulator": 4 * block * draw(st.integers(24, 400))},
        "layout": [*order, str(block)], "shift_range": {"min": 0, "max": 31},
    }, name="random_accel")


def _run_both(ir: Ir, accelerator: Accelerator, work: Path, images: int = 3):
    plan = partition(ir, accelerator)
    program = generate_program(ir, plan)
    binary = compile_program(program.write(work), work / "network", defines=("QT_PORTABLE",))
    rng = np.random.default_rng(0)
    inputs = rng.integers(-128, 128, (images, *program.input_shape)).astype(np.int8)
    expected = IntegerSimulator(ir).run_int8(inputs)
    result = run_program(binary, program, inputs, work / "run")
    return plan, program, result, expected


@NETWORKS
@given(ir=networks(), accelerator=accelerators())
def test_random_networks_run_bit_exact_through_the_isa_simulator(tmp_path_factory, ir, accelerator):
    work = tmp_path_factory.mktemp("net")
    plan, program, result, expected = _run_both(ir, accelerator, work)
    for name in program.end_points:
        assert np.array_equal(result.outputs[name], expected[name]), (name, plan.to_json()["groups"])
    around_add = [plan.group(name).target for name in ("conv", "dw.conv", "pool")]
    if accelerator is SMALL and around_add == [ACCEL] * 3:  # no add on accel_small: on the host, on the packed data
        assert plan.group("add").target == HOST and plan.group("add").layout == ACCEL_LAYOUT
    if accelerator is BIG:  # everything fits the big target
        assert all(group.target == ACCEL for group in plan.groups), [(g.layer, g.reason) for g in plan.groups]
        assert program.statistics["count_gemm"] > 0 and program.statistics["count_store"] >= 4


def _deep_layer(channels_in: int, channels_out: int, size: int, kernel: int, stride: int, depthwise: bool = False) -> Ir:
    rng = np.random.default_rng(channels_in * 1000 + channels_out)
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    pad = kernel // 2
    layer = {"name": "big", "operation": "dwconv" if depthwise else "conv", "previous_layer": [NETWORK_INPUT], "next_layer": [END_POINT],
             "activation_type": "None", "input_log2scale": 7, "weight_log2scale": 7, "bias_log2scale": 5, "output_log2scale": 4,
             "output_shift": 10, "bias_shift": 9, "load_bias": True, "input_channel_num": channels_in,
             "output_channel_num": channels_out, "input_size": hw(size, size), "output_size": hw(out, out),
             "padding": {"top": pad, "bottom": pad, "left": pad, "right": pad}, "stride": hw(stride, stride), "dilations": hw(1, 1),
             "kernel_size": hw(kernel, kernel), "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "int8", "bias_dtype": "int8"}
    shape = (kernel, kernel, channels_in) if depthwise else (kernel, kernel, channels_in, channels_out)
    return Ir.from_json([layer], {"big": {"weight": rng.integers(-128, 128, shape).astype(np.int8),
                                "bias": rng.integers(-128, 128, channels_out).astype(np.int8)}})


@pytest.mark.parametrize("depthwise", [False, True])
def test_a_layer_larger_than_every_buffer_is_tiled_over_rows_and_channel_blocks(tmp_path, depthwise):
    ir = _deep_layer(70, 70 if depthwise else 100, 20, 3, 1, depthwise)
    plan, program, result, expected = _run_both(ir, SMALL, tmp_path, images=2)
    assert plan.group("big").target == ACCEL
    assert np.array_equal(result.outputs["big"], expected["big"])
    (function,) = program.functions
    loads = [i for i in function.instructions if isinstance(i, Load)]
    input_loads = [i for i in loads if i.buffer == "INP"]
    # a depthwise layer's weights are one B-int8 vector per tap and channel block (WGTV), a conv's B x B blocks (WGT)
    weight_loads = [i for i in loads if i.buffer == ("WGTV" if depthwise else "WGT")]
    assert not [i for i in loads if i.buffer == ("WGT" if depthwise else "WGTV")]
    stores = [i for i in function.instructions if isinstance(i, Store)]
    assert len(stores) > 1 and len({s.size[0] for s in stores}) >= 1  # several tiles of output rows/blocks
    assert len(input_loads) > 1 and len(weight_loads) >= (1 if depthwise else 2)
    # every tile fits its buffer (the ISA simulator would also refuse it)
    assert max(i.units for i in input_loads) * SMALL.channel_block <= SMALL.buffers.input
    assert max(i.dram_bytes(SMALL.channel_block) for i in weight_loads) <= SMALL.buffers.weight
    assert all(i.units * 4 * SMALL.channel_block <= SMALL.buffers.accumulator for i in loads if i.buffer == "ACC")


def test_a_depthwise_layer_runs_at_the_arrays_full_width_its_weights_stored_once(tmp_path):
    """No block-diagonal GEMM: each weight stored and moved once per tap and channel (not B times), and each GEMM micro-op
    multiplies B pixels of a row by a tap's weight vector, so the micro-ops are the output's pixel groups of B (a row's
    last ones in one micro-op of fewer lanes) x taps x channel blocks."""
    channels, size, kernel, block = 70, 21, 3, SMALL.channel_block
    ir = _deep_layer(channels, channels, size, kernel, 1, depthwise=True)
    plan, program, result, expected = _run_both(ir, SMALL, tmp_path, images=2)
    assert np.array_equal(result.outputs["big"], expected["big"])
    (function,) = program.functions
    blocks = -(-channels // block)
    weight_bytes = sum(i.dram_bytes(block) for i in function.instructions if isinstance(i, Load) and i.buffer in ("WGT", "WGTV"))
    assert weight_bytes % (kernel * kernel * blocks * block) == 0 and weight_bytes < kernel * kernel * blocks * block * block
    gemms = [i for i in function.instructions if isinstance(i, Gemm) and not i.reset]
    assert gemms and all(g.lanes is not None and 1 <= g.lanes.count <= block for g in gemms)
    assert sum(g.loop.count * g.lanes.count for g in gemms) == size * size * kernel * kernel * blocks  # every pixel, tap, block once
    assert sum(g.loop.count for g in gemms) == size * -(-size // block) * kernel * kernel * blocks


def test_a_bias_is_preloaded_into_the_accumulators_and_a_layer_without_one_resets_them(tmp_path):
    ir = _deep_layer(8, 8, 4, 1, 1)
    plan, program, *_ = _run_both(ir, BIG, tmp_path / "bias", images=1)
    kinds = [(i.kind, getattr(i, "buffer", None), getattr(i, "reset", None)) for i in program.functions[0].instructions]
    assert ("LOAD", "ACC", None) in kinds and ("GEMM", None, True) not in kinds
    layer = dataclasses.replace(ir.layers[0], load_bias=False, bias_shift=0, bias_log2scale=0)
    no_bias = Ir([layer], {"big": {"weight": ir.params["big"]["weight"]}})
    _, program, result, expected = _run_both(no_bias, BIG, tmp_path / "none", images=2)
    kinds = [(i.kind, getattr(i, "buffer", None), getattr(i, "reset", None)) for i in program.functions[0].instructions]
    assert ("LOAD", "ACC", None) not in kinds and ("GEMM", None, True) in kinds
    assert np.array_equal(result.outputs["big"], expected["big"])


def test_a_wrong_instruction_stops_the_isa_simulator_naming_the_function_and_instruction(tmp_path, monkeypatch):
    ir = _deep_layer(8, 8, 4, 1, 1)
    original = LOWERINGS["conv"]

    def overrun(record, params, inputs, output, low):
        original.lower(record, params, inputs, output, low)
        low.emit(Alu("MOV", Loop(low.acc_units + 1), Index(0, 1), None, 0))

    monkeypatch.setitem(LOWERINGS, "conv", dataclasses.replace(original, lower=overrun))
    with pytest.raises(CodegenError, match=r"accelerator function accel_func_0, instruction \d+: ALU destination index"):
        _run_both(ir, BIG, tmp_path)


def test_the_plan_round_trips_through_its_json():
    ir = _deep_layer(8, 8, 4, 1, 1)
    plan = partition(ir, SMALL)
    assert PartitionPlan.from_json(plan.to_json()).to_json() == plan.to_json()
    with pytest.raises(ValueError, match="re-run the partition stage"):
        PartitionPlan.from_json({"target": "x"})


def test_a_layout_whose_block_is_not_innermost_is_refused():
    from core.backends.accel.target import AcceleratorError

    with pytest.raises(AcceleratorError, match="innermost"):
        Accelerator.from_mapping({**ACCEL_DATA["accelerator"], "layout": ["H", "16", "W", "C/16"]}, name="x")


# --- the stage --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_workspace(tmp_path_factory, model_cache):
    root = tmp_path_factory.mktemp("digits-accel")
    return [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root)]


@pytest.mark.parametrize("target", ["accel", "accel_small"])
def test_the_default_model_on_both_accelerator_targets_is_bit_exact(digits_workspace, target):
    from pipeline.main import run_pipeline

    summary = run_pipeline(compose(*digits_workspace, f"target={target}"), console=QUIET)
    results = {result.stage.name: result for result in summary.results}
    metrics = results["codegen"].metrics
    assert metrics["bitexact"] == 1.0 and metrics["images"] == 101
    assert metrics["accel_functions"] == results["partition"].metrics["regions"] >= 1
    assert metrics["accel_instructions"] == sum(metrics[f"accel_count_{kind}"] for kind in ("load", "store", "gemm", "alu", "finish"))
    assert metrics["accel_cycles"] > metrics["accel_gemm_micro_ops"] > 0
    directory = results["codegen"].artifact.directory
    for function in range(int(metrics["accel_functions"])):
        binary = (directory / f"{target}_func_{function}.bin").read_bytes()
        text = (directory / f"{target}_func_{function}.lst").read_text()
        decoded = decode(binary)
        assert isinstance(decoded[-1], Finish) and f"{len(decoded)} instructions" in text
        # the binary is what the program embeds and runs
        assert f"{target}_func_{function}_program[{len(binary)}]" in (directory / "program.c").read_text()
    # the cycles per layer as data (DVC plots, MLflow steps) add up to the program's estimate; the picture's
    # bars are horizontal, each layer's whole name beside its bar
    cycles = json.loads((directory / "series" / "cycles.json").read_text())
    assert [row["layer_index"] for row in cycles] == list(range(len(cycles))) and len(cycles) >= results["partition"].metrics["layers_accel"]
    # the accelerator's rows add up to its instructions' estimate, the host's to the host's: one total of both
    assert sum(row["cycles"] - row["cycles_host"] for row in cycles) <= metrics["accel_cycles"]
    assert sum(row["cycles_host"] for row in cycles) == pytest.approx(metrics["accel_cycles_host"])
    assert metrics["accel_cycles_total"] == pytest.approx(metrics["accel_cycles"] + metrics["accel_cycles_host"])
    assert metrics["accel_macs_per_cycle"] == pytest.approx(results["partition"].metrics["macs"] / metrics["accel_cycles_total"])
    picture = json.loads(Image.open(directory / "cycles.png").text["Description"])
    assert picture[0]["x"].startswith("estimated cycles") and picture[0]["y"] == "layer (IR order; then packs, unpacks)"


def test_a_target_name_that_is_no_c_identifier_names_its_functions_by_a_sanitized_form(digits_workspace):
    """`my-accel.v2` is a fine target name: its functions are my_accel_v2_func_<k>, in C and on disk."""
    from pipeline.main import run_pipeline

    summary = run_pipeline(compose(*digits_workspace, "target=accel", "target.name=my-accel.v2"), console=QUIET)
    results = {result.stage.name: result for result in summary.results}
    assert results["codegen"].metrics["bitexact"] == 1.0
    functions = sorted(path.name for path in results["codegen"].artifact.directory.glob("*_func_*.bin"))
    assert functions and all(name.startswith("my_accel_v2_func_") for name in functions)


@pytest.mark.parametrize("name", ["../../x", "a/b", "", "9lives", "x" * 65, "a b"])
def test_a_target_name_that_could_escape_a_directory_is_a_config_error(name):
    from pipeline.config import ConfigError

    with pytest.raises(ConfigError, match=r"target.name=.*must start with a letter"):
        compose("target=accel", f"target.name='{name}'")


def test_a_wrong_lowering_fails_the_stage_naming_the_first_layer_that_differs(digits_workspace, monkeypatch, tmp_path):
    from pipeline.main import run_pipeline
    from pipeline.runner import StageFailed

    original = LOWERINGS["dwconv"]

    def low_clamp_off_by_one(record, params, inputs, output, low):
        start = len(low.instructions)
        original.lower(record, params, inputs, output, low)
        for position in range(start, len(low.instructions)):
            instruction = low.instructions[position]
            if isinstance(instruction, Alu) and instruction.op == "MAX":
                low.instructions[position] = dataclasses.replace(instruction, imm=instruction.imm + 1)

    monkeypatch.setitem(LOWERINGS, "dwconv", dataclasses.replace(original, lower=low_clamp_off_by_one))
    workspace = [f"store.url={tmp_path / 'store'}", *digits_workspace[1:]]
    with pytest.raises(StageFailed) as failure:
        run_pipeline(compose(*workspace, "target=accel_small"), console=QUIET)
    cfg_layers = read_ir(next(p for p in (tmp_path / "store").rglob("net_def.json")).parent).layers
    first = next(layer.name for layer in cfg_layers if layer.operation == "dwconv")
    assert f"on the IR's test image: layer {first} (dwconv)" in str(failure.value)


def test_a_conv_whose_sums_could_leave_int32_stays_on_the_host_and_still_matches(tmp_path):
    # bias 63 << 25 leaves 2^25 of int32 headroom; 2304 products of |weight| ~128 with |x| <= 128 could
    # exceed it (random inputs do not: the simulator's int32 check passes), so the layer is the host's
    ir = _deep_layer(256, 8, 4, 3, 1)
    layer = dataclasses.replace(ir.layers[0], bias_shift=25, bias_log2scale=ir.layers[0].log2scale_of_input(0) + ir.layers[0].weight_log2scale - 25)
    signs = np.random.default_rng(5).choice(np.array([-128, 127], np.int8), ir.params["big"]["weight"].shape)
    wide = Ir([layer], {"big": {"weight": signs, "bias": np.full(8, 63, np.int8)}})
    plan, program, result, expected = _run_both(wide, BIG, tmp_path, images=2)
    assert plan.group("big").target == HOST and "int32" in plan.group("big").reason
    assert not program.functions and np.array_equal(result.outputs["big"], expected["big"])
