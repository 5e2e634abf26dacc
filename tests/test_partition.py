"""partition: pattern matching and annotation against the accelerator described as data, the
accelerator functions, and pack/unpack placed by seed 004 [0055] -- on small hand-built IRs
and on the real MobileNet-v1 and SSD IRs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from conftest import CIFAR10_DIR, MODELS, PROJECT_ROOT, compose, tracking_override
from core.backends.accel.target import Accelerator, AcceleratorError, accelerator_of, load_target
from core.ir.io import read_ir, validate_ir
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT
from core.backends.accel.lowering import LoweringError
from core.backends.accel.partition import ACCEL, ACCEL_LAYOUT, HOST, partition
from pipeline.main import run_pipeline
from stages.partition import PICTURE_FILE, PLAN_FILE, run as run_stage, target_accelerator

TARGETS = PROJECT_ROOT / "conf" / "target"
ACCEL_TARGET, BIG = load_target(TARGETS / "accel.yaml")
SMALL_TARGET, SMALL = load_target(TARGETS / "accel_small.yaml")  # 8-channel blocks, no add, 3x3 kernels, shifts <= 15


# --- hand-built IRs -------------------------------------------------------------------------


def conv(name, previous, *, op="conv", size=8, channels=16, out_channels=None, kernel=3, stride=1, dilation=1,
         output_shift=6, activation="Relu6"):
    out_channels = channels if op == "dwconv" else (out_channels or channels)
    pad = (kernel - 1) * dilation // 2
    out = (size + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    return {
        "name": name, "operation": op, "previous_layer": [previous], "activation_type": activation,
        "input_log2scale": 4, "weight_log2scale": 6, "bias_log2scale": 6, "output_log2scale": 4,
        "output_shift": output_shift, "bias_shift": 4, "load_bias": True,
        "input_channel_num": channels, "output_channel_num": out_channels,
        "input_size": {"height": size, "width": size}, "output_size": {"height": out, "width": out},
        "padding": {"top": pad, "bottom": pad, "left": pad, "right": pad}, "stride": {"height": stride, "width": stride},
        "dilations": {"height": dilation, "width": dilation}, "kernel_size": {"height": kernel, "width": kernel},
        "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "int8", "bias_dtype": "int8",
    }


def add(name, pl, other, *, size=8, channels=16):
    return {
        "name": name, "operation": "add", "previous_layer": [pl, other], "activation_type": "None",
        "input_channel_num": channels, "input_size": {"height": size, "width": size}, "size": size * size * channels,
        "dtype": "int8", "pl_log2scale": 4, "pl_shiftbit": 4, "add_log2scale": 4, "add_shiftbit": 4,
        "output_log2scale": 3, "output_shift_bit": -1, "pl_name": pl, "add_name": other,
    }


def reshape(name, previous, input_shape, output_shape):
    return {"name": name, "operation": "reshape", "previous_layer": [previous], "reshape_param": list(output_shape),
            "input_shape": list(input_shape), "output_shape": list(output_shape), "dtype": "int8", "log2scale": 4}


def avg_pool(name, previous, *, size=4, channels=16, kernel=4):
    return {
        "name": name, "operation": "avg_pool", "previous_layer": [previous], "input_channel_num": channels,
        "input_size": {"height": size, "width": size}, "input_log2scale": 4, "input_dtype": "int8",
        "kernel_size": {"height": kernel, "width": kernel}, "stride": {"height": 1, "width": 1},
        "padding": {"top": 0, "bottom": 0, "left": 0, "right": 0}, "output_channel_num": channels,
        "output_size": {"height": size - kernel + 1, "width": size - kernel + 1}, "output_log2scale": 4,
        "output_dtype": "int8", "input_pre_ls": 0,
    }


def ir_of(*layers, ends=None) -> Ir:
    """next_layer from the readers; `ends` (default: the last layer) are end points."""
    ends = set(ends or [layers[-1]["name"]])
    for layer in layers:
        readers = [other["name"] for other in layers if layer["name"] in other["previous_layer"]]
        layer["next_layer"] = [END_POINT] if layer["name"] in ends else readers
    validate_ir(list(layers), origin="hand-built IR")
    return Ir.from_json(list(layers))


def points(changes):
    return [(change.tensor, change.readers) for change in changes]


def first_conv(name="c0"):
    return conv(name, NETWORK_INPUT, channels=3, out_channels=16)


# --- pack/unpack placement (seed 004 [0055]) --------------------------------------------------


def test_an_accelerator_only_chain_is_one_function_packed_at_the_input_and_unpacked_at_the_end():
    ir = ir_of(first_conv(), conv("d1", "c0", op="dwconv"), conv("c2", "d1", out_channels=10, kernel=1))
    plan = partition(ir, BIG)
    assert [g.target for g in plan.groups] == [ACCEL] * 3
    assert [(r.name, r.layers, r.inputs, r.outputs, r.pack, r.unpack) for r in plan.regions] == [
        ("accel_func_0", ["c0", "d1", "c2"], [NETWORK_INPUT], ["c2"], True, True)]
    assert points(plan.packs) == [(NETWORK_INPUT, ["c0"])] and points(plan.unpacks) == [("c2", [END_POINT])]
    # the input is 8x8x3 (192 bytes), 8x8x16 once its channels fill a 16-channel block; the output 8x8x10
    assert (plan.packs[0].shape, plan.packs[0].bytes, plan.packs[0].packed_bytes) == ([8, 8, 3], 192, 1024)
    assert (plan.unpacks[0].bytes, plan.unpacks[0].packed_bytes) == (640, 1024)
    metrics = plan.metrics()
    assert (metrics["regions"], metrics["pack_count"], metrics["unpack_count"], metrics["boundary_bytes"]) == (1, 1, 1, 832)
    assert metrics["macs"] == 8 * 8 * 16 * 9 * 3 + 8 * 8 * 16 * 9 + 8 * 8 * 10 * 16 and metrics["mac_share_accel"] == 1.0


def test_a_host_reshape_between_two_functions_is_unpacked_before_and_packed_after():
    c2 = conv("c2", "r1", kernel=1)
    c2["input_size"] = c2["output_size"] = {"height": 16, "width": 4}
    plan = partition(ir_of(first_conv(), reshape("r1", "c0", [8, 8, 16], [16, 4, 16]), c2), BIG)
    assert plan.group("r1").target == HOST and plan.group("r1").reason == "no pattern of accel names reshape"
    assert [(r.layers, r.pack, r.unpack) for r in plan.regions] == [(["c0"], True, True), (["c2"], True, True)]
    assert points(plan.packs) == [(NETWORK_INPUT, ["c0"]), ("r1", ["c2"])]
    assert points(plan.unpacks) == [("c0", ["r1"]), ("c2", [END_POINT])]


def residual_block(end="c3"):
    """c0 -> c1 -> c2 -> a3 = c2 + c0 -> c3"""
    return [first_conv(), conv("c1", "c0", kernel=1), conv("c2", "c1", op="dwconv"), add("a3", "c2", "c0"),
            conv(end, "a3", kernel=1)]


def test_functions_joined_only_by_an_elementwise_host_add_need_no_pack_or_unpack():
    plan = partition(ir_of(*residual_block()), SMALL)  # accel_small has no add
    a3 = plan.group("a3")
    assert (a3.target, a3.layout, a3.reason) == (HOST, ACCEL_LAYOUT, "no pattern of accel_small names add")
    assert [(r.name, r.layers, r.inputs, r.outputs) for r in plan.regions] == [
        ("accel_small_func_0", ["c0", "c1", "c2"], [NETWORK_INPUT], ["c0", "c2"]), ("accel_small_func_1", ["c3"], ["a3"], ["c3"])]
    assert [(r.pack, r.unpack) for r in plan.regions] == [(True, False), (False, True)]  # seed 004 [0056]'s pack list
    assert points(plan.packs) == [(NETWORK_INPUT, ["c0"])] and points(plan.unpacks) == [("c3", [END_POINT])]
    assert plan.metrics()["host_layers_on_packed_data"] == 1
    # where the accelerator runs the add, the block is one function
    assert [r.layers for r in partition(ir_of(*residual_block()), BIG).regions] == [["c0", "c1", "c2", "a3", "c3"]]


@pytest.mark.parametrize("tail", ["end point", "reshape"])
def test_a_host_add_next_to_a_host_boundary_reads_and_writes_the_host_layout(tail):
    layers = residual_block()[:4]
    if tail == "reshape":
        layers.append(reshape("r4", "a3", [8, 8, 16], [1024]))
    plan = partition(ir_of(*layers), SMALL)
    assert plan.group("a3").layout == "host"
    assert points(plan.unpacks) == [("c0", ["a3"]), ("c2", ["a3"])]  # both operands, before the add
    assert points(plan.packs) == [(NETWORK_INPUT, ["c0"])]
    assert [(r.pack, r.unpack) for r in plan.regions] == [(True, True)]


def test_a_function_is_never_left_and_reentered():
    """c0 feeds c1 and a host reshape; c2 reads both: {c0, c1, c2} is connected, but as one function
    it would need the host's reshape of its own intermediate result."""
    layers = [first_conv(), conv("c1", "c0", kernel=1), reshape("r2", "c0", [8, 8, 16], [8, 8, 16]), add("a3", "c1", "r2"),
              conv("c4", "a3", kernel=1)]
    plan = partition(ir_of(*layers), BIG)
    assert [r.layers for r in plan.regions] == [["c0", "c1"], ["a3", "c4"]]
    assert plan.notes == ["a3 is not merged into the function of c1: the path through r2 would leave the function and come back"]
    assert points(plan.unpacks) == [("c0", ["r2"]), ("c4", [END_POINT])] and points(plan.packs) == [(NETWORK_INPUT, ["c0"]), ("r2", ["a3"])]


