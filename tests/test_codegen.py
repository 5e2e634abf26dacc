"""codegen: the C99 each op emits (core/backends/c/ops/), the program core/backends/program.py
assembles, and the codegen stage, each against the integer kernels the simulator runs.

Property tests draw random small layers (shapes, strides, dilations, paddings, channel counts
on both sides of the vector widths, shifts, activations), compile the generated C with the
stage's own command (`cc -O2 -std=c99 -Wall -Werror`) and require the bytes the op's kernel
computes. Then the real mbv1_cifar10 IR (QAT ranges) end to end, the default digits model
through the stage as the pipeline runs it, and a compiler error surfacing as a stage failure."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import CIFAR10_DIR, MBV1_GRAPH, MODELS, compose, ir_record, tracking_override
from harness import (PORTABLE, check_layer, hw, int8, missing_cpu_flags, one_layer_ir, run_on_simd_paths, skip_unless_the_cpu_runs_a_simd_path)
from core.backends.c.build import CompileError, compile_program, run_program
from core.backends.c.program import c_array, c_symbols, decimal_texts
from core.backends.program import generate_c
from core.ir.io import read_ir
from core.ir.network import Ir
from core.ir.op import END_POINT, NETWORK_INPUT
from core.backends.c.ops import C_EMITTERS
from core.backends.c.ops.conv import C_DOT_MIN_K
from core.ir.fixedpoint import INT32_MAX
from core.ir.ops import OPS
from core.ir.ops.resize.record import RESIZE_FRAC_BITS
from core.ir.fixedpoint import quantize
from core.ir.simulator import IntegerSimulator
from pipeline.stages import stage_named

# each example compiles and runs a program: `make test` draws 12 geometries per property, a soak more (QT_C_EXAMPLES=200)
LAYERS = settings(max_examples=int(os.environ.get("QT_C_EXAMPLES", "12")), deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
IMAGES = 3  # per example, in one run of the binary
QUIET = Console(file=open(os.devnull, "w"))
MBV1_END = "MobilenetV1/Dense/act_quant/FakeQuantWithMinMaxVars:0"
MBV1_PREPROCESS = {"size": [128, 128], "channels": 3, "resize": "tf_bilinear", "scale": 127.5, "offset": -1.0}


@st.composite
def conv_layers(draw, depthwise: bool):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if sh == sw == 1 else (1, 1)
    h, w = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    ci = draw(st.integers(1, 40))
    co = ci if depthwise else draw(st.integers(1, 40))
    extent_h, extent_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    top, bottom = draw(st.integers(0, extent_h - 1)), draw(st.integers(0, extent_h - 1))
    left, right = draw(st.integers(0, extent_w - 1)), draw(st.integers(0, extent_w - 1))
    assume(h + top + bottom >= extent_h and w + left + right >= extent_w)
    oh, ow = (h + top + bottom - extent_h) // sh + 1, (w + left + right - extent_w) // sw + 1
    input_log2scale, weight_log2scale = draw(st.integers(0, 7)), draw(st.integers(0, 8))
    shift = draw(st.one_of(st.integers(0, 14), st.just(31)))
    load_bias = draw(st.booleans())
    bias_shift = draw(st.one_of(st.integers(0, 12), st.integers(20, 26))) if load_bias else 0
    fields = {
        "operation": "dwconv" if depthwise else "conv",
        "activation_type": draw(st.sampled_from(["Relu6", "Relu", "None"])),
        "input_log2scale": input_log2scale, "weight_log2scale": weight_log2scale,
        "bias_log2scale": input_log2scale + weight_log2scale - bias_shift if load_bias else 0,
        "output_log2scale": input_log2scale + weight_log2scale - shift,
        "output_shift": shift, "bias_shift": bias_shift, "load_bias": load_bias,
        "input_channel_num": ci, "output_channel_num": co, "input_size": hw(h, w), "output_size": hw(oh, ow),
        "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
        "stride": hw(sh, sw), "dilations": hw(dh, dw), "kernel_size": hw(kh, kw),
        "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "int8", "bias_dtype": "int8",
    }
    return fields, draw(st.integers(0, 2**32 - 1))


def conv_case(case) -> tuple[dict, dict, np.ndarray]:
    """A drawn conv layer's fields, random int8 weights (and bias) and IMAGES input images."""
    fields, seed = case
    rng = np.random.default_rng(seed)
    kernel, ci, co = fields["kernel_size"], fields["input_channel_num"], fields["output_channel_num"]
    params = {"weight": int8(rng, (kernel["height"], kernel["width"], ci, co))}
    if fields["load_bias"]:
        params["bias"] = int8(rng, (co,))
    size = fields["input_size"]
    return fields, params, int8(rng, (IMAGES, size["height"], size["width"], ci))