# --- constraints ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target, layer, reason", [
    (BIG, conv("big", "c0", kernel=9), "pattern conv2d_bias_requantize_relu6: kernel 9x9 exceeds max_kernel 7x7"),
    (SMALL, conv("atrous", "c0", dilation=2), "dilation 2x2 unsupported (dilation: false)"),  # accel takes atrous convs
    (BIG, conv("s3", "c0", stride=3), "stride 3x3 not in strides [1, 2]"),
    (BIG, avg_pool("avg3", "c0", size=8, kernel=3), "window of 9 elements is not a power of two"),
    (SMALL, conv("shifty", "c0", output_shift=20), "output_shift = 20 outside shift_range [0, 15]"),
    (SMALL, conv("wide", "c0", size=400), "a minimal tile needs 9648 bytes of the input buffer (8192 bytes)"),
])
def test_a_layer_violating_its_pattern_runs_on_the_host_with_the_reason(target, layer, reason):
    size = layer["input_size"]["height"]
    plan = partition(ir_of(conv("c0", NETWORK_INPUT, channels=3, out_channels=16, size=size, kernel=1), layer), target)
    group = plan.group(layer["name"])
    assert group.target == HOST and group.pattern is None and reason in group.reason
    assert plan.group("c0").target == ACCEL and points(plan.unpacks) == [("c0", [layer["name"]])]


def test_a_global_pool_has_no_stride_to_constrain():
    pool = avg_pool("global", "c0", size=4, kernel=4)
    pool["stride"] = {"height": 4, "width": 4}  # one window: the stride is never applied
    plan = partition(ir_of(conv("c0", NETWORK_INPUT, channels=3, out_channels=16, size=4), pool), BIG)
    assert [r.layers for r in plan.regions] == [["c0", "global"]]
    pool["input_size"] = {"height": 8, "width": 8}
    pool["output_size"] = {"height": 2, "width": 2}
    plan = partition(ir_of(conv("c0", NETWORK_INPUT, channels=3, out_channels=16), pool), BIG)
    assert "stride 4x4 not in strides [1, 2]" in plan.group("global").reason


def test_the_second_target_file_works_with_no_code_change():
    assert (SMALL.channel_block, SMALL.buffers.input, SMALL.layout) == (8, 8192, ("H", "W", "C/8", "8"))
    ir = ir_of(conv("c0", NETWORK_INPUT, channels=3, out_channels=12), conv("c1", "c0", out_channels=20, kernel=1))
    for accelerator, packed in ((BIG, (1024, 2048)), (SMALL, (512, 1536))):
        plan = partition(ir, accelerator)
        assert [r.layers for r in plan.regions] == [["c0", "c1"]]
        assert (plan.packs[0].packed_bytes, plan.unpacks[0].packed_bytes) == packed