@LAYERS
@given(conv_layers(depthwise=False))
def test_conv_c_is_the_kernel_bit_for_bit(tmp_path, case):
    fields, params, images = conv_case(case)
    check_layer(fields, params, [images], tmp_path)


@LAYERS
@given(conv_layers(depthwise=True))
def test_dwconv_c_is_the_kernel_bit_for_bit(tmp_path, case):
    fields, seed = case
    rng = np.random.default_rng(seed)
    kernel, c = fields["kernel_size"], fields["input_channel_num"]
    params = {"weight": int8(rng, (kernel["height"], kernel["width"], c))}
    if fields["load_bias"]:
        params["bias"] = int8(rng, (c,))
    size = fields["input_size"]
    check_layer(fields, params, [int8(rng, (IMAGES, size["height"], size["width"], c))], tmp_path)


@LAYERS
@given(conv_layers(depthwise=False))
def test_every_simd_path_of_conv_is_the_portable_c_bit_for_bit(tmp_path, case):
    """AVX2 and AVX-512 VNNI microkernels (qt_gemm.h) against the portable C99 and the kernel: every
    geometry of the property test above (1x1 direct and im2col, K and Co off the block sizes)."""
    fields, params, images = conv_case(case)
    ir = one_layer_ir(fields, params)
    assume(ir.layers[0].accumulator_bound() <= INT32_MAX)  # beyond it every build sums in int64, one path
    expected = OPS["conv"].kernel(ir.layers[0], params, [images])
    outputs = run_on_simd_paths(ir, images, tmp_path)
    for path, output in outputs.items():
        np.testing.assert_array_equal(output.reshape(expected.shape), expected, err_msg=f"path {path}")
    skip_unless_the_cpu_runs_a_simd_path()


def test_simd_sums_that_leave_int32_only_in_their_bias_are_exact(tmp_path):
    """VNNI multiplies x + 128: a dense layer of 100000 inputs at the accumulator bound sums to
    ~3.2e9 in that form, past int32, while its true sums (~1.6e9) fit: the wrapped int32 vector
    sums and the offset's - 128 * sum(w) must give the exact integers (all 127, all -128, random)."""
    k, rng = 100_000, np.random.default_rng(7)
    fields = {"operation": "conv", "activation_type": "None", "input_log2scale": 0, "weight_log2scale": 0,
              "bias_log2scale": 0, "output_log2scale": -24, "output_shift": 24, "bias_shift": 0, "load_bias": True,
              "input_channel_num": k, "output_channel_num": 3, "input_size": hw(1, 1), "output_size": hw(1, 1),
              "padding": {"top": 0, "bottom": 0, "left": 0, "right": 0}, "stride": hw(1, 1), "dilations": hw(1, 1),
              "kernel_size": hw(1, 1), "input_dtype": "int8", "output_dtype": "int8", "weight_dtype": "int8", "bias_dtype": "int8"}
    weight = np.stack([np.full(k, 127), np.full(k, -128), rng.integers(-128, 128, k)], axis=1).astype(np.int8)
    params = {"weight": weight.reshape(1, 1, k, 3), "bias": np.array([-128, 127, 5], np.int8)}
    ir = one_layer_ir(fields, params)
    assert ir.layers[0].accumulator_bound() <= INT32_MAX < k * 255 * 127  # int32 sums; the biased ones would not fit
    images = np.stack([np.full(k, 127), np.full(k, -128), rng.integers(-128, 128, k)]).astype(np.int8).reshape(3, 1, 1, k)
    expected = OPS["conv"].kernel(ir.layers[0], params, [images])
    assert len(np.unique(expected)) > 2  # not all clamped
    for path, output in run_on_simd_paths(ir, images, tmp_path).items():
        np.testing.assert_array_equal(output.reshape(expected.shape), expected, err_msg=f"path {path}")
    skip_unless_the_cpu_runs_a_simd_path()