def test_a_target_without_an_accelerator_gives_an_all_host_plan():
    settings, accelerator = load_target(TARGETS / "tf2ir.yaml")
    assert accelerator is None
    plan = partition(ir_of(*residual_block()), accelerator, settings["name"])
    assert {(g.target, g.layout, g.reason) for g in plan.groups} == {(HOST, "host", "target tf2ir has no accelerator")}
    metrics = plan.metrics()
    assert (metrics["regions"], metrics["pack_count"], metrics["unpack_count"], metrics["mac_share_accel"]) == (0, 0, 0, 0.0)


def test_the_stage_reads_the_accelerator_from_a_mapping_a_dictconfig_or_attributes():
    plain = OmegaConf.to_container(OmegaConf.load(TARGETS / "accel.yaml"))
    assert target_accelerator(plain) == ("accel", BIG)
    assert target_accelerator(OmegaConf.load(TARGETS / "accel.yaml")) == ("accel", BIG)
    as_config = SimpleNamespace(name="accel", accelerator=OmegaConf.load(TARGETS / "accel.yaml").accelerator)
    assert target_accelerator(as_config) == ("accel", BIG)
    assert target_accelerator(SimpleNamespace(name="tf2ir")) == ("tf2ir", None)


def test_a_description_round_trips_through_its_plain_form():
    for accelerator in (BIG, SMALL):
        assert Accelerator.from_mapping(json.loads(json.dumps(accelerator.to_dict())), accelerator.name) == accelerator


def _mutated(change):
    data = json.loads(json.dumps(ACCEL_TARGET))
    change(data["accelerator"])
    return data


@pytest.mark.parametrize("change, message", [
    (lambda a: a.pop("buffers"), r"accelerator\.buffers: missing"),
    (lambda a: a.update(bufers={}), r"accelerator\.bufers: unknown key"),
    (lambda a: a["buffers"].update(weight="256K"), r"accelerator\.buffers\.weight: expected an integer, got '256K'"),
    (lambda a: a["gemm_block"].update(block_out=32), r"accelerator\.gemm_block\.block_out: 32 differs from block_in 16"),
    (lambda a: a.update(layout=["H", "W", "C/8", "8"]), r"accelerator\.layout: .* expected the dimensions H, W, C/16, 16"),
    (lambda a: a["patterns"][0].update(operations=["conv2d"]), r"accelerator\.patterns\[0\]\.operations\[0\]: 'conv2d' is not one of add, avg_pool, concat2, conv, dwconv"),
    (lambda a: a["patterns"][2].update(max_kernel={"height": 3, "width": 3}), r"accelerator\.patterns\[2\]\.max_kernel: does not apply to add"),
    (lambda a: a["patterns"][0]["max_kernel"].pop("width"), r"accelerator\.patterns\[0\]\.max_kernel\.width: missing"),
    (lambda a: a.update(unsupported=["reshape"]), r"accelerator\.unsupported: unknown key"),  # a pattern names what runs there
    (lambda a: a["cycles"].pop("gemm"), r"accelerator\.cycles\.gemm: missing"),
    (lambda a: a.update(shift_range={"min": 9, "max": 3}), r"accelerator\.shift_range: min 9 > max 3"),
    (lambda a: a.pop("memories"), r"accelerator\.memories: missing"),
    (lambda a: a["memories"]["dram"].update(bytes_per_cycle=0), r"accelerator\.memories\.dram\.bytes_per_cycle: 0 is not a number above 0"),
    (lambda a: a["memories"]["dram"].pop("latency"), r"accelerator\.memories\.dram\.latency: missing"),
    (lambda a: a["placement"].update(weights="flash"), r"accelerator\.placement\.weights: 'flash' is not a memory of accelerator\.memories; "
                                                        r"expected one of dram"),
    (lambda a: a["host"].update(cycles_per_mac=-1), r"accelerator\.host\.cycles_per_mac: -1 is not a number of at least 0"),
    (lambda a: a.update(units={"load": ["LOAD"], "compute": ["GEMM", "ALU"], "store": ["STOR"]}),
     r"accelerator\.units\.store\[0\]: 'STOR' is not one of LOAD, STORE, GEMM, ALU"),
    (lambda a: a.update(units={"load": ["LOAD", "STORE"], "compute": ["GEMM", "ALU", "LOAD"]}),
     r"accelerator\.units\.compute: LOAD is run by unit 'load' already"),
    (lambda a: a.update(units={"load": ["LOAD"], "compute": ["GEMM"], "store": ["STORE"]}), r"accelerator\.units: no unit runs ALU"),
    (lambda a: a.update(units={f"u{k}": [] for k in range(5)}), r"accelerator\.units: expected a mapping of 1 to 4 units"),
    (lambda a: a.update(double_buffering="yes"), r"accelerator\.double_buffering: expected true or false"),
])
def test_a_bad_accelerator_description_is_refused_naming_the_key(change, message):
    with pytest.raises(AcceleratorError, match=r"^accel\.yaml: " + message):
        accelerator_of(_mutated(change), origin="accel.yaml")