FLOAT_DROPPED = ("weight_log2scale", "bias_log2scale", "output_shift", "bias_shift")


@LAYERS
@given(conv_layers(depthwise=False) | conv_layers(depthwise=True), st.floats(0.05, 3.0))
def test_float_conv_and_dwconv_c_are_the_kernel_bit_for_bit(tmp_path, case, spread):
    """A layer kept in float: float32 weights and bias, the sums in the kernel's order (calib.keep_float)."""
    fields, seed = case
    depthwise = fields["operation"] == "dwconv"
    fields = {key: value for key, value in fields.items() if key not in FLOAT_DROPPED}
    fields.update(operation="float_dwconv" if depthwise else "float_conv", weight_dtype="float32", bias_dtype="float32")
    rng = np.random.default_rng(seed)
    kernel, ci, co = fields["kernel_size"], fields["input_channel_num"], fields["output_channel_num"]
    shape = (kernel["height"], kernel["width"], ci) if depthwise else (kernel["height"], kernel["width"], ci, co)
    params = {"weight": (rng.normal(0.0, spread, shape) * 2.0**-fields["input_log2scale"]).astype(np.float32)}
    if fields["load_bias"]:
        params["bias"] = rng.normal(0.0, spread, (co,)).astype(np.float32)
    fields["output_log2scale"] = int(rng.integers(-2, 6))
    size = fields["input_size"]
    check_layer(fields, params, [int8(rng, (IMAGES, size["height"], size["width"], ci))], tmp_path)


def _conv_record(kernel: int, channels: int, bias_shift: int):
    fields = {"activation_type": "None", "input_log2scale": 0, "weight_log2scale": 8, "bias_log2scale": 8 - bias_shift,
              "output_log2scale": 0, "output_shift": 8, "bias_shift": bias_shift, "load_bias": True, "input_channel_num": channels,
              "output_channel_num": 1, "input_size": hw(kernel, kernel), "output_size": hw(1, 1),
              "padding": {"top": 0, "bottom": 0, "left": 0, "right": 0}, "stride": hw(1, 1), "dilations": hw(1, 1),
              "kernel_size": hw(kernel, kernel)}
    return ir_record("conv", fields)


def test_the_conv_forms_cover_both_gemms_and_int64():
    """The property tests' ranges reach every code path of the conv emitter."""
    assert 3 * 3 * 40 >= C_DOT_MIN_K > 3 * 3 * 3  # dot and broadcast forms
    assert _conv_record(3, 1, bias_shift=26).accumulator_bound() > INT32_MAX >= _conv_record(4, 40, bias_shift=4).accumulator_bound()


@st.composite
def pool_layers(draw, operation: str):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w, c = draw(st.integers(1, 10)), draw(st.integers(1, 10)), draw(st.integers(1, 40))
    top, bottom = draw(st.integers(0, kh - 1)), draw(st.integers(0, kh - 1))
    left, right = draw(st.integers(0, kw - 1)), draw(st.integers(0, kw - 1))
    assume(h + top + bottom >= kh and w + left + right >= kw)
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    input_log2scale = draw(st.integers(3, 8))
    fields = {
        "operation": operation, "input_channel_num": c, "input_size": hw(h, w), "input_log2scale": input_log2scale,
        "input_dtype": "int8", "kernel_size": hw(kh, kw), "stride": hw(sh, sw),
        "padding": {"top": top, "bottom": bottom, "left": left, "right": right},
        "output_channel_num": c, "output_size": hw(oh, ow), "output_dtype": "int8", "dtype": "int8",
    }
    if operation == "avg_pool":
        fields["input_pre_ls"] = draw(st.integers(0, 5))
        fields["output_log2scale"] = input_log2scale + fields["input_pre_ls"]
    else:
        fields["output_log2scale"] = input_log2scale - draw(st.integers(-3, 3))
    return fields, draw(st.integers(0, 2**32 - 1))


@LAYERS
@given(pool_layers("avg_pool"))
def test_avg_pool_c_is_the_kernel_bit_for_bit(tmp_path, case):
    fields, seed = case
    size = fields["input_size"]
    check_layer(fields, {}, [int8(np.random.default_rng(seed), (IMAGES, size["height"], size["width"], fields["input_channel_num"]))], tmp_path)