def test_what_runs_on_the_host_is_declared_once_a_pattern_naming_a_host_only_operation_is_refused(tmp_path):
    """An operation no pattern names runs on the host; one the lowerings declare host-only can be named by no
    pattern: partition refuses such a target, and run.py does before any stage."""
    accelerator = accelerator_of(_mutated(lambda a: a["patterns"].append({"name": "copy", "operations": ["transpose"]})))
    index = len(accelerator.patterns) - 1
    with pytest.raises(LoweringError, match=rf"patterns\[{index}\] \(copy\): transpose cannot run on the accelerator "
                                            r"\(a permutation of axes across the blocked layout is a host copy"):
        partition(ir_of(first_conv()), accelerator)
    completed = subprocess.run([sys.executable, "run.py", "target=accel", "target.accelerator.patterns=[{name: copy, operations: [transpose]}]",
                                f"store.url={tmp_path / 'store'}"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2 and "transpose cannot run on the accelerator" in completed.stderr, completed.stderr[-2000:]
    assert not (tmp_path / "store").exists()


def test_a_target_with_an_accelerator_needs_a_scheme_its_lowerings_cover_and_patterns_its_records_can_meet():
    with pytest.raises(AcceleratorError, match="scheme='int4': an accelerator runs pow2_symmetric or tflite_int8"):
        accelerator_of({**ACCEL_TARGET, "scheme": "int4"})
    # accel's patterns constrain TF2IR's activation_type; a tflite_int8 layer clamps to output_min/output_max instead
    with pytest.raises(AcceleratorError, match=r"accelerator\.patterns\[0\]\.activations: does not apply to conv"):
        accelerator_of({**ACCEL_TARGET, "scheme": "tflite_int8"})


# --- the real networks ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_irs(tmp_path_factory, model_cache):
    """The mbv1 and SSD IRs emitted by the pipeline (QAT ranges)."""
    root = tmp_path_factory.mktemp("partition")
    images = root / "images"
    images.mkdir()
    shutil.copy(MODELS / "mobilenet_v2_ssd_0.25_160" / "test.jpg", images)
    workspace = [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root),
                 "calib.method=qat", "until=emit_ir"]
    quiet = Console(file=open(os.devnull, "w"))
    directories = {}
    for net, overrides in (("mbv1", ["model=mbv1_cifar10", f"data.path={CIFAR10_DIR}", "calib.num_images=32"]),
                           ("ssd", ["model=ssd_mbv2", f"data.path={images}"])):
        summary = run_pipeline(compose(*overrides, *workspace), console=quiet)
        directories[net] = next(result.artifact.directory for result in summary.results if result.stage.name == "emit_ir")
    return directories


def _stage(ir_directory: Path, target: dict, out_dir: Path) -> dict:
    out_dir.mkdir()
    logged = []
    metrics = run_stage(SimpleNamespace(target=target, pictures=True), {"emit_ir": ir_directory}, out_dir,
                        SimpleNamespace(log=logged.append, progress=lambda done, total: None))
    assert logged and logged[0].startswith(f"target {target['name']}: ")
    return metrics


def test_mobilenet_v1_runs_entirely_on_the_accelerator_in_one_function(real_irs, tmp_path):
    metrics = _stage(real_irs["mbv1"], ACCEL_TARGET, tmp_path / "out")
    assert (metrics["layers"], metrics["layers_accel"], metrics["regions"], metrics["pack_count"], metrics["unpack_count"]) == (29, 29, 1, 1, 1)
    assert metrics["boundary_bytes"] == 128 * 128 * 3 + 10  # the image in, the logits out
    plan = json.loads((tmp_path / "out" / PLAN_FILE).read_text())
    assert [(p["tensor"], p["readers"]) for p in plan["pack"]] == [(NETWORK_INPUT, ["MobilenetV1_Conv_0_Conv2D_Fold"])]
    assert [(p["tensor"], p["readers"]) for p in plan["unpack"]] == [("MobilenetV1_Dense_Conv2D_Fold", [END_POINT])]
    assert plan["metrics"] == metrics and (tmp_path / "out" / PICTURE_FILE).stat().st_size > 10000


def test_ssd_keeps_its_reshapes_on_the_host_and_nearly_all_macs_on_the_accelerator(real_irs, tmp_path):
    metrics = _stage(real_irs["ssd"], ACCEL_TARGET, tmp_path / "accel")
    assert metrics["mac_share_accel"] > 0.99 and (metrics["layers_accel"], metrics["layers_host"]) == (83, 12)
    assert (metrics["regions"], metrics["pack_count"], metrics["unpack_count"]) == (1, 1, 12)
    plan = json.loads((tmp_path / "accel" / PLAN_FILE).read_text())
    assert {(g["operation"], g["target"]) for g in plan["groups"]} == {("conv", ACCEL), ("dwconv", ACCEL), ("add", ACCEL), ("reshape", HOST)}
    assert all(len(p["readers"]) == 1 and p["readers"][0].startswith("BoxPredictor_") for p in plan["unpack"])
    report = json.loads((tmp_path / "accel" / "report.json").read_text())
    assert {entry["reason"] for entry in report["host_layers"]} == {"no pattern of accel names reshape"}
    # the small accelerator has no add: its 11 residual adds run on the host on packed data, and
    # split the network into 12 functions with not one pack or unpack more
    small = _stage(real_irs["ssd"], SMALL_TARGET, tmp_path / "small")
    assert (small["regions"], small["host_layers_on_packed_data"], small["pack_count"], small["unpack_count"]) == (12, 11, 1, 12)
    assert small["boundary_bytes"] == metrics["boundary_bytes"] and small["mac_share_accel"] == 1.0
    # and a target without an accelerator: the honest all-host plan
    host = _stage(real_irs["ssd"], {"name": "tf2ir"}, tmp_path / "host")
    assert (host["layers_host"], host["regions"], host["pack_count"], host["mac_share_accel"]) == (95, 0, 0, 0.0)
    assert read_ir(real_irs["ssd"]).layers[0].previous_layer == (NETWORK_INPUT,)