@LAYERS
@given(pool_layers("max_pool"))
def test_max_pool_c_is_the_kernel_bit_for_bit(tmp_path, case):
    fields, seed = case
    size = fields["input_size"]
    check_layer(fields, {}, [int8(np.random.default_rng(seed), (IMAGES, size["height"], size["width"], fields["input_channel_num"]))], tmp_path)


@LAYERS
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 40), pl=st.integers(0, 8), add=st.integers(0, 8),
       output_shift_bit=st.integers(-8, 8), activation=st.sampled_from(["Relu6", "Relu", "None"]), seed=st.integers(0, 2**32 - 1))
def test_add_c_is_the_kernel_bit_for_bit(tmp_path, h, w, c, pl, add, output_shift_bit, activation, seed):
    out = min(pl, add) + output_shift_bit
    fields = {"operation": "add", "activation_type": activation, "input_channel_num": c, "input_size": hw(h, w),
              "size": h * w * c, "dtype": "int8", "pl_log2scale": pl, "pl_shiftbit": pl, "add_log2scale": add,
              "add_shiftbit": add, "output_log2scale": out, "output_shift_bit": output_shift_bit, "pl_name": NETWORK_INPUT,
              "add_name": NETWORK_INPUT}
    rng = np.random.default_rng(seed)
    check_layer(fields, {}, [int8(rng, (IMAGES, h, w, c)), int8(rng, (IMAGES, h, w, c))], tmp_path)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dim=st.sampled_from("HWC"), h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 20), extra=st.integers(1, 6),
       shifts=st.tuples(st.integers(-3, 3), st.integers(-3, 3)), seed=st.integers(0, 2**32 - 1))
def test_concat2_c_is_the_kernel_bit_for_bit(tmp_path, dim, h, w, c, extra, shifts, seed):
    second = {"H": (extra, w, c), "W": (h, extra, c), "C": (h, w, extra)}[dim]
    out = (h + extra if dim == "H" else h, w + extra if dim == "W" else w, c + extra if dim == "C" else c)
    fields = {"operation": "concat2", "dim": dim, "output_channel_num": out[2], "output_size": hw(*out[:2]), "output_log2scale": 5,
              "output_dtype": "int8"}
    for number, shape in enumerate([(h, w, c), second]):
        fields.update({f"input{number}_channel_num": shape[2], f"input{number}_size": hw(*shape[:2]),
                       f"input{number}_log2scale": 5 + shifts[number], f"input{number}_dtype": "int8"})
    rng = np.random.default_rng(seed)
    check_layer(fields, {}, [int8(rng, (IMAGES, h, w, c)), int8(rng, (IMAGES, *second))], tmp_path)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.tuples(st.integers(1, 7), st.integers(1, 7)), out=st.tuples(st.integers(1, 12), st.integers(1, 12)),
       c=st.integers(1, 20), mode=st.sampled_from(["align_corners", "half_pixel_centers", "neither"]),
       scales=st.tuples(st.integers(2, 7), st.integers(-2, 3)), seed=st.integers(0, 2**32 - 1))
def test_resize_bilinear_c_is_the_kernel_bit_for_bit(tmp_path, size, out, c, mode, scales, seed):
    fields = {"operation": "resize_bilinear", "dtype": "int8", "align_corners": mode == "align_corners",
              "input_log2scale": scales[0], "output_log2scale": scales[0] + scales[1], "input_channel_num": c,
              "input_size": hw(*size), "output_size": hw(*out)}
    if mode == "half_pixel_centers":
        fields["half_pixel_centers"] = True
    assert 0 <= 2 * RESIZE_FRAC_BITS - scales[1] <= 31
    check_layer(fields, {}, [int8(np.random.default_rng(seed), (IMAGES, *size, c))], tmp_path)


def test_reshape_c_copies_the_bytes(tmp_path):
    fields = {"operation": "reshape", "reshape_param": [-1, 2], "input_shape": [3, 4, 6], "output_shape": [36, 2],
              "dtype": "int8", "log2scale": 3}
    check_layer(fields, {}, [int8(np.random.default_rng(0), (IMAGES, 3, 4, 6))], tmp_path)


def test_a_network_without_conv_builds_on_every_simd_path(tmp_path):
    """The microkernels a SIMD build brings in go unused: still warning-free under -Werror."""
    fields = {"operation": "reshape", "reshape_param": [-1, 2], "input_shape": [3, 4, 6], "output_shape": [36, 2],
              "dtype": "int8", "log2scale": 3}
    images = int8(np.random.default_rng(0), (IMAGES, 3, 4, 6))
    for path, output in run_on_simd_paths(one_layer_ir(fields, {}), images, tmp_path).items():
        assert np.array_equal(output.reshape(IMAGES, -1), images.reshape(IMAGES, -1)), path


# --- the program ------------------------------------------------------------------------------


def test_symbols_are_c_identifiers_unique_and_the_source_byte_stable():
    layers = [{"name": name, "operation": "reshape", "reshape_param": [4], "input_shape": [2, 2, 1], "output_shape": [4],
               "dtype": "int8", "log2scale": 0, "previous_layer": [NETWORK_INPUT], "next_layer": [END_POINT]}
              for name in ("a/b", "a_b", "a-b")]
    ir = Ir.from_json(layers, {})
    symbols = c_symbols(ir)
    # "a_b"'s symbol extends "a/b"'s by "_": its helpers could be named like it (layer_a_b_2 is a/b's helper "_2")
    assert list(symbols.values()) == ["layer_a_b", "layer1_a_b_2", "layer2_a_b_3"]
    assert generate_c(ir).source == generate_c(Ir.from_json([dict(layer) for layer in layers], {})).source
    assert c_array("x", np.array([-128, 0, 127], np.int8)) == "static const int8_t x[3] = {\n    -128,0,127\n};\n"


def test_no_symbol_begins_with_another_symbol_and_an_underscore():
    """An emitter's helpers are `<symbol>_<what>`: a layer named like another's helper (the .tflite writer's
    `conv_padded` beside a conv's `layer_conv_padded` buffer) gets a symbol no helper can take."""
    layers = [{"name": name, "operation": "reshape", "reshape_param": [4], "input_shape": [2, 2, 1], "output_shape": [4],
               "dtype": "int8", "log2scale": 0, "previous_layer": [NETWORK_INPUT], "next_layer": [END_POINT]}
              for name in ("conv", "conv_padded", "conv_padded_x", "other")]
    symbols = list(c_symbols(Ir.from_json(layers, {})).values())
    assert len(set(symbols)) == len(symbols)
    assert not [(a, b) for a in symbols for b in symbols if a != b and b.startswith(a + "_")], symbols


def test_constants_are_written_as_python_writes_every_integer():
    """The table lookup of 8- and 16-bit constants gives str()'s text for every value, in order."""
    rng = np.random.default_rng(7)
    for values in (np.arange(-128, 128, dtype=np.int8)[::-1], np.arange(-32768, 32768, dtype=np.int16)[rng.permutation(65536)],
                   np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32), rng.integers(-2**31, 2**31, 1000).astype(np.int32)):
        assert decimal_texts(values) == [str(int(value)) for value in values]


@pytest.fixture(scope="module")
def mbv1_ir() -> Ir:
    """The real mbv1_cifar10 IR with its own QAT ranges (calib.method=qat), as emit_ir builds it."""
    from core.quantize.calibration.methods import CalibrationSettings
    from core.quantize.calibration.build import TargetSpec, build_calibration_table
    from core.quantize.schemes import Pow2Symmetric
    from core.frontend.constant_folding import fold_constants
    from core.frontend.folding import fold_batch_norms
    from core.frontend.importer import import_graph, load_graph_def
    from core.ir.emit import build_ir
    from core.frontend.fake_quant import bypass_fake_quant
    from core.ir.layers import group_layers

    loaded = load_graph_def("frozen_graph", MBV1_GRAPH)
    qat = import_graph(loaded.graph_def, "images:0", [MBV1_END], origin=str(MBV1_GRAPH), source={})
    float_graph, ranges = bypass_fake_quant(fold_batch_norms(fold_constants(qat)).graph)
    layer_graph = group_layers(float_graph)
    table = build_calibration_table(layer_graph, "qat", TargetSpec("tf2ir", Pow2Symmetric(input_log2scale=7)), CalibrationSettings(), None, ranges)
    return build_ir(layer_graph, table)


def test_mbv1_in_c_is_bit_identical_to_the_simulator(mbv1_ir, tmp_path):
    from core.data.datasets import load_image, load_split, preprocess

    ship = preprocess(load_image(MODELS / "mobilenet_v1_0.5_128_cifar10" / "ship.png", 3)[np.newaxis], MBV1_PREPROCESS)
    cifar = load_split("cifar10", CIFAR10_DIR, "test_batch", MBV1_PREPROCESS, limit=20).images
    images = quantize(np.concatenate([ship, cifar]), mbv1_ir.input_log2scale)
    expected = IntegerSimulator(mbv1_ir).run_int8(images)
    program = generate_c(mbv1_ir)
    path = program.write(tmp_path)
    (end_point,) = program.end_points
    # the build the stage runs by default (SIMD clones where the compiler offers them) and the plain C99 one
    for defines in ((), PORTABLE):
        binary = compile_program(path, tmp_path / f"network{len(defines)}", defines=defines)
        result = run_program(binary, program, images, tmp_path / "run")
        assert np.array_equal(result.outputs[end_point], expected[end_point]), defines
    # each SIMD path's microkernels on the real network
    for simd, output in run_on_simd_paths(mbv1_ir, images, tmp_path / "simd").items():
        assert np.array_equal(output, expected[end_point]), simd
    assert program.constant_bytes == sum(a.size for arrays in mbv1_ir.params.values() for a in arrays.values())
    assert generate_c(mbv1_ir).source == program.source  # byte-stable


def test_a_dump_build_writes_every_layer(mbv1_ir, tmp_path):
    program = generate_c(mbv1_ir)
    binary = compile_program(program.write(tmp_path), defines=("QT_DUMP_LAYERS", "QT_PORTABLE"))
    images = np.random.default_rng(1).integers(-128, 128, (2, *program.input_shape)).astype(np.int8)
    result = run_program(binary, program, images, tmp_path / "run", dump=True)
    expected = IntegerSimulator(mbv1_ir).run_int8(images, keep_all=True)
    for layer in mbv1_ir.layers:
        assert np.array_equal(result.layers[layer.name], expected[layer.name]), layer.name


# --- the stage --------------------------------------------------------------------------------


class _Display:
    def start(self, stage, key): ...
    def progress(self, stage, done, total): ...
    def finish(self, stage, result): ...
    def log(self, stage, message): ...


@pytest.fixture(scope="module")
def digits_ir(tmp_path_factory, model_cache):
    """The default model (digits) through the pipeline up to emit_ir: (config, emit_ir artifact)."""
    from pipeline.main import run_pipeline

    root = tmp_path_factory.mktemp("digits")
    overrides = [f"store.url={root / 'store'}", f"store.cache_dir={model_cache}", tracking_override(root)]
    summary = run_pipeline(compose(*overrides, "until=partition"), console=QUIET)
    artifacts = {result.stage.name: result.artifact for result in summary.results}
    return compose(*overrides), artifacts["emit_ir"], artifacts["partition"]


def _run_codegen(cfg, emit_ir, partition, store_url: str | None = None, cflags: list[str] | None = None):
    from pipeline.runner import Runner
    from pipeline.store import ArtifactStore, RunLease

    if cflags is not None:
        cfg = dataclasses.replace(cfg, codegen=dataclasses.replace(cfg.codegen, cflags=cflags))
    store = ArtifactStore(store_url or cfg.store.url, local_cache=Path(cfg.store.cache_dir))
    lease = RunLease(store, origin="test")
    try:
        return Runner(cfg, store, _Display(), lease).run_stage(stage_named("codegen"), {"emit_ir": emit_ir, "partition": partition})
    finally:
        lease.close({})


def test_digits_through_the_codegen_stage(digits_ir):
    cfg, emit_ir, partition = digits_ir
    result = _run_codegen(cfg, emit_ir, partition)
    metrics = result.metrics
    assert metrics["bitexact"] == 1.0 and metrics["images"] == 101
    assert metrics["latency_ms_per_image"] > 0 and metrics["c_source_bytes"] > 0
    assert metrics["constant_bytes"] == sum(a.size for arrays in read_ir(emit_ir.directory).params.values() for a in arrays.values())
    assert (result.artifact.directory / "program.c").is_file() and (result.artifact.directory / "qt_runtime.h").is_file()
    assert (result.artifact.directory / "report.json").is_file()
    assert _run_codegen(cfg, emit_ir, partition).reused
    assert metrics["int8_simd"] == 0  # the default flags: a program for any x86-64


def test_codegen_cflags_build_for_this_host_with_its_simd_microkernels(digits_ir):
    """codegen.cflags=[-O3, -march=native]: another stage key (not the default's artifact), the same
    bytes, the compiler command in the report and the microkernels the build took in the metrics."""
    cfg, emit_ir, partition = digits_ir
    result = _run_codegen(cfg, emit_ir, partition, cflags=["-O3", "-march=native"])
    assert not result.reused and result.metrics["bitexact"] == 1.0
    report = json.loads((result.artifact.directory / "report.json").read_text())
    assert report["compiler"][:3] == ["cc", "-O3", "-march=native"]
    expected = 2 if not missing_cpu_flags(2) else 1 if not missing_cpu_flags(1) else 0
    assert result.metrics["int8_simd"] == expected


def test_a_compiler_error_fails_the_stage_with_the_compilers_message(digits_ir, monkeypatch, tmp_path):
    from pipeline.runner import StageFailed

    cfg, emit_ir, partition = digits_ir
    conv = C_EMITTERS["conv"]
    broken = lambda record, symbol: conv(record, symbol) + f"static int {symbol}_broken = ;\n"  # noqa: E731
    monkeypatch.setitem(C_EMITTERS, "conv", broken)
    with pytest.raises(StageFailed, match=r"(?s)stage codegen failed: cc -O2 -std=c99 -Wall -Werror .*program\.c:\d+:\d+: error: expected"):
        _run_codegen(cfg, emit_ir, partition, store_url=str(tmp_path / "store"))
    with pytest.raises(CompileError, match="error: expected"):
        compile_program(generate_c(read_ir(emit_ir.directory)).write(tmp_path / "direct"))


def test_a_wrong_layer_fails_the_stage_naming_the_first_layer_that_differs(digits_ir, monkeypatch, tmp_path):
    from pipeline.runner import StageFailed

    cfg, emit_ir, partition = digits_ir
    dwconv = C_EMITTERS["dwconv"]
    first = next(layer.name for layer in read_ir(emit_ir.directory).layers if layer.operation == "dwconv")

    def off_by_one(record, symbol):  # every sum one product's worth too large
        return dwconv(record, symbol).replace("acc[i] += (int16_t)(x[i] * w[i]);", "acc[i] += (int16_t)(x[i] * w[i]) + 1;")

    monkeypatch.setitem(C_EMITTERS, "dwconv", off_by_one)
    with pytest.raises(StageFailed, match=rf"differs from the integer simulator on \d+ of 101 images; on the IR's test image: layer {first} \(dwconv\)"):
        _run_codegen(cfg, emit_ir, partition, store_url=str(tmp_path / "store"))


def _processes_naming(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:  # a process that ended while listed
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="lists processes through Linux's /proc")
def test_the_compiler_dies_with_a_codegen_killed_outright(tmp_path):
    """Round 4: one orphan cc was alive a second after codegen's SIGKILL. A SIGKILL cannot be caught: the compiler is
    started to die with the process that started it. A compiler that sleeps stands in for a long build."""
    marker = f"quanttool-compiler-{uuid.uuid4().hex}"
    (program := tmp_path / "program.c").write_text("int main(void) { return 0; }\n")
    # the marker reaches the compiler's command line through the environment, so that only the compiler's names it
    script = ("import os, sys; from pathlib import Path; from core.backends.c.build import compile_program; "
              f"compile_program(Path({str(program)!r}), compiler=(sys.executable, '-c', 'import time; time.sleep(120)', os.environ['MARKER']))")
    stage = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parent.parent, env={**os.environ, "MARKER": marker})
    deadline = time.monotonic() + 60
    while not _processes_naming(marker):
        assert stage.poll() is None and time.monotonic() < deadline, "the stand-in compiler never started"
        time.sleep(0.05)
    stage.send_signal(signal.SIGKILL)
    stage.wait(timeout=30)
    deadline = time.monotonic() + 5
    while _processes_naming(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_naming(marker), "the compiler outlived the process that started it"
